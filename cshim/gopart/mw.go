package main

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
	"golang.org/x/sys/unix"

	"usb4verbs/provider"
)

//export usb4goAllocMW
func usb4goAllocMW(h C.uintptr_t, typ C.uint32_t, mwOut *C.uintptr_t, mwHandle, rkey *C.uint32_t) (rc C.int) {
	defer contain("alloc_mw", &rc)
	forcedPanic("alloc_mw")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if typ > 0xff {
		return C.int(unix.EINVAL)
	}
	mw, err := pd.AllocMW(uint8(typ))
	if err != nil {
		return errnoOf(err)
	}
	*mwOut = C.uintptr_t(handles.add(pd.Context(), mw))
	*mwHandle = C.uint32_t(mw.Handle())
	*rkey = C.uint32_t(mw.RKey())
	return 0
}

//export usb4goDeallocMW
func usb4goDeallocMW(h C.uintptr_t) (rc C.int) {
	defer contain("dealloc_mw", &rc)
	forcedPanic("dealloc_mw")
	mw, ok := lookup[*provider.MW](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if err := mw.Destroy(); err != nil {
		return errnoOf(err)
	}
	handles.remove(uintptr(h))
	return 0
}
