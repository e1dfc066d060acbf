package dataplane

/*
#include <stdlib.h>
#include "engine.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cursor is the extended poll API of cqex.c (what ibv_start_poll,
// ibv_next_poll and ibv_end_poll reach through cshim) on one CQ, for Go
// callers and the backend tests. Between a Start that succeeded and End the
// cursor holds the CQ as librxe does (other pollers wait), so the calling
// goroutine stays on its OS thread meanwhile. A Cursor must not be used
// concurrently with its CQ's Close.
type Cursor struct {
	cq   *CQ
	c    *C.struct_usb4v_cq_cursor
	held bool
}

// NewCursor allocates a cursor for cq; Free releases it.
func (cq *CQ) NewCursor() *Cursor {
	c := (*C.struct_usb4v_cq_cursor)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_usb4v_cq_cursor{}))))
	C.usb4v_cq_cursor_init(c)
	return &Cursor{cq: cq, c: c}
}

// Start reads the CQ's first completion; unix.ENOENT when it is empty (the
// CQ is then not held).
func (k *Cursor) Start() (WC, error) {
	runtime.LockOSThread()
	rc := C.usb4v_cq_start_poll(k.cq.c, k.c)
	if rc != 0 {
		runtime.UnlockOSThread()
		return WC{}, unix.Errno(rc)
	}
	k.held = true
	return k.cur(), nil
}

// Next reads the following completion; unix.ENOENT when there is none (the
// CQ stays held until End).
func (k *Cursor) Next() (WC, error) {
	if rc := C.usb4v_cq_next_poll(k.cq.c, k.c); rc != 0 {
		return WC{}, unix.Errno(rc)
	}
	return k.cur(), nil
}

// End releases the CQ; the completion read last is consumed. Without a
// Start before it does nothing.
func (k *Cursor) End() {
	C.usb4v_cq_end_poll(k.cq.c, k.c)
	if k.held {
		k.held = false
		runtime.UnlockOSThread()
	}
}

// Free releases the cursor's memory.
func (k *Cursor) Free() {
	if k.c != nil {
		C.usb4v_cq_cursor_destroy(k.c)
		C.free(unsafe.Pointer(k.c))
		k.c = nil
	}
}

func (k *Cursor) cur() WC { return *(*WC)(unsafe.Pointer(&k.c.cur)) }
