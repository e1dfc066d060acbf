// Package dataplane is the provider's per-operation path: post_send,
// post_recv, post_srq_recv, poll_cq and req_notify_cq, written in C (cgo) so
// that libibverbs applications never enter Go on these calls
// (docs/DESIGN.md decision 1).
//
// The C engine (engine.h) serves two callers: the thin Go API of this
// package (one cgo call per batch) and the libibverbs ops table in cshim/,
// which points its data-path ops straight at the usb4v_* C functions. Four
// backends sit behind the same entry points:
//
//   - rxe: Soft-RoCE SQ/RQ/SRQ/CQ rings mapped from the kernel, WQEs written
//     in place, a zero-WR POST_SEND as the doorbell;
//   - usb4 kernel commands: POST_SEND/POST_RECV/POLL_CQ/REQ_NOTIFY_CQ write
//     commands, encoded as the uverbs core decodes them;
//   - usb4 mapped CQ ring (ABI 2), taken when create_cq's response offers it
//     and the header validates, else kernel-command polling;
//   - usb4 DV send queues (v2), taken only when QUERY_CAPS covers what the
//     QP needs (SEND, SEND_IMM, WRITE, WRITE_IMM, FENCE, and READ for RC),
//     the QP has at most one send SGE and no inline data, and its granted
//     max_send_wr fits the kernel's DV queue; else kernel commands. A DV QP
//     never posts through the kernel (both DV module trees answer EBUSY):
//     what its WQEs cannot carry is refused with EOPNOTSUPP. Its send
//     completions come from the DV CQ in posting order, merged with the
//     CQ's other completions; posters hold a per-QP mutex through the KICK.
//     Latency first: a batch that finds the queue idle (every earlier WQE
//     consumed, no signaled one waiting for its CQE) KICKs, so it is
//     transmitted in the poster's system call rather than at the kernel
//     poller's next scan (pleite-gda sleeps 10-15 us between scans). A
//     batch behind outstanding WQEs (a stream) goes without KICK once the
//     engine saw the kernel's poller drain such a batch (the first one is
//     watched on sq_head for up to 20 ms; no poller, and every batch KICKs;
//     a full SQ KICKs too: QP.DVKick, QP.DVKicks).
//     Ownership: the kernel allows one DV queue per QP, and the DV ABI is
//     for applications that produce WQEs themselves (GPU producers attach
//     their queue on the QP's handle). QP.TryDV attaches one now (tests,
//     ibvinfo's probe QP); the shipped provider uses QP.DeferDV, and only
//     with its dv_send setting: the CREATE_QUEUE then waits for the QP's
//     first post_send, and one the kernel answers EBUSY leaves the QP on
//     kernel commands (QP.DVOwner: the application's).
//
// The ibv_qp_ex work-request API (ibv_wr_*, wrex.c) sits on the same
// backends: on rxe its builders write WQEs in place and wr_complete rings one
// doorbell; elsewhere a batch is staged and posted through usb4v_post_send as
// one list. The Go API has it too (QP.EnableWRex, WRStart ... WRComplete),
// and BIND_MW for Go callers (QP.PostBindMW).
//
// Checked against the usb4 double only (internal/usb4double), which plays
// pleite-gda's or hellas-gda-v2's DV side as their sources define it: caps,
// EBUSY on an ordinary post_send to a DV QP, pleite's KICK validation
// (request tail; -ESTALE, -EOVERFLOW with the queue in error), hellas'
// NOP-only KICK, pleite's DV poll worker (SetDVPoller); and on the real
// pleite-gda module in the usb4 bed (vm_test.go, tests/usb4).
//
// The extended poll API (ibv_start_poll / ibv_next_poll / ibv_end_poll) is
// cqex.c: a cursor per ibv_cq_ex that holds the CQ from start to end as
// librxe does, over each backend (rxe ring in place, kernel-command batches
// with a stash that every poller drains first, the rest one poll at a time);
// Cursor is its Go face. CQ.Resize moves an rxe CQ to the kernel's new ring
// with its pollers held off.
//
// Every kernel interaction goes through a syscall seam (struct usb4v_sys) so
// test doubles of the usb4 kernel side can stand in for it.
package dataplane
