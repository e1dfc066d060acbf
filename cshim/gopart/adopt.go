package main

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
)

// usb4goAdoptObject makes a Go object of this image for an object a fork()
// parent created on a context this image adopted (usb4goAdoptContext), from
// its kernel handle and what its ibv struct says (fork.c usb4_obj_adopt, at
// the object's first control verb in the child). The kernel serves the
// parent's ucontext for the child, so the verbs on it then get the kernel's
// answers, as through rdma-core's providers. The object is the parent's:
// closing the child's context neither destroys it in the kernel nor frees
// its engine object (closeContext).
//
//export usb4goAdoptObject
func usb4goAdoptObject(h C.uintptr_t, kind C.int, req *C.struct_usb4_adopt_req, out *C.uintptr_t) (rc C.int) {
	defer contain("adopt_object", &rc)
	forcedPanic("adopt_object")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	var pd *provider.PD
	if kind != C.USB4_OBJ_PD && kind != C.USB4_OBJ_CQ {
		if pd, ok = lookup[*provider.PD](req.pd); !ok || pd.Context() != ctx {
			return C.int(unix.EBADF)
		}
	}
	handle := uint32(req.handle)
	var v any
	switch kind {
	case C.USB4_OBJ_PD:
		v = ctx.ForeignPD(handle)
	case C.USB4_OBJ_MR:
		v = pd.ForeignMR(handle, uint32(req.lkey), uint32(req.rkey), uint64(req.addr), uint64(req.length))
	case C.USB4_OBJ_CQ:
		v = adoptCQ(ctx, handle, uint32(req.num), req.eng)
	case C.USB4_OBJ_QP:
		v = adoptQP(pd, handle, uint32(req.num), provider.QPType(req._type), req.eng)
	case C.USB4_OBJ_SRQ:
		v = adoptSRQ(pd, handle, req.eng)
	case C.USB4_OBJ_AH:
		v = pd.ForeignAH(handle)
	case C.USB4_OBJ_MW:
		v = pd.ForeignMW(handle, uint32(req.rkey), uint8(req._type))
	default:
		return C.int(unix.EINVAL)
	}
	*out = C.uintptr_t(handles.add(ctx, v))
	return 0
}

// adoptCQ, adoptQP and adoptSRQ make this image's entries for a fork()
// parent's CQ, QP and SRQ: the engine object (eng, the parent's, in this
// image's copy of its memory) forgets the parent's removal record and joins
// this image's record of the context, so a removal this image sees stops
// the data path the child drives on it too.
func adoptCQ(ctx *provider.Context, handle, cqe uint32, eng unsafe.Pointer) *cqEntry {
	e := &cqEntry{cq: ctx.ForeignCQ(handle, cqe), dp: dataplane.AdoptCQ(eng), foreign: true}
	e.dp.Join(engineDevs.of(ctx))
	return e
}

func adoptQP(pd *provider.PD, handle, qpn uint32, typ provider.QPType, eng unsafe.Pointer) *qpEntry {
	e := &qpEntry{qp: pd.ForeignQP(handle, qpn, typ), dp: dataplane.AdoptQP(eng), foreign: true}
	e.dp.Join(engineDevs.of(pd.Context()))
	return e
}

func adoptSRQ(pd *provider.PD, handle uint32, eng unsafe.Pointer) *srqEntry {
	dp := dataplane.AdoptSRQ(eng)
	srq := pd.ForeignSRQ(handle)
	if dp.Provider() {
		// The parent's provider SRQ (no kernel object, handle included):
		// its sizes are in the data path this image copied.
		st := dp.Stats()
		srq = pd.ForeignProviderSRQ(handle, provider.SRQAttr{MaxWR: st.MaxWR, MaxSGE: st.MaxSGE, Limit: st.Limit})
	}
	e := &srqEntry{srq: srq, dp: dp, foreign: true}
	e.dp.Join(engineDevs.of(pd.Context()))
	return e
}
