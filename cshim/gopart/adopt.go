package main

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
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
		v = &cqEntry{cq: ctx.ForeignCQ(handle, uint32(req.num)), dp: dataplane.AdoptCQ(req.eng), foreign: true}
	case C.USB4_OBJ_QP:
		qp := pd.ForeignQP(handle, uint32(req.num), provider.QPType(req._type))
		v = &qpEntry{qp: qp, dp: dataplane.AdoptQP(req.eng), foreign: true}
	case C.USB4_OBJ_SRQ:
		v = &srqEntry{srq: pd.ForeignSRQ(handle), dp: dataplane.AdoptSRQ(req.eng), foreign: true}
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
