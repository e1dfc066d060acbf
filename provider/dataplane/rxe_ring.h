/*
 * Index helpers for the rxe queues shared with the kernel
 * (linux:include/uapi/rdma/rdma_user_rxe.h struct rxe_queue_buf).
 *
 * Ownership: user space is the producer of SQ, RQ and SRQ and the consumer of
 * CQ; the kernel owns the other index of each queue. Indices always lie in
 * [0, index_mask]; only new values are masked. Between user threads the
 * queue's spinlock orders everything (qp->sq_lock for SQ, qp->rq_lock or
 * srq->lock for receive queues, cq->lock for CQ); the atomics below only
 * order us against the kernel: load the peer's index with acquire (so the
 * entries it published are visible), load our own relaxed (only we write
 * it), and publish ours with release (so the entry is written before the
 * kernel can see the index move).
 */
#ifndef USB4V_RXE_RING_H
#define USB4V_RXE_RING_H

#include <errno.h>

#include "engine.h"

/* Producer side; caller holds the queue's producer lock. */
static inline int rxe_full(const struct usb4v_rxe_ring *r)
{
	uint32_t prod = __atomic_load_n(&r->buf->producer_index, __ATOMIC_RELAXED);
	uint32_t cons = __atomic_load_n(&r->buf->consumer_index, __ATOMIC_ACQUIRE);
	return cons == ((prod + 1) & r->mask);
}

static inline void *rxe_producer_addr(const struct usb4v_rxe_ring *r)
{
	uint32_t prod = __atomic_load_n(&r->buf->producer_index, __ATOMIC_RELAXED) & r->mask;
	return r->data + ((size_t)prod << r->log2_elem);
}

static inline void rxe_advance_producer(struct usb4v_rxe_ring *r)
{
	uint32_t prod = __atomic_load_n(&r->buf->producer_index, __ATOMIC_RELAXED);
	__atomic_store_n(&r->buf->producer_index, (prod + 1) & r->mask, __ATOMIC_RELEASE);
}

/*
 * Consumer side (CQ): moves up to ne completions from the CQ ring to wc;
 * caller holds cq->lock. The queue header is loaded once and our consumer
 * index kept in a register: each atomic is a compiler barrier, so going
 * through cq->rxe.buf per access would reload the pointer every time, and
 * the empty poll (the common case of a busy-polling caller) is one acquire
 * load of the kernel's producer index against our own.
 */
static inline int rxe_poll_locked(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	struct usb4v_rxe_queue_buf *q = cq->rxe.buf;
	uint32_t cons = __atomic_load_n(&q->consumer_index, __ATOMIC_RELAXED);
	int n = 0;
	while (n < ne && __atomic_load_n(&q->producer_index, __ATOMIC_ACQUIRE) != cons) {
		const void *cqe = cq->rxe.data + ((size_t)(cons & cq->rxe.mask) << cq->rxe.log2_elem);
		usb4v_uwc_to_ibv_inline(cqe, &wc[n++]);
		cons = (cons + 1) & cq->rxe.mask;
		__atomic_store_n(&q->consumer_index, cons, __ATOMIC_RELEASE);
	}
	return n;
}

/*
 * poll_cq for contexts whose CQs are all rxe rings, for the ops table to
 * install directly (cshim/objects.c): lock, compare the indices, unlock, as
 * librxe's poll_cq does, without the generic dispatch of usb4v_poll_cq.
 * The caller has checked cq != NULL, ne > 0 and wc != NULL. Anything
 * unusual (not an rxe ring, a latched error, DV QPs) is in cq->slow, read
 * under the lock, and goes to usb4v_poll_cq, which keeps every rule.
 */
static inline int usb4v_rxe_poll_cq_fast(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	pthread_spin_lock(&cq->lock);
	if (__builtin_expect(__atomic_load_n(&cq->slow, __ATOMIC_RELAXED) != 0, 0)) {
		pthread_spin_unlock(&cq->lock);
		return usb4v_poll_cq(cq, ne, wc);
	}
	int n = rxe_poll_locked(cq, ne, wc);
	pthread_spin_unlock(&cq->lock);
	return n;
}

/*
 * ibv_start_poll for CQs on rxe rings, for cshim to inline (cqex.c): the
 * empty case is lock, one flags word, one acquire load, unlock, as the
 * poll_cq fast path above. Everything else goes to usb4v_cq_start_poll.
 */
static inline int usb4v_rxe_start_poll_fast(struct usb4v_cq *cq, struct usb4v_cq_cursor *c)
{
	pthread_spin_lock(&cq->lock);
	if (__builtin_expect(__atomic_load_n(&cq->slow, __ATOMIC_RELAXED) != 0, 0)) {
		pthread_spin_unlock(&cq->lock);
		return usb4v_cq_start_poll(cq, c);
	}
	struct usb4v_rxe_queue_buf *q = cq->rxe.buf;
	uint32_t cons = __atomic_load_n(&q->consumer_index, __ATOMIC_RELAXED);
	if (__atomic_load_n(&q->producer_index, __ATOMIC_ACQUIRE) == cons) {
		pthread_spin_unlock(&cq->lock);
		return ENOENT;
	}
	c->cons = cons;
	c->live = 1;
	const void *cqe = cq->rxe.data + ((size_t)(cons & cq->rxe.mask) << cq->rxe.log2_elem);
	usb4v_uwc_to_ibv_inline(cqe, &c->cur);
	__atomic_store_n(&c->mode, USB4V_CURSOR_RING, __ATOMIC_RELEASE);
	return 0;
}

#endif
