/*
 * The engine's locks under ThreadSanitizer (issue 25, docs/DESIGN.md "Lock
 * order", plan step 3): built with -fsanitize=thread together with the
 * engine's own files (engine_tsan_test.go), it drives one rxe QP and two rxe
 * CQs from several threads at once, the way an application and the device
 * removal do:
 *   - pollers: ibv_start_poll/next_poll/end_poll holders (the CQ lock held
 *     across the batch, as librxe holds it) and plain poll_cq, on both CQs;
 *   - posters: post_send on the QP (rxe SQ ring, a doorbell per post);
 *   - a resizer: resize_cq of CQ A over and over (the CQ lock from begin to
 *     end, a new ring each time);
 *   - "the kernel": consumes the SQ and writes a completion into CQ B for
 *     each WQE, through the ring indices only, as rxe does;
 *   - a churner: CQs made, joined to the context's removal record, polled and
 *     freed over and over (an application creating and destroying CQs);
 *   - the removal, through the record (usb4v_dev_remove, as the Go part's
 *     removeEngine calls it): every joined object marked gone, then the rings
 *     released, called again while a holder has a CQ.
 * Beside them a usb4 QP and CQ on kernel commands (the released module's data
 * path: POST_SEND and POLL_CQ writes on the command fd, fd 4 here), polled by
 * two pollers and posted by one poster, with a fake kernel that owes one
 * completion per signaled WR it accepted.
 * The rings live in anonymous memory the fake system calls hand out.
 * ThreadSanitizer reports a data race or a lock-order inversion on stderr
 * and makes the exit status 66; the program itself checks that the removal
 * took effect (posts and polls answer EIO afterwards).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "rxe_ring.h"

/* Ring offsets carry the ring's geometry for the fake mmap: log2 of the
 * element size in bits 32..39, the index mask below. */
#define RING_OFF(log2, mask) (((uint64_t)(log2) << 32) | (uint32_t)(mask))

static size_t ring_size(uint64_t off)
{
	return sizeof(struct usb4v_rxe_queue_buf) + ((size_t)(uint32_t)off + 1) * ((size_t)1 << (off >> 32));
}

enum { KCMD_FD = 4 };
static atomic_long kernel_owes; /* completions the fake kernel owes the usb4 CQ */

/* Takes up to want of what the fake kernel owes. */
static uint32_t kernel_take(uint32_t want)
{
	long have = atomic_load(&kernel_owes);
	while (have > 0) {
		long n = have < (long)want ? have : (long)want;
		if (atomic_compare_exchange_weak(&kernel_owes, &have, have - n))
			return (uint32_t)n;
	}
	return 0;
}

static ssize_t fake_write(void *ctx, int fd, const void *buf, size_t len)
{
	(void)ctx;
	if (fd != KCMD_FD)
		return (ssize_t)len; /* the rxe doorbell (a POST_SEND of no WR) */
	/* The usb4 module's kernel commands, as the write() ABI frames them. */
	const struct usb4v_ib_uverbs_cmd_hdr *h = buf;
	if (h->command == USB4V_IB_USER_VERBS_CMD_POST_SEND) {
		const struct usb4v_ib_uverbs_post_send *c = (const void *)(h + 1);
		atomic_fetch_add(&kernel_owes, c->wr_count);
	} else if (h->command == USB4V_IB_USER_VERBS_CMD_POLL_CQ) {
		const struct usb4v_ib_uverbs_poll_cq *c = (const void *)(h + 1);
		struct usb4v_ib_uverbs_poll_cq_resp *r = (void *)(uintptr_t)c->response;
		struct usb4v_ib_uverbs_wc *wc = (void *)(r + 1);
		uint32_t n = kernel_take(c->ne);
		for (uint32_t i = 0; i < n; i++) {
			memset(&wc[i], 0, sizeof(wc[i]));
			wc[i].wr_id = 9;
			wc[i].qp_num = 0x22;
		}
		r->count = n;
	}
	return (ssize_t)len;
}

static int fake_ioctl(void *ctx, int fd, unsigned long req, void *arg)
{
	(void)ctx, (void)fd, (void)req, (void)arg;
	return -EOPNOTSUPP;
}

static int fake_mmap(void *ctx, int fd, uint64_t off, size_t len, void **addr)
{
	(void)ctx, (void)fd;
	if (len < ring_size(off))
		return -EINVAL;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	struct usb4v_rxe_queue_buf *b = p;
	b->log2_elem_size = (uint32_t)(off >> 32);
	b->index_mask = (uint32_t)off;
	*addr = p;
	return 0;
}

static int fake_munmap(void *ctx, void *addr, size_t len)
{
	(void)ctx;
	return munmap(addr, len) ? -errno : 0;
}

static const struct usb4v_sys fake_sys = {
	.write = fake_write, .ioctl = fake_ioctl, .mmap = fake_mmap, .munmap = fake_munmap,
};

static struct usb4v_cq *cq_a, *cq_b, *cq_k;
static struct usb4v_qp *qp, *qp_k;
static struct usb4v_dev *dev;
static atomic_bool stop, gone;
static atomic_long polled, posted, resized, churned, churned_gone, polled_k;
static uint64_t sq_off, cq_off;
static char buf[64];

static void *poller(void *arg)
{
	struct usb4v_cq *cq = arg;
	struct usb4v_cq_cursor cur;
	struct usb4v_ibv_wc wc[4];
	usb4v_cq_cursor_init(&cur);
	while (!atomic_load(&stop)) {
		if (usb4v_cq_start_poll(cq, &cur) == 0) {
			long n = 1;
			while (usb4v_cq_next_poll(cq, &cur) == 0)
				n++;
			usb4v_cq_end_poll(cq, &cur);
			atomic_fetch_add(cq == cq_k ? &polled_k : &polled, n);
		}
		int n = usb4v_poll_cq(cq, 4, wc);
		if (n > 0)
			atomic_fetch_add(cq == cq_k ? &polled_k : &polled, n);
	}
	usb4v_cq_cursor_destroy(&cur);
	return NULL;
}

static void *poster(void *arg)
{
	struct usb4v_qp *q = arg;
	struct usb4v_ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = 1};
	while (!atomic_load(&stop)) {
		struct usb4v_ibv_send_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = USB4V_WR_RDMA_WRITE,
					       .send_flags = USB4V_SEND_SIGNALED};
		struct usb4v_ibv_send_wr *bad = NULL;
		if (usb4v_post_send(q, &wr, &bad) == 0)
			atomic_fetch_add(&posted, 1);
		else
			sched_yield(); /* full (ENOMEM) or gone (EIO) */
	}
	return NULL;
}

static void *resizer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop) && !atomic_load(&gone)) {
		usb4v_cq_resize_begin(cq_a);
		if (usb4v_cq_resize_end(cq_a, 1, cq_off, ring_size(cq_off)) == 0)
			atomic_fetch_add(&resized, 1);
		usleep(200);
	}
	return NULL;
}

/* The kernel's side: consume the SQ, complete each WQE into CQ B. Only the
 * ring indices order it against the engine (rxe_ring.h). */
static void *kernel_side(void *arg)
{
	(void)arg;
	struct usb4v_rxe_queue_buf *sq = qp->sq.buf, *cq = cq_b->rxe.buf;
	uint8_t *cqdata = cq_b->rxe.data;
	uint32_t cqmask = cq_b->rxe.mask, cqlog2 = cq_b->rxe.log2_elem;
	while (!atomic_load(&stop)) {
		uint32_t cons = __atomic_load_n(&sq->consumer_index, __ATOMIC_RELAXED);
		if (__atomic_load_n(&sq->producer_index, __ATOMIC_ACQUIRE) == cons) {
			sched_yield();
			continue;
		}
		uint32_t prod = __atomic_load_n(&cq->producer_index, __ATOMIC_RELAXED);
		if (((prod + 1) & cqmask) == __atomic_load_n(&cq->consumer_index, __ATOMIC_ACQUIRE)) {
			sched_yield(); /* CQ full: wait for the pollers */
			continue;
		}
		struct usb4v_ib_uverbs_wc *wc = (void *)(cqdata + ((size_t)prod << cqlog2));
		memset(wc, 0, sizeof(*wc));
		wc->wr_id = 7;
		wc->qp_num = 0x11;
		__atomic_store_n(&cq->producer_index, (prod + 1) & cqmask, __ATOMIC_RELEASE);
		__atomic_store_n(&sq->consumer_index, (cons + 1) & qp->sq.mask, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* CQs that join the record and leave it while everything else runs; one
 * that joined after the removal must answer -EIO at once. */
static void *churner(void *arg)
{
	(void)arg;
	struct usb4v_ibv_wc wc;
	while (!atomic_load(&stop)) {
		bool after = atomic_load(&gone);
		struct usb4v_cq *cq = usb4v_cq_new(&fake_sys, 3, 9, 255);
		if (!cq || usb4v_cq_attach_rxe(cq, NULL, cq_off, ring_size(cq_off))) {
			fprintf(stderr, "tsan_removal: churn CQ setup failed\n");
			exit(2);
		}
		usb4v_cq_join(cq, dev);
		int rc = usb4v_poll_cq(cq, 1, &wc);
		if (after && rc != -EIO) {
			fprintf(stderr, "tsan_removal: a CQ joined after the removal polled %d, want -EIO\n", rc);
			exit(1);
		}
		if (rc == -EIO)
			atomic_fetch_add(&churned_gone, 1);
		usb4v_cq_free(cq);
		atomic_fetch_add(&churned, 1);
	}
	return NULL;
}

/* The Go part's removeEngine: the record marks and releases everything
 * (trylock; come back while a holder has the CQ). Then the same walk again
 * for 100 ms (it is idempotent), so that it meets the churner's joins and
 * leaves often enough for ThreadSanitizer to see an unlocked one. */
static void removal(void)
{
	for (int tries = 0; tries < 2000; tries++) {
		int busy = usb4v_dev_remove(dev);
		atomic_store(&gone, true);
		if (!busy) {
			for (int i = 0; i < 1000; i++) {
				usb4v_dev_remove(dev);
				usleep(100);
			}
			return;
		}
		usleep(1000);
	}
	fprintf(stderr, "tsan_removal: a CQ stayed held for 2 s\n");
	exit(2);
}

int main(void)
{
	uint32_t send_elem = sizeof(struct usb4v_rxe_send_wqe) + sizeof(struct usb4v_rxe_sge);
	uint32_t log2_send = 0;
	while ((1u << log2_send) < send_elem)
		log2_send++;
	sq_off = RING_OFF(log2_send, 63);
	cq_off = RING_OFF(6, 255); /* 64-byte slots hold a 48-byte ib_uverbs_wc */
	cq_a = usb4v_cq_new(&fake_sys, 3, 1, 255);
	cq_b = usb4v_cq_new(&fake_sys, 3, 2, 255);
	if (!cq_a || !cq_b || usb4v_cq_attach_rxe(cq_a, NULL, cq_off, ring_size(cq_off)) ||
	    usb4v_cq_attach_rxe(cq_b, NULL, cq_off, ring_size(cq_off))) {
		fprintf(stderr, "tsan_removal: CQ setup failed\n");
		return 2;
	}
	qp = usb4v_qp_new(&fake_sys, 3, 3, 0x11, USB4V_QPT_RC, 0, 1, 1, 0, cq_b, cq_b, NULL);
	if (!qp || usb4v_qp_attach_rxe(qp, NULL, sq_off, ring_size(sq_off), NULL, sq_off, ring_size(sq_off))) {
		fprintf(stderr, "tsan_removal: QP setup failed\n");
		return 2;
	}
	usb4v_qp_set_state(qp, USB4V_QPS_RTS);
	cq_k = usb4v_cq_new(&fake_sys, KCMD_FD, 5, 255); /* no ring: kernel commands */
	qp_k = cq_k ? usb4v_qp_new(&fake_sys, KCMD_FD, 6, 0x22, USB4V_QPT_RC, 0, 1, 1, 0, cq_k, cq_k, NULL) : NULL;
	if (!qp_k) {
		fprintf(stderr, "tsan_removal: kernel-command QP setup failed\n");
		return 2;
	}
	usb4v_qp_set_state(qp_k, USB4V_QPS_RTS);
	dev = usb4v_dev_new();
	if (!dev) {
		fprintf(stderr, "tsan_removal: no removal record\n");
		return 2;
	}
	usb4v_cq_join(cq_a, dev);
	usb4v_cq_join(cq_b, dev);
	usb4v_qp_join(qp, dev);
	usb4v_cq_join(cq_k, dev);
	usb4v_qp_join(qp_k, dev);

	pthread_t t[12];
	int n = 0;
	pthread_create(&t[n++], NULL, poller, cq_a);
	pthread_create(&t[n++], NULL, poller, cq_b);
	pthread_create(&t[n++], NULL, poller, cq_b);
	pthread_create(&t[n++], NULL, poster, qp);
	pthread_create(&t[n++], NULL, poster, qp);
	pthread_create(&t[n++], NULL, poller, cq_k);
	pthread_create(&t[n++], NULL, poller, cq_k);
	pthread_create(&t[n++], NULL, poster, qp_k);
	pthread_create(&t[n++], NULL, resizer, NULL);
	pthread_create(&t[n++], NULL, kernel_side, NULL);
	pthread_create(&t[n++], NULL, churner, NULL);
	usleep(700 * 1000);
	removal();
	usleep(100 * 1000);
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);

	/* After the removal every data verb answers EIO. */
	struct usb4v_ibv_wc wc;
	struct usb4v_ibv_sge sge = {.addr = (uintptr_t)buf, .length = 1, .lkey = 1};
	struct usb4v_ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = USB4V_WR_RDMA_WRITE}, *bad = NULL;
	int prc = usb4v_post_send(qp, &wr, &bad), crc = usb4v_poll_cq(cq_a, 1, &wc);
	int kprc = usb4v_post_send(qp_k, &wr, &bad), kcrc = usb4v_poll_cq(cq_k, 1, &wc);
	printf("tsan_removal: %ld polled (%ld through kernel commands), %ld posted, %ld resizes, "
	       "%ld CQs churned (%ld of them gone); after the removal post_send %d, poll_cq %d "
	       "(kernel commands: %d, %d)\n",
	       atomic_load(&polled), atomic_load(&polled_k), atomic_load(&posted), atomic_load(&resized),
	       atomic_load(&churned), atomic_load(&churned_gone), prc, crc, kprc, kcrc);
	usb4v_dev_put(dev); /* the context closes first; the objects' frees release the record */
	usb4v_qp_free_destroyed(qp_k);
	usb4v_cq_free(cq_k);
	usb4v_qp_free_destroyed(qp);
	usb4v_cq_free(cq_a);
	usb4v_cq_free(cq_b);
	if (prc != EIO || crc != -EIO || kprc != EIO || kcrc != -EIO || atomic_load(&polled_k) == 0 ||
	    atomic_load(&posted) == 0 || atomic_load(&polled) == 0 ||
	    atomic_load(&resized) == 0 || atomic_load(&churned) == 0 || atomic_load(&churned_gone) == 0) {
		fprintf(stderr, "tsan_removal: want traffic, resizes, then EIO from post_send and -EIO from poll_cq\n");
		return 1;
	}
	return 0;
}
