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
//   signals segv-jump      issue 22: the second open of ours faults in C under
//                          Go (test hook), the application's SIGSEGV
//                          handler (installed after the first open)
//                          siglongjmps out over the Go frames; a
//                          second open on that thread, then one on another
//                          thread: "open <k>: <result>", "other thread open:"
//   signals segv-jump-exit issue 31 item 3: as segv-jump, but the open that
//                          faults (test hook: with a lock held) runs on a
//                          thread that pthread_exits after the jump; then
//                          another thread opens: "jumper: jumped out",
//                          "other thread open: <result>"
//   signals prof-after-last-call
//                          issue 31 item 4: loads, installs a SIGPROF
//                          handler without SA_ONSTACK after its last call,
//                          waits 300 ms, then lets ITIMER_PROF fire every
//                          1 ms for 2 s while it sleeps: the ticks go to the
//                          threads that use CPU, the runtime's (with the Go
//                          part's thread_churn hook). Prints "prof signals
//                          <n> on_go_stack <g>"
//   signals storm WHEN SIGS...
//                          issue 22: handlers without SA_ONSTACK (as qperf's
//                          and old Pythons' are) for SIGS (ALRM, URG, PIPE,
//                          USR1, INT, CHLD, PROF), installed "before" or
//                          "after" the load; then 4 threads open every
//                          device 300 times each (each open of ours enters
//                          the Go part) while SIGALRM fires every 100 us
//                          (setitimer) and a thread sends the others to the
//                          process; each handler uses 3 KiB of stack, as a
//                          handler calling into libc does, after checking
//                          it does not run on a goroutine's stack
//                          (gostack.h). Prints "storm devices <k> opens <n>
//                          same <s> differ <d> signals <count> on_go_stack
//                          <g>"
//   signals jump           issue 22: the storm (SIGALRM and SIGUSR1 after
//                          the load) while 2 more threads each loop in C
//                          with a sigsetjmp armed and their handler
//                          siglongjmps out of whatever they were doing; the
//                          4 threads opening devices never jump (a jump out
//                          of a thread inside a library call may leave libc
//                          locks held, with any provider). Prints "jump
//                          opens <n> jumped <j> signals <count>"
//   signals runtime-masks  loads, then prints "thread <tid> blocks URG <y|n>
//                          CHLD <y|n> PROF <y|n>" for each thread the load
//                          started (the Go runtime's), from SigBlk in
//                          /proc/self/task/<tid>/status
//   signals onstack-next-call
//                          loads, installs URG, CHLD and PROF handlers
//                          without SA_ONSTACK, makes one more open of ours
//                          at once, prints "onstack <SIG> <y|n>" for each
//   signals onstack-race   issue 31 item 5: loads; 2 threads open our devices
//                          while this one rewrites its SIGCHLD handler (one
//                          function, no SA_ONSTACK) alternating sa_mask,
//                          SA_RESTART and SA_NOCLDSTOP, and reads it back
//                          after each write (again 20 ms later when it
//                          differs: the provider may be between its writes):
//                          the provider may add SA_ONSTACK but nothing else.
//                          Prints "race writes <n> reverted <r>"
// <d> is "dfl", "ign" or "handler <object>", the object the handler is in.
// Declares the few libibverbs functions it uses (needs libibverbs1 only).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <dirent.h>
#include <time.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gostack.h"

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

static const struct {
	const char *name;
	int sig;
} storm_names[] = {{"ALRM", SIGALRM}, {"URG", SIGURG}, {"PIPE", SIGPIPE}, {"USR1", SIGUSR1},
		   {"INT", SIGINT},   {"CHLD", SIGCHLD}, {"PROF", SIGPROF}};

static atomic_long handled, go_stack;

// A handler as an application writes it: it works on the stack it was
// given (3 KiB here, a buffer and a libc call's worth). First it checks
// where it runs: on a goroutine's stack it counts and returns.
static void on_storm(int sig, siginfo_t *info, void *uctx)
{
	(void)info, (void)uctx;
	if (on_go_stack()) {
		atomic_fetch_add(&go_stack, 1);
		return;
	}
	volatile char pad[3072];
	for (size_t i = 0; i < sizeof(pad); i += 64)
		pad[i] = (char)sig;
	atomic_fetch_add(&handled, 1);
}

struct storm {
	struct ibv_device **list;
	int n;
	char want[64][48]; // each device's open result before the storm
	atomic_long opens, same, differ;
	atomic_bool stop;
	int sigs[8], nsigs;
	bool jump;
};

static void open_result(struct ibv_device *dev, char *buf, size_t len)
{
	errno = 0;
	struct ibv_context *ctx = ibv_open_device(dev);
	if (ctx) {
		snprintf(buf, len, "ok");
		ibv_close_device(ctx);
	} else
		snprintf(buf, len, "errno %s", strerrorname_np(errno));
}

static _Thread_local sigjmp_buf jump_env;
static _Thread_local volatile sig_atomic_t jump_armed;
static atomic_long jumped;

static void on_jump(int sig, siginfo_t *info, void *uctx)
{
	(void)sig, (void)info, (void)uctx;
	if (on_go_stack()) {
		atomic_fetch_add(&go_stack, 1);
		return;
	}
	volatile char pad[3072];
	for (size_t i = 0; i < sizeof(pad); i += 64)
		pad[i] = 1;
	atomic_fetch_add(&handled, 1);
	if (jump_armed) {
		jump_armed = 0;
		siglongjmp(jump_env, 1);
	}
}

static void *storm_worker(void *arg)
{
	struct storm *st = arg;
	char got[48];
	for (int round = 0; round < 300; round++)
		for (int i = 0; i < st->n && i < 64; i++) {
			open_result(st->list[i], got, sizeof(got));
			atomic_fetch_add(&st->opens, 1);
			if (strcmp(got, st->want[i]) == 0)
				atomic_fetch_add(&st->same, 1);
			else if (atomic_fetch_add(&st->differ, 1) < 5)
				printf("differ %s: %s, before the storm %s\n", ibv_get_device_name(st->list[i]), got,
				       st->want[i]);
		}
	return NULL;
}

// A thread that times its own work out with a signal and a siglongjmp.
static void *jumper(void *arg)
{
	struct storm *st = arg;
	volatile unsigned long spin = 0;
	while (!atomic_load(&st->stop)) {
		if (sigsetjmp(jump_env, 1) != 0) {
			atomic_fetch_add(&jumped, 1);
			continue;
		}
		jump_armed = 1;
		for (int k = 0; k < 100000 && !atomic_load(&st->stop); k++)
			spin++;
		jump_armed = 0;
	}
	return NULL;
}

// The kernel gives a process-directed signal to the thread that took the
// last one while that thread accepts it, so kill() alone would hit one
// (idle) thread all along: the sender also sends each signal to every
// thread in turn (tgkill), the Go runtime's threads included.
static void *storm_sender(void *arg)
{
	struct storm *st = arg;
	struct timespec ts = {0, 50000};
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pid_t self = (pid_t)syscall(SYS_gettid);
	for (unsigned k = 0; !atomic_load(&st->stop); k++) {
		if (st->nsigs < 0) {
			nanosleep(&ts, NULL);
			continue;
		}
		int sig = st->nsigs ? st->sigs[k % (unsigned)st->nsigs] : 0;
		if (sig)
			kill(getpid(), sig);
		DIR *d = opendir("/proc/self/task");
		for (struct dirent *e; d && (e = readdir(d));) {
			pid_t tid = (pid_t)atoi(e->d_name);
			if (tid <= 0 || tid == self || tid == getpid())
				continue;
			syscall(SYS_tgkill, getpid(), tid, sig ? sig : SIGALRM);
			nanosleep(&ts, NULL);
		}
		if (d)
			closedir(d);
	}
	return NULL;
}

static void install(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = {.sa_sigaction = fn, .sa_flags = SA_SIGINFO | SA_RESTART}; // no SA_ONSTACK
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

// struct verbs_device: ibv_device (664 bytes), then the provider's
// verbs_device_ops pointer, whose first member is the provider name.
static bool ours(struct ibv_device *dev)
{
	const char *const *ops = *(const char *const *const *)((const char *)dev + 664);
	return ops && strcmp(ops[0], "usb4_rdma") == 0;
}

static int storm(int argc, char **argv, bool jump)
{
	static struct storm st;
	gostack_init();
	bool before = !jump && argc > 2 && strcmp(argv[2], "before") == 0;
	bool quiet = !jump && argc > 2 && strcmp(argv[2], "quiet") == 0; // no signals: the control
	st.jump = jump;
	if (jump) {
		st.sigs[st.nsigs++] = SIGUSR1;
	} else {
		for (int a = 3; a < argc; a++)
			for (size_t k = 0; k < sizeof(storm_names) / sizeof(storm_names[0]); k++)
				if (strcmp(argv[a], storm_names[k].name) == 0 && storm_names[k].sig != SIGALRM &&
				    st.nsigs < 8)
					st.sigs[st.nsigs++] = storm_names[k].sig;
	}
	void (*fn)(int, siginfo_t *, void *) = jump ? on_jump : on_storm;
	if (quiet)
		st.nsigs = -1; // the sender sends nothing
	if (before) {
		install(SIGALRM, fn);
		for (int k = 0; k < st.nsigs; k++)
			install(st.sigs[k], fn);
	}
	// Only our devices: on the test host's fake devices another provider's
	// context (librxe on /dev/null) closes fd 0 when it is closed.
	int all_n;
	struct ibv_device **all_devs = load_go_part(&all_n);
	st.list = calloc((size_t)all_n + 1, sizeof(*st.list));
	for (int i = 0; i < all_n; i++)
		if (ours(all_devs[i]))
			st.list[st.n++] = all_devs[i];
	for (int i = 0; i < st.n && i < 64; i++)
		open_result(st.list[i], st.want[i], sizeof(st.want[i]));
	if (!before && !quiet) {
		install(SIGALRM, fn);
		for (int k = 0; k < st.nsigs; k++)
			install(st.sigs[k], fn);
		// One call into Go (which adds SA_ONSTACK to the handlers the
		// runtime's threads can take) before the signals start.
		char got[48];
		if (st.n)
			open_result(st.list[0], got, sizeof(got));
	}
	pthread_t sender, workers[4], jumpers[2];
	for (int w = 0; w < 4; w++)
		pthread_create(&workers[w], NULL, storm_worker, &st);
	for (int w = 0; w < 2 && jump; w++)
		pthread_create(&jumpers[w], NULL, jumper, &st);
	pthread_create(&sender, NULL, storm_sender, &st);
	// This thread only waits: the signals go to the others, the Go
	// runtime's threads included.
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	struct itimerval it = {{0, 100}, {0, 100}};
	if (!quiet)
		setitimer(ITIMER_REAL, &it, NULL);
	for (int w = 0; w < 4; w++)
		pthread_join(workers[w], NULL);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	atomic_store(&st.stop, true);
	pthread_join(sender, NULL);
	for (int w = 0; w < 2 && jump; w++)
		pthread_join(jumpers[w], NULL);
	if (jump)
		printf("jump jumped %ld\n", atomic_load(&jumped));
	printf("storm devices %d opens %ld same %ld differ %ld signals %ld on_go_stack %ld\n", st.n,
	       atomic_load(&st.opens), atomic_load(&st.same), atomic_load(&st.differ), atomic_load(&handled),
	       atomic_load(&go_stack));
	return 0;
}

// The signals Go's runtime unblocks on its threads whatever the mask
// (SIGURG only while asynchronous preemption is on).
static const struct {
	int sig;
	const char *name;
} runtime_unblocked[] = {{SIGURG, "URG"}, {SIGCHLD, "CHLD"}, {SIGPROF, "PROF"}};
enum { N_RUNTIME_UNBLOCKED = sizeof(runtime_unblocked) / sizeof(runtime_unblocked[0]) };

// runtime_masks prints the signal mask of every thread the load started:
// every thread but the main one, since this mode starts none of its own.
static __attribute__((noinline)) int runtime_masks(void)
{
	int n = 0;
	load_go_part(&n);
	int started = 0;
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
			continue;
		char path[300], line[256];
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		unsigned long long blk = 0;
		bool found = false;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blk) == 1)
				found = true;
		if (f)
			fclose(f);
		if (!found)
			continue;
		started++;
		printf("thread %s blocks", e->d_name);
		for (int i = 0; i < N_RUNTIME_UNBLOCKED; i++)
			printf(" %s %c", runtime_unblocked[i].name, (blk >> (runtime_unblocked[i].sig - 1)) & 1 ? 'y' : 'n');
		printf("\n");
	}
	if (d)
		closedir(d);
	printf("threads started by the load: %d\n", started);
	return 0;
}

// onstack_next_call: handlers without SA_ONSTACK for the signals the
// runtime never lets its threads block, installed after the load, then one
// call into the Go part at once: does it give them SA_ONSTACK?
static __attribute__((noinline)) int onstack_next_call(void)
{
	int n = 0;
	struct ibv_device **list = load_go_part(&n);
	for (int k = 0; k < N_RUNTIME_UNBLOCKED; k++)
		install(runtime_unblocked[k].sig, on_storm);
	for (int i = 0; i < n; i++)
		if (ours(list[i])) {
			char got[48];
			open_result(list[i], got, sizeof(got));
			break;
		}
	for (int k = 0; k < N_RUNTIME_UNBLOCKED; k++) {
		struct sigaction sa;
		sigaction(runtime_unblocked[k].sig, NULL, &sa);
		printf("onstack SIG%s %c\n", runtime_unblocked[k].name, sa.sa_flags & SA_ONSTACK ? 'y' : 'n');
	}
	return 0;
}

struct race {
	struct ibv_device **list;
	int n;
	atomic_bool stop;
};

static void *race_opener(void *arg)
{
	struct race *r = arg;
	char got[48];
	while (!atomic_load(&r->stop))
		for (int i = 0; i < r->n; i++)
			open_result(r->list[i], got, sizeof(got));
	return NULL;
}

// race_action: the k-th SIGCHLD disposition the application writes.
static struct sigaction race_action(unsigned k)
{
	struct sigaction sa = {.sa_sigaction = on_storm, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	if (k % 2) {
		sa.sa_flags |= SA_RESTART | SA_NOCLDSTOP;
		sigaddset(&sa.sa_mask, SIGUSR1);
	} else
		sigaddset(&sa.sa_mask, SIGUSR2);
	return sa;
}

// same_but_onstack: whether got is want, but for an SA_ONSTACK added.
static bool same_but_onstack(const struct sigaction *got, const struct sigaction *want)
{
	int mask = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP | SA_NODEFER | SA_RESETHAND;
	if ((void *)got->sa_sigaction != (void *)want->sa_sigaction || (got->sa_flags & mask) != (want->sa_flags & mask))
		return false;
	for (int s = 1; s < SIGRTMIN; s++)
		if (sigismember(&got->sa_mask, s) != sigismember(&want->sa_mask, s))
			return false;
	return true;
}

static __attribute__((noinline)) int onstack_race(void)
{
	static struct race r;
	int n = 0;
	struct ibv_device **list = load_go_part(&n);
	r.list = calloc((size_t)n + 1, sizeof(*r.list));
	for (int i = 0; i < n; i++)
		if (ours(list[i]))
			r.list[r.n++] = list[i];
	pthread_t t[2];
	for (int w = 0; w < 2; w++)
		pthread_create(&t[w], NULL, race_opener, &r);
	long reverted = 0;
	unsigned k;
	for (k = 0; k < 200000 && reverted == 0; k++) {
		struct sigaction want = race_action(k), got;
		sigaction(SIGCHLD, &want, NULL);
		for (int j = 0; j < 4; j++) {
			sigaction(SIGCHLD, NULL, &got);
			if (same_but_onstack(&got, &want))
				continue;
			// The provider's check may be between its writes (what it
			// replaced was not what it read): it settles at once.
			struct timespec ts = {0, 20000000};
			nanosleep(&ts, NULL);
			sigaction(SIGCHLD, NULL, &got);
			if (!same_but_onstack(&got, &want))
				reverted++;
			break;
		}
	}
	atomic_store(&r.stop, true);
	for (int w = 0; w < 2; w++)
		pthread_join(t[w], NULL);
	printf("race writes %u reverted %ld\n", k, reverted);
	return 0;
}

static __attribute__((noinline)) int prof_after_last_call(void)
{
	int n = 0;
	gostack_init();
	load_go_part(&n);
	install(SIGPROF, on_storm);
	struct timespec wait = {0, 300000000}, rest = {2, 0};
	nanosleep(&wait, NULL);
	struct itimerval it = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_PROF, &it, NULL);
	while (nanosleep(&rest, &rest) != 0 && errno == EINTR)
		;
	setitimer(ITIMER_PROF, &off, NULL);
	printf("prof signals %ld on_go_stack %ld\n", atomic_load(&handled), atomic_load(&go_stack));
	return 0;
}

// first_ours: the first device of ours, or NULL after saying so.
static struct ibv_device *first_ours(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (ours(list[i]))
			return list[i];
	printf("no device of ours\n");
	return NULL;
}

static void *other_thread_open(void *arg)
{
	char got[48];
	if (sigsetjmp(segv_jump, 1) == 0) {
		open_result(arg, got, sizeof(got));
		printf("other thread open: %s\n", got);
	} else
		printf("other thread open: jumped out\n");
	return NULL;
}

static void *jump_then_exit(void *arg)
{
	if (sigsetjmp(segv_jump, 1) != 0) {
		printf("jumper: jumped out\n");
		fflush(stdout);
		pthread_exit(NULL);
	}
	char got[48];
	open_result(arg, got, sizeof(got));
	printf("jumper: open %s\n", got);
	return NULL;
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
		// The handler first: the first open of ours is the one that
		// faults (Go's runtime, loaded by it, forwards to this handler).
		struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		struct ibv_device **list = ibv_get_device_list(&n);
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
	if (strcmp(mode, "segv-jump") == 0) {
		// With the Go part built with -tags usb4panictest and
		// USB4VERBS_TEST_PANIC=open_context:cfault_second, the second
		// open of ours faults in C called from Go. The handler, installed
		// after the first open loaded the Go part, replaces Go's and gets
		// the SIGSEGV directly; it siglongjmps out, over the Go frames.
		// (Installed before the load, Go would forward the fault to the
		// provider, which refuses to hand on a fault inside a call.)
		struct ibv_device *dev = first_ours();
		if (!dev)
			return 1;
		char loaded[48];
		open_result(dev, loaded, sizeof(loaded));
		struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		for (int k = 0; k < 2; k++) {
			if (sigsetjmp(segv_jump, 1) == 0) {
				char got[48];
				open_result(dev, got, sizeof(got));
				printf("open %d: %s\n", k, got);
			} else
				printf("open %d: jumped out\n", k);
		}
		pthread_t t;
		pthread_create(&t, NULL, other_thread_open, dev);
		pthread_join(t, NULL);
		return 0;
	}
	if (strcmp(mode, "segv-jump-exit") == 0) {
		struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, NULL);
		struct ibv_device *dev = first_ours();
		if (!dev)
			return 1;
		pthread_t t;
		pthread_create(&t, NULL, jump_then_exit, dev);
		pthread_join(t, NULL);
		pthread_create(&t, NULL, other_thread_open, dev);
		pthread_join(t, NULL);
		return 0;
	}
	if (strcmp(mode, "runtime-masks") == 0)
		return runtime_masks();
	if (strcmp(mode, "onstack-next-call") == 0)
		return onstack_next_call();
	if (strcmp(mode, "prof-after-last-call") == 0)
		return prof_after_last_call();
	if (strcmp(mode, "onstack-race") == 0)
		return onstack_race();
	if (strcmp(mode, "storm") == 0)
		return storm(argc, argv, false);
	if (strcmp(mode, "jump") == 0)
		return storm(argc, argv, true);
	fprintf(stderr, "usage: signals dispositions|pipe-exec|segv-after|urg|runtime-masks|onstack-next-call|"
			"onstack-race|prof-after-last-call|segv-jump-exit|"
			"storm WHEN SIGS...|jump\n");
	return 2;
}
