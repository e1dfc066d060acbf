// Shared helpers of the reliability programs (tests/reliability/README.md):
// go-test-style result lines, device and QP setup on the test VM's rxe0/rxe1,
// and small utilities. Header-only so each program builds from one .c file.
#ifndef REL_H
#define REL_H

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static const char *rel_prog = "rel";
static int rel_passed, rel_failed, rel_skipped;

static inline double rel_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// rel_errname: "EINVAL" for 22, "0" for 0, the number otherwise. It cycles
// through four buffers, so one printf can name several errnos (one buffer
// made "got X, want Y" print the same name twice).
static inline const char *rel_errname(int e)
{
	static __thread char bufs[4][32];
	static __thread unsigned next;
	char *buf = bufs[next++ % 4];
	if (e == 0)
		return "0";
	const char *n = strerrorname_np(e < 0 ? -e : e);
	snprintf(buf, sizeof(bufs[0]), "%s%s", e < 0 ? "-" : "", n ? n : "?");
	if (!n)
		snprintf(buf, sizeof(bufs[0]), "%d", e);
	return buf;
}

// rel_result prints one result line, --- PASS|FAIL|SKIP: rel/<prog>/<case>,
// followed by an indented note when there is one.
static inline void rel_result(const char *status, const char *name, double secs, const char *fmt, ...)
{
	char note[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(note, sizeof(note), fmt, ap);
		va_end(ap);
	}
	printf("--- %s: rel/%s/%s (%.2fs)\n", status, rel_prog, name, secs);
	if (note[0])
		printf("    %s\n", note);
	fflush(stdout);
	if (status[0] == 'P')
		rel_passed++;
	else if (status[0] == 'F')
		rel_failed++;
	else
		rel_skipped++;
}

#define rel_pass(name, t0, ...) rel_result("PASS", name, rel_now() - (t0), __VA_ARGS__)
#define rel_fail(name, t0, ...) rel_result("FAIL", name, rel_now() - (t0), __VA_ARGS__)
#define rel_skip(name, ...) rel_result("SKIP", name, 0, __VA_ARGS__)

// rel_check: PASS when ok, else FAIL; the note is printed either way.
#define rel_check(ok, name, t0, ...) \
	((ok) ? rel_pass(name, t0, __VA_ARGS__) : rel_fail(name, t0, __VA_ARGS__))

static inline int rel_exit_code(void)
{
	printf("# rel/%s: %d passed, %d failed, %d skipped\n", rel_prog, rel_passed, rel_failed,
	       rel_skipped);
	fflush(stdout);
	return rel_failed ? 1 : 0;
}

static inline const char *rel_env(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

// rel_devname(i): the VM harness's USB4VERBS_DEV0/1 (rxe0/rxe1 by default).
static inline const char *rel_devname(int i)
{
	return i == 0 ? rel_env("USB4VERBS_DEV0", "rxe0") : rel_env("USB4VERBS_DEV1", "rxe1");
}

static inline int rel_gidindex(int i)
{
	return atoi(i == 0 ? rel_env("USB4VERBS_GID0", "1") : rel_env("USB4VERBS_GID1", "1"));
}

// rel_find_device: the ibv_device called name in list, or NULL.
static inline struct ibv_device *rel_find_device(struct ibv_device **list, int n, const char *name)
{
	for (int i = 0; list && i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i];
	return NULL;
}

// rel_open_by_name opens the device called name; NULL with errno set otherwise.
static inline struct ibv_context *rel_open_by_name(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	struct ibv_device *dev = rel_find_device(list, n, name);
	struct ibv_context *ctx = NULL;
	if (dev)
		ctx = ibv_open_device(dev);
	else
		errno = ENODEV;
	int e = errno;
	ibv_free_device_list(list);
	errno = e;
	return ctx;
}

// One end of an RC connection: its device, PD, CQ, QP and a registered buffer.
struct rel_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	void *buf;
	size_t len;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static inline struct ibv_qp *rel_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
					      uint32_t depth)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	return ibv_create_qp(pd, &ia);
}

// rel_qp_to_init moves qp from RESET to INIT on port 1 with remote read/write access.
static inline int rel_qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

// rel_qp_connect moves qp from INIT through RTR to RTS towards remote QP number
// rqpn at GID rgid, sending from local GID index sgid (RoCE v2 needs a GRH).
static inline int rel_qp_connect(struct ibv_qp *qp, enum ibv_mtu mtu, int sgid, uint32_t rqpn,
				 const union ibv_gid *rgid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = rqpn,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = {.dgid = *rgid, .sgid_index = (uint8_t)sgid, .hop_limit = 64},
			.port_num = 1,
		},
	};
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	struct ibv_qp_attr r = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = 0,
		.max_rd_atomic = 1,
	};
	return ibv_modify_qp(qp, &r,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

// rel_end_open opens device i (0 or 1) with a PD, one CQ of cqe entries and a
// registered buffer of len bytes; no QP. Returns 0 or an errno, with *what naming the step.
static inline int rel_end_open(struct rel_end *e, int i, int cqe, size_t len, const char **what)
{
	memset(e, 0, sizeof(*e));
	*what = "open_device";
	e->ctx = rel_open_by_name(rel_devname(i));
	if (!e->ctx)
		return errno ? errno : ENODEV;
	*what = "query_port";
	struct ibv_port_attr pa;
	int rc = ibv_query_port(e->ctx, 1, &pa);
	if (rc)
		return rc;
	e->mtu = pa.active_mtu;
	e->gid_index = rel_gidindex(i);
	*what = "query_gid";
	if (ibv_query_gid(e->ctx, 1, e->gid_index, &e->gid))
		return errno ? errno : EIO;
	*what = "alloc_pd";
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		return errno ? errno : EIO;
	*what = "create_cq";
	e->cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	if (!e->cq)
		return errno ? errno : EIO;
	*what = "reg_mr";
	e->len = len;
	if (posix_memalign(&e->buf, 4096, len))
		return ENOMEM;
	memset(e->buf, 0, len);
	e->mr = ibv_reg_mr(e->pd, e->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!e->mr)
		return errno ? errno : EIO;
	return 0;
}

// rel_pair_connect creates an RC QP on each end (sharing each end's CQ) and connects them.
static inline int rel_pair_connect(struct rel_end *a, struct rel_end *b, uint32_t depth, const char **what)
{
	*what = "create_qp";
	a->qp = rel_create_rc_qp(a->pd, a->cq, a->cq, depth);
	if (!a->qp)
		return errno ? errno : EIO;
	b->qp = rel_create_rc_qp(b->pd, b->cq, b->cq, depth);
	if (!b->qp)
		return errno ? errno : EIO;
	*what = "modify_qp INIT";
	int rc = rel_qp_to_init(a->qp);
	if (!rc)
		rc = rel_qp_to_init(b->qp);
	if (rc)
		return rc;
	*what = "modify_qp RTR/RTS";
	enum ibv_mtu mtu = a->mtu < b->mtu ? a->mtu : b->mtu;
	rc = rel_qp_connect(a->qp, mtu, a->gid_index, b->qp->qp_num, &b->gid);
	if (!rc)
		rc = rel_qp_connect(b->qp, mtu, b->gid_index, a->qp->qp_num, &a->gid);
	return rc;
}

// rel_pair_open opens end A on device 0 and end B on device 1 (rel_end_open)
// and connects them (rel_pair_connect): 0, or the errno with *what naming
// the step that failed.
static inline int rel_pair_open(struct rel_end *a, struct rel_end *b, int cqe, size_t len, uint32_t depth,
				const char **what)
{
	int rc = rel_end_open(a, 0, cqe, len, what);
	if (!rc)
		rc = rel_end_open(b, 1, cqe, len, what);
	if (!rc)
		rc = rel_pair_connect(a, b, depth, what);
	return rc;
}

static inline void rel_end_close(struct rel_end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

// rel_poll_one polls cq until one completion arrives or secs pass; 1, 0 on
// timeout, or the negative poll_cq result.
static inline int rel_poll_one(struct ibv_cq *cq, struct ibv_wc *wc, double secs)
{
	double end = rel_now() + secs;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
		if (rel_now() > end)
			return 0;
		usleep(50);
	}
}

// A program of named cases: each runs alone with --case NAME (its own
// process, so one crash loses one case) or all in a row.
struct rel_case {
	const char *name;
	void (*fn)(const char *name);
};

// rel_case_args parses a case program's arguments, [--list | --case NAME].
// It returns -1 to go on and run the cases (*only: the one named, or NULL
// for all), else the exit code: 0 after --list printed the names, 2 after a
// usage error or an unknown case name (a typo must not pass as zero cases).
static inline int rel_case_args(int argc, char **argv, const struct rel_case *cases, size_t n, const char **only)
{
	*only = NULL;
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "--case") == 0) {
		for (size_t i = 0; i < n; i++)
			if (strcmp(cases[i].name, argv[2]) == 0) {
				*only = argv[2];
				return -1;
			}
		fprintf(stderr, "%s: no case %s\n", rel_prog, argv[2]);
		return 2;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--list | --case NAME]\n", rel_prog);
		return 2;
	}
	return -1;
}

// rel_run_cases runs the case named only, or all of them when only is NULL.
static inline void rel_run_cases(const struct rel_case *cases, size_t n, const char *only)
{
	for (size_t i = 0; i < n; i++)
		if (!only || strcmp(cases[i].name, only) == 0)
			cases[i].fn(cases[i].name);
}

#endif
