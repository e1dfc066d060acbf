// fork() children and the cost of a first Go call on a thread
// (reference: cgo-callback-cost.md).
//
// A fork() child has only the forking thread; the Go runtime's threads are
// gone, and a call into Go hangs when the runtime was busy at fork time. So
// an atfork child handler marks the process, and every control op checks the
// mark before it would enter Go and fails with ENOSYS instead (one log
// line). Data-path ops never enter Go and keep working on what is still
// mapped, as rdma-core's providers do without ibv_fork_init.
//
// The first call into Go from a C thread that has never called Go costs
// ~0.1-0.4 ms: the runtime hands the thread an "extra M" and creates the
// next one. At the first context open of the process we run a couple of
// short-lived threads through a no-op Go call, so the pool of extra Ms is
// filled before application threads arrive. Once is enough: an exiting C
// thread gives its M back to the pool, and doing it on every open made a
// churn of open/close pay two thread creations per cycle.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "shim.h"

static atomic_bool forked;
static atomic_bool fork_logged;

// A child of a process that never began loading the Go part has no Go
// runtime to be broken: it may load its own (golib.c), so it is not marked.
static void on_fork_child(void)
{
	if (usb4_go_started())
		atomic_store(&forked, true);
}

void usb4_fork_guard_install(void)
{
	pthread_atfork(NULL, NULL, on_fork_child);
}

bool usb4_in_fork_child(const char *verb)
{
	if (!atomic_load_explicit(&forked, memory_order_relaxed))
		return false;
	if (!atomic_exchange(&fork_logged, true))
		fprintf(stderr,
			USB4_LOG_PREFIX "%s in a fork() child: control verbs are not available after fork (ENOSYS)\n",
			verb);
	return true;
}

enum { PREWARM_THREADS = 2 };

static void *warm(void *arg)
{
	(void)arg;
	USB4_GO_VOID(Warm);
	return NULL;
}

static void prewarm_once(void)
{
	pthread_t t[PREWARM_THREADS];
	int n = 0;
	for (; n < PREWARM_THREADS; n++)
		if (pthread_create(&t[n], NULL, warm, NULL) != 0)
			break;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static pthread_once_t prewarmed = PTHREAD_ONCE_INIT;

void usb4_prewarm_threads(void)
{
	pthread_once(&prewarmed, prewarm_once);
}
