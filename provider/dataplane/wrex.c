//go:build !usb4front

/* ibv_qp_ex work-request builders (engine.h "ibv_qp_ex work-request
 * builders"). Two ways to carry a batch:
 *
 *   - rxe: each builder writes its WQE in place at the next free SQ slot
 *     under sq_lock, which wr_start takes and wr_complete/wr_abort drop (the
 *     same lock post_send takes, so the two never interleave on the ring);
 *     wr_complete publishes the producer index once and rings the doorbell
 *     once. wr_abort leaves the producer index where wr_start found it, so
 *     nothing is posted.
 *   - every other backend (usb4 kernel commands, DV): the batch is staged in
 *     per-QP memory as a list of ibv_send_wr and wr_complete hands it to
 *     usb4v_post_send_whole, which posts all of it or none (one KICK per
 *     batch on DV, after checking every WR encodes and the SQ and DV CQ
 *     have room for all; one POST_SEND command on kernel commands, after
 *     checking every WR).
 *
 * Error rules (the API has no return value before wr_complete): the first
 * error is latched, later builders and setters of the batch do nothing, and
 * wr_complete returns it with nothing posted, as librxe does
 * (rdma-core:providers/rxe/rxe.c wr_complete): a full SQ, more SGEs than
 * max_send_sge and inline data beyond max_inline_data are ENOSPC (librxe's
 * errnos). Where librxe has no rule and would crash or scribble on the ring
 * (an opcode the QP was not created for: a NULL builder in librxe; a setter
 * with no WR built; any call outside wr_start), we latch EINVAL, or for a
 * call outside a batch do nothing, with one log line per QP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rxe_ring.h"

struct usb4v_wrex {
	uint64_t ops;       /* send_ops_flags the QP was created with */
	uint32_t slots;     /* staged backends: WRs a batch can hold */
	uint32_t sge_per;   /* staged: SGE slots per WR (max_send_sge, at least 1) */
	int open;           /* between wr_start and wr_complete/wr_abort */
	int err;            /* first error of the open batch */
	uint32_t n;         /* WRs built in the open batch */
	uint32_t cur;       /* rxe: ring index of the next WQE */
	int logged;         /* one misuse line per QP */
	pthread_t owner;    /* the thread whose batch is open (valid while open) */
	pthread_mutex_t mu; /* staged: one batch at a time */
	struct usb4v_ibv_send_wr *wr;
	struct usb4v_ibv_sge *sge;
	uint8_t *inl; /* staged: max_inline bytes per WR */
};

static int wrex_is_rxe(const struct usb4v_qp *qp)
{
	return qp->send_backend == USB4V_BACKEND_RXE;
}

uint64_t usb4v_wrex_supported_ops(int send_backend, uint32_t qp_type, int has_atomic_write)
{
	if (send_backend == USB4V_BACKEND_RXE) {
		/* What librxe accepts per QP type (rdma-core:providers/rxe/rxe.c
		 * RXE_SUP_*_QP_SEND_OPS_FLAGS), less FLUSH, which we do not build. */
		switch (qp_type) {
		case USB4V_QPT_RC:
			return USB4V_QP_EX_WITH_RDMA_WRITE | USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM | USB4V_QP_EX_WITH_SEND |
			       USB4V_QP_EX_WITH_SEND_WITH_IMM | USB4V_QP_EX_WITH_RDMA_READ |
			       USB4V_QP_EX_WITH_ATOMIC_CMP_AND_SWP | USB4V_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			       USB4V_QP_EX_WITH_LOCAL_INV | USB4V_QP_EX_WITH_BIND_MW | USB4V_QP_EX_WITH_SEND_WITH_INV |
			       (has_atomic_write ? USB4V_QP_EX_WITH_ATOMIC_WRITE : 0);
		case USB4V_QPT_UC:
			return USB4V_QP_EX_WITH_RDMA_WRITE | USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM | USB4V_QP_EX_WITH_SEND |
			       USB4V_QP_EX_WITH_SEND_WITH_IMM | USB4V_QP_EX_WITH_BIND_MW | USB4V_QP_EX_WITH_SEND_WITH_INV;
		case USB4V_QPT_UD:
			return USB4V_QP_EX_WITH_SEND | USB4V_QP_EX_WITH_SEND_WITH_IMM;
		}
		return 0;
	}
	/* usb4: the opcodes the module executes (hellas-main:kernel/ibdev.c
	 * tbv_post_send, pleite-gda:kernel/ibdev.c: SEND, SEND_IMM, RDMA_WRITE,
	 * WRITE_IMM, READ; no atomics, no MW). */
	switch (qp_type) {
	case USB4V_QPT_RC:
		return USB4V_QP_EX_WITH_RDMA_WRITE | USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM | USB4V_QP_EX_WITH_SEND |
		       USB4V_QP_EX_WITH_SEND_WITH_IMM | USB4V_QP_EX_WITH_RDMA_READ;
	case USB4V_QPT_UC:
		return USB4V_QP_EX_WITH_RDMA_WRITE | USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM | USB4V_QP_EX_WITH_SEND |
		       USB4V_QP_EX_WITH_SEND_WITH_IMM;
	case USB4V_QPT_UD:
		return USB4V_QP_EX_WITH_SEND | USB4V_QP_EX_WITH_SEND_WITH_IMM;
	}
	return 0;
}

int usb4v_qp_enable_wrex(struct usb4v_qp *qp, uint64_t ops, uint32_t max_send_wr)
{
	struct usb4v_wrex *w = calloc(1, sizeof(*w));
	if (!w)
		return ENOMEM;
	w->ops = ops;
	if (pthread_mutex_init(&w->mu, NULL)) {
		free(w);
		return ENOMEM;
	}
	if (!wrex_is_rxe(qp)) {
		w->slots = max_send_wr ? max_send_wr : 1;
		w->sge_per = qp->max_send_sge ? qp->max_send_sge : 1;
		w->wr = calloc(w->slots, sizeof(*w->wr));
		w->sge = calloc((size_t)w->slots * w->sge_per, sizeof(*w->sge));
		w->inl = calloc(w->slots, qp->max_inline ? qp->max_inline : 1);
		if (!w->wr || !w->sge || !w->inl) {
			usb4v_wrex_free(w);
			return ENOMEM;
		}
	}
	qp->wrex = w;
	return 0;
}

void usb4v_wrex_free(struct usb4v_wrex *w)
{
	if (!w)
		return;
	pthread_mutex_destroy(&w->mu);
	free(w->wr);
	free(w->sge);
	free(w->inl);
	free(w);
}

static void wrex_log(struct usb4v_qp *qp, const char *what)
{
	struct usb4v_wrex *w = qp->wrex;
	if (__atomic_exchange_n(&w->logged, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "libusb4_rdma: qp 0x%x: %s (logged once per QP)\n", qp->qp_num, what);
}

/* A call that needs an open batch; on a closed one it does nothing. */
static struct usb4v_wrex *wrex_open(struct usb4v_qp *qp, const char *call)
{
	struct usb4v_wrex *w = qp->wrex;
	if (!w)
		return NULL;
	if (!w->open) {
		char line[128];
		snprintf(line, sizeof(line), "%s outside ibv_wr_start: ignored", call);
		wrex_log(qp, line);
		return NULL;
	}
	return w->err ? NULL : w;
}

static uint64_t op_flag(uint32_t opcode)
{
	switch (opcode) {
	case USB4V_WR_RDMA_WRITE: return USB4V_QP_EX_WITH_RDMA_WRITE;
	case USB4V_WR_RDMA_WRITE_WITH_IMM: return USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	case USB4V_WR_SEND: return USB4V_QP_EX_WITH_SEND;
	case USB4V_WR_SEND_WITH_IMM: return USB4V_QP_EX_WITH_SEND_WITH_IMM;
	case USB4V_WR_RDMA_READ: return USB4V_QP_EX_WITH_RDMA_READ;
	case USB4V_WR_ATOMIC_CMP_AND_SWP: return USB4V_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
	case USB4V_WR_ATOMIC_FETCH_AND_ADD: return USB4V_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	case USB4V_WR_LOCAL_INV: return USB4V_QP_EX_WITH_LOCAL_INV;
	case USB4V_WR_BIND_MW: return USB4V_QP_EX_WITH_BIND_MW;
	case USB4V_WR_SEND_WITH_INV: return USB4V_QP_EX_WITH_SEND_WITH_INV;
	case USB4V_WR_ATOMIC_WRITE: return USB4V_QP_EX_WITH_ATOMIC_WRITE;
	}
	return 0;
}

void usb4v_wr_start(struct usb4v_qp *qp)
{
	struct usb4v_wrex *w = qp->wrex;
	if (!w)
		return;
	/* A second wr_start by the thread whose batch is open would wait for
	 * its own lock forever (librxe spins there): the open batch fails
	 * instead. Only that thread writes owner while open is set, so the
	 * racy read can only match for it. */
	if (__atomic_load_n(&w->open, __ATOMIC_ACQUIRE) && pthread_equal(w->owner, pthread_self())) {
		wrex_log(qp, "ibv_wr_start inside an open batch: EINVAL at ibv_wr_complete");
		w->err = EINVAL;
		return;
	}
	if (wrex_is_rxe(qp)) {
		pthread_spin_lock(&qp->sq_lock);
		w->cur = __atomic_load_n(&qp->sq.buf->producer_index, __ATOMIC_RELAXED) & qp->sq.mask;
	} else {
		pthread_mutex_lock(&w->mu);
	}
	w->err = 0;
	w->n = 0;
	w->owner = pthread_self();
	__atomic_store_n(&w->open, 1, __ATOMIC_RELEASE);
}

static void wrex_close(struct usb4v_qp *qp, struct usb4v_wrex *w)
{
	__atomic_store_n(&w->open, 0, __ATOMIC_RELEASE);
	if (wrex_is_rxe(qp))
		pthread_spin_unlock(&qp->sq_lock);
	else
		pthread_mutex_unlock(&w->mu);
}

int usb4v_wr_complete(struct usb4v_qp *qp)
{
	struct usb4v_wrex *w = qp->wrex;
	if (!w)
		return EOPNOTSUPP;
	if (!w->open) {
		wrex_log(qp, "ibv_wr_complete outside ibv_wr_start: EINVAL");
		return EINVAL;
	}
	int rc = w->err;
	if (!rc && __atomic_load_n(&qp->gone, __ATOMIC_RELAXED))
		rc = EIO;
	if (rc || w->n == 0) {
		wrex_close(qp, w);
		return rc;
	}
	if (wrex_is_rxe(qp)) {
		/* The WQEs are in place; one release store publishes them all. */
		__atomic_store_n(&qp->sq.buf->producer_index, w->cur, __ATOMIC_RELEASE);
		wrex_close(qp, w);
		return usb4v_rxe_doorbell(qp);
	}
	for (uint32_t i = 0; i + 1 < w->n; i++)
		w->wr[i].next = &w->wr[i + 1];
	w->wr[w->n - 1].next = NULL;
	struct usb4v_ibv_send_wr *bad = NULL;
	rc = usb4v_post_send_whole(qp, w->wr, &bad);
	wrex_close(qp, w);
	return rc;
}

void usb4v_wr_abort(struct usb4v_qp *qp)
{
	struct usb4v_wrex *w = qp->wrex;
	if (!w)
		return;
	if (!w->open) {
		wrex_log(qp, "ibv_wr_abort outside ibv_wr_start: ignored");
		return;
	}
	wrex_close(qp, w); /* rxe: the producer index never moved */
}

/* ---- rxe: WQEs in place ---- */

static struct usb4v_rxe_send_wqe *rxe_wqe_at(const struct usb4v_qp *qp, uint32_t index)
{
	return (struct usb4v_rxe_send_wqe *)(qp->sq.data + ((size_t)(index & qp->sq.mask) << qp->sq.log2_elem));
}

static void rxe_build(struct usb4v_qp *qp, struct usb4v_wrex *w, const struct usb4v_ibv_send_wr *t)
{
	uint32_t cons = __atomic_load_n(&qp->sq.buf->consumer_index, __ATOMIC_ACQUIRE);
	if (cons == ((w->cur + 1) & qp->sq.mask)) {
		w->err = ENOSPC; /* librxe's check_qp_queue_full */
		return;
	}
	struct usb4v_rxe_send_wqe *wqe = rxe_wqe_at(qp, w->cur);
	usb4v_rxe_wqe_header(wqe, t);
	if (t->opcode == USB4V_WR_ATOMIC_WRITE) {
		/* The 8 bytes travel in the WQE (rxe_dma_info's atomic_wr),
		 * where the SGEs would otherwise be. */
		memcpy((uint8_t *)wqe + sizeof(*wqe), &t->wr.atomic.swap, 8);
		wqe->dma.length = 8;
		wqe->dma.resid = 8;
	}
	w->cur = (w->cur + 1) & qp->sq.mask;
	w->n++;
}

void usb4v_wr_build(struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *t)
{
	struct usb4v_wrex *w = wrex_open(qp, "an ibv_wr_* builder");
	if (!w)
		return;
	if (!(w->ops & op_flag(t->opcode))) {
		char line[128];
		snprintf(line, sizeof(line), "ibv_wr_* opcode %u not in the QP's send_ops_flags: EINVAL at ibv_wr_complete",
			 t->opcode);
		wrex_log(qp, line);
		w->err = EINVAL;
		return;
	}
	if (t->opcode == USB4V_WR_BIND_MW && !t->ext.bind_mw.mw) {
		wrex_log(qp, "ibv_wr_bind_mw without a window: EINVAL at ibv_wr_complete");
		w->err = EINVAL;
		return;
	}
	if (wrex_is_rxe(qp)) {
		rxe_build(qp, w, t);
		return;
	}
	if (w->n == w->slots) {
		w->err = ENOSPC;
		return;
	}
	struct usb4v_ibv_send_wr *wr = &w->wr[w->n++];
	*wr = *t;
	wr->next = NULL;
	wr->sg_list = &w->sge[(size_t)(wr - w->wr) * w->sge_per];
	wr->num_sge = 0;
}

/* The WR the setters complete: the last one built, or NULL (EINVAL latched). */
static struct usb4v_wrex *wrex_last(struct usb4v_qp *qp, const char *call)
{
	struct usb4v_wrex *w = wrex_open(qp, call);
	if (w && w->n == 0) {
		char line[128];
		snprintf(line, sizeof(line), "%s before any ibv_wr_* builder: EINVAL at ibv_wr_complete", call);
		wrex_log(qp, line);
		w->err = EINVAL;
		return NULL;
	}
	return w;
}

void usb4v_wr_set_sge_list(struct usb4v_qp *qp, size_t n, const struct usb4v_ibv_sge *sge)
{
	struct usb4v_wrex *w = wrex_last(qp, "ibv_wr_set_sge");
	if (!w)
		return;
	if (n > qp->max_send_sge) {
		w->err = ENOSPC;
		return;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += sge[i].length;
	if (wrex_is_rxe(qp)) {
		struct usb4v_rxe_send_wqe *wqe = rxe_wqe_at(qp, w->cur - 1);
		struct usb4v_rxe_sge *out = (struct usb4v_rxe_sge *)((uint8_t *)wqe + sizeof(*wqe));
		for (size_t i = 0; i < n; i++) {
			out[i].addr = sge[i].addr;
			out[i].length = sge[i].length;
			out[i].lkey = sge[i].lkey;
		}
		wqe->dma.num_sge = (uint32_t)n;
		wqe->dma.length = (uint32_t)total;
		wqe->dma.resid = (uint32_t)total;
		return;
	}
	struct usb4v_ibv_send_wr *wr = &w->wr[w->n - 1];
	memcpy(wr->sg_list, sge, n * sizeof(*sge));
	wr->num_sge = (int)n;
	wr->send_flags &= ~(uint32_t)USB4V_SEND_INLINE;
}

void usb4v_wr_set_inline_list(struct usb4v_qp *qp, size_t n, const struct usb4v_ibv_data_buf *buf)
{
	struct usb4v_wrex *w = wrex_last(qp, "ibv_wr_set_inline_data");
	if (!w)
		return;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += buf[i].length;
	if (total > qp->max_inline) {
		w->err = ENOSPC;
		return;
	}
	if (wrex_is_rxe(qp)) {
		struct usb4v_rxe_send_wqe *wqe = rxe_wqe_at(qp, w->cur - 1);
		if (sizeof(*wqe) + total > ((size_t)1 << qp->sq.log2_elem)) {
			w->err = ENOSPC;
			return;
		}
		uint8_t *p = (uint8_t *)wqe + sizeof(*wqe);
		for (size_t i = 0; i < n; i++) {
			memcpy(p, buf[i].addr, buf[i].length);
			p += buf[i].length;
		}
		/* The kernel reads inline data by the flag (rxe_req.c). */
		wqe->wr.send_flags |= USB4V_SEND_INLINE;
		wqe->dma.num_sge = 0;
		wqe->dma.length = (uint32_t)total;
		wqe->dma.resid = (uint32_t)total;
		return;
	}
	/* Staged: copied now (the caller may reuse its buffers once the setter
	 * returns), posted as one inline SGE over our copy. */
	struct usb4v_ibv_send_wr *wr = &w->wr[w->n - 1];
	uint8_t *p = w->inl + (size_t)(wr - w->wr) * (qp->max_inline ? qp->max_inline : 1);
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(p + off, buf[i].addr, buf[i].length);
		off += buf[i].length;
	}
	wr->sg_list[0].addr = (uint64_t)(uintptr_t)p;
	wr->sg_list[0].length = (uint32_t)total;
	wr->sg_list[0].lkey = 0;
	wr->num_sge = total ? 1 : 0;
	wr->send_flags |= USB4V_SEND_INLINE;
}

void usb4v_wr_set_ud_addr(struct usb4v_qp *qp, struct usb4v_ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct usb4v_wrex *w = wrex_last(qp, "ibv_wr_set_ud_addr");
	if (!w)
		return;
	if (qp->qp_type != USB4V_QPT_UD || !ah) {
		wrex_log(qp, "ibv_wr_set_ud_addr on a QP that is not UD, or without an AH: EINVAL at ibv_wr_complete");
		w->err = EINVAL;
		return;
	}
	const struct usb4v_ah *a = (const struct usb4v_ah *)ah;
	if (wrex_is_rxe(qp)) {
		struct usb4v_rxe_send_wqe *wqe = rxe_wqe_at(qp, w->cur - 1);
		wqe->wr.wr.ud.remote_qpn = remote_qpn;
		wqe->wr.wr.ud.remote_qkey = remote_qkey;
		wqe->wr.wr.ud.ah_num = a->ah_num;
		if (!a->ah_num) /* kernels before 5.14 read the AV from the WQE */
			wqe->wr.wr.ud.av = a->av;
		return;
	}
	struct usb4v_ibv_send_wr *wr = &w->wr[w->n - 1];
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = remote_qpn;
	wr->wr.ud.remote_qkey = remote_qkey;
}

void usb4v_wr_fail(struct usb4v_qp *qp, int err, const char *why)
{
	struct usb4v_wrex *w = wrex_open(qp, why);
	if (!w)
		return;
	wrex_log(qp, why);
	w->err = err;
}
