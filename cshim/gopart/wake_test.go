package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wakeTestPipe makes a pipe for a reader to block on and puts the wake
// handler on sig.
func wakeTestPipe(t *testing.T, sig int) [2]int {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(p[0]); _ = unix.Close(p[1]) })
	if got := wakeInstallForTest(sig); got != sig {
		t.Fatalf("install on signal %d: %d", sig, got)
	}
	return p
}

// waitInRead waits until a thread is in read() on fd: what the removal finds.
func waitInRead(t *testing.T, fd int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(readersOf([]int{fd})) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader never showed up in read()")
		}
	}
}

// A thread blocked in read() on an event fd the removal replaced is woken:
// its read fails with EINTR (libibverbs then returns the error). The test
// binary is an ordinary Go program, whose runtime handles every signal, so
// the handler goes on a chosen signal here; in the provider the first free
// one is taken.
func TestWakeBlockedReader(t *testing.T) {
	const sig = 50 // a real-time signal (SIGRTMIN is 34 with glibc)
	p := wakeTestPipe(t, sig)
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		var b [16]byte
		_, err := unix.Read(p[0], b[:])
		result <- err
	}()
	waitInRead(t, p[0])
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

func sigBit(sig int) (set unix.Sigset_t) {
	set.Val[(sig-1)/64] = 1 << (uint(sig-1) % 64)
	return set
}

// takePending takes every queued copy of sig off the calling thread (which
// blocks it) and says how many there were.
func takePending(sig int) int {
	set := sigBit(sig)
	var ts unix.Timespec
	n := 0
	for {
		_, _, e := unix.Syscall6(unix.SYS_RT_SIGTIMEDWAIT, uintptr(unsafe.Pointer(&set)), 0,
			uintptr(unsafe.Pointer(&ts)), 8, 0, 0)
		if e != 0 {
			return n
		}
		n++
	}
}

// A reader that blocks the wake signal cannot be woken by it: every copy
// sent would stay queued and reach the application later as its own (a
// real-time signal queues each copy). None may be sent to it.
func TestWakeQueuesNothingOnABlockingThread(t *testing.T) {
	const sig = 51
	p := wakeTestPipe(t, sig)
	queued := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // the thread, with its mask, ends with the goroutine
		set := sigBit(sig)
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
			queued <- -1
			return
		}
		var b [1]byte
		_, _ = unix.Read(p[0], b[:])
		queued <- takePending(sig)
	}()
	waitInRead(t, p[0])
	if left := wakeReaders([]int{p[0]}, sig, 200*time.Millisecond); left != 1 {
		t.Errorf("%d readers left, want the one that blocks the signal", left)
	}
	if _, err := unix.Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if n := <-queued; n != 0 {
		t.Errorf("%d copies of signal %d queued on the thread that blocks it, want none", n, sig)
	}
}

// The wake signal must not be one an application waits for with
// sigwaitinfo or a signalfd: such a signal stays at SIG_DFL, blocked. A
// child copy of this test binary blocks the highest real-time signal on its
// main thread (where the application's mask is) and puts the top two at
// SIG_DFL; the choice must be the lower one.
func TestWakeSignalNotOneTheApplicationBlocks(t *testing.T) {
	if os.Getenv("USB4_WAKE_CHOICE_CHILD") == "1" {
		return // the child's work is in init
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWakeSignalNotOneTheApplicationBlocks$")
	cmd.Env = append(os.Environ(), "USB4_WAKE_CHOICE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	top := sigrtmax()
	want := fmt.Sprintf("wake signal %d\n", top-1)
	if !strings.Contains(string(out), want) {
		t.Errorf("child said %q, want %q (signal %d is the application's: blocked at SIG_DFL)", out, want, top)
	}
}

func init() {
	if os.Getenv("USB4_WAKE_CHOICE_CHILD") != "1" {
		return
	}
	// init runs on the main thread: block the top signal there, as a
	// sigwaitinfo user does before it starts threads.
	top := sigrtmax()
	set := sigBit(top)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		panic(err)
	}
	for _, s := range []int{top, top - 1} {
		sigDefault(s)
	}
	// The main thread must stay the one that blocks: choose from here.
	fmt.Printf("wake signal %d\n", wakeInstallForTest(0))
}

// sigrtmax is glibc's SIGRTMAX on Linux (the kernel's _NSIG).
func sigrtmax() int { return 64 }

// sigDefault puts sig at SIG_DFL behind the Go runtime's back (the test
// binary's runtime handles every signal).
func sigDefault(sig int) {
	var act struct {
		handler, flags, restorer uintptr
		mask                     uint64
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
		panic(e)
	}
}
