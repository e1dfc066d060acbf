/*
 * Kernel ABI for the engine: the C mirror generated from package uapi
 * (uapi/c/usb4verbs_uapi.h, one source of truth) plus small helpers.
 */
#ifndef USB4V_KABI_H
#define USB4V_KABI_H

#include <stddef.h>
#include <stdint.h>

#include "usb4verbs_uapi.h"

/* usb4_rdma_dv_tail_pack (pleite@eca80ec:userspace/usb4_rdma/usb4_rdma_dv.h):
 * 24-bit index | 8-bit generation. */
static inline uint32_t usb4v_dv_pack(uint32_t index, uint8_t gen)
{
	return (index & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) | ((uint32_t)gen << USB4V_USB4_RDMA_DV_TAIL_GEN_SHIFT);
}

/*
 * The DV doorbell structs are declared packed+aligned(64) by the ABI, so the
 * compiler refuses plain &member for atomics. Every 32-bit word sits at a
 * 4-byte-aligned offset of a 64-byte-aligned record; these give typed
 * pointers to them.
 */
#define USB4V_DB_PRODUCER(db, field) \
	((uint32_t *)((uint8_t *)(db) + offsetof(struct usb4v_usb4_rdma_dv_doorbell, producer) + \
		      offsetof(struct usb4v_usb4_rdma_dv_doorbell_producer_line, field)))
#define USB4V_DB_CONSUMER(db, field) \
	((uint32_t *)((uint8_t *)(db) + offsetof(struct usb4v_usb4_rdma_dv_doorbell, consumer) + \
		      offsetof(struct usb4v_usb4_rdma_dv_doorbell_consumer_line, field)))

#endif
