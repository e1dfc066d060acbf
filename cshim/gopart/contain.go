package main

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// contain is deferred first in every export: a Go panic must not unwind into
// C (cgo would crash the whole host application with it). It recovers, writes
// one line, and makes the export return EIO, or ENOMEM when the panic says
// memory ran out. rc is nil for exports without a result.
//
// What it cannot contain, because the Go runtime throws instead of
// panicking and a throw is never recoverable: "fatal error: runtime: out of
// memory" (a failed heap growth), stack exhaustion, concurrent map writes,
// all goroutines asleep, and a fault (SIGSEGV/SIGBUS) in C code called from
// Go or in Go code not covered by a nil check. A panic in a goroutine the
// provider started itself is not in the export's stack either; the provider
// starts none on the control path.
//
// State after a contained panic: the handle table and the provider's
// context locks are only held across code that cannot panic (defer-unlocked
// or plain field reads), so no lock stays held; the object the call was
// about keeps whatever state the call had reached and its later calls work
// or fail with an errno. An object a create made in the kernel before the
// panic, but never handed to C, stays in the kernel until the context
// closes (the kernel frees everything of a ucontext then).
func contain(op string, rc *C.int) {
	r := recover()
	if r == nil {
		return
	}
	errno := unix.EIO
	if panicSaysOutOfMemory(r) {
		errno = unix.ENOMEM
	}
	fmt.Fprintf(os.Stderr, "libusb4_rdma: %s: internal error (Go panic: %v); returning %s, the process carries on\n",
		op, r, unix.ErrnoName(errno))
	if rc != nil {
		*rc = C.int(errno)
	}
}

// panicSaysOutOfMemory: an allocation that is told to fail (an error
// carrying ENOMEM, e.g. from mmap), or a runtime.Error about memory. Go's
// own heap exhaustion is a throw and never gets here (see contain).
func panicSaysOutOfMemory(r any) bool {
	err, ok := r.(error)
	if !ok {
		return false
	}
	if errors.Is(err, unix.ENOMEM) {
		return true
	}
	var re runtime.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "out of memory")
}
