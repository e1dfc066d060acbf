// concurrency: CONC_THREADS (default 8) threads, each with its own RC QP pair
// between dev0 and dev1, created, used and destroyed at the same time on one
// shared context per device. Each thread sends CONC_ITERS messages (default
// 1000) with a window of 8, every payload naming its thread and sequence
// number, and the receiver checks it.
//   separate_cqs: every thread has its own send and receive CQ;
//   shared_cq:    all QPs share one send CQ and one receive CQ, and every thread
//                 polls both, crediting each completion to the QP's owner.
// A case passes when every message is sent and received exactly once, in
// order per QP, with the right payload and status, within CONC_DEADLINE s.
// Built plain and with -fsanitize=thread (guest.sh runs both); the Go side of
// the provider is run under -race by installing a -race build of it.
#include "rel.h"

#include <pthread.h>
#include <stdatomic.h>

#define WINDOW 8
#define MSG 64
#define MAXT 64

struct thr {
	int id;
	struct ibv_cq *scq, *rcq; // own, or the shared ones
	struct ibv_qp *qpa, *qpb;
	struct ibv_mr *smr, *rmr;
	unsigned char *sbuf, *rbuf; // one MSG-byte slot per message: no slot is reused
	_Atomic unsigned char *sseen, *rseen; // exactly-once bookkeeping per message
	_Atomic long sdone, rdone;  // completions credited to this thread
	long rnext;                 // next receive expected (order check, own CQs only)
	char err[200];
	pthread_t th;
};

static struct rel_end A, B; // contexts and PDs only
static struct thr T[MAXT];
static int nthreads, iters, shared;
static double deadline;
static struct ibv_cq *shared_scq, *shared_rcq;
static _Atomic int anyerr;
static pthread_barrier_t bar;

static void seterr(struct thr *t, const char *fmt, ...)
{
	if (t->err[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof(t->err), fmt, ap);
	va_end(ap);
	atomic_store(&anyerr, 1);
}

// credit handles one completion from either CQ: it belongs to thread wr_id>>32.
static void credit(struct thr *self, const struct ibv_wc *wc, int recv)
{
	int owner = (int)(wc->wr_id >> 32);
	long seq = (long)(wc->wr_id & 0xffffffff);
	if (owner < 0 || owner >= nthreads) {
		seterr(self, "completion with foreign wr_id %#" PRIx64, wc->wr_id);
		return;
	}
	struct thr *t = &T[owner];
	if (wc->status != IBV_WC_SUCCESS) {
		seterr(t, "%s completion seq %ld: %s", recv ? "recv" : "send", seq, ibv_wc_status_str(wc->status));
		return;
	}
	if (seq >= iters) {
		seterr(t, "%s completion with sequence %ld past the last", recv ? "recv" : "send", seq);
		return;
	}
	if (atomic_fetch_or(recv ? &t->rseen[seq] : &t->sseen[seq], 1)) {
		seterr(t, "%s completion seq %ld seen twice", recv ? "recv" : "send", seq);
		return;
	}
	if (recv) {
		// RC delivers in order on one QP. With a shared CQ two pollers may
		// credit one QP's completions in either order, so order is checked on
		// own CQs only.
		unsigned char *p = t->rbuf + seq * MSG;
		unsigned pid = 0, pseq = 0;
		memcpy(&pid, p, 4);
		memcpy(&pseq, p + 4, 4);
		if (!shared && seq != t->rnext)
			seterr(t, "recv seq %ld, want %ld (out of order)", seq, t->rnext);
		else if (wc->byte_len != MSG || pid != (unsigned)owner || pseq != (unsigned)seq)
			seterr(t, "recv seq %ld: byte_len %u payload (%u,%u)", seq, wc->byte_len, pid, pseq);
		if (!shared)
			t->rnext = seq + 1;
		atomic_fetch_add_explicit(&t->rdone, 1, memory_order_release);
	} else {
		atomic_fetch_add_explicit(&t->sdone, 1, memory_order_release);
	}
}

static int poll_some(struct thr *self)
{
	struct ibv_wc wc[16];
	int got = 0;
	for (int side = 0; side < 2; side++) {
		struct ibv_cq *cq = side ? self->rcq : self->scq;
		int n = ibv_poll_cq(cq, 16, wc);
		if (n < 0) {
			seterr(self, "poll_cq returned %d", n);
			return n;
		}
		for (int i = 0; i < n; i++)
			credit(self, &wc[i], side);
		got += n;
	}
	return got;
}

static int setup(struct thr *t)
{
	size_t len = ((size_t)iters * MSG + 4095) & ~(size_t)4095;
	t->sbuf = aligned_alloc(4096, len);
	t->rbuf = aligned_alloc(4096, len);
	t->sseen = calloc((size_t)iters, 1);
	t->rseen = calloc((size_t)iters, 1);
	if (!t->sbuf || !t->rbuf || !t->sseen || !t->rseen)
		return ENOMEM;
	memset(t->sbuf, 0, len);
	memset(t->rbuf, 0, len);
	if (!(t->smr = ibv_reg_mr(A.pd, t->sbuf, len, IBV_ACCESS_LOCAL_WRITE)))
		return errno;
	if (!(t->rmr = ibv_reg_mr(B.pd, t->rbuf, len, IBV_ACCESS_LOCAL_WRITE)))
		return errno;
	if (shared) {
		t->scq = shared_scq;
		t->rcq = shared_rcq;
	} else {
		if (!(t->scq = ibv_create_cq(A.ctx, 4 * WINDOW, NULL, NULL, 0)))
			return errno;
		if (!(t->rcq = ibv_create_cq(B.ctx, 4 * WINDOW, NULL, NULL, 0)))
			return errno;
	}
	if (!(t->qpa = rel_create_rc_qp(A.pd, t->scq, t->scq, 2 * WINDOW)))
		return errno;
	if (!(t->qpb = rel_create_rc_qp(B.pd, t->rcq, t->rcq, 2 * WINDOW)))
		return errno;
	int rc = rel_qp_to_init(t->qpa);
	if (!rc)
		rc = rel_qp_to_init(t->qpb);
	enum ibv_mtu mtu = A.mtu < B.mtu ? A.mtu : B.mtu;
	if (!rc)
		rc = rel_qp_connect(t->qpa, mtu, A.gid_index, t->qpb->qp_num, &B.gid);
	if (!rc)
		rc = rel_qp_connect(t->qpb, mtu, B.gid_index, t->qpa->qp_num, &A.gid);
	return rc;
}

static void teardown(struct thr *t)
{
	int rc = 0;
	if (t->qpa && (rc = ibv_destroy_qp(t->qpa)))
		seterr(t, "destroy_qp: %s", rel_errname(rc));
	if (t->qpb && (rc = ibv_destroy_qp(t->qpb)))
		seterr(t, "destroy_qp: %s", rel_errname(rc));
	if (!shared) {
		if (t->scq && (rc = ibv_destroy_cq(t->scq)))
			seterr(t, "destroy_cq: %s", rel_errname(rc));
		if (t->rcq && (rc = ibv_destroy_cq(t->rcq)))
			seterr(t, "destroy_cq: %s", rel_errname(rc));
	}
	if (t->smr && (rc = ibv_dereg_mr(t->smr)))
		seterr(t, "dereg_mr: %s", rel_errname(rc));
	if (t->rmr && (rc = ibv_dereg_mr(t->rmr)))
		seterr(t, "dereg_mr: %s", rel_errname(rc));
	free(t->sbuf);
	free(t->rbuf);
	free((void *)t->sseen);
	free((void *)t->rseen);
}

static void *run(void *arg)
{
	struct thr *t = arg;
	int rc = setup(t);
	if (rc)
		seterr(t, "setup: %s", rel_errname(rc));
	pthread_barrier_wait(&bar); // every QP exists before anyone sends
	long posted = 0;
	while (!t->err[0] && !atomic_load(&anyerr)) {
		long sd = atomic_load_explicit(&t->sdone, memory_order_acquire);
		long rd = atomic_load_explicit(&t->rdone, memory_order_acquire);
		if (sd >= iters && rd >= iters)
			break;
		if (rel_now() > deadline) {
			seterr(t, "deadline: posted %ld, %ld sends and %ld receives completed", posted, sd, rd);
			break;
		}
		long done = sd < rd ? sd : rd;
		if (posted < iters && posted - done < WINDOW) {
			uint64_t id = ((uint64_t)t->id << 32) | (uint64_t)posted;
			unsigned char *r = t->rbuf + posted * MSG;
			struct ibv_sge rs = {.addr = (uintptr_t)r, .length = MSG, .lkey = t->rmr->lkey};
			struct ibv_recv_wr rw = {.wr_id = id, .sg_list = &rs, .num_sge = 1}, *rbad;
			if ((rc = ibv_post_recv(t->qpb, &rw, &rbad))) {
				seterr(t, "post_recv seq %ld: %s", posted, rel_errname(rc));
				break;
			}
			unsigned char *s = t->sbuf + posted * MSG;
			unsigned v[2] = {(unsigned)t->id, (unsigned)posted};
			memcpy(s, v, sizeof(v));
			struct ibv_sge ss = {.addr = (uintptr_t)s, .length = MSG, .lkey = t->smr->lkey};
			struct ibv_send_wr sw = {.wr_id = id, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *sbad;
			if ((rc = ibv_post_send(t->qpa, &sw, &sbad))) {
				seterr(t, "post_send seq %ld: %s", posted, rel_errname(rc));
				break;
			}
			posted++;
		}
		if (poll_some(t) < 0)
			break;
	}
	// Everyone's traffic is done before anyone destroys a QP on a shared CQ.
	pthread_barrier_wait(&bar);
	teardown(t);
	return NULL;
}

static void run_case(const char *name, int shared_cq)
{
	double t0 = rel_now();
	shared = shared_cq;
	deadline = t0 + atof(rel_env("CONC_DEADLINE", "120"));
	atomic_store(&anyerr, 0);
	memset(T, 0, sizeof(T));
	if (shared) {
		int cqe = 4 * WINDOW * nthreads;
		shared_scq = ibv_create_cq(A.ctx, cqe, NULL, NULL, 0);
		shared_rcq = ibv_create_cq(B.ctx, cqe, NULL, NULL, 0);
		if (!shared_scq || !shared_rcq) {
			rel_fail(name, t0, "create shared CQs: %s", rel_errname(errno));
			return;
		}
	}
	pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
	for (int i = 0; i < nthreads; i++) {
		T[i].id = i;
		pthread_create(&T[i].th, NULL, run, &T[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(T[i].th, NULL);
	pthread_barrier_destroy(&bar);
	if (shared) {
		int rc1 = ibv_destroy_cq(shared_scq), rc2 = ibv_destroy_cq(shared_rcq);
		if (rc1 || rc2)
			seterr(&T[0], "destroy shared CQs: %s %s", rel_errname(rc1), rel_errname(rc2));
	}
	char why[400] = "";
	long total = 0;
	for (int i = 0; i < nthreads; i++) {
		total += atomic_load(&T[i].rdone);
		if (T[i].err[0] && !why[0])
			snprintf(why, sizeof(why), "thread %d: %s", i, T[i].err);
	}
	if (!why[0] && total != (long)nthreads * iters)
		snprintf(why, sizeof(why), "%ld messages received, want %ld", total, (long)nthreads * iters);
	double dt = rel_now() - t0;
	if (why[0])
		rel_fail(name, t0, "%s", why);
	else
		rel_pass(name, t0, "%d threads x %d messages of %d B, %.0f msg/s", nthreads, iters, MSG,
			 (double)total / dt);
}

// A deliberate data race, for CONC_CANARY=1: guest.sh requires ThreadSanitizer to
// report it with the provider loaded, so a silent sanitizer cannot pass for a clean one.
static int canary_value;
static void *canary_thread(void *arg)
{
	canary_value++;
	return arg;
}

static int canary(void)
{
	struct rel_end e;
	const char *what = "";
	int rc = rel_end_open(&e, 0, 4, 4096, &what); // the provider is in the process
	pthread_t a, b;
	pthread_create(&a, NULL, canary_thread, NULL);
	pthread_create(&b, NULL, canary_thread, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("# canary: device open %s, value %d\n", rc ? rel_errname(rc) : "ok", canary_value);
	if (!rc)
		rel_end_close(&e);
	return rc ? 1 : 0;
}

int main(void)
{
	if (strcmp(rel_env("CONC_CANARY", "0"), "1") == 0)
		return canary();
	rel_prog = rel_env("REL_PROG", "concurrency"); // guest.sh names the sanitizer runs
	nthreads = atoi(rel_env("CONC_THREADS", "8"));
	iters = atoi(rel_env("CONC_ITERS", "1000"));
	if (nthreads < 1 || nthreads > MAXT || iters < 1) {
		fprintf(stderr, "concurrency: CONC_THREADS 1..%d, CONC_ITERS >= 1\n", MAXT);
		return 2;
	}
	double t0 = rel_now();
	const char *what = "";
	int rc = rel_end_open(&A, 0, 4, 4096, &what);
	if (!rc)
		rc = rel_end_open(&B, 1, 4, 4096, &what);
	if (rc) {
		rel_fail("setup", t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	run_case("separate_cqs", 0);
	run_case("shared_cq", 1);
	rel_end_close(&A);
	rel_end_close(&B);
	return rel_exit_code();
}
