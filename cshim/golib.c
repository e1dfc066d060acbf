// The Go part (cshim/gopart, libusb4_rdma-go.so), loaded on demand.
//
// libibverbs loads every provider it has a driver file for as soon as one
// device is unmatched, so this front library sits in every RDMA process on
// a host with our package. Starting a Go runtime there (threads, RSS, signal
// handlers, static TLS) for processes that never open one of our devices is
// what issue 13 removes: the front is C, and the Go part is loaded by the
// first alloc_context of a device we claimed, once per process image, with
// RTLD_LOCAL so its symbols never interpose on the application's.
//
// A process image is the process, or a fork() child of it (issue 24). fork()
// copies only the calling thread, so the Go runtime a parent loaded is dead
// in the child and is never entered again (fork.c). The child's first open
// loads a new image of the Go part with a runtime of its own: the file's
// loaded extent copied into a memfd and dlopened as /proc/self/fd/N, which
// glibc treats as another object (another device and inode; a dlopen of the
// same path would hand back the dead copy). Not dlmopen: a new link-map
// namespace brings a second libc, whose malloc would own the C memory the Go
// part hands to the front (engine objects the front frees). Before the copy
// is loaded, the dead copy's signal handlers are put back to what was there
// before it was loaded (usb4_go_forked, at fork time), so the new runtime
// forwards to the application's handlers, never into the dead runtime.
//
// The only mutable globals here are the image's load outcome, written once
// under its pthread_once, and reset by the fork() child handler: a process
// image has one live Go runtime at most, whichever context asked first.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "engine_api.h"
#include "onstack.h"
#include "shim.h"

// The signals the Go runtime may take over when it starts in a c-shared
// library (go:src/runtime/signal_unix.go sigInstallGoHandler installs the
// synchronous ones, SIGPIPE and its preemption signal SIGURG); the others
// are listed so that a runtime which takes more is still undone in a child.
static const int go_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGPIPE, SIGURG};
enum { N_GO_SIGNALS = sizeof(go_signals) / sizeof(go_signals[0]), N_FAULT_SIGNALS = 6 };
static const char *const go_signal_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS"};
_Static_assert(sizeof(go_signal_names) / sizeof(go_signal_names[0]) == N_FAULT_SIGNALS, "the faults lead go_signals");

enum image_state {
	IMAGE_NONE,    // nothing loaded in this image
	IMAGE_LOADING, // dlopen under way: pre is valid
	IMAGE_LOADED,  // the runtime is up: pre and post are valid
};

static struct go_image {
	unsigned id;     // usb4_go_image()
	bool inherited;  // an earlier image mapped the Go part's file: load a copy
	pthread_once_t once;
	int err;         // 0 after a successful load
	char msg[768];   // the one line for a failed load, without the device
	struct usb4_go_api api;
	_Atomic int state; // enum image_state
	_Atomic bool ready; // the API table is complete and the runtime started
	// Each signal's disposition before the dlopen and right after it (the
	// runtime's handler where it installed one).
	struct sigaction pre[N_GO_SIGNALS], post[N_GO_SIGNALS];
} image = {.once = PTHREAD_ONCE_INIT};

// Whether this thread took the Go part's thread-creation lock in the atfork
// prepare handler (the parent handler gives it back only then: the load may
// complete on another thread in between).
// initial-exec as gogate.c's in_go, which also keeps a fork() child's write
// off glibc's TLS lock.
static _Thread_local bool fork_held __attribute__((tls_model("initial-exec")));

// The one engine: the Go part's provider/dataplane calls these (built with
// the usb4front tag it has no engine of its own, engine_api.h).
#define ENGINE_API_FILL_R(ret, name, params, args) .name = usb4v_##name,
#define ENGINE_API_FILL_V(name, params, args) .name = usb4v_##name,
static const struct usb4v_engine_api engine_api = {USB4V_ENGINE_API(ENGINE_API_FILL_R, ENGINE_API_FILL_V)};

struct go_entry {
	const char *name;
	size_t off;
};
#define USB4_GO_TABLE_ENTRY(member, name) {#name, offsetof(struct usb4_go_api, member)},
static const struct go_entry go_entries[] = {USB4_GO_ENTRIES(USB4_GO_TABLE_ENTRY)};

const struct usb4_go_api *usb4_go(void)
{
	return &image.api;
}

unsigned usb4_go_image(void)
{
	return image.id;
}

static bool same_handler(const struct sigaction *a, const struct sigaction *b)
{
	return (void *)a->sa_handler == (void *)b->sa_handler;
}

void usb4_go_forked(void)
{
	int st = atomic_load(&image.state);
	for (int i = 0; st != IMAGE_NONE && i < N_GO_SIGNALS; i++) {
		struct sigaction cur;
		// Loaded: put back what the runtime replaced, where it is still
		// the runtime's (a handler the application set since stays).
		// Loading at fork time (another thread was in the first open's
		// dlopen): the runtime may have installed any of them.
		if (st == IMAGE_LOADED && same_handler(&image.pre[i], &image.post[i]))
			continue;
		if (sigaction(go_signals[i], NULL, &cur) != 0)
			continue;
		if (st == IMAGE_LOADED ? same_handler(&cur, &image.post[i]) : !same_handler(&cur, &image.pre[i]))
			sigaction(go_signals[i], &image.pre[i], NULL);
	}
	bool inherited = image.inherited || st != IMAGE_NONE;
	unsigned id = image.id + 1;
	fork_held = false; // the lock belongs to the dead runtime
	memset(&image, 0, sizeof(image));
	image.id = id;
	image.inherited = inherited;
	image.once = (pthread_once_t)PTHREAD_ONCE_INIT;
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
	image.err = err;
	va_start(ap, fmt);
	vsnprintf(image.msg, sizeof(image.msg), fmt, ap);
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
// Go's asynchronous preemption (SIGURG) is off in our build anyway
// (scripts/build-provider.sh: goroutines yield at function calls), which
// the Go part's short control calls never need; with SIGPIPE ignored,
// writes to a closed pipe in Go return EPIPE, which the Go part handles as
// any error.
static bool set_by_application(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) || sa->sa_handler != SIG_DFL;
}

// put_back reinstalls an application's disposition with SA_ONSTACK added to
// a handler: Go's runtime adds it to every handler it finds and does not
// take; the two put back need it too, or Go's preemption signals (SIGURG,
// sent to any of its threads while it runs a goroutine, before our build
// turned asynchronous preemption off) would run the application's handler
// on a small goroutine stack: issue 22, qperf's sig_urg (installed with
// SA_SIGINFO only) aborted qperf that way.
static void put_back(int sig, struct sigaction sa)
{
	if ((sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
		sa.sa_flags |= SA_ONSTACK;
	sigaction(sig, &sa, NULL);
}

// fault_to_application is what the runtime forwards a fault outside Go code
// to (issue 31 item 3) where the application had a handler before the load:
// go:src/runtime/signal_unix.go initsig keeps the handler it replaces and
// sigfwdgo calls it. A fault outside the Go part goes on to the
// application's handler, as before. A fault in C that a call into the Go
// part made (the engine: a join under the record's lock, a post under the
// QP's) is not handed on: a handler that siglongjmps out would leave every
// lock the call holds, Go's and the engine's, held for good (the process
// then hangs at the next verb), and strand its goroutine inside a cgo call.
// The process dies by the signal instead, as it does without a handler.
static void fault_to_application(int sig, siginfo_t *info, void *uctx)
{
	for (int i = 0; i < N_FAULT_SIGNALS; i++) {
		if (go_signals[i] != sig)
			continue;
		const struct sigaction *app = &image.pre[i];
		if (!usb4_go_inside() && usb4_is_handler(app)) {
			app->sa_sigaction(sig, info, uctx); // as sigfwdgo does, for either kind
			return;
		}
		if (usb4_go_inside()) {
			static const char a[] = USB4_LOG_PREFIX, b[] = " inside a call into the Go part: not handed to the "
								     "application's handler (a jump out of it would leave "
								     "the provider's locks held); the process dies by the "
								     "signal\n";
			ssize_t r = write(STDERR_FILENO, a, sizeof(a) - 1);
			r = write(STDERR_FILENO, go_signal_names[i], strlen(go_signal_names[i]));
			r = write(STDERR_FILENO, b, sizeof(b) - 1);
			(void)r;
		}
	}
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig); // delivered on return, or the fault recurs first
}

// keep_signals records every Go signal's disposition before the dlopen, and
// for a fault the application handles installs fault_to_application, for
// the runtime to find and forward to.
static void keep_signals(void)
{
	for (int i = 0; i < N_GO_SIGNALS; i++) {
		sigaction(go_signals[i], NULL, &image.pre[i]);
		if (i < N_FAULT_SIGNALS && usb4_is_handler(&image.pre[i])) {
			struct sigaction sa = image.pre[i];
			sa.sa_sigaction = fault_to_application;
			sa.sa_flags |= SA_SIGINFO | SA_ONSTACK;
			sigaction(go_signals[i], &sa, NULL);
		}
	}
}

// restore_signals records what the runtime installed (for a fork() child to
// undo: usb4_go_forked), then puts back SIGPIPE and SIGURG where the
// application had set them.
static void restore_signals(void)
{
	for (int i = 0; i < N_GO_SIGNALS; i++) {
		sigaction(go_signals[i], NULL, &image.post[i]);
		if (image.post[i].sa_sigaction == fault_to_application) { // the runtime kept it: the application's again
			sigaction(go_signals[i], &image.pre[i], NULL);
			image.post[i] = image.pre[i];
		}
		if ((go_signals[i] == SIGPIPE || go_signals[i] == SIGURG) && set_by_application(&image.pre[i]))
			put_back(go_signals[i], image.pre[i]);
	}
}

// loaded_extent: the end of the last PT_LOAD's file bytes of the ELF file
// in fd, or its size when the headers do not say (all the loader reads;
// section headers and debug information lie after it).
static off_t loaded_extent(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	ElfW(Ehdr) eh;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > 64)
		return st.st_size;
	ElfW(Phdr) ph[64];
	size_t len = (size_t)eh.e_phnum * sizeof(ph[0]);
	if (pread(fd, ph, len, (off_t)eh.e_phoff) != (ssize_t)len)
		return st.st_size;
	off_t end = (off_t)(eh.e_phoff + len);
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && (off_t)(ph[i].p_offset + ph[i].p_filesz) > end)
			end = (off_t)(ph[i].p_offset + ph[i].p_filesz);
	return end <= st.st_size ? end : st.st_size;
}

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U // linux/memfd.h, Linux 6.3: executable even under vm.memfd_noexec=1
#endif

// copy_go_part: a memfd holding the loaded extent of the Go part's file, for
// a new image of it (a fork() child whose parent loaded the file). Returns
// the fd, or -1 with errno and what failed in *what.
static int copy_go_part(const char *path, const char **what)
{
	*what = "open";
	int in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	off_t len = loaded_extent(in);
	*what = "memfd_create";
	int fd = len < 0 ? -1 : memfd_create(USB4_GO_PART_NAME, MFD_CLOEXEC | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) // a kernel before 6.3 has no MFD_EXEC
		fd = memfd_create(USB4_GO_PART_NAME, MFD_CLOEXEC);
	*what = "copy";
	for (off_t off = 0; fd >= 0 && off < len;) {
		ssize_t n = sendfile(fd, in, &off, (size_t)(len - off));
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			fd = -1;
			errno = e;
		}
	}
	int e = errno;
	close(in);
	errno = e;
	return fd;
}

static void load(void)
{
	char path[PATH_MAX];
	char why[512];
	bool have_path = go_part_path(path, sizeof(path)) == 0;
	if (usb4_host_runs_go(have_path ? path : NULL, why, sizeof(why))) {
		// Refused before anything is loaded: the state stays IMAGE_NONE.
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
		// Most often the front alone was copied into a container (the way the
		// module's install-provider-into-container.sh copies its provider).
		fail(ENOENT,
		     "%s is missing (%s): the provider is two files; in a container, run "
		     "'usb4verbs-container <container>' on the host, else reinstall usb4verbs",
		     path, strerror(errno));
		return;
	}
	// In a fork() child of a process that loaded the file, dlopen(path)
	// would return the dead copy: load a new image from a memfd instead.
	char copy[32] = "";
	int copy_fd = -1;
	if (image.inherited) {
		const char *what;
		copy_fd = copy_go_part(path, &what);
		if (copy_fd < 0) {
			fail(errno == ENOMEM || errno == ENOSPC ? ENOMEM : ELIBACC,
			     "a fork() child needs a new copy of %s: %s: %s", path, what, strerror(errno));
			return;
		}
		snprintf(copy, sizeof(copy), "/proc/self/fd/%d", copy_fd);
	}
	keep_signals();
	atomic_store(&image.state, IMAGE_LOADING);
	void *h = dlopen(copy_fd >= 0 ? copy : path, RTLD_NOW | RTLD_LOCAL);
	// The runtime installed its handlers inside dlopen (Go's libpreinit).
	restore_signals();
	if (copy_fd >= 0)
		close(copy_fd); // the mappings keep the memfd's pages
	if (!h) {
		atomic_store(&image.state, IMAGE_NONE);
		const char *why = dlerror();
		if (!why)
			why = "unknown dlopen error";
		if (strstr(why, "static TLS") && copy_fd >= 0)
			// The copy needs static TLS of its own, from glibc's surplus;
			// an LD_PRELOAD reserves it only for the first image.
			fail(ENOMEM,
			     "%s (a new copy of %s in a fork() child); start the program with "
			     "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096 so glibc reserves more static TLS",
			     why, path);
		else if (strstr(why, "static TLS"))
			// The Go runtime uses initial-exec TLS; a late dlopen in a
			// process whose static TLS surplus is used up cannot place it.
			// Not LD_PRELOAD: preloaded, the runtime would start before
			// main with the application's signal mask and record Go's
			// handlers as the application's (issue 31 item 2).
			fail(ENOMEM,
			     "%s; start the program with GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096 so glibc "
			     "reserves more static TLS",
			     why);
		else
			fail(ELIBACC, "%s%s%s; reinstall usb4verbs", why, copy_fd >= 0 ? ", a new copy of " : "",
			     copy_fd >= 0 ? path : "");
		return;
	}
	atomic_store(&image.state, IMAGE_LOADED);
	for (size_t i = 0; i < sizeof(go_entries) / sizeof(go_entries[0]); i++) {
		void *sym = dlsym(h, go_entries[i].name);
		if (!sym) {
			fail(ELIBBAD, "%s has no entry point %s: it is from another usb4verbs build; reinstall usb4verbs",
			     path, go_entries[i].name);
			return; // h stays open: the Go runtime may be up, never unload it
		}
		memcpy((char *)&image.api + go_entries[i].off, &sym, sizeof(sym));
	}
	struct usb4_go_config cfg = {.force_kernel_commands = usb4_abi_get()->force_kernel_commands,
				     .dv_send = usb4_abi_get()->dv_send,
				     .engine = &engine_api};
	uint64_t layout = USB4_LAYOUT_HASH;
	int rc = USB4_GO(Start, USB4_GO_API_VERSION, &layout, &cfg);
	if (rc == EPROTO)
		fail(ELIBBAD,
		     "%s was built from other shared headers than this front library (layout %016llx, the front's "
		     "%016llx): the two files are from different usb4verbs builds; reinstall usb4verbs",
		     path, (unsigned long long)layout, (unsigned long long)USB4_LAYOUT_HASH);
	else if (rc != 0)
		fail(ELIBBAD, "%s is from another usb4verbs build (entry points differ); reinstall usb4verbs", path);
	if (rc != 0)
		return;
	image.err = 0;
	atomic_store(&image.ready, true);
}

void usb4_go_fork_prepare(void)
{
	// Written on every fork, so the child handler's write finds this
	// thread's TLS block of the front allocated (no __tls_get_addr slow
	// path, which takes glibc's dl_load_tls_lock, in the child).
	fork_held = atomic_load(&image.ready);
	if (fork_held)
		USB4_GO_VOID(BeforeFork);
}

void usb4_go_fork_parent(void)
{
	if (fork_held) {
		fork_held = false;
		USB4_GO_VOID(AfterFork);
	}
}

int usb4_go_load(const char *dev)
{
	// Loaded in this image already: the once has nothing left to run under
	// the mask (issue 34: two rt_sigprocmask calls per later open). ready is
	// set last in a successful load and cleared with the image in a fork()
	// child (usb4_go_forked), which then takes the path below.
	if (atomic_load_explicit(&image.ready, memory_order_acquire))
		return 0;
	// The runtime's threads keep the mask of the thread that loads it
	// (gogate.c): no asynchronous signal reaches Go code on them. Blocked
	// for the whole once, so no handler can longjmp out of it either.
	struct usb4_go_saved saved;
	usb4_go_block_signals(&saved);
	pthread_once(&image.once, load);
	usb4_go_restore_signals(&saved);
	if (image.err)
		fprintf(stderr, USB4_LOG_PREFIX "%s: cannot open: Go part: %s\n", dev, image.msg);
	return image.err;
}
