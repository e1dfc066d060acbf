//go:build !usb4front

/*
 * The provider's shared receive queue, for usb4 kernels that have none
 * (every thunderbolt_ibverbs tree answers max_srq 0 and refuses a QP with
 * an SRQ: hellas-main:kernel/ibdev.c:2498). engine.h ("the provider's SRQ")
 * says what it does, docs/srq.md why and where it differs from a kernel's.
 *
 * State, all under srq->lock:
 * - slots: one per WR the SRQ can hold (max_wr). A slot is free, pending
 *   (posted, in no kernel RQ: the FIFO pend_head..pend_tail) or lent (in
 *   one member's kernel RQ, with the token below as its wr_id there).
 * - members: the QPs attached to the SRQ, each with its kernel RQ depth,
 *   the WRs lent to it, and whether its state takes receives. A member
 *   whose QP was freed while WRs were lent to it stays (a zombie) until
 *   those come back through its CQ, or its CQ is freed (then the kernel QP
 *   is gone and nothing refers to the buffers any more: they go back to
 *   the pending FIFO).
 *
 * Lock order: a poller holds cq->poll_mu (kernel commands) or nothing
 * (mapped ring, after cq->lock) when it calls usb4v_srq_emu_fixup, which
 * takes the registry's read lock and then srq->lock: srq->lock stays the
 * innermost engine lock (docs/DESIGN.md, "Lock order"), the registry lock
 * sits just outside it and is taken by nothing else but create/free.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine.h"

/* A lent WR's wr_id in the kernel RQ: marker, registry index and its
 * generation (which SRQ), the slot's generation (which lending) and the
 * slot index. An application wr_id of a QP without SRQ on the same CQ that
 * happens to carry the marker is left alone unless every field matches a
 * live lending to a QP with the completion's qp_num on this CQ. */
enum {
	TOKEN_MARK = 0x5e,
	REG_BITS = 12,
	REG_SIZE = 1 << REG_BITS,
};

static uint64_t token_make(uint32_t reg, uint32_t reg_gen, uint32_t slot_gen, uint32_t slot)
{
	return (uint64_t)TOKEN_MARK << 56 | (uint64_t)(reg & (REG_SIZE - 1)) << 44 | (uint64_t)(reg_gen & 0xf) << 40 |
	       (uint64_t)(slot_gen & 0xff) << 32 | slot;
}

struct emu_slot {
	uint64_t wr_id;
	struct usb4v_ibv_sge sge;
	int num_sge;
	uint32_t gen;
	uint32_t next;  /* free list or pending FIFO */
	int member;     /* lent to members[member]; -1: free or pending */
};

struct emu_member {
	int used;
	struct usb4v_qp *qp;       /* NULL: freed (a zombie while lent > 0) */
	uint32_t qp_num, handle;
	const struct usb4v_cq *cq; /* its receive CQ; compared, and freed only after the QP */
	uint32_t depth, lent;
	int accepting;             /* the QP's state takes receives */
	int debug;                 /* the QP's USB4VERBS_DEBUG */
	int qpn_logged;            /* the kernel's other qp_num was logged once */
};

struct usb4v_srq_emu {
	uint32_t reg, reg_gen;
	uint32_t max_wr, max_sge, limit;
	uint32_t posted; /* pending + lent */
	struct emu_slot *slots;
	uint32_t nslots;
	uint32_t free_head, pend_head, pend_tail, npending;
	struct emu_member *members;
	uint32_t nmembers, rr;
	int event_fd;
	uint64_t user_handle, events, refills;
	int freed;     /* usb4v_srq_free ran; memory goes with the last zombie */
	int releasing; /* take_last said so once */
};

#define NIL UINT32_MAX

static pthread_rwlock_t reg_mu = PTHREAD_RWLOCK_INITIALIZER;
static struct usb4v_srq *reg_srq[REG_SIZE];
static uint8_t reg_gens[REG_SIZE];
static uint32_t reg_next;
static uint64_t emu_stale_flushes; /* flushes of lendings that were over (dropped) */

static int grow_slots(struct usb4v_srq_emu *e, uint32_t n)
{
	if (n <= e->nslots)
		return 0;
	struct emu_slot *s = realloc(e->slots, (size_t)n * sizeof(*s));
	if (!s)
		return ENOMEM;
	for (uint32_t i = e->nslots; i < n; i++) {
		memset(&s[i], 0, sizeof(s[i]));
		s[i].member = -1;
		s[i].next = i + 1 < n ? i + 1 : e->free_head;
	}
	e->free_head = e->nslots;
	e->slots = s;
	e->nslots = n;
	return 0;
}

struct usb4v_srq *usb4v_srq_new_emu(const struct usb4v_sys *sys, int cmd_fd, uint32_t max_wr,
				    uint32_t max_sge, uint32_t limit, uint64_t user_handle)
{
	if (!max_wr || limit > max_wr)
		return NULL;
	struct usb4v_srq *srq = usb4v_srq_new(sys, cmd_fd, 0, max_sge);
	if (!srq)
		return NULL;
	struct usb4v_srq_emu *e = calloc(1, sizeof(*e));
	if (e)
		e->free_head = NIL;
	if (!e || grow_slots(e, max_wr)) {
		free(e);
		usb4v_srq_free(srq);
		return NULL;
	}
	e->max_wr = max_wr;
	e->max_sge = max_sge;
	e->limit = limit;
	e->pend_head = e->pend_tail = NIL;
	e->event_fd = -1;
	e->user_handle = user_handle;
	pthread_rwlock_wrlock(&reg_mu);
	uint32_t i;
	for (i = 0; i < REG_SIZE; i++) {
		uint32_t r = (reg_next + i) % REG_SIZE;
		if (!reg_srq[r]) {
			reg_srq[r] = srq;
			e->reg = r;
			e->reg_gen = ++reg_gens[r];
			reg_next = r + 1;
			break;
		}
	}
	pthread_rwlock_unlock(&reg_mu);
	if (i == REG_SIZE) {
		free(e->slots);
		free(e);
		usb4v_srq_free(srq);
		return NULL;
	}
	srq->emu = e;
	srq->backend = USB4V_BACKEND_SRQ_EMU;
	return srq;
}

static void pend_push_back(struct usb4v_srq_emu *e, uint32_t i)
{
	e->slots[i].next = NIL;
	e->slots[i].member = -1;
	if (e->pend_tail == NIL)
		e->pend_head = i;
	else
		e->slots[e->pend_tail].next = i;
	e->pend_tail = i;
	e->npending++;
}

static void pend_push_front(struct usb4v_srq_emu *e, uint32_t i)
{
	e->slots[i].member = -1;
	e->slots[i].next = e->pend_head;
	e->pend_head = i;
	if (e->pend_tail == NIL)
		e->pend_tail = i;
	e->npending++;
}

static uint32_t pend_pop(struct usb4v_srq_emu *e)
{
	uint32_t i = e->pend_head;
	e->pend_head = e->slots[i].next;
	if (e->pend_head == NIL)
		e->pend_tail = NIL;
	e->npending--;
	return i;
}

static void slot_free(struct usb4v_srq_emu *e, uint32_t i)
{
	e->slots[i].member = -1;
	e->slots[i].next = e->free_head;
	e->free_head = i;
}

static int members_used(const struct usb4v_srq_emu *e)
{
	int n = 0;
	for (uint32_t i = 0; i < e->nmembers; i++)
		n += e->members[i].used;
	return n;
}

/* Under srq->lock: whether the caller frees the memory (emu_release), once
 * the SRQ's free ran and its last member left; true for one caller only. */
static int take_last(struct usb4v_srq_emu *e)
{
	if (!e->freed || e->releasing || members_used(e))
		return 0;
	e->releasing = 1;
	return 1;
}

static void raise_limit(struct usb4v_srq_emu *e)
{
	/* As rxe (linux:drivers/infiniband/sw/rxe/rxe_resp.c get_srq_wqe): once
	 * fewer WRs than the limit remain, one event, and the limit is off
	 * until modify_srq sets it again. */
	if (!e->limit || e->posted >= e->limit)
		return;
	e->limit = 0;
	e->events++;
	if (e->event_fd < 0)
		return;
	struct {
		uint64_t element;
		uint32_t event_type, reserved;
	} ev = {e->user_handle, 15 /* IBV_EVENT_SRQ_LIMIT_REACHED */, 0};
	/* A full socket buffer (nobody reads the async fd) drops the event:
	 * it is counted (events) either way. */
	(void)send(e->event_fd, &ev, sizeof(ev), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Lends up to n pending WRs to member m: one POST_RECV chain. */
static void lend(struct usb4v_srq *srq, uint32_t mi, uint32_t n)
{
	struct usb4v_srq_emu *e = srq->emu;
	struct emu_member *m = &e->members[mi];
	enum { CHUNK = 64 };
	while (n && e->npending && m->accepting) {
		struct usb4v_ibv_recv_wr wr[CHUNK];
		struct usb4v_ibv_sge sge[CHUNK];
		uint32_t idx[CHUNK], k = 0;
		for (; k < CHUNK && k < n && e->npending; k++) {
			uint32_t i = pend_pop(e);
			struct emu_slot *s = &e->slots[i];
			s->gen++;
			s->member = (int)mi;
			idx[k] = i;
			sge[k] = s->sge;
			wr[k].wr_id = token_make(e->reg, e->reg_gen, s->gen, i);
			wr[k].sg_list = &sge[k];
			wr[k].num_sge = s->num_sge;
			wr[k].next = NULL;
			if (k)
				wr[k - 1].next = &wr[k];
		}
		struct usb4v_ibv_recv_wr *bad = NULL;
		int rc = usb4v_srq_emu_post_qp(srq, m->qp, m->handle, wr, &bad);
		uint32_t took = k;
		if (rc) {
			took = bad ? (uint32_t)(bad - wr) : 0;
			if (took > k)
				took = 0;
			/* What the kernel did not take goes back, in order. */
			for (uint32_t j = k; j > took; j--)
				pend_push_front(e, idx[j - 1]);
			/* ENOMEM: its RQ is fuller than we counted (the kernel
			 * may hold a WR a little past the completion we polled):
			 * nothing more now, again at the next post or poll.
			 * Anything else (EINVAL: the QP's state takes no receives,
			 * it went to ERR on its own or is closing,
			 * hellas-main:kernel/ibdev.c:5323; EIO: the device is
			 * gone): nothing more until its state changes. */
			if (rc != ENOMEM)
				m->accepting = 0;
		}
		m->lent += took;
		n -= took;
		if (took)
			e->refills++;
		if (rc)
			return;
	}
}

/* Spreads pending WRs over the members that take receives: each up to its
 * share of everything posted (so one QP does not hold every WR while
 * another has none), then whatever is left to anyone with room. */
static void fill_locked(struct usb4v_srq *srq)
{
	struct usb4v_srq_emu *e = srq->emu;
	if (!e->npending || !e->nmembers)
		return;
	uint32_t nacc = 0;
	for (uint32_t i = 0; i < e->nmembers; i++)
		if (e->members[i].used && e->members[i].accepting)
			nacc++;
	if (!nacc)
		return;
	uint32_t share = (e->posted + nacc - 1) / nacc;
	for (int pass = 0; pass < 2 && e->npending; pass++) {
		for (uint32_t k = 0; k < e->nmembers && e->npending; k++) {
			uint32_t mi = (e->rr + k) % e->nmembers;
			struct emu_member *m = &e->members[mi];
			if (!m->used || !m->accepting)
				continue;
			uint32_t cap = pass == 0 && share < m->depth ? share : m->depth;
			if (m->lent < cap)
				lend(srq, mi, cap - m->lent);
		}
	}
	e->rr++;
}

int usb4v_srq_emu_attach(struct usb4v_srq *srq, struct usb4v_qp *qp, uint32_t depth)
{
	if (!srq || !srq->emu || !qp || qp->srq != srq || !depth)
		return EINVAL;
	struct usb4v_srq_emu *e = srq->emu;
	pthread_mutex_lock(&srq->lock);
	uint32_t mi;
	for (mi = 0; mi < e->nmembers && e->members[mi].used; mi++)
		;
	if (mi == e->nmembers) {
		struct emu_member *m = realloc(e->members, (size_t)(e->nmembers + 1) * sizeof(*m));
		if (!m) {
			pthread_mutex_unlock(&srq->lock);
			return ENOMEM;
		}
		e->members = m;
		e->nmembers++;
	}
	struct emu_member *m = &e->members[mi];
	memset(m, 0, sizeof(*m));
	m->used = 1;
	m->qp = qp;
	m->qp_num = qp->qp_num;
	m->handle = qp->handle;
	m->cq = qp->recv_cq;
	m->depth = depth;
	m->debug = qp->debug;
	int st = __atomic_load_n(&qp->state, __ATOMIC_RELAXED);
	m->accepting = st == USB4V_QPS_INIT || st == USB4V_QPS_RTR || st == USB4V_QPS_RTS;
	qp->srq_member = (int)mi + 1;
	if (qp->recv_cq)
		__atomic_store_n(&qp->recv_cq->srq_emu, 1, __ATOMIC_RELEASE);
	fill_locked(srq);
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

void usb4v_srq_emu_qp_state(struct usb4v_qp *qp, int state)
{
	struct usb4v_srq *srq = qp->srq;
	if (!srq || !srq->emu)
		return;
	pthread_mutex_lock(&srq->lock);
	if (qp->srq_member) {
		struct emu_member *m = &srq->emu->members[qp->srq_member - 1];
		m->accepting = state == USB4V_QPS_INIT || state == USB4V_QPS_RTR || state == USB4V_QPS_RTS;
		/* A QP moved to RESET has an empty kernel RQ (the module frees
		 * its receive WQEs without completions there only on destroy;
		 * to RESET through ERR the flush brought them back already). */
		fill_locked(srq);
	}
	pthread_mutex_unlock(&srq->lock);
}

static void emu_release(struct usb4v_srq *srq);

/* Takes back what member mi holds (its kernel QP is gone) and drops it. */
static void member_reclaim(struct usb4v_srq_emu *e, uint32_t mi)
{
	for (uint32_t i = 0; i < e->nslots && e->members[mi].lent; i++) {
		if (e->slots[i].member == (int)mi) {
			pend_push_front(e, i);
			e->members[mi].lent--;
		}
	}
	e->members[mi].used = 0;
}

void usb4v_srq_emu_detach(struct usb4v_qp *qp)
{
	struct usb4v_srq *srq = qp->srq;
	if (!srq || !srq->emu || !qp->srq_member)
		return;
	pthread_mutex_lock(&srq->lock);
	struct usb4v_srq_emu *e = srq->emu;
	struct emu_member *m = &e->members[qp->srq_member - 1];
	m->qp = NULL;
	m->accepting = 0;
	if (!m->cq)
		member_reclaim(e, qp->srq_member - 1); /* its CQ is gone: nothing comes back */
	if (!m->lent)
		m->used = 0;
	qp->srq_member = 0;
	int last = take_last(e);
	if (!last)
		fill_locked(srq);
	pthread_mutex_unlock(&srq->lock);
	if (last)
		emu_release(srq);
}

void usb4v_srq_emu_cq_gone(struct usb4v_cq *cq)
{
	if (!__atomic_load_n(&cq->srq_emu, __ATOMIC_ACQUIRE))
		return;
	struct usb4v_srq *dead[8];
	int ndead = 0;
	pthread_rwlock_rdlock(&reg_mu);
	for (uint32_t r = 0; r < REG_SIZE; r++) {
		struct usb4v_srq *srq = reg_srq[r];
		if (!srq)
			continue;
		pthread_mutex_lock(&srq->lock);
		struct usb4v_srq_emu *e = srq->emu;
		for (uint32_t mi = 0; mi < e->nmembers; mi++) {
			struct emu_member *m = &e->members[mi];
			if (!m->used || m->cq != cq)
				continue;
			if (m->qp)
				m->cq = NULL; /* only at a context's close: its QP's free reclaims */
			else
				member_reclaim(e, mi);
		}
		int last = take_last(e);
		if (!last)
			fill_locked(srq);
		pthread_mutex_unlock(&srq->lock);
		if (last && ndead < 8)
			dead[ndead++] = srq;
	}
	pthread_rwlock_unlock(&reg_mu);
	for (int i = 0; i < ndead; i++)
		emu_release(dead[i]);
}

int usb4v_srq_emu_modify(struct usb4v_srq *srq, uint32_t max_wr, uint32_t limit, int mask)
{
	if (!srq || !srq->emu)
		return EINVAL;
	struct usb4v_srq_emu *e = srq->emu;
	int rc = 0;
	pthread_mutex_lock(&srq->lock);
	uint32_t new_max = mask & USB4V_SRQ_EMU_MAX_WR ? max_wr : e->max_wr;
	if ((mask & USB4V_SRQ_EMU_MAX_WR) && (!max_wr || max_wr < e->posted))
		rc = EINVAL;
	else if ((mask & USB4V_SRQ_EMU_LIMIT) && limit > new_max)
		rc = EINVAL;
	else if ((mask & USB4V_SRQ_EMU_MAX_WR) && (rc = grow_slots(e, max_wr)) == 0)
		e->max_wr = max_wr;
	if (!rc && (mask & USB4V_SRQ_EMU_LIMIT))
		e->limit = limit; /* the event comes at the next consumption below it, as rxe's */
	pthread_mutex_unlock(&srq->lock);
	return rc;
}

void usb4v_srq_emu_stats(struct usb4v_srq *srq, struct usb4v_srq_emu_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!srq || !srq->emu)
		return;
	struct usb4v_srq_emu *e = srq->emu;
	pthread_mutex_lock(&srq->lock);
	st->max_wr = e->max_wr;
	st->max_sge = e->max_sge;
	st->limit = e->limit;
	st->posted = e->posted;
	st->pending = e->npending;
	st->lent = e->posted - e->npending;
	for (uint32_t i = 0; i < e->nmembers; i++) {
		if (!e->members[i].used)
			continue;
		if (e->members[i].qp)
			st->qps++;
		else
			st->zombies++;
	}
	st->events = e->events;
	st->refills = e->refills;
	pthread_mutex_unlock(&srq->lock);
}

void usb4v_srq_emu_set_event_fd(struct usb4v_srq *srq, int fd)
{
	if (!srq || !srq->emu)
		return;
	pthread_mutex_lock(&srq->lock);
	srq->emu->event_fd = fd;
	pthread_mutex_unlock(&srq->lock);
}

uint32_t usb4v_srq_emu_lent(struct usb4v_qp *qp)
{
	if (!qp || !qp->srq || !qp->srq->emu)
		return 0;
	pthread_mutex_lock(&qp->srq->lock);
	uint32_t n = qp->srq_member ? qp->srq->emu->members[qp->srq_member - 1].lent : 0;
	pthread_mutex_unlock(&qp->srq->lock);
	return n;
}

/* post_srq_recv of a provider SRQ (engine.c dispatches here). */
int usb4v_srq_emu_post(struct usb4v_srq *srq, struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad_wr)
{
	struct usb4v_srq_emu *e = srq->emu;
	int rc = 0;
	pthread_mutex_lock(&srq->lock);
	int gone = __atomic_load_n(&srq->ring_error, __ATOMIC_RELAXED);
	for (; wr; wr = wr->next) {
		if (gone) {
			rc = gone;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > e->max_sge || (wr->num_sge && !wr->sg_list)) {
			rc = EINVAL;
			break;
		}
		if (e->posted >= e->max_wr || e->free_head == NIL) {
			rc = ENOMEM; /* a full queue, as rxe's post_srq_recv */
			break;
		}
		uint32_t i = e->free_head;
		struct emu_slot *s = &e->slots[i];
		e->free_head = s->next;
		s->wr_id = wr->wr_id;
		s->num_sge = wr->num_sge;
		if (wr->num_sge)
			s->sge = wr->sg_list[0];
		else
			memset(&s->sge, 0, sizeof(s->sge));
		pend_push_back(e, i);
		e->posted++;
	}
	if (rc)
		*bad_wr = wr;
	fill_locked(srq);
	pthread_mutex_unlock(&srq->lock);
	return rc;
}

static struct usb4v_srq *reg_lookup(uint64_t token, uint32_t *slot, uint32_t *slot_gen)
{
	if (token >> 56 != TOKEN_MARK)
		return NULL;
	uint32_t r = (uint32_t)(token >> 44) & (REG_SIZE - 1);
	struct usb4v_srq *srq = reg_srq[r];
	if (!srq || (srq->emu->reg_gen & 0xf) != ((token >> 40) & 0xf))
		return NULL;
	*slot = (uint32_t)token;
	*slot_gen = (uint32_t)(token >> 32) & 0xff;
	return srq;
}

int usb4v_srq_emu_fixup(struct usb4v_cq *cq, struct usb4v_ibv_wc *wc, int n)
{
	if (n <= 0 || !__atomic_load_n(&cq->srq_emu, __ATOMIC_ACQUIRE))
		return n;
	int out = 0, stale = 0;
	struct usb4v_srq *held = NULL, *dead = NULL;
	pthread_rwlock_rdlock(&reg_mu);
	for (int k = 0; k < n; k++) {
		uint32_t si, sgen;
		struct usb4v_srq *srq = reg_lookup(wc[k].wr_id, &si, &sgen);
		if (srq && srq != held) {
			if (held) {
				fill_locked(held);
				pthread_mutex_unlock(&held->lock);
			}
			held = srq;
			pthread_mutex_lock(&held->lock);
		}
		struct usb4v_srq_emu *e = srq ? srq->emu : NULL;
		struct emu_slot *s = e && si < e->nslots ? &e->slots[si] : NULL;
		struct emu_member *m = s && s->member >= 0 ? &e->members[s->member] : NULL;
		/* The kernel's qp_num is the QP's while its QP lives; once
		 * destroy_qp ran, the module's poll reads it from the freed QP
		 * (its CQE keeps a pointer to the ib_qp, which the core frees
		 * after destroy_qp: hellas-main:kernel/ibdev.c:7169,
		 * pleite-gda-8099446:kernel/ibdev.c:9178; the uverbs core's
		 * poll copies wc->qp->qp_num), whatever the memory holds by
		 * then. A member whose QP takes no receives any more (ERR,
		 * being destroyed, destroyed) is matched by its token alone. */
		int qpn_ok = m && (m->qp_num == wc[k].qp_num || !m->qp || !m->accepting);
		if (!m || (s->gen & 0xff) != sgen || !qpn_ok || m->cq != cq) {
			if (wc[k].wr_id >> 56 == TOKEN_MARK && wc[k].status == USB4V_WC_WR_FLUSH_ERR &&
			    wc[k].opcode == USB4V_WC_RECV) {
				/* A flush of a lending that is over (its SRQ gone, or
				 * the WR taken back): never the application's. */
				stale++;
				continue;
			}
			wc[out++] = wc[k]; /* not a lent WR: as polled */
			continue;
		}
		if (m->qp_num != wc[k].qp_num) {
			if (m->debug && !m->qpn_logged) {
				m->qpn_logged = 1;
				fprintf(stderr,
					"usb4verbs: srq: the kernel reported qp_num %u for a WR lent to qp %u, which takes no "
					"receives (destroyed: the module read the number from the freed QP); taken as qp %u's\n",
					wc[k].qp_num, m->qp_num, m->qp_num);
			}
			wc[k].qp_num = m->qp_num;
		}
		m->lent--;
		if (wc[k].status == USB4V_WC_WR_FLUSH_ERR) {
			/* The QP failed or is being destroyed: the WR was never
			 * consumed and stays the SRQ's. */
			pend_push_front(e, si);
		} else {
			wc[k].wr_id = s->wr_id;
			slot_free(e, si);
			e->posted--;
			wc[out++] = wc[k];
			raise_limit(e);
		}
		if (!m->lent && !m->qp) {
			m->used = 0;
			if (take_last(e))
				dead = srq;
		}
	}
	if (held) {
		if (held != dead)
			fill_locked(held);
		pthread_mutex_unlock(&held->lock);
	}
	pthread_rwlock_unlock(&reg_mu);
	if (dead)
		emu_release(dead);
	if (stale)
		__atomic_add_fetch(&emu_stale_flushes, (uint64_t)stale, __ATOMIC_RELAXED);
	return out;
}

/* Memory of an SRQ whose free ran and whose last member left. */
static void emu_release(struct usb4v_srq *srq)
{
	struct usb4v_srq_emu *e = srq->emu;
	pthread_rwlock_wrlock(&reg_mu);
	if (reg_srq[e->reg] == srq)
		reg_srq[e->reg] = NULL;
	pthread_rwlock_unlock(&reg_mu);
	free(e->slots);
	free(e->members);
	free(e);
	srq->emu = NULL;
	srq->backend = USB4V_BACKEND_NONE;
	usb4v_srq_free(srq);
}

/* usb4v_srq_free of a provider SRQ: now, or once the WRs lent to destroyed
 * QPs have come back (their completions still name its slots). */
void usb4v_srq_emu_free(struct usb4v_srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	struct usb4v_srq_emu *e = srq->emu;
	e->freed = 1;
	int last = take_last(e);
	pthread_mutex_unlock(&srq->lock);
	if (last)
		emu_release(srq);
}
