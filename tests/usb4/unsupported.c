// unsupported: what thunderbolt_ibverbs does not offer (SRQ, UD QPs, atomics,
// inline sends), asked for through libibverbs and our provider on the usb4 bed
// (SRQs: our provider's own where query_device advertises them, issue 35).
// Each must fail with an errno (or, for a posted WR, an error completion), never
// crash, hang or succeed. The module's own answers are the expectation:
// hellas-main:kernel/ibdev.c create_qp (an SRQ or a type other than RC/UC/GSI:
// -EOPNOTSUPP), query_device (atomic_cap IB_ATOMIC_NONE), the send path
// (IB_SEND_INLINE: -EOPNOTSUPP); no create_srq op, so ib_core answers
// -EOPNOTSUPP (linux:drivers/infiniband/core/uverbs_cmd.c).
//
//   unsupported [--case NAME] [--list]    result lines rel/unsupported/<case>
//   unsupported --async-watch DEV SECONDS prints each async event of DEV as it comes
//                                         (flushed: the caller may kill it)
#include "../reliability/rel.h"

#include <poll.h>

static struct rel_end A, B; // A on dev0, B on dev1, RC-connected

// null_errno: a constructor's result; PASS when NULL with one of the wanted errnos.
static void null_errno(const char *name, double t0, void *obj, int err, int want, int alt)
{
	if (obj)
		rel_fail(name, t0, "created; the module offers no such object (want NULL, errno %s)",
			 rel_errname(want));
	else
		rel_check(err == want || (alt && err == alt), name, t0, "NULL, errno %s (want %s)",
			  rel_errname(err), rel_errname(want));
}

// create_srq: the module has none (EOPNOTSUPP from ib_core); our provider gives
// SRQs of its own on such a kernel (docs/srq.md) and says so in query_device's
// max_srq. The answer must match what query_device advertises.
static void c_create_srq(const char *name)
{
	double t0 = rel_now();
	struct ibv_device_attr da;
	int advertised = ibv_query_device(A.ctx, &da) == 0 && da.max_srq > 0;
	struct ibv_srq_init_attr ia = {.attr = {.max_wr = 16, .max_sge = 1}};
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(A.pd, &ia);
	int e = errno;
	if (advertised) {
		int rc = srq ? ibv_destroy_srq(srq) : 0;
		rel_check(srq && !rc, name, t0, "max_srq %d advertised: create_srq %s, destroy_srq %s", da.max_srq,
			  srq ? "ok" : rel_errname(e), rel_errname(rc));
		return;
	}
	null_errno(name, t0, srq, e, EOPNOTSUPP, ENOSYS);
	if (srq)
		ibv_destroy_srq(srq);
}

static void c_create_qp_ud(const char *name)
{
	double t0 = rel_now();
	struct ibv_qp_init_attr ia = {
		.send_cq = A.cq,
		.recv_cq = A.cq,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_UD,
	};
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(A.pd, &ia);
	int e = errno;
	null_errno(name, t0, qp, e, EOPNOTSUPP, 0);
	if (qp)
		ibv_destroy_qp(qp);
}

static void c_query_device_atomic_cap(const char *name)
{
	double t0 = rel_now();
	struct ibv_device_attr da;
	int rc = ibv_query_device(A.ctx, &da);
	if (rc)
		rel_fail(name, t0, "query_device: %s", rel_errname(rc));
	else
		rel_check(da.atomic_cap == IBV_ATOMIC_NONE, name, t0, "atomic_cap %d (want IBV_ATOMIC_NONE)",
			  (int)da.atomic_cap);
}

// post_one posts wr on A's QP; returns the post's errno, or 0 and the first
// completion's status in *st (-1 when none came within 5 s).
static int post_one(struct ibv_send_wr *wr, int *st)
{
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(A.qp, wr, &bad);
	*st = -1;
	if (rc)
		return rc;
	for (double t = rel_now(); rel_now() - t < 5;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(A.cq, 1, &wc);
		if (n < 0)
			return EIO;
		if (n == 1) {
			*st = wc.status;
			return 0;
		}
		usleep(1000);
	}
	return 0;
}

// post_refused: PASS when the post fails with an errno or completes in error.
static void post_refused(const char *name, double t0, struct ibv_send_wr *wr)
{
	int st;
	int rc = post_one(wr, &st);
	if (rc)
		rel_check(rc == EINVAL || rc == EOPNOTSUPP, name, t0, "post_send: %s", rel_errname(rc));
	else if (st < 0)
		rel_fail(name, t0, "post_send 0 and no completion within 5 s");
	else
		rel_check(st != IBV_WC_SUCCESS, name, t0, "post_send 0, completion %s",
			  ibv_wc_status_str((enum ibv_wc_status)st));
}

static void c_post_send_atomic_cmp_swp(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
		.send_flags = IBV_SEND_SIGNALED,
		.wr = {.atomic = {.remote_addr = (uintptr_t)B.buf, .rkey = B.mr->rkey, .compare_add = 0, .swap = 1}},
	};
	post_refused(name, t0, &wr);
}

static void c_post_send_atomic_fetch_add(const char *name)
{
	double t0 = rel_now();
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = 2,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED,
		.wr = {.atomic = {.remote_addr = (uintptr_t)B.buf, .rkey = B.mr->rkey, .compare_add = 1}},
	};
	post_refused(name, t0, &wr);
}

static const struct rel_case cases[] = {
	{"create_srq", c_create_srq},
	{"create_qp_ud", c_create_qp_ud},
	{"query_device_atomic_cap", c_query_device_atomic_cap},
	{"post_send_atomic_cmp_swp", c_post_send_atomic_cmp_swp},
	{"post_send_atomic_fetch_add", c_post_send_atomic_fetch_add},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

// async_watch prints DEV's async events for up to secs seconds; it returns
// early once the device is gone (IBV_EVENT_DEVICE_FATAL).
static int async_watch(const char *dev, int secs)
{
	struct ibv_context *ctx = rel_open_by_name(dev);
	if (!ctx) {
		printf("async-watch %s: open: %s\n", dev, rel_errname(errno));
		return 1;
	}
	printf("async-watch %s: watching\n", dev);
	fflush(stdout);
	for (double t0 = rel_now(); rel_now() - t0 < secs;) {
		struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev)) {
			printf("async-watch %s: get_async_event: %s\n", dev, rel_errname(errno));
			break;
		}
		enum ibv_event_type type = ev.event_type;
		printf("async-watch %s: event %s (%d)\n", dev, ibv_event_type_str(type), (int)type);
		fflush(stdout);
		ibv_ack_async_event(&ev);
		if (type == IBV_EVENT_DEVICE_FATAL)
			break;
	}
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	rel_prog = "unsupported";
	if (argc == 4 && strcmp(argv[1], "--async-watch") == 0)
		return async_watch(argv[2], atoi(argv[3]));
	const char *only;
	int exit_code = rel_case_args(argc, argv, cases, NCASES, &only);
	if (exit_code >= 0)
		return exit_code;
	double t0 = rel_now();
	const char *what = "";
	int rc = rel_pair_open(&A, &B, 64, 65536, 16, &what);
	if (rc) {
		rel_fail(only ? only : "setup", t0, "setup: %s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	rel_run_cases(cases, NCASES, only);
	rel_end_close(&A);
	rel_end_close(&B);
	return rel_exit_code();
}
