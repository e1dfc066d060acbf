// Test program (issue 24): fork() children of a process whose Go part is
// running. On the host the opens fail (no RDMA kernel) after the Go part was
// loaded and entered, which is what is checked: a child's open must reach a
// Go part of its own and fail as the parent's did, not with ENOSYS; the
// child must have nothing of ours running before it opens; and signals must
// never reach the dead copy of the runtime.
//
//   forkgo open     the parent opens the first device of ours; a child lists
//                   its footprint, opens, forks a grandchild that does the
//                   same; a child whose SIGSEGV was SIG_DFL before the
//                   load faults and must die of it; the parent opens again
//   forkgo segv     the same with a SIGSEGV handler the application set
//                   before the load: a child faults on purpose before and
//                   after its own open, and the handler gets both faults
//   forkgo stress VICTIMS MIB FORKS
//                   issue 31 item 1: VICTIMS processes one after the other,
//                   each pinned to one CPU before the load (so the runtime
//                   has one P), touching MIB MiB, then loading the Go part,
//                   starting 3 threads that keep opening (each open enters
//                   Go, allocates and makes system calls there: with GOGC=1
//                   a garbage collection runs all along) and forking FORKS
//                   children that exit at once; one not done in 20 s is
//                   killed and counted: "stress victims <n> hung <h>
//                   failed <f>"
// Lines: "<who> <what> ..." (see shim_test.go TestForkChildGoPart).
// Declares the few libibverbs functions it uses (needs libibverbs1 only).
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proctask.h"

struct ibv_device;
struct ibv_context;
struct ibv_device **ibv_get_device_list(int *num_devices);
const char *ibv_get_device_name(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

static struct ibv_device *dev;

// images: how many mappings of the Go part's text the process has (the file
// and memfd copies: one r-xp line each).
static int images(void)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, " r-xp ") && strstr(line, "libusb4_rdma-go.so");
	fclose(f);
	return n;
}

static long rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static const char *disposition(int sig)
{
	static char buf[300];
	struct sigaction sa;
	Dl_info info;
	if (sigaction(sig, NULL, &sa) != 0)
		return "error";
	void *fn = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
	if (fn == (void *)SIG_DFL)
		return "dfl";
	if (fn == (void *)SIG_IGN)
		return "ign";
	if (dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "forkgo"))
		return "application";
	snprintf(buf, sizeof(buf), "handler %s", dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "?");
	return buf;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// open_once opens dev and prints the outcome and what the open cost.
static void open_once(const char *who)
{
	int t0 = count_threads();
	long r0 = rss_kib();
	double m0 = now_ms();
	errno = 0;
	struct ibv_context *ctx = ibv_open_device(dev);
	int e = errno;
	double ms = now_ms() - m0;
	printf("%s open %s\n", who, ctx ? "ok" : strerrorname_np(e));
	printf("%s cost open_ms %.2f threads %d->%d rss_kib %+ld images %d\n", who, ms, t0, count_threads(),
	       rss_kib() - r0, images());
	fflush(stdout);
	if (ctx)
		ibv_close_device(ctx);
}

static void footprint(const char *who)
{
	printf("%s before_open threads %d images %d SIGSEGV %s SIGPIPE %s SIGURG %s\n", who, count_threads(), images(),
	       disposition(SIGSEGV), disposition(SIGPIPE), disposition(SIGURG));
	fflush(stdout);
}

// wait_for waits for pid and prints how it ended.
static void wait_for(const char *who, pid_t pid)
{
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		printf("%s wait %s\n", who, strerrorname_np(errno));
	else if (WIFSIGNALED(st))
		printf("%s exit signal %s\n", who, sigabbrev_np(WTERMSIG(st)));
	else
		printf("%s exit %d\n", who, WEXITSTATUS(st));
	fflush(stdout);
}

static void child(const char *who, int depth)
{
	footprint(who);
	open_once(who);
	open_once(who); // the second open of the image loads nothing
	if (depth > 0) {
		pid_t pid = fork();
		if (pid == 0) {
			child("grandchild", depth - 1);
			_exit(0);
		}
		wait_for("grandchild", pid);
	}
}

static sigjmp_buf jump;
static volatile sig_atomic_t faults;

static void on_segv(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(jump, 1);
}

// fault makes a SIGSEGV on purpose; returns whether the handler took it.
static int fault(void)
{
	if (sigsetjmp(jump, 1) == 0) {
		*(volatile int *)(uintptr_t)8 = 1;
		return 0;
	}
	return 1;
}

static int segv(void)
{
	struct sigaction sa = {.sa_handler = on_segv};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	open_once("parent");
	printf("parent SIGSEGV %s\n", disposition(SIGSEGV));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		footprint("child");
		printf("child fault_before_open %s\n", fault() ? "handled" : "not handled");
		open_once("child");
		printf("child SIGSEGV %s\n", disposition(SIGSEGV));
		printf("child fault_after_open %s\n", fault() ? "handled" : "not handled");
		fflush(stdout);
		_exit(0);
	}
	wait_for("child", pid);
	return 0;
}

static atomic_bool stress_stop;

static void *stress_opener(void *arg)
{
	(void)arg;
	while (!atomic_load(&stress_stop)) {
		struct ibv_context *ctx = ibv_open_device(dev);
		if (ctx)
			ibv_close_device(ctx);
	}
	return NULL;
}

// stress_victim: one process of the stress test. Its runtime is young while
// it forks (threads still being started), which is when a hang was seen.
static int stress_victim(long mib, int forks)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0) {
		printf("sched_setaffinity: %s\n", strerror(errno));
		return 1;
	}
	size_t len = (size_t)mib << 20;
	char *big = malloc(len);
	if (!big) {
		printf("malloc %ld MiB failed\n", mib);
		return 1;
	}
	memset(big, 1, len);
	struct ibv_context *ctx = ibv_open_device(dev); // loads the Go part
	if (ctx)
		ibv_close_device(ctx);
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, stress_opener, NULL);
	int n;
	for (n = 0; n < forks; n++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			break;
		waitpid(pid, NULL, 0);
	}
	atomic_store(&stress_stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	free(big);
	return n == forks ? 0 : 1;
}

// stress runs VICTIMS processes of stress_victim one after the other, each
// given 20 s: "stress victims <n> hung <h> failed <f>".
static int stress(const char *self, int victims, const char *mib, const char *forks)
{
	int hung = 0, failed = 0;
	for (int v = 0; v < victims; v++) {
		pid_t pid = fork();
		if (pid == 0) {
			execl(self, self, "stress-victim", mib, forks, (char *)NULL);
			_exit(127);
		}
		int st = 0;
		pid_t got = 0;
		for (int ms = 0; ms < 20000 && (got = waitpid(pid, &st, WNOHANG)) == 0; ms += 10)
			usleep(10000);
		if (got == 0) {
			hung++;
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	printf("stress victims %d hung %d failed %d\n", victims, hung, failed);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	// The first device of ours: the provider name follows struct ibv_device.
	for (int i = 0; list && i < n && !dev; i++) {
		const char *const *ops = *(const char *const *const *)((const char *)list[i] + 664);
		if (ops && strcmp(ops[0], "usb4_rdma") == 0)
			dev = list[i];
	}
	if (!dev) {
		printf("no device of ours\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "segv") == 0)
		return segv();
	if (argc > 3 && strcmp(argv[1], "stress-victim") == 0)
		return stress_victim(atol(argv[2]), atoi(argv[3]));
	if (argc > 4 && strcmp(argv[1], "stress") == 0)
		return stress("/proc/self/exe", atoi(argv[2]), argv[3], argv[4]);
	footprint("parent");
	open_once("parent");
	pid_t pid = fork();
	if (pid == 0) {
		child("child", 1);
		_exit(0);
	}
	wait_for("child", pid);
	// SIGSEGV was SIG_DFL before the load (Go's handler since): a child
	// that faults before any open of its own dies of SIGSEGV, as it would
	// without us, instead of entering the dead runtime's handler.
	pid = fork();
	if (pid == 0) {
		footprint("dflchild");
		fault();
		_exit(0);
	}
	wait_for("dflchild", pid);
	open_once("parent");
	return 0;
}
