//go:build !usb4front

/* Dispatch, object lifecycle and helpers shared by the backends. */
#include <errno.h>
#include <stddef.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"

/* ---- libc seam ---- */

static ssize_t libc_write(void *ctx, int fd, const void *buf, size_t len)
{
	(void)ctx;
	for (;;) {
		ssize_t n = write(fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

static int libc_ioctl(void *ctx, int fd, unsigned long req, void *arg)
{
	(void)ctx;
	/* A signal interrupting the call is no failure of the verb. */
	for (;;) {
		if (ioctl(fd, req, arg) == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

static int libc_mmap(void *ctx, int fd, uint64_t offset, size_t len, void **addr)
{
	(void)ctx;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
	if (p == MAP_FAILED)
		return -errno;
	*addr = p;
	return 0;
}

static int libc_munmap(void *ctx, void *addr, size_t len)
{
	(void)ctx;
	return munmap(addr, len) == 0 ? 0 : -errno;
}

static const struct usb4v_sys libc_sys = {
	.ctx = NULL,
	.write = libc_write,
	.ioctl = libc_ioctl,
	.mmap = libc_mmap,
	.munmap = libc_munmap,
};

const struct usb4v_sys *usb4v_libc_sys(void) { return &libc_sys; }

const char *usb4v_backend_name(int backend)
{
	switch (backend) {
	case USB4V_BACKEND_RXE: return "rxe-rings";
	case USB4V_BACKEND_KCMD: return "usb4-kernel-commands";
	case USB4V_BACKEND_CQRING: return "usb4-cq-ring";
	case USB4V_BACKEND_DV: return "usb4-dv";
	case USB4V_BACKEND_SRQ_EMU: return "provider-srq";
	default: return "none";
	}
}

/* ---- helpers ---- */

void usb4v_uwc_to_ibv(const struct usb4v_ib_uverbs_wc *in, struct usb4v_ibv_wc *out)
{
	usb4v_uwc_to_ibv_inline(in, out);
}

int usb4v_uverbs_ioctl(const struct usb4v_sys *sys, int fd, uint32_t driver_id,
		       uint16_t object, uint16_t method,
		       struct usb4v_ib_uverbs_attr *attrs, uint16_t nattrs)
{
	struct {
		struct usb4v_ib_uverbs_ioctl_hdr hdr;
		struct usb4v_ib_uverbs_attr attrs[4];
	} buf;
	if (nattrs > 4)
		return -EINVAL;
	memset(&buf, 0, sizeof(buf));
	buf.hdr.length = (uint16_t)(sizeof(buf.hdr) + nattrs * sizeof(buf.attrs[0]));
	buf.hdr.object_id = object;
	buf.hdr.method_id = method;
	buf.hdr.num_attrs = nattrs;
	buf.hdr.driver_id = driver_id;
	memcpy(buf.attrs, attrs, nattrs * sizeof(attrs[0]));
	int rc = sys->ioctl(sys->ctx, fd, USB4V_RDMA_VERBS_IOCTL, &buf);
	/* The kernel writes back data of NEW/FD attributes; hand them back. */
	memcpy(attrs, buf.attrs, nattrs * sizeof(attrs[0]));
	return rc;
}

/* ---- dispatch ---- */

/*
 * usb4_write_of_nothing: wr is an unsignaled RDMA WRITE of 0 bytes. The
 * thunderbolt_ibverbs trees cannot carry one: the receiver finds the total
 * length (sent in imm_data for a plain write) 0, refuses the frame as a
 * malformed header and answers an error ACK (hellas-main:kernel/ibdev.c:8147
 * tbv_rx_handle_rdma_write_fragment; hellas-gda-v2 :8357, pleite-gda :8560,
 * pleite-gda-8099446 :10681, pleite-main :7327 tbv_rdma_write_header_valid),
 * and the sender moves its QP to ERR on that ACK (hellas-main :9016), so
 * every later post fails EINVAL. NCCL's multi-receive chains carry such
 * writes (a receive of 0 bytes, or a QP with no bytes left of a request).
 * Such a WR moves no byte and, unsignaled, completes nothing the
 * application sees: not sending it is what it would have done had the
 * module carried it. A signaled one goes to the module as it is.
 */
static int usb4_write_of_nothing(const struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr)
{
	if (wr->opcode != USB4V_WR_RDMA_WRITE || qp->sq_sig_all || (wr->send_flags & USB4V_SEND_SIGNALED) ||
	    wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list))
		return 0;
	for (int i = 0; i < wr->num_sge; i++)
		if (wr->sg_list[i].length)
			return 0;
	return 1;
}

typedef int (*usb4_post_fn)(struct usb4v_qp *, struct usb4v_ibv_send_wr *, struct usb4v_ibv_send_wr **);

/* usb4_post_send: posts wr through post, without the WRs
 * usb4_write_of_nothing leaves out, and no more WRs than the send queue
 * holds: past max_send_wr (counting the ones left out) it stops with
 * ENOMEM, as a full ring answers, so a list the kernel would take without a
 * bound, a cyclic one too, ends. bad_wr points into the caller's list. */
static int usb4_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad_wr,
			  usb4_post_fn post)
{
	uint32_t depth = qp->max_send_wr ? qp->max_send_wr : UINT32_MAX;
	uint32_t taken = 0;
	struct usb4v_ibv_send_wr *w = wr;
	while (w && taken < depth && !usb4_write_of_nothing(qp, w)) {
		w = w->next;
		taken++;
	}
	if (!w)
		return post(qp, wr, bad_wr);
	enum { RUN = 16 };
	struct usb4v_ibv_send_wr run[RUN], *orig[RUN];
	w = wr;
	taken = 0;
	while (w) {
		int n = 0;
		for (; w && n < RUN && taken < depth; w = w->next, taken++) {
			if (usb4_write_of_nothing(qp, w))
				continue;
			run[n] = *w;
			orig[n] = w;
			if (n)
				run[n - 1].next = &run[n];
			n++;
		}
		if (n) {
			run[n - 1].next = NULL;
			struct usb4v_ibv_send_wr *b = NULL;
			int rc = post(qp, run, &b);
			if (rc) {
				*bad_wr = b >= run && b < run + n ? orig[b - run] : orig[0];
				return rc;
			}
		}
		if (w && taken == depth) {
			*bad_wr = w;
			return ENOMEM;
		}
	}
	return 0;
}

static void kwork_add(struct usb4v_cq *cq, uint32_t n)
{
	if (cq && n)
		__atomic_add_fetch(&cq->kwork, n, __ATOMIC_RELEASE);
}

/* kwork_sub: n completions polled from the kernel; more than were counted
 * (one the provider did not expect) leaves 0. */
static void kwork_sub(struct usb4v_cq *cq, uint32_t n)
{
	uint32_t old = __atomic_load_n(&cq->kwork, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&cq->kwork, &old, old > n ? old - n : 0, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
}

/* The signaled WRs of wr's list before stop (NULL: the whole list), which
 * the kernel took: each gets a CQE. */
static uint32_t signaled_before(const struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr,
				const struct usb4v_ibv_send_wr *stop)
{
	uint32_t n = 0;
	for (; wr && wr != stop; wr = wr->next)
		n += (uint32_t)usb4v_wr_signaled(qp, wr);
	return n;
}

static uint32_t recvs_before(const struct usb4v_ibv_recv_wr *wr, const struct usb4v_ibv_recv_wr *stop)
{
	uint32_t n = 0;
	for (; wr && wr != stop; wr = wr->next)
		n++;
	return n;
}

int usb4v_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr,
		    struct usb4v_ibv_send_wr **bad_wr)
{
	/* An empty list is EINVAL, as rdma-core's rxe provider answers it
	 * (rdma-core:providers/rxe/rxe.c rxe_post_send checks !wr_list). */
	if (!qp || !bad_wr || !wr)
		return EINVAL;
	*bad_wr = NULL;
	if (__atomic_load_n(&qp->gone, __ATOMIC_RELAXED)) {
		*bad_wr = wr;
		return EIO;
	}
	int rc;
	switch (__atomic_load_n(&qp->send_backend, __ATOMIC_ACQUIRE)) {
	case USB4V_BACKEND_RXE:
		return usb4v_rxe_post_send(qp, wr, bad_wr);
	case USB4V_BACKEND_KCMD:
		/* A DV queue deferred to the first post (usb4v_qp_defer_dv)
		 * is attached before anything goes through the kernel. */
		if (__builtin_expect(__atomic_load_n(&qp->dv_pending, __ATOMIC_ACQUIRE), 0)) {
			usb4v_dv_attach_pending(qp);
			if (__atomic_load_n(&qp->send_backend, __ATOMIC_ACQUIRE) == USB4V_BACKEND_DV)
				return usb4_post_send(qp, wr, bad_wr, usb4v_dv_post_send);
		}
		rc = usb4_post_send(qp, wr, bad_wr, usb4v_kcmd_post_send);
		if (!rc || *bad_wr) /* the list up to bad_wr is finite */
			kwork_add(qp->send_cq, signaled_before(qp, wr, rc ? *bad_wr : NULL));
		return rc;
	case USB4V_BACKEND_DV:
		return usb4_post_send(qp, wr, bad_wr, usb4v_dv_post_send);
	default:
		*bad_wr = wr;
		return EINVAL;
	}
}

int usb4v_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr,
			  struct usb4v_ibv_send_wr **bad_wr)
{
	if (!qp || !bad_wr || !wr)
		return EINVAL;
	*bad_wr = NULL;
	if (__atomic_load_n(&qp->gone, __ATOMIC_RELAXED)) {
		*bad_wr = wr;
		return EIO;
	}
	if (__builtin_expect(__atomic_load_n(&qp->dv_pending, __ATOMIC_ACQUIRE), 0))
		usb4v_dv_attach_pending(qp); /* as usb4v_post_send */
	switch (__atomic_load_n(&qp->send_backend, __ATOMIC_ACQUIRE)) {
	case USB4V_BACKEND_KCMD: {
		int rc = usb4v_kcmd_post_send_whole(qp, wr, bad_wr);
		if (!rc || *bad_wr) /* the kernel took the WRs before bad_wr */
			kwork_add(qp->send_cq, signaled_before(qp, wr, rc ? *bad_wr : NULL));
		return rc;
	}
	case USB4V_BACKEND_DV:
		return usb4v_dv_post_send_whole(qp, wr, bad_wr);
	default:
		return usb4v_post_send(qp, wr, bad_wr);
	}
}

int usb4v_post_recv(struct usb4v_qp *qp, struct usb4v_ibv_recv_wr *wr,
		    struct usb4v_ibv_recv_wr **bad_wr)
{
	if (!qp || !bad_wr || !wr) /* as post_send: rxe rejects an empty list */
		return EINVAL;
	*bad_wr = NULL;
	if (__atomic_load_n(&qp->gone, __ATOMIC_RELAXED)) {
		*bad_wr = wr;
		return EIO;
	}
	if (qp->srq) {
		/* A QP attached to an SRQ has no receive queue of its own. */
		*bad_wr = wr;
		return EINVAL;
	}
	int rc;
	switch (qp->recv_backend) {
	case USB4V_BACKEND_RXE:
		/* see IBA C10-97.2.1: no receives in RESET */
		if (__atomic_load_n(&qp->state, __ATOMIC_RELAXED) == USB4V_QPS_RESET) {
			*bad_wr = wr;
			return EINVAL;
		}
		pthread_spin_lock(&qp->rq_lock);
		rc = usb4v_rxe_post_recv(&qp->rq, qp->max_recv_sge, wr, bad_wr);
		pthread_spin_unlock(&qp->rq_lock);
		return rc;
	case USB4V_BACKEND_KCMD:
		rc = usb4v_kcmd_post_recv(qp->sys, qp->cmd_fd, USB4V_IB_USER_VERBS_CMD_POST_RECV, qp->handle, wr,
					  bad_wr);
		if (!rc || *bad_wr)
			kwork_add(qp->recv_cq, recvs_before(wr, rc ? *bad_wr : NULL));
		return rc;
	default:
		*bad_wr = wr;
		return EINVAL;
	}
}

int usb4v_srq_emu_post_qp(struct usb4v_srq *srq, struct usb4v_qp *qp, uint32_t handle,
			  struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad_wr)
{
	/* rxe (USB4VERBS_SRQ=provider): user space writes a user QP's receive
	 * ring, as librxe does; its kernel has no POST_RECV command for it
	 * (EOPNOTSUPP: rxe enables only POST_SEND and REQ_NOTIFY_CQ of the
	 * optional write commands, linux:drivers/infiniband/sw/rxe/rxe_verbs.c
	 * rxe_register_device). Under srq->lock: rq_lock nests inside it. */
	if (qp && qp->recv_backend == USB4V_BACKEND_RXE) {
		pthread_spin_lock(&qp->rq_lock);
		int rc = usb4v_rxe_post_recv(&qp->rq, qp->max_recv_sge, wr, bad_wr);
		pthread_spin_unlock(&qp->rq_lock);
		return rc;
	}
	return usb4v_kcmd_post_recv(srq->sys, srq->cmd_fd, USB4V_IB_USER_VERBS_CMD_POST_RECV, handle, wr, bad_wr);
}

int usb4v_post_srq_recv(struct usb4v_srq *srq, struct usb4v_ibv_recv_wr *wr,
			struct usb4v_ibv_recv_wr **bad_wr)
{
	if (!srq || !bad_wr || !wr) /* as post_send: rxe rejects an empty list */
		return EINVAL;
	*bad_wr = NULL;
	int rc;
	switch (srq->backend) {
	case USB4V_BACKEND_RXE:
		pthread_mutex_lock(&srq->lock);
		rc = __atomic_load_n(&srq->ring_error, __ATOMIC_RELAXED);
		if (rc) {
			*bad_wr = wr;
		} else {
			rc = usb4v_rxe_post_recv(&srq->rq, srq->max_sge, wr, bad_wr);
		}
		pthread_mutex_unlock(&srq->lock);
		return rc;
	case USB4V_BACKEND_KCMD:
		rc = __atomic_load_n(&srq->ring_error, __ATOMIC_RELAXED);
		if (rc) {
			*bad_wr = wr;
			return rc;
		}
		return usb4v_kcmd_post_recv(srq->sys, srq->cmd_fd, USB4V_IB_USER_VERBS_CMD_POST_SRQ_RECV,
					    srq->handle, wr, bad_wr);
	case USB4V_BACKEND_SRQ_EMU:
		return usb4v_srq_emu_post(srq, wr, bad_wr);
	default:
		*bad_wr = wr;
		return EINVAL;
	}
}

static int poll_backend(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	switch (cq->backend) {
	case USB4V_BACKEND_RXE:
		return usb4v_rxe_poll_cq(cq, ne, wc);
	case USB4V_BACKEND_KCMD:
		return usb4v_kcmd_poll_cq(cq, ne, wc);
	case USB4V_BACKEND_CQRING:
		return usb4v_shm_poll_cq(cq, ne, wc);
	default:
		return -EINVAL;
	}
}

/* What a kernel-command start_poll batch left (cqex.c) goes out first. */
static int stash_take(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	int n = 0;
	while (n < ne && cq->stash_n) {
		wc[n++] = cq->stash[cq->stash_pos++];
		cq->stash_n--;
	}
	if (!cq->stash_n)
		cq->stash_pos = 0;
	return n;
}

int usb4v_poll_cq_kcmd_held(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	int s = stash_take(cq, ne, wc);
	if (s == ne)
		return s;
	ne -= s;
	wc += s;
	pthread_spin_lock(&cq->lock);
	int n = __atomic_load_n(&cq->error, __ATOMIC_RELAXED);
	/* DV QPs feed this CQ: their send completions come from their DV CQs,
	 * everything else (receives, other QPs) from the backend, asked only
	 * while it may have some (usb4v_cq.kwork). */
	int ask = 1, dv_waiting = 0;
	if (n == 0 && cq->dv_qps) {
		n = usb4v_dv_poll_merge(cq, ne, wc);
		ask = cq->kwork_always || __atomic_load_n(&cq->kwork, __ATOMIC_ACQUIRE) || ++cq->kskip % 256 == 0;
		for (struct usb4v_qp *qp = cq->dv_qps; n == 0 && qp && !dv_waiting; qp = qp->dv_next)
			dv_waiting = __atomic_load_n(&qp->dv->signaled_inflight, __ATOMIC_ACQUIRE) != 0;
	}
	pthread_spin_unlock(&cq->lock);
	/* A DV send's CQE is written by the module's completion work
	 * (pleite-gda-8099446:kernel/ibdev.c tbv_dv_send_complete queues
	 * tbv_dv_completion_work, :12358): a poller that spins in user space on
	 * the CPU that work is queued on keeps it from running until the
	 * scheduler preempts the poller. So a poll that finds nothing while DV
	 * WRs are in flight, and asked no kernel, gives the CPU up. Measured on
	 * the bed (ib_write_lat 2 B, pleite-gda-8099446, 5 runs a side): DV
	 * latency 1190-1887 us before, 478-873 after, the C provider's 201-443;
	 * 1.8 sched_yield and 1 KICK a message, the C provider's 2.8 ioctls
	 * (its polls). Every 16th empty poll only: about half the gain. A KICK
	 * instead, which writes completed slots' CQEs in our system call, gained
	 * nothing (tests/bench/results/notes-usb4.md). */
	if (dv_waiting && !ask)
		sched_yield();
	/* The POLL_CQ write() runs without the spinlock: other pollers wait
	 * on poll_mu, and it uses nothing else the spinlock guards. */
	int m = 0;
	if (n >= 0 && n < ne && ask) {
		int got = usb4v_kcmd_poll_cq(cq, ne - n, wc + n);
		while (got > 0) {
			kwork_sub(cq, (uint32_t)got);
			int kept = usb4v_srq_emu_fixup(cq, wc + n + m, got);
			m += kept;
			/* Dropped flushes of a provider SRQ: poll on behind them (srq_emu_poll_on). */
			if (kept == got || n + m >= ne)
				break;
			got = usb4v_kcmd_poll_cq(cq, ne - n - m, wc + n + m);
		}
		if (got < 0 && m == 0)
			m = got;
	}
	if (n < 0)
		return s ? s : n;
	if (m < 0)
		return s + n ? s + n : m;
	return s + n + m;
}

int usb4v_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	/* ne <= 0 polls nothing and reports 0, as rxe and mlx5 do: callers
	 * (perftest, NCCL, UCX) treat any negative return as a dead CQ. */
	if (ne <= 0)
		return 0;
	if (!cq || !wc)
		return -EINVAL;
	/* The backend is fixed before the CQ is handed out (attach). */
	if (cq->backend == USB4V_BACKEND_KCMD) {
		pthread_mutex_lock(&cq->poll_mu);
		int n = usb4v_poll_cq_kcmd_held(cq, ne, wc);
		pthread_mutex_unlock(&cq->poll_mu);
		return n;
	}
	pthread_spin_lock(&cq->lock);
	int n = __atomic_load_n(&cq->error, __ATOMIC_RELAXED);
	if (n == 0 && cq->dv_qps)
		n = usb4v_dv_poll_merge(cq, ne, wc);
	int m = 0;
	if (n >= 0 && n < ne)
		m = poll_backend(cq, ne - n, wc + n);
	pthread_spin_unlock(&cq->lock);
	if (m > 0) {
		int got = m;
		m = usb4v_srq_emu_fixup(cq, wc + n, got);
		/* srq_emu_poll_on: the fixup drops the flushes of a provider SRQ's
		 * WRs (they go back to the SRQ). Completions behind them must not
		 * wait for the next poll: a caller that takes a short or empty
		 * poll for a drained CQ and then waits for a completion event
		 * would wait for ever (the event came before). So the backend is
		 * asked again while it gave something and the fixup dropped some. */
		int dropped = m < got;
		while (dropped && n + m < ne) {
			pthread_spin_lock(&cq->lock);
			got = poll_backend(cq, ne - n - m, wc + n + m);
			pthread_spin_unlock(&cq->lock);
			if (got <= 0)
				break;
			int kept = usb4v_srq_emu_fixup(cq, wc + n + m, got);
			m += kept;
			dropped = kept < got;
		}
	}
	if (n < 0)
		return n;
	if (m < 0)
		return n ? n : m;
	return n + m;
}

int usb4v_req_notify_cq(struct usb4v_cq *cq, int solicited_only)
{
	if (!cq)
		return EINVAL;
	if (cq->backend == USB4V_BACKEND_NONE)
		return EINVAL;
	if (__atomic_load_n(&cq->slow, __ATOMIC_RELAXED) & USB4V_CQ_SLOW_GONE)
		return EIO;
	/* Every backend arms through the kernel (rxe's provider does the same
	 * with ibv_cmd_req_notify_cq). */
	int rc = usb4v_kcmd_req_notify(cq->sys, cq->cmd_fd, cq->handle, solicited_only);
	return rc < 0 ? -rc : 0;
}

/* ---- device removal ---- */

/* Marking gone takes no engine lock (docs/DESIGN.md, "Lock order"): the
 * removal runs with its context's record locked (usb4v_dev_remove), and a
 * thread holding cq->lock (an rxe start_poll holder), poll_mu or srq->lock (a
 * resize, across its kernel command) may destroy another object meanwhile,
 * whose free takes that record's lock. The marks are
 * atomic; a poller or poster already past its check finishes on rings that
 * stay mapped (the removal replaces them with anonymous memory, never
 * unmaps them) and a command fd that answers errors. */
void usb4v_cq_mark_gone(struct usb4v_cq *cq)
{
	if (!cq)
		return;
	__atomic_store_n(&cq->error, -EIO, __ATOMIC_RELAXED);
	__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR | USB4V_CQ_SLOW_GONE, __ATOMIC_SEQ_CST);
}

void usb4v_qp_mark_gone(struct usb4v_qp *qp)
{
	if (qp)
		__atomic_store_n(&qp->gone, 1, __ATOMIC_SEQ_CST);
}

void usb4v_srq_mark_gone(struct usb4v_srq *srq)
{
	if (srq)
		__atomic_store_n(&srq->ring_error, EIO, __ATOMIC_SEQ_CST);
}

/* Releasing the mappings at removal. Every ring the engine mapped from the
 * command fd holds the kernel's file: as long as one stays mapped, the
 * unregistration of a driver without disassociate_ucontext (rxe, the usb4
 * module) waits for this process (linux:drivers/infiniband/core/uverbs_main.c
 * ib_uverbs_remove_one). Anonymous memory takes each ring's place at the same
 * address (one mmap, atomic for other threads: a late reader sees zeros, an
 * empty ring, never a fault); free unmaps it as before. Only real mappings
 * are replaced (a test double's sys maps its own memory); maps_released
 * records that the object let go. The rings a resize swaps (rxe CQ, SRQ)
 * change under the object's lock, so those are replaced under it, taken
 * with trylock: EBUSY asks the caller to come back (a start_poll holder or a
 * resize has it, and may need the caller's locks to finish). */
static void ring_to_anon(const struct usb4v_sys *sys, void *addr, size_t len)
{
	if (!addr || !len || sys != &libc_sys)
		return;
	(void)mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

static void rxe_ring_to_anon(const struct usb4v_sys *sys, const struct usb4v_rxe_ring *r)
{
	if (r->buf && r->owned)
		ring_to_anon(sys, r->buf, r->map_len);
}

int usb4v_cq_release_maps(struct usb4v_cq *cq)
{
	if (!cq || __atomic_load_n(&cq->maps_released, __ATOMIC_ACQUIRE))
		return 0;
	if (pthread_spin_trylock(&cq->lock))
		return EBUSY;
	rxe_ring_to_anon(cq->sys, &cq->rxe);
	if (cq->shm.hdr)
		ring_to_anon(cq->sys, cq->shm.hdr, cq->shm.map_len);
	__atomic_store_n(&cq->maps_released, 1, __ATOMIC_RELEASE);
	pthread_spin_unlock(&cq->lock);
	return 0;
}

void usb4v_qp_release_maps(struct usb4v_qp *qp)
{
	/* A QP's rings are mapped at attach and unmapped at free only. */
	if (!qp || __atomic_exchange_n(&qp->maps_released, 1, __ATOMIC_ACQ_REL))
		return;
	rxe_ring_to_anon(qp->sys, &qp->sq);
	rxe_ring_to_anon(qp->sys, &qp->rq);
}

int usb4v_srq_release_maps(struct usb4v_srq *srq)
{
	if (!srq || __atomic_load_n(&srq->maps_released, __ATOMIC_ACQUIRE))
		return 0;
	if (pthread_mutex_trylock(&srq->lock))
		return EBUSY;
	rxe_ring_to_anon(srq->sys, &srq->rq);
	__atomic_store_n(&srq->maps_released, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

/* ---- the removal record ---- */

struct usb4v_dev *usb4v_dev_new(void)
{
	struct usb4v_dev *dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	if (pthread_mutex_init(&dev->mu, NULL)) {
		free(dev);
		return NULL;
	}
	dev->refs = 1;
	dev->objs.prev = dev->objs.next = &dev->objs;
	dev->objs.kind = USB4V_DEV_HEAD;
	return dev;
}

/* Drops one reference; called with dev->mu held, unlocks it. */
static void dev_unref_unlock(struct usb4v_dev *dev)
{
	int last = --dev->refs == 0;
	pthread_mutex_unlock(&dev->mu);
	if (last) {
		pthread_mutex_destroy(&dev->mu);
		free(dev);
	}
}

void usb4v_dev_put(struct usb4v_dev *dev)
{
	if (!dev)
		return;
	pthread_mutex_lock(&dev->mu);
	dev_unref_unlock(dev);
}

static void mark_gone(struct usb4v_dev_link *l);
static int release_maps(struct usb4v_dev_link *l);

static void dev_join(struct usb4v_dev_link *l, int kind, struct usb4v_dev *dev)
{
	if (!dev || l->dev)
		return;
	pthread_mutex_lock(&dev->mu);
	l->kind = kind;
	l->dev = dev;
	l->prev = dev->objs.prev;
	l->next = &dev->objs;
	dev->objs.prev->next = l;
	dev->objs.prev = l;
	dev->refs++;
	/* Made while the removal ran: it missed this one. */
	if (__atomic_load_n(&dev->gone, __ATOMIC_ACQUIRE)) {
		mark_gone(l);
		release_maps(l);
	}
	pthread_mutex_unlock(&dev->mu);
}

static void dev_leave(struct usb4v_dev_link *l)
{
	struct usb4v_dev *dev = l->dev;
	if (!dev)
		return;
	pthread_mutex_lock(&dev->mu);
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = NULL;
	l->dev = NULL;
	dev_unref_unlock(dev);
}

void usb4v_cq_join(struct usb4v_cq *cq, struct usb4v_dev *dev)
{
	if (cq)
		dev_join(&cq->dev_link, USB4V_DEV_CQ, dev);
}

void usb4v_qp_join(struct usb4v_qp *qp, struct usb4v_dev *dev)
{
	if (qp)
		dev_join(&qp->dev_link, USB4V_DEV_QP, dev);
}

void usb4v_srq_join(struct usb4v_srq *srq, struct usb4v_dev *dev)
{
	if (srq)
		dev_join(&srq->dev_link, USB4V_DEV_SRQ, dev);
}

void usb4v_cq_forget_dev(struct usb4v_cq *cq)
{
	if (cq)
		cq->dev_link.dev = NULL;
}

void usb4v_qp_forget_dev(struct usb4v_qp *qp)
{
	if (qp)
		qp->dev_link.dev = NULL;
}

void usb4v_srq_forget_dev(struct usb4v_srq *srq)
{
	if (srq)
		srq->dev_link.dev = NULL;
}

/* The objects embed their link: the object from its link. */
#define LINK_OWNER(l, type) ((type *)(void *)((char *)(l) - offsetof(type, dev_link)))

static void mark_gone(struct usb4v_dev_link *l)
{
	switch (l->kind) {
	case USB4V_DEV_CQ:
		usb4v_cq_mark_gone(LINK_OWNER(l, struct usb4v_cq));
		break;
	case USB4V_DEV_QP:
		usb4v_qp_mark_gone(LINK_OWNER(l, struct usb4v_qp));
		break;
	case USB4V_DEV_SRQ:
		usb4v_srq_mark_gone(LINK_OWNER(l, struct usb4v_srq));
		break;
	}
}

static int release_maps(struct usb4v_dev_link *l)
{
	switch (l->kind) {
	case USB4V_DEV_CQ:
		return usb4v_cq_release_maps(LINK_OWNER(l, struct usb4v_cq));
	case USB4V_DEV_QP:
		usb4v_qp_release_maps(LINK_OWNER(l, struct usb4v_qp));
		return 0;
	case USB4V_DEV_SRQ:
		return usb4v_srq_release_maps(LINK_OWNER(l, struct usb4v_srq));
	}
	return 0;
}

int usb4v_dev_remove(struct usb4v_dev *dev)
{
	int busy = 0;
	if (!dev)
		return 0;
	pthread_mutex_lock(&dev->mu);
	__atomic_store_n(&dev->gone, 1, __ATOMIC_RELEASE);
	/* Every object stops first, then the mappings go: a poller that
	 * still holds one CQ finds the others already failing. */
	for (struct usb4v_dev_link *l = dev->objs.next; l != &dev->objs; l = l->next)
		mark_gone(l);
	for (struct usb4v_dev_link *l = dev->objs.next; l != &dev->objs; l = l->next)
		if (release_maps(l))
			busy++;
	pthread_mutex_unlock(&dev->mu);
	return busy;
}

/* ---- lifecycle ---- */

struct usb4v_cq *usb4v_cq_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t cqe)
{
	struct usb4v_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	if (pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE)) {
		free(cq);
		return NULL;
	}
	if (pthread_mutex_init(&cq->poll_mu, NULL)) {
		pthread_spin_destroy(&cq->lock);
		free(cq);
		return NULL;
	}
	cq->sys = sys ? sys : &libc_sys;
	cq->cmd_fd = cmd_fd;
	cq->handle = handle;
	cq->cqe = cqe;
	cq->backend = USB4V_BACKEND_KCMD;
	cq->slow = USB4V_CQ_SLOW_BACKEND;
	return cq;
}

int usb4v_rxe_ring_setup(const struct usb4v_sys *sys, int fd, struct usb4v_rxe_ring *r,
			 void *addr, uint64_t offset, size_t size, size_t min_elem)
{
	if (size < sizeof(struct usb4v_rxe_queue_buf))
		return -EINVAL;
	if (!addr) {
		int rc = sys->mmap(sys->ctx, fd, offset, size, &addr);
		if (rc < 0)
			return rc;
		r->owned = 1;
	}
	struct usb4v_rxe_queue_buf *b = addr;
	uint32_t mask = b->index_mask, log2 = b->log2_elem_size;
	/* Validate what the kernel wrote before trusting it. */
	if (log2 > 16 || ((size_t)1 << log2) < min_elem || ((mask + 1) & mask) != 0 ||
	    sizeof(*b) + ((size_t)mask + 1) * ((size_t)1 << log2) > size) {
		if (r->owned)
			sys->munmap(sys->ctx, addr, size);
		r->owned = 0;
		return -EINVAL;
	}
	r->buf = b;
	r->data = (uint8_t *)addr + sizeof(*b);
	r->mask = mask;
	r->log2_elem = log2;
	r->map_len = size;
	return 0;
}

void usb4v_rxe_ring_release(const struct usb4v_sys *sys, struct usb4v_rxe_ring *r)
{
	if (r->buf && r->owned)
		sys->munmap(sys->ctx, r->buf, r->map_len);
	memset(r, 0, sizeof(*r));
}

int usb4v_cq_attach_rxe(struct usb4v_cq *cq, void *addr, uint64_t offset, size_t size)
{
	int rc = usb4v_rxe_ring_setup(cq->sys, cq->cmd_fd, &cq->rxe, addr, offset, size,
			    sizeof(struct usb4v_ib_uverbs_wc));
	if (rc == 0) {
		pthread_spin_lock(&cq->lock);
		cq->backend = USB4V_BACKEND_RXE;
		__atomic_fetch_and(&cq->slow, ~(uint32_t)USB4V_CQ_SLOW_BACKEND, __ATOMIC_RELAXED);
		pthread_spin_unlock(&cq->lock);
	}
	return rc;
}

void usb4v_cq_free(struct usb4v_cq *cq)
{
	if (!cq)
		return;
	usb4v_srq_emu_cq_gone(cq);
	dev_leave(&cq->dev_link);
	usb4v_rxe_ring_release(cq->sys, &cq->rxe);
	if (cq->shm.hdr)
		cq->sys->munmap(cq->sys->ctx, cq->shm.hdr, cq->shm.map_len);
	free(cq->pollbuf);
	free(cq->stash);
	pthread_mutex_destroy(&cq->poll_mu);
	pthread_spin_destroy(&cq->lock);
	free(cq);
}

struct usb4v_srq *usb4v_srq_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t max_sge)
{
	struct usb4v_srq *srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	if (pthread_mutex_init(&srq->lock, NULL)) {
		free(srq);
		return NULL;
	}
	srq->sys = sys ? sys : &libc_sys;
	srq->cmd_fd = cmd_fd;
	srq->handle = handle;
	srq->max_sge = max_sge;
	srq->backend = USB4V_BACKEND_KCMD;
	return srq;
}

static size_t srq_min_elem(const struct usb4v_srq *srq)
{
	return sizeof(struct usb4v_rxe_recv_wqe) + srq->max_sge * sizeof(struct usb4v_rxe_sge);
}

int usb4v_srq_attach_rxe(struct usb4v_srq *srq, void *addr, uint64_t offset, size_t size)
{
	int rc = usb4v_rxe_ring_setup(srq->sys, srq->cmd_fd, &srq->rq, addr, offset, size, srq_min_elem(srq));
	if (rc == 0)
		srq->backend = USB4V_BACKEND_RXE;
	return rc;
}

void usb4v_srq_resize_begin(struct usb4v_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
}

int usb4v_srq_resize_end(struct usb4v_srq *srq, int remap, uint64_t offset, size_t size)
{
	int rc = 0;
	if (remap && srq->backend == USB4V_BACKEND_RXE && __atomic_load_n(&srq->maps_released, __ATOMIC_RELAXED)) {
		/* Removed meanwhile: no new mapping of the command fd. */
		__atomic_store_n(&srq->ring_error, EIO, __ATOMIC_RELAXED);
		remap = 0;
		rc = -EIO;
	}
	if (remap && srq->backend == USB4V_BACKEND_RXE) {
		struct usb4v_rxe_ring next = {0};
		rc = usb4v_rxe_ring_setup(srq->sys, srq->cmd_fd, &next, NULL, offset, size, srq_min_elem(srq));
		/* The kernel reads only the new ring now: the old one goes
		 * either way, and without a new one posting must fail. */
		usb4v_rxe_ring_release(srq->sys, &srq->rq);
		if (rc == 0)
			srq->rq = next;
		else
			__atomic_store_n(&srq->ring_error, -rc, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&srq->lock);
	return rc;
}

void usb4v_srq_free(struct usb4v_srq *srq)
{
	if (!srq)
		return;
	if (srq->emu) {
		usb4v_srq_emu_free(srq); /* comes back here once it may go */
		return;
	}
	dev_leave(&srq->dev_link);
	usb4v_rxe_ring_release(srq->sys, &srq->rq);
	pthread_mutex_destroy(&srq->lock);
	free(srq);
}

struct usb4v_qp *usb4v_qp_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle,
			      uint32_t qp_num, uint32_t qp_type, int sq_sig_all,
			      uint32_t max_send_sge, uint32_t max_recv_sge, uint32_t max_inline,
			      struct usb4v_cq *send_cq, struct usb4v_cq *recv_cq,
			      struct usb4v_srq *srq)
{
	struct usb4v_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	if (pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE)) {
		free(qp);
		return NULL;
	}
	if (pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE)) {
		pthread_spin_destroy(&qp->sq_lock);
		free(qp);
		return NULL;
	}
	qp->sys = sys ? sys : &libc_sys;
	qp->cmd_fd = cmd_fd;
	qp->handle = handle;
	qp->qp_num = qp_num;
	qp->qp_type = qp_type;
	qp->sq_sig_all = sq_sig_all;
	qp->max_send_sge = max_send_sge;
	qp->max_recv_sge = max_recv_sge;
	qp->max_inline = max_inline;
	qp->send_cq = send_cq;
	qp->recv_cq = recv_cq;
	qp->srq = srq;
	qp->send_backend = USB4V_BACKEND_KCMD;
	qp->recv_backend = USB4V_BACKEND_KCMD;
	if (srq && recv_cq)
		__atomic_store_n(&recv_cq->kwork_always, 1, __ATOMIC_RELAXED);
	if (srq && srq->emu && recv_cq) {
		/* An rxe ring's fast poll would hand out the lent WRs' tokens. */
		pthread_spin_lock(&recv_cq->lock);
		__atomic_fetch_or(&recv_cq->slow, USB4V_CQ_SLOW_SRQ_EMU, __ATOMIC_RELAXED);
		pthread_spin_unlock(&recv_cq->lock);
	}
	return qp;
}

int usb4v_qp_attach_rxe(struct usb4v_qp *qp, void *sq_addr, uint64_t sq_off, size_t sq_size,
			void *rq_addr, uint64_t rq_off, size_t rq_size)
{
	size_t sq_elem = sizeof(struct usb4v_rxe_send_wqe) + qp->max_send_sge * sizeof(struct usb4v_rxe_sge);
	if (sq_elem < sizeof(struct usb4v_rxe_send_wqe) + qp->max_inline)
		sq_elem = sizeof(struct usb4v_rxe_send_wqe) + qp->max_inline;
	int rc = usb4v_rxe_ring_setup(qp->sys, qp->cmd_fd, &qp->sq, sq_addr, sq_off, sq_size, sq_elem);
	if (rc < 0)
		return rc;
	/* A provider SRQ's QP has a receive ring of its own, which the SRQ
	 * fills (srqemu.c); the application's post_recv stays refused. */
	if (!qp->srq || qp->srq->emu) {
		rc = usb4v_rxe_ring_setup(qp->sys, qp->cmd_fd, &qp->rq, rq_addr, rq_off, rq_size,
				sizeof(struct usb4v_rxe_recv_wqe) + qp->max_recv_sge * sizeof(struct usb4v_rxe_sge));
		if (rc < 0) {
			usb4v_rxe_ring_release(qp->sys, &qp->sq);
			return rc;
		}
		qp->recv_backend = USB4V_BACKEND_RXE;
	}
	qp->send_backend = USB4V_BACKEND_RXE;
	return 0;
}

void usb4v_qp_set_state(struct usb4v_qp *qp, int state)
{
	__atomic_store_n(&qp->state, state, __ATOMIC_RELAXED);
	usb4v_srq_emu_qp_state(qp, state);
}

/* qp_release unlinks and frees a QP's engine object. destroy_queue says
 * whether its DV queue still exists in the kernel and must be destroyed:
 * only while the kernel QP lives. Once DESTROY_QP succeeded the kernel has
 * torn the queue down itself (pleite-gda:kernel/ibdev.c tbv_destroy_qp) and
 * the handle may already name a new QP, whose queue a DESTROY_QUEUE would
 * kill. */
static void qp_release(struct usb4v_qp *qp, uint32_t driver_id, int destroy_queue)
{
	if (!qp)
		return;
	usb4v_srq_emu_detach(qp);
	dev_leave(&qp->dev_link);
	if (qp->dv) {
		if (destroy_queue) {
			struct usb4v_ib_uverbs_attr a = {
				.attr_id = USB4V_USB4_RDMA_DV_ATTR_DESTROY_QUEUE_QP,
				.flags = USB4V_UVERBS_ATTR_F_MANDATORY,
				.data = qp->handle,
			};
			usb4v_uverbs_ioctl(qp->sys, qp->cmd_fd, driver_id, USB4V_USB4_RDMA_DV_OBJECT_DEVICE,
					   USB4V_USB4_RDMA_DV_METHOD_DESTROY_QUEUE, &a, 1);
		}
		struct usb4v_cq *cq = qp->send_cq;
		pthread_spin_lock(&cq->lock);
		for (struct usb4v_qp **p = &cq->dv_qps; *p; p = &(*p)->dv_next) {
			if (*p == qp) {
				*p = qp->dv_next;
				break;
			}
		}
		if (!cq->dv_qps)
			__atomic_fetch_and(&cq->slow, ~(uint32_t)USB4V_CQ_SLOW_DV, __ATOMIC_RELAXED);
		pthread_spin_unlock(&cq->lock);
		pthread_mutex_destroy(&qp->dv->post_mu);
		usb4v_dv_free(qp->dv);
	}
	if (qp->dv_defer) {
		pthread_mutex_destroy(&qp->dv_defer->mu);
		free(qp->dv_defer);
	}
	usb4v_rxe_ring_release(qp->sys, &qp->sq);
	usb4v_rxe_ring_release(qp->sys, &qp->rq);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	usb4v_wrex_free(qp->wrex);
	free(qp);
}

void usb4v_qp_free(struct usb4v_qp *qp, uint32_t driver_id)
{
	qp_release(qp, driver_id, 1);
}

void usb4v_qp_free_destroyed(struct usb4v_qp *qp)
{
	qp_release(qp, 0, 0);
}
