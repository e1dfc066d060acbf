package dataplane

/*
#include <stdlib.h>
#include <string.h>
#include "engine.h"
*/
import "C"

import "unsafe"

// These wrap single engine decoders so they can be fuzzed and unit-tested
// from Go; the data path itself never goes through them.

// decodeUverbsWC converts one struct ib_uverbs_wc (48 bytes) to a WC.
func decodeUverbsWC(b []byte) (WC, bool) {
	var in C.struct_usb4v_ib_uverbs_wc
	if len(b) < C.sizeof_struct_usb4v_ib_uverbs_wc {
		return WC{}, false
	}
	C.memcpy(unsafe.Pointer(&in), unsafe.Pointer(&b[0]), C.sizeof_struct_usb4v_ib_uverbs_wc)
	var out WC
	C.usb4v_uwc_to_ibv(&in, (*C.struct_usb4v_ibv_wc)(unsafe.Pointer(&out)))
	return out, true
}

// validateRingHeader runs the mapped CQ ring's header check on raw bytes:
// hdr is the mapped page (at least 192 bytes), tail the create_cq response
// tail (32 bytes).
func validateRingHeader(hdr, tail []byte, requested uint32, mapped int) (bool, string) {
	if len(hdr) < C.sizeof_struct_usb4v_tbv_cq_shm || len(tail) < SizeofCreateCQTail || mapped < 0 {
		return false, "short input"
	}
	h := (*C.struct_usb4v_tbv_cq_shm)(C.malloc(C.sizeof_struct_usb4v_tbv_cq_shm))
	defer C.free(unsafe.Pointer(h))
	C.memcpy(unsafe.Pointer(h), unsafe.Pointer(&hdr[0]), C.sizeof_struct_usb4v_tbv_cq_shm)
	var t C.struct_usb4v_tbv_uresp_create_cq
	C.memcpy(unsafe.Pointer(&t), unsafe.Pointer(&tail[0]), SizeofCreateCQTail)
	var why *C.char
	ok := C.usb4v_shm_validate(h, &t, C.uint32_t(requested), C.size_t(mapped), &why) == 1
	if why != nil {
		return ok, C.GoString(why)
	}
	return ok, ""
}

// decodeDVCQE converts one DV CQE (64 bytes) to a WC.
func decodeDVCQE(b []byte, qpNum uint32) (WC, bool) {
	if len(b) < 64 {
		return WC{}, false
	}
	c := (*C.struct_usb4v_usb4_rdma_dv_cqe)(C.aligned_alloc(64, 64))
	defer C.free(unsafe.Pointer(c))
	C.memcpy(unsafe.Pointer(c), unsafe.Pointer(&b[0]), 64)
	var out WC
	C.usb4v_dv_cqe_to_ibv(c, C.uint32_t(qpNum), (*C.struct_usb4v_ibv_wc)(unsafe.Pointer(&out)))
	return out, true
}

// encodeDVWQE encodes one send WR as a DV WQE; rc is 0, EOPNOTSUPP (kernel
// path) or EINVAL.
func encodeDVWQE(w SendWR, caps uint32, gen uint8) (wqe [64]byte, rc int) {
	cw := (*C.struct_usb4v_ibv_send_wr)(C.calloc(1, C.sizeof_struct_usb4v_ibv_send_wr))
	defer C.free(unsafe.Pointer(cw))
	var sges *C.struct_usb4v_ibv_sge
	if len(w.SGEs) > 0 {
		sges = (*C.struct_usb4v_ibv_sge)(C.calloc(C.size_t(len(w.SGEs)), C.sizeof_struct_usb4v_ibv_sge))
		defer C.free(unsafe.Pointer(sges))
		s := unsafe.Slice(sges, len(w.SGEs))
		for i, g := range w.SGEs {
			s[i] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
		}
	}
	cw.wr_id = C.uint64_t(w.WrID)
	cw.opcode = C.uint32_t(w.Opcode)
	cw.send_flags = C.uint32_t(w.Flags)
	cw.imm_data = C.uint32_t(w.ImmData)
	cw.num_sge = C.int(len(w.SGEs))
	cw.sg_list = sges
	u := (*[4]uint64)(unsafe.Pointer(&cw.wr))
	u[0], u[1], u[2] = w.RemoteAddr, w.CompareAdd, w.Swap
	*(*uint32)(unsafe.Pointer(&u[3])) = w.RKey
	out := (*C.struct_usb4v_usb4_rdma_dv_wqe)(C.aligned_alloc(64, 64))
	defer C.free(unsafe.Pointer(out))
	rc = int(C.usb4v_dv_encode_wqe(cw, C.uint32_t(caps), C.uint8_t(gen), out))
	C.memcpy(unsafe.Pointer(&wqe[0]), unsafe.Pointer(out), 64)
	return wqe, rc
}

// rawSendWR is an ibv_send_wr as any caller may hand it to post_send:
// NumSGE is passed as is, whatever SGEs holds (the C list always has room
// for rawMaxSGE entries, so a too-large NumSGE never makes the engine read
// past the caller's memory; it must refuse it first anyway).
type rawSendWR struct {
	WrID       uint64
	NumSGE     int32
	NilSGList  bool
	Opcode     uint32
	Flags      uint32
	ImmData    uint32
	SGEs       []SGE
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
}

type rawRecvWR struct {
	WrID      uint64
	NumSGE    int32
	NilSGList bool
	SGEs      []SGE
}

const rawMaxSGE = 16

// Where a raw post left *bad_wr: an index into the list, or one of these.
const (
	badUntouched = -2 // still the sentinel the caller put there
	badNil       = -1
)

// rawSGEs copies sges into a zeroed C array of rawMaxSGE entries.
func rawSGEs(sges []SGE) *C.struct_usb4v_ibv_sge {
	p := (*C.struct_usb4v_ibv_sge)(C.calloc(rawMaxSGE, C.sizeof_struct_usb4v_ibv_sge))
	s := unsafe.Slice(p, rawMaxSGE)
	for i, g := range sges[:min(len(sges), rawMaxSGE)] {
		s[i] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
	}
	return p
}

// badIndexOf maps the engine's *bad_wr back to a list index.
func badIndexOf(bad, sentinel, first unsafe.Pointer, size uintptr, n int) int {
	switch {
	case bad == sentinel:
		return badUntouched
	case bad == nil:
		return badNil
	}
	off := uintptr(bad) - uintptr(first)
	if off%size != 0 || off/size >= uintptr(n) {
		return badUntouched - 1 // points at no WR of the list
	}
	return int(off / size)
}

// postSendRaw calls usb4v_post_send on qp with wrs as one C list (a NULL
// list when wrs is empty). It returns the errno and where *bad_wr points.
func postSendRaw(qp *QP, wrs []rawSendWR) (rc, bad int) {
	var first *C.struct_usb4v_ibv_send_wr
	var cw []C.struct_usb4v_ibv_send_wr
	if len(wrs) > 0 {
		first = (*C.struct_usb4v_ibv_send_wr)(C.calloc(C.size_t(len(wrs)), C.sizeof_struct_usb4v_ibv_send_wr))
		defer C.free(unsafe.Pointer(first))
		cw = unsafe.Slice(first, len(wrs))
	}
	for i, w := range wrs {
		c := &cw[i]
		c.wr_id = C.uint64_t(w.WrID)
		c.num_sge = C.int(w.NumSGE)
		c.opcode = C.uint32_t(w.Opcode)
		c.send_flags = C.uint32_t(w.Flags)
		c.imm_data = C.uint32_t(w.ImmData)
		if !w.NilSGList {
			c.sg_list = rawSGEs(w.SGEs)
			defer C.free(unsafe.Pointer(c.sg_list))
		}
		u := unsafe.Pointer(&c.wr)
		switch w.Opcode {
		case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
			a := (*[3]uint64)(u)
			a[0], a[1], a[2] = w.RemoteAddr, w.CompareAdd, w.Swap
			*(*uint32)(unsafe.Add(u, 24)) = w.RKey
		default:
			*(*uint64)(u) = w.RemoteAddr
			*(*uint32)(unsafe.Add(u, 8)) = w.RKey
		}
		if i+1 < len(wrs) {
			c.next = &cw[i+1]
		}
	}
	sentinel := (*C.struct_usb4v_ibv_send_wr)(C.calloc(1, C.sizeof_struct_usb4v_ibv_send_wr))
	defer C.free(unsafe.Pointer(sentinel))
	slot := (**C.struct_usb4v_ibv_send_wr)(C.malloc(C.size_t(unsafe.Sizeof(sentinel))))
	defer C.free(unsafe.Pointer(slot))
	*slot = sentinel
	rc = int(C.usb4v_post_send(qp.c, first, slot))
	return rc, badIndexOf(unsafe.Pointer(*slot), unsafe.Pointer(sentinel), unsafe.Pointer(first),
		C.sizeof_struct_usb4v_ibv_send_wr, len(wrs))
}

// postRecvRaw is postSendRaw for usb4v_post_recv (srq nil) or
// usb4v_post_srq_recv.
func postRecvRaw(qp *QP, srq *SRQ, wrs []rawRecvWR) (rc, bad int) {
	var first *C.struct_usb4v_ibv_recv_wr
	var cw []C.struct_usb4v_ibv_recv_wr
	if len(wrs) > 0 {
		first = (*C.struct_usb4v_ibv_recv_wr)(C.calloc(C.size_t(len(wrs)), C.sizeof_struct_usb4v_ibv_recv_wr))
		defer C.free(unsafe.Pointer(first))
		cw = unsafe.Slice(first, len(wrs))
	}
	for i, w := range wrs {
		c := &cw[i]
		c.wr_id = C.uint64_t(w.WrID)
		c.num_sge = C.int(w.NumSGE)
		if !w.NilSGList {
			c.sg_list = rawSGEs(w.SGEs)
			defer C.free(unsafe.Pointer(c.sg_list))
		}
		if i+1 < len(wrs) {
			c.next = &cw[i+1]
		}
	}
	sentinel := (*C.struct_usb4v_ibv_recv_wr)(C.calloc(1, C.sizeof_struct_usb4v_ibv_recv_wr))
	defer C.free(unsafe.Pointer(sentinel))
	slot := (**C.struct_usb4v_ibv_recv_wr)(C.malloc(C.size_t(unsafe.Sizeof(sentinel))))
	defer C.free(unsafe.Pointer(slot))
	*slot = sentinel
	if srq != nil {
		rc = int(C.usb4v_post_srq_recv(srq.c, first, slot))
	} else {
		rc = int(C.usb4v_post_recv(qp.c, first, slot))
	}
	return rc, badIndexOf(unsafe.Pointer(*slot), unsafe.Pointer(sentinel), unsafe.Pointer(first),
		C.sizeof_struct_usb4v_ibv_recv_wr, len(wrs))
}

// pollRaw calls usb4v_poll_cq with any ne; wc has room for max(ne, 0).
func pollRaw(cq *CQ, ne int) (int, []WC) {
	wc := make([]WC, max(ne, 0)+1)
	n := int(C.usb4v_poll_cq(cq.c, C.int(ne), (*C.struct_usb4v_ibv_wc)(unsafe.Pointer(&wc[0]))))
	return n, wc[:max(n, 0)]
}
