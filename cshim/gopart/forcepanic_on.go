//go:build usb4panictest

package main

import (
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Only in a Go part built with -tags usb4panictest (cshim's
// TestGoPanicContained): USB4VERBS_TEST_PANIC=<op>[:enomem] makes the first
// call of that export panic, with an ENOMEM error when asked, so the test
// sees contain at work. Release builds have no such variable.
var forcedPanicDone atomic.Bool

func forcedPanic(op string) {
	want := os.Getenv("USB4VERBS_TEST_PANIC")
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
