// Checks that every int-returning control op that fails leaves errno set to
// the code it returns, as rdma-core's providers do (their failing system
// call sets it): programs that report with perror or %m otherwise print
// "Success" (issue 12 item 13). Run with testdata/gostub.c standing in for
// Go (USB4_STUB_OPEN_OK, _PD_OK, _OBJ_OK): its query, modify and, with
// USB4_STUB_DESTROY_EIO, destroy verbs fail. Each line: "<op> <returned>
// errno <errno>", errno cleared before each call.
//
//   errnos DEVICE
//   errnos DEVICE mcast   attach_mcast/detach_mcast on a QP (issue 31 item 13)
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
	if (argc > 2 && strcmp(argv[2], "mcast") == 0) {
		// The stub plays the kernel: it logs what reached it and, as
		// ib_attach_mcast does, refuses a GID that is not multicast.
		union ibv_gid mgid = {.raw = {0xff, 0x0e, [10] = 0xff, [11] = 0xff, [12] = 239, 1, 2, 3}};
		union ibv_gid ucast = {.raw = {0xfe, 0x80, [15] = 1}};
		CHECK("attach_mcast", ibv_attach_mcast(o.qp, &mgid, 0xc001));
		CHECK("attach_mcast_unicast_gid", ibv_attach_mcast(o.qp, &ucast, 0));
		CHECK("detach_mcast", ibv_detach_mcast(o.qp, &mgid, 0xc001));
		CHECK("detach_mcast_unicast_gid", ibv_detach_mcast(o.qp, &ucast, 0));
		setenv("USB4_STUB_MCAST_REFUSE", "1", 1); // a device without multicast (usb4)
		CHECK("attach_mcast_refused", ibv_attach_mcast(o.qp, &mgid, 0xc001));
		unsetenv("USB4_STUB_MCAST_REFUSE");
	} else {
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
	}
	CHECK("destroy_qp", ibv_destroy_qp(o.qp));
	CHECK("req_notify_cq_destroyed", ibv_req_notify_cq(o.cq, 0)); // quarantined CQ: EINVAL
	CHECK("destroy_srq", ibv_destroy_srq(o.srq));
	CHECK("destroy_cq", ibv_destroy_cq(o.cq));
	CHECK("dealloc_pd", ibv_dealloc_pd(o.pd));
	CHECK("close", ibv_close_device(o.ctx));
	ibv_free_device_list(list);
	return 0;
}
