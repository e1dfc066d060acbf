package usb4double

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wextra -Werror -O2 -I${SRCDIR}/../.. -I${SRCDIR}/../../../../uapi/c
#include "double.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ways to spoil create_cq's mapped-ring offer.
const (
	ShmOK            = C.DBL_SHM_OK
	ShmBadMagic      = C.DBL_SHM_BAD_MAGIC
	ShmBadEntrySize  = C.DBL_SHM_BAD_ENTRY_SIZE
	ShmRingOutside   = C.DBL_SHM_RING_OUTSIDE
	ShmCqeMismatch   = C.DBL_SHM_CQE_MISMATCH
	ShmPreOverflow   = C.DBL_SHM_PRE_OVERFLOW
	ShmRefuseMmap    = C.DBL_SHM_REFUSE_MMAP
	ShmNoOffer       = C.DBL_SHM_NO_OFFER
	SizeofCreateTail = C.sizeof_struct_usb4v_tbv_uresp_create_cq
)

// Double is one fake usb4 device with its kernel state. It lives in C
// memory; Close frees it.
type Double struct{ d *C.struct_dbl }

// New creates an empty double (DV enabled, mapped CQ ring offered).
func New() *Double {
	d := C.dbl_new()
	if d == nil {
		panic("usb4double: out of memory")
	}
	return &Double{d}
}

// Close frees the double. Engine objects using it must be freed first.
func (d *Double) Close() { C.dbl_free(d.d); d.d = nil }

// Sys is the struct usb4v_sys * to hand to the engine.
func (d *Double) Sys() unsafe.Pointer { return unsafe.Pointer(&d.d.sys) }

// SetShmSpoil selects how later create_cq offers are spoiled (Shm*).
func (d *Double) SetShmSpoil(kind int) { d.d.shm_spoil = C.int(kind) }

// SetDV enables or disables the DV ioctl methods (disabled: EPROTONOSUPPORT).
func (d *Double) SetDV(on bool) { d.d.dv_enabled = cbool(on) }

// DV sides of the module trees the double can play (SetDVModel).
const (
	DVPleite      = C.DBL_DV_PLEITE        // pleite-gda: caps V2, every opcode
	DVHellasGDAv2 = C.DBL_DV_HELLAS_GDA_V2 // hellas-gda-v2: caps 0, NOP only
)

// SetDVModel selects which tree's DV answers the double gives (DV*).
func (d *Double) SetDVModel(model int) { d.d.dv_model = C.int(model) }

// SetDVCaps replaces the caps the pleite model answers in QUERY_CAPS
// (default USB4_RDMA_DV_CAPS_V2), to play a kernel that offers fewer.
func (d *Double) SetDVCaps(caps uint32) { d.d.dv_caps = C.uint32_t(caps) }

// SpoilDVCQTail makes the kernel side publish a DV cq_tail ahead more CQEs
// than the DV CQ of QP handle qp can hold, as a buggy kernel would.
func (d *Double) SpoilDVCQTail(qp, ahead uint32) {
	C.dbl_spoil_dv_cq_tail(d.d, C.uint32_t(qp), C.uint32_t(ahead))
}

// SetKickEntryDelay makes every KICK sleep ns nanoseconds before the
// double handles it, as a real ioctl takes time to reach the driver.
func (d *Double) SetKickEntryDelay(ns int) { d.d.kick_entry_delay_ns = C.long(ns) }

// SetBadGenerationResponse makes CREATE_QUEUE answer a generation that does
// not match the doorbell page.
func (d *Double) SetBadGenerationResponse(on bool) { d.d.dv_bad_gen_resp = cbool(on) }

// StaleNextWQE makes the next drained DV WQE fail its generation check.
func (d *Double) StaleNextWQE() { d.d.dv_stale_next = 1 }

// SetDVPoller starts or stops the kernel's DV poll worker, which drains
// every DV queue up to its producer tail without a KICK (pleite-gda's
// tbv_dv_poll_thread). Stop it before freeing engine objects.
func (d *Double) SetDVPoller(on bool) error {
	if rc := C.dbl_set_dv_poller(d.d, cbool(on)); rc != 0 {
		return fmt.Errorf("double DV poller: %w", unix.Errno(rc))
	}
	return nil
}

// Counters of kernel crossings.
func (d *Double) Writes() uint64 { return uint64(d.d.writes) }
func (d *Double) Ioctls() uint64 { return uint64(d.d.ioctls) }
func (d *Double) Kicks() uint64  { return uint64(d.d.kicks) }

// KickErrors counts KICKs the double answered with an error.
func (d *Double) KickErrors() uint64 { return uint64(d.d.kick_errors) }

// PostSendBusy counts ordinary post_sends refused with EBUSY because the QP
// has a DV queue.
func (d *Double) PostSendBusy() uint64 { return uint64(d.d.post_send_busy) }

// RegMR registers memory with access flags (IBV_ACCESS_*).
func (d *Double) RegMR(addr unsafe.Pointer, length int, access uint32) (lkey, rkey uint32, err error) {
	var l, r C.uint32_t
	if rc := C.dbl_reg_mr(d.d, C.uint64_t(uintptr(addr)), C.uint64_t(length), C.uint32_t(access), &l, &r); rc < 0 {
		return 0, 0, fmt.Errorf("double reg_mr: %w", unix.Errno(-rc))
	}
	return uint32(l), uint32(r), nil
}

// CreateCQ creates a CQ and returns its handle and create_cq's vendor
// response tail (struct tbv_uresp_create_cq) as raw bytes.
func (d *Double) CreateCQ(cqe uint32) (uint32, [SizeofCreateTail]byte, error) {
	var tail C.struct_usb4v_tbv_uresp_create_cq
	var out [SizeofCreateTail]byte
	h := C.dbl_create_cq(d.d, C.uint32_t(cqe), &tail)
	if h < 0 {
		return 0, out, fmt.Errorf("double create_cq: %w", unix.Errno(-h))
	}
	copy(out[:], unsafe.Slice((*byte)(unsafe.Pointer(&tail)), SizeofCreateTail))
	return uint32(h), out, nil
}

// CreateQP creates a QP and returns its handle and QP number.
func (d *Double) CreateQP(qpType, sendCQ, recvCQ uint32) (uint32, uint32, error) {
	var qpn C.uint32_t
	h := C.dbl_create_qp(d.d, C.uint32_t(qpType), C.uint32_t(sendCQ), C.uint32_t(recvCQ), &qpn)
	if h < 0 {
		return 0, 0, fmt.Errorf("double create_qp: %w", unix.Errno(-h))
	}
	return uint32(h), uint32(qpn), nil
}

// DestroyQP destroys a QP as DESTROY_QP does: its DV queue goes with it and
// the next CreateQP may get the same handle.
func (d *Double) DestroyQP(h uint32) error {
	if rc := C.dbl_destroy_qp(d.d, C.uint32_t(h)); rc < 0 {
		return fmt.Errorf("double destroy_qp: %w", unix.Errno(-rc))
	}
	return nil
}

// CreateQueues is how many CREATE_QUEUE calls reached the double, failed
// ones included.
func (d *Double) CreateQueues() uint64 { return uint64(d.d.create_queues) }

// AppCreateQueue attaches a DV queue to the QP as an application would (a
// GPU producer: its own pages, CREATE_QUEUE on the QP's handle through the
// command fd); it returns the queue's generation, or the kernel's errno.
func (d *Double) AppCreateQueue(qp uint32) (uint32, error) {
	var gen C.uint32_t
	if rc := C.dbl_app_create_queue(d.d, C.uint32_t(qp), &gen); rc != 0 {
		return 0, fmt.Errorf("application CREATE_QUEUE: %w", unix.Errno(-rc))
	}
	return uint32(gen), nil
}

// Fork makes the double answer getpid as a fork() child would (another
// process id); its memory stands for the child's copy of everything.
func (d *Double) Fork() { C.dbl_fork(d.d) }

// DVQueueMemory is the SQ, CQ and doorbell addresses of the QP's DV queue as
// CREATE_QUEUE gave them (zeros: none).
func (d *Double) DVQueueMemory(qp uint32) [3]uintptr {
	q := &d.d.qp[qp]
	if q.dv == 0 {
		return [3]uintptr{}
	}
	return [3]uintptr{uintptr(unsafe.Pointer(q.sq)), uintptr(unsafe.Pointer(q.dcq)), uintptr(unsafe.Pointer(q.db))}
}

// DestroyQueues counts DESTROY_QUEUE calls, failed ones included.
func (d *Double) DestroyQueues() uint64 { return uint64(d.d.destroy_queues) }

// SetPollDelay makes every POLL_CQ write sleep that many microseconds before
// it is handled, as a slow system call would.
func (d *Double) SetPollDelay(us uint32) { C.dbl_set_poll_delay(d.d, C.uint32_t(us)) }

// HoldPolls makes POLL_CQ writes wait in the "kernel" until HoldPolls(false):
// a slow system call whose end the test decides, not the clock.
func (d *Double) HoldPolls(hold bool) {
	h := C.int(0)
	if hold {
		h = 1
	}
	C.dbl_hold_polls(d.d, h)
}

// PollsEntered counts POLL_CQ writes that reached the double.
func (d *Double) PollsEntered() uint64 { return uint64(C.dbl_polls_entered(d.d)) }

// PollsDone counts POLL_CQ writes the double answered.
func (d *Double) PollsDone() uint64 { return uint64(C.dbl_polls_done(d.d)) }

// Connect wires two QPs to each other.
func (d *Double) Connect(a, b uint32) { C.dbl_connect(d.d, C.uint32_t(a), C.uint32_t(b)) }

// FloodCQ produces n completions into a CQ, as a burst from the wire would.
func (d *Double) FloodCQ(cq, n uint32) { C.dbl_flood_cq(d.d, C.uint32_t(cq), C.uint32_t(n)) }

// Notifies is how many completion events the CQ has raised.
func (d *Double) Notifies(cq uint32) uint64 { return uint64(d.d.cq[cq].notifies) }

// Overflows is how many completions the CQ dropped for lack of room.
func (d *Double) Overflows(cq uint32) uint64 { return uint64(d.d.cq[cq].overflows) }

// DVQPState is the consumer.qp_state the kernel published for a DV QP.
func (d *Double) DVQPState(qp uint32) uint32 {
	if d.d.qp[qp].db == nil {
		return ^uint32(0)
	}
	return uint32(d.d.qp[qp].db.consumer.qp_state)
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// SetRQDepth makes QP handle h's kernel RQ hold at most depth WRs, as
// create_qp's max_recv_wr sizes the module's (hellas-main:kernel/ibdev.c:2538).
func (d *Double) SetRQDepth(h, depth uint32) {
	C.dbl_set_rq_depth(d.d, C.uint32_t(h), C.uint32_t(depth))
}

// SetRNRWait on: a message that meets an empty RQ waits for the receiver's
// next receive (the module's sender with rnr_retry 7); off (the default):
// the sender completes with RNR_RETRY_EXC_ERR at once.
func (d *Double) SetRNRWait(on bool) { C.dbl_set_rnr_wait(d.d, cbool(on)) }

// SetFreedQPNum on: DESTROY_QP leaves the QP's completions not yet polled
// (kernel-command polling) with qp_num qpn. The module's CQEs point at the
// ib_qp, which the core frees after destroy_qp, and the uverbs poll copies
// the number from there (hellas-main:kernel/ibdev.c:7169,
// pleite-gda-8099446:kernel/ibdev.c:9178): whatever the freed memory holds.
func (d *Double) SetFreedQPNum(on bool, qpn uint32) {
	C.dbl_set_freed_qp_num(d.d, cbool(on), C.uint32_t(qpn))
}

// QPError moves QP handle h to ERR: its receive WRs are flushed into its
// receive CQ with WR_FLUSH_ERR and later receives are refused (EINVAL).
func (d *Double) QPError(h uint32) error {
	if rc := C.dbl_qp_error(d.d, C.uint32_t(h)); rc < 0 {
		return unix.Errno(-rc)
	}
	return nil
}

// RQCounts are QP handle h's receive WRs: posted to it, delivered into,
// flushed, and held now.
func (d *Double) RQCounts(h uint32) (posted, delivered, flushed uint64, held uint32) {
	var p, dl, f C.uint64_t
	var hd C.uint32_t
	C.dbl_qp_counts(d.d, C.uint32_t(h), &p, &dl, &f, &hd)
	return uint64(p), uint64(dl), uint64(f), uint32(hd)
}

// RNRWaits counts messages that met an empty RQ and waited (SetRNRWait).
func (d *Double) RNRWaits() uint64 { return uint64(C.dbl_rnr_naks(d.d)) }
