package dataplane

/*
#include <stdlib.h>
#include "engine.h"

// One inline buffer: the engine copies it before returning, so a Go
// pointer may be passed (it holds no Go pointers and is not kept).
static void wrex_set_inline1(struct usb4v_qp *qp, void *p, size_t n)
{
	struct usb4v_ibv_data_buf b = {p, n};
	usb4v_wr_set_inline_list(qp, 1, &b);
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Send-ops flags of ibv_qp_ex (enum ibv_qp_create_send_ops_flags).
const (
	QPExWithRDMAWrite        = C.USB4V_QP_EX_WITH_RDMA_WRITE
	QPExWithRDMAWriteWithImm = C.USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM
	QPExWithSend             = C.USB4V_QP_EX_WITH_SEND
	QPExWithSendWithImm      = C.USB4V_QP_EX_WITH_SEND_WITH_IMM
	QPExWithRDMARead         = C.USB4V_QP_EX_WITH_RDMA_READ
	QPExWithAtomicCmpAndSwp  = C.USB4V_QP_EX_WITH_ATOMIC_CMP_AND_SWP
	QPExWithAtomicFetchAdd   = C.USB4V_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
	QPExWithLocalInv         = C.USB4V_QP_EX_WITH_LOCAL_INV
	QPExWithBindMW           = C.USB4V_QP_EX_WITH_BIND_MW
	QPExWithSendWithInv      = C.USB4V_QP_EX_WITH_SEND_WITH_INV
	QPExWithAtomicWrite      = C.USB4V_QP_EX_WITH_ATOMIC_WRITE

	WRLocalInv    = C.USB4V_WR_LOCAL_INV
	WRBindMW      = C.USB4V_WR_BIND_MW
	WRAtomicWrite = C.USB4V_WR_ATOMIC_WRITE
)

// WRExSupported is the send-ops set a QP of qpType can have on backend
// (Backend*): librxe's per type on rxe, the module's opcodes elsewhere.
func WRExSupported(backend string, qpType uint32, hasAtomicWrite bool) uint64 {
	b := C.int(C.USB4V_BACKEND_KCMD)
	if backend == BackendRxe {
		b = C.USB4V_BACKEND_RXE
	}
	aw := C.int(0)
	if hasAtomicWrite {
		aw = 1
	}
	return uint64(C.usb4v_wrex_supported_ops(b, C.uint32_t(qpType), aw))
}

// EnableWRex gives the QP the ibv_qp_ex batch API (ibv_wr_*) for ops, after
// its backend is attached: the C library's create_qp_ex does the same.
func (qp *QP) EnableWRex(ops uint64) error {
	if rc := C.usb4v_qp_enable_wrex(qp.c, C.uint64_t(ops), C.uint32_t(qp.maxSendWR)); rc != 0 {
		return errnoErr("enable wr api", rc)
	}
	return nil
}

// WRStart opens a batch (ibv_wr_start); the SQ is the batch's until
// WRComplete or WRAbort.
func (qp *QP) WRStart() { C.usb4v_wr_start(qp.c) }

// WRBuild adds one WR (an ibv_wr_* builder): WrID, Opcode, Flags, ImmData
// (or the rkey to invalidate), RemoteAddr/RKey, CompareAdd/Swap; for
// WRAtomicWrite the 8 bytes are Swap. SGEs, inline data and the UD address
// are set afterwards.
func (qp *QP) WRBuild(w SendWR) {
	var c C.struct_usb4v_ibv_send_wr
	c.wr_id = C.uint64_t(w.WrID)
	c.opcode = C.uint32_t(w.Opcode)
	c.send_flags = C.uint32_t(w.Flags)
	c.imm_data = C.uint32_t(w.ImmData)
	u := unsafe.Pointer(&c.wr)
	switch w.Opcode {
	case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
		a := (*[4]uint64)(u)
		a[0], a[1], a[2] = w.RemoteAddr, w.CompareAdd, w.Swap
		*(*uint32)(unsafe.Add(u, 24)) = w.RKey
	default:
		*(*uint64)(u) = w.RemoteAddr
		*(*uint32)(unsafe.Add(u, 8)) = w.RKey
		*(*uint64)(unsafe.Add(u, 16)) = w.Swap // ATOMIC_WRITE's bytes (engine.h)
	}
	C.usb4v_wr_build(qp.c, &c)
}

// WRSetSGEs sets the data of the WR built last (ibv_wr_set_sge_list).
func (qp *QP) WRSetSGEs(sges []SGE) {
	if len(sges) == 0 {
		C.usb4v_wr_set_sge_list(qp.c, 0, nil)
		return
	}
	c := make([]C.struct_usb4v_ibv_sge, len(sges))
	for i, s := range sges {
		c[i] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(s.Addr), length: C.uint32_t(s.Length), lkey: C.uint32_t(s.LKey)}
	}
	C.usb4v_wr_set_sge_list(qp.c, C.size_t(len(c)), &c[0])
}

// WRSetInline copies data into the WR built last (ibv_wr_set_inline_data).
func (qp *QP) WRSetInline(data []byte) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	C.wrex_set_inline1(qp.c, p, C.size_t(len(data)))
}

// WRComplete posts the batch with one doorbell, or nothing and the batch's
// first error (ibv_wr_complete).
func (qp *QP) WRComplete() error {
	if rc := C.usb4v_wr_complete(qp.c); rc != 0 {
		return &PostError{Verb: "wr complete", Err: unix.Errno(rc)}
	}
	return nil
}

// WRAbort drops the batch: nothing of it is posted (ibv_wr_abort).
func (qp *QP) WRAbort() { C.usb4v_wr_abort(qp.c) }
