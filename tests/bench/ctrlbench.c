/* ctrlbench: the control path's cost per verb (issue 34 part 2), through the
 * stock libibverbs, for whichever provider serves the devices.
 *
 * It times with CLOCK_MONOTONIC, each verb by itself, ITERS times (fewer for
 * the expensive ones) and prints the median of one process's iterations:
 *   open_first_us      the process's first ibv_open_device of DEV0 (a Go
 *                      provider loads its Go part and starts the runtime here)
 *   preload_us         with CTRLBENCH_PRELOAD=FILE: dlopen(FILE) before that
 *                      first open (the Go part: its runtime's start), so that
 *                      open_first_us is the rest (usb4goStart, the device's
 *                      probes and its ucontext)
 *   open_ns, close_ns  later ibv_open_device / ibv_close_device of DEV0
 *   alloc_pd_ns, dealloc_pd_ns
 *   reg_mr_ns, dereg_mr_ns   size= 4096, 1048576 and 67108864 (the buffer
 *                      allocated and touched once before; LOCAL_WRITE |
 *                      REMOTE_WRITE | REMOTE_READ as NCCL registers)
 *   create_cq_ns, destroy_cq_ns   a 512-entry CQ without a channel
 *   NCCL's connection set-up (tests/usb4/ncclpattern.c: a receiver QP, max_send_wr
 *   512 / max_recv_wr 256, one SGE each, no inline; INIT with REMOTE_WRITE |
 *   REMOTE_READ | REMOTE_ATOMIC, RTR with a GRH to the peer's GID, hop limit
 *   255, the port's active MTU, RTS timeout 20, retry 7, rnr retry 7), on
 *   DEV0 towards a QP on DEV1 that is created and connected untimed in the
 *   same iteration:
 *   create_qp_ns, modify_init_ns, modify_rtr_ns, modify_rts_ns, query_qp_ns
 *   (IBV_QP_STATE | IBV_QP_CAP, what NCCL asks), destroy_qp_ns, and
 *   nccl_connect_ns (create_qp through query_qp, one iteration's sum)
 * one line each: "@@BENCH tool=ctrl size=B qps=1 pl=1 LABELS served=NAME
 * metric=M value=V".
 *
 * With CTRLBENCH_MARK=1 every timed call is bracketed instead by two
 * access(2) calls on "/@ctrl/<metric>/<size>" and "/@ctrl/-" (ENOENT; no
 * provider touches such a path) and not timed, so that a run under strace -f
 * can be cut into the system calls of each verb: the calling thread's and the
 * other threads' (guest-ctrl.sh).
 *
 * usage: ctrlbench DEV0 GIDIDX0 DEV1 GIDIDX1 ITERS [LABELS...]
 * Exit 0, or 1 with one "ctrlbench: <op>: <error>" line on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"

enum { MAX_ITERS = 1000 };

static char labels[512];
static int mark_on;

static void die(const char *op, int err)
{
	fprintf(stderr, "ctrlbench: %s: %s\n", op, strerror(err ? err : EIO));
	exit(1);
}

static void mark(const char *metric, size_t size)
{
	if (!mark_on)
		return;
	char p[128];
	if (metric)
		snprintf(p, sizeof(p), "/@ctrl/%s/%zu", metric, size);
	else
		snprintf(p, sizeof(p), "/@ctrl/-");
	(void)access(p, F_OK);
}

/* A verb's samples: one per iteration. */
struct series {
	const char *metric;
	size_t size;
	double scale; /* ns per unit of the printed value */
	int n;
	double v[MAX_ITERS];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void emit(struct series *s)
{
	if (s->n == 0)
		return;
	qsort(s->v, (size_t)s->n, sizeof(double), cmp_double);
	double med = s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	printf("@@BENCH tool=ctrl size=%zu qps=1 pl=1 %s metric=%s value=%.1f n=%d\n", s->size, labels, s->metric,
	       med / s->scale, s->n);
}

static void add(struct series *s, double ns)
{
	if (s->n < MAX_ITERS)
		s->v[s->n++] = ns;
}

/* Times one call: the expression's result goes to *out. */
/* Times one call: the expression's result goes to *out. Under the markers the
 * clock is not read (on a guest whose clocksource has no vDSO path each read is
 * a system call, which would count as the verb's). */
#define TIMED(s, out, expr)                                                                                  \
	do {                                                                                                 \
		if (mark_on) {                                                                               \
			mark((s)->metric, (s)->size);                                                        \
			out = (expr);                                                                        \
			mark(NULL, 0);                                                                       \
			add((s), 1);                                                                         \
			break;                                                                               \
		}                                                                                            \
		double t_ = now_ns();                                                                        \
		out = (expr);                                                                                \
		add((s), now_ns() - t_);                                                                     \
	} while (0)

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	int gidx;
	enum ibv_mtu mtu;
};

static void dev_setup(struct dev *d)
{
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		die("ibv_alloc_pd", errno);
	d->cq = ibv_create_cq(d->ctx, 1024, NULL, NULL, 0);
	if (!d->cq)
		die("ibv_create_cq", errno);
	int rc = ibv_query_gid(d->ctx, 1, d->gidx, &d->gid);
	if (rc)
		die("ibv_query_gid", rc < 0 ? errno : rc);
	struct ibv_port_attr pa;
	rc = ibv_query_port(d->ctx, 1, &pa);
	if (rc)
		die("ibv_query_port", rc < 0 ? errno : rc);
	d->mtu = pa.active_mtu;
}

static struct ibv_qp *mkqp(struct dev *d)
{
	struct ibv_qp_init_attr a = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 512, .max_recv_wr = 256, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0},
	};
	return ibv_create_qp(d->pd, &a);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.pkey_index = 0,
				.port_num = 1,
				.qp_access_flags =
					IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, const struct dev *d, const struct dev *peer, uint32_t dqpn)
{
	struct ibv_qp_attr a = {0};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)d->gidx;
	a.ah_attr.grh.hop_limit = 255;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {0};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 20;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct series s_open = {"open_ns", 0, 1, 0, {0}}, s_close = {"close_ns", 0, 1, 0, {0}},
		     s_apd = {"alloc_pd_ns", 0, 1, 0, {0}}, s_dpd = {"dealloc_pd_ns", 0, 1, 0, {0}},
		     s_ccq = {"create_cq_ns", 0, 1, 0, {0}}, s_dcq = {"destroy_cq_ns", 0, 1, 0, {0}},
		     s_cqp = {"create_qp_ns", 0, 1, 0, {0}}, s_init = {"modify_init_ns", 0, 1, 0, {0}},
		     s_rtr = {"modify_rtr_ns", 0, 1, 0, {0}}, s_rts = {"modify_rts_ns", 0, 1, 0, {0}},
		     s_qqp = {"query_qp_ns", 0, 1, 0, {0}}, s_dqp = {"destroy_qp_ns", 0, 1, 0, {0}},
		     s_conn = {"nccl_connect_ns", 0, 1, 0, {0}};
static struct series s_reg[3], s_dereg[3];

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: ctrlbench DEV0 GIDIDX0 DEV1 GIDIDX1 ITERS [LABELS...]\n");
		return 2;
	}
	long iters = strtol(argv[5], NULL, 10);
	if (iters < 1 || iters > MAX_ITERS) {
		fprintf(stderr, "ctrlbench: ITERS must be 1..%d: %s\n", MAX_ITERS, argv[5]);
		return 2;
	}
	size_t off = 0;
	for (int i = 6; i < argc && off < sizeof(labels); i++)
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, "%s%s", off ? " " : "", argv[i]);
	const char *m = getenv("CTRLBENCH_MARK");
	mark_on = m && *m == '1';

	struct dev a = {.gidx = atoi(argv[2])}, b = {.gidx = atoi(argv[4])};
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		die("ibv_get_device_list", errno);
	struct ibv_device *da = find_device(list, argv[1]), *db = find_device(list, argv[3]);
	if (!da || !db)
		die("find device", ENODEV);

	/* The first open of the process, optionally after loading FILE first. */
	const char *pre = getenv("CTRLBENCH_PRELOAD");
	struct series s_pre = {"preload_us", 0, 1e3, 0, {0}}, s_first = {"open_first_us", 0, 1e3, 0, {0}};
	if (pre && *pre) {
		void *h;
		TIMED(&s_pre, h, dlopen(pre, RTLD_NOW | RTLD_LOCAL));
		if (!h) {
			fprintf(stderr, "ctrlbench: dlopen %s: %s\n", pre, dlerror());
			return 1;
		}
	}
	TIMED(&s_first, a.ctx, ibv_open_device(da));
	if (!a.ctx)
		die("ibv_open_device", errno);
	b.ctx = ibv_open_device(db);
	if (!b.ctx)
		die("ibv_open_device", errno);

	const struct verbs_device_head *vd = (const void *)da;
	Dl_info info = {0};
	const char *file = dladdr(vd->ops, &info) && info.dli_fname ? info.dli_fname : "?";
	printf("@@BENCHINFO what=ctrlbench served=%s path=%s %s\n", vd->ops->name, file, labels);
	size_t loff = strlen(labels);
	snprintf(labels + loff, sizeof(labels) - loff, " served=%s", vd->ops->name);

	/* Later opens and closes (the first one's context stays open). */
	long few = iters / 5 < 3 ? 3 : iters / 5;
	for (long i = 0; i < few; i++) {
		struct ibv_context *c;
		int rc;
		TIMED(&s_open, c, ibv_open_device(da));
		if (!c)
			die("ibv_open_device(later)", errno);
		TIMED(&s_close, rc, ibv_close_device(c));
		if (rc)
			die("ibv_close_device", errno);
	}

	for (long i = 0; i < iters; i++) {
		struct ibv_pd *pd;
		int rc;
		TIMED(&s_apd, pd, ibv_alloc_pd(a.ctx));
		if (!pd)
			die("ibv_alloc_pd", errno);
		TIMED(&s_dpd, rc, ibv_dealloc_pd(pd));
		if (rc)
			die("ibv_dealloc_pd", rc);
	}

	dev_setup(&a);
	dev_setup(&b);

	static const size_t sizes[3] = {4096, 1 << 20, 64 << 20};
	for (int k = 0; k < 3; k++) {
		s_reg[k] = (struct series){"reg_mr_ns", sizes[k], 1, 0, {0}};
		s_dereg[k] = (struct series){"dereg_mr_ns", sizes[k], 1, 0, {0}};
		void *buf = NULL;
		if (posix_memalign(&buf, 4096, sizes[k]))
			die("posix_memalign", ENOMEM);
		memset(buf, 0x5a, sizes[k]);
		long n = sizes[k] > (1 << 20) ? few : iters;
		for (long i = 0; i < n; i++) {
			struct ibv_mr *mr;
			int rc;
			TIMED(&s_reg[k], mr,
			      ibv_reg_mr(a.pd, buf, sizes[k],
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
			if (!mr)
				die("ibv_reg_mr", errno);
			TIMED(&s_dereg[k], rc, ibv_dereg_mr(mr));
			if (rc)
				die("ibv_dereg_mr", rc);
		}
		free(buf);
	}

	for (long i = 0; i < iters; i++) {
		struct ibv_cq *cq;
		int rc;
		TIMED(&s_ccq, cq, ibv_create_cq(a.ctx, 512, NULL, NULL, 0));
		if (!cq)
			die("ibv_create_cq", errno);
		TIMED(&s_dcq, rc, ibv_destroy_cq(cq));
		if (rc)
			die("ibv_destroy_cq", rc);
	}

	for (long i = 0; i < iters; i++) {
		struct ibv_qp *qp, *peer = mkqp(&b);
		int rc;
		if (!peer)
			die("ibv_create_qp(peer)", errno);
		int n0 = s_cqp.n;
		TIMED(&s_cqp, qp, mkqp(&a));
		if (!qp)
			die("ibv_create_qp", errno);
		TIMED(&s_init, rc, to_init(qp));
		if (rc)
			die("ibv_modify_qp(INIT)", rc);
		if ((rc = to_init(peer)) || (rc = to_rtr(peer, &b, &a, qp->qp_num)) || (rc = to_rts(peer)))
			die("peer to RTS", rc);
		TIMED(&s_rtr, rc, to_rtr(qp, &a, &b, peer->qp_num));
		if (rc)
			die("ibv_modify_qp(RTR)", rc);
		TIMED(&s_rts, rc, to_rts(qp));
		if (rc)
			die("ibv_modify_qp(RTS)", rc);
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		TIMED(&s_qqp, rc, ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qia));
		if (rc)
			die("ibv_query_qp", rc);
		if (qa.qp_state != IBV_QPS_RTS)
			die("ibv_query_qp: not RTS", EPROTO);
		if (s_cqp.n > n0)
			add(&s_conn, s_cqp.v[n0] + s_init.v[n0] + s_rtr.v[n0] + s_rts.v[n0] + s_qqp.v[n0]);
		TIMED(&s_dqp, rc, ibv_destroy_qp(qp));
		if (rc)
			die("ibv_destroy_qp", rc);
		if ((rc = ibv_destroy_qp(peer)))
			die("ibv_destroy_qp(peer)", rc);
	}

	if (s_pre.n)
		emit(&s_pre);
	emit(&s_first);
	struct series *all[] = {&s_open, &s_close, &s_apd, &s_dpd, &s_reg[0], &s_dereg[0], &s_reg[1], &s_dereg[1],
				&s_reg[2], &s_dereg[2], &s_ccq, &s_dcq, &s_cqp, &s_init, &s_rtr, &s_rts,
				&s_qqp, &s_dqp, &s_conn};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		emit(all[i]);

	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(list);
	return 0;
}
