package dataplane

/*
#include <stdlib.h>
#include <string.h>
#include "engine.h"

// One inline buffer: the engine copies it before returning, so a Go
// pointer may be passed (it holds no Go pointers and is not kept).
static void wrex_set_inline1(struct usb4v_qp *qp, void *p, size_t n)
{
	struct usb4v_ibv_data_buf b = {p, n};
	usb4v_wr_set_inline_list(qp, 1, &b);
}

// A BIND_MW WR for Go callers, who have no libibverbs ibv_mw or ibv_mr: the
// engine reads the window's rkey and the MR's lkey from those public structs,
// so stand-ins carry the two keys (ibv_mw.rkey, ibv_mr.lkey). mr_lkey < 0:
// no MR (a zero-length bind, which unbinds). Posted with post_send, or built
// into the open batch (in_batch).
static int wrex_bind_mw(struct usb4v_qp *qp, int in_batch, uint64_t wr_id, uint32_t flags, uint32_t mw_rkey,
			uint32_t new_rkey, int64_t mr_lkey, uint64_t addr, uint64_t length, uint32_t access)
{
	uint8_t mw[32] = {0}, mr[48] = {0};
	uint32_t lkey = (uint32_t)mr_lkey;
	memcpy(mw + USB4V_IBV_MW_RKEY, &mw_rkey, sizeof(mw_rkey));
	memcpy(mr + USB4V_IBV_MR_LKEY, &lkey, sizeof(lkey));
	struct usb4v_ibv_send_wr wr = {.wr_id = wr_id, .opcode = USB4V_WR_BIND_MW, .send_flags = flags};
	wr.ext.bind_mw.mw = mw;
	wr.ext.bind_mw.rkey = new_rkey;
	wr.ext.bind_mw.bind_info.mr = mr_lkey < 0 ? NULL : mr;
	wr.ext.bind_mw.bind_info.addr = addr;
	wr.ext.bind_mw.bind_info.length = length;
	wr.ext.bind_mw.bind_info.mw_access_flags = access;
	if (in_batch) {
		usb4v_wr_build(qp, &wr); // the keys are copied into the WQE here
		return 0;
	}
	struct usb4v_ibv_send_wr *bad = NULL;
	return usb4v_post_send(qp, &wr, &bad);
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

// MWBind is a BIND_MW work request: the window (its current rkey), the rkey
// it gets (the key byte is the caller's choice: IncRKey), and the range of
// an MR registered with IB_UVERBS_ACCESS_MW_BIND. MRLKey < 0 binds no MR
// (length 0: the window is unbound).
type MWBind struct {
	WrID    uint64
	Flags   uint32
	MWRKey  uint32
	NewRKey uint32
	MRLKey  int64
	Addr    uint64
	Length  uint64
	Access  uint32 // IB_UVERBS_ACCESS_REMOTE_* of the window
}

// IncRKey is libibverbs' ibv_inc_rkey: the key byte of rkey plus one.
func IncRKey(rkey uint32) uint32 { return rkey&0xffffff00 | (rkey+1)&0xff }

func (b *MWBind) call(qp *QP, inBatch C.int) C.int {
	return C.wrex_bind_mw(qp.c, inBatch, C.uint64_t(b.WrID), C.uint32_t(b.Flags), C.uint32_t(b.MWRKey),
		C.uint32_t(b.NewRKey), C.int64_t(b.MRLKey), C.uint64_t(b.Addr), C.uint64_t(b.Length), C.uint32_t(b.Access))
}

// PostBindMW posts one BIND_MW (ibv_post_send with IBV_WR_BIND_MW; rxe: RC
// and UC). The window answers to NewRKey once the bind completes.
// LOCAL_INV and SEND_WITH_INV need nothing of their own: PostSend with
// WRLocalInv or WRSendWithInv and the rkey in ImmData.
func (qp *QP) PostBindMW(b MWBind) error {
	qp.send.mu.Lock()
	defer qp.send.mu.Unlock()
	if rc := b.call(qp, 0); rc != 0 {
		return &PostError{Verb: "post send (bind mw)", Err: unix.Errno(rc)}
	}
	return nil
}

// WRBindMW builds a BIND_MW into the open batch (ibv_wr_bind_mw).
func (qp *QP) WRBindMW(b MWBind) { b.call(qp, 1) }
