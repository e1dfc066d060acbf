//go:build usb4panictest

package main

/*
// usb4_test_fault faults in C code called from Go, as a bug in a C library
// the Go part calls would: Go forwards that SIGSEGV to the application's
// handler (go:src/runtime/signal_unix.go sigfwdgo).
static void usb4_test_fault(int v) { *(volatile int *)0 = v; }
*/
import "C"

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Only in a Go part built with -tags usb4panictest (cshim's
// TestGoPanicContained): USB4VERBS_TEST_PANIC=<op>[:enomem] makes the first
// call of that export panic, with an ENOMEM error when asked, so the test
// sees contain at work; <op>:cfault makes the first call fault in C,
// <op>:cfault_second the second (TestLongjmpOutOfGoRefused),
// <op>:cfault_locked the first with a lock held that the later calls take
// (TestFaultInsideVerbUnderLock); start:thread_churn starts a goroutine
// that keeps ending threads, so the runtime keeps creating new ones
// (TestForkStressOneCPU). Release builds have no such variable.
var (
	forcedPanicDone atomic.Bool
	forcedCalls     atomic.Int32
)

func forcedPanic(op string) {
	want := os.Getenv("USB4VERBS_TEST_PANIC")
	if want == op+":thread_churn" { // issue 31 item 1: the runtime keeps needing new threads
		go func() {
			for {
				done := make(chan struct{})
				go func() { runtime.LockOSThread(); close(done) }() // ends locked: its thread exits
				<-done
				time.Sleep(200 * time.Microsecond)
			}
		}()
		return
	}
	if want == op+":cfault_locked" { // issue 31 item 3
		// The first call faults with handles.mu held, as a fault in
		// the engine under a verb's lock (usb4v_cq_join's) would; the
		// calls after it take that lock first, as any verb on a handle does.
		if !forcedPanicDone.Swap(true) {
			handles.mu.Lock()
			C.usb4_test_fault(2)
			handles.mu.Unlock()
			return
		}
		handles.mu.Lock()
		//lint:ignore SA2001 waiting for the lock is the point
		handles.mu.Unlock()
		return
	}
	if want == op+":cfault" { // issue 22's longjmp-out-of-Go test
		if !forcedPanicDone.Swap(true) {
			C.usb4_test_fault(1)
		}
		return
	}
	if want == op+":cfault_second" { // the same, after a call that loaded the Go part
		if forcedCalls.Add(1) == 2 {
			C.usb4_test_fault(1)
		}
		return
	}
	if want != op && want != op+":enomem" {
		return
	}
	if forcedPanicDone.Swap(true) {
		return
	}
	if want == op+":enomem" {
		panic(unix.ENOMEM)
	}
	panic("forced by USB4VERBS_TEST_PANIC=" + op)
}
