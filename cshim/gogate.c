// The boundary between the front and the Go part for signals (issue 22;
// shim.h: USB4_GO). Go's rules for a c-shared library (go:src/os/signal
// doc.go, "Go programs that use cgo or SWIG"): handlers the application
// installs after the runtime started must have SA_ONSTACK, and non-Go code
// must not longjmp over Go frames. Applications do neither on purpose:
// qperf installs its SIGALRM/SIGURG/SIGPIPE handlers with SA_SIGINFO only,
// Pythons before 3.10 install theirs without SA_ONSTACK, and programs time
// out blocking calls with alarm() and a siglongjmp. A handler that runs on
// a thread while it executes Go runs on that goroutine's stack (a few KiB;
// the kernel's signal frame alone is 1-3 KiB), overflows it and corrupts
// the runtime: "fatal error: unknown caller pc", "exitsyscall: syscall
// frame is no longer valid", SIGSEGV in the runtime, or a hang.
//
// So no asynchronous signal is delivered to a thread while it is in Go:
//  - application threads: usb4_go_enter blocks them around every call,
//    usb4_go_leave restores the mask (what arrived meanwhile is delivered
//    then, in C, where a handler or a longjmp is the application's
//    business as with any C library);
//  - the runtime's threads: the Go part is loaded with them blocked, and
//    the runtime gives every thread it creates the mask it started with
//    (go:src/runtime/proc.go schedinit initSigmask; a c-shared library
//    may block every signal but the ones below, signal_unix.go
//    blockableSig);
//  - SIGCHLD and SIGPROF the runtime unblocks on each of its threads (and
//    on an application thread at its first call) whatever the mask, and SIGURG
//    (Go's preemption signal) too unless asynchronous preemption is off,
//    as it is in our build (scripts/build-provider.sh). For these an
//    application handler without SA_ONSTACK gets it added at every call
//    (SIGURG only where the runtime unblocks it: urg_state below),
//    and the alternate stack the runtime gives each thread takes the
//    frame. Go's runtime does the same, once, to every handler it finds
//    when it starts. What stays exposed: a handler installed after the
//    application's last call, for a signal that reaches a runtime thread
//    while it runs a goroutine (the runtime's own work between calls).
// Synchronous signals (faults) are never blocked: a fault while blocked
// kills the process, and Go needs its own for nil checks.
//
// The one mutable state here is per thread: whether the thread is inside a
// call. Set with the signals blocked, so only a fault's handler (Go forwards
// a fault outside Go code to the application's) can run while it is set;
// if that handler longjmps out, the Go frames below are gone and the next
// call from the thread would crash the runtime, so it is refused.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "onstack.h"
#include "shim.h"

// initial-exec: the general-dynamic model would call __tls_get_addr and add
// ld-linux-x86-64.so.2 to the front's NEEDED (packaging allows libc only);
// one byte of glibc's static TLS surplus, which exists for such dlopened
// objects.
static _Thread_local bool in_go __attribute__((tls_model("initial-exec")));
static atomic_bool refused_logged;
static atomic_uint onstack_logged; // bit per entry of onstack.h's usb4_onstack_sigs

static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

_Static_assert(sizeof(sigset_t) == sizeof(((struct usb4_go_saved *)0)->sigset), "sigset_t size");
_Static_assert(_Alignof(sigset_t) <= 8, "sigset_t alignment");

void usb4_go_block_signals(struct usb4_go_saved *saved)
{
	sigset_t block;
	sigfillset(&block);
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		sigdelset(&block, sync_sigs[i]);
	pthread_sigmask(SIG_BLOCK, &block, (sigset_t *)(void *)saved->sigset);
}

void usb4_go_restore_signals(const struct usb4_go_saved *saved)
{
	pthread_sigmask(SIG_SETMASK, (const sigset_t *)(const void *)saved->sigset, NULL);
}

// What the runtime does with SIGURG, as the first call of a thread shows
// (issue 34). That call's needm runs minit on the thread, which unblocks
// exactly the signals the runtime never lets its threads block
// (go:src/runtime/signal_unix.go minitSignalMask, blockableSig): SIGCHLD
// and SIGPROF always, SIGURG only while asynchronous preemption is on
// (GODEBUG's asyncpreemptoff=0 over our build's default). The gate blocked
// all three at entry, so a mask at the end of a call without SIGCHLD is
// minit's, and its SIGURG bit is the runtime's verdict. URG_BLOCKED: every
// thread that runs Go keeps SIGURG blocked (the runtime's from the mask of
// the load, application threads by the gate) and the runtime sends none,
// so no SIGURG handler can run on a goroutine's stack and the check can
// leave SIGURG out. Until a first call has ended, and for good once one
// saw SIGURG unblocked, SIGURG is checked.
enum { URG_UNKNOWN, URG_BLOCKED, URG_UNBLOCKED };
static atomic_int urg_state;

// The check costs a sigaction read per signal and call into the Go part
// (control verbs only; the data path never enters Go): two, SIGCHLD and
// SIGPROF, with SIGURG left out as above, else three. It used to run at
// most every 10 ms: a handler installed right after a call then stayed
// without SA_ONSTACK through the next calls, while they woke the runtime's
// threads.
int usb4_go_enter(struct usb4_go_saved *saved, const char *entry)
{
	usb4_go_block_signals(saved);
	if (in_go) {
		usb4_go_restore_signals(saved);
		if (!atomic_exchange(&refused_logged, true))
			fprintf(stderr,
				USB4_LOG_PREFIX "%s: refused (ENOTRECOVERABLE): an earlier call of this thread into "
						"the Go part never returned (a signal handler longjmp'd out of it); "
						"this thread cannot enter Go again. Do not longjmp out of signal "
						"handlers that run inside verbs\n",
				entry);
		return ENOTRECOVERABLE;
	}
	in_go = true;
	usb4_add_onstack_except(&onstack_logged, atomic_load(&urg_state) == URG_BLOCKED ? SIGURG : 0);
	return 0;
}

bool usb4_go_inside(void)
{
	return in_go;
}

void usb4_go_leave(const struct usb4_go_saved *saved)
{
	in_go = false;
	// The restore also returns the mask the call ran under: no extra call.
	sigset_t inside;
	if (pthread_sigmask(SIG_SETMASK, (const sigset_t *)(const void *)saved->sigset, &inside) != 0 ||
	    sigismember(&inside, SIGCHLD))
		return; // not a thread's first call: the mask is the gate's
	if (!sigismember(&inside, SIGURG))
		atomic_store(&urg_state, URG_UNBLOCKED);
	else {
		int unknown = URG_UNKNOWN;
		atomic_compare_exchange_strong(&urg_state, &unknown, URG_BLOCKED);
	}
}
