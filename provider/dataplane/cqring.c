//go:build !usb4front

/*
 * usb4 mapped CQ ring, ABI 2 (donnerkeule:proto/tbv_cq_shm.h; reference
 * usb4-kernel-and-consumers.md §1.8).
 *
 * Ownership: the kernel is the only writer of `produced` and `ovf_seq` and of
 * the ring entries; user space is the only writer of `consumed`. Both are
 * monotonic u32 totals, so occupancy is produced - consumed (mod 2^32), which
 * also works at cqe == 1. Our slot cursor `head` and total `consumed` are
 * private (the shared copy is written, never read back), so a forged or torn
 * shared value cannot move us. Acquire-load `produced` before reading
 * entries; release-store `consumed` after copying them so the kernel cannot
 * overwrite a slot we are still reading. Pollers serialise on cq->lock.
 * ovf_seq != 0 latches the CQ into a permanent -EIO: an overrun lost entries.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

int usb4v_shm_validate(const struct usb4v_tbv_cq_shm *hdr, const struct usb4v_tbv_uresp_create_cq *tail,
		       uint32_t requested_cqe, size_t mapped_len, const char **why)
{
	if (mapped_len < sizeof(*hdr)) {
		*why = "mapping smaller than the header";
		return 0;
	}
	if (hdr->magic != USB4V_TBV_CQ_SHM_MAGIC) {
		*why = "bad magic";
		return 0;
	}
	if (hdr->abi != USB4V_TBV_CQ_SHM_ABI) {
		*why = "unknown ABI";
		return 0;
	}
	if (hdr->cqe == 0 || hdr->cqe != tail->cqe || hdr->cqe < requested_cqe) {
		*why = "cqe does not match the request";
		return 0;
	}
	if (hdr->entry_size != sizeof(struct usb4v_ib_uverbs_wc)) {
		*why = "wrong entry size";
		return 0;
	}
	if (hdr->map_len != tail->map_len || hdr->map_len != mapped_len) {
		*why = "map_len mismatch";
		return 0;
	}
	uint64_t end = (uint64_t)hdr->ring_offset + (uint64_t)hdr->cqe * hdr->entry_size;
	if (hdr->ring_offset < sizeof(*hdr) || (hdr->ring_offset % 8) != 0 || end > mapped_len) {
		*why = "ring outside the mapping";
		return 0;
	}
	uint32_t produced = __atomic_load_n(&hdr->produced, __ATOMIC_ACQUIRE);
	uint32_t consumed = __atomic_load_n(&hdr->consumed, __ATOMIC_RELAXED);
	if (produced - consumed > hdr->cqe) {
		*why = "occupancy exceeds cqe";
		return 0;
	}
	if (__atomic_load_n(&hdr->ovf_seq, __ATOMIC_RELAXED) != 0) {
		*why = "ring already overflowed";
		return 0;
	}
	*why = NULL;
	return 1;
}

int usb4v_cq_try_shm(struct usb4v_cq *cq, const struct usb4v_tbv_uresp_create_cq *tail,
		     uint32_t requested_cqe)
{
	const char *why = NULL;
	void *addr = NULL;
	if (tail->shm_abi != USB4V_TBV_CQ_SHM_ABI) {
		/* zero: old kernel or short response; the offset may legally be 0 */
		snprintf(cq->fallback_reason, sizeof(cq->fallback_reason), "no ABI %u offer (shm_abi=%u)",
			 USB4V_TBV_CQ_SHM_ABI, tail->shm_abi);
		return 0;
	}
	if (tail->map_len < sizeof(struct usb4v_tbv_cq_shm) || tail->map_len > (1u << 30)) {
		snprintf(cq->fallback_reason, sizeof(cq->fallback_reason), "implausible map_len %llu",
			 (unsigned long long)tail->map_len);
		return 0;
	}
	int rc = cq->sys->mmap(cq->sys->ctx, cq->cmd_fd, tail->cq_mmap_offset, (size_t)tail->map_len, &addr);
	if (rc < 0) {
		snprintf(cq->fallback_reason, sizeof(cq->fallback_reason), "mmap refused: errno %d", -rc);
		return 0;
	}
	struct usb4v_tbv_cq_shm *hdr = addr;
	if (!usb4v_shm_validate(hdr, tail, requested_cqe, (size_t)tail->map_len, &why)) {
		cq->sys->munmap(cq->sys->ctx, addr, (size_t)tail->map_len);
		snprintf(cq->fallback_reason, sizeof(cq->fallback_reason), "malformed header: %s", why);
		return 0;
	}
	pthread_spin_lock(&cq->lock);
	cq->shm.hdr = hdr;
	cq->shm.ring = (struct usb4v_ib_uverbs_wc *)((uint8_t *)addr + hdr->ring_offset);
	cq->shm.cqe = hdr->cqe;
	cq->shm.consumed = __atomic_load_n(&hdr->consumed, __ATOMIC_RELAXED);
	cq->shm.head = cq->shm.consumed % hdr->cqe;
	cq->shm.map_len = (size_t)tail->map_len;
	cq->backend = USB4V_BACKEND_CQRING;
	__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_BACKEND, __ATOMIC_RELAXED);
	pthread_spin_unlock(&cq->lock);
	cq->fallback_reason[0] = 0;
	return 1;
}

/* Caller holds cq->lock. */
int usb4v_shm_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc)
{
	struct usb4v_tbv_cq_shm *hdr = cq->shm.hdr;
	if (__atomic_load_n(&hdr->ovf_seq, __ATOMIC_RELAXED) != 0) {
		__atomic_store_n(&cq->error, -EIO, __ATOMIC_RELAXED);
		__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR, __ATOMIC_RELAXED);
		return -EIO;
	}
	uint32_t produced = __atomic_load_n(&hdr->produced, __ATOMIC_ACQUIRE);
	uint32_t avail = produced - cq->shm.consumed;
	if (avail > cq->shm.cqe) {
		/* A writer broke the protocol; nothing in the ring can be trusted. */
		__atomic_store_n(&cq->error, -EIO, __ATOMIC_RELAXED);
		__atomic_fetch_or(&cq->slow, USB4V_CQ_SLOW_ERROR, __ATOMIC_RELAXED);
		return -EIO;
	}
	uint32_t n = avail < (uint32_t)ne ? avail : (uint32_t)ne;
	for (uint32_t i = 0; i < n; i++) {
		usb4v_uwc_to_ibv(&cq->shm.ring[cq->shm.head], &wc[i]);
		cq->shm.head = cq->shm.head + 1 == cq->shm.cqe ? 0 : cq->shm.head + 1;
	}
	if (n) {
		cq->shm.consumed += n;
		__atomic_store_n(&hdr->consumed, cq->shm.consumed, __ATOMIC_RELEASE);
	}
	return (int)n;
}
