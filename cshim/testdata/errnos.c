// Checks that every int-returning control op that fails leaves errno set to
// the code it returns, as rdma-core's providers do (their failing system
// call sets it): programs that report with perror or %m otherwise print
// "Success" (issue 12 item 13). Run with testdata/gostub.c standing in for
// Go (USB4_STUB_OPEN_OK, _PD_OK, _OBJ_OK): its query, modify and, with
// USB4_STUB_DESTROY_EIO, destroy verbs fail. Each line: "<op> <returned>
// errno <errno>", errno cleared before each call.
//
//   errnos DEVICE
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "testdev.h"

static const char *name(int e)
{
	if (e == 0)
		return "0";
	const char *n = strerrorname_np(e < 0 ? -e : e);
	return n ? n : "?";
}

static void report(const char *op, int rc, int err)
{
	printf("%s %s errno %s\n", op, name(rc), name(err));
}

#define CHECK(op, call)                   \
	do {                              \
		errno = 0;                \
		int rc_ = (call);         \
		report(op, rc_, errno);   \
	} while (0)

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
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT};
	struct ibv_qp_init_attr qia;
	struct ibv_srq_attr sa = {.max_wr = 8};
	CHECK("query_device", ibv_query_device(o.ctx, &da));
	CHECK("query_port", ibv_query_port(o.ctx, 1, &pa));
	CHECK("modify_qp", ibv_modify_qp(o.qp, &qa, IBV_QP_STATE));
	CHECK("query_qp", ibv_query_qp(o.qp, &qa, IBV_QP_STATE, &qia));
	CHECK("modify_srq", ibv_modify_srq(o.srq, &sa, IBV_SRQ_MAX_WR));
	CHECK("query_srq", ibv_query_srq(o.srq, &sa));
	setenv("USB4_STUB_DESTROY_EIO", "1", 1); // a disassociated device
	CHECK("destroy_qp", ibv_destroy_qp(o.qp));
	CHECK("destroy_srq", ibv_destroy_srq(o.srq));
	CHECK("destroy_cq", ibv_destroy_cq(o.cq));
	unsetenv("USB4_STUB_DESTROY_EIO");
	CHECK("destroy_qp", ibv_destroy_qp(o.qp));
	CHECK("req_notify_cq_destroyed", ibv_req_notify_cq(o.cq, 0)); // quarantined CQ: EINVAL
	CHECK("destroy_srq", ibv_destroy_srq(o.srq));
	CHECK("destroy_cq", ibv_destroy_cq(o.cq));
	CHECK("dealloc_pd", ibv_dealloc_pd(o.pd));
	CHECK("close", ibv_close_device(o.ctx));
	ibv_free_device_list(list);
	return 0;
}
