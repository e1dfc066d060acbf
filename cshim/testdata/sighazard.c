// VM test program for issue 22: what host applications do with signals and
// threads, through libibverbs and whichever provider serves the device (run
// once through librxe and once through ours in the same boot, by
// cshim/sigvm.sh). Usage: sighazard DEV GID_INDEX MODE
//
// Every mode: the first open of DEV happens, then 2 control threads loop
// (query_port, reg_mr/dereg_mr, create_cq/destroy_cq, create_qp/modify to
// INIT/destroy_qp) and 1 data thread moves RDMA writes with immediate over a
// loopback RC pair on DEV (each checked), for ROUNDS rounds, while the mode's
// signals fire. Modes:
//   alrm       SIGALRM handler without SA_ONSTACK installed after the first
//              open, setitimer every 1 ms
//   int-usr1   SIGINT and SIGUSR1 handlers without SA_ONSTACK installed after
//              the first open (as Pythons before 3.10 do), a sender thread
//              sends them to the process and to every thread every 0.5 ms
//   qperf      qperf's handlers (SIGALRM, SIGPIPE, SIGQUIT, SIGURG with
//              SA_SIGINFO only) installed before the first open, SIGALRM every 1 ms
//   alarm-loop the data thread times itself as qperf does: alarm(1)-style
//              rounds (setitimer 20 ms) that end when the handler sets a flag
//   chld-prof  SIGCHLD, SIGPROF and SIGURG handlers without SA_ONSTACK after
//              the first open, sent to every thread
//   jump       the int-usr1 storm while 2 more threads loop with a sigsetjmp
//              armed and their handler siglongjmps out
//   cost       no signals: the time of one ibv_query_port, averaged
// The process may also be pinned to one CPU by the caller (taskset).
// Every handler first checks where it runs (on_go_stack): a frame on a
// goroutine's stack is counted and the handler returns at once, so the
// hazard shows as a count rather than as whatever the overflow corrupts.
// Prints "hazard MODE verbs <ok> verr <n> writes <n> werr <n> signals <n>
// jumped <n> on_go_stack <n>" and "outcome MODE: ok" when every verb and
// write succeeded and no handler ran on a goroutine's stack, else
// "outcome MODE: <first error>" (or the count). Exit 0 on ok.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "gostack.h"
#include "testdev.h"

enum { ROUNDS = 400, WRITES = 4000, BUF = 4096 };

static atomic_long handled, go_stack, verbs_ok, verbs_err, writes_ok, writes_err, jumped;
static atomic_bool stop;
static volatile sig_atomic_t round_done;
static char first_err[160];
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local sigjmp_buf jump_env;
static _Thread_local volatile sig_atomic_t jump_armed;
static int send_sigs[4], nsend;

static void fail(atomic_long *ctr, const char *what, int err)
{
	atomic_fetch_add(ctr, 1);
	pthread_mutex_lock(&err_mu);
	if (!first_err[0])
		snprintf(first_err, sizeof(first_err), "%s: %s", what, strerror(err));
	pthread_mutex_unlock(&err_mu);
}

// What an application's handler does with its stack: uses 3 KiB of it.
static __attribute__((noinline)) void use_stack(int sig)
{
	volatile char pad[3072];
	for (size_t i = 0; i < sizeof(pad); i += 64)
		pad[i] = (char)sig;
}

// A handler as applications write them, with the check first: on a
// goroutine's stack it counts and returns before using the stack.
static void on_sig(int sig, siginfo_t *info, void *uctx)
{
	(void)info, (void)uctx;
	if (on_go_stack()) {
		atomic_fetch_add(&go_stack, 1);
		return;
	}
	use_stack(sig);
	atomic_fetch_add(&handled, 1);
	if (sig == SIGALRM)
		round_done = 1;
	if (jump_armed) {
		jump_armed = 0;
		siglongjmp(jump_env, 1);
	}
}

static void install(int sig)
{
	struct sigaction sa = {.sa_sigaction = on_sig, .sa_flags = SA_SIGINFO}; // no SA_ONSTACK
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void timer_us(long us)
{
	struct itimerval it = {{0, us}, {0, us}};
	setitimer(ITIMER_REAL, &it, NULL);
}

struct env {
	struct ibv_context *ctx;
	int gid_index;
	union ibv_gid gid;
	bool alarm_loop;
};

static void *control(void *arg)
{
	struct env *e = arg;
	static char mem[2][BUF];
	static atomic_int slot;
	char *buf = mem[atomic_fetch_add(&slot, 1) & 1];
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_port_attr pa;
		int err = ibv_query_port(e->ctx, 1, &pa);
		if (err) {
			fail(&verbs_err, "query_port", err);
			continue;
		}
		struct ibv_pd *pd = ibv_alloc_pd(e->ctx);
		if (!pd) {
			fail(&verbs_err, "alloc_pd", errno);
			continue;
		}
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
		struct ibv_cq *cq = ibv_create_cq(e->ctx, 8, NULL, NULL, 0);
		struct ibv_qp *qp = NULL;
		if (cq) {
			struct ibv_qp_init_attr qia = {
				.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
			qp = ibv_create_qp(pd, &qia);
		}
		if (!mr || !cq || !qp)
			fail(&verbs_err, !mr ? "reg_mr" : !cq ? "create_cq" : "create_qp", errno);
		else {
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
			err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
			if (err)
				fail(&verbs_err, "modify_qp INIT", err);
			else
				atomic_fetch_add(&verbs_ok, 1);
		}
		if (qp && (err = ibv_destroy_qp(qp)))
			fail(&verbs_err, "destroy_qp", err);
		if (cq && (err = ibv_destroy_cq(cq)))
			fail(&verbs_err, "destroy_cq", err);
		if (mr && (err = ibv_dereg_mr(mr)))
			fail(&verbs_err, "dereg_mr", err);
		if ((err = ibv_dealloc_pd(pd)))
			fail(&verbs_err, "dealloc_pd", err);
	}
	return NULL;
}

// The data thread: a loopback RC pair, RDMA_WRITE_WITH_IMM from a to b,
// each one checked at b.
static void *data(void *arg)
{
	struct env *e = arg;
	static char src[BUF], dst[BUF];
	struct ibv_pd *pd = ibv_alloc_pd(e->ctx);
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	struct ibv_mr *ms = pd ? ibv_reg_mr(pd, src, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_mr *md = pd ? ibv_reg_mr(pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp *q[2] = {NULL, NULL};
	for (int i = 0; i < 2 && cq && ms && md; i++) {
		struct ibv_qp_init_attr qia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
		q[i] = ibv_create_qp(pd, &qia);
	}
	if (!q[0] || !q[1]) {
		fail(&writes_err, "data setup", errno);
		return NULL;
	}
	int err = connect_rc(q[0], q[1]->qp_num, &e->gid, e->gid_index);
	if (!err)
		err = connect_rc(q[1], q[0]->qp_num, &e->gid, e->gid_index);
	if (err) {
		fail(&writes_err, "data connect", err);
		return NULL;
	}
	for (int n = 0; n < WRITES && !stop;) {
		if (e->alarm_loop) { // qperf: run until the timer says the round is over
			round_done = 0;
			timer_us(20000);
		}
		do {
			uint32_t seq = (uint32_t)n;
			memcpy(src, &seq, sizeof(seq));
			struct ibv_recv_wr rwr = {.wr_id = 2}, *bad_r;
			if ((err = ibv_post_recv(q[1], &rwr, &bad_r))) {
				fail(&writes_err, "post_recv", err);
				return NULL;
			}
			struct ibv_sge sge = {.addr = (uintptr_t)src, .length = 64, .lkey = ms->lkey};
			struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
						 .imm_data = htobe32(seq)},
					   *bad;
			wr.wr.rdma.remote_addr = (uintptr_t)dst;
			wr.wr.rdma.rkey = md->rkey;
			if ((err = ibv_post_send(q[0], &wr, &bad))) {
				fail(&writes_err, "post_send", err);
				return NULL;
			}
			int got = 0;
			struct timespec t0, t;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			while (got < 2) {
				struct ibv_wc wc[2];
				int k = ibv_poll_cq(cq, 2, wc);
				if (k < 0) {
					fail(&writes_err, "poll_cq", EIO);
					return NULL;
				}
				for (int j = 0; j < k; j++) {
					if (wc[j].status != IBV_WC_SUCCESS) {
						fail(&writes_err, ibv_wc_status_str(wc[j].status), EIO);
						return NULL;
					}
					if (wc[j].wr_id == 2 && (be32toh(wc[j].imm_data) != seq || memcmp(dst, &seq, 4))) {
						fail(&writes_err, "data mismatch", EIO);
						return NULL;
					}
				}
				got += k;
				clock_gettime(CLOCK_MONOTONIC, &t);
				if (t.tv_sec - t0.tv_sec > 30) {
					fail(&writes_err, "completion never came", ETIMEDOUT);
					return NULL;
				}
			}
			atomic_fetch_add(&writes_ok, 1);
			n++;
		} while (e->alarm_loop && !round_done && n < WRITES);
	}
	if (e->alarm_loop)
		timer_us(0);
	ibv_destroy_qp(q[0]);
	ibv_destroy_qp(q[1]);
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	return NULL;
}

// Sends the mode's signals to the process and to each thread in turn (the
// kernel would otherwise give a process-directed signal to one idle thread).
static void *sender(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	struct timespec ts = {0, 500000};
	pid_t self = (pid_t)syscall(SYS_gettid);
	for (unsigned k = 0; !atomic_load(&stop); k++) {
		if (!nsend) {
			nanosleep(&ts, NULL);
			continue;
		}
		int sig = send_sigs[k % (unsigned)nsend];
		kill(getpid(), sig);
		DIR *d = opendir("/proc/self/task");
		for (struct dirent *de; d && (de = readdir(d));) {
			pid_t tid = (pid_t)atoi(de->d_name);
			if (tid > 0 && tid != self && tid != getpid())
				syscall(SYS_tgkill, getpid(), tid, sig);
		}
		if (d)
			closedir(d);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *jumper(void *arg)
{
	(void)arg;
	volatile unsigned long spin = 0;
	while (!atomic_load(&stop)) {
		if (sigsetjmp(jump_env, 1) != 0) {
			atomic_fetch_add(&jumped, 1);
			continue;
		}
		jump_armed = 1;
		for (int k = 0; k < 100000 && !atomic_load(&stop); k++)
			spin++;
		jump_armed = 0;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4) {
		fprintf(stderr, "usage: sighazard DEV GID_INDEX alrm|int-usr1|qperf|alarm-loop|chld-prof|jump|cost\n");
		return 2;
	}
	const char *mode = argv[3];
	gostack_init();
	struct env e = {.gid_index = atoi(argv[2])};
	bool qperf = strcmp(mode, "qperf") == 0, jump = strcmp(mode, "jump") == 0;
	if (qperf) {
		install(SIGALRM);
		install(SIGPIPE);
		install(SIGQUIT);
		install(SIGURG);
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = find_device(list, n, argv[1]);
	if (!dev)
		return 1;
	e.ctx = ibv_open_device(dev);
	if (!e.ctx || ibv_query_gid(e.ctx, 1, e.gid_index, &e.gid)) {
		printf("outcome %s: open/query_gid: %m\n", mode);
		return 1;
	}
	if (strcmp(mode, "cost") == 0) {
		// What one cheap control verb costs, no signals: ibv_query_port
		// (one ioctl with librxe; with ours, a call into Go, which since
		// issue 22 also blocks and restores the signal mask).
		struct ibv_port_attr pa;
		struct timespec t0, t1;
		int err = 0;
		enum { N = 20000 };
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < N && !err; i++)
			err = ibv_query_port(e.ctx, 1, &pa);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / N;
		printf("hazard cost query_port %.0f ns per call (%d calls)\n", ns, N);
		printf("outcome cost: %s\n", err ? strerror(err) : "ok");
		return err ? 1 : 0;
	}
	if (strcmp(mode, "alrm") == 0) {
		install(SIGALRM);
	} else if (strcmp(mode, "int-usr1") == 0 || jump) {
		install(SIGINT);
		install(SIGUSR1);
		send_sigs[nsend++] = SIGINT;
		send_sigs[nsend++] = SIGUSR1;
	} else if (strcmp(mode, "alarm-loop") == 0) {
		install(SIGALRM);
		e.alarm_loop = true;
	} else if (strcmp(mode, "chld-prof") == 0) {
		install(SIGCHLD);
		install(SIGPROF);
		install(SIGURG);
		send_sigs[nsend++] = SIGCHLD;
		send_sigs[nsend++] = SIGPROF;
		send_sigs[nsend++] = SIGURG;
	} else if (!qperf) {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	pthread_t c[2], d, s, j[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&c[i], NULL, control, &e);
	pthread_create(&d, NULL, data, &e);
	pthread_create(&s, NULL, sender, NULL);
	for (int i = 0; i < 2 && jump; i++)
		pthread_create(&j[i], NULL, jumper, NULL);
	if (strcmp(mode, "alrm") == 0 || qperf)
		timer_us(1000);
	for (int i = 0; i < 2; i++)
		pthread_join(c[i], NULL);
	pthread_join(d, NULL);
	timer_us(0);
	atomic_store(&stop, true);
	pthread_join(s, NULL);
	for (int i = 0; i < 2 && jump; i++)
		pthread_join(j[i], NULL);
	ibv_close_device(e.ctx);
	ibv_free_device_list(list);
	printf("hazard %s verbs %ld verr %ld writes %ld werr %ld signals %ld jumped %ld on_go_stack %ld\n", mode,
	       atomic_load(&verbs_ok), atomic_load(&verbs_err), atomic_load(&writes_ok), atomic_load(&writes_err),
	       atomic_load(&handled), atomic_load(&jumped), atomic_load(&go_stack));
	bool ok = !first_err[0] && atomic_load(&verbs_ok) == 2 * ROUNDS && atomic_load(&writes_ok) == WRITES;
	if (ok && atomic_load(&go_stack)) {
		printf("outcome %s: a handler ran on a goroutine's stack (%ld times)\n", mode, atomic_load(&go_stack));
		return 1;
	}
	printf("outcome %s: %s\n", mode, ok ? "ok" : first_err[0] ? first_err : "incomplete");
	return ok ? 0 : 1;
}
