//go:build !usb4front

/* Soft-RoCE backend: WQEs written in place into the mapped rings, a
 * zero-WR POST_SEND as the doorbell, completions read from the CQ ring.
 * Field rules follow what kernel 6.1 rdma_rxe reads from rxe_send_wqe
 * (linux:drivers/infiniband/sw/rxe/rxe_req.c, rxe_verbs.c; the rdma-core rxe
 * provider fills the same fields). */
#include <errno.h>
#include <string.h>

#include "rxe_ring.h"

/* The doorbell: POST_SEND with no WRs makes the kernel run the requester
 * over what we published. One per batch, after the lock is dropped. */
int usb4v_rxe_doorbell(struct usb4v_qp *qp)
{
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_post_send cmd;
	} c;
	struct usb4v_ib_uverbs_post_send_resp resp;
	memset(&c, 0, sizeof(c));
	c.hdr.command = USB4V_IB_USER_VERBS_CMD_POST_SEND;
	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = sizeof(resp) / 4;
	c.cmd.response = (uint64_t)(uintptr_t)&resp;
	c.cmd.qp_handle = qp->handle;
	c.cmd.wqe_size = sizeof(struct usb4v_ibv_send_wr);
	ssize_t n = qp->sys->write(qp->sys->ctx, qp->cmd_fd, &c, sizeof(c));
	if (n < 0)
		return (int)-n;
	return n == (ssize_t)sizeof(c) ? 0 : EIO;
}

static int rxe_opcode_ok(uint32_t qpt, uint32_t op)
{
	switch (op) {
	case USB4V_WR_SEND:
	case USB4V_WR_SEND_WITH_IMM:
		return 1;
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM:
		return qpt == USB4V_QPT_RC || qpt == USB4V_QPT_UC;
	case USB4V_WR_RDMA_READ:
	case USB4V_WR_ATOMIC_CMP_AND_SWP:
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
	case USB4V_WR_LOCAL_INV:
		return qpt == USB4V_QPT_RC;
	case USB4V_WR_SEND_WITH_INV:
	case USB4V_WR_BIND_MW: /* linux:drivers/infiniband/sw/rxe/rxe_opcode.c rxe_wr_opcode_info */
		return qpt == USB4V_QPT_RC || qpt == USB4V_QPT_UC;
	default:
		return 0;
	}
}

/* The WQE's header from an ibv_send_wr: ids, flags, immediate (or the rkey
 * to invalidate) and the opcode's remote part; SGEs, inline data and UD
 * addressing are the caller's. post_send and the ibv_wr_* builders (wrex.c)
 * both fill WQEs with it. */
void usb4v_rxe_wqe_header(struct usb4v_rxe_send_wqe *wqe, const struct usb4v_ibv_send_wr *wr)
{
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr.wr_id = wr->wr_id;
	wqe->wr.opcode = wr->opcode; /* IB_UVERBS_WR_* == IBV_WR_* */
	wqe->wr.send_flags = wr->send_flags;
	wqe->wr.ex.imm_data = wr->imm_data; /* already big endian, as given */
	switch (wr->opcode) {
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM:
	case USB4V_WR_RDMA_READ:
	case USB4V_WR_ATOMIC_WRITE:
		wqe->wr.wr.rdma.remote_addr = wr->wr.rdma.remote_addr;
		wqe->wr.wr.rdma.rkey = wr->wr.rdma.rkey;
		wqe->iova = wr->wr.rdma.remote_addr;
		break;
	case USB4V_WR_ATOMIC_CMP_AND_SWP:
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
		wqe->wr.wr.atomic.remote_addr = wr->wr.atomic.remote_addr;
		wqe->wr.wr.atomic.compare_add = wr->wr.atomic.compare_add;
		wqe->wr.wr.atomic.swap = wr->wr.atomic.swap;
		wqe->wr.wr.atomic.rkey = wr->wr.atomic.rkey;
		wqe->iova = wr->wr.atomic.remote_addr;
		break;
	case USB4V_WR_BIND_MW: {
		uint32_t lkey = 0, mw_rkey;
		if (wr->ext.bind_mw.bind_info.mr) /* NULL: a zero-length bind, which unbinds */
			memcpy(&lkey, (const uint8_t *)wr->ext.bind_mw.bind_info.mr + USB4V_IBV_MR_LKEY, sizeof(lkey));
		memcpy(&mw_rkey, (const uint8_t *)wr->ext.bind_mw.mw + USB4V_IBV_MW_RKEY, sizeof(mw_rkey));
		wqe->wr.wr.mw.addr = wr->ext.bind_mw.bind_info.addr;
		wqe->wr.wr.mw.length = wr->ext.bind_mw.bind_info.length;
		wqe->wr.wr.mw.mr_lkey = lkey;
		wqe->wr.wr.mw.mw_rkey = mw_rkey;
		wqe->wr.wr.mw.rkey = wr->ext.bind_mw.rkey;
		wqe->wr.wr.mw.access = wr->ext.bind_mw.bind_info.mw_access_flags;
		break;
	}
	default:
		break; /* LOCAL_INV: the rkey is in ex.invalidate_rkey, copied above */
	}
}

static int rxe_post_one(struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr)
{
	struct usb4v_rxe_ring *sq = &qp->sq;
	size_t elem = (size_t)1 << sq->log2_elem;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge ||
	    (wr->num_sge > 0 && !wr->sg_list))
		return EINVAL;
	if (!rxe_opcode_ok(qp->qp_type, wr->opcode))
		return EINVAL;
	uint64_t length = 0;
	for (int i = 0; i < wr->num_sge; i++)
		length += wr->sg_list[i].length;
	if (length > UINT32_MAX)
		return EINVAL;
	/* A bind carries no data (rdma-core:providers/rxe/rxe.c validate_send_wr). */
	if (wr->opcode == USB4V_WR_BIND_MW &&
	    (wr->num_sge || wr->imm_data || !wr->ext.bind_mw.mw ||
	     (!wr->ext.bind_mw.bind_info.mr && wr->ext.bind_mw.bind_info.length)))
		return EINVAL;
	int is_atomic = wr->opcode == USB4V_WR_ATOMIC_CMP_AND_SWP ||
			wr->opcode == USB4V_WR_ATOMIC_FETCH_AND_ADD;
	if (is_atomic && (length < 8 || (wr->wr.atomic.remote_addr & 7)))
		return EINVAL;
	int is_inline = (wr->send_flags & USB4V_SEND_INLINE) != 0;
	if (is_inline && (length > qp->max_inline ||
			  sizeof(struct usb4v_rxe_send_wqe) + length > elem))
		return EINVAL;
	if (!is_inline && sizeof(struct usb4v_rxe_send_wqe) +
			  (size_t)wr->num_sge * sizeof(struct usb4v_rxe_sge) > elem)
		return EINVAL;
	const struct usb4v_ah *ah = NULL;
	if (qp->qp_type == USB4V_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		ah = (const struct usb4v_ah *)wr->wr.ud.ah;
	}
	if (rxe_full(sq))
		return ENOMEM;

	struct usb4v_rxe_send_wqe *wqe = rxe_producer_addr(sq);
	usb4v_rxe_wqe_header(wqe, wr);
	if (ah) { /* UD: sends only (rxe_opcode_ok) */
		wqe->wr.wr.ud.remote_qpn = wr->wr.ud.remote_qpn;
		wqe->wr.wr.ud.remote_qkey = wr->wr.ud.remote_qkey;
		wqe->wr.wr.ud.ah_num = ah->ah_num;
		if (!ah->ah_num) /* kernels before 5.14 read the AV from the WQE */
			wqe->wr.wr.ud.av = ah->av;
	}
	uint8_t *payload = (uint8_t *)wqe + sizeof(*wqe);
	if (is_inline) {
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(payload, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			payload += wr->sg_list[i].length;
		}
	} else {
		struct usb4v_rxe_sge *sge = (struct usb4v_rxe_sge *)payload;
		for (int i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
	}
	wqe->dma.length = (uint32_t)length;
	wqe->dma.resid = (uint32_t)length;
	wqe->dma.num_sge = (uint32_t)wr->num_sge;
	wqe->dma.cur_sge = 0;
	wqe->dma.sge_offset = 0;
	wqe->state = 0;
	rxe_advance_producer(sq);
	return 0;
}

int usb4v_rxe_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	int rc = 0, posted = 0;
	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		rc = rxe_post_one(qp, wr);
		if (rc) {
			*bad = wr;
			break;
		}
		posted++;
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (posted) {
		int db = usb4v_rxe_doorbell(qp);
		if (db && !rc)
			rc = db;
	}
	return rc;
}

int usb4v_rxe_post_recv(struct usb4v_rxe_ring *rq, uint32_t max_sge, struct usb4v_ibv_recv_wr *wr,
			struct usb4v_ibv_recv_wr **bad)
{
	size_t elem = (size_t)1 << rq->log2_elem;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge ||
		    (wr->num_sge > 0 && !wr->sg_list) ||
		    sizeof(struct usb4v_rxe_recv_wqe) + (size_t)wr->num_sge * sizeof(struct usb4v_rxe_sge) > elem) {
			*bad = wr;
			return EINVAL;
		}
		if (rxe_full(rq)) {
			*bad = wr;
			return ENOMEM;
		}
		struct usb4v_rxe_recv_wqe *wqe = rxe_producer_addr(rq);
		struct usb4v_rxe_sge *sge = (struct usb4v_rxe_sge *)((uint8_t *)wqe + sizeof(*wqe));
		uint64_t length = 0;
		memset(wqe, 0, sizeof(*wqe));
		wqe->wr_id = wr->wr_id;
		for (int i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
			length += wr->sg_list[i].length;
		}
		wqe->dma.length = (uint32_t)length;
		wqe->dma.resid = (uint32_t)length;
		wqe->dma.num_sge = (uint32_t)wr->num_sge;
		rxe_advance_producer(rq);
	}
	return 0;
}

int usb4v_rxe_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	return rxe_poll_locked(cq, ne, wc);
}
