#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rxefake.h"

static struct usb4v_rxe_queue_buf *qb(struct rxf *f, int q) { return (struct usb4v_rxe_queue_buf *)f->q[q]; }

static uint8_t *slot(struct rxf *f, int q, uint32_t i)
{
	struct usb4v_rxe_queue_buf *b = qb(f, q);
	return f->q[q] + sizeof(*b) + ((size_t)(i & b->index_mask) << b->log2_elem_size);
}

int rxf_produce_cqe(struct rxf *f, const struct usb4v_ib_uverbs_wc *wc)
{
	struct usb4v_rxe_queue_buf *b = qb(f, 2);
	uint32_t prod = __atomic_load_n(&b->producer_index, __ATOMIC_RELAXED);
	uint32_t cons = __atomic_load_n(&b->consumer_index, __ATOMIC_ACQUIRE);
	if (((prod + 1) & b->index_mask) == cons)
		return -ENOSPC;
	memcpy(slot(f, 2, prod), wc, sizeof(*wc));
	__atomic_store_n(&b->producer_index, (prod + 1) & b->index_mask, __ATOMIC_RELEASE);
	return 0;
}

void rxf_consume(struct rxf *f, int q, uint32_t n)
{
	struct usb4v_rxe_queue_buf *b = qb(f, q);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t prod = __atomic_load_n(&b->producer_index, __ATOMIC_ACQUIRE);
		uint32_t cons = __atomic_load_n(&b->consumer_index, __ATOMIC_RELAXED);
		if (prod == cons)
			return;
		if (q == 0 && f->auto_complete) {
			const struct usb4v_rxe_send_wqe *w = (const void *)slot(f, 0, cons);
			if (w->wr.send_flags & USB4V_SEND_SIGNALED) {
				struct usb4v_ib_uverbs_wc wc;
				memset(&wc, 0, sizeof(wc));
				wc.wr_id = w->wr.wr_id;
				wc.opcode = w->wr.opcode == USB4V_WR_RDMA_READ ? USB4V_WC_RDMA_READ : USB4V_WC_SEND;
				wc.byte_len = w->dma.length;
				if (rxf_produce_cqe(f, &wc))
					f->cq_drops++;
			}
		}
		__atomic_store_n(&b->consumer_index, (cons + 1) & b->index_mask, __ATOMIC_RELEASE);
	}
}

static ssize_t rxf_write(void *ctx, int fd, const void *buf, size_t len)
{
	struct rxf *f = ctx;
	(void)fd;
	struct {
		struct usb4v_ib_uverbs_cmd_hdr hdr;
		struct usb4v_ib_uverbs_post_send cmd;
	} c;
	if (len != sizeof(c)) {
		f->bad_cmds++;
		return -EINVAL;
	}
	memcpy(&c, buf, sizeof(c));
	if (c.hdr.command != USB4V_IB_USER_VERBS_CMD_POST_SEND || c.hdr.in_words * 4u != len ||
	    c.cmd.wr_count != 0 || c.cmd.sge_count != 0 || c.cmd.wqe_size < sizeof(struct usb4v_ib_uverbs_send_wr)) {
		f->bad_cmds++;
		return -EINVAL;
	}
	f->doorbells++;
	if (f->auto_complete)
		rxf_consume(f, 0, UINT32_MAX);
	return (ssize_t)len;
}

static int rxf_ioctl(void *ctx, int fd, unsigned long req, void *arg)
{
	(void)ctx; (void)fd; (void)req; (void)arg;
	return -ENOTTY;
}

static int rxf_mmap(void *ctx, int fd, uint64_t off, size_t len, void **addr)
{
	struct rxf *f = ctx;
	(void)fd;
	if (off > 2 || len != f->len[off])
		return -EINVAL;
	*addr = f->q[off];
	return 0;
}

static int rxf_munmap(void *ctx, void *addr, size_t len)
{
	(void)ctx; (void)addr; (void)len;
	return 0;
}

enum { CANARY = 0xa5 };

/* Each ring ends 64-byte aligned right below a PROT_NONE guard page, with a
 * guard page below its first page too, so an access past either end faults;
 * the slack between a page boundary and the ring is filled with a canary
 * (rxf_canary_ok) for strays too small to reach a guard page. */
static uint8_t *newq(struct rxf *f, int q, uint32_t depth, uint32_t log2_elem)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = sizeof(struct usb4v_rxe_queue_buf) + ((size_t)depth << log2_elem);
	size_t span = (len + 63) & ~(size_t)63;
	size_t body = (span + pg - 1) & ~(pg - 1);
	uint8_t *base = mmap(NULL, body + 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (mprotect(base + pg, body, PROT_READ | PROT_WRITE)) {
		munmap(base, body + 2 * pg);
		return NULL;
	}
	f->map[q] = base;
	f->map_len[q] = body + 2 * pg;
	f->slack_lo[q] = body - span;
	f->slack_hi[q] = span - len;
	memset(base + pg, CANARY, body);
	uint8_t *p = base + pg + (body - span);
	memset(p, 0, len);
	struct usb4v_rxe_queue_buf *b = (void *)p;
	b->log2_elem_size = log2_elem;
	b->index_mask = depth - 1;
	f->len[q] = len;
	return p;
}

int rxf_canary_ok(const struct rxf *f)
{
	for (int q = 0; q < 3; q++) {
		const uint8_t *lo = f->q[q] - f->slack_lo[q], *hi = f->q[q] + f->len[q];
		for (size_t i = 0; i < f->slack_lo[q]; i++)
			if (lo[i] != CANARY)
				return 0;
		for (size_t i = 0; i < f->slack_hi[q]; i++)
			if (hi[i] != CANARY)
				return 0;
	}
	return 1;
}

void rxf_set_indices(struct rxf *f, int q, uint32_t prod, uint32_t cons)
{
	struct usb4v_rxe_queue_buf *b = qb(f, q);
	b->producer_index = prod;
	b->consumer_index = cons;
}

struct rxf *rxf_new(uint32_t sq_depth, uint32_t sq_log2_elem, uint32_t rq_depth, uint32_t rq_log2_elem,
		    uint32_t cq_depth)
{
	struct rxf *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->q[0] = newq(f, 0, sq_depth, sq_log2_elem);
	f->q[1] = newq(f, 1, rq_depth, rq_log2_elem);
	f->q[2] = newq(f, 2, cq_depth, 6); /* rxe CQEs: 64-byte slots */
	if (!f->q[0] || !f->q[1] || !f->q[2]) {
		rxf_free(f);
		return NULL;
	}
	f->sys = (struct usb4v_sys){ .ctx = f, .write = rxf_write, .ioctl = rxf_ioctl, .mmap = rxf_mmap,
				     .munmap = rxf_munmap };
	return f;
}

void rxf_free(struct rxf *f)
{
	if (!f)
		return;
	for (int i = 0; i < 3; i++)
		if (f->map[i])
			munmap(f->map[i], f->map_len[i]);
	free(f);
}
