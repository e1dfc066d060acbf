/* The C-only half of BenchmarkPostPoll: n post_send+poll_cq pairs in one
 * call, so no cgo crossing is counted. */
#include <errno.h>

#include "engine.h"

int usb4v_bench_post_poll(struct usb4v_qp *qp, struct usb4v_cq *cq, struct usb4v_ibv_send_wr *wr, long n)
{
	struct usb4v_ibv_wc wc;
	for (long i = 0; i < n; i++) {
		struct usb4v_ibv_send_wr *bad;
		int rc = usb4v_post_send(qp, wr, &bad);
		if (rc)
			return rc;
		int got;
		while ((got = usb4v_poll_cq(cq, 1, &wc)) == 0)
			;
		if (got < 0)
			return -got;
		if (wc.status)
			return EIO;
	}
	return 0;
}
