package main

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

type fakeRuntimeError string

func (e fakeRuntimeError) Error() string { return string(e) }
func (fakeRuntimeError) RuntimeError()   {}

// Which panics contain reports as ENOMEM rather than EIO.
func TestPanicSaysOutOfMemory(t *testing.T) {
	for _, tc := range []struct {
		r    any
		want bool
	}{
		{unix.ENOMEM, true},
		{fmt.Errorf("mmap ring: %w", unix.ENOMEM), true},
		{fakeRuntimeError("runtime error: out of memory"), true},
		{fakeRuntimeError("runtime error: index out of range [3] with length 2"), false},
		{errors.New("out of memory"), false}, // not a runtime.Error and no errno
		{"out of memory", false},
		{unix.EIO, false},
		{nil, false},
	} {
		if got := panicSaysOutOfMemory(tc.r); got != tc.want {
			t.Errorf("panicSaysOutOfMemory(%#v) = %v, want %v", tc.r, got, tc.want)
		}
	}
}
