package usb4double

/*
#include "rxefake.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Queue indexes of RxeFake.
const (
	RxeSQ = 0
	RxeRQ = 1
	RxeCQ = 2
)

// RxeFake is a fake rdma_rxe kernel side: SQ, RQ and CQ rings in guarded C memory,
// served through the seam's mmap (offsets 0, 1, 2 = SQ, RQ, CQ), and the
// zero-WR POST_SEND doorbell.
type RxeFake struct{ f *C.struct_rxf }

// NewRxeFake builds the rings; depths are powers of two (usable slots are
// depth-1, as in rxe).
func NewRxeFake(sqDepth, sqLog2Elem, rqDepth, rqLog2Elem, cqDepth uint32) *RxeFake {
	f := C.rxf_new(C.uint32_t(sqDepth), C.uint32_t(sqLog2Elem), C.uint32_t(rqDepth), C.uint32_t(rqLog2Elem), C.uint32_t(cqDepth))
	if f == nil {
		panic("usb4double: out of memory")
	}
	return &RxeFake{f}
}

// Close frees the rings.
func (r *RxeFake) Close() { C.rxf_free(r.f); r.f = nil }

// Sys is the struct usb4v_sys * for the engine.
func (r *RxeFake) Sys() unsafe.Pointer { return unsafe.Pointer(&r.f.sys) }

// Len is queue q's mapping length.
func (r *RxeFake) Len(q int) uint32 { return uint32(r.f.len[q]) }

// AutoComplete makes the doorbell consume the SQ and complete signaled WQEs.
func (r *RxeFake) AutoComplete(on bool) { r.f.auto_complete = cbool(on) }

// Doorbells counts zero-WR POST_SEND commands; BadCommands anything else.
func (r *RxeFake) Doorbells() uint64   { return uint64(r.f.doorbells) }
func (r *RxeFake) BadCommands() uint64 { return uint64(r.f.bad_cmds) }

// Indices returns queue q's producer and consumer index.
func (r *RxeFake) Indices(q int) (prod, cons uint32) {
	b := (*C.struct_usb4v_rxe_queue_buf)(unsafe.Pointer(r.f.q[q]))
	return uint32(b.producer_index), uint32(b.consumer_index)
}

// Slot returns the bytes of element i of queue q.
func (r *RxeFake) Slot(q int, i uint32) []byte {
	b := (*C.struct_usb4v_rxe_queue_buf)(unsafe.Pointer(r.f.q[q]))
	elem := uintptr(1) << b.log2_elem_size
	off := uintptr(C.sizeof_struct_usb4v_rxe_queue_buf) + uintptr(i&uint32(b.index_mask))*elem
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(r.f.q[q]), off)), elem)
}

// CanaryOK reports whether the slack around every ring is untouched (an
// access beyond a ring's ends that stays inside its page).
func (r *RxeFake) CanaryOK() bool { return C.rxf_canary_ok(r.f) == 1 }

// SetIndices overwrites queue q's producer and consumer index with any
// values, as a buggy or hostile kernel could.
func (r *RxeFake) SetIndices(q int, prod, cons uint32) {
	C.rxf_set_indices(r.f, C.int(q), C.uint32_t(prod), C.uint32_t(cons))
}

// Mask is queue q's index mask (depth - 1).
func (r *RxeFake) Mask(q int) uint32 {
	return uint32((*C.struct_usb4v_rxe_queue_buf)(unsafe.Pointer(r.f.q[q])).index_mask)
}

// Consume advances queue q's consumer index by up to n (kernel side).
func (r *RxeFake) Consume(q int, n uint32) { C.rxf_consume(r.f, C.int(q), C.uint32_t(n)) }

// ProduceCQE appends a struct ib_uverbs_wc (48 raw bytes) to the CQ.
func (r *RxeFake) ProduceCQE(wc []byte) error {
	var c C.struct_usb4v_ib_uverbs_wc
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c)), C.sizeof_struct_usb4v_ib_uverbs_wc), wc)
	if rc := C.rxf_produce_cqe(r.f, &c); rc < 0 {
		return fmt.Errorf("fake rxe cq: %w", unix.Errno(-rc))
	}
	return nil
}
