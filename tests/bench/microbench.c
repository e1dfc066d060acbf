/* microbench: per-call cost of the verbs data path through the stock
 * libibverbs, for whichever provider serves the device in this process.
 *
 * It opens DEV0 and DEV1 (rxe0/rxe1 in the VM), connects one RC QP on each to
 * the other, and times with CLOCK_MONOTONIC:
 *   load_us       ibv_get_device_list(): libibverbs dlopens every provider here
 *   open_us       the first ibv_open_device() (for a Go provider: waits for its
 *                 runtime to finish starting)
 *   post_ns       one ibv_post_send() of an 8-byte signaled RDMA WRITE
 *   pair_ns       post_send + ibv_poll_cq() until that completion arrives
 *   poll_hit_ns   the ibv_poll_cq() call that returns the completion
 *   poll_empty_ns one ibv_poll_cq() on a CQ that has nothing
 *   start_poll_empty_ns  one ibv_start_poll() on an empty extended CQ (its
 *                 ENOENT miss; skipped, no line, where create_cq_ex fails)
 * and prints one "@@BENCH ... metric=NAME value=V" line per figure, plus the
 * provider that served DEV0 (served=NAME, from its verbs_device_ops).
 *
 * With MICROBENCH_SETTLE_US=N (N > 0) it runs instead ITERS settled pairs: post
 * one WRITE, poll(2) for N us so that the completion is surely there, then
 * ibv_poll_cq() until it is returned, and prints settled_extra_polls (the
 * polls that found nothing) and settle_us. Run under strace at two ITERS, that
 * counts the system calls of one post + completion pair without a busy-poll
 * loop's empty polls, whose number depends on the latency (the settle's own
 * sleep is a poll call, which no provider makes).
 * With MICROBENCH_BURST=K (1 < K <= 16) as well, each settled iteration is a
 * stream instead: K WRITEs posted back to back, one ibv_post_send each, then
 * the settle, then ibv_poll_cq until all K are returned (asking for the ones
 * still missing): the system calls of a stream, K messages per iteration.
 *
 * usage: microbench DEV0 GIDIDX0 DEV1 GIDIDX1 ITERS [LABELS...]
 * LABELS (key=value words) are copied into every output line.
 * Exit status 0 on success, 1 with one "microbench: <op>: <error>" line on
 * stderr otherwise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"

#define BUF_SIZE 4096
#define MSG_SIZE 8
#define CQ_DEPTH 64
#define WARMUP 200

static char labels[512];

static void die(const char *op, int err)
{
	fprintf(stderr, "microbench: %s: %s\n", op, strerror(err ? err : EIO));
	exit(1);
}

static void emit(const char *metric, double value)
{
	printf("@@BENCH tool=micro size=%d qps=1 %s metric=%s value=%.1f\n", MSG_SIZE, labels, metric,
	       value);
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	int gid_index;
	char *buf;
};

static void setup(struct side *s)
{
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		die("ibv_alloc_pd", errno);
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->buf)
		die("aligned_alloc", ENOMEM);
	memset(s->buf, 0x5a, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->mr)
		die("ibv_reg_mr", errno);
	s->cq = ibv_create_cq(s->ctx, CQ_DEPTH, NULL, NULL, 0);
	if (!s->cq)
		die("ibv_create_cq", errno);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = {.max_send_wr = CQ_DEPTH / 2, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		die("ibv_create_qp", errno);
	int rc = ibv_query_gid(s->ctx, 1, s->gid_index, &s->gid);
	if (rc)
		die("ibv_query_gid", rc < 0 ? errno : rc);
}

/* connect walks s's QP to RTS with peer as its remote end (RoCE v2: a GRH
 * with the peer's GID is mandatory). */
static void connect_qp(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		die("ibv_modify_qp(INIT)", rc);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	rc = ibv_modify_qp(s->qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		die("ibv_modify_qp(RTR)", rc);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	rc = ibv_modify_qp(s->qp, &a,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		die("ibv_modify_qp(RTS)", rc);
}

/* wait_one polls cq until one completion arrives, returns the duration of the
 * successful poll call in ns. A completion in error ends the program. */
static double wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (;;) {
		double t = now_ns();
		int n = ibv_poll_cq(cq, 1, &wc);
		double d = now_ns() - t;
		if (n < 0)
			die("ibv_poll_cq", EIO);
		if (n == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "microbench: completion: %s\n", ibv_wc_status_str(wc.status));
			exit(1);
		}
		return d;
	}
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: microbench DEV0 GIDIDX0 DEV1 GIDIDX1 ITERS [LABELS...]\n");
		return 2;
	}
	long iters = strtol(argv[5], NULL, 10);
	if (iters < 1) {
		fprintf(stderr, "microbench: ITERS must be a positive number: %s\n", argv[5]);
		return 2;
	}
	size_t off = 0;
	for (int i = 6; i < argc && off < sizeof(labels); i++)
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, "%s%s", off ? " " : "", argv[i]);

	struct side a = {.gid_index = atoi(argv[2])}, b = {.gid_index = atoi(argv[4])};

	double t0 = now_ns();
	struct ibv_device **list = ibv_get_device_list(NULL);
	double t1 = now_ns();
	if (!list)
		die("ibv_get_device_list", errno);
	struct ibv_device *da = find_device(list, argv[1]), *db = find_device(list, argv[3]);
	if (!da || !db)
		die("find device", ENODEV);
	double t2 = now_ns();
	a.ctx = ibv_open_device(da);
	double t3 = now_ns();
	if (!a.ctx)
		die("ibv_open_device", errno);
	b.ctx = ibv_open_device(db);
	if (!b.ctx)
		die("ibv_open_device", errno);

	/* Which provider really serves DEV0, and from which file. */
	const struct verbs_device_head *vd = (const void *)da;
	Dl_info info = {0};
	const char *file = dladdr(vd->ops, &info) && info.dli_fname ? info.dli_fname : "?";
	const char *slash = strrchr(file, '/');
	/* path=: on usb4 both providers are named usb4_rdma, in files of one name. */
	printf("@@BENCHINFO what=microbench served=%s file=%s path=%s %s\n", vd->ops->name,
	       slash ? slash + 1 : file, file, labels);
	size_t loff = strlen(labels);
	snprintf(labels + loff, sizeof(labels) - loff, " served=%s", vd->ops->name);

	setup(&a);
	setup(&b);
	connect_qp(&a, &b);
	connect_qp(&b, &a);

	struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = MSG_SIZE, .lkey = a.mr->lkey};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = (uintptr_t)b.buf, .rkey = b.mr->rkey},
	};
	const char *settle = getenv("MICROBENCH_SETTLE_US");
	long settle_us = settle ? strtol(settle, NULL, 10) : 0;
	const char *burst_env = getenv("MICROBENCH_BURST");
	long burst = burst_env ? strtol(burst_env, NULL, 10) : 1;
	if (burst < 1 || burst > 16)
		die("MICROBENCH_BURST must be 1..16", EINVAL);
	if (settle_us > 0) {
		long extra = 0;
		for (long i = 0; i < iters; i++) {
			struct ibv_wc wc[16];
			for (long k = 0; k < burst; k++) {
				struct ibv_send_wr *bad = NULL;
				wr.wr_id = (uint64_t)(i * burst + k);
				int rc = ibv_post_send(a.qp, &wr, &bad);
				if (rc)
					die("ibv_post_send", rc);
			}
			poll(NULL, 0, (int)((settle_us + 999) / 1000));
			for (long got = 0; got < burst;) {
				int n = ibv_poll_cq(a.cq, (int)(burst - got), wc);
				if (n < 0)
					die("ibv_poll_cq", EIO);
				for (int j = 0; j < n; j++)
					if (wc[j].status != IBV_WC_SUCCESS)
						die(ibv_wc_status_str(wc[j].status), EIO);
				if (n == 0)
					extra++;
				got += n;
			}
		}
		emit("settled_extra_polls", (double)extra);
		emit("settle_us", (double)settle_us);
		if (burst > 1)
			emit("burst", (double)burst);
		return 0;
	}
	double post_sum = 0, hit_sum = 0, pair_t0 = 0;
	for (long i = 0; i < WARMUP + iters; i++) {
		if (i == WARMUP) {
			post_sum = hit_sum = 0;
			pair_t0 = now_ns();
		}
		struct ibv_send_wr *bad = NULL;
		wr.wr_id = (uint64_t)i;
		double t = now_ns();
		int rc = ibv_post_send(a.qp, &wr, &bad);
		post_sum += now_ns() - t;
		if (rc)
			die("ibv_post_send", rc);
		hit_sum += wait_one(a.cq);
	}
	double pair_ns = (now_ns() - pair_t0) / (double)iters;

	/* b's CQ never gets a completion: RDMA WRITE consumes no receive. */
	struct ibv_wc wc;
	long empty_iters = iters * 100;
	double e0 = now_ns();
	for (long i = 0; i < empty_iters; i++)
		if (ibv_poll_cq(b.cq, 1, &wc) != 0)
			die("ibv_poll_cq(empty)", EPROTO);
	double empty_ns = (now_ns() - e0) / (double)empty_iters;

	/* The extended poll API's miss, on a CQ ex nothing completes into. */
	struct ibv_cq_init_attr_ex cxa = {.cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(b.ctx, &cxa);
	double start_empty_ns = -1;
	if (cqx) {
		struct ibv_poll_cq_attr pa = {0};
		double s0 = now_ns();
		for (long i = 0; i < empty_iters; i++)
			if (ibv_start_poll(cqx, &pa) != ENOENT)
				die("ibv_start_poll(empty)", EPROTO);
		start_empty_ns = (now_ns() - s0) / (double)empty_iters;
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	}

	emit("load_us", (t1 - t0) / 1e3);
	emit("open_us", (t3 - t2) / 1e3);
	emit("post_ns", post_sum / (double)iters);
	emit("poll_hit_ns", hit_sum / (double)iters);
	emit("pair_ns", pair_ns);
	emit("poll_empty_ns", empty_ns);
	if (start_empty_ns >= 0)
		emit("start_poll_empty_ns", start_empty_ns);

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(list);
	free(a.buf);
	free(b.buf);
	return 0;
}
