// badinput: bad input through libibverbs must give the error rdma-core's own
// providers give (the control run on stock librxe is the reference), never a
// crash or a hang. Each case can run in its own process (--case NAME), so a
// crash loses one case only; tests/reliability/guest.sh does that.
//
//   badinput --list           case names, one a line
//   badinput [--case NAME]    all cases, or one
//
// Expected values are librxe's on rdma-core 44 / kernel 6.1, observed in the
// control run (docs/reliability.md); the kernel's checks are
// torvalds/linux:drivers/infiniband/core/uverbs_cmd.c and sw/rxe/rxe_verbs.c.
// On the usb4 bed (USB4VERBS_BACKEND_TREE set, tests/usb4/README.md) a case
// listed in module_answers expects that module tree's own answer instead, and
// its result line says so.
#include "rel.h"

#include <stddef.h>

// module_answer: what a module tree answers, where that is the module's own
// behaviour (read in its source, cited) and not librxe's. post_rc != 0: the
// post is refused with that errno and bad_wr = the WR; post_rc == 0: it is
// posted and completes with wc_status.
struct module_answer {
	const char *tree, *kase;
	int post_rc;
	enum ibv_wc_status wc_status;
	const char *why;
};

static const struct module_answer module_answers[] = {
	{"hellas-main", "post_send_bad_lkey", EINVAL, IBV_WC_SUCCESS,
	 "the module looks the lkey up at post: hellas-main:kernel/ibdev.c:3952-3955 "
	 "(tbv_prepare_send_segments, -EINVAL), tbv_post_send sets bad_wr (5240-5244)"},
	{"hellas-main", "post_send_bad_rkey", 0, IBV_WC_WR_FLUSH_ERR,
	 "the receiver refuses the rkey (hellas-main:kernel/ibdev.c:7317-7320) and the sender's "
	 "tbv_send_complete maps every failure but -EAGAIN/-ETIMEDOUT to WR_FLUSH_ERR (3141-3148)"},
	{"hellas-main", "post_send_remote_out_of_range", 0, IBV_WC_WR_FLUSH_ERR,
	 "the receiver's copy into the MR fails (hellas-main:kernel/ibdev.c:7338-7343) and the "
	 "sender's tbv_send_complete maps it to WR_FLUSH_ERR (3141-3148)"},
	{"hellas-main", "post_send_err_qp", EINVAL, IBV_WC_SUCCESS,
	 "no posts in ERR: hellas-main:kernel/ibdev.c:1112-1121 (tbv_qp_allows_post), "
	 "5080-5081 (tbv_post_send_one, -EINVAL)"},
	{"hellas-main", "post_recv_err_qp", EINVAL, IBV_WC_SUCCESS,
	 "no posts in ERR: hellas-main:kernel/ibdev.c:1112-1121 (tbv_qp_allows_post), "
	 "5298-5302 (tbv_post_recv, -EINVAL, bad_wr = the WR)"},
};

// module_answer_for: the module's answer for case kase on the bed's tree, or
// NULL (not on the bed, or the module answers as librxe does).
static const struct module_answer *module_answer_for(const char *kase)
{
	const char *tree = getenv("USB4VERBS_BACKEND_TREE");
	if (!tree || !*tree)
		return NULL;
	for (size_t i = 0; i < sizeof(module_answers) / sizeof(module_answers[0]); i++)
		if (strcmp(module_answers[i].tree, tree) == 0 && strcmp(module_answers[i].kase, kase) == 0)
			return &module_answers[i];
	return NULL;
}

static struct rel_end A, B; // A on dev0, B on dev1, RC-connected
static struct ibv_qp_cap capA;

// expect_rc: a verb's return (an errno value, rdma-core style) against the wanted one.
static void expect_rc(const char *name, double t0, int got, int want, const char *extra)
{
	rel_check(got == want, name, t0, "got %s, want %s%s%s", rel_errname(got), rel_errname(want),
		  extra ? "; " : "", extra ? extra : "");
}

// expect_null: a constructor's NULL result and errno against the wanted errno.
static void expect_null(const char *name, double t0, const void *obj, int err, int want)
{
	if (obj)
		rel_fail(name, t0, "got an object, want NULL with errno %s", rel_errname(want));
	else
		rel_check(err == want, name, t0, "got NULL errno %s, want %s", rel_errname(err),
			  rel_errname(want));
}

static struct ibv_sge sgeA(uint32_t off, uint32_t len)
{
	return (struct ibv_sge){.addr = (uintptr_t)A.buf + off, .length = len, .lkey = A.mr->lkey};
}

static struct ibv_send_wr write_wr(struct ibv_sge *sge, uint64_t id)
{
	return (struct ibv_send_wr){
		.wr_id = id,
		.sg_list = sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr = {.rdma = {.remote_addr = (uintptr_t)B.buf, .rkey = B.mr->rkey}},
	};
}

// module_refusal_case checks a post the module refuses (ma->post_rc):
// that errno, bad_wr = the WR, and no completion for it.
static void module_refusal_case(const char *name, double t0, const struct module_answer *ma, int rc, int bad_is_wr,
				struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n = rc ? rel_poll_one(cq, &wc, 1) : 0;
	rel_check(rc == ma->post_rc && bad_is_wr && n == 0, name, t0,
		  "post %s, bad_wr %s, %d completions after it; want %s at post with bad_wr = the WR, "
		  "the module's answer on %s (librxe's differs): %s",
		  rel_errname(rc), bad_is_wr ? "= the WR" : "wrong", n, rel_errname(ma->post_rc), ma->tree, ma->why);
}

// wc_status_case posts wr on A's QP and checks the first completion's status
// (want, or the module's answer on the bed).
static void wc_status_case(const char *name, struct ibv_send_wr *wr, enum ibv_wc_status want)
{
	double t0 = rel_now();
	const struct module_answer *ma = module_answer_for(name);
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, wr, &bad);
	if (ma && ma->post_rc) {
		module_refusal_case(name, t0, ma, rc, bad == wr, A.cq);
		return;
	}
	char whose[512] = "librxe's answer";
	if (ma) {
		want = ma->wc_status;
		snprintf(whose, sizeof(whose), "the module's answer on %s (librxe: another status): %s", ma->tree, ma->why);
	}
	if (rc) {
		rel_fail(name, t0, "post_send returned %s, want 0 and a completion with status %s, %s",
			 rel_errname(rc), ibv_wc_status_str(want), whose);
		return;
	}
	struct ibv_wc wc;
	int n = rel_poll_one(A.cq, &wc, 10);
	if (n <= 0) {
		rel_fail(name, t0, "no completion within 10 s (poll_cq %d), want status %s, %s", n,
			 ibv_wc_status_str(want), whose);
		return;
	}
	rel_check(wc.status == want && wc.wr_id == wr->wr_id, name, t0,
		  "completion status %s (%d) wr_id %" PRIu64 ", want %s wr_id %" PRIu64 ", %s",
		  ibv_wc_status_str(wc.status), wc.status, wc.wr_id, ibv_wc_status_str(want), wr->wr_id, whose);
}

static void c_send_null_list(const char *name)
{
	double t0 = rel_now();
	struct ibv_send_wr *bad = (void *)1;
	expect_rc(name, t0, ibv_post_send(A.qp, NULL, &bad), EINVAL, NULL);
}

static void c_send_null_bad_wr(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 1);
	expect_rc(name, t0, ibv_post_send(A.qp, &wr, NULL), EINVAL, NULL);
}

static void c_send_num_sge_over_max(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s[64];
	for (int i = 0; i < 64; i++)
		s[i] = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(s, 1);
	wr.num_sge = (int)capA.max_send_sge + 1;
	if (wr.num_sge > 64) {
		rel_skip(name, "max_send_sge %u too large for the test", capA.max_send_sge);
		return;
	}
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, &wr, &bad);
	char extra[96];
	snprintf(extra, sizeof(extra), "num_sge %d, max_send_sge %u, post_send %s, bad_wr %s", wr.num_sge,
		 capA.max_send_sge, rel_errname(rc), bad == &wr ? "= the WR" : "wrong");
	expect_rc(name, t0, bad == &wr ? rc : -1, EINVAL, extra);
}

static void c_send_num_sge_negative(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 1);
	wr.num_sge = -1;
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, &wr, &bad);
	expect_rc(name, t0, bad == &wr ? rc : -1, EINVAL, bad == &wr ? "bad_wr = the WR" : "bad_wr wrong");
}

// An opcode no provider knows. librxe 44 accepts it at post time and the kernel
// completes it with an error; providers that check opcodes in user space
// (mlx5, siw) return EINVAL with bad_wr at the WR. Either is accepted; a
// success completion, a crash or no completion at all is not.
static void c_send_unknown_opcode(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 3);
	wr.opcode = (enum ibv_wr_opcode)0x7f;
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, &wr, &bad);
	struct ibv_wc wc = {0};
	int n = rc ? 0 : rel_poll_one(A.cq, &wc, 10);
	int ok = (rc == EINVAL && bad == &wr) || (rc == 0 && n == 1 && wc.wr_id == 3 && wc.status != IBV_WC_SUCCESS);
	rel_check(ok, name, t0,
		  "post_send %s, bad_wr %s, completion n=%d %s (want EINVAL with bad_wr = the WR, or 0 and an error "
		  "completion as librxe)",
		  rel_errname(rc), bad == &wr ? "= the WR" : bad ? "other" : "NULL", n,
		  n == 1 ? ibv_wc_status_str(wc.status) : "-");
}

// A good WR followed by one with an unknown opcode: the first must complete
// successfully, and the second either be refused with bad_wr at it or complete
// with an error (see c_send_unknown_opcode).
static void c_send_second_wr_bad(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr w2 = write_wr(&s, 2);
	w2.opcode = (enum ibv_wr_opcode)0x7f;
	struct ibv_send_wr w1 = write_wr(&s, 1);
	w1.next = &w2;
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, &w1, &bad);
	struct ibv_wc wc1 = {0}, wc2 = {0};
	int n1 = rel_poll_one(A.cq, &wc1, 10);
	int n2 = rc ? 0 : rel_poll_one(A.cq, &wc2, 10);
	int first_ok = n1 == 1 && wc1.wr_id == 1 && wc1.status == IBV_WC_SUCCESS;
	int second_ok = (rc == EINVAL && bad == &w2) || (rc == 0 && n2 == 1 && wc2.wr_id == 2 && wc2.status != IBV_WC_SUCCESS);
	rel_check(first_ok && second_ok, name, t0,
		  "post_send %s, bad_wr %s; 1st WR: n=%d wr_id %" PRIu64 " %s (want success); 2nd WR: n=%d %s "
		  "(want refused at post, or an error completion)",
		  rel_errname(rc), bad == &w2 ? "2nd" : bad == &w1 ? "1st" : bad ? "other" : "NULL", n1, wc1.wr_id,
		  n1 == 1 ? ibv_wc_status_str(wc1.status) : "-", n2, n2 == 1 ? ibv_wc_status_str(wc2.status) : "-");
}

// A WR whose next points at itself: posting stops when the send queue is full.
static void c_send_cycle(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 7);
	wr.next = &wr;
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, &wr, &bad);
	// Drain what was posted, so the QP is left clean.
	int got = 0;
	struct ibv_wc wc;
	while (rel_poll_one(A.cq, &wc, 2) == 1)
		got++;
	char extra[96];
	snprintf(extra, sizeof(extra), "bad_wr %s, %d completions drained (sq depth %u)",
		 bad == &wr ? "= the WR" : "wrong", got, capA.max_send_wr);
	expect_rc(name, t0, bad == &wr ? rc : -1, ENOMEM, extra);
}

static void c_send_bad_lkey(const char *name)
{
	struct ibv_sge s = sgeA(0, 8);
	s.lkey ^= 0x5a5a00;
	struct ibv_send_wr wr = write_wr(&s, 11);
	// rxe on 6.1 completes it with LOC_QP_OP_ERR (librxe control run); the
	// status comes from the kernel, the provider only passes it on.
	wc_status_case(name, &wr, IBV_WC_LOC_QP_OP_ERR);
}

static void c_send_bad_rkey(const char *name)
{
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 12);
	wr.wr.rdma.rkey ^= 0x5a5a00;
	wc_status_case(name, &wr, IBV_WC_REM_ACCESS_ERR);
}

static void c_send_remote_out_of_range(const char *name)
{
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 13);
	wr.wr.rdma.remote_addr += B.len; // just past the remote MR
	wc_status_case(name, &wr, IBV_WC_REM_ACCESS_ERR);
}

static struct ibv_qp *reset_qp(void)
{
	return rel_create_rc_qp(A.pd, A.cq, A.cq, 16);
}

static void c_send_reset_qp(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 21);
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(qp, &wr, &bad);
	struct ibv_wc wc;
	int n = rel_poll_one(A.cq, &wc, 1);
	char extra[64];
	snprintf(extra, sizeof(extra), "%d completions after it", n);
	expect_rc(name, t0, n == 0 ? rc : -1, EINVAL, extra);
	ibv_destroy_qp(qp);
}

static void c_recv_reset_qp(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_sge s = sgeA(0, 64);
	struct ibv_recv_wr wr = {.wr_id = 22, .sg_list = &s, .num_sge = 1};
	struct ibv_recv_wr *bad = NULL;
	struct ibv_recv_wr *const unset = (void *)1;
	bad = unset;
	int rc = ibv_post_recv(qp, &wr, &bad);
	// librxe 44 returns EINVAL with bad_wr NULL; pointing it at the WR is also right.
	rel_check(rc == EINVAL && (bad == &wr || bad == NULL), name, t0, "got %s, bad_wr %s (want EINVAL, bad_wr the WR or NULL)",
		  rel_errname(rc), bad == &wr ? "= the WR" : bad == NULL ? "NULL" : bad == unset ? "untouched" : "other");
	ibv_destroy_qp(qp);
}

static int to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static void c_send_err_qp(const char *name)
{
	double t0 = rel_now();
	int rc = to_err(A.qp);
	if (rc) {
		rel_fail(name, t0, "modify_qp to ERR: %s", rel_errname(rc));
		return;
	}
	struct ibv_sge s = sgeA(0, 8);
	struct ibv_send_wr wr = write_wr(&s, 31);
	wc_status_case(name, &wr, IBV_WC_WR_FLUSH_ERR);
}

// Receives posted to an ERR QP: librxe accepts them (0). rxe flushes a user
// QP's receive queue only when the kernel next runs its responder, which a
// post_recv does not trigger, so no completion is required; one that does
// come must be a flush.
static void c_recv_err_qp(const char *name)
{
	double t0 = rel_now();
	int rc = to_err(A.qp);
	if (rc) {
		rel_fail(name, t0, "modify_qp to ERR: %s", rel_errname(rc));
		return;
	}
	struct ibv_sge s = sgeA(0, 64);
	struct ibv_recv_wr wr = {.wr_id = 32, .sg_list = &s, .num_sge = 1};
	struct ibv_recv_wr *bad = NULL;
	rc = ibv_post_recv(A.qp, &wr, &bad);
	const struct module_answer *ma = module_answer_for(name);
	if (ma) {
		module_refusal_case(name, t0, ma, rc, bad == &wr, A.cq);
		return;
	}
	struct ibv_wc wc = {0};
	int n = rc ? 0 : rel_poll_one(A.cq, &wc, 2);
	rel_check(rc == 0 && (n == 0 || (n == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 32)), name, t0,
		  "post_recv %s (want 0), completion n=%d status %s (want none or WR_FLUSH_ERR)", rel_errname(rc), n,
		  n == 1 ? ibv_wc_status_str(wc.status) : "-");
}

static void c_recv_null_list(const char *name)
{
	double t0 = rel_now();
	struct ibv_recv_wr *bad = (void *)1;
	expect_rc(name, t0, ibv_post_recv(A.qp, NULL, &bad), EINVAL, NULL);
}

static void c_recv_num_sge_over_max(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s[64];
	for (int i = 0; i < 64; i++)
		s[i] = sgeA(0, 8);
	struct ibv_recv_wr wr = {.wr_id = 41, .sg_list = s, .num_sge = (int)capA.max_recv_sge + 1};
	if (wr.num_sge > 64) {
		rel_skip(name, "max_recv_sge %u too large for the test", capA.max_recv_sge);
		return;
	}
	struct ibv_recv_wr *bad = NULL;
	int rc = ibv_post_recv(A.qp, &wr, &bad);
	expect_rc(name, t0, bad == &wr ? rc : -1, EINVAL, bad == &wr ? "bad_wr = the WR" : "bad_wr wrong");
}

static void c_recv_cycle(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge s = sgeA(0, 64);
	struct ibv_recv_wr wr = {.wr_id = 42, .sg_list = &s, .num_sge = 1};
	wr.next = &wr;
	struct ibv_recv_wr *bad = NULL;
	int rc = ibv_post_recv(A.qp, &wr, &bad);
	expect_rc(name, t0, bad == &wr ? rc : -1, ENOMEM, bad == &wr ? "bad_wr = the WR" : "bad_wr wrong");
}

// Polling a CQ after ibv_destroy_cq is a use after free in the application,
// and librxe 44 dies of SIGSEGV on it (control run). The expectation is
// therefore the issue's: an error or nothing (poll_cq <= 0), no crash, no hang,
// no invented completion.
static void c_poll_destroyed_cq(const char *name)
{
	double t0 = rel_now();
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 4, NULL, NULL, 0);
	if (!cq) {
		rel_fail(name, t0, "create_cq: %s", rel_errname(errno));
		return;
	}
	int rc = ibv_destroy_cq(cq);
	struct ibv_wc wc[4];
	int n = ibv_poll_cq(cq, 4, wc); // use after free, on purpose
	rel_check(rc == 0 && n <= 0, name, t0, "destroy_cq %s, then poll_cq returned %d (want <= 0, or a crash)",
		  rel_errname(rc), n);
}

static void c_poll_negative_n(const char *name)
{
	double t0 = rel_now();
	struct ibv_wc wc[1];
	int n = ibv_poll_cq(A.cq, -1, wc);
	rel_check(n == 0, name, t0, "poll_cq(n=-1) returned %d, want 0", n);
}

static void c_destroy_cq_busy(const char *name)
{
	double t0 = rel_now();
	expect_rc(name, t0, ibv_destroy_cq(A.cq), EBUSY, "the CQ still has a QP");
}

static void port_case(const char *name, uint8_t port)
{
	double t0 = rel_now();
	struct ibv_port_attr pa;
	expect_rc(name, t0, ibv_query_port(A.ctx, port, &pa), EINVAL, NULL);
}

static void c_query_port0(const char *name) { port_case(name, 0); }
static void c_query_port2(const char *name) { port_case(name, 2); }
static void c_query_port255(const char *name) { port_case(name, 255); }

// An application built against an older libibverbs passes a smaller struct
// ibv_port_attr: the provider must not write past it, and what it writes must
// match a full query. The sizes are the struct's ends before fields were added
// (flags, port_cap_flags2, active_speed_ex: rdma-core:libibverbs/verbs.h).
static void c_query_port_old_size(const char *name)
{
	double t0 = rel_now();
	struct ibv_port_attr full;
	int rc = ibv_query_port(A.ctx, 1, &full);
	if (rc) {
		rel_fail(name, t0, "query_port(1): %s", rel_errname(rc));
		return;
	}
	struct verbs_context *vctx = verbs_get_ctx_op(A.ctx, query_port);
	if (!vctx) {
		rel_skip(name, "libibverbs has no extended query_port");
		return;
	}
	size_t sizes[] = {offsetof(struct ibv_port_attr, flags), offsetof(struct ibv_port_attr, port_cap_flags2),
			  sizeof(struct ibv_port_attr)};
	char why[160] = "";
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !why[0]; i++) {
		unsigned char buf[sizeof(struct ibv_port_attr) + 64];
		memset(buf, 0xa5, sizeof(buf));
		rc = vctx->query_port(A.ctx, 1, (struct ibv_port_attr *)buf, sizes[i]);
		size_t j = sizes[i];
		while (j < sizeof(buf) && buf[j] == 0xa5)
			j++;
		if (rc)
			snprintf(why, sizeof(why), "size %zu: %s", sizes[i], rel_errname(rc));
		else if (j != sizeof(buf))
			snprintf(why, sizeof(why), "size %zu: byte %zu past the struct was written", sizes[i], j);
		else if (memcmp(buf, &full, sizes[i]) != 0)
			snprintf(why, sizeof(why), "size %zu: contents differ from a full query", sizes[i]);
	}
	if (!why[0]) {
		// The exported compat symbol (not the verbs.h inline) takes the oldest
		// layout, struct _compat_ibv_port_attr, which verbs.h leaves opaque.
		struct {
			struct ibv_port_attr a;
			unsigned char canary[64];
		} old;
		memset(&old, 0xa5, sizeof(old));
		rc = (ibv_query_port)(A.ctx, 1, (struct _compat_ibv_port_attr *)&old);
		size_t j = 0;
		while (j < sizeof(old.canary) && old.canary[j] == 0xa5)
			j++;
		if (rc || old.a.state != full.state || old.a.active_mtu != full.active_mtu || j != sizeof(old.canary))
			snprintf(why, sizeof(why), "compat ibv_query_port: rc %s state %d mtu %d canary %s",
				 rel_errname(rc), old.a.state, old.a.active_mtu,
				 j == sizeof(old.canary) ? "intact" : "overwritten");
	}
	rel_check(!why[0], name, t0, "%s", why[0] ? why : "sizes 40/48/full and the compat symbol");
}

static void c_modify_port2(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 2,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	expect_rc(name, t0,
		  ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  EINVAL, NULL);
	ibv_destroy_qp(qp);
}

static void c_modify_reset_to_rts(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.max_rd_atomic = 1};
	expect_rc(name, t0,
		  ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
		  EINVAL, NULL);
	ibv_destroy_qp(qp);
}

static void c_modify_missing_mask(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	expect_rc(name, t0, ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RESET->INIT without PORT/PKEY/ACCESS");
	ibv_destroy_qp(qp);
}

static void c_modify_unknown_mask_bit(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp *qp = reset_qp();
	if (!qp) {
		rel_fail(name, t0, "create_qp: %s", rel_errname(errno));
		return;
	}
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | (1 << 30);
	expect_rc(name, t0, ibv_modify_qp(qp, &a, mask), EOPNOTSUPP, "attr_mask bit 30");
	ibv_destroy_qp(qp);
}

static void c_create_qp_too_deep(const char *name)
{
	double t0 = rel_now();
	struct ibv_device_attr da;
	int rc = ibv_query_device(A.ctx, &da);
	if (rc) {
		rel_fail(name, t0, "query_device: %s", rel_errname(rc));
		return;
	}
	struct ibv_qp *qp = rel_create_rc_qp(A.pd, A.cq, A.cq, (uint32_t)da.max_qp_wr + 1);
	int e = errno;
	expect_null(name, t0, qp, e, EINVAL);
	if (qp)
		ibv_destroy_qp(qp);
}

static void c_create_cq_too_big(const char *name)
{
	double t0 = rel_now();
	struct ibv_device_attr da;
	int rc = ibv_query_device(A.ctx, &da);
	if (rc) {
		rel_fail(name, t0, "query_device: %s", rel_errname(rc));
		return;
	}
	struct ibv_cq *cq = ibv_create_cq(A.ctx, da.max_cqe + 1, NULL, NULL, 0);
	int e = errno;
	expect_null(name, t0, cq, e, EINVAL);
	if (cq)
		ibv_destroy_cq(cq);
}

static void c_reg_mr_remote_write_no_local(const char *name)
{
	double t0 = rel_now();
	struct ibv_mr *mr = ibv_reg_mr(A.pd, A.buf, 4096, IBV_ACCESS_REMOTE_WRITE);
	int e = errno;
	expect_null(name, t0, mr, e, EINVAL);
	if (mr)
		ibv_dereg_mr(mr);
}

static const struct rel_case cases[] = {
	{"post_send_null_list", c_send_null_list},
	{"post_send_null_bad_wr", c_send_null_bad_wr},
	{"post_send_num_sge_over_max", c_send_num_sge_over_max},
	{"post_send_num_sge_negative", c_send_num_sge_negative},
	{"post_send_unknown_opcode", c_send_unknown_opcode},
	{"post_send_second_wr_bad", c_send_second_wr_bad},
	{"post_send_cycle", c_send_cycle},
	{"post_send_bad_lkey", c_send_bad_lkey},
	{"post_send_bad_rkey", c_send_bad_rkey},
	{"post_send_remote_out_of_range", c_send_remote_out_of_range},
	{"post_send_reset_qp", c_send_reset_qp},
	{"post_send_err_qp", c_send_err_qp},
	{"post_recv_null_list", c_recv_null_list},
	{"post_recv_num_sge_over_max", c_recv_num_sge_over_max},
	{"post_recv_cycle", c_recv_cycle},
	{"post_recv_reset_qp", c_recv_reset_qp},
	{"post_recv_err_qp", c_recv_err_qp},
	{"poll_cq_destroyed_cq", c_poll_destroyed_cq},
	{"poll_cq_negative_n", c_poll_negative_n},
	{"destroy_cq_busy", c_destroy_cq_busy},
	{"query_port_0", c_query_port0},
	{"query_port_2", c_query_port2},
	{"query_port_255", c_query_port255},
	{"query_port_old_struct_size", c_query_port_old_size},
	{"modify_qp_port_2", c_modify_port2},
	{"modify_qp_reset_to_rts", c_modify_reset_to_rts},
	{"modify_qp_missing_mask", c_modify_missing_mask},
	{"modify_qp_unknown_mask_bit", c_modify_unknown_mask_bit},
	{"create_qp_too_deep", c_create_qp_too_deep},
	{"create_cq_too_big", c_create_cq_too_big},
	{"reg_mr_remote_write_without_local", c_reg_mr_remote_write_no_local},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

int main(int argc, char **argv)
{
	rel_prog = "badinput";
	const char *only;
	int exit_code = rel_case_args(argc, argv, cases, NCASES, &only);
	if (exit_code >= 0)
		return exit_code;
	double t0 = rel_now();
	const char *what = "";
	int rc = rel_pair_open(&A, &B, 64, 65536, 16, &what);
	if (!rc) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		rc = ibv_query_qp(A.qp, &qa, IBV_QP_CAP, &qia);
		capA = qia.cap;
		what = "query_qp";
	}
	if (rc) {
		rel_fail(only ? only : "setup", t0, "setup: %s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	rel_run_cases(cases, NCASES, only);
	// destroy_cq_busy must leave the CQ in place; the QP goes first here.
	rel_end_close(&A);
	rel_end_close(&B);
	return rel_exit_code();
}
