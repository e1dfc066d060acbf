// fork() children and the cost of a first Go call on a thread
// (reference: cgo-callback-cost.md).
//
// A fork() child has only the forking thread: the Go runtime of the Go part
// the parent loaded is dead there (its threads are gone, a call into it
// hangs when it was busy at fork time). So the child never enters it again:
// the atfork child handler below resets the load state (golib.c), and the
// child's first open loads a new copy of the Go part with a runtime of its
// own (golib.c, "a new image"). Contexts the parent opened belong to the
// dead copy: the first control op on one in the child adopts it into the
// child's Go part (the kernel ucontext on the shared command fd is the
// parent's, which the kernel serves for the child as for rdma-core's
// providers), so new objects on it work; the parent's objects are adopted
// the same way at their first control op (usb4_obj_adopt: a Go object of
// the child's on the object's kernel handle), so the kernel answers for
// them as it does for rdma-core's providers. Data-path ops never enter Go
// and keep working on what is still mapped, as rdma-core's providers do
// without ibv_fork_init.
//
// The first call into Go from a C thread that has never called Go costs
// ~0.1-0.4 ms: the runtime hands the thread an "extra M" and creates the
// next one. At the first context open of each process image we run a couple
// of short-lived threads through a no-op Go call, so the pool of extra Ms is
// filled before application threads arrive. Once per image is enough: an
// exiting C thread gives its M back to the pool, and doing it on every open
// made a churn of open/close pay two thread creations per cycle.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static atomic_bool fork_logged;
static pthread_once_t prewarmed = PTHREAD_ONCE_INIT;
// Serialises adoptions (usb4_in_fork_child); re-initialised in a child.
static pthread_mutex_t adopt_lock = PTHREAD_MUTEX_INITIALIZER;

// Runs in every fork() child, before fork() returns there: no thread, no
// allocation, no load (golib.c's part is a few sigaction calls when the
// parent had loaded the Go part). pthread_once_t is reset by assignment: the
// child is single-threaded here, and a prewarm or load that another parent
// thread was running at fork time is dead in the child.
static void on_fork_child(void)
{
	usb4_go_forked();
	atomic_store(&fork_logged, false);
	prewarmed = (pthread_once_t)PTHREAD_ONCE_INIT;
	pthread_mutex_init(&adopt_lock, NULL);
}

void usb4_fork_guard_install(void)
{
	pthread_atfork(usb4_go_fork_prepare, usb4_go_fork_parent, on_fork_child);
}

bool usb4_in_fork_child(void *ibv_ctx, const char *verb)
{
	if (usb4_ctx_image(ibv_ctx) == usb4_go_image())
		return false;
	pthread_mutex_lock(&adopt_lock);
	int err = usb4_ctx_image(ibv_ctx) == usb4_go_image() ? 0 : usb4_ctx_adopt(ibv_ctx);
	pthread_mutex_unlock(&adopt_lock);
	if (!err)
		return false;
	if (!atomic_exchange(&fork_logged, true))
		fprintf(stderr,
			USB4_LOG_PREFIX "%s in a fork() child on a context the parent opened: this process's Go part "
			"cannot take it over (%s): ENOSYS\n",
			verb, strerror(err));
	return true;
}

int usb4_obj_adopt(void *ibv_ctx, uintptr_t *go, unsigned *image, enum usb4_obj_kind kind,
		   struct usb4_adopt_req *req)
{
	unsigned now = usb4_go_image();
	if (__atomic_load_n(image, __ATOMIC_ACQUIRE) == now)
		return 0;
	pthread_mutex_lock(&adopt_lock);
	int err = 0;
	if (__atomic_load_n(image, __ATOMIC_ACQUIRE) != now && *go != 0) {
		uintptr_t mine = 0;
		err = USB4_GO(AdoptObject, usb4_ctx_handle(ibv_ctx), (int)kind, req, &mine);
		if (!err) {
			*go = mine;
			__atomic_store_n(image, now, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&adopt_lock);
	return err;
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

void usb4_prewarm_threads(void)
{
	pthread_once(&prewarmed, prewarm_once);
}
