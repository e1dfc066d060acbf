// CQ, QP, SRQ and AH ops. Control ops call Go (objects.go); the data-path
// ops (post_send, post_recv, post_srq_recv, poll_cq, req_notify_cq) are C
// trampolines straight into the engine of provider/dataplane and never enter
// Go (DESIGN.md decision 1). Each object is one C allocation: libibverbs'
// struct first (it hands us back that pointer), then our Go handle and the
// engine's object. What core does with the objects before and after each op
// is rdma-core-private-abi.md §7.2.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "rxe_ring.h"
#include "shim.h"
#include "zopslayout.h"

// Public layouts (rdma-core-private-abi.md Appendix B, §5).
_Static_assert(sizeof(struct usb4_ibv_global_route) == 24, "ibv_global_route is 24 bytes");
_Static_assert(sizeof(struct usb4_ibv_ah_attr) == 32, "ibv_ah_attr is 32 bytes");
_Static_assert(sizeof(struct usb4_ibv_qp_cap) == 20, "ibv_qp_cap is 20 bytes");
_Static_assert(sizeof(struct usb4_ibv_qp_attr) == 144, "ibv_qp_attr is 144 bytes");
_Static_assert(offsetof(struct usb4_ibv_qp_attr, cap) == 36, "ibv_qp_attr.cap@36");
_Static_assert(offsetof(struct usb4_ibv_qp_attr, ah_attr) == 56, "ibv_qp_attr.ah_attr@56");
_Static_assert(offsetof(struct usb4_ibv_qp_attr, pkey_index) == 120, "ibv_qp_attr.pkey_index@120");
_Static_assert(offsetof(struct usb4_ibv_qp_attr, rate_limit) == 136, "ibv_qp_attr.rate_limit@136");
_Static_assert(sizeof(struct usb4_ibv_qp_init_attr) == 64, "ibv_qp_init_attr is 64 bytes");
_Static_assert(offsetof(struct usb4_ibv_qp_init_attr, cap) == 32, "ibv_qp_init_attr.cap@32");
_Static_assert(offsetof(struct usb4_ibv_qp_init_attr, qp_type) == 52, "ibv_qp_init_attr.qp_type@52");
_Static_assert(sizeof(pthread_mutex_t) == 40 && sizeof(pthread_cond_t) == 48, "LP64 glibc pthread sizes");

enum {
	// struct ibv_comp_channel
	IBV_COMP_CHANNEL_FD = 8,
	// struct verbs_cq (union of ibv_cq and ibv_cq_ex): VERBS_CQ_SIZE, shim.h
	IBV_CQ_CONTEXT = 0,
	IBV_CQ_HANDLE = 24,
	IBV_CQ_CQE = 28,
	IBV_CQ_MUTEX = 32,
	IBV_CQ_COND = 72,
	IBV_CQ_COMP_EVENTS_COMPLETED = 120,
	IBV_CQ_ASYNC_EVENTS_COMPLETED = 124,
	// struct ibv_qp; verbs_qp is 360/368/376 bytes depending on the release
	IBV_QP_CONTEXT = 0,
	IBV_QP_QP_CONTEXT = 8,
	IBV_QP_PD = 16,
	IBV_QP_SEND_CQ = 24,
	IBV_QP_RECV_CQ = 32,
	IBV_QP_SRQ = 40,
	IBV_QP_HANDLE = 48,
	IBV_QP_QP_NUM = 52,
	IBV_QP_STATE = 56,
	IBV_QP_QP_TYPE = 60,
	IBV_QP_MUTEX = 64,
	IBV_QP_COND = 104,
	IBV_QP_EVENTS_COMPLETED = 152,
	VERBS_QP_MAX_SIZE = 376,
	// struct ibv_srq
	IBV_SRQ_SIZE = 128,
	IBV_SRQ_CONTEXT = 0,
	IBV_SRQ_PD = 16,
	IBV_SRQ_HANDLE = 24,
	IBV_SRQ_MUTEX = 32,
	IBV_SRQ_COND = 72,
	IBV_SRQ_EVENTS_COMPLETED = 120,
	// enum ibv_qp_attr_mask
	IBV_QP_ATTR_STATE = 1,
};

// The ibv_cq/ibv_qp/ibv_srq pointer libibverbs hands back is our pointer
// (struct usb4_cq: shim.h).
struct usb4_qp {
	// Zeroed up to the largest verbs_qp: comp_mask must stay 0 at every
	// release's offset (no VERBS_QP_EX, no VERBS_QP_XRCD).
	unsigned char verbs_qp[VERBS_QP_MAX_SIZE];
	uintptr_t go;
	struct usb4v_qp *eng;
	struct usb4_shell shell;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

_Static_assert(offsetof(struct usb4_qp, eng) == USB4_QP_ENG_OFFSET, "qpex.c finds the engine QP there");

struct usb4_srq {
	unsigned char ibv_srq[IBV_SRQ_SIZE];
	uintptr_t go;
	struct usb4v_srq *eng;
	struct usb4_shell shell;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

// The engine casts ibv_ah * to struct usb4v_ah *, whose first member is the
// ibv_ah; our Go handle follows it.
struct usb4_ah {
	struct usb4v_ah eng;
	uintptr_t go;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

static void put32(void *obj, size_t off, uint32_t v)
{
	memcpy((char *)obj + off, &v, sizeof(v));
}

static void putptr(void *obj, size_t off, void *v)
{
	memcpy((char *)obj + off, &v, sizeof(v));
}

static void *getptr(const void *obj, size_t off)
{
	void *v;
	memcpy(&v, (const char *)obj + off, sizeof(v));
	return v;
}

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

// Where an object keeps its event acknowledgement state: the mutex and cond
// that ibv_ack_cq_events / ibv_ack_async_event take and signal, and the
// counters they increment (ibv_cq, ibv_qp, ibv_srq in Appendix B).
struct usb4_ack_state {
	size_t mutex, cond;
	size_t comp_completed;  // 0: the object has no completion events
	size_t async_completed;
};

// wait_events_acked waits until the application has acknowledged every
// event the kernel reported for a destroyed object, as libibverbs' own
// ibv_cmd_destroy_cq/qp/srq do before a provider frees it: an event read
// but not yet acked still points at the object, and the ack touches it.
static void wait_events_acked(unsigned char *obj, const struct usb4_ack_state *st,
			      const struct usb4_event_counts *ev)
{
	pthread_mutex_t *mu = (pthread_mutex_t *)(obj + st->mutex);
	pthread_cond_t *cond = (pthread_cond_t *)(obj + st->cond);
	uint32_t *async = (uint32_t *)(obj + st->async_completed);
	uint32_t *comp = st->comp_completed ? (uint32_t *)(obj + st->comp_completed) : NULL;

	pthread_mutex_lock(mu);
	while (*async != ev->async || (comp && *comp != ev->comp))
		pthread_cond_wait(cond, mu);
	pthread_mutex_unlock(mu);
}

// destroy_outcome says whether a destroy's errno is a failure the caller
// sees. Like libibverbs' verbs_is_destroy_err: a device that is gone (hot
// unplug disassociates it; the kernel answers EIO and has already released
// the object) counts as destroyed when the application opted in with
// RDMAV_ALLOW_DISASSOC_DESTROY, and then there are no events to wait for.
// The Go side keeps its entry of such an object until the context closes.
enum destroy_outcome { DESTROYED, DEVICE_GONE, DESTROY_FAILED };

static enum destroy_outcome destroy_outcome(int err)
{
	const bool *allow = usb4_abi_get()->allow_disassoc_destroy;
	if (err == 0)
		return DESTROYED;
	if (err == EIO && allow && *allow)
		return DEVICE_GONE;
	return DESTROY_FAILED;
}

int usb4_destroy_errno(int err)
{
	return destroy_outcome(err) == DESTROY_FAILED ? err : 0;
}

static const struct usb4_ack_state cq_acks = {
	.mutex = IBV_CQ_MUTEX,
	.cond = IBV_CQ_COND,
	.comp_completed = IBV_CQ_COMP_EVENTS_COMPLETED,
	.async_completed = IBV_CQ_ASYNC_EVENTS_COMPLETED,
};
static const struct usb4_ack_state qp_acks = {
	.mutex = IBV_QP_MUTEX,
	.cond = IBV_QP_COND,
	.async_completed = IBV_QP_EVENTS_COMPLETED,
};
static const struct usb4_ack_state srq_acks = {
	.mutex = IBV_SRQ_MUTEX,
	.cond = IBV_SRQ_COND,
	.async_completed = IBV_SRQ_EVENTS_COMPLETED,
};

// ---- destroyed objects ----
//
// Order of a destroy, as rdma-core's: DESTROY in the kernel (Go; on success
// Go disowns the engine object), wait until the application acknowledged
// the object's events (a thread holding one may still poll, re-arm or post
// meanwhile), retire the shell, and only then free the engine object and
// unmap its rings (here). One owner at each step: Go until the kernel
// destroy succeeds, objects.c after it.
//
// A destroyed CQ, QP or SRQ keeps its memory on its context's quarantine
// (context.c): its Go handle is 0 (a second destroy or any control op gets
// EBADF from Go's handle table) and its engine pointer NULL, so the data
// ops below fail as rdma-core's conventions have it: post_* return EINVAL
// with *bad_wr at the first WR, poll_cq returns -EINVAL, req_notify_cq
// EINVAL. ibv_*->context stays valid for libibverbs' inlines. A data op that
// races with the destroy is the application's race, as with any provider.

static void *load_eng(void *const *eng)
{
	return __atomic_load_n(eng, __ATOMIC_ACQUIRE);
}

static void retire(void *ibv_ctx, uintptr_t *go, void **eng, struct usb4_shell *shell,
		   enum usb4_shell_kind kind)
{
	*go = 0;
	__atomic_store_n(eng, NULL, __ATOMIC_RELEASE);
	shell->kind = kind;
	usb4_quarantine(ibv_ctx, shell);
}

#define SHELL_OWNER(s, type) ((type *)((char *)(s) - offsetof(type, shell)))

void usb4_shell_free(struct usb4_shell *s)
{
	switch (s->kind) {
	case USB4_SHELL_CQ:
		free(SHELL_OWNER(s, struct usb4_cq));
		break;
	case USB4_SHELL_QP: {
		struct usb4_qp *qp = SHELL_OWNER(s, struct usb4_qp);
		// We initialised these in create_qp; core never touches them.
		pthread_cond_destroy((pthread_cond_t *)(qp->verbs_qp + IBV_QP_COND));
		pthread_mutex_destroy((pthread_mutex_t *)(qp->verbs_qp + IBV_QP_MUTEX));
		free(qp);
		break;
	}
	case USB4_SHELL_SRQ:
		free(SHELL_OWNER(s, struct usb4_srq));
		break;
	}
}

// ---- a fork() parent's objects ----
//
// A control op in a fork() child on an object the parent created first
// gives it a Go object of the child's image (fork.c usb4_obj_adopt), from
// the kernel's handle in its ibv struct; objects it names (the PD, a QP's
// CQs and SRQ) are adopted before it.

int usb4_cq_adopt(void *ibv_cq)
{
	struct usb4_cq *cq = ibv_cq;
	struct usb4_adopt_req req = {.eng = load_eng((void *const *)&cq->eng)};
	memcpy(&req.handle, cq->verbs_cq + IBV_CQ_HANDLE, sizeof(req.handle));
	memcpy(&req.num, cq->verbs_cq + IBV_CQ_CQE, sizeof(req.num));
	return usb4_obj_adopt(getptr(cq->verbs_cq, IBV_CQ_CONTEXT), &cq->go, &cq->image, USB4_OBJ_CQ, &req);
}

static int srq_adopt(struct usb4_srq *srq)
{
	struct usb4_adopt_req req = {.eng = load_eng((void *const *)&srq->eng)};
	int err = usb4_adopt_req_on_pd(getptr(srq->ibv_srq, IBV_SRQ_PD), &req);
	if (err)
		return err;
	memcpy(&req.handle, srq->ibv_srq + IBV_SRQ_HANDLE, sizeof(req.handle));
	return usb4_obj_adopt(getptr(srq->ibv_srq, IBV_SRQ_CONTEXT), &srq->go, &srq->image, USB4_OBJ_SRQ, &req);
}

static int qp_adopt(struct usb4_qp *qp)
{
	struct usb4_adopt_req req = {.eng = load_eng((void *const *)&qp->eng)};
	int err = usb4_adopt_req_on_pd(getptr(qp->verbs_qp, IBV_QP_PD), &req);
	if (err)
		return err;
	memcpy(&req.handle, qp->verbs_qp + IBV_QP_HANDLE, sizeof(req.handle));
	memcpy(&req.num, qp->verbs_qp + IBV_QP_QP_NUM, sizeof(req.num));
	memcpy(&req.type, qp->verbs_qp + IBV_QP_QP_TYPE, sizeof(req.type));
	return usb4_obj_adopt(getptr(qp->verbs_qp, IBV_QP_CONTEXT), &qp->go, &qp->image, USB4_OBJ_QP, &req);
}

static int ah_adopt(struct usb4_ah *ah)
{
	struct usb4_adopt_req req = {.handle = ah->eng.ibv_ah.handle};
	int err = usb4_adopt_req_on_pd(ah->eng.ibv_ah.pd, &req);
	if (err)
		return err;
	return usb4_obj_adopt(ah->eng.ibv_ah.context, &ah->go, &ah->image, USB4_OBJ_AH, &req);
}

// ---- CQ ----

struct usb4_cq *usb4_cq_create(void *ibv_ctx, int cqe, void *channel, int comp_vector, size_t size)
{
	if (cqe <= 0 || comp_vector < 0)
		return fail_null(EINVAL);
	if (usb4_in_fork_child(ibv_ctx, "create_cq"))
		return fail_null(ENOSYS);
	struct usb4_cq *cq = calloc(1, size < sizeof(*cq) ? sizeof(*cq) : size);
	if (!cq)
		return fail_null(ENOMEM);
	int chfd = -1;
	if (channel)
		memcpy(&chfd, (char *)channel + IBV_COMP_CHANNEL_FD, sizeof(chfd));
	struct usb4_obj_info info = {0};
	// user_handle = the ibv_cq: ibv_get_cq_event casts it back.
	int err = USB4_GO(CreateCQ, usb4_ctx_handle(ibv_ctx), cqe, chfd, comp_vector, (uint64_t)(uintptr_t)cq, &info);
	if (err) {
		free(cq);
		return fail_null(err);
	}
	cq->go = info.go;
	cq->image = usb4_go_image();
	cq->eng = info.eng;
	// context, channel, cq_context, mutex, cond and the event counters are
	// set by verbs_init_cq in core after we return.
	put32(cq->verbs_cq, IBV_CQ_HANDLE, info.handle);
	put32(cq->verbs_cq, IBV_CQ_CQE, info.num);
	return cq;
}

static void *usb4_create_cq(void *ibv_ctx, int cqe, void *channel, int comp_vector)
{
	return usb4_cq_create(ibv_ctx, cqe, channel, comp_vector, sizeof(struct usb4_cq));
}

static int usb4_destroy_cq(void *ibv_cq)
{
	struct usb4_cq *cq = ibv_cq;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_cq), "destroy_cq"))
		return usb4_errno(ENOSYS);
	int err = usb4_cq_adopt(ibv_cq);
	if (err)
		return usb4_errno(err);
	struct usb4_event_counts ev = {0};
	err = USB4_GO(DestroyCQ, cq->go, &ev);
	enum destroy_outcome out = destroy_outcome(err);
	if (out == DESTROY_FAILED)
		return usb4_errno(err);
	// verbs_init_cq initialised the mutex and cond; core never destroys them.
	struct usb4v_cq *eng = cq->eng;
	if (out == DESTROYED)
		wait_events_acked(cq->verbs_cq, &cq_acks, &ev);
	retire(getptr(cq->verbs_cq, IBV_CQ_CONTEXT), &cq->go, (void **)&cq->eng, &cq->shell, USB4_SHELL_CQ);
	if (out == DESTROYED) // Go disowned it; a gone device's stays Go's until close
		usb4v_cq_free(eng);
	return 0;
}

static int usb4_poll_cq(void *ibv_cq, int ne, void *wc)
{
	struct usb4v_cq *eng = load_eng((void *const *)&((struct usb4_cq *)ibv_cq)->eng);
	if (!eng) // destroyed; ne <= 0 stays 0 as for a live CQ
		return ne <= 0 ? 0 : -EINVAL;
	return usb4v_poll_cq(eng, ne, wc);
}

// poll_cq of rxe contexts (usb4_install_rxe_fast_ops): the ring poll inlined
// behind one test of the unusual cases, which take the generic path above
// (destroyed CQ, ne <= 0, NULL wc; the engine's own slow cases behind cq->slow).
static int usb4_poll_cq_rxe(void *ibv_cq, int ne, void *wc)
{
	struct usb4v_cq *eng = load_eng((void *const *)&((struct usb4_cq *)ibv_cq)->eng);
	// Bitwise | so GCC tests ne and wc in one branch (eng it tests on its
	// own); under emulation every branch on this path shows in the empty poll.
	if (__builtin_expect((eng == NULL) | (ne <= 0) | (wc == NULL), 0))
		return usb4_poll_cq(ibv_cq, ne, wc);
	return usb4v_rxe_poll_cq_fast(eng, ne, wc);
}

static int usb4_req_notify_cq(void *ibv_cq, int solicited_only)
{
	struct usb4v_cq *eng = load_eng((void *const *)&((struct usb4_cq *)ibv_cq)->eng);
	if (!eng)
		return usb4_errno(EINVAL);
	return usb4_errno(usb4v_req_notify_cq(eng, solicited_only));
}

// ---- QP ----

static void *usb4_create_qp(void *ibv_pd, void *init)
{
	struct usb4_pd *pd = ibv_pd;
	struct usb4_ibv_qp_init_attr *ia = init;
	if (!ia || !ia->send_cq || !ia->recv_cq)
		return fail_null(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), "create_qp"))
		return fail_null(ENOSYS);
	int err = usb4_pd_adopt(ibv_pd);
	if (!err)
		err = usb4_cq_adopt(ia->send_cq);
	if (!err)
		err = usb4_cq_adopt(ia->recv_cq);
	if (!err && ia->srq)
		err = srq_adopt(ia->srq);
	if (err)
		return fail_null(err);
	struct usb4_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return fail_null(ENOMEM);
	struct usb4_qp_req req = {
		.send_cq = ((struct usb4_cq *)ia->send_cq)->go,
		.recv_cq = ((struct usb4_cq *)ia->recv_cq)->go,
		.srq = ia->srq ? ((struct usb4_srq *)ia->srq)->go : 0,
		.user_handle = (uint64_t)(uintptr_t)qp, // async events map back to the ibv_qp
		.qp_type = ia->qp_type,
		.sq_sig_all = ia->sq_sig_all,
		.cap = ia->cap,
	};
	struct usb4_obj_info info = {0};
	err = USB4_GO(CreateQP, pd->go, &req, &info);
	if (err) {
		free(qp);
		return fail_null(err);
	}
	qp->go = info.go;
	qp->image = usb4_go_image();
	qp->eng = info.eng;
	// Core sets nothing on ibv_create_qp: every field is ours.
	void *q = qp->verbs_qp;
	putptr(q, IBV_QP_CONTEXT, getptr(pd->ibv_pd, IBV_PD_CONTEXT));
	putptr(q, IBV_QP_QP_CONTEXT, ia->qp_context);
	putptr(q, IBV_QP_PD, pd);
	putptr(q, IBV_QP_SEND_CQ, ia->send_cq);
	putptr(q, IBV_QP_RECV_CQ, ia->recv_cq);
	putptr(q, IBV_QP_SRQ, ia->srq);
	put32(q, IBV_QP_HANDLE, info.handle);
	put32(q, IBV_QP_QP_NUM, info.num);
	put32(q, IBV_QP_STATE, 0); // IBV_QPS_RESET
	put32(q, IBV_QP_QP_TYPE, ia->qp_type);
	put32(q, IBV_QP_EVENTS_COMPLETED, 0);
	pthread_mutex_init((pthread_mutex_t *)(qp->verbs_qp + IBV_QP_MUTEX), NULL);
	pthread_cond_init((pthread_cond_t *)(qp->verbs_qp + IBV_QP_COND), NULL);
	// Report the granted sizes, as rdma-core providers do.
	ia->cap = req.cap;
	return qp;
}

static int usb4_modify_qp(void *ibv_qp, void *attr, int mask)
{
	struct usb4_qp *qp = ibv_qp;
	if (!attr)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_qp), "modify_qp"))
		return usb4_errno(ENOSYS);
	int err = qp_adopt(qp);
	if (!err)
		err = USB4_GO(ModifyQP, qp->go, attr, mask);
	if (err)
		return usb4_errno(err);
	// Core updates qp->state; the engine keeps its own copy (no receives in
	// RESET on rxe).
	if (mask & IBV_QP_ATTR_STATE)
		usb4v_qp_set_state(qp->eng, (int)((struct usb4_ibv_qp_attr *)attr)->qp_state);
	return 0;
}

static int usb4_query_qp(void *ibv_qp, void *attr, int mask, void *init)
{
	struct usb4_qp *qp = ibv_qp;
	struct usb4_ibv_qp_init_attr *ia = init;
	if (!attr || !ia)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_qp), "query_qp"))
		return usb4_errno(ENOSYS);
	struct usb4_ibv_qp_cap cap = {0};
	int32_t sig_all = 0;
	int err = qp_adopt(qp);
	if (!err)
		err = USB4_GO(QueryQP, qp->go, mask, attr, &cap, &sig_all);
	if (err)
		return usb4_errno(err);
	memset(ia, 0, sizeof(*ia));
	ia->qp_context = getptr(qp->verbs_qp, IBV_QP_QP_CONTEXT);
	ia->send_cq = getptr(qp->verbs_qp, IBV_QP_SEND_CQ);
	ia->recv_cq = getptr(qp->verbs_qp, IBV_QP_RECV_CQ);
	ia->srq = getptr(qp->verbs_qp, IBV_QP_SRQ);
	ia->cap = cap;
	memcpy(&ia->qp_type, qp->verbs_qp + IBV_QP_QP_TYPE, sizeof(ia->qp_type));
	ia->sq_sig_all = sig_all;
	return 0;
}

// attach_mcast/detach_mcast: the kernel's ATTACH_MCAST/DETACH_MCAST
// through the Go part (a UD QP and a multicast GID are the kernel's checks,
// as through rdma-core's ibv_cmd_attach_mcast); librdmacm calls them when a
// multicast join completes and turns a failure into
// RDMA_CM_EVENT_MULTICAST_ERROR.
static int qp_mcast(void *ibv_qp, const void *gid, uint16_t lid, int attach)
{
	struct usb4_qp *qp = ibv_qp;
	if (!gid)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_qp), attach ? "attach_mcast" : "detach_mcast"))
		return usb4_errno(ENOSYS);
	uint8_t mgid[16];
	memcpy(mgid, gid, sizeof(mgid));
	int err = qp_adopt(qp);
	if (!err)
		err = USB4_GO(Mcast, qp->go, attach, mgid, lid);
	return usb4_errno(err);
}

static int usb4_attach_mcast(void *ibv_qp, const void *gid, uint16_t lid)
{
	return qp_mcast(ibv_qp, gid, lid, 1);
}

static int usb4_detach_mcast(void *ibv_qp, const void *gid, uint16_t lid)
{
	return qp_mcast(ibv_qp, gid, lid, 0);
}

static int usb4_destroy_qp(void *ibv_qp)
{
	struct usb4_qp *qp = ibv_qp;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_qp), "destroy_qp"))
		return usb4_errno(ENOSYS);
	int err = qp_adopt(qp);
	if (err)
		return usb4_errno(err);
	struct usb4_event_counts ev = {0};
	err = USB4_GO(DestroyQP, qp->go, &ev);
	enum destroy_outcome out = destroy_outcome(err);
	if (out == DESTROY_FAILED)
		return usb4_errno(err);
	struct usb4v_qp *eng = qp->eng;
	if (out == DESTROYED)
		wait_events_acked(qp->verbs_qp, &qp_acks, &ev);
	retire(getptr(qp->verbs_qp, IBV_QP_CONTEXT), &qp->go, (void **)&qp->eng, &qp->shell, USB4_SHELL_QP);
	if (out == DESTROYED) // the kernel tore its DV queue down with the QP
		usb4v_qp_free_destroyed(eng);
	return 0;
}

void *usb4_qp_create(void *ibv_pd, void *init_attr)
{
	return usb4_create_qp(ibv_pd, init_attr);
}

int usb4_qp_destroy(void *ibv_qp)
{
	return usb4_destroy_qp(ibv_qp);
}

// refuse_post is a post on a destroyed QP or SRQ: EINVAL at the first WR.
static int refuse_post(void *wr, void **bad)
{
	if (bad)
		*bad = wr;
	return EINVAL;
}

static int usb4_post_send(void *ibv_qp, void *wr, void *bad)
{
	struct usb4v_qp *eng = load_eng((void *const *)&((struct usb4_qp *)ibv_qp)->eng);
	if (!eng)
		return refuse_post(wr, bad);
	return usb4v_post_send(eng, wr, bad);
}

static int usb4_post_recv(void *ibv_qp, void *wr, void *bad)
{
	struct usb4v_qp *eng = load_eng((void *const *)&((struct usb4_qp *)ibv_qp)->eng);
	if (!eng)
		return refuse_post(wr, bad);
	return usb4v_post_recv(eng, wr, bad);
}

// ---- SRQ ----

// create_srq(pd, ibv_srq_init_attr *): srq_context@0, attr@8. Core sets
// context, srq_context, pd, events_completed, mutex and cond afterwards.
static void *usb4_create_srq(void *ibv_pd, void *init)
{
	struct usb4_pd *pd = ibv_pd;
	if (!init)
		return fail_null(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), "create_srq"))
		return fail_null(ENOSYS);
	int err = usb4_pd_adopt(ibv_pd);
	if (err)
		return fail_null(err);
	struct usb4_srq *srq = calloc(1, sizeof(*srq));
	if (!srq)
		return fail_null(ENOMEM);
	struct usb4_ibv_srq_attr *attr = (struct usb4_ibv_srq_attr *)((char *)init + sizeof(void *));
	struct usb4_obj_info info = {0};
	err = USB4_GO(CreateSRQ, pd->go, (uint64_t)(uintptr_t)srq, attr, &info);
	if (err) {
		free(srq);
		return fail_null(err);
	}
	srq->go = info.go;
	srq->image = usb4_go_image();
	srq->eng = info.eng;
	put32(srq->ibv_srq, IBV_SRQ_HANDLE, info.handle);
	return srq;
}

void *usb4_srq_create(void *ibv_pd, void *init)
{
	return usb4_create_srq(ibv_pd, init);
}

static int usb4_modify_srq(void *ibv_srq, void *attr, int mask)
{
	if (!attr)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_srq), "modify_srq"))
		return usb4_errno(ENOSYS);
	int err = srq_adopt(ibv_srq);
	if (err)
		return usb4_errno(err);
	return usb4_errno(USB4_GO(ModifySRQ, ((struct usb4_srq *)ibv_srq)->go, attr, mask));
}

static int usb4_query_srq(void *ibv_srq, void *attr)
{
	if (!attr)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_srq), "query_srq"))
		return usb4_errno(ENOSYS);
	int err = srq_adopt(ibv_srq);
	if (err)
		return usb4_errno(err);
	return usb4_errno(USB4_GO(QuerySRQ, ((struct usb4_srq *)ibv_srq)->go, attr));
}

static int usb4_destroy_srq(void *ibv_srq)
{
	struct usb4_srq *srq = ibv_srq;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_srq), "destroy_srq"))
		return usb4_errno(ENOSYS);
	int err = srq_adopt(srq);
	if (err)
		return usb4_errno(err);
	struct usb4_event_counts ev = {0};
	err = USB4_GO(DestroySRQ, srq->go, &ev);
	enum destroy_outcome out = destroy_outcome(err);
	if (out == DESTROY_FAILED)
		return usb4_errno(err);
	// core's ibv_create_srq initialised the mutex and cond.
	struct usb4v_srq *eng = srq->eng;
	// A provider SRQ (docs/srq.md) reports UINT32_MAX: its limit events are
	// not waited for (an application that never reads its async fd would
	// hang here); the quarantine keeps the ibv_srq for a late ack.
	if (out == DESTROYED && ev.async != UINT32_MAX)
		wait_events_acked(srq->ibv_srq, &srq_acks, &ev);
	retire(getptr(srq->ibv_srq, IBV_SRQ_CONTEXT), &srq->go, (void **)&srq->eng, &srq->shell, USB4_SHELL_SRQ);
	if (out == DESTROYED)
		usb4v_srq_free(eng);
	return 0;
}

static int usb4_post_srq_recv(void *ibv_srq, void *wr, void *bad)
{
	struct usb4v_srq *eng = load_eng((void *const *)&((struct usb4_srq *)ibv_srq)->eng);
	if (!eng)
		return refuse_post(wr, bad);
	return usb4v_post_srq_recv(eng, wr, bad);
}

// ---- AH ----

static void *usb4_create_ah(void *ibv_pd, void *attr)
{
	struct usb4_pd *pd = ibv_pd;
	if (!attr)
		return fail_null(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), "create_ah"))
		return fail_null(ENOSYS);
	int err = usb4_pd_adopt(ibv_pd);
	if (err)
		return fail_null(err);
	struct usb4_ah *ah = calloc(1, sizeof(*ah));
	if (!ah)
		return fail_null(ENOMEM);
	struct usb4_obj_info info = {0};
	err = USB4_GO(CreateAH, pd->go, attr, &info);
	if (err) {
		free(ah);
		return fail_null(err);
	}
	ah->go = info.go;
	ah->image = usb4_go_image();
	// Core sets ah->context and ah->pd after we return.
	ah->eng.ibv_ah.handle = info.handle;
	ah->eng.ah_num = info.num;
	return ah;
}

static int usb4_destroy_ah(void *ibv_ah)
{
	struct usb4_ah *ah = ibv_ah;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_ah), "destroy_ah"))
		return usb4_errno(ENOSYS);
	int err = ah_adopt(ah);
	if (!err)
		err = usb4_destroy_errno(USB4_GO(DestroyAH, ah->go));
	if (err)
		return usb4_errno(err);
	free(ah);
	return 0;
}

void usb4_install_object_ops(void **buf, size_t n)
{
	usb4_set_slot(buf, n, USB4_OP_create_cq, (void *)usb4_create_cq);
	usb4_set_slot(buf, n, USB4_OP_destroy_cq, (void *)usb4_destroy_cq);
	usb4_set_slot(buf, n, USB4_OP_poll_cq, (void *)usb4_poll_cq);
	usb4_set_slot(buf, n, USB4_OP_req_notify_cq, (void *)usb4_req_notify_cq);
	usb4_set_slot(buf, n, USB4_OP_create_qp, (void *)usb4_create_qp);
	usb4_set_slot(buf, n, USB4_OP_modify_qp, (void *)usb4_modify_qp);
	usb4_set_slot(buf, n, USB4_OP_query_qp, (void *)usb4_query_qp);
	usb4_set_slot(buf, n, USB4_OP_destroy_qp, (void *)usb4_destroy_qp);
	usb4_set_slot(buf, n, USB4_OP_attach_mcast, (void *)usb4_attach_mcast);
	usb4_set_slot(buf, n, USB4_OP_detach_mcast, (void *)usb4_detach_mcast);
	usb4_set_slot(buf, n, USB4_OP_post_send, (void *)usb4_post_send);
	usb4_set_slot(buf, n, USB4_OP_post_recv, (void *)usb4_post_recv);
	usb4_set_slot(buf, n, USB4_OP_create_srq, (void *)usb4_create_srq);
	usb4_set_slot(buf, n, USB4_OP_modify_srq, (void *)usb4_modify_srq);
	usb4_set_slot(buf, n, USB4_OP_query_srq, (void *)usb4_query_srq);
	usb4_set_slot(buf, n, USB4_OP_destroy_srq, (void *)usb4_destroy_srq);
	usb4_set_slot(buf, n, USB4_OP_post_srq_recv, (void *)usb4_post_srq_recv);
	usb4_set_slot(buf, n, USB4_OP_create_ah, (void *)usb4_create_ah);
	usb4_set_slot(buf, n, USB4_OP_destroy_ah, (void *)usb4_destroy_ah);
	usb4_install_cqex_ops(buf, n);
	usb4_install_srqex_ops(buf, n);
	usb4_install_qpex_ops(buf, n);
	// Left to libibverbs' dummies on purpose, for the errno contracts of
	// rdma-core-private-abi.md / usb4-kernel-and-consumers.md §3:
	// query_ece/set_ece (return EOPNOTSUPP: NCCL), query_port_speed
	// (EOPNOTSUPP), create_srq_ex (EOPNOTSUPP). create_qp_ex is qpex.c's,
	// reg_dmabuf_mr verbs.c's (the kernel answers NCCL's dma-buf probe).
}

void usb4_install_rxe_fast_ops(void **buf, size_t n)
{
	// The ops table is per context, not per CQ: every CQ of an rxe context
	// polls an rxe ring (and a CQ that does not is caught by cq->slow).
	usb4_set_slot(buf, n, USB4_OP_poll_cq, (void *)usb4_poll_cq_rxe);
}
