// create_srq_ex: what ibv_create_srq_ex does not route to create_srq
// itself (a comp_mask beyond PD and TYPE, or a type other than basic). The
// checks and errnos are librxe's, whose path is libibverbs'
// ibv_cmd_create_srq_ex (rdma-core:libibverbs/cmd_srq.c): unknown comp_mask
// bits EOPNOTSUPP, no PD EINVAL, XRC without XRCD and CQ or TM without CQ,
// TM and tags EINVAL. A complete XRC or TM request is EOPNOTSUPP: we have no
// XRC domains, and rxe refuses every non-basic SRQ (linux:drivers/infiniband/
// sw/rxe/rxe_verbs.c rxe_create_srq), as the usb4 module trees do.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"
#include "zopslayout.h"

// struct ibv_srq_init_attr_ex (rdma-core:libibverbs/verbs.h), 64 bytes.
struct usb4_ibv_srq_init_attr_ex {
	void *srq_context;
	struct usb4_ibv_srq_attr attr;
	uint32_t comp_mask;
	uint32_t srq_type;
	void *pd;
	void *xrcd;
	void *cq;
	uint32_t tm_max_num_tags, tm_max_ops;
};
_Static_assert(sizeof(struct usb4_ibv_srq_init_attr_ex) == 64, "ibv_srq_init_attr_ex is 64 bytes");
_Static_assert(offsetof(struct usb4_ibv_srq_init_attr_ex, comp_mask) == 20, "ibv_srq_init_attr_ex.comp_mask@20");
_Static_assert(offsetof(struct usb4_ibv_srq_init_attr_ex, pd) == 32, "ibv_srq_init_attr_ex.pd@32");

enum {
	// enum ibv_srq_init_attr_mask
	SRQ_INIT_ATTR_TYPE = 1 << 0,
	SRQ_INIT_ATTR_PD = 1 << 1,
	SRQ_INIT_ATTR_XRCD = 1 << 2,
	SRQ_INIT_ATTR_CQ = 1 << 3,
	SRQ_INIT_ATTR_TM = 1 << 4,
	SRQ_INIT_ATTR_RESERVED = 1 << 5,
	// enum ibv_srq_type
	SRQT_BASIC = 0,
	SRQT_XRC = 1,
	SRQT_TM = 2,
	// struct ibv_srq members core sets on ibv_create_srq, but not on
	// ibv_create_srq_ex (an inline straight into the op)
	IBV_SRQ_CONTEXT = 0,
	IBV_SRQ_SRQ_CONTEXT = 8,
	IBV_SRQ_PD = 16,
	IBV_SRQ_MUTEX = 32,
	IBV_SRQ_COND = 72,
	IBV_SRQ_EVENTS_COMPLETED = 120,
};

static void *fail(int err, const char *why)
{
	if (why)
		fprintf(stderr, USB4_LOG_PREFIX "create_srq_ex: %s\n", why);
	errno = err;
	return NULL;
}

static void *usb4_create_srq_ex(void *ibv_ctx, struct usb4_ibv_srq_init_attr_ex *a)
{
	(void)ibv_ctx;
	if (!a)
		return fail(EINVAL, NULL);
	if (a->comp_mask >= SRQ_INIT_ATTR_RESERVED)
		return fail(EOPNOTSUPP, "comp_mask has unknown bits");
	if (!(a->comp_mask & SRQ_INIT_ATTR_PD) || !a->pd)
		return fail(EINVAL, "no PD (IBV_SRQ_INIT_ATTR_PD)");
	uint32_t type = (a->comp_mask & SRQ_INIT_ATTR_TYPE) ? a->srq_type : SRQT_BASIC;
	switch (type) {
	case SRQT_BASIC:
		break;
	case SRQT_XRC:
		if (!(a->comp_mask & SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & SRQ_INIT_ATTR_CQ))
			return fail(EINVAL, "an XRC SRQ needs an XRC domain and a CQ");
		return fail(EOPNOTSUPP, "XRC SRQs are not supported");
	case SRQT_TM:
		if (!(a->comp_mask & SRQ_INIT_ATTR_CQ) || !(a->comp_mask & SRQ_INIT_ATTR_TM) || !a->tm_max_num_tags)
			return fail(EINVAL, "a tag-matching SRQ needs a CQ, TM caps and max_num_tags");
		return fail(EOPNOTSUPP, "tag-matching SRQs are not supported");
	default:
		return fail(EINVAL, "unknown srq_type"); // the kernel's answer to an unknown type
	}
	// A basic SRQ; the CQ libibverbs would note for it is not needed.
	unsigned char *srq = usb4_srq_create(a->pd, a);
	if (!srq)
		return NULL;
	memcpy(srq + IBV_SRQ_CONTEXT, &(void *){*(void **)a->pd}, sizeof(void *)); // ibv_pd.context@0
	memcpy(srq + IBV_SRQ_SRQ_CONTEXT, &a->srq_context, sizeof(void *));
	memcpy(srq + IBV_SRQ_PD, &a->pd, sizeof(void *));
	pthread_mutex_init((pthread_mutex_t *)(srq + IBV_SRQ_MUTEX), NULL);
	pthread_cond_init((pthread_cond_t *)(srq + IBV_SRQ_COND), NULL);
	memset(srq + IBV_SRQ_EVENTS_COMPLETED, 0, sizeof(uint32_t));
	return srq;
}

void usb4_install_srqex_ops(void **buf, size_t n)
{
	usb4_set_slot(buf, n, USB4_OP_create_srq_ex, (void *)usb4_create_srq_ex);
}
