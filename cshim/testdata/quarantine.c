// Checks the quarantine of destroyed CQs, QPs and SRQs (cshim/objects.c):
// after a destroy, libibverbs' data-op inlines still read the object's
// context, so the memory must stay valid, and every data op must fail the
// way rdma-core's conventions have it instead of touching freed memory.
// Run under AddressSanitizer with testdata/gostub.c standing in for Go
// (USB4_STUB_OBJ_OK=1): a use after free or a leaked shell at close is a
// sanitizer report. Prints one line per check.
//
//   quarantine DEVICE
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "testdev.h"

static const char *err(int rc)
{
	return rc ? strerrorname_np(rc < 0 ? -rc : rc) : "0";
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = find_device(list, n, argc > 1 ? argv[1] : NULL);
	if (!dev)
		return 1;
	struct test_objs o;
	if (open_objects(dev, &o))
		return 1;
	struct ibv_context *ctx = o.ctx;
	struct ibv_pd *pd = o.pd;
	struct ibv_cq *cq = o.cq;
	struct ibv_srq *srq = o.srq;
	struct ibv_qp *qp = o.qp;
	printf("destroy_qp %s\n", err(ibv_destroy_qp(qp)));
	printf("destroy_srq %s\n", err(ibv_destroy_srq(srq)));
	printf("destroy_cq %s\n", err(ibv_destroy_cq(cq)));

	// Data ops on the destroyed objects: an error, *bad_wr at the first WR.
	struct ibv_sge sge = {.addr = 0x1000, .length = 8, .lkey = 1};
	struct ibv_send_wr swr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1};
	struct ibv_send_wr *sbad = NULL;
	struct ibv_recv_wr *rbad = NULL;
	int rc = ibv_post_send(qp, &swr, &sbad);
	printf("post_send %s bad_wr %s\n", err(rc), sbad == &swr ? "=wr" : "wrong");
	rc = ibv_post_recv(qp, &rwr, &rbad);
	printf("post_recv %s bad_wr %s\n", err(rc), rbad == &rwr ? "=wr" : "wrong");
	rbad = NULL;
	rc = ibv_post_srq_recv(srq, &rwr, &rbad);
	printf("post_srq_recv %s bad_wr %s\n", err(rc), rbad == &rwr ? "=wr" : "wrong");
	struct ibv_wc wc[4];
	rc = ibv_poll_cq(cq, 4, wc);
	printf("poll_cq %s%s\n", rc < 0 ? "-" : "", err(rc));
	printf("poll_cq_n-1 %d\n", ibv_poll_cq(cq, -1, wc));
	printf("req_notify_cq %s\n", err(ibv_req_notify_cq(cq, 0)));
	// A second destroy finds no Go object: EBADF, never a double free.
	printf("destroy_qp_again %s\n", err(ibv_destroy_qp(qp)));
	printf("destroy_srq_again %s\n", err(ibv_destroy_srq(srq)));
	printf("destroy_cq_again %s\n", err(ibv_destroy_cq(cq)));

	// More destroyed CQs than the quarantine holds: the oldest shells are
	// freed (no growth without bound), the newest still answer.
	struct ibv_cq *last = NULL;
	int churned = 0;
	for (int i = 0; i < 5000; i++) {
		struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		if (!c || ibv_destroy_cq(c))
			break;
		last = c;
		churned++;
	}
	printf("churned %d\n", churned);
	rc = last ? ibv_poll_cq(last, 4, wc) : 0;
	printf("poll_last %s%s\n", rc < 0 ? "-" : "", err(rc));

	printf("dealloc_pd %s\n", err(ibv_dealloc_pd(pd)));
	printf("close %s\n", err(ibv_close_device(ctx)));
	ibv_free_device_list(list);
	return 0;
}
