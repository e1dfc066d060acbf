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
//   - usb4 DV send queues (v2), with DV and kernel-path send completions
//     merged in posting order.
//
// Every kernel interaction goes through a syscall seam (struct usb4v_sys) so
// test doubles of the usb4 kernel side can stand in for it.
package dataplane
