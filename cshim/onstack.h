// The SA_ONSTACK check (issue 22; shared by the front, gogate.c, at every
// call into the Go part, and by the Go part's periodic check, issue 31
// item 4: gopart/sigcheck.go). Header-only, so both libraries have it from
// one source; the log-once bits are the caller's.
#ifndef USB4_ONSTACK_H
#define USB4_ONSTACK_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "shim.h"

// The signals the runtime never lets its threads block (SIGURG only while
// asynchronous preemption is on).
static const struct {
	int sig;
	const char *name;
} usb4_onstack_sigs[] __attribute__((unused)) = {{SIGURG, "SIGURG"}, {SIGCHLD, "SIGCHLD"}, {SIGPROF, "SIGPROF"}};

static inline bool usb4_is_handler(const struct sigaction *sa)
{
	void *fn = (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
	return fn != (void *)SIG_DFL && fn != (void *)SIG_IGN;
}

// usb4_same_action: the whole disposition, handler, flags and mask (the kernel
// fills only the first 64 bits of a sigset_t: compared signal by signal).
static inline bool usb4_same_action(const struct sigaction *a, const struct sigaction *b)
{
	if (a->sa_handler != b->sa_handler || a->sa_flags != b->sa_flags)
		return false;
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&a->sa_mask, s) != sigismember(&b->sa_mask, s))
			return false;
	return true;
}

// usb4_add_onstack gives an application handler of the signals the runtime
// never lets its threads block the SA_ONSTACK it lacks. The read and the
// write are two system calls: the write returns what it replaced, and when
// that is not what was read, the application wrote in between (any part of
// the action: handler, sa_mask, SA_RESTART...), so its write is put back
// (with SA_ONSTACK for a handler), again until what a write replaced is
// the provider's own previous write.
// usb4_add_onstack_except is that check without the signal skip (0: none):
// gogate.c leaves SIGURG out where the runtime keeps it blocked on every
// thread that runs Go (asynchronous preemption off).
static inline void usb4_add_onstack_except(atomic_uint *logged, int skip)
{
	for (size_t i = 0; i < sizeof(usb4_onstack_sigs) / sizeof(usb4_onstack_sigs[0]); i++) {
		int sig = usb4_onstack_sigs[i].sig;
		struct sigaction seen, want, old;
		if (sig == skip || sigaction(sig, NULL, &seen) != 0 || !usb4_is_handler(&seen) || (seen.sa_flags & SA_ONSTACK))
			continue;
		want = seen;
		want.sa_flags |= SA_ONSTACK;
		for (int tries = 0; tries < 8 && sigaction(sig, &want, &old) == 0 && !usb4_same_action(&old, &seen); tries++) {
			seen = want;
			want = old;
			if (usb4_is_handler(&want))
				want.sa_flags |= SA_ONSTACK;
		}
		unsigned bit = 1u << i;
		if (!(atomic_fetch_or(logged, bit) & bit))
			fprintf(stderr,
				USB4_LOG_PREFIX "the application's %s handler has no SA_ONSTACK, which the Go part's "
						"threads need; added it (install handlers with SA_ONSTACK)\n",
				usb4_onstack_sigs[i].name);
	}
}

static inline void usb4_add_onstack(atomic_uint *logged)
{
	usb4_add_onstack_except(logged, 0);
}

#endif
