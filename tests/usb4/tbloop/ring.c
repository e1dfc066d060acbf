// SPDX-License-Identifier: GPL-2.0
/*
 * NHI rings and the fabric between the hosts.
 *
 * A frame queued with __tb_ring_enqueue() waits on its ring's posted list.
 * One ordered work item (the "fabric") moves each TX frame to the RX ring
 * the peer's XDomain path maps it to, copying between the two DMA buffers,
 * and then runs the completion callbacks: in process context, as the real
 * NHI does from its ring work (linux:drivers/thunderbolt/nhi.c ring_work).
 * A ring in poll mode (start_poll set) gets start_poll() instead, with
 * interrupts off as from the real MSI-X handler, and is not signalled again
 * until tb_ring_poll_complete().
 *
 * Buffers are reached through their DMA address: with no IOMMU a DMA
 * address is a physical address (dma_to_phys), which is why tbloop refuses
 * a DMA device that sits behind an IOMMU. A swiotlb bounce buffer is what
 * the address names then, and the caller's dma_sync_* calls move the data,
 * as with hardware.
 */

#define pr_fmt(fmt) "tbloop: " fmt

#include <linux/dma-direct.h>
#include <linux/io.h>
#include <linux/irqflags.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "tbloop.h"

static struct workqueue_struct *tbl_fabric_wq;
static struct work_struct tbl_fabric_work;
static LIST_HEAD(tbl_kicked);		/* rings with work, under tbl_kick_lock */
static DEFINE_SPINLOCK(tbl_kick_lock);
static struct task_struct *tbl_fabric_task;	/* the worker, while it runs */

void tbl_fabric_kick(struct tbl_ring *tr)
{
	unsigned long flags;

	spin_lock_irqsave(&tbl_kick_lock, flags);
	if (!tr->kicked) {
		tr->kicked = true;
		list_add_tail(&tr->kick_node, &tbl_kicked);
	}
	spin_unlock_irqrestore(&tbl_kick_lock, flags);
	queue_work(tbl_fabric_wq, &tbl_fabric_work);
}

static void tbl_unkick(struct tbl_ring *tr)
{
	unsigned long flags;

	spin_lock_irqsave(&tbl_kick_lock, flags);
	if (tr->kicked) {
		tr->kicked = false;
		list_del_init(&tr->kick_node);
	}
	spin_unlock_irqrestore(&tbl_kick_lock, flags);
}

/* ---- allocation ---- */

static struct tb_ring *tbl_ring_alloc(struct tb_nhi *nhi, int hop, int size,
				      bool tx, unsigned int flags,
				      int e2e_tx_hop, u16 sof_mask,
				      u16 eof_mask,
				      void (*start_poll)(void *),
				      void *poll_data)
{
	struct tbl_host *host = container_of(nhi, struct tbl_host, nhi);
	struct tb_ring **slots;
	struct tbl_ring *tr;
	unsigned long irqflags;

	if (tbl_fault_reject_ring()) {
		pr_info("rejecting %s ring allocation on domain%d (reject_ring_alloc)\n",
			tx ? "TX" : "RX", host->index);
		return NULL;
	}
	if (size < 2 || hop >= (int)nhi->hop_count) {
		pr_warn("domain%d: %s ring hop %d size %d out of range (hops 1..%u)\n",
			host->index, tx ? "TX" : "RX", hop, size,
			nhi->hop_count - 1);
		return NULL;
	}
	if (!tx && (flags & RING_FLAG_E2E) &&
	    (e2e_tx_hop <= 0 || e2e_tx_hop >= (int)nhi->hop_count)) {
		pr_warn("domain%d: E2E RX ring with TX hop %d out of range\n",
			host->index, e2e_tx_hop);
		return NULL;
	}

	tr = kzalloc(sizeof(*tr), GFP_KERNEL);
	if (!tr)
		return NULL;
	spin_lock_init(&tr->ring.lock);
	tr->ring.nhi = nhi;
	tr->ring.size = size;
	tr->ring.is_tx = tx;
	tr->ring.flags = flags;
	tr->ring.e2e_tx_hop = tx ? 0 : e2e_tx_hop;
	tr->ring.sof_mask = sof_mask;
	tr->ring.eof_mask = eof_mask;
	tr->ring.start_poll = start_poll;
	tr->ring.poll_data = poll_data;
	INIT_LIST_HEAD(&tr->ring.queue);
	INIT_LIST_HEAD(&tr->ring.in_flight);
	init_waitqueue_head(&tr->wait);
	INIT_LIST_HEAD(&tr->posted);
	INIT_LIST_HEAD(&tr->done);
	INIT_LIST_HEAD(&tr->kick_node);
	tr->host = host;

	spin_lock_irqsave(&nhi->lock, irqflags);
	slots = tx ? nhi->tx_rings : nhi->rx_rings;
	if (hop < 0) {
		/* Hop 0 is the control channel's (linux:drivers/thunderbolt/nhi.c). */
		for (hop = 1; hop < (int)nhi->hop_count; hop++)
			if (!slots[hop])
				break;
		if (hop == (int)nhi->hop_count)
			hop = -1;
	} else if (hop == 0 || slots[hop]) {
		hop = -1;
	}
	if (hop > 0)
		slots[hop] = &tr->ring;
	spin_unlock_irqrestore(&nhi->lock, irqflags);

	if (hop < 0) {
		pr_warn("domain%d: no free %s ring hop\n", host->index,
			tx ? "TX" : "RX");
		kfree(tr);
		return NULL;
	}
	tr->ring.hop = hop;
	return &tr->ring;
}

struct tb_ring *tb_ring_alloc_tx(struct tb_nhi *nhi, int hop, int size,
				 unsigned int flags)
{
	return tbl_ring_alloc(nhi, hop, size, true, flags, 0, 0, 0, NULL, NULL);
}
EXPORT_SYMBOL_GPL(tb_ring_alloc_tx);

struct tb_ring *tb_ring_alloc_rx(struct tb_nhi *nhi, int hop, int size,
				 unsigned int flags, int e2e_tx_hop,
				 u16 sof_mask, u16 eof_mask,
				 void (*start_poll)(void *), void *poll_data)
{
	return tbl_ring_alloc(nhi, hop, size, false, flags, e2e_tx_hop,
			      sof_mask, eof_mask, start_poll, poll_data);
}
EXPORT_SYMBOL_GPL(tb_ring_alloc_rx);

void tb_ring_start(struct tb_ring *ring)
{
	struct tbl_ring *tr = tbl_ring(ring);
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->running) {
		spin_unlock_irqrestore(&ring->lock, flags);
		WARN(1, "tbloop: ring already started\n");
		return;
	}
	ring->running = true;
	tr->irq_masked = false;
	spin_unlock_irqrestore(&ring->lock, flags);
}
EXPORT_SYMBOL_GPL(tb_ring_start);

static void tbl_run_callbacks(struct tbl_ring *tr, struct list_head *list,
			      bool canceled)
{
	struct ring_frame *frame, *n;

	list_for_each_entry_safe(frame, n, list, list) {
		list_del_init(&frame->list);
		if (frame->callback)
			frame->callback(&tr->ring, frame, canceled);
	}
}

/*
 * Cancels every frame still on the ring (queued or completed but not yet
 * reaped) with canceled=true, and returns once no callback of this ring
 * runs any more, as linux:drivers/thunderbolt/nhi.c documents for
 * tb_ring_stop().
 */
void tb_ring_stop(struct tb_ring *ring)
{
	struct tbl_ring *tr = tbl_ring(ring);
	unsigned long flags;
	LIST_HEAD(cancel);
	int n = 0;
	struct ring_frame *frame;

	spin_lock_irqsave(&ring->lock, flags);
	if (!ring->running) {
		spin_unlock_irqrestore(&ring->lock, flags);
		WARN(1, "tbloop: ring stopped twice\n");
		return;
	}
	ring->running = false;
	tr->e2e_blocked = false;
	list_splice_tail_init(&tr->done, &cancel);
	list_splice_tail_init(&tr->posted, &cancel);
	tr->cb_active++;
	spin_unlock_irqrestore(&ring->lock, flags);

	tbl_unkick(tr);
	list_for_each_entry(frame, &cancel, list)
		n++;
	atomic64_add(n, &tbl_stats.frames_canceled);
	tbl_run_callbacks(tr, &cancel, true);

	spin_lock_irqsave(&ring->lock, flags);
	tr->cb_active--;
	spin_unlock_irqrestore(&ring->lock, flags);
	/* A callback of this very ring may be what called us: do not wait on it. */
	if (current != READ_ONCE(tbl_fabric_task))
		wait_event(tr->wait, READ_ONCE(tr->cb_active) == 0);
}
EXPORT_SYMBOL_GPL(tb_ring_stop);

#ifdef TBL_RING_FLUSH
bool tb_ring_flush(struct tb_ring *ring, unsigned int timeout_msec)
{
	struct tbl_ring *tr = tbl_ring(ring);

	return wait_event_timeout(tr->wait,
				  list_empty(&tr->posted) || !ring->running,
				  msecs_to_jiffies(timeout_msec)) > 0;
}
EXPORT_SYMBOL_GPL(tb_ring_flush);
#endif

void tb_ring_free(struct tb_ring *ring)
{
	struct tbl_ring *tr = tbl_ring(ring);
	struct tb_nhi *nhi = ring->nhi;
	struct tb_ring **slots;
	unsigned long flags;

	if (WARN(ring->running, "tbloop: freeing a running ring\n"))
		tb_ring_stop(ring);

	spin_lock_irqsave(&nhi->lock, flags);
	slots = ring->is_tx ? nhi->tx_rings : nhi->rx_rings;
	if (slots[ring->hop] == ring)
		slots[ring->hop] = NULL;
	spin_unlock_irqrestore(&nhi->lock, flags);

	/*
	 * No path reaches the ring now; the fabric may still hold it (or kick
	 * it once more) from a run that started before: twice unkick + flush.
	 */
	if (current != READ_ONCE(tbl_fabric_task)) {
		tbl_unkick(tr);
		flush_work(&tbl_fabric_work);
		tbl_unkick(tr);
		flush_work(&tbl_fabric_work);
	}
	tbl_unkick(tr);
	kfree(tr);
}
EXPORT_SYMBOL_GPL(tb_ring_free);

int __tb_ring_enqueue(struct tb_ring *ring, struct ring_frame *frame)
{
	struct tbl_ring *tr = tbl_ring(ring);
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	if (!ring->running) {
		spin_unlock_irqrestore(&ring->lock, flags);
		return -ESHUTDOWN;
	}
	list_add_tail(&frame->list, &tr->posted);
	spin_unlock_irqrestore(&ring->lock, flags);
	tbl_fabric_kick(tr);
	return 0;
}
EXPORT_SYMBOL_GPL(__tb_ring_enqueue);

struct ring_frame *tb_ring_poll(struct tb_ring *ring)
{
	struct tbl_ring *tr = tbl_ring(ring);
	struct ring_frame *frame = NULL;
	unsigned long flags;

	spin_lock_irqsave(&ring->lock, flags);
	if (ring->running && !list_empty(&tr->done)) {
		frame = list_first_entry(&tr->done, struct ring_frame, list);
		list_del_init(&frame->list);
	}
	spin_unlock_irqrestore(&ring->lock, flags);
	return frame;
}
EXPORT_SYMBOL_GPL(tb_ring_poll);

void tb_ring_poll_complete(struct tb_ring *ring)
{
	struct tbl_ring *tr = tbl_ring(ring);
	unsigned long flags;
	bool more;

	spin_lock_irqsave(&ring->lock, flags);
	tr->irq_masked = false;
	more = ring->running && !list_empty(&tr->done);
	spin_unlock_irqrestore(&ring->lock, flags);
	/* Completions that came while masked raise the "interrupt" now. */
	if (more)
		tbl_fabric_kick(tr);
}
EXPORT_SYMBOL_GPL(tb_ring_poll_complete);

/* ---- the fabric ---- */

/* Called by the fabric when an RX ring got buffers: E2E senders may go on. */
static void tbl_kick_blocked_senders(void)
{
	unsigned long flags;
	int h, hop;

	for (h = 0; h < tbl_ndomains; h++) {
		struct tb_nhi *nhi = &tbl_hosts[h].nhi;

		if (!nhi->tx_rings)
			continue;
		spin_lock_irqsave(&nhi->lock, flags);
		for (hop = 1; hop < (int)nhi->hop_count; hop++) {
			struct tb_ring *ring = nhi->tx_rings[hop];

			if (ring && READ_ONCE(tbl_ring(ring)->e2e_blocked))
				tbl_fabric_kick(tbl_ring(ring));
		}
		spin_unlock_irqrestore(&nhi->lock, flags);
	}
}

static void *tbl_frame_va(struct tbl_ring *tr, dma_addr_t addr, size_t len)
{
	struct device *dev = tbl_nhi_dev(tr->host);
	phys_addr_t phys = dma_to_phys(dev, addr);

	if (!len || !pfn_valid(PHYS_PFN(phys)) ||
	    !pfn_valid(PHYS_PFN(phys + len - 1)))
		return NULL;
	return phys_to_virt(phys);
}

/*
 * Frame mode reassembles a frame from its first packet (PDF in sof_mask) to
 * its last (PDF in eof_mask); raw mode hands over every wire packet (at
 * most TB_FRAME_SIZE bytes) in its own descriptor.
 */
enum tbl_xfer { TBL_XFER_DONE, TBL_XFER_WAIT };

static enum tbl_xfer tbl_transfer_one(struct tbl_ring *tx,
				      struct ring_frame *frame,
				      struct list_head *tx_done)
{
	size_t len = tb_ring_frame_size(frame);
	struct tbl_ring *rx;
	const u8 *src;
	size_t off = 0;
	bool corrupt;

	src = tbl_frame_va(tx, frame->buffer_phy, len);
	if (!src) {
		pr_warn_ratelimited("domain%d TX hop %d: frame at DMA address %pad (%zu bytes) is not in RAM; dropped\n",
				    tx->host->index, tx->ring.hop,
				    &frame->buffer_phy, len);
		atomic64_inc(&tbl_stats.frames_bad_address);
		goto complete;
	}

	rx = tbl_route_frame(tx);
	if (!rx) {
		atomic64_inc(&tbl_stats.frames_no_path);
		goto complete;
	}
	if (tbl_fault_drop()) {
		atomic64_inc(&tbl_stats.frames_dropped_fault);
		goto complete;
	}
	corrupt = tbl_fault_corrupt();

	spin_lock_nested(&rx->ring.lock, SINGLE_DEPTH_NESTING);
	if (!rx->ring.running) {
		spin_unlock(&rx->ring.lock);
		atomic64_inc(&tbl_stats.frames_no_buffer);
		goto complete;
	}
	if ((rx->ring.flags & RING_FLAG_FRAME) &&
	    (!(rx->ring.sof_mask & BIT(frame->sof)) ||
	     !(rx->ring.eof_mask & BIT(frame->eof)))) {
		spin_unlock(&rx->ring.lock);
		atomic64_inc(&tbl_stats.frames_pdf_mismatch);
		goto complete;
	}
	do {
		size_t chunk = len - off;
		struct ring_frame *rf;
		u8 *dst;

		if (!(rx->ring.flags & RING_FLAG_FRAME))
			chunk = min_t(size_t, chunk, TB_FRAME_SIZE);
		if (list_empty(&rx->posted)) {
			/* E2E flow control holds the frame until a buffer is posted. */
			if (off == 0 && (tx->ring.flags & RING_FLAG_E2E) &&
			    (rx->ring.flags & RING_FLAG_E2E)) {
				spin_unlock(&rx->ring.lock);
				return TBL_XFER_WAIT;
			}
			atomic64_inc(&tbl_stats.frames_no_buffer);
			break;
		}
		rf = list_first_entry(&rx->posted, struct ring_frame, list);
		dst = tbl_frame_va(rx, rf->buffer_phy, TB_MAX_FRAME_SIZE);
		list_del_init(&rf->list);
		if (!dst) {
			pr_warn_ratelimited("domain%d RX hop %d: buffer at DMA address %pad is not in RAM\n",
					    rx->host->index, rx->ring.hop,
					    &rf->buffer_phy);
			atomic64_inc(&tbl_stats.frames_bad_address);
			rf->size = 0;
			rf->flags = RING_DESC_COMPLETED | RING_DESC_BUFFER_OVERRUN;
		} else {
			memcpy(dst, src + off, chunk);
			if (corrupt && chunk) {
				dst[chunk / 2] ^= 0x5a;
				atomic64_inc(&tbl_stats.frames_corrupted);
			}
			rf->size = chunk & 0xfff;	/* 4096 reads as 0 */
			rf->flags = RING_DESC_COMPLETED |
				    (corrupt ? RING_DESC_CRC_ERROR : 0);
		}
		rf->sof = frame->sof;
		rf->eof = frame->eof;
		list_add_tail(&rf->list, &rx->done);
		rx->frames++;
		rx->bytes += chunk;
		off += chunk;
	} while (off < len);
	spin_unlock(&rx->ring.lock);
	if (off) {
		atomic64_inc(&tbl_stats.frames_delivered);
		atomic64_add(off, &tbl_stats.bytes_delivered);
		tbl_fabric_kick(rx);
	}

complete:
	frame->flags = RING_DESC_COMPLETED;
	list_add_tail(&frame->list, tx_done);
	tx->frames++;
	tx->bytes += len;
	return TBL_XFER_DONE;
}

/* Moves up to a budget of TX frames of @tr, then lets the other rings go. */
static void tbl_fabric_tx(struct tbl_ring *tr)
{
	unsigned long flags;
	LIST_HEAD(done);
	int budget = 64;

	spin_lock_irqsave(&tr->ring.lock, flags);
	while (tr->ring.running && !list_empty(&tr->posted) && budget--) {
		struct ring_frame *frame =
			list_first_entry(&tr->posted, struct ring_frame, list);

		list_del_init(&frame->list);
		if (tbl_transfer_one(tr, frame, &done) == TBL_XFER_WAIT) {
			list_add(&frame->list, &tr->posted);
			tr->e2e_blocked = true;
			break;
		}
		tr->e2e_blocked = false;
	}
	list_splice_tail_init(&done, &tr->done);
	if (budget < 0 && !list_empty(&tr->posted))
		tbl_fabric_kick(tr);	/* fairness: come back after the others */
	spin_unlock_irqrestore(&tr->ring.lock, flags);
	wake_up_all(&tr->wait);
}

/* 7.3 added rings that never interrupt: polled only. */
static bool tbl_no_interrupt(const struct tb_ring *ring)
{
#ifdef RING_FLAG_NO_INTERRUPT
	return ring->flags & RING_FLAG_NO_INTERRUPT;
#else
	return false;
#endif
}

/* Signals completions: callbacks, or start_poll for a ring in poll mode. */
static void tbl_fabric_complete(struct tbl_ring *tr)
{
	struct tb_ring *ring = &tr->ring;
	unsigned long flags;
	LIST_HEAD(list);

	spin_lock_irqsave(&ring->lock, flags);
	if (!ring->running || list_empty(&tr->done) || tbl_no_interrupt(ring)) {
		spin_unlock_irqrestore(&ring->lock, flags);
		return;
	}
	if (ring->start_poll) {
		bool fire = !tr->irq_masked;

		tr->irq_masked = true;
		spin_unlock_irqrestore(&ring->lock, flags);
		if (fire) {
			local_irq_save(flags);
			ring->start_poll(ring->poll_data);
			local_irq_restore(flags);
		}
		return;
	}
	list_splice_tail_init(&tr->done, &list);
	tr->cb_active++;
	spin_unlock_irqrestore(&ring->lock, flags);

	tbl_run_callbacks(tr, &list, false);

	spin_lock_irqsave(&ring->lock, flags);
	tr->cb_active--;
	spin_unlock_irqrestore(&ring->lock, flags);
	wake_up_all(&tr->wait);
}

static void tbl_fabric_fn(struct work_struct *work)
{
	unsigned long flags;
	int rounds = 256;

	WRITE_ONCE(tbl_fabric_task, current);
	while (rounds--) {
		struct tbl_ring *tr;

		spin_lock_irqsave(&tbl_kick_lock, flags);
		tr = list_first_entry_or_null(&tbl_kicked, struct tbl_ring,
					      kick_node);
		if (tr) {
			list_del_init(&tr->kick_node);
			tr->kicked = false;
		}
		spin_unlock_irqrestore(&tbl_kick_lock, flags);
		if (!tr)
			break;
		if (tr->ring.is_tx)
			tbl_fabric_tx(tr);
		else
			/* A new RX buffer may unblock an E2E sender. */
			tbl_kick_blocked_senders();
		tbl_fabric_complete(tr);
		cond_resched();
	}
	WRITE_ONCE(tbl_fabric_task, NULL);
	spin_lock_irqsave(&tbl_kick_lock, flags);
	if (!list_empty(&tbl_kicked))
		queue_work(tbl_fabric_wq, &tbl_fabric_work);
	spin_unlock_irqrestore(&tbl_kick_lock, flags);
}

int tbl_fabric_init(void)
{
	INIT_WORK(&tbl_fabric_work, tbl_fabric_fn);
	tbl_fabric_wq = alloc_ordered_workqueue("tbloop_fabric", WQ_MEM_RECLAIM);
	return tbl_fabric_wq ? 0 : -ENOMEM;
}

void tbl_fabric_exit(void)
{
	destroy_workqueue(tbl_fabric_wq);
}
