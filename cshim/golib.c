// The Go part (cshim/gopart, libusb4_rdma-go.so), loaded on demand.
//
// libibverbs loads every provider it has a driver file for as soon as one
// device is unmatched, so this front library sits in every RDMA process on
// a host with our package. Starting a Go runtime there (threads, RSS, signal
// handlers, static TLS) for processes that never open one of our devices is
// what issue 13 removes: the front is C, and the Go part is loaded by the
// first alloc_context of a device we claimed, once per process, with
// RTLD_LOCAL so its symbols never interpose on the application's.
//
// The only mutable globals here are the load's outcome, written once under
// pthread_once: a process has one Go runtime at most, whichever context
// asked for it first.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

static struct usb4_go_api go_api;
static int load_err;       // 0 after a successful load
static char load_msg[768]; // the one line for a failed load, without the device
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static atomic_bool load_started;

struct go_entry {
	const char *name;
	size_t off;
};
#define USB4_GO_TABLE_ENTRY(member, name) {#name, offsetof(struct usb4_go_api, member)},
static const struct go_entry go_entries[] = {USB4_GO_ENTRIES(USB4_GO_TABLE_ENTRY)};

const struct usb4_go_api *usb4_go(void)
{
	return &go_api;
}

bool usb4_go_started(void)
{
	return atomic_load(&load_started);
}

// go_part_path writes the Go part's path: the directory of this library's
// file, symlinks resolved (the -rdmavNN.so names are links to one file),
// plus USB4_GO_PART_NAME.
static int go_part_path(char *buf, size_t len)
{
	Dl_info info;
	char real[PATH_MAX];
	if (!dladdr((void *)go_part_path, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
		return -1;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	int n = snprintf(buf, len, "%s/%s", real, USB4_GO_PART_NAME);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

__attribute__((format(printf, 2, 3))) static void fail(int err, const char *fmt, ...)
{
	va_list ap;
	load_err = err;
	va_start(ap, fmt);
	vsnprintf(load_msg, sizeof(load_msg), fmt, ap);
	va_end(ap);
}

// Go's runtime in a c-shared library installs its own handlers for SIGSEGV,
// SIGBUS, SIGFPE, SIGPIPE and SIGURG when it starts, whatever was there
// (go:src/runtime/signal_unix.go sigInstallGoHandler). For the faults it
// forwards to the handler it found, when the fault is outside Go code, and
// needs its own to turn nil dereferences into panics. SIGPIPE and SIGURG
// are different: a SIG_IGN the application set for SIGPIPE is inherited
// across exec only while it is SIG_IGN, not Go's handler, and Go never
// forwards SIGURG (its preemption signal) at all, so an application's
// SIGURG handler went dead. So a SIGPIPE or SIGURG disposition the
// application set (anything but SIG_DFL) is put back right after the load.
// Go's runtime adds SA_ONSTACK to every handler it finds and does not
// take; the two put back get it too, or Go's preemption signals (SIGURG,
// sent to any of its threads while it runs a goroutine) would run the
// application's handler on a small goroutine stack: issue 22, qperf's
// sig_urg (installed with SA_SIGINFO only) aborted qperf that way.
// What that costs Go: with SIGURG not its own it loses asynchronous
// preemption (goroutines yield at function calls, as with
// GODEBUG=asyncpreemptoff=1), which the Go part's short control calls never
// need; with SIGPIPE ignored, writes to a closed pipe in Go return EPIPE,
// which the Go part handles as any error.
struct kept_signals {
	struct sigaction pipe, urg;
};

static void keep_signals(struct kept_signals *k)
{
	sigaction(SIGPIPE, NULL, &k->pipe);
	sigaction(SIGURG, NULL, &k->urg);
}

static bool set_by_application(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) || sa->sa_handler != SIG_DFL;
}

static void put_back(int sig, struct sigaction sa)
{
	if ((sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
		sa.sa_flags |= SA_ONSTACK;
	sigaction(sig, &sa, NULL);
}

static void restore_signals(const struct kept_signals *k)
{
	if (set_by_application(&k->pipe))
		put_back(SIGPIPE, k->pipe);
	if (set_by_application(&k->urg))
		put_back(SIGURG, k->urg);
}

static void load(void)
{
	char path[PATH_MAX];
	char why[512];
	bool have_path = go_part_path(path, sizeof(path)) == 0;
	if (usb4_host_runs_go(have_path ? path : NULL, why, sizeof(why))) {
		// Refused before anything is loaded: load_started stays false, so a
		// fork() child is not marked either.
		fail(EOPNOTSUPP,
		     "refused: this process already runs a Go runtime (%s), and a second one in the same "
		     "process is not supported; Go programs use the usb4verbs provider package directly",
		     why);
		return;
	}
	if (!have_path) {
		fail(ELIBACC, "cannot find the directory of the provider library itself (dladdr/realpath)");
		return;
	}
	if (access(path, R_OK) != 0) {
		fail(ENOENT, "%s is missing (%s); reinstall usb4verbs: the provider needs both of its files", path,
		     strerror(errno));
		return;
	}
	atomic_store(&load_started, true);
	struct kept_signals kept;
	keep_signals(&kept);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	// The runtime installed its handlers inside dlopen (Go's libpreinit).
	restore_signals(&kept);
	if (!h) {
		const char *why = dlerror();
		if (!why)
			why = "unknown dlopen error";
		if (strstr(why, "static TLS"))
			// The Go runtime uses initial-exec TLS; a late dlopen in a
			// process whose static TLS surplus is used up cannot place it.
			fail(ENOMEM, "%s; start the program with LD_PRELOAD=%s so its TLS is reserved at start",
			     why, path);
		else
			fail(ELIBACC, "%s; reinstall usb4verbs", why);
		return;
	}
	for (size_t i = 0; i < sizeof(go_entries) / sizeof(go_entries[0]); i++) {
		void *sym = dlsym(h, go_entries[i].name);
		if (!sym) {
			fail(ELIBBAD, "%s has no entry point %s: it is from another usb4verbs build; reinstall usb4verbs",
			     path, go_entries[i].name);
			return; // h stays open: the Go runtime may be up, never unload it
		}
		memcpy((char *)&go_api + go_entries[i].off, &sym, sizeof(sym));
	}
	struct usb4_go_config cfg = {.force_kernel_commands = usb4_abi_get()->force_kernel_commands,
				     .dv_send = usb4_abi_get()->dv_send};
	if (USB4_GO(Start, USB4_GO_API_VERSION, &cfg) != 0) {
		fail(ELIBBAD, "%s is from another usb4verbs build (entry points differ); reinstall usb4verbs", path);
		return;
	}
	load_err = 0;
}

int usb4_go_load(const char *dev)
{
	// The runtime's threads keep the mask of the thread that loads it
	// (gogate.c): no asynchronous signal reaches Go code on them. Blocked
	// for the whole once, so no handler can longjmp out of it either.
	struct usb4_go_saved saved;
	usb4_go_block_signals(&saved);
	pthread_once(&load_once, load);
	usb4_go_restore_signals(&saved);
	if (load_err)
		fprintf(stderr, USB4_LOG_PREFIX "%s: cannot open: Go part: %s\n", dev, load_msg);
	return load_err;
}
