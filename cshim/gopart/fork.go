package main

import "C"

import _ "unsafe" // go:linkname

// fork() and the runtime's thread creation (issue 24). The runtime holds
// execLock for reading while it creates a thread (newm: newosproc, which is
// pthread_create here), and glibc up to at least 2.36 does not reset its
// dl_load_tls_lock, which pthread_create holds while it sets up the new
// thread's TLS, in a fork() child: a child forked at that moment hung at its
// first pthread_create or at the dlopen of its own copy of the Go part. The
// front's atfork prepare handler therefore takes execLock for writing
// (usb4goBeforeFork), so no runtime thread is being created while the
// process forks, and its parent handler gives it back (usb4goAfterFork).
// syscall.Exec takes the same lock for the same reason.

//go:linkname runtimeBeforeExec syscall.runtime_BeforeExec
func runtimeBeforeExec()

//go:linkname runtimeAfterExec syscall.runtime_AfterExec
func runtimeAfterExec()

//export usb4goBeforeFork
func usb4goBeforeFork() { runtimeBeforeExec() }

//export usb4goAfterFork
func usb4goAfterFork() { runtimeAfterExec() }
