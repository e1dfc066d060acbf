// fork() and the runtime's thread creation (issues 24 and 31). glibc (2.36,
// Debian 12) keeps a dynamic-linker lock (dl_load_tls_lock) while
// pthread_create sets up the new thread's TLS and does not reset it in a
// fork() child: a child forked while one of the runtime's threads was in
// pthread_create hung at its first pthread_create or at the dlopen of its
// own copy of the Go part. So no runtime thread is created while the
// process forks: every pthread_create of this library (runtime/cgo's, for
// each new M) holds fork_guard for reading, and the front's atfork prepare
// handler takes it for writing (usb4goBeforeFork), its parent handler gives
// it back (usb4goAfterFork).
//
// Issue 31 item 1: this used to be the runtime's exec lock, taken and given
// back by Go code (go:src/runtime/proc.go syscall_runtime_BeforeExec). The
// prepare handler returned to C holding it, without a P; a runtime thread
// that created a thread meanwhile (newm1) waited for it holding a P
// (go:src/runtime/rwmutex.go rlock keeps it), and the parent handler, Go
// code again, waited for a P for good: with one P (one CPU) the parent hung.
// Here neither side needs Go: the prepare and parent handlers are C, and a
// runtime thread waiting in pthread_create waits for them only.
//
// The lock of a dead image (a fork() child's copy of the parent's) stays
// held in the child: nothing calls that image again (golib.c loads a copy).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "shim.h"

static pthread_rwlock_t fork_guard = PTHREAD_RWLOCK_INITIALIZER;

// Hidden: the link binds runtime/cgo's calls to it, and no other object's.
__attribute__((visibility("hidden"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
							 void *(*start)(void *), void *arg)
{
	// RTLD_DEFAULT, the global scope, is what runtime/cgo's call bound to before this
	// wrapper: a sanitizer's interceptor where one is loaded, else libc's. RTLD_NEXT from
	// this RTLD_LOCAL object skipped the interceptor, and a ThreadSanitizer process
	// crashed in the first runtime thread (address 0x418, reliability concurrency_tsan).
	__typeof__(&pthread_create) real = (__typeof__(&pthread_create))dlsym(RTLD_DEFAULT, "pthread_create");
	if (!real)
		return EAGAIN;
	pthread_rwlock_rdlock(&fork_guard);
	int rc = real(thread, attr, start, arg);
	pthread_rwlock_unlock(&fork_guard);
	return rc;
}

void usb4goBeforeFork(void)
{
	pthread_rwlock_wrlock(&fork_guard);
}

void usb4goAfterFork(void)
{
	pthread_rwlock_unlock(&fork_guard);
}
