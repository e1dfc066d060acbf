// srq: shared receive queues between two hosts' devices, through whichever
// provider libibverbs loaded (issue 35).
//
//   srq DEV_A GID_A DEV_B GID_B
//
// The receivers are RC QPs on DEV_A (host A) attached to one SRQ, each
// connected to a sender QP on DEV_B (host B). Cases:
//   traffic     4 QPs, 32 WRs reposted as consumed, 200 messages: every
//               completion as an SRQ's (wr_id of a posted WR, the receiving
//               QP's qp_num, the sender's src_qp, byte_len), the bytes in
//               that WR's buffer, in order per QP
//   burst_rnr   40 messages at 16 posted WRs (rnr_retry 7): the rest wait
//               and land once 24 more are posted; none lost or duplicated
//   limit_event srq_limit 4: no event at 4 WRs left, IBV_EVENT_SRQ_LIMIT_REACHED
//               for this SRQ at 3 (ibv_get_async_event), the limit then 0
//   destroy_qp  2 QPs sharing 20 WRs, one destroyed with its receives
//               outstanding: the other receives into all 20, each once
//   threads     4 threads posting while 400 messages arrive on 2 QPs
//   plain_destroy_rnr  destroy_qp's pattern without an SRQ (runs first, through the
//               module's C provider too: places a destroy_qp failure); prints the
//               qp_num the destroyed QP's flushes came with
//   plain_traffic traffic's pattern without an SRQ: 4 QPs with 8 receives each,
//               reposted to their QP (through the module's C provider too)
// SRQ_RUNS=N (environment, default 1) runs traffic and plain_traffic N times each (one
// line each). The senders' rnr_retry is 7 (checked with query_qp): a send must never
// complete with RNR_RETRY_EXC_ERR, and no receiver QP may end in ERR. The guest names the
// module's known exceptions on a tree, with their citation: SRQ_KNOWN_RNR_EXC=<why> (the
// case's first error a send's RNR_RETRY_EXC_ERR), SRQ_KNOWN_RX_TIMEOUT=<why> (a case that
// failed after 30 s or more without a completion, with a QP in ERR the test did not ask
// for: the module's receive timeout or its sender's retries). A case, or a run, that ends in
// exactly that is a SKIP saying so (runs: counted; the case a SKIP if no run failed
// otherwise); every receive before it was checked as always.
// One go-test-style line per case: --- PASS/FAIL/SKIP: srq/<case>. Where
// ibv_create_srq fails (the module's C provider: the kernel has no SRQs) every
// case is a SKIP naming the errno, and the program prints
//   @@SRQ create_srq=<errno name>
// so that the guest script sets that provider's answer beside ours.
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define NQP_MAX 4
#define SLOT 256
#define BUF_SIZE (1 << 20)
#define WAIT_S 60 // a bound on every wait: a lost message fails, never hangs

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
};

static struct dev A, B; // A receives (the SRQ), B sends
static struct ibv_srq *srq;
static struct ibv_qp *rq[NQP_MAX], *sq[NQP_MAX];
static int nqp;
static int failed;
static char why[512];
static int rnr_exc; // the first failure of the case was a send's RNR_RETRY_EXC_ERR
static int rx_err;  // ... or it came after a stall of 30 s or more with a QP in ERR the test never moved there
static double progress; // when the last receive or send completed (or the case began)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void step(const char *what)
{
	printf("# %.3f %s\n", now(), what);
}

// known_failure: the failure just seen is one of the module's behaviours the guest names
// for this tree (rnr_exc: SRQ_KNOWN_RNR_EXC; rx_err: SRQ_KNOWN_RX_TIMEOUT), or NULL.
static const char *known_failure(void)
{
	const char *k = NULL;
	if (rnr_exc)
		k = getenv("SRQ_KNOWN_RNR_EXC");
	else if (rx_err)
		k = getenv("SRQ_KNOWN_RX_TIMEOUT");
	return k && k[0] ? k : NULL;
}

static void result(const char *verdict, const char *name, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const char *known = strcmp(verdict, "FAIL") == 0 ? known_failure() : NULL;
	if (known) {
		// Exactly one of the module's behaviours the guest named: SKIP, saying so.
		printf("--- SKIP: srq/%s (%s: %s)\n", name, known, msg);
		fflush(stdout);
		return;
	}
	printf("--- %s: srq/%s (%s)\n", verdict, name, msg);
	fflush(stdout);
	if (strcmp(verdict, "FAIL") == 0)
		failed = 1;
}

static int bad(const char *fmt, ...)
{
	if (why[0])
		return -1; // the first reason stays
	rnr_exc = rx_err = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

static int open_dev(struct ibv_device *d, int gid_index, struct dev *s)
{
	s->gid_index = gid_index;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	s->ctx = s->buf ? ibv_open_device(d) : NULL;
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 1024, NULL, NULL, 0) : NULL;
	s->mr = s->cq ? ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!s->mr || ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return errno ? errno : EIO;
	memset(s->buf, 0, BUF_SIZE);
	return 0;
}

static int to_rts(struct ibv_qp *qp, struct dev *self, uint32_t dest, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)self->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 20; // 4.3 s, as the bed's perftest runs use under TCG
	a.retry_cnt = 7;
	a.rnr_retry = 7; // infinite: a message that finds no receive waits
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

// up: an SRQ of max_wr WRs (limit armed at create when given) and n
// receiver/sender pairs, connected.
static int up(int n, uint32_t max_wr, uint32_t limit)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = max_wr, .max_sge = 1, .srq_limit = limit}};
	step("up: create_srq");
	srq = max_wr ? ibv_create_srq(A.pd, &sa) : NULL; // 0: plain QPs with receive queues of 20
	if (max_wr && !srq)
		return bad("create_srq: %s", strerror(errno));
	nqp = n;
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ra = {.send_cq = A.cq, .recv_cq = A.cq, .srq = srq, .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
		if (!srq)
			ra.cap.max_recv_wr = 20, ra.cap.max_recv_sge = 1;
		struct ibv_qp_init_attr ta = {.send_cq = B.cq, .recv_cq = B.cq, .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
		rq[i] = ibv_create_qp(A.pd, &ra);
		sq[i] = ibv_create_qp(B.pd, &ta);
		if (!rq[i] || !sq[i])
			return bad("create_qp %d: %s", i, strerror(errno));
		int rc = to_rts(rq[i], &A, sq[i]->qp_num, &B.gid);
		if (!rc)
			rc = to_rts(sq[i], &B, rq[i]->qp_num, &A.gid);
		if (rc)
			return bad("connect %d: %s", i, strerror(rc));
		// What the module holds for the sender (a message that finds no
		// receive must wait, never fail).
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		if ((rc = ibv_query_qp(sq[i], &qa, IBV_QP_RNR_RETRY, &qi)) != 0)
			return bad("query_qp %d: %s", i, strerror(rc));
		if (qa.rnr_retry != 7)
			return bad("sender %d: rnr_retry %u after modify_qp set 7", i, qa.rnr_retry);
	}
	step("up: connected");
	return 0;
}

static void down(void)
{
	step("down");
	// A failed case after a stall: is a QP in ERR? The cases move none there but the one
	// they destroy at once (NULL then): the module did, at the end of its receive timeout
	// or of the sender's retries (34.4 s here; docs/srq.md).
	double stalled = now() - progress;
	for (int i = 0; i < 2 * NQP_MAX && why[0] && !rx_err && stalled >= 30; i++) {
		struct ibv_qp *qp = i < NQP_MAX ? rq[i] : sq[i - NQP_MAX];
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		if (qp && !ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_ERR) {
			rx_err = 1;
			size_t l = strlen(why);
			snprintf(why + l, sizeof(why) - l, "; after %.1f s without a completion, %s QP %d in ERR, which the test did not ask for",
				 stalled, i < NQP_MAX ? "receiver" : "sender", i % NQP_MAX);
		}
	}
	for (int i = 0; i < NQP_MAX; i++) {
		if (rq[i])
			ibv_destroy_qp(rq[i]);
		if (sq[i])
			ibv_destroy_qp(sq[i]);
		rq[i] = sq[i] = NULL;
	}
	step("down: QPs destroyed");
	if (srq) {
		int rc = ibv_destroy_srq(srq);
		if (rc)
			bad("destroy_srq: %s", strerror(rc));
	}
	srq = NULL;
	// Whatever is left in the CQs (flushes of the destroyed QPs' sends).
	struct ibv_wc wc[16];
	while (ibv_poll_cq(A.cq, 16, wc) > 0)
		;
	while (ibv_poll_cq(B.cq, 16, wc) > 0)
		;
}

// Receive slots: wr_id id uses A.buf at (id % 4000) * SLOT.
static int post_srq(uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(A.buf + (id % 4000) * SLOT), .length = SLOT, .lkey = A.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *badwr;
	return ibv_post_srq_recv(srq, &wr, &badwr);
}

// post_plain: receive id (its slot of A.buf) on pair q's own receive queue.
static int post_plain(int q, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(A.buf + (id % 4000) * SLOT), .length = SLOT, .lkey = A.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *badwr;
	return ibv_post_recv(rq[q], &wr, &badwr);
}

struct msg {
	uint32_t qp, seq;
	uint64_t fill[6];
};

static uint32_t inflight;

// send message seq on pair i (signaled: the sender's window is bounded).
static int send_msg(int i, uint32_t seq)
{
	struct msg *m = (struct msg *)(B.buf + (size_t)(i * 4096 + (seq % 64) * sizeof(struct msg)));
	m->qp = (uint32_t)i;
	m->seq = seq;
	for (int k = 0; k < 6; k++)
		m->fill[k] = ((uint64_t)i << 32 | seq) * 0x9e3779b97f4a7c15ull + (uint64_t)k;
	struct ibv_sge sge = {.addr = (uintptr_t)m, .length = sizeof(*m), .lkey = B.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = seq, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *badwr;
	int rc = ibv_post_send(sq[i], &wr, &badwr);
	if (!rc)
		inflight++;
	return rc;
}

// reap_sends: the sender's completions, all successful.
static int reap_sends(void)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(B.cq, 16, wc);
	if (n < 0)
		return bad("poll sender cq: %d", n);
	for (int k = 0; k < n; k++) {
		if (wc[k].status != IBV_WC_SUCCESS) {
			int first = !why[0];
			bad("send %" PRIu64 ": %s", wc[k].wr_id, ibv_wc_status_str(wc[k].status));
			if (first && wc[k].status == IBV_WC_RNR_RETRY_EXC_ERR)
				rnr_exc = 1;
			return -1;
		}
		inflight--;
		progress = now();
	}
	return 0;
}

static int qp_index(uint32_t qp_num)
{
	for (int i = 0; i < nqp; i++)
		if (rq[i] && rq[i]->qp_num == qp_num)
			return i;
	return -1;
}

static uint32_t next_seq[NQP_MAX];

// check_recv: one receive completion as an SRQ's; its message must be the
// next of its QP's sender. Returns the pair's index.
static int check_recv(const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS)
		return bad("receive %" PRIu64 ": %s", wc->wr_id, ibv_wc_status_str(wc->status));
	int i = qp_index(wc->qp_num);
	if (i < 0)
		return bad("receive %" PRIu64 " on qp_num %u, no QP of the SRQ", wc->wr_id, wc->qp_num);
	// src_qp: the module sets it; rxe leaves it 0 on RC (ibv_poll_cq(3): valid for UD only).
	if (wc->opcode != IBV_WC_RECV || wc->byte_len != sizeof(struct msg) || (wc->src_qp && wc->src_qp != sq[i]->qp_num))
		return bad("receive %" PRIu64 ": opcode %d byte_len %u src_qp %u (want %u)", wc->wr_id, wc->opcode,
			   wc->byte_len, wc->src_qp, sq[i]->qp_num);
	const struct msg *m = (const struct msg *)(A.buf + (wc->wr_id % 4000) * SLOT);
	if (m->qp != (uint32_t)i || m->seq != next_seq[i])
		return bad("receive %" PRIu64 " on QP %d holds message %u/%u, want %d/%u", wc->wr_id, i, m->qp, m->seq, i,
			   next_seq[i]);
	for (int k = 0; k < 6; k++)
		if (m->fill[k] != (((uint64_t)i << 32 | m->seq) * 0x9e3779b97f4a7c15ull + (uint64_t)k))
			return bad("receive %" PRIu64 ": payload differs", wc->wr_id);
	next_seq[i]++;
	progress = now();
	return i;
}

static void reset_seq(void)
{
	memset(next_seq, 0, sizeof(next_seq));
	inflight = 0;
	progress = now();
}


// traffic_run: one run of traffic (plain: plain_traffic, each QP its own 8 receives,
// reposted to it) into why; 4 QPs, 32 receives, 50 messages a QP.
static void traffic_run(int plain)
{
	why[0] = 0;
	reset_seq();
	const int per = 50, slots = 32;
	int received = 0;
	if (!up(4, plain ? 0 : (uint32_t)slots, 0)) {
		for (int s = 0; s < slots && !why[0]; s++)
			if (plain ? post_plain(s / 8, (uint64_t)s) : post_srq((uint64_t)s))
				bad("post_%s: %s", plain ? "recv" : "srq_recv", strerror(errno));
		uint32_t sent[NQP_MAX] = {0};
		double deadline = now() + WAIT_S;
		while (!why[0] && received < 4 * per && now() < deadline) {
			for (int i = 0; i < 4 && !why[0]; i++)
				if (sent[i] < (uint32_t)per && inflight < 32 && !send_msg(i, sent[i]))
					sent[i]++;
			reap_sends();
			struct ibv_wc wc[16];
			int n = ibv_poll_cq(A.cq, 16, wc);
			for (int k = 0; k < n && !why[0]; k++) {
				int q = check_recv(&wc[k]);
				if (q >= 0) {
					received++;
					// reposted, as UCX does (plain: to the QP it came from)
					if (plain ? post_plain(q, wc[k].wr_id) : post_srq(wc[k].wr_id))
						bad("repost: %s", strerror(errno));
				}
			}
		}
		if (!why[0] && received < 4 * per)
			bad("%d of %d messages in %d s", received, 4 * per, WAIT_S);
	}
	down();
}

// case_traffic_runs: SRQ_RUNS runs of traffic (or plain_traffic), one line. A run that
// ends in the module's known RNR exception (SRQ_KNOWN_RNR_EXC) is counted, not failed.
static void case_traffic_runs(const char *name, int plain)
{
	const char *env = getenv("SRQ_RUNS");
	int runs = env && atoi(env) > 0 ? atoi(env) : 1, nknown = 0, r;
	char first_known[1200] = "", fail[600] = "";
	for (r = 0; r < runs && !fail[0]; r++) {
		step(name);
		traffic_run(plain);
		if (!why[0])
			continue;
		const char *known = known_failure();
		if (known) {
			if (!nknown++)
				snprintf(first_known, sizeof(first_known), "first: run %d: %s; %s", r + 1, why, known);
			printf("# %s run %d of %d: %s (known: %s)\n", name, r + 1, runs, why, rnr_exc ? "SRQ_KNOWN_RNR_EXC" : "SRQ_KNOWN_RX_TIMEOUT");
			continue;
		}
		snprintf(fail, sizeof(fail), "run %d of %d: %s", r + 1, runs, why);
	}
	rnr_exc = rx_err = 0; // the runs' verdicts are this function's
	if (fail[0])
		result("FAIL", name, "%s%s", fail, nknown ? " (and earlier runs ended in a known behaviour of the module)" : "");
	else if (nknown)
		result("SKIP", name, "%d of %d runs ended in a known behaviour of the module, the others passed; %s", nknown, runs,
		       first_known);
	else if (plain)
		result("PASS", name, "%d run(s): 200 messages over 4 QPs with 8 receives each, reposted, in order per QP", runs);
	else
		result("PASS", name, "%d run(s): 200 messages over 4 QPs into 32 reposted WRs, in order per QP", runs);
}

// wait_recvs: n receive completions (checked) into seen[wr_id].
static int wait_recvs(int n, unsigned char *seen, int nseen)
{
	int got = 0;
	double deadline = now() + WAIT_S;
	while (!why[0] && got < n && now() < deadline) {
		reap_sends();
		struct ibv_wc wc[16];
		int m = ibv_poll_cq(A.cq, n - got < 16 ? n - got : 16, wc);
		for (int k = 0; k < m && !why[0]; k++) {
			if (check_recv(&wc[k]) < 0)
				break;
			if (wc[k].wr_id >= (uint64_t)nseen || seen[wc[k].wr_id]++)
				bad("wr_id %" PRIu64 " received twice or never posted", wc[k].wr_id);
			got++;
		}
	}
	if (!why[0] && got < n)
		bad("%d of %d receives in %d s", got, n, WAIT_S);
	return got;
}

static void case_burst_rnr(void)
{
	step("burst_rnr");
	why[0] = 0;
	reset_seq();
	unsigned char seen[64] = {0};
	if (!up(1, 64, 0)) {
		for (int s = 0; s < 16; s++)
			post_srq((uint64_t)s);
		for (uint32_t k = 0; k < 40 && !why[0]; k++)
			if (send_msg(0, k))
				bad("post_send %u: %s", k, strerror(errno));
		wait_recvs(16, seen, 64);
		// The rest wait (RNR, retried for ever) for receives: none may
		// have landed anywhere.
		usleep(300000);
		struct ibv_wc wc;
		if (!why[0] && ibv_poll_cq(A.cq, 1, &wc) != 0)
			bad("a receive completion with no WR posted (wr_id %" PRIu64 ")", wc.wr_id);
		for (int s = 16; s < 40; s++)
			post_srq((uint64_t)s);
		wait_recvs(24, seen, 64);
		double deadline = now() + WAIT_S;
		while (!why[0] && inflight && now() < deadline)
			reap_sends();
		if (!why[0] && inflight)
			bad("%u sends not completed", inflight);
	}
	down();
	if (why[0])
		result("FAIL", "burst_rnr", "%s", why);
	else
		result("PASS", "burst_rnr", "40 messages at 16 WRs: 24 waited (RNR) and landed after 24 more posts, in order, each WR once");
}

static void case_limit_event(void)
{
	step("limit_event");
	why[0] = 0;
	reset_seq();
	unsigned char seen[16] = {0};
	if (!up(1, 16, 0)) {
		struct ibv_srq_attr la = {.srq_limit = 4};
		int rc = ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT);
		if (rc)
			bad("modify_srq limit 4: %s", strerror(rc));
		for (int s = 0; s < 8 && !why[0]; s++)
			post_srq((uint64_t)s);
		for (uint32_t k = 0; k < 4 && !why[0]; k++)
			send_msg(0, k);
		wait_recvs(4, seen, 16);
		struct pollfd pfd = {.fd = A.ctx->async_fd, .events = POLLIN};
		if (!why[0] && poll(&pfd, 1, 300) != 0)
			bad("an async event with 4 WRs left (limit 4)");
		send_msg(0, 4);
		wait_recvs(1, seen, 16);
		if (!why[0] && poll(&pfd, 1, WAIT_S * 1000) != 1)
			bad("no async event within %d s at 3 WRs left", WAIT_S);
		struct ibv_async_event ev;
		if (!why[0]) {
			if (ibv_get_async_event(A.ctx, &ev))
				bad("ibv_get_async_event: %s", strerror(errno));
			else {
				if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
					bad("event %s for %p, want SRQ_LIMIT_REACHED for %p",
					    ibv_event_type_str(ev.event_type), (void *)ev.element.srq, (void *)srq);
				ibv_ack_async_event(&ev);
			}
		}
		struct ibv_srq_attr q;
		if (!why[0] && (rc = ibv_query_srq(srq, &q)) != 0)
			bad("query_srq: %s", strerror(rc));
		else if (!why[0] && q.srq_limit != 0)
			bad("srq_limit %u after the event, want 0", q.srq_limit);
		double deadline = now() + WAIT_S;
		while (!why[0] && inflight && now() < deadline)
			reap_sends();
	}
	down();
	if (why[0])
		result("FAIL", "limit_event", "%s", why);
	else
		result("PASS", "limit_event", "no event at 4 left, SRQ_LIMIT_REACHED for the SRQ at 3, limit then 0");
}

static void case_destroy_qp(void)
{
	step("destroy_qp");
	why[0] = 0;
	reset_seq();
	unsigned char seen[20] = {0};
	if (!up(2, 20, 0)) {
		for (int s = 0; s < 20; s++)
			post_srq((uint64_t)s);
		// QP 0 goes with the SRQ's WRs in its receive queue.
		int rc = ibv_destroy_qp(rq[0]);
		rq[0] = NULL;
		if (rc)
			bad("destroy_qp: %s", strerror(rc));
		ibv_destroy_qp(sq[0]);
		sq[0] = NULL;
		for (uint32_t k = 0; k < 20 && !why[0]; k++)
			if (send_msg(1, k))
				bad("post_send %u: %s", k, strerror(errno));
		wait_recvs(20, seen, 20);
		double deadline = now() + WAIT_S;
		while (!why[0] && inflight && now() < deadline)
			reap_sends();
	}
	down();
	if (why[0])
		result("FAIL", "destroy_qp", "%s", why);
	else
		result("PASS", "destroy_qp", "a QP destroyed with receives outstanding: the other QP received into all 20 WRs, each once");
}

struct poster {
	pthread_t t;
	int id, n;
	volatile int *stop;
	int err;
};

static void *poster_run(void *arg)
{
	struct poster *p = arg;
	for (int k = 0; k < p->n && !*p->stop;) {
		int rc = post_srq((uint64_t)(p->id * 1000 + k));
		if (rc == ENOMEM) {
			sched_yield();
			continue;
		}
		if (rc) {
			p->err = rc;
			return NULL;
		}
		k++;
	}
	return NULL;
}

static void case_threads(void)
{
	step("threads");
	why[0] = 0;
	reset_seq();
	const int total = 400, per_thread = 100 + 16; // 16 spare each: WRs lent to a QP only it consumes
	static unsigned char seen[4000];
	memset(seen, 0, sizeof(seen));
	if (!up(2, 64, 0)) {
		volatile int stop = 0;
		struct poster ps[4];
		for (int t = 0; t < 4; t++) {
			ps[t] = (struct poster){.id = t, .n = per_thread, .stop = &stop};
			pthread_create(&ps[t].t, NULL, poster_run, &ps[t]);
		}
		uint32_t sent[2] = {0};
		int received = 0;
		double deadline = now() + WAIT_S;
		while (!why[0] && received < total && now() < deadline) {
			for (int i = 0; i < 2; i++)
				if (sent[i] < (uint32_t)total / 2 && inflight < 32 && !send_msg(i, sent[i]))
					sent[i]++;
			reap_sends();
			struct ibv_wc wc[16];
			int n = ibv_poll_cq(A.cq, 16, wc);
			for (int k = 0; k < n && !why[0]; k++) {
				if (check_recv(&wc[k]) < 0)
					break;
				if (wc[k].wr_id >= 4000 || seen[wc[k].wr_id]++)
					bad("wr_id %" PRIu64 " twice or never posted", wc[k].wr_id);
				received++;
			}
		}
		stop = 1;
		for (int t = 0; t < 4; t++) {
			pthread_join(ps[t].t, NULL);
			if (ps[t].err)
				bad("thread %d: post_srq_recv: %s", t, strerror(ps[t].err));
		}
		if (!why[0] && received < total)
			bad("%d of %d messages in %d s", received, total, WAIT_S);
		deadline = now() + WAIT_S;
		while (!why[0] && inflight && now() < deadline)
			reap_sends();
	}
	down();
	if (why[0])
		result("FAIL", "threads", "%s", why);
	else
		result("PASS", "threads", "4 threads posting, 400 messages on 2 QPs, each WR once");
}

// plain_destroy_rnr: destroy_qp's pattern without an SRQ, through any provider (the
// module's C provider too): QP 0 and QP 1 hold 10 receives each; QP 0 goes to ERR and
// away (as the provider SRQ's destroy does); 20 messages on pair 1, the last 10 waiting
// (RNR) until QP 1 gets 10 more receives after its first 10 completions.
static void case_plain_destroy_rnr(void)
{
	step("plain_destroy_rnr");
	why[0] = 0;
	reset_seq();
	unsigned char seen[40] = {0};
	if (!up(2, 0, 0)) {
		for (int q = 0; q < 2; q++)
			for (int k = 0; k < 10; k++) {
				struct ibv_sge sge = {.addr = (uintptr_t)(A.buf + (size_t)(q * 20 + k) * SLOT), .length = SLOT,
						      .lkey = A.mr->lkey};
				struct ibv_recv_wr wr = {.wr_id = (uint64_t)(q * 20 + k), .sg_list = &sge, .num_sge = 1}, *bw;
				if (ibv_post_recv(rq[q], &wr, &bw))
					bad("post_recv: %s", strerror(errno));
			}
		struct ibv_qp_attr ea = {.qp_state = IBV_QPS_ERR};
		if (ibv_modify_qp(rq[0], &ea, IBV_QP_STATE))
			bad("modify_qp ERR: %s", strerror(errno));
		uint32_t qpn0 = rq[0]->qp_num, nflush = 0, nother = 0, other = 0;
		ibv_destroy_qp(rq[0]);
		rq[0] = NULL;
		ibv_destroy_qp(sq[0]);
		sq[0] = NULL;
		for (uint32_t k = 0; k < 20 && !why[0]; k++)
			if (send_msg(1, k))
				bad("post_send %u: %s", k, strerror(errno));
		// The first 10 (skipping QP 0's flushes, which name wr_ids 0..9).
		int got = 0;
		double deadline = now() + WAIT_S;
		while (!why[0] && got < 10 && now() < deadline) {
			reap_sends();
			struct ibv_wc wc;
			if (ibv_poll_cq(A.cq, 1, &wc) != 1)
				continue;
			if (wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id < 10) {
				// polled after QP 0's destroy_qp: what qp_num does the kernel give?
				nflush++;
				if (wc.qp_num != qpn0)
					nother++, other = wc.qp_num;
				continue;
			}
			if (check_recv(&wc) >= 0)
				got++;
		}
		for (int k = 10; k < 20 && !why[0]; k++) {
			struct ibv_sge sge = {.addr = (uintptr_t)(A.buf + (size_t)(20 + k) * SLOT), .length = SLOT,
					      .lkey = A.mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)(20 + k), .sg_list = &sge, .num_sge = 1}, *bw;
			if (ibv_post_recv(rq[1], &wr, &bw))
				bad("post_recv: %s", strerror(errno));
		}
		while (!why[0] && got < 20 && now() < deadline) {
			reap_sends();
			struct ibv_wc wc;
			if (ibv_poll_cq(A.cq, 1, &wc) == 1 && check_recv(&wc) >= 0)
				got++;
		}
		if (!why[0] && got < 20)
			bad("%d of 20 messages in %d s", got, WAIT_S);
		printf("# plain_destroy_rnr: %u flushes of QP 0 (qp_num %#x) polled after its destroy_qp, %u of them with "
		       "another qp_num (%#x)\n", nflush, qpn0, nother, other);
		(void)seen;
		while (!why[0] && inflight && now() < deadline)
			reap_sends();
	}
	down();
	if (why[0])
		result("FAIL", "plain_destroy_rnr", "%s", why);
	else
		result("PASS", "plain_destroy_rnr", "without an SRQ: QP 0 to ERR and away, 20 messages on pair 1, 10 of them after more receives");
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: srq DEV_A GID_A DEV_B GID_B\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *da = NULL, *db = NULL;
	for (int i = 0; list && i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0)
			da = list[i];
		if (strcmp(ibv_get_device_name(list[i]), argv[3]) == 0)
			db = list[i];
	}
	int rc = da && db ? open_dev(da, atoi(argv[2]), &A) : ENODEV;
	if (!rc)
		rc = open_dev(db, atoi(argv[4]), &B);
	if (rc) {
		result("FAIL", "setup", "%s or %s: %s", argv[1], argv[3], strerror(rc));
		return 1;
	}
	struct ibv_device_attr da_attr;
	if (!ibv_query_device(A.ctx, &da_attr))
		printf("# %s: max_srq %d max_srq_wr %d max_srq_sge %d\n", argv[1], da_attr.max_srq, da_attr.max_srq_wr,
		       da_attr.max_srq_sge);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	case_plain_destroy_rnr();
	case_traffic_runs("plain_traffic", 1);
	step("probe create_srq");
	struct ibv_srq *probe = ibv_create_srq(A.pd, &sa);
	if (!probe) {
		int e = errno;
		printf("@@SRQ create_srq=%s\n", strerrorname_np(e) ? strerrorname_np(e) : "?");
		const char *cases[] = {"traffic", "burst_rnr", "limit_event", "destroy_qp", "threads"};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			result("SKIP", cases[i], "ibv_create_srq: %s", strerror(e));
		return 0;
	}
	step("probe destroy_srq");
	ibv_destroy_srq(probe);
	printf("@@SRQ create_srq=ok\n");
	case_traffic_runs("traffic", 0);
	case_burst_rnr();
	case_limit_event();
	case_destroy_qp();
	case_threads();
	step("close");
	ibv_close_device(A.ctx);
	ibv_close_device(B.ctx);
	step("closed");
	return failed;
}
