// Context creation per rdma-core-private-abi.md §7.1: libibverbs allocates
// and initialises the verbs_context (its size differs per release), we keep
// our data right after struct ibv_context, whose offset from the end of
// verbs_context never changes, and install the ops by slot index of the
// running layout.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "zopslayout.h"

// Per-context data, at (char *)ibv_context + IBV_CONTEXT_SIZE.
struct usb4_ctx {
	uintptr_t go_handle;
	enum usb4_kind kind;
	uint32_t driver_id;
};

enum {
	// Room for any verbs_context to come (today at most 696 bytes).
	VCTX_ROOM = 1024,
	// verbs_set_ops reads its whole own table: pad ours well past the
	// largest layout (93 slots).
	OPS_BUF_SLOTS = 256,
};

static size_t ctx_alloc_size(void)
{
	return VCTX_ROOM + sizeof(struct usb4_ctx);
}

static char *ibv_ctx_of(void *vctx)
{
	return (char *)vctx + usb4_abi_get()->vctx_size - IBV_CONTEXT_SIZE;
}

static struct usb4_ctx *usb4_ctx_of_ibv(void *ibv_ctx)
{
	return (struct usb4_ctx *)((char *)ibv_ctx + IBV_CONTEXT_SIZE);
}

static void set_op(void **buf, enum usb4_op op, void *fn)
{
	int16_t slot = usb4_abi_get()->slots[op];
	if (slot >= 0 && slot < OPS_BUF_SLOTS)
		buf[slot] = fn;
}

static void usb4_free_context(void *ibv_ctx)
{
	struct usb4_ctx *uc = usb4_ctx_of_ibv(ibv_ctx);
	const struct usb4_abi *abi = usb4_abi_get();
	void *vctx = (char *)ibv_ctx - (abi->vctx_size - IBV_CONTEXT_SIZE);

	if (uc->go_handle)
		usb4goCloseContext(uc->go_handle);
	abi->uninit_context(vctx);
	free(vctx);
}

void *usb4_alloc_context(void *ibdev, int cmd_fd, void *private_data)
{
	const struct usb4_abi *abi = usb4_abi_get();
	const char *name = (const char *)ibdev + IBV_DEVICE_NAME;
	uint32_t driver_id;
	enum usb4_kind kind = usb4_device_kind(ibdev, &driver_id);
	(void)private_data;

	void *vctx = abi->init_and_alloc_context(ibdev, cmd_fd, ctx_alloc_size(), NULL, driver_id);
	if (!vctx)
		return NULL; // it closed cmd_fd and set errno
	char *ibv_ctx = ibv_ctx_of(vctx);
	size_t sz;
	memcpy(&sz, ibv_ctx - VERBS_CONTEXT_SZ_BEFORE_CTX, sizeof(sz));
	if (sz != abi->vctx_size || *(void **)(ibv_ctx + IBV_CONTEXT_DEVICE) != ibdev) {
		fprintf(stderr, USB4_LOG_PREFIX "%s: verbs_context is %zu bytes, expected %zu (layout %s): not opening\n",
			name, sz, abi->vctx_size, abi->layout);
		abi->uninit_context(vctx);
		free(vctx);
		errno = EPROTO;
		return NULL;
	}
	struct usb4_ctx *uc = usb4_ctx_of_ibv(ibv_ctx);
	uc->kind = kind;
	uc->driver_id = driver_id;

	int err = usb4goOpenContext((char *)name, cmd_fd, (int)kind, &uc->go_handle);
	if (err) {
		fprintf(stderr, USB4_LOG_PREFIX "%s: open context: %s\n", name, strerror(err));
		uc->go_handle = 0;
		abi->uninit_context(vctx); // closes cmd_fd
		free(vctx);
		errno = err;
		return NULL;
	}

	void *ops[OPS_BUF_SLOTS] = {0};
	set_op(ops, USB4_OP_free_context, (void *)usb4_free_context);
	// Must happen before we return: libibverbs' set_lib_ops then overrides
	// create_cq_ex and query_port in the verbs_context.
	abi->set_ops(vctx, ops);
	return vctx;
}
