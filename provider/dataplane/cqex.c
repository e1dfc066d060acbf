//go:build !usb4front

/*
 * The extended poll API over every backend (engine.h, "The extended poll
 * API"). The contract is rdma-core's ibv_start_poll(3): start_poll returns
 * ENOENT on an empty CQ and holds nothing then; after a 0 the caller reads
 * the completion, calls next_poll any number of times and finally
 * end_poll. librxe (rdma-core:providers/rxe/rxe.c) holds the CQ spinlock
 * from start to end and reads the ring in place; the rxe ring cursor here
 * does the same, so plain poll_cq callers and other ex pollers wait for the
 * holder exactly as they do under librxe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "rxe_ring.h"

void usb4v_cq_cursor_init(struct usb4v_cq_cursor *c)
{
	memset(c, 0, sizeof(*c));
	c->mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER; /* cannot fail */
}

void usb4v_cq_cursor_destroy(struct usb4v_cq_cursor *c)
{
	pthread_mutex_destroy(&c->mu);
}

static void hold(struct usb4v_cq_cursor *c, int mode)
{
	__atomic_store_n(&c->mode, mode, __ATOMIC_RELEASE);
}

static void unhold(struct usb4v_cq_cursor *c)
{
	__atomic_store_n(&c->mode, USB4V_CURSOR_IDLE, __ATOMIC_RELAXED);
}

/* ---- rxe ring, in place under cq->lock ---- */

static int ring_read(struct usb4v_cq *cq, struct usb4v_cq_cursor *c, uint32_t cons)
{
	struct usb4v_rxe_queue_buf *q = cq->rxe.buf;
	if (__atomic_load_n(&q->producer_index, __ATOMIC_ACQUIRE) == cons)
		return ENOENT;
	c->cons = cons;
	c->live = 1;
	const void *cqe = cq->rxe.data + ((size_t)(cons & cq->rxe.mask) << cq->rxe.log2_elem);
	usb4v_uwc_to_ibv_inline(cqe, &c->cur);
	return 0;
}

/* Hands the current entry, if any, back to the kernel; returns the index
 * of the next one. */
static uint32_t ring_consume(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	if (!c->live)
		return c->cons;
	c->live = 0;
	c->cons = (c->cons + 1) & cq->rxe.mask;
	__atomic_store_n(&cq->rxe.buf->consumer_index, c->cons, __ATOMIC_RELEASE);
	return c->cons;
}

/* ---- kernel commands, batched under cq->poll_mu ---- */

static int kcmd_fill(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	if (!cq->stash_n) {
		if (!cq->stash) {
			cq->stash = calloc(USB4V_CQ_EX_BATCH, sizeof(*cq->stash));
			if (!cq->stash)
				return ENOMEM;
		}
		int n = usb4v_poll_cq_kcmd_held(cq, USB4V_CQ_EX_BATCH, cq->stash);
		if (n < 0)
			return -n;
		if (n == 0)
			return ENOENT;
		cq->stash_pos = 0;
		cq->stash_n = (uint32_t)n;
	}
	c->cur = cq->stash[cq->stash_pos++];
	if (!--cq->stash_n)
		cq->stash_pos = 0;
	return 0;
}

/* ---- everything else, one completion at a time under c->mu ---- */

static int generic_fill(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	int n = usb4v_poll_cq(cq, 1, &c->cur);
	if (n < 0)
		return -n;
	return n ? 0 : ENOENT;
}

int usb4v_cq_start_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	if (!cq || !c)
		return EINVAL;
	int rc;
	switch (cq->backend) {
	case USB4V_BACKEND_RXE:
		pthread_spin_lock(&cq->lock);
		if (__builtin_expect(__atomic_load_n(&cq->slow, __ATOMIC_RELAXED) == 0, 1)) {
			struct usb4v_rxe_queue_buf *q = cq->rxe.buf;
			rc = ring_read(cq, c, __atomic_load_n(&q->consumer_index, __ATOMIC_RELAXED));
			if (rc) {
				pthread_spin_unlock(&cq->lock);
				return rc;
			}
			hold(c, USB4V_CURSOR_RING);
			return 0;
		}
		pthread_spin_unlock(&cq->lock);
		break;
	case USB4V_BACKEND_KCMD:
		pthread_mutex_lock(&cq->poll_mu);
		rc = kcmd_fill(cq, c);
		if (rc) {
			pthread_mutex_unlock(&cq->poll_mu);
			return rc;
		}
		hold(c, USB4V_CURSOR_KCMD);
		return 0;
	case USB4V_BACKEND_NONE:
		return EINVAL;
	}
	pthread_mutex_lock(&c->mu);
	rc = generic_fill(cq, c);
	if (rc) {
		pthread_mutex_unlock(&c->mu);
		return rc;
	}
	hold(c, USB4V_CURSOR_GENERIC);
	return 0;
}

/* A hold belongs to the cursor, not to the thread that took it: as librxe
 * (rdma-core:providers/rxe/rxe.c cq_next_poll, cq_end_poll) next_poll and
 * end_poll act for whichever thread calls them, so a CQ handed from the
 * polling thread to another is released by the other's end_poll. glibc's
 * spinlocks and default mutexes keep no owner, so the release from another
 * thread is what librxe's spinlock does too. */
static int held(const struct usb4v_cq_cursor *c, int *mode)
{
	*mode = __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE);
	return *mode != USB4V_CURSOR_IDLE;
}

static void release(struct usb4v_cq *cq, struct usb4v_cq_cursor *c, int mode)
{
	unhold(c);
	if (mode == USB4V_CURSOR_RING)
		pthread_spin_unlock(&cq->lock);
	else if (mode == USB4V_CURSOR_KCMD)
		pthread_mutex_unlock(&cq->poll_mu);
	else
		pthread_mutex_unlock(&c->mu);
}

int usb4v_cq_next_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	int mode, rc;
	if (!cq || !c || !held(c, &mode))
		return EINVAL; /* no start_poll before: nothing to advance */
	switch (mode) {
	case USB4V_CURSOR_RING:
		return ring_read(cq, c, ring_consume(cq, c));
	case USB4V_CURSOR_KCMD:
		rc = kcmd_fill(cq, c);
		break;
	default:
		rc = generic_fill(cq, c);
		break;
	}
	return rc;
}

void usb4v_cq_end_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	int mode;
	if (!cq || !c)
		return;
	if (!held(c, &mode))
		return; /* end_poll without a start_poll: nothing held, nothing to do */
	if (mode == USB4V_CURSOR_RING)
		ring_consume(cq, c);
	release(cq, c, mode);
}

/* ---- resize_cq ---- */

void usb4v_cq_resize_begin(struct usb4v_cq *cq)
{
	if (cq->backend == USB4V_BACKEND_RXE)
		pthread_spin_lock(&cq->lock);
}

int usb4v_cq_resize_end(struct usb4v_cq *cq, int remap, uint64_t offset, size_t size)
{
	if (cq->backend != USB4V_BACKEND_RXE)
		return 0;
	int rc = 0;
	if (remap && __atomic_load_n(&cq->maps_released, __ATOMIC_RELAXED)) {
		/* Removed meanwhile: no new mapping of the command fd. */
		__atomic_store_n(&cq->error, -EIO, __ATOMIC_RELAXED);
		__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR, __ATOMIC_RELAXED);
		remap = 0;
		rc = -EIO;
	}
	if (remap) {
		struct usb4v_rxe_ring fresh = {0};
		rc = usb4v_rxe_ring_setup(cq->sys, cq->cmd_fd, &fresh, NULL, offset, size,
					  sizeof(struct usb4v_ib_uverbs_wc));
		if (rc == 0) {
			usb4v_rxe_ring_release(cq->sys, &cq->rxe);
			cq->rxe = fresh;
		} else {
			/* The kernel polls nothing from the old ring any more:
			 * fail every poll rather than read a stale one. */
			__atomic_store_n(&cq->error, rc, __ATOMIC_RELAXED);
			__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR, __ATOMIC_RELAXED);
		}
	}
	pthread_spin_unlock(&cq->lock);
	return rc;
}
