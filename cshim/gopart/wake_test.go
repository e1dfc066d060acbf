package main

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A thread blocked in read() on an event fd the removal replaced is woken:
// its read fails with EINTR (libibverbs then returns the error). The test
// binary is an ordinary Go program, whose runtime handles every signal, so
// the handler goes on a chosen signal here; in the provider the first free
// one is taken.
func TestWakeBlockedReader(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	sig := 50 // a real-time signal (SIGRTMIN is 34 with glibc)
	if got := wakeInstallForTest(sig); got != sig {
		t.Fatalf("install on signal %d: %d", sig, got)
	}
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		var b [16]byte
		_, err := unix.Read(p[0], b[:])
		result <- err
	}()
	// Wait until the reader is in read(): this is what the removal finds.
	for deadline := time.Now().Add(time.Minute); len(readersOf([]int{p[0]})) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader never showed up in read()")
		}
	}
	if left := wakeReaders([]int{p[0]}, sig, time.Minute); left != 0 {
		t.Fatalf("%d readers left", left)
	}
	select {
	case err := <-result:
		if !errors.Is(err, unix.EINTR) {
			t.Fatalf("read returned %v, want EINTR", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the reader is still blocked")
	}
}

func TestReadFD(t *testing.T) {
	for _, c := range []struct {
		line string
		fd   int
		ok   bool
	}{
		{"0 0x7 0x7ffd2a 0x20 0x0 0x0 0x0 0x7ffd28 0x7f3a\n", 7, true},
		{"232 0x4 0x7ffd2a 0x20 0xffffffff 0x0 0x0 0x7ffd 0x7f\n", 0, false},
		{"running\n", 0, false},
		{"-1 0x7ffd 0x7f\n", 0, false},
	} {
		fd, ok := readFD(c.line)
		if fd != c.fd || ok != c.ok {
			t.Errorf("readFD(%q) = %d, %v; want %d, %v", c.line, fd, ok, c.fd, c.ok)
		}
	}
}
