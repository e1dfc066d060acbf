// The extended CQ/SRQ/device ops on the host, with testdata/gostub.c for Go
// (its CQs on a real engine CQ of kernel commands whose POLL_CQ finds
// nothing, USB4_STUB_ENGINE=1): every function of the ibv_cq_ex table is
// called, the bad flows included, under AddressSanitizer (shim_test.go
// TestCQExOnTheHost). One line per check.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "testdev.h"

static const char *en(int e)
{
	return e ? strerrorname_np(e) : "0";
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = find_device(list, n, argc > 1 ? argv[1] : NULL);
	if (!dev)
		return 1;
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		printf("setup failed: %m\n");
		return 1;
	}
	struct ibv_cq_init_attr_ex a = {.cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS};
	errno = 0;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
	printf("create_cq_ex %s\n", cq ? "ok" : en(errno));
	if (!cq)
		return 1;
	printf("table %s\n", cq->start_poll && cq->next_poll && cq->end_poll && cq->read_opcode && cq->read_vendor_err &&
					cq->read_wc_flags && cq->read_byte_len && cq->read_imm_data && cq->read_qp_num &&
					cq->read_src_qp && cq->read_slid && cq->read_sl && cq->read_dlid_path_bits &&
					!cq->read_completion_ts
				    ? "ok"
				    : "incomplete");
	ibv_end_poll(cq); // without a start: nothing happens
	printf("next_poll_without_start %s\n", en(ibv_next_poll(cq)));
	struct ibv_poll_cq_attr pa = {0};
	printf("start_poll_empty %s\n", en(ibv_start_poll(cq, &pa)));
	printf("start_poll_empty_again %s\n", en(ibv_start_poll(cq, &pa)));
	struct ibv_wc wc;
	printf("poll_cq %d\n", ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc));
	printf("req_notify %d\n", ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0));
	printf("resize %s\n", en(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 64)));
	printf("resize_0 %s\n", en(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 0)));
	struct ibv_cq_init_attr_ex ts = {.cqe = 8, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	printf("create_cq_ex_timestamp %s\n", ibv_create_cq_ex(ctx, &ts) ? "ok" : en(errno));
	struct ibv_srq_init_attr_ex sx = {.attr = {.max_wr = 4, .max_sge = 1},
					  .comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ, .pd = pd,
					  .cq = ibv_cq_ex_to_cq(cq)};
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sx);
	printf("create_srq_ex_basic %s context %s pd %s\n", srq ? "ok" : en(errno),
	       srq && srq->context == ctx ? "ok" : "-", srq && srq->pd == pd ? "ok" : "-");
	if (srq)
		printf("destroy_srq %d\n", ibv_destroy_srq(srq));
	sx.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	sx.srq_type = IBV_SRQT_XRC;
	errno = 0;
	printf("create_srq_ex_xrc %s\n", ibv_create_srq_ex(ctx, &sx) ? "ok" : en(errno));
	struct ibv_device_attr_ex da;
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	printf("query_device_ex_input_mask %s\n", en(verbs_get_ctx_op(ctx, query_device_ex)
							     ->query_device_ex(ctx, &in, &da, sizeof(da))));
	printf("destroy_cq %d\n", ibv_destroy_cq(ibv_cq_ex_to_cq(cq)));
	printf("dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
