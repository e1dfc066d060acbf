package main

/*
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>

static void usb4_wake_noop(int sig) { (void)sig; }

// usb4_wake_install installs a handler that does nothing, without
// SA_RESTART, for sig; with sig 0 for the highest real-time signal nobody
// handles (disposition SIG_DFL) among usable (bit s-1 for signal s).
// Returns the signal, or 0 when none is free.
static int usb4_wake_install(int sig, uint64_t usable)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usb4_wake_noop;
	sigemptyset(&sa.sa_mask);
	if (sig)
		return sigaction(sig, &sa, NULL) == 0 ? sig : 0;
	for (int s = SIGRTMAX; s >= SIGRTMIN + 2; s--) {
		struct sigaction old;
		if (s > 64 || !((usable >> (s - 1)) & 1))
			continue;
		if (sigaction(s, NULL, &old) != 0)
			continue;
		if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
			continue;
		if (sigaction(s, &sa, NULL) == 0)
			return s;
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
)

// Waking the threads a removal left in read().
//
// The removal puts pipes holding the last events at the async fd's and the
// completion channels' numbers (provider/removal.go), but a thread already
// blocked in read() on the old file stays there: NCCL's async thread in
// ibv_get_async_event, gloo's in ibv_get_cq_event. Such a read also keeps
// the kernel's file, so the unregistration keeps waiting. The kernel wakes a
// completion channel's reader when the command file is released
// (uverbs_completion_event_file_destroy_uobj closes its queue), but not the
// async file's (its queue closes only when the async file itself is
// released, linux:drivers/infiniband/core/uverbs_std_types_async_fd.c). So
// every thread whose current system call is read() on one of those fds
// (/proc/self/task/*/syscall) gets a real-time signal whose handler does
// nothing and was installed without SA_RESTART: its read() fails with EINTR,
// libibverbs returns the error, and the next read finds the pipe.
//
// The signal is the highest real-time one with no handler (SIG_DFL) that the
// main thread neither blocks nor has pending when a removal first needs one;
// it stays installed. A signal left at SIG_DFL but blocked is how a
// sigwaitinfo or signalfd user takes its signals, and the application sets
// its mask on the main thread before it starts others (the Go part's own
// threads block everything, so they say nothing). With none free the choice
// is tried again at the next removal.
//
// A thread that blocks the signal (or has it pending already) is not sent
// it: the read would not be interrupted, and each real-time copy would stay
// queued for the application to take as its own. Such a reader stays
// blocked (one log line).

var wake struct {
	mu  sync.Mutex
	sig int
}

func init() { provider.WakeBlockedReaders = wakeBlockedReaders }

// wakeBlockedReaders interrupts every thread blocked in read() on one of
// fds, for up to two seconds.
func wakeBlockedReaders(fds []int) {
	wake.mu.Lock()
	if wake.sig == 0 {
		wake.sig = chooseWakeSignal()
	}
	sig := wake.sig
	wake.mu.Unlock()
	wakeReaders(fds, sig, 2*time.Second)
}

// chooseWakeSignal installs the wake handler on a signal the application
// does not use (see above) and returns it, or 0.
func chooseWakeSignal() int {
	blocked, pending, ok := taskSignals(unix.Getpid())
	if !ok {
		return 0
	}
	return int(C.usb4_wake_install(0, C.uint64_t(^(blocked | pending))))
}

// wakeReaders signals the readers of fds with sig until none is left or
// the time is up; it reports how many remain. A reader that blocks sig is
// never sent it; when only such readers remain it gives up at once.
func wakeReaders(fds []int, sig int, limit time.Duration) int {
	if len(fds) == 0 {
		return 0
	}
	pid := unix.Getpid()
	deadline := time.Now().Add(limit)
	for {
		tids := readersOf(fds)
		if len(tids) == 0 {
			return 0
		}
		reachable := 0
		if sig != 0 {
			bit := uint64(1) << uint(sig-1)
			for _, tid := range tids {
				blocked, pending, ok := taskSignals(tid)
				if !ok || blocked&bit != 0 {
					continue
				}
				reachable++
				if pending&bit == 0 {
					_ = unix.Tgkill(pid, tid, unix.Signal(sig))
				}
			}
		}
		if reachable == 0 || time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "libusb4_rdma: %d thread(s) stay blocked reading the removed device's event fds (no free real-time signal, or it is blocked)\n", len(tids))
			return len(tids)
		}
		time.Sleep(time.Millisecond)
	}
}

// taskSignals reads a thread's blocked signals and those pending for it
// (its own and the process's) from /proc/self/task/<tid>/status; bit s-1
// stands for signal s.
func taskSignals(tid int) (blocked, pending uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, val, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		switch name {
		case "SigBlk":
			blocked = v
		case "SigPnd", "ShdPnd":
			pending |= v
		default:
			continue
		}
		if err != nil {
			return 0, 0, false
		}
		seen++
	}
	return blocked, pending, seen == 3
}

// readersOf lists the threads of this process whose current system call is
// read() on one of fds.
func readersOf(fds []int) []int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/syscall")
		if err != nil {
			continue
		}
		if fd, ok := readFD(string(b)); ok {
			for _, want := range fds {
				if fd == want {
					out = append(out, tid)
					break
				}
			}
		}
	}
	return out
}

// readFD decodes a /proc/<pid>/task/<tid>/syscall line ("NR arg1 ... sp pc",
// the arguments in hex): the fd of a read().
func readFD(line string) (int, bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || nr != unix.SYS_READ {
		return 0, false
	}
	fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 32)
	if err != nil {
		return 0, false
	}
	return int(fd), true
}

// wakeInstallForTest puts the handler on sig (tests: the Go runtime of a
// test binary handles every signal).
func wakeInstallForTest(sig int) int {
	if sig == 0 {
		return chooseWakeSignal()
	}
	return int(C.usb4_wake_install(C.int(sig), 0))
}
