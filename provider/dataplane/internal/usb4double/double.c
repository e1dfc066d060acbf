/*
 * The usb4 kernel side as a test double, at the engine's syscall seam. It
 * decodes commands the way the uverbs core does
 * (linux:drivers/infiniband/core/uverbs_main.c ib_uverbs_write,
 * uverbs_cmd.c ib_uverbs_post_send / ib_uverbs_unmarshall_recv /
 * ib_uverbs_poll_cq / ib_uverbs_req_notify_cq) and acts as thunderbolt_ibverbs
 * does per reference usb4-kernel-and-consumers.md §1.2-1.3 (SEND, SEND_IMM,
 * WRITE, WRITE_IMM, READ; no inline; at most one receive SGE; no SRQ), the
 * mapped CQ ring of §1.8 (producer with ovf_seq) and the DV queues of §1.9.
 * The DV side plays one of two module trees, as their sources
 * (/work/shared/usb4-module) define it: pleite-gda (caps V2, KICK drains the
 * request's tail and marks the queue in error on a tail it cannot hold) or
 * hellas-gda-v2 (caps 0, KICK handles NOP only). Both refuse an ordinary
 * post_send on a QP with a DV queue with EBUSY.
 * QPs are connected in pairs; data moves by memcpy within this process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "double.h"

enum { ACC_LOCAL_WRITE = 1, ACC_REMOTE_WRITE = 2, ACC_REMOTE_READ = 4, ACC_REMOTE_ATOMIC = 8 };

static struct dbl_mr *mr_by_lkey(struct dbl *d, uint32_t lkey)
{
	for (int i = 0; i < DBL_MAX_MR; i++)
		if (d->mr[i].used && d->mr[i].lkey == lkey)
			return &d->mr[i];
	return NULL;
}

static struct dbl_mr *mr_by_rkey(struct dbl *d, uint32_t rkey)
{
	for (int i = 0; i < DBL_MAX_MR; i++)
		if (d->mr[i].used && d->mr[i].rkey == rkey)
			return &d->mr[i];
	return NULL;
}

static int in_mr(const struct dbl_mr *m, uint64_t addr, uint64_t len)
{
	return m && addr >= m->addr && len <= m->len && addr - m->addr <= m->len - len;
}

static struct dbl_cq *cq_get(struct dbl *d, uint32_t h)
{
	return h < DBL_MAX_CQ && d->cq[h].used ? &d->cq[h] : NULL;
}

static struct dbl_qp *qp_get(struct dbl *d, uint32_t h)
{
	return h < DBL_MAX_QP && d->qp[h].used ? &d->qp[h] : NULL;
}

/* ---- completion production ---- */

static void cq_push(struct dbl *d, uint32_t cqh, const struct usb4v_ib_uverbs_wc *wc, int solicited)
{
	struct dbl_cq *cq = cq_get(d, cqh);
	if (!cq)
		return;
	if (cq->shm_mode) {
		struct usb4v_tbv_cq_shm *h = (void *)cq->shm;
		/* Never trust the shared consumed: accept it only if it lies
		 * between our private consumed and produced. */
		uint32_t c = __atomic_load_n(&h->consumed, __ATOMIC_ACQUIRE);
		if (c - cq->shm_consumed <= cq->shm_produced - cq->shm_consumed)
			cq->shm_consumed = c;
		if (cq->shm_produced - cq->shm_consumed >= cq->cqe) {
			__atomic_add_fetch(&h->ovf_seq, 1, __ATOMIC_RELEASE);
			cq->overflows++;
			return;
		}
		struct usb4v_ib_uverbs_wc *ring = (void *)(cq->shm + 4096);
		ring[cq->shm_produced % cq->cqe] = *wc;
		cq->shm_produced++;
		__atomic_store_n(&h->produced, cq->shm_produced, __ATOMIC_RELEASE);
	} else {
		if (cq->pt - cq->ph >= cq->cqe) {
			cq->overflows++;
			return;
		}
		cq->priv[cq->pt % cq->cqe] = *wc;
		cq->pt++;
	}
	if (cq->armed && (!cq->solicited_only || solicited)) {
		cq->armed = 0;
		cq->notifies++;
	}
}

/* ---- the wire: one operation between connected QPs ---- */

struct dbl_op {
	uint32_t opcode; /* IB_UVERBS_WR_* */
	uint32_t flags;
	uint64_t wr_id;
	const struct usb4v_ib_uverbs_sge *sge;
	uint32_t nsge;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	uint64_t compare_add, swap;
};

/* Gathers local SGEs into buf (bounded); returns status. */
static uint32_t gather(struct dbl *d, const struct dbl_op *op, uint8_t *buf, uint64_t cap, uint64_t *len)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < op->nsge; i++) {
		struct dbl_mr *m = mr_by_lkey(d, op->sge[i].lkey);
		if (!in_mr(m, op->sge[i].addr, op->sge[i].length))
			return USB4V_WC_LOC_PROT_ERR;
		if (n + op->sge[i].length > cap)
			return USB4V_WC_LOC_LEN_ERR;
		memcpy(buf + n, (void *)(uintptr_t)op->sge[i].addr, op->sge[i].length);
		n += op->sge[i].length;
	}
	*len = n;
	return USB4V_WC_SUCCESS;
}

/* The receiver's side of a message that consumes a receive: the head WR
 * of peer's RQ (the caller checked there is one). Returns the sender's
 * status. */
static uint32_t deliver(struct dbl *d, struct dbl_qp *peer, uint32_t src_qpn, uint32_t opcode, uint32_t flags,
			uint32_t imm, const uint8_t *buf, uint64_t len)
{
	uint32_t st = USB4V_WC_SUCCESS;
	struct dbl_recv *r = &peer->rq[peer->rh % DBL_RQ_DEPTH];
	struct usb4v_ib_uverbs_wc rwc;
	memset(&rwc, 0, sizeof(rwc));
	rwc.wr_id = r->wr_id;
	rwc.qp_num = peer->qpn;
	rwc.src_qp = src_qpn;
	rwc.byte_len = (uint32_t)len;
	int is_send = opcode == USB4V_WR_SEND || opcode == USB4V_WR_SEND_WITH_IMM;
	rwc.opcode = is_send ? USB4V_WC_RECV : USB4V_WC_RECV_RDMA_WITH_IMM;
	if (opcode == USB4V_WR_SEND_WITH_IMM || opcode == USB4V_WR_RDMA_WRITE_WITH_IMM) {
		rwc.ex.imm_data = imm;
		rwc.wc_flags = USB4V_WC_WITH_IMM;
	}
	if (is_send) {
		struct dbl_mr *m = r->num_sge ? mr_by_lkey(d, r->sge.lkey) : NULL;
		if (len > (r->num_sge ? r->sge.length : 0)) {
			rwc.status = USB4V_WC_LOC_LEN_ERR;
			st = USB4V_WC_REM_ACCESS_ERR + 0; /* remote invalid request */
		} else if (len && (!in_mr(m, r->sge.addr, len) || !(m->access & ACC_LOCAL_WRITE))) {
			rwc.status = USB4V_WC_LOC_PROT_ERR;
			st = USB4V_WC_REM_ACCESS_ERR;
		} else if (len) {
			memcpy((void *)(uintptr_t)r->sge.addr, buf, len);
		}
	}
	peer->rh++;
	peer->delivered++;
	cq_push(d, peer->recv_cq, &rwc, (flags & USB4V_SEND_SOLICITED) != 0);
	return st;
}

static int park(struct dbl *d, struct dbl_qp *qp, struct dbl_qp *peer, const struct dbl_op *op, uint8_t *buf,
		uint64_t len)
{
	if (d->npark == DBL_MAX_PARK)
		return -1;
	struct dbl_parked *p = &d->park[(d->park_head + d->npark) % DBL_MAX_PARK];
	p->from = (uint32_t)(qp - d->qp);
	p->to = (uint32_t)(peer - d->qp);
	p->opcode = op->opcode;
	p->flags = op->flags;
	p->imm = op->imm;
	p->wr_id = op->wr_id;
	p->buf = buf;
	p->len = len;
	d->npark++;
	d->rnr_naks++;
	return 0;
}

static uint32_t wc_opcode(uint32_t wr_opcode);

/* Messages parked for QP h meet the receives just posted, in order. */
static void unpark(struct dbl *d, uint32_t h)
{
	struct dbl_qp *peer = qp_get(d, h);
	uint32_t keep = 0;
	for (uint32_t k = 0; k < d->npark; k++) {
		struct dbl_parked *p = &d->park[(d->park_head + k) % DBL_MAX_PARK];
		if (p->to != h || !peer || peer->rh == peer->rt) {
			d->park[(d->park_head + keep++) % DBL_MAX_PARK] = *p;
			continue;
		}
		struct dbl_qp *from = qp_get(d, p->from);
		uint32_t st = deliver(d, peer, from ? from->qpn : 0, p->opcode, p->flags, p->imm, p->buf, p->len);
		if (from && ((p->flags & USB4V_SEND_SIGNALED) || st != USB4V_WC_SUCCESS)) {
			struct usb4v_ib_uverbs_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = p->wr_id;
			wc.status = st;
			wc.opcode = wc_opcode(p->opcode);
			wc.qp_num = from->qpn;
			cq_push(d, from->send_cq, &wc, 0);
		}
		free(p->buf);
	}
	d->npark = keep;
}

/* Executes op from qp; returns the sender's WC status and byte count. */
static uint32_t exec_op(struct dbl *d, struct dbl_qp *qp, const struct dbl_op *op, uint32_t *byte_len)
{
	static const uint64_t cap = 1 << 20;
	struct dbl_qp *peer = qp->peer >= 0 ? qp_get(d, (uint32_t)qp->peer) : NULL;
	if (!peer)
		return USB4V_WC_RETRY_EXC_ERR;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return USB4V_WC_GENERAL_ERR;
	uint64_t len = 0;
	uint32_t st = USB4V_WC_SUCCESS;
	int consumes_recv = 0;
	*byte_len = 0;
	switch (op->opcode) {
	case USB4V_WR_SEND:
	case USB4V_WR_SEND_WITH_IMM:
		st = gather(d, op, buf, cap, &len);
		consumes_recv = 1;
		break;
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM: {
		st = gather(d, op, buf, cap, &len);
		if (st)
			break;
		/* The module's receiver takes a plain RDMA WRITE of 0 bytes for a
		 * malformed header and answers an error ACK (the length travels in
		 * imm_data and 0 is refused: hellas-main:kernel/ibdev.c:8147, every
		 * tree); the sender completes it as WR_FLUSH_ERR and its QP goes to
		 * ERR (:9016). */
		if (op->opcode == USB4V_WR_RDMA_WRITE && len == 0) {
			st = USB4V_WC_WR_FLUSH_ERR;
			break;
		}
		struct dbl_mr *m = mr_by_rkey(d, op->rkey);
		if (!in_mr(m, op->remote_addr, len) || !(m->access & ACC_REMOTE_WRITE)) {
			st = USB4V_WC_REM_ACCESS_ERR;
			break;
		}
		memcpy((void *)(uintptr_t)op->remote_addr, buf, len);
		consumes_recv = op->opcode == USB4V_WR_RDMA_WRITE_WITH_IMM;
		break;
	}
	case USB4V_WR_RDMA_READ: {
		uint64_t total = 0;
		for (uint32_t i = 0; i < op->nsge; i++)
			total += op->sge[i].length;
		struct dbl_mr *m = mr_by_rkey(d, op->rkey);
		if (!in_mr(m, op->remote_addr, total) || !(m->access & ACC_REMOTE_READ)) {
			st = USB4V_WC_REM_ACCESS_ERR;
			break;
		}
		uint64_t off = 0;
		for (uint32_t i = 0; i < op->nsge; i++) {
			struct dbl_mr *l = mr_by_lkey(d, op->sge[i].lkey);
			if (!in_mr(l, op->sge[i].addr, op->sge[i].length) || !(l->access & ACC_LOCAL_WRITE)) {
				st = USB4V_WC_LOC_PROT_ERR;
				break;
			}
			memcpy((void *)(uintptr_t)op->sge[i].addr, (uint8_t *)(uintptr_t)op->remote_addr + off,
			       op->sge[i].length);
			off += op->sge[i].length;
		}
		len = total;
		break;
	}
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
	case USB4V_WR_ATOMIC_CMP_AND_SWP: {
		struct dbl_mr *m = mr_by_rkey(d, op->rkey);
		struct dbl_mr *l = op->nsge == 1 ? mr_by_lkey(d, op->sge[0].lkey) : NULL;
		if (!in_mr(m, op->remote_addr, 8) || !(m->access & ACC_REMOTE_ATOMIC) || (op->remote_addr & 7)) {
			st = USB4V_WC_REM_ACCESS_ERR;
			break;
		}
		if (!l || !in_mr(l, op->sge[0].addr, 8) || !(l->access & ACC_LOCAL_WRITE)) {
			st = USB4V_WC_LOC_PROT_ERR;
			break;
		}
		uint64_t *target = (uint64_t *)(uintptr_t)op->remote_addr, old = *target;
		if (op->opcode == USB4V_WR_ATOMIC_FETCH_AND_ADD)
			*target = old + op->compare_add;
		else if (old == op->compare_add)
			*target = op->swap;
		memcpy((void *)(uintptr_t)op->sge[0].addr, &old, 8);
		len = 8;
		break;
	}
	default:
		st = USB4V_WC_GENERAL_ERR;
	}
	if (st == USB4V_WC_SUCCESS && consumes_recv) {
		if (peer->rh == peer->rt && d->rnr_wait) {
			/* rnr_retry 7 (infinite): the module's sender waits for
			 * the receiver's next credit (hellas-main:kernel/ibdev.c
			 * tbv_send_rnr_waits_for_recv_credit, :1220) and the
			 * message lands once a receive is posted. */
			if (park(d, qp, peer, op, buf, len) == 0) {
				*byte_len = (uint32_t)len;
				return DBL_PARKED; /* buf is the parked message's now */
			}
			st = USB4V_WC_GENERAL_ERR;
		} else if (peer->rh == peer->rt) {
			st = USB4V_WC_RNR_RETRY_EXC_ERR;
		} else {
			st = deliver(d, peer, qp->qpn, op->opcode, op->flags, op->imm, buf, len);
		}
	}
	free(buf);
	*byte_len = (uint32_t)len;
	return st;
}

static uint32_t wc_opcode(uint32_t wr_opcode)
{
	switch (wr_opcode) {
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM: return USB4V_WC_RDMA_WRITE;
	case USB4V_WR_RDMA_READ: return USB4V_WC_RDMA_READ;
	case USB4V_WR_ATOMIC_CMP_AND_SWP: return USB4V_WC_COMP_SWAP;
	case USB4V_WR_ATOMIC_FETCH_AND_ADD: return USB4V_WC_FETCH_ADD;
	default: return USB4V_WC_SEND;
	}
}

/* ---- write() commands ---- */

static int resp_copy(uint64_t response, uint32_t outlen, const void *resp, size_t len)
{
	if (!response)
		return -EFAULT;
	memcpy((void *)(uintptr_t)response, resp, len < outlen ? len : outlen);
	return 0;
}

/* uverbs_request_next_ptr: the request must hold len more bytes. */
static const uint8_t *next_ptr(const uint8_t **cur, const uint8_t *end, uint64_t len)
{
	if (len > (uint64_t)(end - *cur))
		return NULL;
	const uint8_t *p = *cur;
	*cur += len;
	return p;
}

/* uverbs_request_finish: anything left over must be zero. */
static int finish(const uint8_t *cur, const uint8_t *end)
{
	for (; cur < end; cur++)
		if (*cur)
			return -EOPNOTSUPP;
	return 0;
}

static int cmd_post_send(struct dbl *d, const uint8_t *p, const uint8_t *end, uint32_t outlen)
{
	struct usb4v_ib_uverbs_post_send cmd;
	if ((size_t)(end - p) < sizeof(cmd))
		return -ENOSPC;
	memcpy(&cmd, p, sizeof(cmd));
	p += sizeof(cmd);
	const uint8_t *wqes = next_ptr(&p, end, (uint64_t)cmd.wqe_size * cmd.wr_count);
	if (!wqes)
		return -ENOSPC;
	const uint8_t *sgls = next_ptr(&p, end, (uint64_t)cmd.sge_count * sizeof(struct usb4v_ib_uverbs_sge));
	if (!sgls)
		return -ENOSPC;
	int rc = finish(p, end);
	if (rc)
		return rc;
	if (cmd.wqe_size < sizeof(struct usb4v_ib_uverbs_send_wr))
		return -EINVAL;
	struct dbl_qp *qp = qp_get(d, cmd.qp_handle);
	if (!qp)
		return -EINVAL;
	/* Decode all WRs first, as the core builds the whole list before
	 * calling the driver. */
	uint32_t sg_ind = 0;
	for (uint32_t i = 0; i < cmd.wr_count; i++) {
		struct usb4v_ib_uverbs_send_wr w;
		memcpy(&w, wqes + (size_t)i * cmd.wqe_size, sizeof(w));
		if ((uint64_t)w.num_sge + sg_ind > cmd.sge_count)
			return -EINVAL;
		switch (w.opcode) {
		case USB4V_WR_RDMA_WRITE: case USB4V_WR_RDMA_WRITE_WITH_IMM: case USB4V_WR_RDMA_READ:
		case USB4V_WR_ATOMIC_CMP_AND_SWP: case USB4V_WR_ATOMIC_FETCH_AND_ADD:
		case USB4V_WR_SEND: case USB4V_WR_SEND_WITH_IMM: case USB4V_WR_SEND_WITH_INV:
			break;
		default:
			return -EINVAL;
		}
		sg_ind += w.num_sge;
	}
	/* The driver (tbv_post_send) walks the list; the first refused WR
	 * stops it and resp.bad_wr counts up to and including it. */
	struct usb4v_ib_uverbs_post_send_resp resp = {0};
	if (qp->dv) {
		/* A DV queue owns the send queue: both DV trees refuse an
		 * ordinary post_send at the first WR (pleite-gda:kernel/ibdev.c
		 * tbv_qp_post_status, hellas-gda-v2:kernel/ibdev.c tbv_post_send). */
		d->post_send_busy++;
		resp.bad_wr = 1;
		int rc2 = resp_copy(cmd.response, outlen, &resp, sizeof(resp));
		return rc2 ? rc2 : -EBUSY;
	}
	rc = 0;
	sg_ind = 0;
	for (uint32_t i = 0; i < cmd.wr_count; i++) {
		struct usb4v_ib_uverbs_send_wr w;
		memcpy(&w, wqes + (size_t)i * cmd.wqe_size, sizeof(w));
		struct usb4v_ib_uverbs_sge sg[64];
		uint32_t n = w.num_sge < 64 ? w.num_sge : 64;
		memcpy(sg, sgls + (size_t)sg_ind * sizeof(sg[0]), n * sizeof(sg[0]));
		sg_ind += w.num_sge;
		int supported = w.opcode == USB4V_WR_SEND || w.opcode == USB4V_WR_SEND_WITH_IMM ||
				w.opcode == USB4V_WR_RDMA_WRITE || w.opcode == USB4V_WR_RDMA_WRITE_WITH_IMM ||
				w.opcode == USB4V_WR_RDMA_READ;
		if (!supported || (w.send_flags & USB4V_SEND_INLINE) || w.num_sge > 4) {
			rc = w.num_sge > 4 ? -EINVAL : -EOPNOTSUPP;
			resp.bad_wr = i + 1;
			break;
		}
		struct dbl_op op = {
			.opcode = w.opcode, .flags = w.send_flags, .wr_id = w.wr_id, .sge = sg, .nsge = n,
			.remote_addr = w.wr.rdma.remote_addr, .rkey = w.wr.rdma.rkey, .imm = w.ex.imm_data,
		};
		uint32_t byte_len = 0;
		uint32_t st = exec_op(d, qp, &op, &byte_len);
		if (st == DBL_PARKED)
			continue; /* completes when the receiver posts */
		if ((w.send_flags & USB4V_SEND_SIGNALED) || st != USB4V_WC_SUCCESS) {
			struct usb4v_ib_uverbs_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w.wr_id;
			wc.status = st;
			wc.opcode = wc_opcode(w.opcode);
			wc.qp_num = qp->qpn;
			wc.byte_len = w.opcode == USB4V_WR_RDMA_READ ? byte_len : 0;
			cq_push(d, qp->send_cq, &wc, 0);
		}
	}
	int rc2 = resp_copy(cmd.response, outlen, &resp, sizeof(resp));
	return rc ? rc : rc2;
}

static int cmd_post_recv(struct dbl *d, const uint8_t *p, const uint8_t *end, uint32_t outlen, int srq)
{
	struct usb4v_ib_uverbs_post_recv cmd;
	if ((size_t)(end - p) < sizeof(cmd))
		return -ENOSPC;
	memcpy(&cmd, p, sizeof(cmd));
	p += sizeof(cmd);
	if (cmd.wqe_size < sizeof(struct usb4v_ib_uverbs_recv_wr))
		return -EINVAL;
	const uint8_t *wqes = next_ptr(&p, end, (uint64_t)cmd.wqe_size * cmd.wr_count);
	if (!wqes)
		return -ENOSPC;
	const uint8_t *sgls = next_ptr(&p, end, (uint64_t)cmd.sge_count * sizeof(struct usb4v_ib_uverbs_sge));
	if (!sgls)
		return -ENOSPC;
	int rc = finish(p, end);
	if (rc)
		return rc;
	uint32_t sg_ind = 0;
	for (uint32_t i = 0; i < cmd.wr_count; i++) {
		struct usb4v_ib_uverbs_recv_wr w;
		memcpy(&w, wqes + (size_t)i * cmd.wqe_size, sizeof(w));
		if ((uint64_t)w.num_sge + sg_ind > cmd.sge_count)
			return -EINVAL;
		sg_ind += w.num_sge;
	}
	/* thunderbolt_ibverbs has no SRQ object: the handle lookup fails. */
	struct dbl_qp *qp = srq ? NULL : qp_get(d, cmd.qp_handle);
	if (!qp)
		return -EINVAL;
	struct usb4v_ib_uverbs_post_recv_resp resp = {0};
	sg_ind = 0;
	for (uint32_t i = 0; i < cmd.wr_count; i++) {
		struct usb4v_ib_uverbs_recv_wr w;
		memcpy(&w, wqes + (size_t)i * cmd.wqe_size, sizeof(w));
		if (w.num_sge > 1) { /* tbv_post_recv: one SGE at most */
			rc = -EINVAL;
			resp.bad_wr = i + 1;
			break;
		}
		if (qp->err) { /* tbv_post_recv: no receives in ERR (hellas-main:kernel/ibdev.c:5323) */
			rc = -EINVAL;
			resp.bad_wr = i + 1;
			break;
		}
		if (qp->rt - qp->rh >= (qp->rq_depth ? qp->rq_depth : DBL_RQ_DEPTH)) {
			rc = -ENOMEM;
			resp.bad_wr = i + 1;
			break;
		}
		struct dbl_recv *r = &qp->rq[qp->rt % DBL_RQ_DEPTH];
		memset(r, 0, sizeof(*r));
		r->wr_id = w.wr_id;
		r->num_sge = w.num_sge;
		if (w.num_sge) {
			memcpy(&r->sge, sgls + (size_t)sg_ind * sizeof(r->sge), sizeof(r->sge));
			struct dbl_mr *m = mr_by_lkey(d, r->sge.lkey);
			if (!in_mr(m, r->sge.addr, r->sge.length) || !(m->access & ACC_LOCAL_WRITE)) {
				rc = -EINVAL;
				resp.bad_wr = i + 1;
				break;
			}
		}
		sg_ind += w.num_sge;
		qp->rt++;
		qp->posted++;
	}
	unpark(d, cmd.qp_handle);
	int rc2 = resp_copy(cmd.response, outlen, &resp, sizeof(resp));
	return rc ? rc : rc2;
}

static int cmd_poll_cq(struct dbl *d, const uint8_t *p, const uint8_t *end, uint32_t outlen)
{
	struct usb4v_ib_uverbs_poll_cq cmd;
	if ((size_t)(end - p) < sizeof(cmd))
		return -ENOSPC;
	memcpy(&cmd, p, sizeof(cmd));
	int rc = finish(p + sizeof(cmd), end);
	if (rc)
		return rc;
	struct dbl_cq *cq = cq_get(d, cmd.cq_handle);
	if (!cq)
		return -EINVAL;
	if (!cmd.response)
		return -EFAULT;
	uint8_t *out = (uint8_t *)(uintptr_t)cmd.response;
	struct usb4v_ib_uverbs_poll_cq_resp resp = {0};
	size_t room = outlen > sizeof(resp) ? (outlen - sizeof(resp)) / sizeof(struct usb4v_ib_uverbs_wc) : 0;
	/* A mapped CQ has one consumer path: the ring. */
	while (!cq->shm_mode && resp.count < cmd.ne && resp.count < room && cq->ph != cq->pt) {
		memcpy(out + sizeof(resp) + resp.count * sizeof(struct usb4v_ib_uverbs_wc),
		       &cq->priv[cq->ph % cq->cqe], sizeof(struct usb4v_ib_uverbs_wc));
		cq->ph++;
		resp.count++;
	}
	memcpy(out, &resp, sizeof(resp));
	return 0;
}

static int cmd_req_notify(struct dbl *d, const uint8_t *p, const uint8_t *end)
{
	struct usb4v_ib_uverbs_req_notify_cq cmd;
	if ((size_t)(end - p) < sizeof(cmd))
		return -ENOSPC;
	memcpy(&cmd, p, sizeof(cmd));
	struct dbl_cq *cq = cq_get(d, cmd.cq_handle);
	if (!cq)
		return -EINVAL;
	cq->armed = 1;
	cq->solicited_only = cmd.solicited_only != 0;
	return 0;
}

static ssize_t dbl_write(void *ctx, int fd, const void *buf, size_t len)
{
	struct dbl *d = ctx;
	(void)fd;
	struct usb4v_ib_uverbs_cmd_hdr hdr;
	if (len < sizeof(hdr))
		return -EINVAL;
	memcpy(&hdr, buf, sizeof(hdr));
	if ((size_t)hdr.in_words * 4 != len)
		return -EINVAL;
	const uint8_t *p = (const uint8_t *)buf + sizeof(hdr), *end = (const uint8_t *)buf + len;
	uint32_t outlen = (uint32_t)hdr.out_words * 4;
	int rc;
	if (hdr.command == USB4V_IB_USER_VERBS_CMD_POLL_CQ) {
		/* A slow kernel: the poll sleeps in the "syscall", outside d->mu. */
		__atomic_add_fetch(&d->polls_entered, 1, __ATOMIC_SEQ_CST);
		uint32_t us = __atomic_load_n(&d->poll_delay_us, __ATOMIC_RELAXED);
		if (us)
			usleep(us);
		while (__atomic_load_n(&d->poll_hold, __ATOMIC_ACQUIRE))
			usleep(1000);
	}
	pthread_mutex_lock(&d->mu);
	d->writes++;
	switch (hdr.command) {
	case USB4V_IB_USER_VERBS_CMD_POST_SEND: rc = cmd_post_send(d, p, end, outlen); break;
	case USB4V_IB_USER_VERBS_CMD_POST_RECV: rc = cmd_post_recv(d, p, end, outlen, 0); break;
	case USB4V_IB_USER_VERBS_CMD_POST_SRQ_RECV: rc = cmd_post_recv(d, p, end, outlen, 1); break;
	case USB4V_IB_USER_VERBS_CMD_POLL_CQ: rc = cmd_poll_cq(d, p, end, outlen); break;
	case USB4V_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: rc = cmd_req_notify(d, p, end); break;
	default: rc = -EOPNOTSUPP; break;
	}
	pthread_mutex_unlock(&d->mu);
	if (hdr.command == USB4V_IB_USER_VERBS_CMD_POLL_CQ)
		__atomic_add_fetch(&d->polls_done, 1, __ATOMIC_SEQ_CST);
	return rc < 0 ? rc : (ssize_t)len;
}

/* ---- mmap of the CQ ring ---- */

static int dbl_mmap(void *ctx, int fd, uint64_t off, size_t len, void **addr)
{
	struct dbl *d = ctx;
	(void)fd;
	pthread_mutex_lock(&d->mu);
	d->mmaps++;
	int rc = -EINVAL;
	for (int i = 0; i < DBL_MAX_CQ; i++) {
		struct dbl_cq *cq = &d->cq[i];
		if (!cq->used || !cq->shm_offered || cq->mmap_off != off)
			continue;
		if (d->shm_spoil == DBL_SHM_REFUSE_MMAP) {
			rc = -EPERM;
			break;
		}
		if (len != cq->shm_len) { /* partial maps are rejected */
			rc = -EINVAL;
			break;
		}
		cq->shm_mode = 1;
		*addr = cq->shm;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

static int dbl_munmap(void *ctx, void *addr, size_t len)
{
	struct dbl *d = ctx;
	(void)len;
	pthread_mutex_lock(&d->mu);
	for (int i = 0; i < DBL_MAX_CQ; i++)
		if (d->cq[i].used && d->cq[i].shm == addr)
			d->cq[i].shm_mode = 0;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* ---- DV ioctls ---- */

static const struct usb4v_ib_uverbs_attr *find_attr(const struct usb4v_ib_uverbs_attr *a, uint16_t n, uint16_t id)
{
	for (uint16_t i = 0; i < n; i++)
		if (a[i].attr_id == id)
			return &a[i];
	return NULL;
}

/* Executes one DV WQE (already generation-checked) and fills its CQE. */
static void dv_exec_wqe(struct dbl *d, struct dbl_qp *qp, const struct usb4v_usb4_rdma_dv_wqe *wp,
			struct usb4v_usb4_rdma_dv_cqe *c)
{
	struct usb4v_usb4_rdma_dv_wqe w = *wp;
	static const uint32_t to_wr[] = {
		[USB4V_USB4_RDMA_DV_WQE_SEND] = USB4V_WR_SEND,
		[USB4V_USB4_RDMA_DV_WQE_SEND_IMM] = USB4V_WR_SEND_WITH_IMM,
		[USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE] = USB4V_WR_RDMA_WRITE,
		[USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE_IMM] = USB4V_WR_RDMA_WRITE_WITH_IMM,
		[USB4V_USB4_RDMA_DV_WQE_RDMA_READ] = USB4V_WR_RDMA_READ,
		[USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD] = USB4V_WR_ATOMIC_FETCH_AND_ADD,
		[USB4V_USB4_RDMA_DV_WQE_ATOMIC_SWAP] = 99,
		[USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP] = USB4V_WR_ATOMIC_CMP_AND_SWP,
	};
	if (w.opcode == 0 || w.opcode > USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP || to_wr[w.opcode] == 99) {
		c->status = USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR;
		return;
	}
	/* A zero length carries no SGE (pleite-gda:kernel/ibdev.c tbv_dv_post_wqe). */
	struct usb4v_ib_uverbs_sge sg = { .addr = w.local_addr, .length = w.length, .lkey = w.lkey };
	struct dbl_op op = {
		.opcode = to_wr[w.opcode], .wr_id = w.wr_id, .sge = &sg, .nsge = w.length ? 1 : 0,
		.remote_addr = w.remote_addr, .rkey = w.rkey,
		/* A DV WQE carries imm_data in CPU order; the module turns it into
		 * the wire's big-endian value (pleite-gda:kernel/ibdev.c
		 * tbv_dv_post_wqe: wr->ex.imm_data = cpu_to_be32(wqe->imm_data)). */
		.imm = htonl(w.imm_data),
		.flags = (w.flags & USB4V_USB4_RDMA_DV_WQE_F_SOLICITED) ? USB4V_SEND_SOLICITED : 0,
	};
	if (op.opcode == USB4V_WR_ATOMIC_FETCH_AND_ADD) {
		op.compare_add = w.reserved1[0];
		op.nsge = 1;
	} else if (op.opcode == USB4V_WR_ATOMIC_CMP_AND_SWP) {
		op.swap = w.reserved1[0];
		op.compare_add = w.reserved1[1];
		op.nsge = 1;
	}
	uint32_t bl = 0, st = exec_op(d, qp, &op, &bl);
	static const uint32_t to_dv[32] = {
		[USB4V_WC_LOC_LEN_ERR] = USB4V_USB4_RDMA_DV_CQE_LOCAL_LEN_ERR,
		[USB4V_WC_LOC_PROT_ERR] = USB4V_USB4_RDMA_DV_CQE_LOCAL_PROT_ERR,
		[USB4V_WC_REM_ACCESS_ERR] = USB4V_USB4_RDMA_DV_CQE_REMOTE_ACCESS_ERR,
		[USB4V_WC_RETRY_EXC_ERR] = USB4V_USB4_RDMA_DV_CQE_RETRY_EXC_ERR,
		[USB4V_WC_RNR_RETRY_EXC_ERR] = USB4V_USB4_RDMA_DV_CQE_RETRY_EXC_ERR,
		[USB4V_WC_GENERAL_ERR] = USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR,
		/* The error ACK (-EIO) of a refused 0-byte write: DV's default
		 * (pleite-gda:kernel/ibdev.c:9735 tbv_dv_status_from_errno). */
		[USB4V_WC_WR_FLUSH_ERR] = USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR,
	};
	c->status = st < 32 ? to_dv[st] : USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR;
	c->byte_len = op.opcode == USB4V_WR_RDMA_READ || op.opcode >= USB4V_WR_ATOMIC_CMP_AND_SWP ? bl : 0;
}

/* pleite-gda:kernel/ibdev.c tbv_dv_mark_error: the queue stops, the consumer
 * line says ERR. */
static void dv_mark_error(struct dbl_qp *qp)
{
	qp->dv_error = 1;
	__atomic_store_n(USB4V_DB_CONSUMER(qp->db, qp_state), USB4V_USB4_RDMA_DV_QP_ERR, __ATOMIC_RELEASE);
}

/* Writes one CQE; 0, or -EOVERFLOW when the producer's cq_head has another
 * generation or the CQ is full (pleite-gda:kernel/ibdev.c
 * tbv_dv_flush_completions_locked: both mark the queue in error). */
static int dv_emit(struct dbl_qp *qp, const struct usb4v_usb4_rdma_dv_cqe *c)
{
	uint32_t head = __atomic_load_n(USB4V_DB_PRODUCER(qp->db, cq_head), __ATOMIC_ACQUIRE);
	if ((head >> 24) != qp->gen ||
	    ((qp->cq_tail - head) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) >= qp->cq_entries) {
		dv_mark_error(qp);
		return -EOVERFLOW;
	}
	qp->dcq[qp->cq_tail % qp->cq_entries] = *c;
	qp->cq_tail = (qp->cq_tail + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	__atomic_store_n(USB4V_DB_CONSUMER(qp->db, cq_tail), usb4v_dv_pack(qp->cq_tail, qp->gen), __ATOMIC_RELEASE);
	return 0;
}

static void dv_advance_head(struct dbl_qp *qp)
{
	qp->sq_head = (qp->sq_head + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	__atomic_store_n(USB4V_DB_CONSUMER(qp->db, sq_head), usb4v_dv_pack(qp->sq_head, qp->gen), __ATOMIC_RELEASE);
}

/*
 * KICK as pleite-gda:kernel/ibdev.c (USB4_RDMA_DV_METHOD_KICK ->
 * tbv_dv_drain_sq_locked) does it: the tail is the one in the request, not
 * the doorbell's; its generation and the producer line's must be the
 * queue's (-ESTALE); a queue in error drains nothing and answers 0; a tail
 * more than sq_entries ahead of the head (a stale tail from a racing
 * poster wraps to a huge delta) marks the queue in error: -EOVERFLOW.
 */
static int dv_kick_pleite(struct dbl *d, struct dbl_qp *qp, uint32_t packed_tail)
{
	if ((packed_tail >> 24) != qp->gen ||
	    __atomic_load_n(USB4V_DB_PRODUCER(qp->db, generation), __ATOMIC_RELAXED) != qp->gen)
		return -ESTALE;
	uint32_t tail = packed_tail & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	while (!qp->dv_error) {
		uint32_t delta = (tail - qp->sq_head) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
		if (!delta)
			break;
		if (delta > qp->sq_entries) {
			dv_mark_error(qp);
			return -EOVERFLOW;
		}
		struct usb4v_usb4_rdma_dv_wqe w = qp->sq[qp->sq_head % qp->sq_entries];
		struct usb4v_usb4_rdma_dv_cqe c;
		memset(&c, 0, sizeof(c));
		c.wr_id = w.wr_id;
		c.opcode = w.opcode;
		int emit = (w.flags & USB4V_USB4_RDMA_DV_WQE_F_SIGNALED) != 0;
		if (w.generation != qp->gen || d->dv_stale_next) {
			d->dv_stale_next = 0;
			c.status = USB4V_USB4_RDMA_DV_CQE_STALE_GEN;
		} else if (w.opcode != USB4V_USB4_RDMA_DV_WQE_NOP) {
			dv_exec_wqe(d, qp, &w, &c);
		}
		if (c.status) /* errors always complete (tbv_dv_slot_complete) */
			emit = 1;
		dv_advance_head(qp);
		if (emit && dv_emit(qp, &c))
			return -EOVERFLOW;
	}
	return 0;
}

/*
 * KICK as hellas-gda-v2:kernel/dv.c tbv_dv_drain_nop_locked does it: only
 * NOP WQEs succeed, any other opcode completes with GENERAL_ERR. Its pending
 * count is head - tail (the reverse of pleite's), so any tail ahead of the
 * head answers -EINVAL; a full CQ is -ENOSPC.
 */
static int dv_kick_hellas(struct dbl *d, struct dbl_qp *qp, uint32_t packed_tail)
{
	(void)d;
	if ((packed_tail >> 24) != qp->gen)
		return -ESTALE;
	uint32_t tail = packed_tail & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	if (((qp->sq_head - tail) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) > qp->sq_entries)
		return -EINVAL;
	while (qp->sq_head != tail) {
		struct usb4v_usb4_rdma_dv_wqe w = qp->sq[qp->sq_head % qp->sq_entries];
		struct usb4v_usb4_rdma_dv_cqe c;
		memset(&c, 0, sizeof(c));
		c.wr_id = w.wr_id;
		c.opcode = w.opcode;
		if (w.generation != qp->gen)
			c.status = USB4V_USB4_RDMA_DV_CQE_STALE_GEN;
		else if (w.opcode != USB4V_USB4_RDMA_DV_WQE_NOP)
			c.status = USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR;
		if ((w.flags & USB4V_USB4_RDMA_DV_WQE_F_SIGNALED) || c.status) {
			uint32_t head = __atomic_load_n(USB4V_DB_PRODUCER(qp->db, cq_head), __ATOMIC_ACQUIRE);
			if (((qp->cq_tail - head) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) >= qp->cq_entries)
				return -ENOSPC;
			qp->dcq[qp->cq_tail % qp->cq_entries] = c;
			qp->cq_tail = (qp->cq_tail + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
		}
		dv_advance_head(qp);
	}
	__atomic_store_n(USB4V_DB_CONSUMER(qp->db, cq_tail), usb4v_dv_pack(qp->cq_tail, qp->gen), __ATOMIC_RELEASE);
	return 0;
}

/* The kernel's DV teardown: the generation moves on, the queue is gone. */
static void dv_teardown(struct dbl_qp *qp)
{
	__atomic_store_n(USB4V_DB_CONSUMER(qp->db, generation), (uint32_t)(uint8_t)(qp->gen + 1), __ATOMIC_RELEASE);
	qp->dv = 0;
	qp->sq = NULL;
	qp->dcq = NULL;
	qp->db = NULL;
}

static int ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static int dbl_ioctl(void *ctx, int fd, unsigned long req, void *arg)
{
	struct dbl *d = ctx;
	(void)fd;
	if (req != USB4V_RDMA_VERBS_IOCTL)
		return -ENOTTY;
	struct usb4v_ib_uverbs_ioctl_hdr *h = arg;
	if (h->length != sizeof(*h) + (size_t)h->num_attrs * sizeof(struct usb4v_ib_uverbs_attr) ||
	    h->reserved1 || h->reserved2)
		return -EINVAL;
	const struct usb4v_ib_uverbs_attr *a = (const void *)(h + 1);
	/* A real ioctl takes a microsecond or more to reach the driver; give
	 * other posters that time, so races in front of a KICK show. */
	if (h->method_id == USB4V_USB4_RDMA_DV_METHOD_KICK && __atomic_load_n(&d->kick_entry_delay_ns, __ATOMIC_RELAXED)) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = d->kick_entry_delay_ns };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&d->mu);
	d->ioctls++;
	int rc = 0;
	if (h->object_id != USB4V_USB4_RDMA_DV_OBJECT_DEVICE || !d->dv_enabled) {
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	switch (h->method_id) {
	case USB4V_USB4_RDMA_DV_METHOD_QUERY_CAPS: {
		const struct usb4v_ib_uverbs_attr *r = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_QUERY_CAPS_RESP);
		if (!r || !r->data) {
			rc = -EINVAL;
			break;
		}
		struct usb4v_usb4_rdma_dv_query_caps_resp c = {
			/* pleite-gda:kernel/ibdev.c answers USB4_RDMA_DV_CAPS_V2;
			 * hellas-gda-v2:kernel/dv.c answers caps = 0. */
			.abi_version = 2, .caps = d->dv_model == DBL_DV_HELLAS_GDA_V2 ? 0 : d->dv_caps,
			.max_sq_entries = 1024, .max_cq_entries = 4096,
			.default_sq_entries = 256, .default_cq_entries = 512, .wqe_size = 64, .cqe_size = 64,
			.doorbell_record_size = 128, .doorbell_page_size = 4096, .tail_index_bits = 24,
			.tail_generation_bits = 8,
		};
		memcpy((void *)(uintptr_t)r->data, &c, r->len < sizeof(c) ? r->len : sizeof(c));
		break;
	}
	case USB4V_USB4_RDMA_DV_METHOD_CREATE_QUEUE: {
		const struct usb4v_ib_uverbs_attr *aq = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP);
		const struct usb4v_ib_uverbs_attr *ar = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ);
		const struct usb4v_ib_uverbs_attr *ao = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP);
		struct dbl_qp *qp = aq ? qp_get(d, (uint32_t)aq->data) : NULL;
		d->create_queues++;
		if (!qp || !ar || !ao || ar->len != sizeof(struct usb4v_usb4_rdma_dv_queue_create) ||
		    ao->len < sizeof(struct usb4v_usb4_rdma_dv_queue_resp)) {
			rc = -EINVAL;
			break;
		}
		if (qp->dv) {
			rc = -EBUSY;
			break;
		}
		struct usb4v_usb4_rdma_dv_queue_create q;
		memcpy(&q, (void *)(uintptr_t)ar->data, sizeof(q));
		uint64_t sqb = (uint64_t)q.sq_entries * 64, cqb = (uint64_t)q.cq_entries * 64;
		if (q.abi_version != 2 || q.sq_stride != 64 || q.cq_stride != 64 ||
		    q.sq_entries < 2 || q.sq_entries > 1024 || q.cq_entries < 2 || q.cq_entries > 4096 ||
		    !q.sq_addr || !q.cq_addr || !q.doorbell_addr || (q.doorbell_addr & 4095) ||
		    (q.sq_addr & 63) || (q.cq_addr & 63) ||
		    ranges_overlap(q.sq_addr, sqb, q.cq_addr, cqb) || ranges_overlap(q.sq_addr, sqb, q.doorbell_addr, 4096) ||
		    ranges_overlap(q.cq_addr, cqb, q.doorbell_addr, 4096)) {
			rc = -EINVAL;
			break;
		}
		d->next_gen = (uint8_t)(d->next_gen + 1 ? d->next_gen + 1 : 1);
		qp->gen = d->next_gen;
		qp->sq = (void *)(uintptr_t)q.sq_addr;
		qp->dcq = (void *)(uintptr_t)q.cq_addr;
		qp->db = (void *)(uintptr_t)q.doorbell_addr;
		qp->sq_entries = q.sq_entries;
		qp->cq_entries = q.cq_entries;
		qp->sq_head = qp->cq_tail = 0;
		qp->dv = 1;
		qp->dv_error = 0;
		memset(&qp->db->consumer, 0, sizeof(qp->db->consumer));
		qp->db->consumer.sq_head = usb4v_dv_pack(0, qp->gen);
		qp->db->consumer.cq_tail = usb4v_dv_pack(0, qp->gen);
		__atomic_store_n(USB4V_DB_CONSUMER(qp->db, generation), qp->gen, __ATOMIC_RELEASE);
		struct usb4v_usb4_rdma_dv_queue_resp r = {
			.qp_num = qp->qpn,
			.generation = d->dv_bad_gen_resp ? (uint32_t)qp->gen + 1 : qp->gen,
		};
		memcpy((void *)(uintptr_t)ao->data, &r, sizeof(r));
		break;
	}
	case USB4V_USB4_RDMA_DV_METHOD_KICK: {
		const struct usb4v_ib_uverbs_attr *aq = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_KICK_QP);
		const struct usb4v_ib_uverbs_attr *ar = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_KICK_REQ);
		struct dbl_qp *qp = aq ? qp_get(d, (uint32_t)aq->data) : NULL;
		if (!qp || !ar || ar->len != sizeof(struct usb4v_usb4_rdma_dv_kick)) {
			rc = -EINVAL;
			break;
		}
		struct usb4v_usb4_rdma_dv_kick k;
		memcpy(&k, (void *)(uintptr_t)ar->data, sizeof(k));
		d->kicks++;
		if (k.flags || k.reserved[0] || k.reserved[1])
			rc = -EINVAL;
		else if (!qp->dv)
			rc = -ENOENT;
		else if (d->dv_model == DBL_DV_HELLAS_GDA_V2)
			rc = dv_kick_hellas(d, qp, k.sq_tail);
		else
			rc = dv_kick_pleite(d, qp, k.sq_tail);
		if (rc)
			d->kick_errors++;
		break;
	}
	case USB4V_USB4_RDMA_DV_METHOD_DESTROY_QUEUE: {
		const struct usb4v_ib_uverbs_attr *aq = find_attr(a, h->num_attrs, USB4V_USB4_RDMA_DV_ATTR_DESTROY_QUEUE_QP);
		struct dbl_qp *qp = aq ? qp_get(d, (uint32_t)aq->data) : NULL;
		d->destroy_queues++;
		/* As the kernel: a handle that names no QP fails the uverbs
		 * lookup; a live QP without a queue is -ENOENT; a handle that
		 * was freed and reused names the new QP, whose queue goes
		 * (pleite-gda:kernel/ibdev.c DESTROY_QUEUE handler). */
		if (!qp) {
			rc = -EINVAL;
			break;
		}
		if (!qp->dv) {
			rc = -ENOENT;
			break;
		}
		dv_teardown(qp);
		break;
	}
	default:
		rc = -EPROTONOSUPPORT;
	}
out:
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* ---- the kernel's DV poll worker ---- */

/*
 * As pleite-gda:kernel/ibdev.c tbv_dv_poll_thread/tbv_dv_poll_scan: every
 * queue attached at CREATE_QUEUE is drained up to the producer line's
 * sq_tail with the same drain as KICK ("KICK is not required when polling
 * is enabled", pleite-gda:userspace/usb4_rdma/usb4_rdma_dv.h), then the
 * worker sleeps dv_poll_interval_us (default 10).
 */
static void *dv_poller_main(void *arg)
{
	struct dbl *d = arg;
	for (;;) {
		pthread_mutex_lock(&d->mu);
		if (!d->poller_on) {
			pthread_mutex_unlock(&d->mu);
			return NULL;
		}
		d->poller_scans++;
		for (int i = 0; i < DBL_MAX_QP; i++) {
			struct dbl_qp *qp = &d->qp[i];
			if (!qp->used || !qp->dv || qp->dv_error)
				continue;
			uint32_t tail = __atomic_load_n(USB4V_DB_PRODUCER(qp->db, sq_tail), __ATOMIC_ACQUIRE);
			(void)dv_kick_pleite(d, qp, tail);
		}
		pthread_mutex_unlock(&d->mu);
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000 };
		nanosleep(&ts, NULL);
	}
}

int dbl_app_create_queue(struct dbl *d, uint32_t qp, uint32_t *gen)
{
	enum { ENTRIES = 16 };
	if (d->app_mem_n + 3 > (int)(sizeof(d->app_mem) / sizeof(d->app_mem[0])))
		return -ENOMEM;
	void *sq = aligned_alloc(4096, 4096), *cq = aligned_alloc(4096, 4096), *db = aligned_alloc(4096, 4096);
	d->app_mem[d->app_mem_n++] = sq;
	d->app_mem[d->app_mem_n++] = cq;
	d->app_mem[d->app_mem_n++] = db;
	if (!sq || !cq || !db)
		return -ENOMEM;
	memset(sq, 0, 4096);
	memset(cq, 0, 4096);
	memset(db, 0, 4096);
	struct usb4v_usb4_rdma_dv_queue_create req = {
		.abi_version = USB4V_USB4_RDMA_DV_ABI_VERSION,
		.sq_addr = (uint64_t)(uintptr_t)sq, .cq_addr = (uint64_t)(uintptr_t)cq,
		.doorbell_addr = (uint64_t)(uintptr_t)db,
		.sq_entries = ENTRIES, .cq_entries = ENTRIES,
		.sq_stride = USB4V_USB4_RDMA_DV_WQE_SIZE, .cq_stride = USB4V_USB4_RDMA_DV_CQE_SIZE,
	};
	struct usb4v_usb4_rdma_dv_queue_resp resp;
	memset(&resp, 0, sizeof(resp));
	struct {
		struct usb4v_ib_uverbs_ioctl_hdr hdr;
		struct usb4v_ib_uverbs_attr a[3];
	} cmd = {
		.hdr = { .length = sizeof(cmd), .object_id = USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
			 .method_id = USB4V_USB4_RDMA_DV_METHOD_CREATE_QUEUE, .num_attrs = 3 },
		.a = {
			{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP, .flags = USB4V_UVERBS_ATTR_F_MANDATORY,
			  .data = qp },
			{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ, .len = sizeof(req),
			  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&req },
			{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP, .len = sizeof(resp),
			  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&resp },
		},
	};
	int rc = dbl_ioctl(d, 3, USB4V_RDMA_VERBS_IOCTL, &cmd);
	if (rc == 0 && gen)
		*gen = resp.generation;
	return rc;
}

int dbl_set_dv_poller(struct dbl *d, int on)
{
	pthread_mutex_lock(&d->mu);
	int was = d->poller_on;
	d->poller_on = on;
	pthread_mutex_unlock(&d->mu);
	if (on && !was) {
		int rc = pthread_create(&d->poller, NULL, dv_poller_main, d);
		if (rc) {
			d->poller_on = 0;
			return rc;
		}
	} else if (!on && was) {
		pthread_join(d->poller, NULL);
	}
	return 0;
}

/* ---- setup ---- */

static int dbl_getpid(void *ctx)
{
	return ((struct dbl *)ctx)->pid;
}

void dbl_fork(struct dbl *d)
{
	d->pid++;
}

struct dbl *dbl_new(void)
{
	struct dbl *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	pthread_mutex_init(&d->mu, NULL);
	d->sys.ctx = d;
	d->sys.write = dbl_write;
	d->sys.ioctl = dbl_ioctl;
	d->sys.mmap = dbl_mmap;
	d->sys.munmap = dbl_munmap;
	d->sys.getpid = dbl_getpid;
	d->pid = 1000;
	d->dv_enabled = 1;
	d->dv_model = DBL_DV_PLEITE;
	d->dv_caps = USB4V_USB4_RDMA_DV_CAPS_V2;
	for (int i = 0; i < DBL_MAX_QP; i++)
		d->qp[i].peer = -1;
	return d;
}

void dbl_free(struct dbl *d)
{
	if (!d)
		return;
	dbl_set_dv_poller(d, 0);
	for (uint32_t k = 0; k < d->npark; k++)
		free(d->park[(d->park_head + k) % DBL_MAX_PARK].buf);
	for (int i = 0; i < d->app_mem_n; i++)
		free(d->app_mem[i]);
	for (int i = 0; i < DBL_MAX_CQ; i++) {
		free(d->cq[i].priv);
		free(d->cq[i].shm);
	}
	pthread_mutex_destroy(&d->mu);
	free(d);
}

int dbl_reg_mr(struct dbl *d, uint64_t addr, uint64_t len, uint32_t access, uint32_t *lkey, uint32_t *rkey)
{
	pthread_mutex_lock(&d->mu);
	int rc = -ENOMEM;
	for (int i = 0; i < DBL_MAX_MR; i++) {
		if (d->mr[i].used)
			continue;
		d->mr[i] = (struct dbl_mr){ .used = 1, .addr = addr, .len = len, .access = access,
					    .lkey = 0x100 + (uint32_t)i, .rkey = 0x8000 + (uint32_t)i };
		*lkey = d->mr[i].lkey;
		*rkey = d->mr[i].rkey;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int dbl_create_cq(struct dbl *d, uint32_t cqe, struct usb4v_tbv_uresp_create_cq *tail)
{
	if (cqe == 0 || cqe > DBL_MAX_CQE)
		return -EINVAL;
	pthread_mutex_lock(&d->mu);
	int h = -ENOMEM;
	for (int i = 0; i < DBL_MAX_CQ; i++) {
		struct dbl_cq *cq = &d->cq[i];
		if (cq->used)
			continue;
		memset(cq, 0, sizeof(*cq));
		cq->cqe = cqe;
		cq->priv = calloc(cqe, sizeof(*cq->priv));
		cq->shm_len = 4096 + (((size_t)cqe * 48 + 4095) & ~(size_t)4095);
		cq->shm = aligned_alloc(4096, cq->shm_len);
		if (!cq->priv || !cq->shm) {
			free(cq->priv);
			free(cq->shm);
			break;
		}
		memset(cq->shm, 0, cq->shm_len);
		cq->used = 1;
		cq->mmap_off = (uint64_t)i << 12; /* the first offset is 0, which is legal */
		memset(tail, 0, sizeof(*tail));
		if (d->shm_spoil != DBL_SHM_NO_OFFER) {
			struct usb4v_tbv_cq_shm *hd = (void *)cq->shm;
			cq->shm_offered = 1;
			hd->magic = d->shm_spoil == DBL_SHM_BAD_MAGIC ? 0x12345678u : USB4V_TBV_CQ_SHM_MAGIC;
			hd->abi = USB4V_TBV_CQ_SHM_ABI;
			hd->cqe = d->shm_spoil == DBL_SHM_CQE_MISMATCH ? cqe + 1 : cqe;
			hd->entry_size = d->shm_spoil == DBL_SHM_BAD_ENTRY_SIZE ? 64 : 48;
			hd->ring_offset = d->shm_spoil == DBL_SHM_RING_OUTSIDE ? (uint32_t)cq->shm_len : 4096;
			hd->map_len = (uint32_t)cq->shm_len;
			hd->ovf_seq = d->shm_spoil == DBL_SHM_PRE_OVERFLOW ? 1 : 0;
			tail->cq_mmap_offset = cq->mmap_off;
			tail->cqe = cqe;
			tail->shm_abi = USB4V_TBV_CQ_SHM_ABI;
			tail->map_len = cq->shm_len;
		}
		h = i;
		break;
	}
	pthread_mutex_unlock(&d->mu);
	return h;
}

int dbl_create_qp(struct dbl *d, uint32_t type, uint32_t send_cq, uint32_t recv_cq, uint32_t *qpn)
{
	if (type != USB4V_QPT_RC && type != USB4V_QPT_UC)
		return -EOPNOTSUPP; /* tbv_create_qp: no UD, XRC, RAW */
	pthread_mutex_lock(&d->mu);
	int h = -ENOMEM;
	if (!cq_get(d, send_cq) || !cq_get(d, recv_cq)) {
		h = -EINVAL;
		goto out;
	}
	for (int i = 0; i < DBL_MAX_QP; i++) {
		struct dbl_qp *qp = &d->qp[i];
		if (qp->used)
			continue;
		memset(qp, 0, sizeof(*qp));
		qp->used = 1;
		qp->peer = -1;
		qp->qpn = 0x900 + (uint32_t)i; /* tbv allocates QPNs from 0x900 */
		qp->type = type;
		qp->send_cq = send_cq;
		qp->recv_cq = recv_cq;
		*qpn = qp->qpn;
		h = i;
		break;
	}
out:
	pthread_mutex_unlock(&d->mu);
	return h;
}

int dbl_destroy_qp(struct dbl *d, uint32_t h)
{
	pthread_mutex_lock(&d->mu);
	struct dbl_qp *qp = qp_get(d, h);
	int rc = qp ? 0 : -EINVAL;
	if (qp) {
		/* tbv_destroy_qp tears the DV queue down itself; the handle is
		 * free for the next create_qp at once (lowest free slot, as
		 * the uverbs core's xarray hands out ids). */
		if (qp->dv)
			dv_teardown(qp);
		for (int i = 0; i < DBL_MAX_QP; i++)
			if (d->qp[i].used && d->qp[i].peer == (int)h)
				d->qp[i].peer = -1;
		/* The module's CQEs point at the ib_qp, which the core frees
		 * after destroy_qp; the uverbs poll copies wc->qp->qp_num
		 * from it (hellas-main:kernel/ibdev.c:7169). With
		 * freed_qp_num set, the unpolled CQEs of this QP in the
		 * private rings read that instead of the QP's number. */
		if (d->freed_qp_num_on) {
			for (int c = 0; c < DBL_MAX_CQ; c++) {
				struct dbl_cq *cq = &d->cq[c];
				if (!cq->used || cq->shm_mode)
					continue;
				for (uint32_t i = cq->ph; i != cq->pt; i++)
					if (cq->priv[i % cq->cqe].qp_num == qp->qpn)
						cq->priv[i % cq->cqe].qp_num = d->freed_qp_num;
			}
		}
		qp->used = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void dbl_connect(struct dbl *d, uint32_t a, uint32_t b)
{
	pthread_mutex_lock(&d->mu);
	d->qp[a].peer = (int)b;
	d->qp[b].peer = (int)a;
	pthread_mutex_unlock(&d->mu);
}

void dbl_flood_cq(struct dbl *d, uint32_t cq, uint32_t n)
{
	pthread_mutex_lock(&d->mu);
	for (uint32_t i = 0; i < n; i++) {
		struct usb4v_ib_uverbs_wc wc;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = 0xf100d000 + i;
		wc.opcode = USB4V_WC_RECV;
		cq_push(d, cq, &wc, 0);
	}
	pthread_mutex_unlock(&d->mu);
}

void dbl_set_poll_delay(struct dbl *d, uint32_t us)
{
	__atomic_store_n(&d->poll_delay_us, us, __ATOMIC_RELAXED);
}

void dbl_hold_polls(struct dbl *d, int hold)
{
	__atomic_store_n(&d->poll_hold, hold, __ATOMIC_RELEASE);
}

uint64_t dbl_polls_entered(struct dbl *d)
{
	return __atomic_load_n(&d->polls_entered, __ATOMIC_SEQ_CST);
}

uint64_t dbl_polls_done(struct dbl *d)
{
	return __atomic_load_n(&d->polls_done, __ATOMIC_SEQ_CST);
}

void dbl_spoil_dv_cq_tail(struct dbl *d, uint32_t h, uint32_t ahead)
{
	pthread_mutex_lock(&d->mu);
	struct dbl_qp *qp = qp_get(d, h);
	if (qp && qp->dv) {
		uint32_t head = __atomic_load_n(USB4V_DB_PRODUCER(qp->db, cq_head), __ATOMIC_ACQUIRE);
		__atomic_store_n(USB4V_DB_CONSUMER(qp->db, cq_tail), usb4v_dv_pack(head + qp->cq_entries + ahead, qp->gen),
				 __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->mu);
}

void dbl_set_rq_depth(struct dbl *d, uint32_t h, uint32_t depth)
{
	pthread_mutex_lock(&d->mu);
	if (h < DBL_MAX_QP && depth <= DBL_RQ_DEPTH)
		d->qp[h].rq_depth = depth;
	pthread_mutex_unlock(&d->mu);
}

void dbl_set_freed_qp_num(struct dbl *d, int on, uint32_t qpn)
{
	pthread_mutex_lock(&d->mu);
	d->freed_qp_num_on = on;
	d->freed_qp_num = qpn;
	pthread_mutex_unlock(&d->mu);
}

void dbl_set_rnr_wait(struct dbl *d, int on)
{
	pthread_mutex_lock(&d->mu);
	d->rnr_wait = on;
	pthread_mutex_unlock(&d->mu);
}

int dbl_qp_error(struct dbl *d, uint32_t h)
{
	pthread_mutex_lock(&d->mu);
	struct dbl_qp *qp = qp_get(d, h);
	if (qp) {
		/* modify_qp to ERR flushes every receive WR into the receive CQ
		 * (hellas-main:kernel/ibdev.c tbv_qp_flush_recv_wqes, :7136). */
		qp->err = 1;
		for (; qp->rh != qp->rt; qp->rh++) {
			struct dbl_recv *r = &qp->rq[qp->rh % DBL_RQ_DEPTH];
			struct usb4v_ib_uverbs_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = r->wr_id;
			wc.status = USB4V_WC_WR_FLUSH_ERR;
			wc.opcode = USB4V_WC_RECV;
			wc.qp_num = qp->qpn;
			cq_push(d, qp->recv_cq, &wc, 0);
			qp->flushed++;
		}
	}
	pthread_mutex_unlock(&d->mu);
	return qp ? 0 : -EINVAL;
}

void dbl_qp_counts(struct dbl *d, uint32_t h, uint64_t *posted, uint64_t *delivered, uint64_t *flushed, uint32_t *held)
{
	pthread_mutex_lock(&d->mu);
	struct dbl_qp *qp = &d->qp[h % DBL_MAX_QP];
	*posted = qp->posted;
	*delivered = qp->delivered;
	*flushed = qp->flushed;
	*held = qp->rt - qp->rh;
	pthread_mutex_unlock(&d->mu);
}

uint64_t dbl_rnr_naks(struct dbl *d)
{
	pthread_mutex_lock(&d->mu);
	uint64_t n = d->rnr_naks;
	pthread_mutex_unlock(&d->mu);
	return n;
}
