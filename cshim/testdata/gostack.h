// The test programs' check of where a signal handler runs (issue 22): a
// frame on a goroutine's stack is the hazard itself, before it corrupts
// anything (which is luck). A handler frame belongs on the thread's
// alternate signal stack, on the main thread's stack, or on the stack glibc
// allocated with the thread, which lies just below its thread descriptor
// (pthread_self; glibc:nptl/allocate_stack.c, the TCB at the top of the
// stack block on x86_64). Go's own threads are such threads; their
// goroutines' stacks come from Go's heap (at a random place since Go 1.26),
// nowhere near. on_go_stack costs one system call. gostack_init first.
#ifndef USB4_TESTDATA_GOSTACK_H
#define USB4_TESTDATA_GOSTACK_H
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { GOSTACK_THREAD_STACK_MAX = 64 << 20 };
static uintptr_t gostack_main_lo, gostack_main_hi;

// gostack_init reads the top of the main thread's stack ([stack]); the
// mapping grows down, so its bottom is taken as far as any thread's.
static inline void gostack_init(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			gostack_main_lo = hi - GOSTACK_THREAD_STACK_MAX < lo ? hi - GOSTACK_THREAD_STACK_MAX : lo;
			gostack_main_hi = hi;
		}
	}
	if (f)
		fclose(f);
}

// on_go_stack: whether the calling handler runs on a stack that is neither
// its thread's nor the alternate one, i.e. a goroutine's.
static inline __attribute__((always_inline)) bool on_go_stack(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), self = (uintptr_t)pthread_self();
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		return false;
	if (sp >= gostack_main_lo && sp < gostack_main_hi)
		return false;
	return !(sp < self && self - sp < GOSTACK_THREAD_STACK_MAX);
}

#endif
