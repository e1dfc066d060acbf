/*
 * usb4 Direct Verbs send queues, ABI v2 (pleite@eca80ec:userspace/usb4_rdma/
 * usb4_rdma_dv.h; reference usb4-kernel-and-consumers.md §1.9).
 *
 * Ownership (doorbell record, two cache lines): user space writes the
 * producer line (sq_tail, cq_head, generation), the kernel writes the
 * consumer line (sq_head, cq_tail, qp_state, generation). Heads and tails
 * are packed: 24-bit monotonic index | 8-bit generation. We write a WQE
 * (generation inside), then release-store producer.sq_tail; the kernel
 * acquire-loads it, consumes, release-stores consumer.sq_head. It writes
 * CQEs in SQ order and release-stores consumer.cq_tail; we acquire-load
 * cq_tail, copy CQEs and release-store producer.cq_head. Slot = index %
 * entries, so entries are powers of two (2^24 is a multiple of them).
 *
 * Completion order: a QP on DV still posts what DV cannot carry (0 or >1
 * SGE, inline, opcodes outside the caps) through the kernel. Each signaled
 * WR gets a ticket (DV or KERNEL) in posting order; the QP's kernel-path send
 * completions are held in a stash until their ticket reaches the head, so
 * ibv_poll_cq on the send CQ returns both kinds in posting order. Tickets
 * are written under sq_lock (tail) and read under cq->lock (head); the
 * indices are atomics for that hand-over.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define IDX_MASK USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK

int usb4v_dv_query_caps(const struct usb4v_sys *sys, int cmd_fd, uint32_t driver_id,
			struct usb4v_usb4_rdma_dv_query_caps_resp *caps)
{
	memset(caps, 0, sizeof(*caps));
	struct usb4v_ib_uverbs_attr a = {
		.attr_id = USB4V_USB4_RDMA_DV_ATTR_QUERY_CAPS_RESP,
		.len = sizeof(*caps),
		.flags = USB4V_UVERBS_ATTR_F_MANDATORY,
		.data = (uint64_t)(uintptr_t)caps,
	};
	return usb4v_uverbs_ioctl(sys, cmd_fd, driver_id, USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
				  USB4V_USB4_RDMA_DV_METHOD_QUERY_CAPS, &a, 1);
}

static uint32_t pow2_floor(uint32_t v)
{
	uint32_t p = 1;
	while (p <= v / 2)
		p *= 2;
	return p;
}

int usb4v_qp_try_dv(struct usb4v_qp *qp, uint32_t driver_id,
		    const struct usb4v_usb4_rdma_dv_query_caps_resp *caps,
		    uint32_t sq_entries, uint32_t cq_entries)
{
	const char *why = NULL;
	if (caps->abi_version != USB4V_USB4_RDMA_DV_ABI_VERSION)
		why = "unsupported DV ABI version";
	else if (caps->wqe_size != USB4V_USB4_RDMA_DV_WQE_SIZE || caps->cqe_size != USB4V_USB4_RDMA_DV_CQE_SIZE)
		why = "unexpected WQE/CQE size";
	else if (caps->doorbell_page_size != USB4V_USB4_RDMA_DV_DOORBELL_PAGE_SIZE ||
		 caps->tail_index_bits != USB4V_USB4_RDMA_DV_TAIL_INDEX_BITS)
		why = "unexpected doorbell layout";
	else if (qp->qp_type != USB4V_QPT_RC && qp->qp_type != USB4V_QPT_UC)
		why = "DV carries RC/UC only";
	else if (!qp->send_cq || qp->send_backend != USB4V_BACKEND_KCMD)
		why = "send path is not usb4 kernel commands";
	if (why) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason), "%s", why);
		return 0;
	}
	if (sq_entries == 0)
		sq_entries = caps->default_sq_entries;
	if (cq_entries == 0)
		cq_entries = caps->default_cq_entries;
	if (sq_entries > caps->max_sq_entries)
		sq_entries = caps->max_sq_entries;
	if (cq_entries > caps->max_cq_entries)
		cq_entries = caps->max_cq_entries;
	sq_entries = pow2_floor(sq_entries);
	cq_entries = pow2_floor(cq_entries);
	if (sq_entries < USB4V_USB4_RDMA_DV_MIN_QUEUE_ENTRIES || cq_entries < USB4V_USB4_RDMA_DV_MIN_QUEUE_ENTRIES) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason), "queue depth below minimum");
		return 0;
	}

	struct usb4v_dv *dv = calloc(1, sizeof(*dv));
	if (!dv)
		return -ENOMEM;
	size_t sq_bytes = (size_t)sq_entries * 64, cq_bytes = (size_t)cq_entries * 64;
	/* Separate page-aligned allocations: the kernel rejects overlap, and
	 * the doorbell record sits alone in its own 4 KiB page. */
	dv->sq = aligned_alloc(4096, (sq_bytes + 4095) & ~(size_t)4095);
	dv->cq = aligned_alloc(4096, (cq_bytes + 4095) & ~(size_t)4095);
	dv->db = aligned_alloc(4096, 4096);
	if (!dv->sq || !dv->cq || !dv->db) {
		free(dv->sq);
		free(dv->cq);
		free(dv->db);
		free(dv);
		return -ENOMEM;
	}
	memset(dv->sq, 0, sq_bytes);
	memset(dv->cq, 0, cq_bytes);
	memset(dv->db, 0, 4096);
	dv->sq_entries = sq_entries;
	dv->cq_entries = cq_entries;
	dv->caps = caps->caps;

	struct usb4v_usb4_rdma_dv_queue_create req = {
		.abi_version = USB4V_USB4_RDMA_DV_ABI_VERSION,
		.sq_addr = (uint64_t)(uintptr_t)dv->sq,
		.cq_addr = (uint64_t)(uintptr_t)dv->cq,
		.doorbell_addr = (uint64_t)(uintptr_t)dv->db,
		.sq_entries = sq_entries,
		.cq_entries = cq_entries,
		.sq_stride = USB4V_USB4_RDMA_DV_WQE_SIZE,
		.cq_stride = USB4V_USB4_RDMA_DV_CQE_SIZE,
	};
	struct usb4v_usb4_rdma_dv_queue_resp resp;
	memset(&resp, 0, sizeof(resp));
	struct usb4v_ib_uverbs_attr a[3] = {
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP, .flags = USB4V_UVERBS_ATTR_F_MANDATORY,
		  .data = qp->handle },
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ, .len = sizeof(req),
		  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&req },
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP, .len = sizeof(resp),
		  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&resp },
	};
	int rc = usb4v_uverbs_ioctl(qp->sys, qp->cmd_fd, driver_id, USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
				    USB4V_USB4_RDMA_DV_METHOD_CREATE_QUEUE, a, 3);
	uint32_t kgen = __atomic_load_n(USB4V_DB_CONSUMER(dv->db, generation), __ATOMIC_ACQUIRE);
	if (rc == 0 && (resp.generation > 0xff || kgen != resp.generation))
		rc = -EPROTO; /* generation must fit the 8 packed bits and match the page */
	if (rc < 0) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason), "CREATE_QUEUE failed: errno %d", -rc);
		free(dv->sq);
		free(dv->cq);
		free(dv->db);
		free(dv);
		return 0;
	}
	dv->gen = (uint8_t)resp.generation;
	/* Mirror the generation before producing anything. */
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, generation), resp.generation, __ATOMIC_RELAXED);
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, cq_head), usb4v_dv_pack(0, dv->gen), __ATOMIC_RELAXED);
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, sq_tail), usb4v_dv_pack(0, dv->gen), __ATOMIC_RELEASE);
	dv->kick = 1;

	struct usb4v_cq *cq = qp->send_cq;
	pthread_spin_lock(&cq->lock);
	qp->dv = dv;
	qp->dv_next = cq->dv_qps;
	cq->dv_qps = qp;
	cq->slow |= USB4V_CQ_SLOW_DV;
	qp->send_backend = USB4V_BACKEND_DV;
	pthread_spin_unlock(&cq->lock);
	qp->fallback_reason[0] = 0;
	return 1;
}

/* Returns 0 (encoded), EOPNOTSUPP (valid, but DV cannot carry it: use the
 * kernel path) or EINVAL. */
int usb4v_dv_encode_wqe(const struct usb4v_ibv_send_wr *wr, uint32_t caps, uint8_t gen,
			struct usb4v_usb4_rdma_dv_wqe *out)
{
	uint16_t op;
	uint32_t need;
	if (wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list))
		return EINVAL;
	switch (wr->opcode) {
	case USB4V_WR_SEND: op = USB4V_USB4_RDMA_DV_WQE_SEND; need = USB4V_USB4_RDMA_DV_CAP_SEND; break;
	case USB4V_WR_SEND_WITH_IMM: op = USB4V_USB4_RDMA_DV_WQE_SEND_IMM; need = USB4V_USB4_RDMA_DV_CAP_SEND_IMM; break;
	case USB4V_WR_RDMA_WRITE: op = USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE; need = USB4V_USB4_RDMA_DV_CAP_WRITE; break;
	case USB4V_WR_RDMA_WRITE_WITH_IMM:
		op = USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE_IMM; need = USB4V_USB4_RDMA_DV_CAP_WRITE_IMM; break;
	case USB4V_WR_RDMA_READ: op = USB4V_USB4_RDMA_DV_WQE_RDMA_READ; need = USB4V_USB4_RDMA_DV_CAP_READ; break;
	case USB4V_WR_ATOMIC_FETCH_AND_ADD:
		op = USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD; need = USB4V_USB4_RDMA_DV_CAP_ATOMIC_FETCH_ADD; break;
	case USB4V_WR_ATOMIC_CMP_AND_SWP:
		op = USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP; need = USB4V_USB4_RDMA_DV_CAP_ATOMIC_CMP_SWAP; break;
	default:
		return EOPNOTSUPP;
	}
	if (!(caps & need) || wr->num_sge != 1 || (wr->send_flags & USB4V_SEND_INLINE))
		return EOPNOTSUPP;
	if ((wr->send_flags & USB4V_SEND_FENCE) && !(caps & USB4V_USB4_RDMA_DV_CAP_FENCE))
		return EOPNOTSUPP;
	int atomic = op >= USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD;
	if (atomic && (wr->sg_list[0].length != 8 || (wr->wr.atomic.remote_addr & 7)))
		return EINVAL;
	memset(out, 0, sizeof(*out));
	out->opcode = op;
	out->length = wr->sg_list[0].length;
	out->wr_id = wr->wr_id;
	out->local_addr = wr->sg_list[0].addr;
	out->lkey = wr->sg_list[0].lkey;
	out->generation = gen;
	/* ibv_send_wr carries imm_data in network order; the DV WQE wants it in
	 * CPU order (pleite-gda:kernel/ibdev.c tbv_dv_post_wqe converts it with
	 * cpu_to_be32). */
	out->imm_data = ntohl(wr->imm_data);
	if (wr->send_flags & USB4V_SEND_SIGNALED)
		out->flags |= USB4V_USB4_RDMA_DV_WQE_F_SIGNALED;
	if (wr->send_flags & USB4V_SEND_SOLICITED)
		out->flags |= USB4V_USB4_RDMA_DV_WQE_F_SOLICITED;
	if (wr->send_flags & USB4V_SEND_FENCE)
		out->flags |= USB4V_USB4_RDMA_DV_WQE_F_FENCE;
	if (atomic) {
		out->remote_addr = wr->wr.atomic.remote_addr;
		out->rkey = wr->wr.atomic.rkey;
		if (op == USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD) {
			out->reserved1[0] = wr->wr.atomic.compare_add;
		} else {
			out->reserved1[0] = wr->wr.atomic.swap;
			out->reserved1[1] = wr->wr.atomic.compare_add;
		}
	} else if (op != USB4V_USB4_RDMA_DV_WQE_SEND && op != USB4V_USB4_RDMA_DV_WQE_SEND_IMM) {
		out->remote_addr = wr->wr.rdma.remote_addr;
		out->rkey = wr->wr.rdma.rkey;
	}
	return 0;
}

void usb4v_dv_cqe_to_ibv(const struct usb4v_usb4_rdma_dv_cqe *cqe, uint32_t qp_num, struct usb4v_ibv_wc *out)
{
	memset(out, 0, sizeof(*out));
	out->wr_id = cqe->wr_id;
	out->qp_num = qp_num;
	out->byte_len = cqe->byte_len;
	out->vendor_err = cqe->vendor_err;
	switch (cqe->status) {
	case USB4V_USB4_RDMA_DV_CQE_SUCCESS: out->status = USB4V_WC_SUCCESS; break;
	case USB4V_USB4_RDMA_DV_CQE_WR_FLUSH_ERR: out->status = USB4V_WC_WR_FLUSH_ERR; break;
	case USB4V_USB4_RDMA_DV_CQE_LOCAL_LEN_ERR: out->status = USB4V_WC_LOC_LEN_ERR; break;
	case USB4V_USB4_RDMA_DV_CQE_LOCAL_PROT_ERR: out->status = USB4V_WC_LOC_PROT_ERR; break;
	case USB4V_USB4_RDMA_DV_CQE_REMOTE_ACCESS_ERR: out->status = USB4V_WC_REM_ACCESS_ERR; break;
	case USB4V_USB4_RDMA_DV_CQE_RETRY_EXC_ERR: out->status = USB4V_WC_RETRY_EXC_ERR; break;
	default:
		/* STALE_GEN and anything unknown: general error, DV status kept
		 * in vendor_err so it can be told apart. */
		out->status = USB4V_WC_GENERAL_ERR;
		if (!out->vendor_err)
			out->vendor_err = cqe->status;
		break;
	}
	switch (cqe->opcode) {
	case USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE:
	case USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE_IMM: out->opcode = USB4V_WC_RDMA_WRITE; break;
	case USB4V_USB4_RDMA_DV_WQE_RDMA_READ: out->opcode = USB4V_WC_RDMA_READ; break;
	case USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD: out->opcode = USB4V_WC_FETCH_ADD; break;
	case USB4V_USB4_RDMA_DV_WQE_ATOMIC_SWAP:
	case USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP: out->opcode = USB4V_WC_COMP_SWAP; break;
	default: out->opcode = USB4V_WC_SEND; break;
	}
}

static int ticket_push(struct usb4v_dv *dv, uint8_t kind)
{
	uint32_t t = __atomic_load_n(&dv->t_tail, __ATOMIC_RELAXED);
	uint32_t h = __atomic_load_n(&dv->t_head, __ATOMIC_ACQUIRE);
	if (t - h >= USB4V_DV_TICKETS)
		return ENOMEM;
	dv->tickets[t % USB4V_DV_TICKETS] = kind;
	__atomic_store_n(&dv->t_tail, t + 1, __ATOMIC_RELEASE);
	return 0;
}

static int dv_kick(struct usb4v_qp *qp, uint32_t packed_tail)
{
	struct usb4v_usb4_rdma_dv_kick k = { .sq_tail = packed_tail };
	struct usb4v_ib_uverbs_attr a[2] = {
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_KICK_QP, .flags = USB4V_UVERBS_ATTR_F_MANDATORY,
		  .data = qp->handle },
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_KICK_REQ, .len = sizeof(k),
		  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&k },
	};
	/* usb4 registers no driver id (RDMA_DRIVER_UNKNOWN == 0). */
	int rc = usb4v_uverbs_ioctl(qp->sys, qp->cmd_fd, 0, USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
				    USB4V_USB4_RDMA_DV_METHOD_KICK, a, 2);
	return rc < 0 ? -rc : 0;
}

int usb4v_dv_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	struct usb4v_dv *dv = qp->dv;
	int rc = 0, pending_kick = 0;
	pthread_spin_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		int signaled = qp->sq_sig_all || (wr->send_flags & USB4V_SEND_SIGNALED);
		struct usb4v_usb4_rdma_dv_wqe wqe;
		int enc = usb4v_dv_encode_wqe(wr, dv->caps, dv->gen, &wqe);
		if (enc == EOPNOTSUPP) {
			/* Kernel path for this one WR. Kick first so the DV WRs
			 * before it are admitted first. */
			if (pending_kick) {
				rc = dv_kick(qp, usb4v_dv_pack(dv->sq_tail, dv->gen));
				pending_kick = 0;
				if (rc) {
					*bad = wr;
					break;
				}
			}
			struct usb4v_ibv_send_wr one = *wr, *b = NULL;
			one.next = NULL;
			if (signaled && (rc = ticket_push(dv, USB4V_TICKET_KERNEL)) != 0) {
				*bad = wr;
				break;
			}
			rc = usb4v_kcmd_post_send(qp, &one, &b);
			if (rc) {
				if (signaled) /* take the ticket back */
					__atomic_store_n(&dv->t_tail, dv->t_tail - 1, __ATOMIC_RELEASE);
				*bad = wr;
				break;
			}
			continue;
		}
		if (enc) {
			rc = enc;
			*bad = wr;
			break;
		}
		if (qp->sq_sig_all)
			wqe.flags |= USB4V_USB4_RDMA_DV_WQE_F_SIGNALED;
		uint32_t head = __atomic_load_n(USB4V_DB_CONSUMER(dv->db, sq_head), __ATOMIC_ACQUIRE) & IDX_MASK;
		if (((dv->sq_tail - head) & IDX_MASK) >= dv->sq_entries ||
		    (signaled && __atomic_load_n(&dv->signaled_inflight, __ATOMIC_ACQUIRE) >= dv->cq_entries)) {
			rc = ENOMEM;
			*bad = wr;
			break;
		}
		if (signaled && (rc = ticket_push(dv, USB4V_TICKET_DV)) != 0) {
			*bad = wr;
			break;
		}
		if (signaled)
			__atomic_add_fetch(&dv->signaled_inflight, 1, __ATOMIC_RELEASE);
		dv->sq[dv->sq_tail % dv->sq_entries] = wqe;
		dv->sq_tail = (dv->sq_tail + 1) & IDX_MASK;
		__atomic_store_n(USB4V_DB_PRODUCER(dv->db, sq_tail), usb4v_dv_pack(dv->sq_tail, dv->gen), __ATOMIC_RELEASE);
		pending_kick = 1;
	}
	uint32_t tail = usb4v_dv_pack(dv->sq_tail, dv->gen);
	pthread_spin_unlock(&qp->sq_lock);
	if (pending_kick && dv->kick) {
		int k = dv_kick(qp, tail);
		if (k && !rc)
			rc = k;
	}
	return rc;
}

/* Next DV CQE of the QP, or NULL. Caller holds the send CQ's lock. */
static const struct usb4v_usb4_rdma_dv_cqe *dv_peek(struct usb4v_dv *dv)
{
	uint32_t tail = __atomic_load_n(USB4V_DB_CONSUMER(dv->db, cq_tail), __ATOMIC_ACQUIRE);
	if ((tail >> 24) != dv->gen)
		return NULL; /* stale lifetime: nothing valid to read */
	if ((tail & IDX_MASK) == dv->cq_head)
		return NULL;
	return &dv->cq[dv->cq_head % dv->cq_entries];
}

static void dv_pop(struct usb4v_dv *dv)
{
	dv->cq_head = (dv->cq_head + 1) & IDX_MASK;
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, cq_head), usb4v_dv_pack(dv->cq_head, dv->gen), __ATOMIC_RELEASE);
}

int usb4v_dv_poll_merge(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	int n = 0;
	for (struct usb4v_qp *qp = cq->dv_qps; qp && n < ne; qp = qp->dv_next) {
		struct usb4v_dv *dv = qp->dv;
		while (n < ne) {
			uint32_t h = dv->t_head, t = __atomic_load_n(&dv->t_tail, __ATOMIC_ACQUIRE);
			uint8_t kind = h != t ? dv->tickets[h % USB4V_DV_TICKETS] : 0;
			const struct usb4v_usb4_rdma_dv_cqe *cqe = dv_peek(dv);
			if (cqe && kind != USB4V_TICKET_KERNEL) {
				struct usb4v_usb4_rdma_dv_cqe copy = *cqe;
				dv_pop(dv);
				usb4v_dv_cqe_to_ibv(&copy, qp->qp_num, &wc[n++]);
				if (kind == USB4V_TICKET_DV) {
					__atomic_store_n(&dv->t_head, h + 1, __ATOMIC_RELEASE);
					__atomic_sub_fetch(&dv->signaled_inflight, 1, __ATOMIC_RELEASE);
				}
				continue;
			}
			if (kind == USB4V_TICKET_KERNEL && dv->s_head != dv->s_tail) {
				wc[n++] = dv->stash[dv->s_head % 64];
				dv->s_head++;
				__atomic_store_n(&dv->t_head, h + 1, __ATOMIC_RELEASE);
				continue;
			}
			break;
		}
	}
	return n;
}

int usb4v_dv_route_kernel_wc(struct usb4v_cq *cq, const struct usb4v_ibv_wc *wc)
{
	if (wc->opcode & USB4V_WC_RECV)
		return 0;
	for (struct usb4v_qp *qp = cq->dv_qps; qp; qp = qp->dv_next) {
		if (qp->qp_num != wc->qp_num)
			continue;
		struct usb4v_dv *dv = qp->dv;
		/* Only hold it if a KERNEL ticket is waiting for it. */
		uint32_t waiting = 0, t = __atomic_load_n(&dv->t_tail, __ATOMIC_ACQUIRE);
		for (uint32_t i = dv->t_head; i != t; i++)
			if (dv->tickets[i % USB4V_DV_TICKETS] == USB4V_TICKET_KERNEL)
				waiting++;
		if (waiting <= dv->s_tail - dv->s_head || dv->s_tail - dv->s_head >= 64)
			return 0;
		dv->stash[dv->s_tail % 64] = *wc;
		dv->s_tail++;
		return 1;
	}
	return 0;
}
