// Context creation per rdma-core-private-abi.md §7.1: libibverbs allocates
// and initialises the verbs_context (its size differs per release), we keep
// our data right after struct ibv_context, whose offset from the end of
// verbs_context never changes, and install the ops by slot index of the
// running layout.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"
#include "zopslayout.h"

// Per-context data, at (char *)ibv_context + IBV_CONTEXT_SIZE.
struct usb4_ctx {
	_Atomic uintptr_t go_handle;
	// usb4_go_image() of the image whose Go part holds go_handle: the one
	// that opened it, or a fork() child's that adopted it (usb4_ctx_adopt).
	_Atomic unsigned image;
	enum usb4_kind kind;
	uint32_t driver_id;
	// Destroyed CQ/QP/SRQ shells kept so a use after destroy gets an error
	// instead of reading freed memory (objects.c); oldest first.
	pthread_mutex_t quarantine_lock;
	struct usb4_shell *quarantine_head, *quarantine_tail;
	unsigned quarantine_len;
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

	// A context the parent of this fork() child opened belongs to the
	// parent's Go part, which is dead here: release only our C memory and
	// libibverbs' part (the fds are the child's copies).
	if (uc->go_handle && usb4_ctx_image(ibv_ctx) == usb4_go_image())
		USB4_GO_VOID(CloseContext, uc->go_handle);
	for (struct usb4_shell *s = uc->quarantine_head, *next; s; s = next) {
		next = s->next;
		usb4_shell_free(s);
	}
	pthread_mutex_destroy(&uc->quarantine_lock);
	abi->uninit_context(vctx);
	free(vctx);
}

unsigned usb4_ctx_image(void *ibv_ctx)
{
	return atomic_load_explicit(&usb4_ctx_of_ibv(ibv_ctx)->image, memory_order_acquire);
}

static int get_int(const char *ibv_ctx, size_t off)
{
	int v;
	memcpy(&v, ibv_ctx + off, sizeof(v));
	return v;
}

int usb4_ctx_adopt(void *ibv_ctx)
{
	struct usb4_ctx *uc = usb4_ctx_of_ibv(ibv_ctx);
	void *ibdev = *(void **)((char *)ibv_ctx + IBV_CONTEXT_DEVICE);
	const char *name = (const char *)ibdev + IBV_DEVICE_NAME;
	uint64_t core;
	memcpy(&core, (char *)ibdev + VERBS_DEVICE_CORE_SUPPORT, sizeof(core));
	int err = usb4_go_load(name);
	uintptr_t h = 0;
	if (!err)
		err = USB4_GO(AdoptContext, (char *)name, get_int(ibv_ctx, IBV_CONTEXT_CMD_FD),
					      get_int(ibv_ctx, IBV_CONTEXT_ASYNC_FD), (int)uc->kind, uc->driver_id,
					      usb4_device_node_guid(ibdev),
					      (uint32_t)get_int(ibv_ctx, IBV_CONTEXT_NUM_COMP_VECTORS), core, &h);
	if (err)
		return err;
	atomic_store_explicit(&uc->go_handle, h, memory_order_relaxed);
	atomic_store_explicit(&uc->image, usb4_go_image(), memory_order_release);
	return 0;
}

uintptr_t usb4_ctx_handle(void *ibv_ctx)
{
	return usb4_ctx_of_ibv(ibv_ctx)->go_handle;
}

void usb4_quarantine(void *ibv_ctx, struct usb4_shell *s)
{
	if (!ibv_ctx) { // no context to hang it on: nothing better than free
		usb4_shell_free(s);
		return;
	}
	struct usb4_ctx *uc = usb4_ctx_of_ibv(ibv_ctx);
	struct usb4_shell *evicted = NULL;
	s->next = NULL;
	pthread_mutex_lock(&uc->quarantine_lock);
	if (uc->quarantine_tail)
		uc->quarantine_tail->next = s;
	else
		uc->quarantine_head = s;
	uc->quarantine_tail = s;
	if (++uc->quarantine_len > USB4_QUARANTINE_MAX) {
		evicted = uc->quarantine_head;
		uc->quarantine_head = evicted->next;
		uc->quarantine_len--;
	}
	pthread_mutex_unlock(&uc->quarantine_lock);
	if (evicted)
		usb4_shell_free(evicted);
}

static void put_int(char *ibv_ctx, size_t off, int v)
{
	memcpy(ibv_ctx + off, &v, sizeof(v));
}

// alloc_context owns cmd_fd until _verbs_init_and_alloc_context takes it
// (it closes it itself on failure). The Go provider then creates the kernel
// ucontext on that same fd (provider.OpenFD), so the commands libibverbs'
// core issues on ctx->cmd_fd (comp channels, GID queries) reach our
// ucontext; the fd and the async fd stay libibverbs', which closes both in
// verbs_uninit_context. This is the order of rdma-core-private-abi.md §7.1.
void *usb4_alloc_context(void *ibdev, int cmd_fd, void *private_data)
{
	const struct usb4_abi *abi = usb4_abi_get();
	const char *name = (const char *)ibdev + IBV_DEVICE_NAME;
	uint32_t driver_id;
	enum usb4_kind kind = usb4_device_kind(ibdev, &driver_id);
	struct usb4_open_info info = {.async_fd = -1};
	(void)private_data;

	// The first open of a device of ours in a process image (the process,
	// or a fork() child of it) is where that image's Go part starts.
	int err = usb4_go_load(name);
	if (err) {
		if (cmd_fd >= 0)
			close(cmd_fd);
		errno = err;
		return NULL;
	}
	void *vctx = abi->init_and_alloc_context(ibdev, cmd_fd, ctx_alloc_size(), NULL, driver_id);
	if (!vctx) {
		if (!errno)
			errno = ENOMEM;
		return NULL; // it closed cmd_fd
	}
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
	err = USB4_GO(OpenContext, (char *)name, cmd_fd, (int)kind, driver_id, usb4_device_node_guid(ibdev), &info);
	if (err) {
		fprintf(stderr, USB4_LOG_PREFIX "%s: open context: %s\n", name, strerror(err));
		abi->uninit_context(vctx); // closes cmd_fd and any async fd
		free(vctx);
		errno = err;
		return NULL;
	}
	struct usb4_ctx *uc = usb4_ctx_of_ibv(ibv_ctx);
	uc->go_handle = info.handle;
	uc->image = usb4_go_image();
	pthread_mutex_init(&uc->quarantine_lock, NULL);
	uc->kind = kind;
	uc->driver_id = driver_id;
	// With no async fd, libibverbs allocates one on ctx->cmd_fd itself.
	if (info.async_fd >= 0)
		put_int(ibv_ctx, IBV_CONTEXT_ASYNC_FD, info.async_fd);
	put_int(ibv_ctx, IBV_CONTEXT_NUM_COMP_VECTORS, (int)info.num_comp_vectors);
	// Without it ibv_reg_mr strips the optional access bits (e.g. relaxed
	// ordering): rdma-core-private-abi.md §7.1.
	memcpy((char *)ibdev + VERBS_DEVICE_CORE_SUPPORT, &info.core_support, sizeof(info.core_support));

	void *ops[OPS_BUF_SLOTS] = {0};
	set_op(ops, USB4_OP_free_context, (void *)usb4_free_context);
	usb4_install_control_ops(ops, OPS_BUF_SLOTS);
	if (kind == USB4_KIND_RXE)
		usb4_install_rxe_fast_ops(ops, OPS_BUF_SLOTS);
	// Must happen before we return: libibverbs' set_lib_ops then overrides
	// create_cq_ex and query_port in the verbs_context.
	abi->set_ops(vctx, ops);
	usb4_prewarm_threads();
	return vctx;
}
