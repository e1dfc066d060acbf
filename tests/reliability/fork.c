// fork: fork() children of a process using the provider (issue 8, contract of
// issue 24, cshim/README.md "fork()"). A child of a process whose Go part is
// running opens devices itself and uses every verb there, with a Go part of
// its own; so does a grandchild; the parent keeps working. The parent's
// contexts in a child work for new objects with both (ours adopts them into
// the child's Go part), and data verbs on the parent's objects work as in
// rdma-core's providers without ibv_fork_init; control verbs on the parent's
// objects get the kernel's answers with both (ours adopts each into the
// child's Go part by its kernel handle). A child that only
// execs is fine. Forking while another thread is inside control verbs is covered: the
// child must not hang (Go's runtime does not survive fork()).
// REL_PROVIDER=librxe (the control run) expects librxe's behaviour.
// Every child is waited for with a deadline; a child still alive is a hang.
#include "rel.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

static struct rel_end A, B;
static int ours;
static _Atomic int busy_stop;
static _Atomic long busy_calls;

// map_of prints the mapping of pid that holds addr, with the offset in its file.
static void map_of(pid_t pid, const char *what, unsigned long addr)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		char perm[8];
		if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perm, &off) == 4 && addr >= lo && addr < hi) {
			char *file = strchr(line, '/');
			fprintf(stderr, "fork:   %s %#lx = %s+%#lx", what, addr, file ? file : "[anon]\n", addr - lo + off);
			break;
		}
	}
	if (f)
		fclose(f);
}

// where_running stops a thread that is running (not in a system call) with
// ptrace and prints its instruction pointer and the return addresses of its
// frame-pointer chain (Go keeps frame pointers), each with its mapping.
static void where_running(pid_t pid, pid_t tid)
{
	struct user_regs_struct r;
	int st;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) || ptrace(PTRACE_INTERRUPT, tid, 0, 0) || waitpid(tid, &st, __WALL) != tid ||
	    ptrace(PTRACE_GETREGS, tid, 0, &r)) {
		fprintf(stderr, "fork:   ptrace %d: %s\n", (int)tid, strerror(errno));
		return;
	}
	map_of(pid, "ip", r.rip);
	unsigned long fp = r.rbp;
	for (int i = 0; i < 12 && fp; i++) {
		errno = 0;
		unsigned long next = (unsigned long)ptrace(PTRACE_PEEKDATA, tid, (void *)fp, 0);
		unsigned long ret = (unsigned long)ptrace(PTRACE_PEEKDATA, tid, (void *)(fp + 8), 0);
		if (errno || next <= fp)
			break;
		map_of(pid, "ret", ret);
		fp = next;
	}
	ptrace(PTRACE_DETACH, tid, 0, 0);
}

// where_hung prints, for each thread of a hung pid, the system call it sits
// in (/proc/PID/task/TID/syscall: number, arguments, stack and instruction
// pointer) and the mapping the instruction pointer is in, so a hang names
// the library and the lock.
static void where_hung(pid_t pid)
{
	char path[320], line[512];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/syscall", (int)pid, e->d_name);
		FILE *f = fopen(path, "r");
		if (!f || !fgets(line, sizeof(line), f)) {
			if (f)
				fclose(f);
			continue;
		}
		fclose(f);
		line[strcspn(line, "\n")] = 0;
		unsigned long ip = 0;
		char *last = strrchr(line, ' ');
		if (last)
			ip = strtoul(last + 1, NULL, 16);
		fprintf(stderr, "fork: hung %d task %s: syscall %s\n", (int)pid, e->d_name, line);
		if (strncmp(line, "running", 7) == 0) {
			where_running(pid, (pid_t)atoi(e->d_name));
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;
			if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && ip >= lo && ip < hi) {
				fprintf(stderr, "fork: hung %d task %s: ip in %s", (int)pid, e->d_name, line);
				break;
			}
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

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
			where_hung(pid);
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

// child_control: control verbs on the parent's context (ours: the child's Go
// part adopts the context at the first one; librxe keeps no state): new
// objects on it work with both.
static void child_control(char *buf, size_t len)
{
	errno = 0;
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e1 = errno;
	errno = 0;
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 4, NULL, NULL, 0);
	int e2 = errno;
	int ok = pd && cq;
	snprintf(buf, len, "%s alloc_pd %s, create_cq %s on the parent's context (want objects)", ok ? "ok" : "bad",
		 pd ? "object" : rel_errname(e1), cq ? "object" : rel_errname(e2));
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
}

// The parent's own objects for child_parent_objects, made before it forks:
// the child ends up destroying them in the kernel, so A's stay untouched.
static struct {
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mw *mw;
	char buf[4096];
} P;

static const char *parent_objects_make(void)
{
	P.pd = ibv_alloc_pd(A.ctx);
	if (!P.pd)
		return "alloc_pd";
	P.mr = ibv_reg_mr(P.pd, P.buf, sizeof(P.buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	P.cq = ibv_create_cq(A.ctx, 8, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	P.srq = ibv_create_srq(P.pd, &sa);
	if (!P.mr || !P.cq || !P.srq)
		return "reg_mr, create_cq or create_srq";
	struct ibv_qp_init_attr ia = {.send_cq = P.cq, .recv_cq = P.cq, .srq = P.srq,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}, .qp_type = IBV_QPT_RC};
	P.qp = ibv_create_qp(P.pd, &ia);
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND};
	if (!P.qp || ibv_modify_qp(P.qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return "create_qp or modify_qp to INIT";
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
				 .grh = {.dgid = B.gid, .sgid_index = (uint8_t)A.gid_index, .hop_limit = 1}};
	P.ah = ibv_create_ah(P.pd, &aa);
	P.mw = ibv_alloc_mw(P.pd, IBV_MW_TYPE_1);
	if (!P.ah || !P.mw)
		return "create_ah or alloc_mw";
	return NULL;
}

// child_parent_objects: control verbs on objects the parent created (its PD,
// MR, CQ, SRQ, QP, AH and MW), and new objects on the parent's PD and CQ:
// the kernel serves the parent's ucontext for the child, so librxe's
// answers are the kernel's, and ours must be the same (issue 24).
static void child_parent_objects(char *buf, size_t len)
{
	char steps[360] = "";
	size_t n = 0;
	int bad = 0;
#define STEP(name, rc)                                                                                         \
	do {                                                                                                   \
		int r_ = (rc);                                                                                 \
		bad |= r_ != 0;                                                                                \
		n += (size_t)snprintf(steps + n, n < sizeof(steps) ? sizeof(steps) - n : 0, " %s %s", name,    \
				      rel_errname(r_));                                                        \
	} while (0)
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	int rc = ibv_query_qp(P.qp, &qa, IBV_QP_STATE, &qi);
	STEP("query_qp", rc ? rc : qa.qp_state == IBV_QPS_INIT ? 0 : EPROTO);
	STEP("modify_qp", ibv_modify_qp(P.qp, &(struct ibv_qp_attr){.qp_state = IBV_QPS_ERR}, IBV_QP_STATE));
	struct ibv_srq_attr sa;
	STEP("query_srq", ibv_query_srq(P.srq, &sa));
	STEP("modify_srq", ibv_modify_srq(P.srq, &(struct ibv_srq_attr){.srq_limit = 1}, IBV_SRQ_LIMIT));
	STEP("resize_cq", ibv_resize_cq(P.cq, 16));
	struct ibv_qp_init_attr ia = {.send_cq = P.cq, .recv_cq = P.cq, .srq = P.srq,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}, .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(P.pd, &ia);
	STEP("new_qp", qp ? 0 : errno ? errno : EIO); // on the parent's PD, CQ and SRQ
	if (qp)
		STEP("destroy_new_qp", ibv_destroy_qp(qp));
	char own[64];
	struct ibv_mr *mr = ibv_reg_mr(P.pd, own, sizeof(own), IBV_ACCESS_LOCAL_WRITE);
	STEP("new_mr", mr ? 0 : errno ? errno : EIO); // on the parent's PD
	if (mr)
		STEP("dereg_new_mr", ibv_dereg_mr(mr));
	STEP("dealloc_mw", ibv_dealloc_mw(P.mw));
	STEP("dereg_mr", ibv_dereg_mr(P.mr));
	STEP("destroy_ah", ibv_destroy_ah(P.ah));
	STEP("destroy_qp", ibv_destroy_qp(P.qp));
	STEP("destroy_srq", ibv_destroy_srq(P.srq));
	STEP("destroy_cq", ibv_destroy_cq(P.cq));
	STEP("dealloc_pd", ibv_dealloc_pd(P.pd));
#undef STEP
	snprintf(buf, len, "%s%s (want 0 each)", bad ? "bad" : "ok", steps);
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

// child_busy: forked while a parent thread is inside control verbs; the
// parent's context gives objects as in child_control, the child's own works.
static void child_busy(char *buf, size_t len)
{
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e = errno;
	errno = 0;
	struct ibv_context *own = rel_open_by_name(rel_devname(0));
	int eo = errno;
	struct ibv_pd *opd = own ? ibv_alloc_pd(own) : NULL;
	int ep = errno;
	struct ibv_port_attr pa;
	int rc = own ? ibv_query_port(own, 1, &pa) : -1;
	int ok = pd && opd && rc == 0;
	snprintf(buf, len, "%s parent's alloc_pd %s; own open %s, alloc_pd %s, query_port %s", ok ? "ok" : "bad",
		 pd ? "object" : rel_errname(e), own ? "ok" : rel_errname(eo), opd ? "ok" : rel_errname(ep),
		 rel_errname(rc));
	if (opd)
		ibv_dealloc_pd(opd);
	if (own)
		ibv_close_device(own);
	if (pd)
		ibv_dealloc_pd(pd);
}

// struct verbs_device: ibv_device (664 bytes), then its verbs_device_ops,
// whose first member is the provider's name.
static const char *provider_of(struct ibv_context *ctx)
{
	const char *const *ops = *(const char *const *const *)((const char *)ctx->device + 664);
	return ops ? ops[0] : "?";
}

// A child's own work, each step writing "ok ..." or why not into its buffer.
struct work {
	char traffic[200], verbs[300], cm[200], grand[600];
};

// own_traffic: the child's own contexts on rxe0 and rxe1 (served by the
// provider under test), an RC pair and 64 RDMA writes of 4 KiB, every byte
// checked. Leaves the pair open in *a, *b for own_verbs.
static void own_traffic(int id, struct rel_end *a, struct rel_end *b, char *out, size_t len)
{
	enum { LEN = 4096, WRITES = 64 };
	const char *what = "";
	int rc = rel_pair_open(a, b, 16, LEN, 16, &what);
	if (rc) {
		snprintf(out, len, "bad %s: %s", what, rel_errname(rc));
		return;
	}
	const char *want = ours ? "usb4_rdma" : "rxe";
	if (strcmp(provider_of(a->ctx), want) || strcmp(provider_of(b->ctx), want)) {
		snprintf(out, len, "bad served by %s/%s, not %s", provider_of(a->ctx), provider_of(b->ctx), want);
		return;
	}
	for (int w = 0; w < WRITES; w++) {
		unsigned char v = (unsigned char)(id * 131 + w * 7 + 1);
		memset(a->buf, v, LEN);
		struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = LEN, .lkey = a->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)w, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = (uintptr_t)b->buf, .rkey = b->mr->rkey}};
		struct ibv_send_wr *bad;
		struct ibv_wc wc;
		int prc = ibv_post_send(a->qp, &wr, &bad);
		if (prc || rel_poll_one(a->cq, &wc, 10) != 1 || wc.status != IBV_WC_SUCCESS) {
			snprintf(out, len, "bad write %d: post %s, no successful completion", w, rel_errname(prc));
			return;
		}
		for (size_t i = 0; i < LEN; i++)
			if (((unsigned char *)b->buf)[i] != v) {
				snprintf(out, len, "bad write %d: byte %zu is %u, want %u", w, i, ((unsigned char *)b->buf)[i], v);
				return;
			}
	}
	snprintf(out, len, "ok %d x 4 KiB RDMA writes checked", WRITES);
}

// own_verbs: on the child's own contexts, the rest: query_device, an SRQ
// behind a second RC pair whose receive CQ is on a completion channel (4
// SENDs of 1 KiB arrive, the CQ event is read and acknowledged, every byte checked),
// an AH, query_qp and query_srq, and every object destroyed with 0.
static void own_verbs(int id, struct rel_end *a, struct rel_end *b, char *out, size_t len)
{
	enum { MSGS = 4, MLEN = 1024 }; // MSGS * MLEN fits the 4 KiB buffers of own_traffic
	struct ibv_device_attr da;
	int rc = ibv_query_device(b->ctx, &da);
	struct ibv_comp_channel *ch = rc ? NULL : ibv_create_comp_channel(b->ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(b->ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_srq_init_attr sia = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq = cq ? ibv_create_srq(b->pd, &sia) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	struct ibv_qp *qb = srq ? ibv_create_qp(b->pd, &ia) : NULL;
	struct ibv_qp *qa = qb ? rel_create_rc_qp(a->pd, a->cq, a->cq, 16) : NULL;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
				 .grh = {.dgid = b->gid, .sgid_index = (uint8_t)a->gid_index, .hop_limit = 64}};
	struct ibv_ah *ah = qa ? ibv_create_ah(a->pd, &aa) : NULL;
	const char *step = !ch ? "create_comp_channel" : !cq ? "create_cq on the channel" : !srq ? "create_srq"
			 : !qb ? "create_qp with the SRQ" : !qa ? "create_qp" : !ah ? "create_ah" : NULL;
	if (rc || step) {
		snprintf(out, len, "bad %s: %s", rc ? "query_device" : step, rel_errname(rc ? rc : errno));
		return;
	}
	enum ibv_mtu mtu = a->mtu < b->mtu ? a->mtu : b->mtu;
	rc = rel_qp_to_init(qa);
	if (!rc)
		rc = rel_qp_to_init(qb);
	if (!rc)
		rc = rel_qp_connect(qa, mtu, a->gid_index, qb->qp_num, &b->gid);
	if (!rc)
		rc = rel_qp_connect(qb, mtu, b->gid_index, qa->qp_num, &a->gid);
	if (!rc)
		rc = ibv_req_notify_cq(cq, 0);
	char *rbuf = b->buf;
	for (int m = 0; !rc && m < MSGS; m++) {
		struct ibv_sge sge = {.addr = (uintptr_t)(rbuf + m * MLEN), .length = MLEN, .lkey = b->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)m, .sg_list = &sge, .num_sge = 1}, *bad;
		rc = ibv_post_srq_recv(srq, &wr, &bad);
	}
	if (rc) {
		snprintf(out, len, "bad SRQ pair setup: %s", rel_errname(rc));
		return;
	}
	for (int m = 0; m < MSGS; m++)
		memset((char *)a->buf + m * MLEN, (id * 17 + m + 3) & 0xff, MLEN);
	for (int m = 0; m < MSGS; m++) {
		struct ibv_sge sge = {.addr = (uintptr_t)a->buf + (uintptr_t)(m * MLEN), .length = MLEN, .lkey = a->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)m, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED}, *bad;
		struct ibv_wc wc;
		if (ibv_post_send(qa, &wr, &bad) || rel_poll_one(a->cq, &wc, 10) != 1 || wc.status != IBV_WC_SUCCESS) {
			snprintf(out, len, "bad SEND %d to the SRQ QP did not complete", m);
			return;
		}
	}
	// The completion event: wait for the channel's fd, then read it.
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	if (poll(&pfd, 1, 10000) != 1 || ibv_get_cq_event(ch, &ev_cq, &ev_ctx) || ev_cq != cq) {
		snprintf(out, len, "bad no completion event on the channel");
		return;
	}
	ibv_ack_cq_events(cq, 1);
	int got = 0;
	for (double end = rel_now() + 10; got < MSGS && rel_now() < end;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0 || (n == 1 && (wc.status != IBV_WC_SUCCESS || wc.byte_len != MLEN))) {
			snprintf(out, len, "bad receive %d: poll %d status %s", got, n, n == 1 ? ibv_wc_status_str(wc.status) : "-");
			return;
		}
		got += n;
	}
	for (int m = 0; m < got; m++)
		for (int i = 0; i < MLEN; i++)
			if ((unsigned char)rbuf[m * MLEN + i] != ((id * 17 + m + 3) & 0xff)) {
				snprintf(out, len, "bad received message %d byte %d differs", m, i);
				return;
			}
	struct ibv_srq_attr sa;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	int qrc = ibv_query_srq(srq, &sa), qqrc = ibv_query_qp(qb, &qattr, IBV_QP_STATE, &qinit);
	int d1 = ibv_destroy_ah(ah), d2 = ibv_destroy_qp(qa), d3 = ibv_destroy_qp(qb), d4 = ibv_destroy_srq(srq),
	    d5 = ibv_destroy_cq(cq), d6 = ibv_destroy_comp_channel(ch);
	int ok = got == MSGS && !qrc && !qqrc && qattr.qp_state == IBV_QPS_RTS && !d1 && !d2 && !d3 && !d4 && !d5 && !d6;
	snprintf(out, len,
		 "%s query_device, comp channel + CQ event, SRQ with %d/%d SENDs checked, AH, query_srq %s, query_qp %s "
		 "(state %d); destroys %d %d %d %d %d %d",
		 ok ? "ok" : "bad", got, MSGS, rel_errname(qrc), rel_errname(qqrc), qattr.qp_state, d1, d2, d3, d4, d5, d6);
}

// cm_wait: the next event on ch, which must be of type want; 0 or an errno.
static int cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	if (poll(&pfd, 1, 20000) != 1)
		return ETIMEDOUT;
	if (rdma_get_cm_event(ch, &ev))
		return errno ? errno : EIO;
	int ok = ev->event == want;
	if (id)
		*id = ev->id;
	if (!ok)
		fprintf(stderr, "fork: rdma_cm event %s, want %s\n", rdma_event_str(ev->event), rdma_event_str(want));
	rdma_ack_cm_event(ev);
	return ok ? 0 : EPROTO;
}

// cm_side: one side of an rdma_cm connection on port (server on IP0, client
// from IP1): librdmacm opens the device in this process; 16 SENDs of 2 KiB go
// client -> server and are echoed back, every byte checked at both ends (the
// server's copy is what it received, so the client's check covers both ways).
// ready: the server writes a byte when it listens; the client waits for it.
static void cm_side(int server, int port, int ready[2], int seed, char *out, size_t len)
{
	enum { MSGS = 16, MLEN = 2048 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid = NULL, *id = NULL;
	struct sockaddr_in a0 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)}, a1 = {.sin_family = AF_INET};
	inet_pton(AF_INET, rel_env("USB4VERBS_IP0", "10.11.0.1"), &a0.sin_addr);
	inet_pton(AF_INET, rel_env("USB4VERBS_IP1", "10.11.0.2"), &a1.sin_addr);
	const char *what = "create_id";
	int rc = ch ? 0 : (errno ? errno : EIO);
	if (!rc && server) {
		char c = 1;
		rc = rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ? errno : 0;
		what = "bind/listen";
		if (!rc)
			rc = rdma_bind_addr(lid, (struct sockaddr *)&a0) || rdma_listen(lid, 1) ? errno : 0;
		ssize_t w = write(ready[1], &c, 1);
		(void)w;
		what = "CONNECT_REQUEST";
		if (!rc)
			rc = cm_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &id);
	} else if (!rc) {
		char c;
		what = "waiting for the server";
		rc = read(ready[0], &c, 1) == 1 ? 0 : EIO;
		if (!rc)
			rc = rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? errno : 0;
		what = "resolve_addr";
		if (!rc)
			rc = rdma_resolve_addr(id, (struct sockaddr *)&a1, (struct sockaddr *)&a0, 5000) ? errno : 0;
		if (!rc)
			rc = cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
		what = "resolve_route";
		if (!rc)
			rc = rdma_resolve_route(id, 5000) ? errno : 0;
		if (!rc)
			rc = cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	}
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_mr *mr = NULL;
	char *buf = NULL;
	if (!rc) {
		what = "objects on the cm_id's context";
		pd = ibv_alloc_pd(id->verbs);
		cq = pd ? ibv_create_cq(id->verbs, 2 * MSGS + 2, NULL, NULL, 0) : NULL;
		buf = calloc(2, MSGS * MLEN);
		mr = cq && buf ? ibv_reg_mr(pd, buf, 2 * MSGS * MLEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = MSGS, .max_recv_wr = MSGS, .max_send_sge = 1, .max_recv_sge = 1}};
		rc = mr ? (rdma_create_qp(id, pd, &ia) ? errno : 0) : (errno ? errno : EIO);
	}
	if (!rc && strcmp(provider_of(id->verbs), ours ? "usb4_rdma" : "rxe") != 0) {
		what = "provider";
		rc = EPROTO;
	}
	char *rx = buf + MSGS * MLEN;
	for (int m = 0; !rc && m < MSGS; m++) {
		what = "post_recv";
		struct ibv_sge sge = {.addr = (uintptr_t)(rx + m * MLEN), .length = MLEN, .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)m, .sg_list = &sge, .num_sge = 1}, *bad;
		rc = ibv_post_recv(id->qp, &wr, &bad);
	}
	if (!rc) {
		struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
		what = server ? "accept" : "connect";
		rc = (server ? rdma_accept(id, &cp) : rdma_connect(id, &cp)) ? errno : 0;
		if (!rc)
			rc = cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED, NULL);
	}
	int sent = 0, recvd = 0;
	// The client sends message m, the server echoes it once it arrived;
	// both count completions of either kind as they come (one CQ).
	for (int m = 0; !rc && m <= MSGS; m++) {
		if (m > 0 || !server) {
			int k = server ? m - 1 : m; // what to send now
			if (k < MSGS) {
				char *tx = buf + k * MLEN;
				if (server)
					memcpy(tx, rx + k * MLEN, MLEN);
				else
					memset(tx, (seed + k) & 0xff, MLEN);
				what = "send";
				struct ibv_sge sge = {.addr = (uintptr_t)tx, .length = MLEN, .lkey = mr->lkey};
				struct ibv_send_wr wr = {.wr_id = (uint64_t)(1000 + k), .sg_list = &sge, .num_sge = 1,
							 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
				rc = ibv_post_send(id->qp, &wr, &bad);
			}
		}
		int want_recv = m < MSGS ? m + 1 : MSGS;
		while (!rc && (recvd < want_recv || (m == MSGS && sent < MSGS))) {
			struct ibv_wc wc;
			what = "completion";
			if (rel_poll_one(cq, &wc, 20) != 1 || wc.status != IBV_WC_SUCCESS) {
				rc = EIO;
				break;
			}
			if (wc.opcode == IBV_WC_SEND) {
				sent++;
				continue;
			}
			recvd++;
			for (int i = 0; i < MLEN; i++)
				if ((unsigned char)rx[wc.wr_id * MLEN + i] != ((seed + (int)wc.wr_id) & 0xff)) {
					what = "data check";
					rc = EBADMSG;
					break;
				}
		}
	}
	if (!rc && !server)
		rdma_disconnect(id);
	if (!rc && server)
		cm_wait(ch, RDMA_CM_EVENT_DISCONNECTED, NULL);
	snprintf(out, len, "%s %s: %d sent, %d received%s%s%s", rc ? "bad" : "ok", server ? "server" : "client", sent,
		 recvd, rc ? " (" : "", rc ? what : "", rc ? ")" : "");
	if (rc)
		snprintf(out + strlen(out), len - strlen(out), " %s", rel_errname(rc));
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	free(buf);
	if (id)
		rdma_destroy_id(id);
	if (lid)
		rdma_destroy_id(lid);
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void family(int workers, int depth, int port, char out[][sizeof(struct work)], double secs);

// worker: one child's work; worker 0 of a family with depth left forks the
// next generation (two grandchildren) after its own work.
static void worker(int id, int depth, int port, int ready[2], struct work *w)
{
	struct rel_end a, b;
	own_traffic(id, &a, &b, w->traffic, sizeof(w->traffic));
	if (strncmp(w->traffic, "ok", 2) == 0)
		own_verbs(id, &a, &b, w->verbs, sizeof(w->verbs));
	else
		snprintf(w->verbs, sizeof(w->verbs), "bad: no traffic");
	// Child 0 forks the next generation after its own open and traffic but
	// before its rdma_cm: librdmacm keeps the contexts it opened, and a
	// grandchild that inherits them has them from its parent, which
	// rdma-core's providers do not serve either (librxe's doorbell is a
	// write() on the inherited command fd, which the kernel refuses to
	// another process with EACCES: ib_safe_file_access).
	if (id == 0 && depth > 0) {
		char g[2][sizeof(struct work)];
		family(2, depth - 1, port + 100, g, 120);
		for (int i = 0; i < 2; i++) {
			struct work *gw = (struct work *)g[i];
			if (strncmp(gw->traffic, "ok", 2) || strncmp(gw->verbs, "ok", 2) || strncmp(gw->cm, "ok", 2)) {
				snprintf(w->grand, sizeof(w->grand), "bad grandchild %d: traffic %.100s; verbs %.150s; cm %.100s", i,
					 gw->traffic, gw->verbs, gw->cm);
				break;
			}
			snprintf(w->grand, sizeof(w->grand), "ok 2 grandchildren: %.150s; %.100s", gw->verbs, gw->cm);
		}
	}
	cm_side(id % 2 == 0, port + id / 2, ready, (id / 2) * 29 + 5 + port % 7, w->cm, sizeof(w->cm));
	rel_end_close(&a);
	rel_end_close(&b);
}

// family forks workers children at once (each pair of them meets over
// rdma_cm) and collects each one's struct work, or why there is none.
static void family(int workers, int depth, int port, char out[][sizeof(struct work)], double secs)
{
	pid_t pid[4];
	int res[4][2], ready[2][2];
	for (int p = 0; p < workers / 2; p++)
		if (pipe(ready[p]))
			ready[p][0] = ready[p][1] = -1;
	fflush(stdout);
	for (int i = 0; i < workers; i++) {
		memset(out[i], 0, sizeof(struct work));
		if (pipe(res[i]))
			res[i][0] = res[i][1] = -1;
		pid[i] = fork();
		if (pid[i] == 0) {
			struct work w = {0};
			worker(i, depth, port, ready[i / 2], &w);
			ssize_t n = write(res[i][1], &w, sizeof(w));
			(void)n;
			_exit(0);
		}
		close(res[i][1]);
	}
	for (int i = 0; i < workers; i++) {
		int st = 0;
		struct work *w = (struct work *)out[i];
		int rc = wait_child(pid[i], secs, &st);
		ssize_t n = read(res[i][0], w, sizeof(*w));
		close(res[i][0]);
		if (rc < 0 || WIFSIGNALED(st) || WEXITSTATUS(st) != 0 || n != (ssize_t)sizeof(*w)) {
			char why[100];
			snprintf(why, sizeof(why), "bad child %d %s", i,
				 rc < 0 ? "hung (killed)" : WIFSIGNALED(st) ? "killed by a signal" : "gave no report");
			if (n != (ssize_t)sizeof(*w))
				memset(w, 0, sizeof(*w));
			if (!w->traffic[0] || rc < 0 || WIFSIGNALED(st))
				snprintf(w->traffic, sizeof(w->traffic), "%s", why);
			if (!w->verbs[0])
				snprintf(w->verbs, sizeof(w->verbs), "%s", why);
			if (!w->cm[0])
				snprintf(w->cm, sizeof(w->cm), "%s", why);
		}
	}
	for (int p = 0; p < workers / 2; p++) {
		close(ready[p][0]);
		close(ready[p][1]);
	}
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static long rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

// first_open_cost opens rxe0 once and describes what that open cost: time,
// threads before and after, VmRSS growth (the first open of a process
// image loads its Go part). Printed as a "# cost" line, not a result.
static void first_open_cost(const char *who, char *out, size_t len)
{
	int t0 = count_threads();
	long r0 = rss_kib();
	double s0 = rel_now();
	struct ibv_context *ctx = rel_open_by_name(rel_devname(0));
	double ms = (rel_now() - s0) * 1e3;
	snprintf(out, len, "%s first open %s: %.1f ms, threads %d -> %d, VmRSS %+ld KiB", who, ctx ? "ok" : "failed", ms,
		 t0, count_threads(), rss_kib() - r0);
	if (ctx)
		ibv_close_device(ctx);
}

// child_open_own: one child opens rxe0 and rxe1 itself and moves traffic
// (the case that gave ENOSYS at the open before issue 24).
static void child_open_own(char *buf, size_t len)
{
	struct rel_end a, b;
	char t[200], cost[160];
	first_open_cost("child", cost, sizeof(cost));
	printf("# cost: %s: %s\n", rel_prog, cost);
	fflush(stdout);
	own_traffic(7, &a, &b, t, sizeof(t));
	snprintf(buf, len, "%s", t);
	rel_end_close(&a);
	rel_end_close(&b);
}

// families: the parent (which opened rxe0/rxe1 and moved traffic) forks 4
// children; each does own_traffic, own_verbs, and meets a sibling over
// rdma_cm; child 0 forks two grandchildren that do the same, after its own
// traffic and before its rdma_cm (worker).
static void families(void)
{
	enum { N = 4 };
	char out[N][sizeof(struct work)];
	double t0 = rel_now();
	family(N, 1, 20000 + (getpid() % 5000), out, 300);
	int ok[3] = {0};
	const char *first_bad[3] = {NULL};
	int who[3] = {0};
	for (int i = 0; i < N; i++) {
		struct work *w = (struct work *)out[i];
		const char *v[3] = {w->traffic, w->verbs, w->cm};
		for (int k = 0; k < 3; k++) {
			if (strncmp(v[k], "ok", 2) == 0)
				ok[k]++;
			else if (!first_bad[k]) {
				first_bad[k] = v[k];
				who[k] = i;
			}
		}
	}
	static const char *const names[3] = {"children_traffic", "children_verbs", "children_rdma_cm"};
	static const char *const what[3] = {"own rxe0+rxe1 contexts, RC pair, 64 x 4 KiB writes checked",
					    "query_device, comp channel events, SRQ, AH, query_qp/srq, destroys",
					    "2 pairs over rdma_cm, 16 x 2 KiB SENDs echoed, checked"};
	for (int k = 0; k < 3; k++)
		if (first_bad[k])
			rel_check(0, names[k], t0, "%d of %d children: %s; child %d: %.200s", ok[k], N, what[k], who[k],
				  first_bad[k]);
		else
			rel_check(1, names[k], t0, "%d of %d children: %s; child 0: %.200s", ok[k], N, what[k],
				  k == 0 ? ((struct work *)out[0])->traffic : k == 1 ? ((struct work *)out[0])->verbs : ((struct work *)out[0])->cm);
	const char *g = ((struct work *)out[0])->grand;
	rel_check(strncmp(g, "ok", 2) == 0, "grandchildren", t0, "child 0 forked 2 after its own open: %.400s",
		  g[0] ? g : "no report");
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

// fork_while_busy: fork (and fork+exec) while another thread keeps calling
// control verbs (into Go, for ours).
static void fork_while_busy(void)
{
	char out[400];
	// Each child gets 120 s to show it does not hang: its first open starts a
	// Go runtime of its own, which took 7.5 s in the TCG VM under load.
	pthread_t th;
	pthread_create(&th, NULL, busy, NULL);
	int forks = atoi(rel_env("FORK_CHILDREN", "20")), good = 0, execok = 0;
	char first_bad[400] = "";
	double t0 = rel_now();
	for (int i = 0; i < forks; i++) {
		in_child(child_busy, out, sizeof(out), 120);
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
}

int main(void)
{
	rel_prog = rel_env("REL_PROG", "fork");
	ours = strcmp(rel_env("REL_PROVIDER", "ours"), "librxe") != 0;
	char cost[160];
	first_open_cost("parent", cost, sizeof(cost));
	printf("# cost: %s: %s\n", rel_prog, cost);
	double t0 = rel_now();
	const char *what = "";
	int rc = rel_pair_open(&A, &B, 16, 4096, 16, &what);
	if (rc) {
		rel_fail("setup", t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	char out[400];
	// FORK_SRQ_ONLY=1: the cases with an SRQ only (the parent's SRQ in a
	// child, and unless FORK_SRQ_FAMILIES=0 the families, whose children and
	// grandchildren make SRQs of their own), for the run with
	// USB4VERBS_SRQ=provider (guest.sh): the rest does not depend on whose
	// SRQ it is.
	int srq_only = atoi(rel_env("FORK_SRQ_ONLY", "0"));
	int with_families = !srq_only || atoi(rel_env("FORK_SRQ_FAMILIES", "1"));

	if (!srq_only) {
		t0 = rel_now();
		in_child(child_control, out, sizeof(out), 20);
		verdict("child_control_verbs", t0, out);
	}

	t0 = rel_now();
	const char *pmade = parent_objects_make();
	if (pmade)
		rel_check(0, "child_parent_objects", t0, "the parent's %s failed: %s", pmade, rel_errname(errno));
	else {
		in_child(child_parent_objects, out, sizeof(out), 20);
		verdict("child_parent_objects", t0, out);
	}

	if (!srq_only) {
		t0 = rel_now();
		in_child(child_data, out, sizeof(out), 20);
		verdict("child_poll_cq", t0, out);

		t0 = rel_now();
		in_child(child_close, out, sizeof(out), 20);
		verdict("child_close_device", t0, out);

		t0 = rel_now();
		in_child(child_open_own, out, sizeof(out), 60);
		verdict("child_open", t0, out);
	}

	// The parent moves traffic, then forks the families.
	if (with_families) {
		t0 = rel_now();
		char why0[200];
		int wok0 = write_works(why0, sizeof(why0));
		rel_check(wok0, "parent_before_families", t0, "RDMA write: %s", why0);
		families();
	}
	if (!srq_only)
		fork_while_busy();

	t0 = rel_now();
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int e = errno;
	char why[200];
	int wok = write_works(why, sizeof(why));
	rel_check(pd && wok, "parent_after_fork", t0, "after every child and grandchild exited: alloc_pd %s; RDMA write: %s",
		  pd ? "ok" : rel_errname(e), why);
	if (pd)
		ibv_dealloc_pd(pd);
	rel_end_close(&A);
	rel_end_close(&B);
	return rel_exit_code();
}
