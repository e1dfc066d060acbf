//go:build !usb4front

/* usb4 kernel-command backend: every post and poll is one legacy uverbs
 * write command, encoded as the uverbs core decodes it
 * (linux:drivers/infiniband/core/uverbs_cmd.c ib_uverbs_post_send,
 * ib_uverbs_unmarshall_recv, ib_uverbs_poll_cq, ib_uverbs_req_notify_cq):
 * header, command, wr_count WQEs of wqe_size bytes, then sge_count SGEs.
 * Long WR lists go out in chunks; resp.bad_wr is the 1-based index of the
 * failing WR within its chunk (0 when the kernel refused the command before
 * posting anything). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

enum { KCMD_MAX_WR = 16, KCMD_MAX_SGE = 64, KCMD_MAX_POLL = 256 };

static int kcmd_write(const struct usb4v_sys *sys, int fd, const void *buf, size_t len)
{
	ssize_t n = sys->write(sys->ctx, fd, buf, len);
	if (n < 0)
		return (int)-n;
	return n == (ssize_t)len ? 0 : EIO;
}

/* Encodes one ibv_send_wr as struct ib_uverbs_send_wr. */
static void encode_send_wr(const struct usb4v_ibv_send_wr *wr, struct usb4v_ib_uverbs_send_wr *u)
{
	memset(u, 0, sizeof(*u));
	u->wr_id = wr->wr_id;
	u->num_sge = (uint32_t)wr->num_sge;
	u->opcode = wr->opcode;
	u->send_flags = wr->send_flags;
	u->ex.imm_data = wr->imm_data;
	switch (wr->opcode) {
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM:
	case USB4V_WR_RDMA_READ:
		u->wr.rdma.remote_addr = wr->wr.rdma.remote_addr;
		u->wr.rdma.rkey = wr->wr.rdma.rkey;
		break;
	case USB4V_WR_ATOMIC_CMP_AND_SWP:
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
		u->wr.atomic.remote_addr = wr->wr.atomic.remote_addr;
		u->wr.atomic.compare_add = wr->wr.atomic.compare_add;
		u->wr.atomic.swap = wr->wr.atomic.swap;
		u->wr.atomic.rkey = wr->wr.atomic.rkey;
		break;
	default:
		break;
	}
}

/* The opcodes the uverbs core decodes in a POST_SEND (ib_uverbs_post_send:
 * UD takes SEND and SEND_WITH_IMM only). Any other opcode makes the core
 * refuse the whole command before the driver sees a WR (resp.bad_wr 0), so
 * it is refused here, at its WR, and the WRs before it are posted. */
static int kcmd_core_decodes(uint32_t qp_type, uint32_t opcode)
{
	if (qp_type == USB4V_QPT_UD)
		return opcode == USB4V_WR_SEND || opcode == USB4V_WR_SEND_WITH_IMM;
	switch (opcode) {
	case USB4V_WR_RDMA_WRITE:
	case USB4V_WR_RDMA_WRITE_WITH_IMM:
	case USB4V_WR_RDMA_READ:
	case USB4V_WR_ATOMIC_CMP_AND_SWP:
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
	case USB4V_WR_SEND:
	case USB4V_WR_SEND_WITH_IMM:
	case USB4V_WR_SEND_WITH_INV:
		return 1;
	default:
		return 0;
	}
}

/* kcmd_send_wr_refusal: why wr cannot go to the kernel, or NULL. num_sge is
 * checked against the QP's own max_send_sge because hellas-main only checks
 * its device maximum (hellas-main:kernel/ibdev.c tbv_prepare_send_segments,
 * TBV_IBDEV_MAX_SGE) and would post a WR the QP was not created for. */
static const char *kcmd_send_wr_refusal(const struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr)
{
	if (wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list))
		return "a negative num_sge or a NULL sg_list";
	if ((uint32_t)wr->num_sge > qp->max_send_sge || wr->num_sge > KCMD_MAX_SGE)
		return "num_sge over the QP's max_send_sge";
	if (qp->qp_type == USB4V_QPT_UD && !wr->wr.ud.ah)
		return "a UD WR without an address handle";
	if (!kcmd_core_decodes(qp->qp_type, wr->opcode))
		return "an opcode the kernel does not decode for this QP type";
	return NULL;
}

/* One line per QP: a program that posts bad WRs in a loop would otherwise
 * flood stderr. */
static void kcmd_log_refusal(struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr, const char *why)
{
	if (__atomic_exchange_n(&qp->kcmd_refusal_logged, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr,
		"libusb4_rdma: qp 0x%x: post_send refused a WR with %s (opcode %u, num_sge %d, max_send_sge %u): "
		"EINVAL (logged once per QP)\n",
		qp->qp_num, why, wr->opcode, wr->num_sge, qp->max_send_sge);
}

int usb4v_kcmd_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_post_send cmd;
		struct usb4v_ib_uverbs_send_wr wrs[KCMD_MAX_WR];
		struct usb4v_ib_uverbs_sge sges[KCMD_MAX_SGE];
	} b;
	struct usb4v_ibv_send_wr *chunk[KCMD_MAX_WR];
	while (wr) {
		uint32_t nwr = 0, nsge = 0;
		struct usb4v_ib_uverbs_sge sg[KCMD_MAX_SGE];
		for (; wr && nwr < KCMD_MAX_WR; wr = wr->next) {
			const char *why = kcmd_send_wr_refusal(qp, wr);
			if (why) {
				if (nwr == 0) {
					kcmd_log_refusal(qp, wr, why);
					*bad = wr;
					return EINVAL;
				}
				break; /* send what we have; this WR fails next round */
			}
			if (nsge + (uint32_t)wr->num_sge > KCMD_MAX_SGE)
				break;
			encode_send_wr(wr, &b.wrs[nwr]);
			if (qp->qp_type == USB4V_QPT_UD) {
				b.wrs[nwr].wr.ud.ah = wr->wr.ud.ah->handle;
				b.wrs[nwr].wr.ud.remote_qpn = wr->wr.ud.remote_qpn;
				b.wrs[nwr].wr.ud.remote_qkey = wr->wr.ud.remote_qkey;
			}
			for (int i = 0; i < wr->num_sge; i++) {
				sg[nsge].addr = wr->sg_list[i].addr;
				sg[nsge].length = wr->sg_list[i].length;
				sg[nsge].lkey = wr->sg_list[i].lkey;
				nsge++;
			}
			chunk[nwr++] = wr;
		}
		/* SGEs follow the WQEs directly. */
		size_t len = sizeof(b.hdr) + sizeof(b.cmd) + nwr * sizeof(b.wrs[0]);
		memcpy((uint8_t *)&b + len, sg, nsge * sizeof(sg[0]));
		len += nsge * sizeof(sg[0]);
		struct usb4v_ib_uverbs_post_send_resp resp = {0};
		b.hdr.command = USB4V_IB_USER_VERBS_CMD_POST_SEND;
		b.hdr.in_words = (uint16_t)(len / 4);
		b.hdr.out_words = sizeof(resp) / 4;
		b.cmd.response = (uint64_t)(uintptr_t)&resp;
		b.cmd.qp_handle = qp->handle;
		b.cmd.wr_count = nwr;
		b.cmd.sge_count = nsge;
		b.cmd.wqe_size = sizeof(b.wrs[0]);
		int rc = kcmd_write(qp->sys, qp->cmd_fd, &b, len);
		if (rc) {
			uint32_t i = resp.bad_wr ? resp.bad_wr - 1 : 0;
			*bad = chunk[i < nwr ? i : 0];
			return rc;
		}
	}
	return 0;
}

/* usb4v_kcmd_post_send_whole posts wr's list in one POST_SEND command or
 * not at all, for ibv_wr_complete (ibv_wr_post(3): on an error the entire
 * posting is aborted): every WR is checked before the command, and a list
 * longer than post_send's 16-WR chunks goes in one larger command instead
 * of several. What the kernel does with the command is the kernel's:
 * ib_uverbs_post_send hands the driver the whole list. */
int usb4v_kcmd_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	size_t nwr = 0, nsge = 0;
	for (struct usb4v_ibv_send_wr *p = wr; p; p = p->next) {
		const char *why = kcmd_send_wr_refusal(qp, p);
		if (why) {
			kcmd_log_refusal(qp, p, why);
			/* Nothing of the list went out: the head is the first
			 * WR the kernel did not take (usb4v_post_send_whole
			 * counts the signaled WRs before *bad as the CQ's
			 * kernel work). */
			*bad = wr;
			return EINVAL;
		}
		nwr++;
		nsge += (size_t)p->num_sge;
	}
	if (nwr <= KCMD_MAX_WR && nsge <= KCMD_MAX_SGE)
		return usb4v_kcmd_post_send(qp, wr, bad); /* one chunk: every WR passed */
	struct usb4v_ib_uverbs_cmd_hdr hdr;
	struct usb4v_ib_uverbs_post_send cmd;
	size_t len = sizeof(hdr) + sizeof(cmd) + nwr * sizeof(struct usb4v_ib_uverbs_send_wr) +
		     nsge * sizeof(struct usb4v_ib_uverbs_sge);
	if (len / 4 > UINT16_MAX) { /* hdr.in_words is 16 bits */
		*bad = wr;
		return ENOMEM;
	}
	uint8_t *buf = calloc(1, len);
	if (!buf) {
		*bad = wr;
		return ENOMEM;
	}
	struct usb4v_ib_uverbs_send_wr *u = (void *)(buf + sizeof(hdr) + sizeof(cmd));
	struct usb4v_ib_uverbs_sge *sg = (void *)(u + nwr);
	size_t i = 0, k = 0;
	for (struct usb4v_ibv_send_wr *p = wr; p; p = p->next, i++) {
		encode_send_wr(p, &u[i]);
		if (qp->qp_type == USB4V_QPT_UD) {
			u[i].wr.ud.ah = p->wr.ud.ah->handle;
			u[i].wr.ud.remote_qpn = p->wr.ud.remote_qpn;
			u[i].wr.ud.remote_qkey = p->wr.ud.remote_qkey;
		}
		for (int j = 0; j < p->num_sge; j++, k++) {
			sg[k].addr = p->sg_list[j].addr;
			sg[k].length = p->sg_list[j].length;
			sg[k].lkey = p->sg_list[j].lkey;
		}
	}
	struct usb4v_ib_uverbs_post_send_resp resp = {0};
	memset(&hdr, 0, sizeof(hdr));
	memset(&cmd, 0, sizeof(cmd));
	hdr.command = USB4V_IB_USER_VERBS_CMD_POST_SEND;
	hdr.in_words = (uint16_t)(len / 4);
	hdr.out_words = sizeof(resp) / 4;
	cmd.response = (uint64_t)(uintptr_t)&resp;
	cmd.qp_handle = qp->handle;
	cmd.wr_count = (uint32_t)nwr;
	cmd.sge_count = (uint32_t)nsge;
	cmd.wqe_size = sizeof(*u);
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), &cmd, sizeof(cmd));
	int rc = kcmd_write(qp->sys, qp->cmd_fd, buf, len);
	free(buf);
	if (rc) {
		struct usb4v_ibv_send_wr *p = wr;
		for (uint32_t n = resp.bad_wr ? resp.bad_wr - 1 : 0; n && p->next; n--)
			p = p->next;
		*bad = p;
	}
	return rc;
}

int usb4v_kcmd_post_recv(const struct usb4v_sys *sys, int fd, uint32_t command, uint32_t handle,
			 struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad)
{
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_post_recv cmd;
		struct usb4v_ib_uverbs_recv_wr wrs[KCMD_MAX_WR];
		struct usb4v_ib_uverbs_sge sges[KCMD_MAX_SGE];
	} b;
	struct usb4v_ibv_recv_wr *chunk[KCMD_MAX_WR];
	while (wr) {
		uint32_t nwr = 0, nsge = 0;
		struct usb4v_ib_uverbs_sge sg[KCMD_MAX_SGE];
		for (; wr && nwr < KCMD_MAX_WR; wr = wr->next) {
			if (wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list) || wr->num_sge > KCMD_MAX_SGE) {
				if (nwr == 0) {
					*bad = wr;
					return EINVAL;
				}
				break;
			}
			if (nsge + (uint32_t)wr->num_sge > KCMD_MAX_SGE)
				break;
			memset(&b.wrs[nwr], 0, sizeof(b.wrs[nwr]));
			b.wrs[nwr].wr_id = wr->wr_id;
			b.wrs[nwr].num_sge = (uint32_t)wr->num_sge;
			for (int i = 0; i < wr->num_sge; i++) {
				sg[nsge].addr = wr->sg_list[i].addr;
				sg[nsge].length = wr->sg_list[i].length;
				sg[nsge].lkey = wr->sg_list[i].lkey;
				nsge++;
			}
			chunk[nwr++] = wr;
		}
		size_t len = sizeof(b.hdr) + sizeof(b.cmd) + nwr * sizeof(b.wrs[0]);
		memcpy((uint8_t *)&b + len, sg, nsge * sizeof(sg[0]));
		len += nsge * sizeof(sg[0]);
		struct usb4v_ib_uverbs_post_recv_resp resp = {0};
		b.hdr.command = command;
		b.hdr.in_words = (uint16_t)(len / 4);
		b.hdr.out_words = sizeof(resp) / 4;
		b.cmd.response = (uint64_t)(uintptr_t)&resp;
		b.cmd.qp_handle = handle;
		b.cmd.wr_count = nwr;
		b.cmd.sge_count = nsge;
		b.cmd.wqe_size = sizeof(b.wrs[0]);
		int rc = kcmd_write(sys, fd, &b, len);
		if (rc) {
			uint32_t i = resp.bad_wr ? resp.bad_wr - 1 : 0;
			*bad = chunk[i < nwr ? i : 0];
			return rc;
		}
	}
	return 0;
}

/* Caller holds cq->poll_mu, not cq->lock (engine.c usb4v_poll_cq). */
int usb4v_kcmd_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	if (ne > KCMD_MAX_POLL)
		ne = KCMD_MAX_POLL;
	size_t need = sizeof(struct usb4v_ib_uverbs_poll_cq_resp) + (size_t)ne * sizeof(struct usb4v_ib_uverbs_wc);
	if (cq->pollbuf_len < need) {
		size_t want = sizeof(struct usb4v_ib_uverbs_poll_cq_resp) +
			      KCMD_MAX_POLL * sizeof(struct usb4v_ib_uverbs_wc);
		uint8_t *p = realloc(cq->pollbuf, want);
		if (!p)
			return -ENOMEM;
		cq->pollbuf = p;
		cq->pollbuf_len = want;
	}
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_poll_cq cmd;
	} c;
	memset(&c, 0, sizeof(c));
	struct usb4v_ib_uverbs_poll_cq_resp *resp = (void *)cq->pollbuf;
	resp->count = 0;
	c.hdr.command = USB4V_IB_USER_VERBS_CMD_POLL_CQ;
	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = (uint16_t)(need / 4);
	c.cmd.response = (uint64_t)(uintptr_t)cq->pollbuf;
	c.cmd.cq_handle = cq->handle;
	c.cmd.ne = (uint32_t)ne;
	int rc = kcmd_write(cq->sys, cq->cmd_fd, &c, sizeof(c));
	if (rc)
		return -rc;
	uint32_t count = resp->count;
	if (count > (uint32_t)ne)
		return -EIO; /* the kernel never returns more than asked */
	const struct usb4v_ib_uverbs_wc *u = (const void *)(cq->pollbuf + sizeof(*resp));
	for (uint32_t i = 0; i < count; i++)
		usb4v_uwc_to_ibv(&u[i], &wc[i]);
	return (int)count;
}

int usb4v_kcmd_req_notify(const struct usb4v_sys *sys, int fd, uint32_t handle, int solicited)
{
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_req_notify_cq cmd;
	} c;
	memset(&c, 0, sizeof(c));
	c.hdr.command = USB4V_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = 0;
	c.cmd.cq_handle = handle;
	c.cmd.solicited_only = solicited ? 1 : 0;
	return -kcmd_write(sys, fd, &c, sizeof(c));
}
