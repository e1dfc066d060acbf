package dataplane

/*
#include "engine.h"
*/
import "C"

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Dev is a context's removal record in the engine (engine.h struct
// usb4v_dev): the context's CQs, QPs and SRQs join it when made and leave it
// when freed, and Remove stops them all. It is the one place the removal
// finds the data path; the handle table plays no part (docs/DESIGN.md,
// "Locks and device removal").
type Dev struct {
	// mu keeps Close from freeing the record while Remove runs on the
	// removal watcher's goroutine. A leaf: under it only the record's own
	// lock, which waits for nothing either.
	mu sync.Mutex
	c  *C.struct_usb4v_dev
}

// NewDev makes a context's record.
func NewDev() (*Dev, error) {
	c := C.usb4v_dev_new()
	if c == nil {
		return nil, unix.ENOMEM
	}
	return &Dev{c: c}, nil
}

// with runs fn on the C record under mu, so that Close cannot free it
// meanwhile; nothing for a nil d or after Close.
func (d *Dev) with(fn func(c *C.struct_usb4v_dev)) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		fn(d.c)
	}
}

// Remove marks every joined object gone (posts and polls answer EIO from
// then on) and puts anonymous memory in place of the rings they mapped from
// the command fd. It returns how many objects were held by a thread (an rxe
// start_poll holder, a resize): call it again later, holding none of the
// locks a verb takes, until it returns 0. Objects that join afterwards are
// marked as they join. After Close it does nothing.
func (d *Dev) Remove() int {
	busy := 0
	d.with(func(c *C.struct_usb4v_dev) { busy = int(C.usb4v_dev_remove(c)) })
	return busy
}

// Close drops the context's reference; objects still joined keep the
// record until they are freed.
func (d *Dev) Close() {
	d.with(func(c *C.struct_usb4v_dev) {
		C.usb4v_dev_put(c)
		d.c = nil
	})
}

// Join puts the CQ in d's record (once, right after NewCQ, before any other
// goroutine has the CQ); a nil or closed d joins nothing.
func (cq *CQ) Join(d *Dev) {
	d.with(func(c *C.struct_usb4v_dev) { C.usb4v_cq_join(cq.c, c) })
}

// Join puts the QP in d's record.
func (qp *QP) Join(d *Dev) {
	d.with(func(c *C.struct_usb4v_dev) { C.usb4v_qp_join(qp.c, c) })
}

// Join puts the SRQ in d's record.
func (s *SRQ) Join(d *Dev) {
	d.with(func(c *C.struct_usb4v_dev) { C.usb4v_srq_join(s.c, c) })
}
