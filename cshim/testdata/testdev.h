// What the cshim test programs (contracts.c, events.c, quarantine.c, cqex.c,
// srqresize.c) share: finding the device named on the command line, the PD,
// CQ, SRQ and RC QP that the destroy tests run against, and moving an RC QP
// to RTS. The printed lines are part of what shim_test.go reads.
#ifndef USB4V_TESTDEV_H
#define USB4V_TESTDEV_H

#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

// find_device: the device of list named name (argv[1], may be NULL), or NULL
// after printing "no device NAME".
static inline struct ibv_device *find_device(struct ibv_device **list, int n, const char *name)
{
	for (int i = 0; list && name && i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i];
	printf("no device %s\n", name ? name : "");
	return NULL;
}

struct test_objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
};

// open_objects: opens dev and creates a PD, a 4-entry CQ, an SRQ and an RC QP
// on them. 0, or 1 after printing "setup failed: <errno name>".
static inline int open_objects(struct ibv_device *dev, struct test_objs *o)
{
	o->ctx = ibv_open_device(dev);
	o->pd = o->ctx ? ibv_alloc_pd(o->ctx) : NULL;
	o->cq = o->pd ? ibv_create_cq(o->ctx, 4, NULL, NULL, 0) : NULL;
	struct ibv_srq_init_attr sia = {.attr = {.max_wr = 4, .max_sge = 1}};
	o->srq = o->cq ? ibv_create_srq(o->pd, &sia) : NULL;
	struct ibv_qp_init_attr qia = {.send_cq = o->cq, .recv_cq = o->cq, .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	o->qp = o->srq ? ibv_create_qp(o->pd, &qia) : NULL;
	if (!o->qp) {
		printf("setup failed: %m\n");
		return 1;
	}
	return 0;
}

// connect_rc: moves an RC QP from RESET to RTS towards QP dest_qpn at gid
// (RoCE: a global route from our GID gid_index), with the attributes every
// test here uses. 0 or ibv_modify_qp's errno.
static inline int connect_rc(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

#endif
