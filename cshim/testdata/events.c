// Checks that destroy_cq, destroy_qp and destroy_srq wait until the
// application has acknowledged every event the kernel reported for the
// object, as libibverbs' ibv_cmd_destroy_* do. Run with testdata/gostub.c
// standing in for Go (USB4_STUB_OBJ_OK=1, USB4_STUB_EVENTS=1): each destroy
// reports one event of each kind the object has. A destroy thread is started,
// and after each acknowledgement but the last the program prints whether the
// destroy is still blocked; then it prints the destroy's return value.
//
// With "dataops" (and USB4_STUB_ENGINE=1, so objects have engines), the
// thread holding the unacknowledged events uses the object while the destroy
// waits, as rping's and UCX's event threads do at shutdown: a CQ is polled
// and re-armed, a QP posted to, an SRQ reposted; the engine must still be
// there (issue 12 item 1; ASan reports a use after free otherwise).
//
//   events DEVICE [normal|eio|disassoc|dataops]
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "testdev.h"

enum { KIND_CQ, KIND_QP, KIND_SRQ };

struct destroyer {
	int kind;
	void *obj;
	atomic_int done;
	int rc;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;
	switch (d->kind) {
	case KIND_CQ:
		d->rc = ibv_destroy_cq(d->obj);
		break;
	case KIND_QP:
		d->rc = ibv_destroy_qp(d->obj);
		break;
	default:
		d->rc = ibv_destroy_srq(d->obj);
	}
	atomic_store(&d->done, 1);
	return NULL;
}

// A blocked destroy stays blocked; one that does not wait returns within
// microseconds, so 200 ms tells the two apart.
static const char *blocked(struct destroyer *d)
{
	struct timespec ts = {.tv_nsec = 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	return atomic_load(&d->done) ? "returned" : "blocked";
}

static void ack_async(enum ibv_event_type type, void *obj)
{
	struct ibv_async_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	if (type == IBV_EVENT_CQ_ERR)
		ev.element.cq = obj;
	else if (type == IBV_EVENT_QP_FATAL)
		ev.element.qp = obj;
	else
		ev.element.srq = obj;
	ibv_ack_async_event(&ev);
}

static int dataops;

// use_object runs the data ops of obj's kind and prints their results.
static void use_object(const char *name, int kind, void *obj)
{
	static char buf[8];
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = 1};
	struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *rbad = NULL;
	struct ibv_send_wr swr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND}, *sbad = NULL;
	struct ibv_wc wc[2];
	switch (kind) {
	case KIND_CQ:
		printf("%s during_destroy poll %d req_notify %d\n", name, ibv_poll_cq(obj, 2, wc), ibv_req_notify_cq(obj, 0));
		break;
	case KIND_QP:
		printf("%s during_destroy post_send %d post_recv %d\n", name, ibv_post_send(obj, &swr, &sbad),
		       ibv_post_recv(obj, &rwr, &rbad));
		break;
	default:
		printf("%s during_destroy post_srq_recv %d\n", name, ibv_post_srq_recv(obj, &rwr, &rbad));
	}
}

// Destroys obj on a thread and reports whether the destroy blocked. Only a
// blocked destroy gets the acknowledgements (acking a freed object would be a
// use after free).
static int run(const char *name, int kind, void *obj)
{
	struct destroyer d = {.kind = kind, .obj = obj};
	pthread_t t;
	if (pthread_create(&t, NULL, destroy_thread, &d) != 0)
		return 1;
	const char *state = blocked(&d);
	printf("%s before_acks %s\n", name, state);
	if (strcmp(state, "blocked") == 0) {
		if (dataops)
			use_object(name, kind, obj);
		if (kind == KIND_CQ) {
			ibv_ack_cq_events(obj, 1);
			printf("%s after_comp_ack %s\n", name, blocked(&d));
			ack_async(IBV_EVENT_CQ_ERR, obj);
		} else {
			ack_async(kind == KIND_QP ? IBV_EVENT_QP_FATAL : IBV_EVENT_SRQ_ERR, obj);
		}
	}
	pthread_join(t, NULL);
	printf("%s destroy %s\n", name, d.rc ? strerrorname_np(d.rc) : "0");
	fflush(stdout);
	return 0;
}

// With "eio" the stub's destroys fail with EIO (a disassociated device) and
// the application did not opt in: the error comes back and the object stays
// usable, so after the stub recovers it is destroyed normally. With
// "disassoc" the application opted in (RDMAV_ALLOW_DISASSOC_DESTROY=1): the
// destroy succeeds at once, with no events to wait for.
static int run_mode(const char *mode, const char *name, int kind, void *obj)
{
	if (strcmp(mode, "eio") == 0) {
		setenv("USB4_STUB_DESTROY_EIO", "1", 1);
		run(name, kind, obj);
		unsetenv("USB4_STUB_DESTROY_EIO");
	}
	return run(name, kind, obj);
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
	const char *mode = argc > 2 ? argv[2] : "normal";
	dataops = strcmp(mode, "dataops") == 0;
	if (run_mode(mode, "qp", KIND_QP, qp) || run_mode(mode, "srq", KIND_SRQ, srq) || run_mode(mode, "cq", KIND_CQ, cq))
		return 1;
	printf("dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
