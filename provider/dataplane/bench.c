//go:build !usb4front

/* The C-only halves of the benchmarks: n operations in one call, so no cgo
 * crossing is counted. */
#include <errno.h>
#include <sched.h>

#include "rxe_ring.h"

/* poll_cq as the ops table reaches it: the rxe fast path for rxe rings
 * (cshim installs it on rxe contexts), the generic dispatch otherwise. */
static int bench_poll(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	if (cq->backend == USB4V_BACKEND_RXE)
		return usb4v_rxe_poll_cq_fast(cq, ne, wc);
	return usb4v_poll_cq(cq, ne, wc);
}

int usb4v_bench_post_poll(struct usb4v_qp *qp, struct usb4v_cq *cq, struct usb4v_ibv_send_wr *wr, long n)
{
	struct usb4v_ibv_wc wc;
	for (long i = 0; i < n; i++) {
		struct usb4v_ibv_send_wr *bad;
		int rc = usb4v_post_send(qp, wr, &bad);
		if (rc)
			return rc;
		int got;
		while ((got = bench_poll(cq, 1, &wc)) == 0)
			;
		if (got < 0)
			return -got;
		if (wc.status)
			return EIO;
	}
	return 0;
}

/* n polls of an empty CQ, through the fast path or the generic dispatch.
 * EIO if any poll found something (the CQ was not empty). */
int usb4v_bench_poll_empty(struct usb4v_cq *cq, long n, int fast)
{
	struct usb4v_ibv_wc wc;
	for (long i = 0; i < n; i++) {
		int got = fast ? usb4v_rxe_poll_cq_fast(cq, 1, &wc) : usb4v_poll_cq(cq, 1, &wc);
		if (got < 0)
			return -got;
		if (got > 0)
			return EIO;
	}
	return 0;
}

/* n ibv_start_poll misses on an empty CQ (the extended poll API's empty
 * poll), through the inline rxe entry cshim installs on rxe CQs, the
 * generic one otherwise. EIO if a start_poll found something. */
int usb4v_bench_start_poll_empty(struct usb4v_cq *cq, struct usb4v_cq_cursor *c, long n)
{
	for (long i = 0; i < n; i++) {
		int rc = cq->backend == USB4V_BACKEND_RXE ? usb4v_rxe_start_poll_fast(cq, c) : usb4v_cq_start_poll(cq, c);
		if (rc == 0) {
			usb4v_cq_end_poll(cq, c);
			return EIO;
		}
		if (rc != ENOENT)
			return rc;
	}
	return 0;
}

/* The inline fast path as a function Go can call (tests). */
int usb4v_rxe_poll_cq_fast_for_test(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	return usb4v_rxe_poll_cq_fast(cq, ne, wc);
}

/* Concurrent posters on one QP, as threads of a libibverbs application
 * reach ibv_post_send (no Go lock in between): each of threads posts per
 * signaled copies of *tmpl (wr_id = thread << 32 | i), polling the CQ when
 * the queue is full; then the rest is polled. Returns 0, the first
 * post's errno, or EIO for a failed completion or ETIMEDOUT when
 * completions stop arriving (a hang guard, counted in empty polls). */
struct stress_arg {
	struct usb4v_qp *qp;
	struct usb4v_cq *cq;
	struct usb4v_ibv_send_wr wr;
	struct usb4v_ibv_sge sge;
	long per, thread;
	long *done;
	int *failed; /* set by the first thread that fails: the others stop */
	int rc;
};

static int stress_poll(struct usb4v_cq *cq, long *done)
{
	struct usb4v_ibv_wc wc[16];
	int got = usb4v_poll_cq(cq, 16, wc);
	if (got < 0)
		return -got;
	for (int i = 0; i < got; i++)
		if (wc[i].status)
			return EIO;
	__atomic_add_fetch(done, got, __ATOMIC_RELAXED);
	return 0;
}

static void *stress_thread(void *p)
{
	struct stress_arg *a = p;
	a->wr.sg_list = a->wr.num_sge ? &a->sge : NULL;
	for (long i = 0, stuck = 0; i < a->per && !__atomic_load_n(a->failed, __ATOMIC_RELAXED);) {
		struct usb4v_ibv_send_wr *bad;
		a->wr.wr_id = (uint64_t)a->thread << 32 | (uint64_t)i;
		int rc = usb4v_post_send(a->qp, &a->wr, &bad);
		if (rc == 0) {
			i++;
			stuck = 0;
		} else if (rc == ENOMEM) {
			/* Full: poll. A queue the kernel stopped draining stays
			 * full; give up rather than spin forever. */
			if ((a->rc = stress_poll(a->cq, a->done)) != 0)
				break;
			if (++stuck > 1000000) {
				a->rc = ETIMEDOUT;
				break;
			}
			sched_yield();
		} else {
			a->rc = rc;
			break;
		}
	}
	if (a->rc)
		__atomic_store_n(a->failed, 1, __ATOMIC_RELAXED);
	return NULL;
}

int usb4v_stress_post_threads(struct usb4v_qp *qp, struct usb4v_cq *cq, const struct usb4v_ibv_send_wr *tmpl,
			      int threads, long per)
{
	enum { MAX_THREADS = 32 };
	struct stress_arg args[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	long done = 0;
	int rc = 0, started = 0, failed = 0;
	if (threads < 1 || threads > MAX_THREADS)
		return EINVAL;
	for (int t = 0; t < threads; t++) {
		args[t] = (struct stress_arg){ .qp = qp, .cq = cq, .wr = *tmpl, .per = per, .thread = t, .done = &done,
					     .failed = &failed };
		args[t].wr.next = NULL;
		args[t].wr.send_flags |= USB4V_SEND_SIGNALED;
		if (tmpl->num_sge)
			args[t].sge = tmpl->sg_list[0];
		if (pthread_create(&tid[t], NULL, stress_thread, &args[t]) != 0) {
			rc = EAGAIN;
			break;
		}
		started++;
	}
	for (int t = 0; t < started; t++) {
		pthread_join(tid[t], NULL);
		if (!rc)
			rc = args[t].rc;
	}
	for (long idle = 0; !rc && __atomic_load_n(&done, __ATOMIC_RELAXED) < threads * per && idle < 10000000;) {
		long before = done;
		rc = stress_poll(cq, &done);
		idle = done == before ? idle + 1 : 0;
	}
	if (!rc && done != threads * per)
		rc = ETIMEDOUT;
	return rc;
}
