// Test program: what loading the provider's Go part does to the signal
// dispositions of a C application (issue 13 item 6). The Go part is loaded
// by the first ibv_open_device of one of our devices; on the host the open
// itself then fails (no RDMA kernel), which is enough: the runtime is up.
//
//   signals dispositions   sets the signals Go's runtime cares about to
//                          SIG_DFL, loads, prints "disp <SIG> before <d>
//                          after <d>" for each
//   signals pipe-exec      ignores SIGPIPE, then runs itself as
//                          "signals check-pipe" before and after the load;
//                          the child prints "child <when> SIGPIPE <d>"
//   signals segv-after     loads, installs its own SIGSEGV handler, makes
//                          one more provider call, then faults on purpose
//                          and prints "segv handled" from its handler
//   signals urg            installs a SIGURG handler, loads, raises SIGURG
//                          on this (non-Go) thread, prints "urg <count>"
// <d> is "dfl", "ign" or "handler <object>", the object the handler is in.
// Declares the few libibverbs functions it uses (needs libibverbs1 only).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct ibv_device;
struct ibv_context;
struct ibv_device **ibv_get_device_list(int *num_devices);
const char *ibv_get_device_name(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

static const struct {
	int sig;
	const char *name;
} watched[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGPIPE, "SIGPIPE"},
	       {SIGURG, "SIGURG"},   {SIGINT, "SIGINT"}, {SIGHUP, "SIGHUP"}, {SIGTERM, "SIGTERM"},
	       {SIGCHLD, "SIGCHLD"}, {SIGPROF, "SIGPROF"}};

static void disposition(int sig, char *buf, size_t len)
{
	struct sigaction sa;
	Dl_info info;
	if (sigaction(sig, NULL, &sa) != 0) {
		snprintf(buf, len, "error");
		return;
	}
	void *fn = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
	if (fn == (void *)SIG_DFL)
		snprintf(buf, len, "dfl");
	else if (fn == (void *)SIG_IGN)
		snprintf(buf, len, "ign");
	else if (dladdr(fn, &info) && info.dli_fname) {
		const char *base = strrchr(info.dli_fname, '/');
		snprintf(buf, len, "handler %s", base ? base + 1 : info.dli_fname);
	} else
		snprintf(buf, len, "handler ?");
}

// load_go_part opens every device and closes what opened: the first open of
// one of ours loads the Go part. Returns the device list.
static struct ibv_device **load_go_part(int *n)
{
	struct ibv_device **list = ibv_get_device_list(n);
	if (!list) {
		printf("ibv_get_device_list: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < *n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		if (ctx)
			ibv_close_device(ctx);
	}
	return list;
}

static void run_child(const char *self, const char *when)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl(self, self, "check-pipe", when, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
}

static sigjmp_buf segv_jump;
static volatile sig_atomic_t urg_count;

static void on_segv(int sig, siginfo_t *info, void *uctx)
{
	(void)sig, (void)info, (void)uctx;
	siglongjmp(segv_jump, 1);
}

static void on_urg(int sig)
{
	(void)sig;
	urg_count++;
}

int main(int argc, char **argv)
{
	char after[128];
	int n = 0;
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "check-pipe") == 0) {
		disposition(SIGPIPE, after, sizeof(after));
		printf("child %s SIGPIPE %s\n", argc > 2 ? argv[2] : "?", after);
		return 0;
	}
	if (strcmp(mode, "dispositions") == 0) {
		char was[sizeof(watched) / sizeof(watched[0])][128];
		// From the defaults, whatever this process inherited (nohup's
		// SIG_IGN for SIGHUP, a CI runner's for SIGPIPE): an inherited
		// SIG_IGN is what pipe-exec checks.
		for (size_t i = 0; i < sizeof(watched) / sizeof(watched[0]); i++) {
			signal(watched[i].sig, SIG_DFL);
			disposition(watched[i].sig, was[i], sizeof(was[i]));
		}
		load_go_part(&n);
		for (size_t i = 0; i < sizeof(watched) / sizeof(watched[0]); i++) {
			disposition(watched[i].sig, after, sizeof(after));
			printf("disp %s before %s after %s\n", watched[i].name, was[i], after);
		}
		return 0;
	}
	if (strcmp(mode, "pipe-exec") == 0) {
		signal(SIGPIPE, SIG_IGN);
		run_child("/proc/self/exe", "before");
		load_go_part(&n);
		disposition(SIGPIPE, after, sizeof(after));
		printf("parent after SIGPIPE %s\n", after);
		run_child("/proc/self/exe", "after");
		return 0;
	}
	if (strcmp(mode, "segv-after") == 0) {
		struct ibv_device **list = load_go_part(&n);
		struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		// One more call into the Go part, with the application's handler in place.
		for (int i = 0; i < n; i++) {
			struct ibv_context *ctx = ibv_open_device(list[i]);
			printf("open %s after own handler: %s\n", ibv_get_device_name(list[i]),
			       ctx ? "ok" : strerrorname_np(errno));
			if (ctx)
				ibv_close_device(ctx);
		}
		if (sigsetjmp(segv_jump, 1) == 0) {
			volatile int *nowhere = NULL;
			*nowhere = 1; // the application's own fault, for its own handler
			printf("no fault\n");
		} else {
			printf("segv handled\n");
		}
		return 0;
	}
	if (strcmp(mode, "urg") == 0) {
		signal(SIGURG, on_urg);
		raise(SIGURG);
		printf("urg before %d\n", (int)urg_count);
		load_go_part(&n);
		disposition(SIGURG, after, sizeof(after));
		raise(SIGURG);
		printf("urg after %d disposition %s\n", (int)urg_count, after);
		return 0;
	}
	fprintf(stderr, "usage: signals dispositions|pipe-exec|segv-after|urg\n");
	return 2;
}
