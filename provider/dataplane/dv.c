//go:build !usb4front

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
 * One owner of the send queue: both DV kernels answer EBUSY to an ordinary
 * post_send on a QP that has a DV queue (pleite-gda:kernel/ibdev.c
 * tbv_qp_post_status, hellas-gda-v2:kernel/ibdev.c tbv_post_send), so a DV
 * QP never posts through the kernel. What a QP may ask for that a DV WQE
 * cannot carry (more than one SGE, inline data, an opcode outside the caps)
 * keeps the QP on kernel commands at create time (usb4v_qp_try_dv); what
 * is left is refused at post time with EOPNOTSUPP and one log line per QP.
 * The kernel writes CQEs in SQ order (pleite-gda:kernel/ibdev.c
 * tbv_dv_flush_completions_locked walks dv_complete_head), so a DV QP's
 * send completions come out in posting order by construction. The receive
 * queue stays kernel-owned (tbv_qp_recv_post_status allows it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

uint32_t usb4v_dv_caps_needed(uint32_t qp_type)
{
	/* What ibv_post_send may ask of any RC/UC QP on this device (the
	 * kernel-command path serves SEND, SEND_IMM, WRITE, WRITE_IMM, READ and
	 * the fence flag); atomics are checked per WR, as their use depends on
	 * the device's atomic_cap, not on the QP. */
	uint32_t need = USB4V_USB4_RDMA_DV_CAP_SEND | USB4V_USB4_RDMA_DV_CAP_SEND_IMM | USB4V_USB4_RDMA_DV_CAP_WRITE |
			USB4V_USB4_RDMA_DV_CAP_WRITE_IMM | USB4V_USB4_RDMA_DV_CAP_FENCE;
	if (qp_type == USB4V_QPT_RC)
		need |= USB4V_USB4_RDMA_DV_CAP_READ;
	return need;
}

static uint32_t pow2_floor_le(uint32_t v)
{
	uint32_t p = 1;
	while (p <= v / 2)
		p *= 2;
	return v ? p : 0;
}

static uint32_t pow2_ceil(uint32_t v)
{
	uint32_t p = 1;
	while (p < v && p <= UINT32_MAX / 2)
		p *= 2;
	return p;
}

/* dv_check: whether this QP may have a DV send queue with these caps, and
 * its depths; 0, or 1 with the reason in qp->fallback_reason. */
static int dv_check(struct usb4v_qp *qp, const struct usb4v_usb4_rdma_dv_query_caps_resp *caps,
		    uint32_t max_send_wr, uint32_t *sq_out, uint32_t *cq_out)
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
		return 1;
	}
	uint32_t need = usb4v_dv_caps_needed(qp->qp_type);
	if ((caps->caps & need) != need) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
			 "DV caps 0x%x lack 0x%x that an %s QP needs", caps->caps, need & ~caps->caps,
			 qp->qp_type == USB4V_QPT_RC ? "RC" : "UC");
		return 1;
	}
	if (qp->max_send_sge > 1) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
			 "max_send_sge %u: a DV WQE carries one SGE", qp->max_send_sge);
		return 1;
	}
	if (qp->max_inline > 0) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
			 "max_inline_data %u: a DV WQE carries no inline data", qp->max_inline);
		return 1;
	}
	/* The QP was granted max_send_wr outstanding sends: the DV SQ holds
	 * that many (a power of two, as slot = 24-bit index % entries must
	 * not jump at the index wrap), and its CQ twice that, so that every
	 * WQE's CQE fits (errors complete even unsignaled:
	 * pleite-gda:kernel/ibdev.c tbv_dv_slot_complete). A grant the
	 * kernel's DV queue cannot hold stays on kernel commands. */
	uint32_t sq_entries = pow2_ceil(max_send_wr < USB4V_USB4_RDMA_DV_MIN_QUEUE_ENTRIES ?
						USB4V_USB4_RDMA_DV_MIN_QUEUE_ENTRIES : max_send_wr);
	uint32_t cq_entries = sq_entries <= UINT32_MAX / 2 ? 2 * sq_entries : sq_entries;
	if (cq_entries > caps->max_cq_entries)
		cq_entries = pow2_floor_le(caps->max_cq_entries);
	if (sq_entries > caps->max_sq_entries || cq_entries < sq_entries) {
		snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
			 "max_send_wr %u above what the DV queue holds (%u SQ, %u CQ entries)", max_send_wr,
			 caps->max_sq_entries, caps->max_cq_entries);
		return 1;
	}
	*sq_out = sq_entries;
	*cq_out = cq_entries;
	return 0;
}

static int sys_getpid(const struct usb4v_sys *sys)
{
	return sys->getpid ? sys->getpid(sys->ctx) : (int)getpid();
}

/* DV queue memory: the kernel pins these pages and reads and writes them
 * for this process, so a fork() child gets no copy of them (MADV_DONTFORK,
 * as rdma-core's providers keep their queue buffers: ibv_dontfork_range).
 * Whole pages of their own, zeroed, never malloc's: a malloc chunk's
 * neighbours and headers would go missing in the child too. */
static size_t dv_pages(size_t bytes)
{
	return (bytes + 4095) & ~(size_t)4095;
}

static void *dv_mem_alloc(size_t bytes)
{
	void *p = mmap(NULL, dv_pages(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, dv_pages(bytes), MADV_DONTFORK) != 0) {
		munmap(p, dv_pages(bytes));
		return NULL;
	}
	return p;
}

static void dv_mem_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, dv_pages(bytes));
}

/* sq_entries and cq_entries size the pages; post_mu is the caller's. */
void usb4v_dv_free(struct usb4v_dv *dv)
{
	dv_mem_free(dv->sq, (size_t)dv->sq_entries * 64);
	dv_mem_free(dv->cq, (size_t)dv->cq_entries * 64);
	dv_mem_free(dv->db, 4096);
	free(dv);
}

int usb4v_qp_try_dv(struct usb4v_qp *qp, uint32_t driver_id,
		    const struct usb4v_usb4_rdma_dv_query_caps_resp *caps, uint32_t max_send_wr)
{
	uint32_t sq_entries, cq_entries;
	if (dv_check(qp, caps, max_send_wr, &sq_entries, &cq_entries))
		return 0;

	struct usb4v_dv *dv = calloc(1, sizeof(*dv));
	if (!dv)
		return -ENOMEM;
	dv->sq_entries = sq_entries;
	dv->cq_entries = cq_entries;
	/* Separate page-aligned allocations: the kernel rejects overlap, and
	 * the doorbell record sits alone in its own 4 KiB page. */
	dv->sq = dv_mem_alloc((size_t)sq_entries * 64);
	dv->cq = dv_mem_alloc((size_t)cq_entries * 64);
	dv->db = dv_mem_alloc(4096);
	if (!dv->sq || !dv->cq || !dv->db || pthread_mutex_init(&dv->post_mu, NULL)) {
		usb4v_dv_free(dv);
		return -ENOMEM;
	}
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
		if (rc == -EBUSY) {
			/* The kernel allows one DV queue per QP
			 * (pleite-gda:kernel/ibdev.c CREATE_QUEUE:
			 * dv_queue_active): the application attached its
			 * own through the command fd. It keeps it. */
			snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
				 "the application holds the QP's DV queue (CREATE_QUEUE: EBUSY)");
			__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_APP, __ATOMIC_RELAXED);
		} else {
			snprintf(qp->fallback_reason, sizeof(qp->fallback_reason), "CREATE_QUEUE failed: errno %d", -rc);
			__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_NONE, __ATOMIC_RELAXED);
		}
		pthread_mutex_destroy(&dv->post_mu);
		usb4v_dv_free(dv);
		return 0;
	}
	dv->gen = (uint8_t)resp.generation;
	/* Mirror the generation before producing anything. */
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, generation), resp.generation, __ATOMIC_RELAXED);
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, cq_head), usb4v_dv_pack(0, dv->gen), __ATOMIC_RELAXED);
	__atomic_store_n(USB4V_DB_PRODUCER(dv->db, sq_tail), usb4v_dv_pack(0, dv->gen), __ATOMIC_RELEASE);
	dv->kick = USB4V_DV_KICK_UNKNOWN;

	struct usb4v_cq *cq = qp->send_cq;
	pthread_spin_lock(&cq->lock);
	qp->dv = dv;
	qp->dv_next = cq->dv_qps;
	cq->dv_qps = qp;
	__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_DV, __ATOMIC_RELAXED);
	__atomic_store_n(&qp->send_backend, USB4V_BACKEND_DV, __ATOMIC_RELEASE);
	pthread_spin_unlock(&cq->lock);
	qp->fallback_reason[0] = 0;
	__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_OURS, __ATOMIC_RELAXED);
	return 1;
}

int usb4v_qp_defer_dv(struct usb4v_qp *qp, uint32_t driver_id,
		      const struct usb4v_usb4_rdma_dv_query_caps_resp *caps, uint32_t max_send_wr)
{
	uint32_t sq_entries, cq_entries;
	if (qp->dv_defer)
		return 0; /* decided once per QP */
	if (dv_check(qp, caps, max_send_wr, &sq_entries, &cq_entries))
		return 0;
	struct usb4v_dv_defer *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (pthread_mutex_init(&d->mu, NULL)) {
		free(d);
		return -ENOMEM;
	}
	d->caps = *caps;
	d->driver_id = driver_id;
	d->max_send_wr = max_send_wr;
	d->pid = sys_getpid(qp->sys);
	qp->dv_defer = d;
	qp->fallback_reason[0] = 0;
	__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_PENDING, __ATOMIC_RELAXED);
	__atomic_store_n(&qp->dv_pending, 1, __ATOMIC_RELEASE);
	return 1;
}

/*
 * The first post_send of a QP whose DV queue was deferred. Nothing has gone
 * through the kernel's send queue yet, so the switch loses nothing. A
 * CREATE_QUEUE the kernel answers EBUSY means the application attached its
 * own queue (usb4_rdma_dv.h: GPU producers create the QP through libibverbs
 * and attach the queue on its handle); the QP then stays on kernel commands,
 * whose post the kernel refuses as it refuses the module's own provider's
 * (pleite-gda:kernel/ibdev.c tbv_qp_post_status). Posters that arrive
 * meanwhile wait on the mutex, then go where the decision sent the QP.
 */
void usb4v_dv_attach_pending(struct usb4v_qp *qp)
{
	struct usb4v_dv_defer *d = qp->dv_defer;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	if (__atomic_load_n(&qp->dv_pending, __ATOMIC_ACQUIRE)) {
		int rc = 0;
		if (sys_getpid(qp->sys) != d->pid) {
			/* A fork() child's copy: the kernel QP is the parent's
			 * too (the command fd is shared), and a CREATE_QUEUE
			 * would give it this child's pages, leaving the parent
			 * EBUSY at its own first post. The child posts through
			 * kernel commands, as rdma-core's fork rules leave a
			 * child the kernel's side of an inherited object. */
			snprintf(qp->fallback_reason, sizeof(qp->fallback_reason),
				 "a fork() child's copy of the QP: its DV queue is the parent's to attach");
			__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_NONE, __ATOMIC_RELAXED);
		} else {
			rc = usb4v_qp_try_dv(qp, d->driver_id, &d->caps, d->max_send_wr);
		}
		if (rc < 0) {
			snprintf(qp->fallback_reason, sizeof(qp->fallback_reason), "DV attach: errno %d", -rc);
			__atomic_store_n(&qp->dv_owner, USB4V_DV_OWNER_NONE, __ATOMIC_RELAXED);
		}
		if (qp->debug) {
			if (rc == 1)
				fprintf(stderr, "usb4verbs: qp %u: backend usb4-dv from its first post (DV queue: ours)\n",
					qp->qp_num);
			else
				fprintf(stderr, "usb4verbs: qp %u: backend usb4-kernel-commands (DV not used: %s; DV queue: %s)\n",
					qp->qp_num, qp->fallback_reason,
					__atomic_load_n(&qp->dv_owner, __ATOMIC_RELAXED) == USB4V_DV_OWNER_APP ?
						"the application's" : "none");
		}
		__atomic_store_n(&qp->dv_pending, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->mu);
}

int usb4v_dv_owner(const struct usb4v_qp *qp)
{
	return __atomic_load_n(&qp->dv_owner, __ATOMIC_RELAXED);
}

/* Returns 0 (encoded), EOPNOTSUPP (valid verbs, but this DV queue cannot
 * carry it) or EINVAL. A WQE has one SGE; none is a zero length, which the
 * kernel posts without an SGE (pleite-gda:kernel/ibdev.c tbv_dv_post_wqe). */
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
	if (wr->num_sge > 1)
		return EINVAL; /* above the QP's max_send_sge, which is 1 on DV */
	if (!(caps & need) || (wr->send_flags & USB4V_SEND_INLINE))
		return EOPNOTSUPP;
	if ((wr->send_flags & USB4V_SEND_FENCE) && !(caps & USB4V_USB4_RDMA_DV_CAP_FENCE))
		return EOPNOTSUPP;
	int atomic = op >= USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD;
	if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8 || (wr->wr.atomic.remote_addr & 7)))
		return EINVAL;
	memset(out, 0, sizeof(*out));
	out->opcode = op;
	out->wr_id = wr->wr_id;
	if (wr->num_sge == 1) {
		out->length = wr->sg_list[0].length;
		out->local_addr = wr->sg_list[0].addr;
		out->lkey = wr->sg_list[0].lkey;
	}
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

static int dv_kick(struct usb4v_qp *qp, uint32_t packed_tail)
{
	struct usb4v_usb4_rdma_dv_kick k = { .sq_tail = packed_tail };
	struct usb4v_ib_uverbs_attr a[2] = {
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_KICK_QP, .flags = USB4V_UVERBS_ATTR_F_MANDATORY,
		  .data = qp->handle },
		{ .attr_id = USB4V_USB4_RDMA_DV_ATTR_KICK_REQ, .len = sizeof(k),
		  .flags = USB4V_UVERBS_ATTR_F_MANDATORY, .data = (uint64_t)(uintptr_t)&k },
	};
	/* Counted under post_mu, which every caller holds. */
	__atomic_store_n(&qp->dv->kicks, qp->dv->kicks + 1, __ATOMIC_RELAXED);
	/* usb4 registers no driver id (RDMA_DRIVER_UNKNOWN == 0). */
	int rc = usb4v_uverbs_ioctl(qp->sys, qp->cmd_fd, 0, USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
				    USB4V_USB4_RDMA_DV_METHOD_KICK, a, 2);
	return rc < 0 ? -rc : 0;
}

static const char *wr_opcode_name(uint32_t op)
{
	switch (op) {
	case USB4V_WR_RDMA_WRITE: return "RDMA_WRITE";
	case USB4V_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
	case USB4V_WR_SEND: return "SEND";
	case USB4V_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
	case USB4V_WR_RDMA_READ: return "RDMA_READ";
	case USB4V_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
	case USB4V_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
	default: return "this opcode";
	}
}

/* One line per QP: a program that posts what DV cannot carry in a loop
 * would otherwise flood stderr. */
static void log_refusal(struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr)
{
	struct usb4v_dv *dv = qp->dv;
	if (__atomic_exchange_n(&dv->refusal_logged, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr,
		"libusb4_rdma: qp 0x%x: %s%s is not carried by the kernel's DV send queue (caps 0x%x); "
		"refused with EOPNOTSUPP (logged once per QP)\n",
		qp->qp_num, wr_opcode_name(wr->opcode), (wr->send_flags & USB4V_SEND_INLINE) ? " with IBV_SEND_INLINE" : "",
		dv->caps);
}

/* How long the first busy batch waits for a kernel poller to consume it
 * before the engine decides the queue needs KICKs. pleite-gda's worker
 * rescans every dv_poll_interval_us (10 us by default): a poller that does
 * not answer in this window is treated as absent, which costs a KICK per
 * batch, never a stall. */
#define DV_POLLER_WAIT_NS (20 * 1000 * 1000L)

static uint32_t dv_sq_head(const struct usb4v_dv *dv)
{
	return __atomic_load_n(USB4V_DB_CONSUMER(dv->db, sq_head), __ATOMIC_ACQUIRE) & IDX_MASK;
}

static long elapsed_ns(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/*
 * pleite-gda drains every queue from a kernel worker that watches the
 * producer line (pleite-gda:kernel/ibdev.c tbv_dv_poll_thread, attached at
 * CREATE_QUEUE; usb4_rdma_dv.h: "KICK is not required when polling is
 * enabled"), but nothing in its answers says so, and the worker sleeps
 * between scans (tbv_dv_poll_sleep: usleep_range(10, 15) by default). So:
 *
 *   - a batch that finds the queue idle (sq_head == our tail and no
 *     signaled WQE waiting for its CQE) KICKs, always: the KICK drains it in
 *     the poster's system call, where the worker would take it only at its
 *     next scan. A ping-pong is all idle batches: one KICK per message, the
 *     latency of the kernel-command path without its POLL_CQ;
 *   - a batch that finds it busy (a stream: earlier WQEs unconsumed or not
 *     yet completed) is what the worker serves at no system call. The first
 *     such batch is published without KICK while the engine watches
 *     sq_head: if the kernel consumes it, busy batches go without KICK from
 *     then on (USB4V_DV_KICK_IDLE); if not, it KICKs now and every batch
 *     after (USB4V_DV_KICK_ALWAYS).
 *
 * KICK is a drain in the kernel (tbv_dv_drain_sq_locked), so after one the
 * queue is consumed again: "unconsumed" alone would make every post of a
 * stream an idle one. A signaled WQE whose CQE is not yet polled is what
 * marks a stream. Caller holds post_mu.
 */
static void dv_learn_kick(struct usb4v_dv *dv)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned spins = 0;; spins++) {
		if (dv_sq_head(dv) == dv->sq_tail) {
			__atomic_store_n(&dv->kick, USB4V_DV_KICK_IDLE, __ATOMIC_RELAXED);
			return;
		}
		if ((spins & 63) == 63) {
			if (elapsed_ns(&t0) > DV_POLLER_WAIT_NS)
				break;
			sched_yield();
		}
	}
	__atomic_store_n(&dv->kick, USB4V_DV_KICK_ALWAYS, __ATOMIC_RELAXED);
}

int usb4v_dv_kick_mode(const struct usb4v_qp *qp)
{
	return qp->dv ? __atomic_load_n(&qp->dv->kick, __ATOMIC_RELAXED) : -1;
}

uint64_t usb4v_dv_kicks(const struct usb4v_qp *qp)
{
	return qp->dv ? __atomic_load_n(&qp->dv->kicks, __ATOMIC_RELAXED) : 0;
}

/* dv_batch_fits: for a whole-batch post (ibv_wr_complete), whether every
 * WR of the list encodes and the SQ and the DV CQ have room for all of them;
 * 0 or the errno, with *bad set. Caller holds post_mu. */
static int dv_batch_fits(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	struct usb4v_dv *dv = qp->dv;
	uint32_t n = 0, nsig = 0;
	for (struct usb4v_ibv_send_wr *p = wr; p; p = p->next) {
		struct usb4v_usb4_rdma_dv_wqe wqe;
		int enc = usb4v_dv_encode_wqe(p, dv->caps, dv->gen, &wqe);
		if (enc) {
			if (enc == EOPNOTSUPP)
				log_refusal(qp, p);
			*bad = p;
			return enc;
		}
		n++;
		nsig += usb4v_wr_signaled(qp, p);
	}
	uint32_t used = (dv->sq_tail - dv_sq_head(dv)) & IDX_MASK;
	if (used + n > dv->sq_entries && dv->kick == USB4V_DV_KICK_IDLE) {
		/* As post_send does for a full SQ: a drain rather than a
		 * failure when the poller should have emptied it. */
		int k = dv_kick(qp, usb4v_dv_pack(dv->sq_tail, dv->gen));
		if (k) {
			*bad = wr;
			return k;
		}
		used = (dv->sq_tail - dv_sq_head(dv)) & IDX_MASK;
	}
	uint32_t inflight = __atomic_load_n(&dv->signaled_inflight, __ATOMIC_ACQUIRE);
	if (used > dv->sq_entries || n > dv->sq_entries - used || inflight > dv->cq_entries ||
	    nsig > dv->cq_entries - inflight) {
		*bad = wr;
		return ENOMEM;
	}
	return 0;
}

static int dv_post(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad, int whole);

int usb4v_dv_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	return dv_post(qp, wr, bad, 0);
}

int usb4v_dv_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad)
{
	return dv_post(qp, wr, bad, 1);
}

static int dv_post(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad, int whole)
{
	struct usb4v_dv *dv = qp->dv;
	int rc = 0, pending_kick = 0;
	pthread_mutex_lock(&dv->post_mu);
	if (whole && (rc = dv_batch_fits(qp, wr, bad)) != 0)
		wr = NULL; /* nothing of it goes out */
	/* Idle: nothing of ours waits in the kernel or for its CQE. */
	int idle = dv_sq_head(dv) == dv->sq_tail && __atomic_load_n(&dv->signaled_inflight, __ATOMIC_ACQUIRE) == 0;
	for (; wr; wr = wr->next) {
		int signaled = usb4v_wr_signaled(qp, wr);
		struct usb4v_usb4_rdma_dv_wqe wqe;
		int enc = usb4v_dv_encode_wqe(wr, dv->caps, dv->gen, &wqe);
		if (enc) {
			if (enc == EOPNOTSUPP)
				log_refusal(qp, wr);
			rc = enc;
			*bad = wr;
			break;
		}
		if (qp->sq_sig_all)
			wqe.flags |= USB4V_USB4_RDMA_DV_WQE_F_SIGNALED;
		uint32_t head = dv_sq_head(dv);
		if (((dv->sq_tail - head) & IDX_MASK) >= dv->sq_entries && dv->kick == USB4V_DV_KICK_IDLE) {
			/* A full SQ with a poller that should have drained it:
			 * KICK (a drain of what is there) rather than fail, so a
			 * queue the kernel stopped polling cannot wedge. */
			int k = dv_kick(qp, usb4v_dv_pack(dv->sq_tail, dv->gen));
			if (k) {
				rc = k;
				*bad = wr;
				break;
			}
			pending_kick = 0;
			head = dv_sq_head(dv);
		}
		if (((dv->sq_tail - head) & IDX_MASK) >= dv->sq_entries ||
		    (signaled && __atomic_load_n(&dv->signaled_inflight, __ATOMIC_ACQUIRE) >= dv->cq_entries)) {
			rc = ENOMEM;
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
	/* KICK under post_mu: no other poster can publish (and kick) a later
	 * tail before the kernel has seen this one. */
	if (pending_kick && !idle && dv->kick == USB4V_DV_KICK_UNKNOWN)
		dv_learn_kick(dv); /* the first busy batch: is a poller there? */
	if (pending_kick && (idle || dv->kick == USB4V_DV_KICK_ALWAYS)) {
		int k = dv_kick(qp, usb4v_dv_pack(dv->sq_tail, dv->gen));
		if (k && !rc)
			rc = k;
	}
	pthread_mutex_unlock(&dv->post_mu);
	return rc;
}

/* Next DV CQE of the QP, or NULL. *broken is set when the kernel's cq_tail
 * claims more CQEs than the DV CQ holds: nothing in it can be trusted.
 * Caller holds the send CQ's lock. */
static const struct usb4v_usb4_rdma_dv_cqe *dv_peek(struct usb4v_dv *dv, int *broken)
{
	uint32_t tail = __atomic_load_n(USB4V_DB_CONSUMER(dv->db, cq_tail), __ATOMIC_ACQUIRE);
	if ((tail >> 24) != dv->gen)
		return NULL; /* stale lifetime: nothing valid to read */
	uint32_t avail = ((tail & IDX_MASK) - dv->cq_head) & IDX_MASK;
	if (avail > dv->cq_entries) {
		*broken = 1;
		return NULL;
	}
	if (avail == 0)
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
		const struct usb4v_usb4_rdma_dv_cqe *cqe;
		int broken = 0;
		while (n < ne && (cqe = dv_peek(dv, &broken)) != NULL) {
			struct usb4v_usb4_rdma_dv_cqe copy = *cqe;
			dv_pop(dv);
			usb4v_dv_cqe_to_ibv(&copy, qp->qp_num, &wc[n++]);
			/* Every CQE stands for a signaled WR or an error one;
			 * only the former were counted. */
			uint32_t in = __atomic_load_n(&dv->signaled_inflight, __ATOMIC_ACQUIRE);
			if (in)
				__atomic_sub_fetch(&dv->signaled_inflight, 1, __ATOMIC_RELEASE);
		}
		if (broken) {
			/* Latched like a mapped-ring overrun (cqring.c): the
			 * CQ's completions can no longer be trusted. */
			fprintf(stderr, "libusb4_rdma: qp 0x%x: the kernel's DV cq_tail is more than %u CQEs "
					"ahead of ours; send CQ marked broken (EIO)\n", qp->qp_num, dv->cq_entries);
			cq->error = -EIO;
			__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR, __ATOMIC_RELAXED);
			return n ? n : -EIO; /* what was copied is delivered; the next poll says EIO */
		}
	}
	return n;
}
