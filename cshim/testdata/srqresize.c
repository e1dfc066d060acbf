// In the VM (cshim/vmtest.sh): ibv_modify_srq(IBV_SRQ_MAX_WR) through the
// stock libibverbs and our provider on rxe, with traffic before and after.
// rxe moves a resized SRQ to a new ring (linux:drivers/infiniband/sw/rxe/
// rxe_queue.c rxe_queue_resize), so receives posted afterwards must land there;
// ones left in the old ring are never consumed and the sender sees RNR NAKs.
// Two RC QPs on one device, looped back over its RoCE v2 GID; every wr_id and
// every byte is checked. Prints "--- PASS/FAIL: cshim/srq_resize"; exit 1 on
// failure.
//
//   srqresize DEV GID_INDEX
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "testdev.h"

enum { MSG = 256, SLOTS = 1024, CQE = 512 };

struct bed {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq_send, *cq_recv;
	struct ibv_srq *srq;
	struct ibv_qp *sender, *receiver;
	struct ibv_mr *mr;
	uint8_t *send_buf, *recv_buf; /* SLOTS messages each, in one MR */
	int posted, sent;             /* message k: send slot k -> receive slot k, wr_id k */
	char why[256];
};

static int fail(struct bed *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct bed *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->why, sizeof(b->why), fmt, ap);
	va_end(ap);
	return -1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

// poll_n: n successful completions from cq within 10 s, into wc.
static int poll_n(struct bed *b, struct ibv_cq *cq, int n, struct ibv_wc *wc, const char *what)
{
	int got = 0;
	double deadline = now() + 10;
	while (got < n) {
		int k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return fail(b, "poll %s: %d", what, k);
		for (int i = got; i < got + k; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				return fail(b, "%s completion wr_id %llu: %s", what, (unsigned long long)wc[i].wr_id,
					    ibv_wc_status_str(wc[i].status));
		got += k;
		if (k == 0 && now() > deadline)
			return fail(b, "%d of %d %s completions after 10 s (messages sent %d, receives posted %d)", got, n,
				    what, b->sent, b->posted);
	}
	return 0;
}

static int post_recvs(struct bed *b, int n)
{
	for (; n > 0; n--) {
		int k = b->posted;
		struct ibv_sge sge = {.addr = (uintptr_t)(b->recv_buf + (size_t)k * MSG), .length = MSG, .lkey = b->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)k, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
		int rc = ibv_post_srq_recv(b->srq, &wr, &bad);
		if (rc)
			return fail(b, "post_srq_recv %d: %s", k, strerror(rc));
		b->posted++;
	}
	return 0;
}

static int send_and_check(struct bed *b, int n)
{
	static struct ibv_wc wc[64];
	while (n > 0) {
		int chunk = n < 64 ? n : 64, first = b->sent;
		for (int i = 0; i < chunk; i++) {
			int k = b->sent++;
			uint8_t *m = b->send_buf + (size_t)k * MSG;
			for (int j = 0; j < MSG; j++)
				m[j] = (uint8_t)(k ^ (j * 13));
			struct ibv_sge sge = {.addr = (uintptr_t)m, .length = MSG, .lkey = b->mr->lkey};
			struct ibv_send_wr wr = {.wr_id = (uint64_t)k, .sg_list = &sge, .num_sge = 1,
						 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
			int rc = ibv_post_send(b->sender, &wr, &bad);
			if (rc)
				return fail(b, "post_send %d: %s", k, strerror(rc));
		}
		if (poll_n(b, b->cq_send, chunk, wc, "send") || poll_n(b, b->cq_recv, chunk, wc, "receive"))
			return -1;
		for (int i = 0; i < chunk; i++) {
			int k = first + i;
			if (wc[i].wr_id != (uint64_t)k || wc[i].byte_len != MSG)
				return fail(b, "receive %d: wr_id %llu, %u bytes", k, (unsigned long long)wc[i].wr_id, wc[i].byte_len);
			if (memcmp(b->recv_buf + (size_t)k * MSG, b->send_buf + (size_t)k * MSG, MSG))
				return fail(b, "message %d: bytes differ", k);
		}
		n -= chunk;
	}
	return 0;
}

static int run(struct bed *b, const char *dev, int gid_index)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n), *d = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			d = list[i];
	if (!d)
		return fail(b, "device %s not listed", dev);
	b->ctx = ibv_open_device(d);
	ibv_free_device_list(list);
	if (!b->ctx)
		return fail(b, "open %s: %s", dev, strerror(errno));
	union ibv_gid gid;
	if (ibv_query_gid(b->ctx, 1, gid_index, &gid))
		return fail(b, "query_gid %d: %s", gid_index, strerror(errno));
	size_t len = 2 * (size_t)SLOTS * MSG;
	uint8_t *buf = calloc(1, len);
	b->pd = ibv_alloc_pd(b->ctx);
	b->cq_send = ibv_create_cq(b->ctx, CQE, NULL, NULL, 0);
	b->cq_recv = ibv_create_cq(b->ctx, CQE, NULL, NULL, 0);
	if (!buf || !b->pd || !b->cq_send || !b->cq_recv)
		return fail(b, "buffer/alloc_pd/create_cq: %s", strerror(errno));
	b->mr = ibv_reg_mr(b->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!b->mr)
		return fail(b, "reg_mr: %s", strerror(errno));
	b->send_buf = buf;
	b->recv_buf = buf + (size_t)SLOTS * MSG;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	b->srq = ibv_create_srq(b->pd, &sa);
	if (!b->srq)
		return fail(b, "create_srq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {.send_cq = b->cq_send, .recv_cq = b->cq_recv, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 128, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	b->sender = ibv_create_qp(b->pd, &ia);
	ia.srq = b->srq;
	b->receiver = ibv_create_qp(b->pd, &ia);
	if (!b->sender || !b->receiver)
		return fail(b, "create_qp: %s", strerror(errno));
	int rc = connect_rc(b->sender, b->receiver->qp_num, &gid, gid_index);
	if (!rc)
		rc = connect_rc(b->receiver, b->sender->qp_num, &gid, gid_index);
	if (rc)
		return fail(b, "connect: %s", strerror(rc));

	struct ibv_srq_attr q;
	if ((rc = ibv_query_srq(b->srq, &q)))
		return fail(b, "query_srq: %s", strerror(rc));
	int granted = (int)q.max_wr;
	if (granted < 12 || granted > 64)
		return fail(b, "granted max_wr %d", granted);
	// The old ring full, most of it used; 11 receives outstanding across
	// the resize (the kernel copies them into the new ring).
	if (post_recvs(b, granted) || send_and_check(b, granted - 11))
		return -1;
	struct ibv_srq_attr grow = {.max_wr = 200};
	if ((rc = ibv_modify_srq(b->srq, &grow, IBV_SRQ_MAX_WR)))
		return fail(b, "modify_srq(IBV_SRQ_MAX_WR 200): %s", strerror(rc));
	if ((rc = ibv_query_srq(b->srq, &q)) || q.max_wr < 200)
		return fail(b, "query_srq after the resize: %s, max_wr %u", strerror(rc), q.max_wr);
	for (int round = 0; round < 8; round++)
		if (post_recvs(b, 8) || send_and_check(b, 8))
			return -1;
	if (send_and_check(b, 11) || post_recvs(b, 200) || send_and_check(b, 200))
		return -1;
	if (b->posted != b->sent)
		return fail(b, "posted %d receives, %d messages arrived", b->posted, b->sent);
	snprintf(b->why, sizeof(b->why), "max_wr %d -> %u with 11 receives outstanding; %d messages, every wr_id and byte checked",
		 granted, q.max_wr, b->sent);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s DEV GID_INDEX\n", argv[0]);
		return 2;
	}
	struct bed b = {0};
	int ok = run(&b, argv[1], atoi(argv[2])) == 0;
	printf("--- %s: cshim/srq_resize\n    %s\n", ok ? "PASS" : "FAIL", b.why);
	fflush(stdout);
	// Teardown in order; its errors matter less than the result above.
	if (b.receiver)
		ibv_destroy_qp(b.receiver);
	if (b.sender)
		ibv_destroy_qp(b.sender);
	if (b.srq)
		ibv_destroy_srq(b.srq);
	if (b.mr)
		ibv_dereg_mr(b.mr);
	if (b.cq_send)
		ibv_destroy_cq(b.cq_send);
	if (b.cq_recv)
		ibv_destroy_cq(b.cq_recv);
	if (b.pd)
		ibv_dealloc_pd(b.pd);
	if (b.ctx)
		ibv_close_device(b.ctx);
	return ok ? 0 : 1;
}
