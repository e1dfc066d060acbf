// create_cq_ex and the ibv_cq_ex poll API: the function table libibverbs'
// inlines (ibv_start_poll, ibv_next_poll, ibv_end_poll, ibv_wc_read_*) call
// straight into, C only (DESIGN.md decision 1), over the engine's cursor
// (provider/dataplane/cqex.c). What librxe accepts is the reference
// (rdma-core:providers/rxe/rxe.c rxe_create_cq_ex, libibverbs/cmd_cq.c
// ibv_icmd_create_cq_ex): the standard wc_flags, comp_mask FLAGS and PD.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "rxe_ring.h"
#include "shim.h"
#include "zopslayout.h"

// struct ibv_cq_ex (rdma-core:libibverbs/verbs.h), 288 bytes v28..master.
struct usb4_ibv_cq_ex {
	void *context;
	void *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
	uint32_t comp_mask;
	uint32_t status;
	uint64_t wr_id;
	int (*start_poll)(struct usb4_ibv_cq_ex *, void *attr);
	int (*next_poll)(struct usb4_ibv_cq_ex *);
	void (*end_poll)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_opcode)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_vendor_err)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_byte_len)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_imm_data)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_qp_num)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_src_qp)(struct usb4_ibv_cq_ex *);
	unsigned int (*read_wc_flags)(struct usb4_ibv_cq_ex *);
	uint32_t (*read_slid)(struct usb4_ibv_cq_ex *);
	uint8_t (*read_sl)(struct usb4_ibv_cq_ex *);
	uint8_t (*read_dlid_path_bits)(struct usb4_ibv_cq_ex *);
	void *read_completion_ts, *read_cvlan, *read_flow_tag, *read_tm_info, *read_completion_wallclock_ns;
};
_Static_assert(sizeof(struct usb4_ibv_cq_ex) == VERBS_CQ_SIZE, "ibv_cq_ex is 288 bytes");
_Static_assert(offsetof(struct usb4_ibv_cq_ex, comp_mask) == 128, "ibv_cq_ex.comp_mask@128");
_Static_assert(offsetof(struct usb4_ibv_cq_ex, wr_id) == 136, "ibv_cq_ex.wr_id@136");
_Static_assert(offsetof(struct usb4_ibv_cq_ex, start_poll) == 144, "ibv_cq_ex.start_poll@144");
_Static_assert(offsetof(struct usb4_ibv_cq_ex, read_dlid_path_bits) == 240, "ibv_cq_ex.read_dlid_path_bits@240");

// struct ibv_cq_init_attr_ex (verbs.h), 56 bytes.
struct usb4_ibv_cq_init_attr_ex {
	uint32_t cqe;
	void *cq_context;
	void *channel;
	uint32_t comp_vector;
	uint64_t wc_flags;
	uint32_t comp_mask;
	uint32_t flags;
	void *parent_domain;
};
_Static_assert(sizeof(struct usb4_ibv_cq_init_attr_ex) == 56, "ibv_cq_init_attr_ex is 56 bytes");
_Static_assert(offsetof(struct usb4_ibv_cq_init_attr_ex, wc_flags) == 32, "ibv_cq_init_attr_ex.wc_flags@32");

enum {
	// enum ibv_create_cq_wc_flags: IBV_WC_STANDARD_FLAGS, what librxe reads
	USB4_WC_EX_WITH_BYTE_LEN = 1 << 0,
	USB4_WC_EX_WITH_IMM = 1 << 1,
	USB4_WC_EX_WITH_QP_NUM = 1 << 2,
	USB4_WC_EX_WITH_SRC_QP = 1 << 3,
	USB4_WC_EX_WITH_SLID = 1 << 4,
	USB4_WC_EX_WITH_SL = 1 << 5,
	USB4_WC_EX_WITH_DLID_PATH_BITS = 1 << 6,
	USB4_WC_EX_SUPPORTED = (1 << 7) - 1,
	// enum ibv_cq_init_attr_mask
	USB4_CQ_INIT_ATTR_MASK_FLAGS = 1 << 0,
	USB4_CQ_INIT_ATTR_MASK_PD = 1 << 1,
	// enum ibv_create_cq_attr_flags
	USB4_CREATE_CQ_ATTR_IGNORE_OVERRUN = 1 << 1,
};

enum { IBV_CQ_CQE_OFF = 28 }; // ibv_cq.cqe (objects.c IBV_CQ_CQE)

struct usb4_cqex {
	struct usb4_cq cq; // first: libibverbs' ibv_cq_ex is its verbs_cq
	struct usb4v_cq_cursor cur;
};

static inline struct usb4_cqex *to_cqex(struct usb4_ibv_cq_ex *ibcq)
{
	return (struct usb4_cqex *)ibcq;
}

static inline struct usb4v_cq *eng_of(struct usb4_ibv_cq_ex *ibcq)
{
	return __atomic_load_n(&to_cqex(ibcq)->cq.eng, __ATOMIC_ACQUIRE);
}

static inline void publish(struct usb4_ibv_cq_ex *ibcq)
{
	const struct usb4v_ibv_wc *wc = &to_cqex(ibcq)->cur.cur;
	ibcq->status = wc->status;
	ibcq->wr_id = wc->wr_id;
}

// start_poll's attr (struct ibv_poll_cq_attr) has only comp_mask, which
// must be 0; librxe does not look at it, so neither do we.
static int cqex_start_poll(struct usb4_ibv_cq_ex *ibcq, void *attr)
{
	(void)attr;
	struct usb4v_cq *eng = eng_of(ibcq);
	if (!eng) // destroyed
		return usb4_errno(EINVAL);
	int rc = usb4v_cq_start_poll(eng, &to_cqex(ibcq)->cur);
	if (rc)
		return usb4_errno(rc);
	publish(ibcq);
	return 0;
}

// start_poll of CQs on an rxe ring: the empty check inlined (rxe_ring.h),
// as poll_cq's fast path is.
static int cqex_start_poll_rxe(struct usb4_ibv_cq_ex *ibcq, void *attr)
{
	(void)attr;
	struct usb4v_cq *eng = eng_of(ibcq);
	if (__builtin_expect(eng == NULL, 0))
		return usb4_errno(EINVAL);
	int rc = usb4v_rxe_start_poll_fast(eng, &to_cqex(ibcq)->cur);
	if (rc) { // errno set here, not through verbs.c: the miss is the hot case
		errno = rc;
		return rc;
	}
	publish(ibcq);
	return 0;
}

static int cqex_next_poll(struct usb4_ibv_cq_ex *ibcq)
{
	struct usb4v_cq *eng = eng_of(ibcq);
	if (!eng)
		return usb4_errno(EINVAL);
	int rc = usb4v_cq_next_poll(eng, &to_cqex(ibcq)->cur);
	if (rc)
		return usb4_errno(rc);
	publish(ibcq);
	return 0;
}

static void cqex_end_poll(struct usb4_ibv_cq_ex *ibcq)
{
	struct usb4v_cq *eng = eng_of(ibcq);
	if (eng)
		usb4v_cq_end_poll(eng, &to_cqex(ibcq)->cur);
}

#define CUR(ibcq) (to_cqex(ibcq)->cur.cur)
static uint32_t cqex_read_opcode(struct usb4_ibv_cq_ex *c) { return CUR(c).opcode; }
static uint32_t cqex_read_vendor_err(struct usb4_ibv_cq_ex *c) { return CUR(c).vendor_err; }
static uint32_t cqex_read_byte_len(struct usb4_ibv_cq_ex *c) { return CUR(c).byte_len; }
static uint32_t cqex_read_imm_data(struct usb4_ibv_cq_ex *c) { return CUR(c).imm_data; }
static uint32_t cqex_read_qp_num(struct usb4_ibv_cq_ex *c) { return CUR(c).qp_num; }
static uint32_t cqex_read_src_qp(struct usb4_ibv_cq_ex *c) { return CUR(c).src_qp; }
static unsigned int cqex_read_wc_flags(struct usb4_ibv_cq_ex *c) { return CUR(c).wc_flags; }
static uint32_t cqex_read_slid(struct usb4_ibv_cq_ex *c) { return CUR(c).slid; }
static uint8_t cqex_read_sl(struct usb4_ibv_cq_ex *c) { return CUR(c).sl; }
static uint8_t cqex_read_dlid_path_bits(struct usb4_ibv_cq_ex *c) { return CUR(c).dlid_path_bits; }

static void *refuse(const char *what, unsigned long long bits)
{
	fprintf(stderr, USB4_LOG_PREFIX "create_cq_ex: %s 0x%llx not supported\n", what, bits);
	errno = EOPNOTSUPP;
	return NULL;
}

static void *usb4_create_cq_ex(void *ibv_ctx, struct usb4_ibv_cq_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	// librxe's order: wc_flags first, then ibv_cmd_create_cq_ex's comp_mask;
	// libibverbs already refused wc_flags it does not know (EOPNOTSUPP).
	if (attr->wc_flags & ~(uint64_t)USB4_WC_EX_SUPPORTED)
		return refuse("wc_flags", attr->wc_flags & ~(uint64_t)USB4_WC_EX_SUPPORTED);
	if (attr->comp_mask & ~(uint32_t)(USB4_CQ_INIT_ATTR_MASK_FLAGS | USB4_CQ_INIT_ATTR_MASK_PD))
		return refuse("comp_mask", attr->comp_mask);
	// IGNORE_OVERRUN is the only flag that reaches the kernel under librxe
	// (SINGLE_THREADED stays in user space); rxe answers it EOPNOTSUPP
	// (linux:drivers/infiniband/sw/rxe/rxe_verbs.c rxe_create_cq), and our
	// CQs always latch an overrun, so we refuse it the same way.
	if ((attr->comp_mask & USB4_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & USB4_CREATE_CQ_ATTR_IGNORE_OVERRUN))
		return refuse("flags", attr->flags);
	if (attr->cqe > INT32_MAX) { // the kernel's answer to more than max_cqe
		fprintf(stderr, USB4_LOG_PREFIX "create_cq_ex: cqe %u is more than any device has\n", attr->cqe);
		errno = EINVAL;
		return NULL;
	}
	struct usb4_cq *cq = usb4_cq_create(ibv_ctx, (int)attr->cqe, attr->channel, (int)attr->comp_vector,
					    sizeof(struct usb4_cqex));
	if (!cq)
		return NULL;
	usb4v_cq_cursor_init(&((struct usb4_cqex *)cq)->cur);
	struct usb4_ibv_cq_ex *e = (struct usb4_ibv_cq_ex *)cq->verbs_cq;
	// The backend is fixed once create returns (attach ran in Go).
	e->start_poll = cq->eng && cq->eng->backend == USB4V_BACKEND_RXE ? cqex_start_poll_rxe : cqex_start_poll;
	e->next_poll = cqex_next_poll;
	e->end_poll = cqex_end_poll;
	e->read_opcode = cqex_read_opcode;
	e->read_vendor_err = cqex_read_vendor_err;
	e->read_wc_flags = cqex_read_wc_flags;
	// As librxe: an accessor exists only when its flag was asked for.
	if (attr->wc_flags & USB4_WC_EX_WITH_BYTE_LEN)
		e->read_byte_len = cqex_read_byte_len;
	if (attr->wc_flags & USB4_WC_EX_WITH_IMM)
		e->read_imm_data = cqex_read_imm_data;
	if (attr->wc_flags & USB4_WC_EX_WITH_QP_NUM)
		e->read_qp_num = cqex_read_qp_num;
	if (attr->wc_flags & USB4_WC_EX_WITH_SRC_QP)
		e->read_src_qp = cqex_read_src_qp;
	if (attr->wc_flags & USB4_WC_EX_WITH_SLID)
		e->read_slid = cqex_read_slid;
	if (attr->wc_flags & USB4_WC_EX_WITH_SL)
		e->read_sl = cqex_read_sl;
	if (attr->wc_flags & USB4_WC_EX_WITH_DLID_PATH_BITS)
		e->read_dlid_path_bits = cqex_read_dlid_path_bits;
	return cq;
}

// resize_cq of any CQ of ours, ex or not (ibv_resize_cq returns what we
// return, as librxe's rxe_resize_cq: 0 or the kernel's errno).
static int usb4_resize_cq(void *ibv_cq, int cqe)
{
	struct usb4_cq *cq = ibv_cq;
	if (cqe <= 0)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_cq), "resize_cq"))
		return usb4_errno(ENOSYS);
	uint32_t granted = 0;
	int err = usb4_cq_adopt(ibv_cq);
	if (err)
		return usb4_errno(err);
	err = USB4_GO(ResizeCQ, cq->go, cqe, &granted);
	if (granted) // the kernel's size, even if our remap failed
		memcpy(cq->verbs_cq + IBV_CQ_CQE_OFF, &granted, sizeof(granted));
	return usb4_errno(err);
}

void usb4_install_cqex_ops(void **buf, size_t n)
{
	usb4_set_slot(buf, n, USB4_OP_create_cq_ex, (void *)usb4_create_cq_ex);
	usb4_set_slot(buf, n, USB4_OP_resize_cq, (void *)usb4_resize_cq);
}
