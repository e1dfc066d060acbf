/* A fake rdma_rxe kernel for host tests of the ring logic: it owns the
 * kernel side of an SQ, RQ and CQ in plain memory and, on the zero-WR
 * POST_SEND doorbell, consumes the SQ and (optionally) completes each WQE. */
#ifndef USB4V_RXEFAKE_H
#define USB4V_RXEFAKE_H
#include "engine.h"

struct rxf {
	struct usb4v_sys sys;
	uint8_t *q[3]; /* sq, rq, cq */
	size_t len[3];
	uint8_t *map[3]; /* guarded mappings holding the rings */
	size_t map_len[3], slack_lo[3], slack_hi[3];
	uint64_t doorbells, bad_cmds, cq_drops;
	int auto_complete;
};

struct rxf *rxf_new(uint32_t sq_depth, uint32_t sq_log2_elem, uint32_t rq_depth, uint32_t rq_log2_elem,
		    uint32_t cq_depth);
void rxf_free(struct rxf *f);
/* Kernel consumer: advance the consumer index of queue q by n. */
void rxf_consume(struct rxf *f, int q, uint32_t n);
/* Kernel producer: append one CQE; 0, or -ENOSPC when the CQ is full. */
int rxf_produce_cqe(struct rxf *f, const struct usb4v_ib_uverbs_wc *wc);
/* 1 when nothing was written into the slack around any ring. */
int rxf_canary_ok(const struct rxf *f);
/* Overwrites queue q's indices as a buggy or hostile kernel could. */
void rxf_set_indices(struct rxf *f, int q, uint32_t prod, uint32_t cons);
#endif
