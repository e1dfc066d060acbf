// What the cshim test programs (contracts.c, events.c, quarantine.c) share:
// finding the device named on the command line, and the PD, CQ, SRQ and RC QP
// that the destroy tests run against. The printed lines are part of what
// shim_test.go reads.
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

#endif
