/* The C-only halves of the benchmarks: n operations in one call, so no cgo
 * crossing is counted. */
#include <errno.h>

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

/* The inline fast path as a function Go can call (tests). */
int usb4v_rxe_poll_cq_fast_for_test(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	return usb4v_rxe_poll_cq_fast(cq, ne, wc);
}
