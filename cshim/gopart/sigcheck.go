package main

/*
#define _GNU_SOURCE
#include "onstack.h"

#include <pthread.h>

// The check runs on one of the runtime's own threads: where it keeps SIGURG
// blocked (asynchronous preemption off), every thread that runs Go does and
// no SIGURG handler can run on a goroutine's stack, so SIGURG is left out,
// as the front's gate leaves it out (gogate.c urg_state, issue 34).
static void usb4_go_sigcheck(unsigned *logged)
{
	sigset_t cur;
	int skip = pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, SIGURG) ? SIGURG : 0;
	usb4_add_onstack_except((atomic_uint *)logged, skip);
}
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// The front adds SA_ONSTACK to an application's SIGURG, SIGCHLD and SIGPROF
// handler at every call into the Go part (gogate.c), but the runtime's
// threads also run between calls: a garbage collection, the removal
// watcher's check. ITIMER_PROF and CPU-clock timers signal the thread that
// used the tick, so a profiler's SIGPROF handler installed without
// SA_ONSTACK after the application's last control verb ran on goroutine
// stacks there (issue 31 item 4). The Go part checks as well, every
// sigCheckInterval: a handler installed between calls has SA_ONSTACK
// within that. The check is C on the thread's system stack, where a signal
// is safe; its bits of onstack.h's once-only log line are these.
const sigCheckInterval = 100 * time.Millisecond

var sigCheckLogged atomic.Uint32

func startSignalCheck() {
	go func() {
		for range time.Tick(sigCheckInterval) {
			C.usb4_go_sigcheck((*C.uint)(unsafe.Pointer(&sigCheckLogged)))
		}
	}()
}
