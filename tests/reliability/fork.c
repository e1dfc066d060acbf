// fork: a fork() child of a process using the provider. What is expected is
// DESIGN.md's rule as cshim/README.md states it ("fork()"): in a child every
// verb that would enter Go fails with ENOSYS (one log line), ibv_close_device
// releases C memory only, data verbs stay C and behave as rdma-core's own
// providers do without ibv_fork_init, and a child that only execs is fine.
// Go's runtime does not survive fork(): a child entering Go while another
// thread was inside Go hangs (reference: cgo-callback-cost.md), so the case
// that matters is forking while a thread keeps making control calls.
// REL_PROVIDER=librxe (the control run) expects librxe's behaviour instead:
// control verbs in the child work, since librxe keeps no state across fork.
// Every child is waited for with a deadline; a child still alive is a hang.
#include "rel.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

static struct rel_end A, B;
static int ours;
static _Atomic int busy_stop;
static _Atomic long busy_calls;

// wait_child waits up to secs for pid; its exit status, or -1 after killing a hang.
static int wait_child(pid_t pid, double secs, int *status)
{
	double end = rel_now() + secs;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0)
			return -1;
		if (rel_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return -1;
		}
		usleep(2000);
	}
}

// in_child runs fn in a fork() child; fn writes its verdict ("ok ..." or a
// reason) into buf. Returns the verdict, or why the child did not give one.
static void in_child(void (*fn)(char *buf, size_t len), char *out, size_t len, double secs)
{
	int p[2];
	if (pipe(p)) {
		snprintf(out, len, "pipe: %s", rel_errname(errno));
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(out, len, "fork: %s", rel_errname(errno));
		return;
	}
	if (pid == 0) {
		char buf[256] = "";
		close(p[0]);
		fn(buf, sizeof(buf));
		ssize_t w = write(p[1], buf, strlen(buf));
		(void)w;
		_exit(0);
	}
	close(p[1]);
	int st = 0;
	int rc = wait_child(pid, secs, &st);
	char buf[256];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	buf[n > 0 ? n : 0] = 0;
	if (rc < 0)
		snprintf(out, len, "child hung: killed after %.0f s (said \"%s\")", secs, buf);
	else if (WIFSIGNALED(st))
		snprintf(out, len, "child killed by signal %d (said \"%s\")", WTERMSIG(st), buf);
	else if (WEXITSTATUS(st) != 0)
		snprintf(out, len, "child exit %d (said \"%s\")", WEXITSTATUS(st), buf);
	else
		snprintf(out, len, "%s", buf[0] ? buf : "child said nothing");
}

static void child_control(char *buf, size_t len)
{
	errno = 0;
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e1 = errno;
	errno = 0;
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 4, NULL, NULL, 0);
	int e2 = errno;
	int want = ours ? ENOSYS : 0;
	int ok = ours ? (!pd && !cq && e1 == ENOSYS && e2 == ENOSYS) : (pd && cq);
	snprintf(buf, len, "%s alloc_pd %s, create_cq %s (want %s)", ok ? "ok" : "bad", pd ? "object" : rel_errname(e1),
		 cq ? "object" : rel_errname(e2), want ? rel_errname(want) : "objects");
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

static void child_data(char *buf, size_t len)
{
	struct ibv_wc wc[4];
	int n = ibv_poll_cq(A.cq, 4, wc);
	snprintf(buf, len, "%s poll_cq on the parent's CQ returned %d (want >= 0)", n >= 0 ? "ok" : "bad", n);
}

static void child_close(char *buf, size_t len)
{
	int rc = ibv_close_device(A.ctx);
	snprintf(buf, len, "%s close_device %s (want 0)", rc == 0 ? "ok" : "bad", rel_errname(rc));
}

static void child_exec(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	execl("/bin/true", "true", (char *)NULL);
	execl("/usr/bin/true", "true", (char *)NULL);
	_exit(127);
}

static void child_busy(char *buf, size_t len)
{
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e = errno;
	struct ibv_port_attr pa;
	int rc = ibv_query_port(A.ctx, 1, &pa);
	int ok = ours ? (!pd && e == ENOSYS) : pd != NULL;
	snprintf(buf, len, "%s alloc_pd %s, query_port %s", ok ? "ok" : "bad", pd ? "object" : rel_errname(e),
		 rel_errname(rc));
	if (pd)
		ibv_dealloc_pd(pd);
}

static void *busy(void *arg)
{
	(void)arg;
	while (!atomic_load(&busy_stop)) {
		struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
		if (pd)
			ibv_dealloc_pd(pd);
		struct ibv_port_attr pa;
		ibv_query_port(A.ctx, 1, &pa);
		atomic_fetch_add(&busy_calls, 1);
	}
	return NULL;
}

static void verdict(const char *name, double t0, const char *out)
{
	rel_check(strncmp(out, "ok", 2) == 0, name, t0, "%s", out);
}

// write_works: an RDMA write from A to B completes and lands.
static int write_works(char *why, size_t len)
{
	memcpy(A.buf, "after-fork", 11);
	struct ibv_sge s = {.addr = (uintptr_t)A.buf, .length = 11, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr = {.rdma = {.remote_addr = (uintptr_t)B.buf, .rkey = B.mr->rkey}}},
			   *bad;
	int rc = ibv_post_send(A.qp, &wr, &bad);
	struct ibv_wc wc = {0};
	int n = rc ? 0 : rel_poll_one(A.cq, &wc, 10);
	int ok = !rc && n == 1 && wc.status == IBV_WC_SUCCESS && memcmp(B.buf, "after-fork", 11) == 0;
	snprintf(why, len, "post_send %s, poll %d, status %s, data %s", rel_errname(rc), n,
		 n == 1 ? ibv_wc_status_str(wc.status) : "-", memcmp(B.buf, "after-fork", 11) ? "missing" : "landed");
	return ok;
}

int main(void)
{
	rel_prog = "fork";
	ours = strcmp(rel_env("REL_PROVIDER", "ours"), "librxe") != 0;
	double t0 = rel_now();
	const char *what = "";
	int rc = rel_pair_open(&A, &B, 16, 4096, 16, &what);
	if (rc) {
		rel_fail("setup", t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	char out[400];

	t0 = rel_now();
	in_child(child_control, out, sizeof(out), 20);
	verdict("child_control_verbs", t0, out);

	t0 = rel_now();
	in_child(child_data, out, sizeof(out), 20);
	verdict("child_poll_cq", t0, out);

	t0 = rel_now();
	in_child(child_close, out, sizeof(out), 20);
	verdict("child_close_device", t0, out);

	// Fork while another thread keeps calling control verbs (into Go, for ours).
	pthread_t th;
	pthread_create(&th, NULL, busy, NULL);
	int forks = atoi(rel_env("FORK_CHILDREN", "20")), good = 0, execok = 0;
	char first_bad[400] = "";
	t0 = rel_now();
	for (int i = 0; i < forks; i++) {
		in_child(child_busy, out, sizeof(out), 10);
		if (strncmp(out, "ok", 2) == 0)
			good++;
		else if (!first_bad[0])
			snprintf(first_bad, sizeof(first_bad), "child %d: %.300s", i, out);
	}
	rel_check(good == forks, "fork_while_busy", t0, "%d of %d children as expected, %ld parent calls meanwhile%s%s",
		  good, forks, atomic_load(&busy_calls), first_bad[0] ? "; " : "", first_bad);
	t0 = rel_now();
	for (int i = 0; i < forks; i++) {
		in_child(child_exec, out, sizeof(out), 10);
		if (strncmp(out, "child said nothing", 18) == 0)
			execok++;
		else if (!first_bad[0])
			snprintf(first_bad, sizeof(first_bad), "exec child %d: %.300s", i, out);
	}
	rel_check(execok == forks, "exec_while_busy", t0, "%d of %d fork+exec children exited 0", execok, forks);
	atomic_store(&busy_stop, 1);
	pthread_join(th, NULL);

	t0 = rel_now();
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e = errno;
	char why[200];
	int wok = write_works(why, sizeof(why));
	rel_check(pd && wok, "parent_after_fork", t0, "alloc_pd %s; RDMA write: %s", pd ? "ok" : rel_errname(e), why);
	if (pd)
		ibv_dealloc_pd(pd);
	rel_end_close(&A);
	rel_end_close(&B);
	return rel_exit_code();
}
