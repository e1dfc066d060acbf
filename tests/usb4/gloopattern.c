// gloopattern: gloo's ibverbs transport pattern between two ranks (issue 34
// part 1), our own program with its verbs sequence, so that a failure can be
// placed without gloo: through ours and through the module's C provider in
// the same boot.
//
// usage: gloopattern DEV0 GIDIDX0 DEV1 GIDIDX1 LABEL
// Rank 0 runs on DEV0, rank 1 on DEV1, each in its own process (fork before
// libibverbs is touched), bootstrapped over a socketpair as gloo's store would.
// Settings (environment):
//   GLOOPATTERN_ITERS     iterations of each collective (10)
//   GLOOPATTERN_ELEMS     int32 elements per collective (16384)
//   GLOOPATTERN_MODE      event (gloo's device thread, default) or poll (the
//                         same exchange, the device thread busy-polling the CQ:
//                         the polling pattern at the same rate)
//   GLOOPATTERN_TIMEOUT_S how long a wait may take before the rank gives up (60)
//   GLOOPATTERN_QP_TIMEOUT the RC ACK timeout exponent (14, gloo's: 4.096 us x
//                         2^14 = 67 ms; gloo has no setting for it)
//
// The pattern (facebookincubator/gloo gloo/transport/ibverbs/pair.cc, pair.h,
// device.cc; what PyTorch's ProcessGroupGloo runs through UnboundBuffer):
//   - one completion channel per device, shared by every CQ; one CQ per pair
//     of kCompletionQueueCapacity 16 entries, armed with ibv_req_notify_cq(cq, 0)
//     at creation; an RC QP with max_send_wr 8, max_recv_wr 8, one SGE each;
//     INIT with LOCAL_WRITE | REMOTE_WRITE; RTR with path_mtu 1024, a GRH with
//     hop limit 1, min_rnr_timer 20, max_dest_rd_atomic 1; RTS with timeout 14,
//     retry_cnt 7, rnr_retry 7, max_rd_atomic 1; a random PSN each way;
//   - 8 receive WRs posted before connecting, each with a memory-region "inbox"
//     as its SGE, reposted after every receive completion;
//   - recv(slot, buffer, offset, n): the receiver SENDs (SEND_WITH_IMM, imm =
//     slot, signaled) the address and rkey of buffer + offset to its peer;
//     send(slot, buffer, offset, n): the sender waits for the peer's region of
//     that slot (in order), then RDMA_WRITE_WITH_IMM (imm = slot, wr_id = slot,
//     signaled); the receiver's completion is IBV_WC_RECV_RDMA_WITH_IMM;
//   - the device thread: poll(2) on the channel's fd (non-blocking, 10 ms),
//     ibv_get_cq_event, ibv_ack_cq_events, ibv_req_notify_cq, then ibv_poll_cq
//     of 16 until it returns fewer; a completion in error ends the rank with
//     gloo's message ("Memory region send for slot N: <status>", "Send for
//     slot N", "Recv for slot N").
// Collectives, GLOOPATTERN_ITERS each, over GLOOPATTERN_ELEMS int32 values:
// allreduce ring (2 ranks: reduce-scatter then allgather, 4 chunks a half,
// slots 10 and 11), broadcast from rank 0 (4 chunks, slot 20), barrier (slot
// 30). Every element is checked after every iteration.
//
// Output: "--- PASS/FAIL: gloopattern/LABEL (<s>s)" with "    note: ..." lines,
// and "@@GLOO label=LABEL mode=M rc=R s=S coll=C" for the benchmark (S: the
// whole program, opens included; C: rank 0's collectives). Exit 0 on PASS.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	MAX_BUFFERS = 8, // gloo's kMaxBuffers
	CQ_CAP = 2 * MAX_BUFFERS,
	NSLOT = 64,
	FIFO = 32,
	CHUNKS = 4,
	SLOT_RS = 10,
	SLOT_AG = 11,
	SLOT_BC = 20,
	SLOT_BAR = 30,
};
enum { WR_MRSEND = 1, WR_WRITE = 2, WR_RECV = 3 };

struct region { // what a memory-region SEND carries
	uint64_t addr;
	uint32_t rkey, len;
	uint8_t pad[48];
};

struct boot { // bootstrap exchange
	uint32_t qpn, psn;
	union ibv_gid gid;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct rank {
	int id, gidx, sock;
	const char *devname;
	bool poll_mode;
	double timeout_s;
	int qp_timeout;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	enum ibv_mtu mtu;
	struct region *inbox, *outbox; // 8 receive regions; NSLOT*FIFO send regions
	struct ibv_mr *inbox_mr, *outbox_mr;
	unsigned outbox_next;
	// Shared with the device thread, under mu.
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct region peer[NSLOT][FIFO];
	unsigned peer_head[NSLOT], peer_tail[NSLOT];
	unsigned recvd[NSLOT], sent[NSLOT];
	unsigned outstanding; // send WRs not yet completed
	char err[256];
	bool stop;
	unsigned long events, wcs, polls;
	double last_wc;
};

static void set_err(struct rank *r, const char *fmt, ...)
{
	if (r->err[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	pthread_cond_broadcast(&r->cv);
}

static int post_recv(struct rank *r, unsigned i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)&r->inbox[i], .length = sizeof(struct region), .lkey = r->inbox_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = ((uint64_t)WR_RECV << 32) | i, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(r->qp, &wr, &bad);
}

// handle one completion, under mu.
static void handle(struct rank *r, const struct ibv_wc *wc)
{
	unsigned kind = (unsigned)(wc->wr_id >> 32), low = (unsigned)wc->wr_id;
	r->wcs++;
	r->last_wc = now_s();
	if (wc->status != IBV_WC_SUCCESS) {
		const char *what = kind == WR_MRSEND ? "Memory region send" : kind == WR_WRITE ? "Send" : "Recv";
		if (kind == WR_RECV)
			set_err(r, "%s (inbox %u): %s (vendor_err 0x%x)", what, low, ibv_wc_status_str(wc->status),
				wc->vendor_err);
		else
			set_err(r, "%s for slot %u: %s (vendor_err 0x%x)", what, low, ibv_wc_status_str(wc->status),
				wc->vendor_err);
		return;
	}
	switch (wc->opcode) {
	case IBV_WC_RECV_RDMA_WITH_IMM: {
		unsigned slot = wc->imm_data;
		if (slot < NSLOT)
			r->recvd[slot]++;
		else
			set_err(r, "Recv: immediate %u is no slot", slot);
		int rc = post_recv(r, low);
		if (rc)
			set_err(r, "ibv_post_recv: %s", strerror(rc));
		break;
	}
	case IBV_WC_RECV: {
		unsigned slot = wc->imm_data;
		if (slot >= NSLOT || r->peer_tail[slot] - r->peer_head[slot] >= FIFO) {
			set_err(r, "Memory region recv: slot %u out of range or full", slot);
			break;
		}
		r->peer[slot][r->peer_tail[slot]++ % FIFO] = r->inbox[low];
		int rc = post_recv(r, low);
		if (rc)
			set_err(r, "ibv_post_recv: %s", strerror(rc));
		break;
	}
	case IBV_WC_RDMA_WRITE:
		if (low < NSLOT)
			r->sent[low]++;
		r->outstanding--;
		break;
	case IBV_WC_SEND:
		r->outstanding--;
		break;
	default:
		set_err(r, "completion with opcode %d", wc->opcode);
	}
	pthread_cond_broadcast(&r->cv);
}

static void poll_all(struct rank *r)
{
	struct ibv_wc wc[CQ_CAP];
	for (;;) {
		int n = ibv_poll_cq(r->cq, CQ_CAP, wc);
		r->polls++;
		if (n < 0) {
			set_err(r, "ibv_poll_cq: %d", n);
			return;
		}
		for (int i = 0; i < n; i++)
			handle(r, &wc[i]);
		if (n < CQ_CAP)
			return;
	}
}

static void *device_thread(void *arg)
{
	struct rank *r = arg;
	if (r->poll_mode) {
		for (;;) {
			pthread_mutex_lock(&r->mu);
			bool stop = r->stop;
			if (!stop)
				poll_all(r);
			pthread_mutex_unlock(&r->mu);
			if (stop)
				return NULL;
		}
	}
	struct pollfd pfd = {.fd = r->ch->fd, .events = POLLIN};
	for (;;) {
		int rv;
		do {
			rv = poll(&pfd, 1, 10);
		} while ((rv == 0 && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) || (rv < 0 && errno == EINTR));
		if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) && rv == 0)
			return NULL;
		struct ibv_cq *cq;
		void *cqctx;
		if (ibv_get_cq_event(r->ch, &cq, &cqctx)) {
			if (errno == EAGAIN)
				continue;
			pthread_mutex_lock(&r->mu);
			set_err(r, "ibv_get_cq_event: %s", strerror(errno));
			pthread_mutex_unlock(&r->mu);
			return NULL;
		}
		pthread_mutex_lock(&r->mu);
		r->events++;
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			set_err(r, "ibv_req_notify_cq failed");
		poll_all(r);
		pthread_mutex_unlock(&r->mu);
	}
}

// wait_until waits under mu until *v >= want or an error or the deadline.
static int wait_until(struct rank *r, const unsigned *v, unsigned want, const char *what, unsigned slot)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += (time_t)r->timeout_s;
	while (*v < want && !r->err[0])
		if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT) {
			set_err(r, "timeout after %.0f s waiting for %s of slot %u (%u of %u)", r->timeout_s, what, slot, *v,
				want);
			break;
		}
	return r->err[0] ? -1 : 0;
}

static int wait_send_room(struct rank *r)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += (time_t)r->timeout_s;
	while (r->outstanding >= MAX_BUFFERS && !r->err[0])
		if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT) {
			set_err(r, "timeout after %.0f s waiting for a send WR to complete (%u outstanding)", r->timeout_s,
				r->outstanding);
			break;
		}
	return r->err[0] ? -1 : 0;
}

// recv_op: tell the peer where slot's next message goes (gloo Pair::recv).
static int recv_op(struct rank *r, unsigned slot, struct ibv_mr *mr, size_t off, size_t n)
{
	pthread_mutex_lock(&r->mu);
	int rc = wait_send_room(r);
	if (!rc) {
		struct region *g = &r->outbox[r->outbox_next++ % (NSLOT * FIFO)];
		*g = (struct region){.addr = (uintptr_t)mr->addr + off, .rkey = mr->rkey, .len = (uint32_t)n};
		struct ibv_sge sge = {.addr = (uintptr_t)g, .length = sizeof(*g), .lkey = r->outbox_mr->lkey};
		struct ibv_send_wr wr = {.wr_id = ((uint64_t)WR_MRSEND << 32) | slot,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED,
					 .imm_data = slot},
				   *bad;
		rc = ibv_post_send(r->qp, &wr, &bad);
		if (rc)
			set_err(r, "ibv_post_send (memory region, slot %u): %s", slot, strerror(rc));
		else
			r->outstanding++;
	}
	rc = r->err[0] ? -1 : 0;
	pthread_mutex_unlock(&r->mu);
	return rc;
}

// send_op: write into the peer's next region of slot (gloo Pair::send).
static int send_op(struct rank *r, unsigned slot, struct ibv_mr *mr, size_t off, size_t n)
{
	pthread_mutex_lock(&r->mu);
	int rc = wait_until(r, &r->peer_tail[slot], r->peer_head[slot] + 1, "the peer's memory region", slot);
	if (!rc)
		rc = wait_send_room(r);
	if (!rc) {
		struct region g = r->peer[slot][r->peer_head[slot]++ % FIFO];
		if (g.len != n) {
			set_err(r, "slot %u: the peer's region holds %u bytes, the send %zu", slot, g.len, n);
		} else {
			struct ibv_sge sge = {.addr = (uintptr_t)mr->addr + off, .length = (uint32_t)n, .lkey = mr->lkey};
			struct ibv_send_wr wr = {.wr_id = ((uint64_t)WR_WRITE << 32) | slot,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
						 .send_flags = IBV_SEND_SIGNALED,
						 .imm_data = slot,
						 .wr.rdma = {.remote_addr = g.addr, .rkey = g.rkey}},
					   *bad;
			rc = ibv_post_send(r->qp, &wr, &bad);
			if (rc)
				set_err(r, "ibv_post_send (write, slot %u): %s", slot, strerror(rc));
			else
				r->outstanding++;
		}
	}
	rc = r->err[0] ? -1 : 0;
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int wait_recv(struct rank *r, unsigned slot, unsigned want)
{
	pthread_mutex_lock(&r->mu);
	int rc = wait_until(r, &r->recvd[slot], want, "RDMA writes", slot);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int wait_sent(struct rank *r, unsigned slot, unsigned want)
{
	pthread_mutex_lock(&r->mu);
	int rc = wait_until(r, &r->sent[slot], want, "write completions", slot);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int fail(struct rank *r, const char *fmt, ...)
{
	pthread_mutex_lock(&r->mu);
	if (!r->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, sizeof(r->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->mu);
	return -1;
}

static int xfer(int fd, void *buf, size_t n, bool out)
{
	for (size_t d = 0; d < n;) {
		ssize_t k = out ? write(fd, (char *)buf + d, n - d) : read(fd, (char *)buf + d, n - d);
		if (k <= 0)
			return -1;
		d += (size_t)k;
	}
	return 0;
}

static int setup(struct rank *r)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		return fail(r, "ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; list[i] && !r->ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), r->devname))
			r->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!r->ctx)
		return fail(r, "ibv_open_device %s: %s", r->devname, strerror(errno ? errno : ENODEV));
	struct ibv_port_attr pa;
	union ibv_gid gid;
	if (ibv_query_port(r->ctx, 1, &pa) || ibv_query_gid(r->ctx, 1, r->gidx, &gid))
		return fail(r, "ibv_query_port/gid: %s", strerror(errno));
	r->mtu = pa.active_mtu < IBV_MTU_1024 ? pa.active_mtu : IBV_MTU_1024;
	if (!(r->pd = ibv_alloc_pd(r->ctx)))
		return fail(r, "ibv_alloc_pd: %s", strerror(errno));
	if (!r->poll_mode) {
		if (!(r->ch = ibv_create_comp_channel(r->ctx)))
			return fail(r, "ibv_create_comp_channel: %s", strerror(errno));
		int fl = fcntl(r->ch->fd, F_GETFL);
		if (fl < 0 || fcntl(r->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return fail(r, "fcntl O_NONBLOCK: %s", strerror(errno));
	}
	if (!(r->cq = ibv_create_cq(r->ctx, CQ_CAP, r, r->ch, 0)))
		return fail(r, "ibv_create_cq: %s", strerror(errno));
	if (!r->poll_mode && ibv_req_notify_cq(r->cq, 0))
		return fail(r, "ibv_req_notify_cq failed");
	struct ibv_qp_init_attr qa = {.send_cq = r->cq,
				      .recv_cq = r->cq,
				      .cap = {.max_send_wr = MAX_BUFFERS, .max_recv_wr = MAX_BUFFERS, .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = IBV_QPT_RC};
	if (!(r->qp = ibv_create_qp(r->pd, &qa)))
		return fail(r, "ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
	int rc = ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return fail(r, "ibv_modify_qp(INIT): %s", strerror(rc));
	r->inbox = aligned_alloc(4096, 4096);
	r->outbox = aligned_alloc(4096, sizeof(struct region) * NSLOT * FIFO);
	if (!r->inbox || !r->outbox)
		return fail(r, "out of memory");
	if (!(r->inbox_mr = ibv_reg_mr(r->pd, r->inbox, 4096, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(r->outbox_mr = ibv_reg_mr(r->pd, r->outbox, sizeof(struct region) * NSLOT * FIFO, IBV_ACCESS_LOCAL_WRITE)))
		return fail(r, "ibv_reg_mr: %s", strerror(errno));
	for (unsigned i = 0; i < MAX_BUFFERS; i++)
		if ((rc = post_recv(r, i)))
			return fail(r, "ibv_post_recv: %s", strerror(rc));

	struct boot me = {.qpn = r->qp->qp_num, .psn = (uint32_t)(rand() & 0xffffff), .gid = gid}, peer;
	if (xfer(r->sock, &me, sizeof(me), true) || xfer(r->sock, &peer, sizeof(peer), false))
		return fail(r, "bootstrap exchange failed");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = r->mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 20;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)r->gidx;
	a.ah_attr.port_num = 1;
	rc = ibv_modify_qp(r->qp, &a,
			   IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return fail(r, "ibv_modify_qp(RTR): %s", strerror(rc));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me.psn;
	a.timeout = (uint8_t)r->qp_timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	rc = ibv_modify_qp(r->qp, &a,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		return fail(r, "ibv_modify_qp(RTS): %s", strerror(rc));
	// Both QPs are in RTS before either sends.
	char c = 'r';
	if (xfer(r->sock, &c, 1, true) || xfer(r->sock, &c, 1, false))
		return fail(r, "bootstrap barrier failed");
	return 0;
}

static int check(struct rank *r, const int32_t *v, size_t n, int32_t (*want)(size_t, int), int it, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != want(i, it))
			return fail(r, "%s iteration %d: element %zu is %d, want %d", what, it, i, v[i], want(i, it));
	return 0;
}

static int32_t fill_of(size_t i, int it, int rank) { return (int32_t)((rank + 1) * (int)(i + 1) + it); }
static int32_t sum_of(size_t i, int it) { return fill_of(i, it, 0) + fill_of(i, it, 1); }
static int32_t bcast_of(size_t i, int it) { return (int32_t)(7 * (int)i - it); }

static int run(struct rank *r, int iters, size_t elems, double *t_ar, double *t_bc, double *t_bar)
{
	size_t bytes = elems * sizeof(int32_t), half = bytes / 2, chunk = half / CHUNKS, bchunk = bytes / CHUNKS;
	int32_t *data = aligned_alloc(4096, bytes), *inbox = aligned_alloc(4096, bytes), *bbuf = aligned_alloc(4096, bytes);
	int32_t *note = aligned_alloc(4096, 4096);
	if (!data || !inbox || !bbuf || !note)
		return fail(r, "out of memory");
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *dmr = ibv_reg_mr(r->pd, data, bytes, acc), *imr = ibv_reg_mr(r->pd, inbox, bytes, acc),
		      *bmr = ibv_reg_mr(r->pd, bbuf, bytes, acc), *nmr = ibv_reg_mr(r->pd, note, 4096, acc);
	if (!dmr || !imr || !bmr || !nmr)
		return fail(r, "ibv_reg_mr: %s", strerror(errno));
	size_t own = (size_t)r->id * half, other = (size_t)(1 - r->id) * half;

	double t0 = now_s();
	for (int it = 0; it < iters; it++) {
		for (size_t i = 0; i < elems; i++)
			data[i] = fill_of(i, it, r->id);
		// Reduce-scatter: the peer's contribution to my half lands in my inbox.
		for (int c = 0; c < CHUNKS; c++)
			if (recv_op(r, SLOT_RS, imr, own + (size_t)c * chunk, chunk))
				return -1;
		for (int c = 0; c < CHUNKS; c++)
			if (send_op(r, SLOT_RS, dmr, other + (size_t)c * chunk, chunk))
				return -1;
		if (wait_recv(r, SLOT_RS, (unsigned)(it + 1) * CHUNKS))
			return -1;
		for (size_t i = own / 4; i < (own + half) / 4; i++)
			data[i] += inbox[i];
		// Allgather: my reduced half into the peer's data, theirs into mine.
		if (wait_sent(r, SLOT_RS, (unsigned)(it + 1) * CHUNKS))
			return -1;
		for (int c = 0; c < CHUNKS; c++)
			if (recv_op(r, SLOT_AG, dmr, other + (size_t)c * chunk, chunk))
				return -1;
		for (int c = 0; c < CHUNKS; c++)
			if (send_op(r, SLOT_AG, dmr, own + (size_t)c * chunk, chunk))
				return -1;
		if (wait_recv(r, SLOT_AG, (unsigned)(it + 1) * CHUNKS) || wait_sent(r, SLOT_AG, (unsigned)(it + 1) * CHUNKS))
			return -1;
		if (check(r, data, elems, sum_of, it, "allreduce ring"))
			return -1;
	}
	double t1 = now_s();
	for (int it = 0; it < iters; it++) {
		if (r->id == 0) {
			for (size_t i = 0; i < elems; i++)
				data[i] = bcast_of(i, it);
			for (int c = 0; c < CHUNKS; c++)
				if (send_op(r, SLOT_BC, dmr, (size_t)c * bchunk, bchunk))
					return -1;
			if (wait_sent(r, SLOT_BC, (unsigned)(it + 1) * CHUNKS))
				return -1;
		} else {
			memset(bbuf, 0, bytes);
			for (int c = 0; c < CHUNKS; c++)
				if (recv_op(r, SLOT_BC, bmr, (size_t)c * bchunk, bchunk))
					return -1;
			if (wait_recv(r, SLOT_BC, (unsigned)(it + 1) * CHUNKS) ||
			    check(r, bbuf, elems, bcast_of, it, "broadcast"))
				return -1;
		}
	}
	double t2 = now_s();
	for (int it = 0; it < iters; it++) {
		note[1] = it;
		if (recv_op(r, SLOT_BAR, nmr, 0, 4) || send_op(r, SLOT_BAR, nmr, 4, 4) ||
		    wait_recv(r, SLOT_BAR, (unsigned)it + 1) || wait_sent(r, SLOT_BAR, (unsigned)it + 1))
			return -1;
		if (note[0] != it)
			return fail(r, "barrier iteration %d: the peer's word is %d", it, note[0]);
	}
	double t3 = now_s();
	*t_ar = t1 - t0, *t_bc = t2 - t1, *t_bar = t3 - t2;
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(imr);
	ibv_dereg_mr(bmr);
	ibv_dereg_mr(nmr);
	free(data);
	free(inbox);
	free(bbuf);
	free(note);
	return 0;
}

static char alarm_line[256];
static void on_alarm(int sig)
{
	(void)sig;
	ssize_t k = write(1, alarm_line, strlen(alarm_line));
	(void)k;
	_exit(1);
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);
	return v && *v ? strtod(v, NULL) : def;
}

// The collectives' seconds of this rank (rank 0's go into the @@GLOO line).
static double coll_s = -1;

// A rank's life; writes one result line to out (its report).
static int rank_main(struct rank *r, int iters, size_t elems, char *out, size_t outsz)
{
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	double t_ar = 0, t_bc = 0, t_bar = 0, t0 = now_s();
	int rc = setup(r);
	pthread_t th;
	bool started = false;
	if (!rc) {
		if (pthread_create(&th, NULL, device_thread, r) == 0)
			started = true;
		else
			rc = fail(r, "pthread_create failed");
	}
	if (!rc)
		rc = run(r, iters, elems, &t_ar, &t_bc, &t_bar);
	if (!rc)
		coll_s = t_ar + t_bc + t_bar;
	double total = now_s() - t0;
	// Done: wait for the peer before tearing down. Failed: close the bootstrap
	// socket, so a peer still in its exchange stops there (one in a wait ends
	// by its timeout, as gloo's other rank does).
	char c = 'D', pc = '?';
	if (rc)
		shutdown(r->sock, SHUT_RDWR);
	else if (xfer(r->sock, &c, 1, true) == 0)
		(void)xfer(r->sock, &pc, 1, false);
	if (started) {
		__atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
	}
	pthread_mutex_lock(&r->mu);
	double idle = r->last_wc > 0 ? now_s() - r->last_wc : -1;
	snprintf(out, outsz,
		 "rank%d %s: %s; allreduce %.3f s, broadcast %.3f s, barrier %.3f s, total %.3f s; events %lu, "
		 "completions %lu, polls %lu, outstanding %u, last completion %.1f s ago",
		 r->id, r->devname, rc ? r->err : "ok", t_ar, t_bc, t_bar, total, r->events, r->wcs, r->polls,
		 r->outstanding, idle);
	pthread_mutex_unlock(&r->mu);
	if (r->qp)
		ibv_destroy_qp(r->qp);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->ch)
		ibv_destroy_comp_channel(r->ch);
	if (r->ctx)
		ibv_close_device(r->ctx);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: gloopattern DEV0 GIDIDX0 DEV1 GIDIDX1 LABEL\n");
		return 2;
	}
	const char *label = argv[5];
	const char *mode = getenv("GLOOPATTERN_MODE");
	bool poll_mode = mode && !strcmp(mode, "poll");
	int iters = (int)env_num("GLOOPATTERN_ITERS", 10);
	size_t elems = (size_t)env_num("GLOOPATTERN_ELEMS", 16384);
	if (elems < 2 * CHUNKS || elems % (2 * CHUNKS)) {
		fprintf(stderr, "gloopattern: GLOOPATTERN_ELEMS must be a multiple of %d\n", 2 * CHUNKS);
		return 2;
	}
	double timeout_s = env_num("GLOOPATTERN_TIMEOUT_S", 60);
	int qp_timeout = (int)env_num("GLOOPATTERN_QP_TIMEOUT", 14);
	int sv[2], pv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(pv)) {
		perror("gloopattern: socketpair");
		return 1;
	}
	fflush(stdout);
	double t0 = now_s();
	pid_t pid = fork();
	if (pid < 0) {
		perror("gloopattern: fork");
		return 1;
	}
	int id = pid == 0 ? 1 : 0;
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	// A rank stuck inside a verb (its waits end by GLOOPATTERN_TIMEOUT_S) ends here.
	snprintf(alarm_line, sizeof(alarm_line),
		 "--- FAIL: gloopattern/%s (rank %d stuck past %.0f s, inside a verb)\n@@GLOO label=%s mode=%s rc=1 s=-1\n",
		 label, id, timeout_s * 2 + 60, label, poll_mode ? "poll" : "event");
	signal(SIGALRM, on_alarm);
	alarm((unsigned)(timeout_s * 2 + 60));
	static struct rank r;
	r = (struct rank){.id = id,
			  .devname = argv[1 + 2 * id],
			  .gidx = atoi(argv[2 + 2 * id]),
			  .sock = sv[id],
			  .poll_mode = poll_mode,
			  .timeout_s = timeout_s,
			  .qp_timeout = qp_timeout};
	close(sv[1 - id]);
	char line[768];
	int rc = rank_main(&r, iters, elems, line, sizeof(line));
	if (id == 1) {
		close(pv[0]);
		(void)xfer(pv[1], line, sizeof(line), true);
		_exit(rc);
	}
	close(pv[1]);
	char peer[768] = "rank1: no report (it died)";
	if (xfer(pv[0], peer, sizeof(peer), false))
		snprintf(peer, sizeof(peer), "rank1 %s: no report (it died)", argv[3]);
	int st = 0;
	waitpid(pid, &st, 0);
	int prc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	double s = now_s() - t0;
	bool ok = rc == 0 && prc == 0;
	printf("--- %s: gloopattern/%s (%.2fs)\n", ok ? "PASS" : "FAIL", label, s);
	printf("    note: mode=%s iters=%d elems=%zu qp_timeout=%d\n", poll_mode ? "poll" : "event", iters, elems,
	       qp_timeout);
	printf("    note: %s\n    note: %s%s\n", line, peer,
	       prc && !WIFEXITED(st) ? " (rank 1 ended by a signal)" : "");
	printf("@@GLOO label=%s mode=%s rc=%d s=%.3f coll=%.3f\n", label, poll_mode ? "poll" : "event", ok ? 0 : 1, s, coll_s);
	return ok ? 0 : 1;
}
