// dvconsumer: an application of the usb4 DV ABI, as a GPU producer (rocSHMEM,
// RCCL's device mode) uses it, with the CPU writing the WQEs in the GPU's place.
// Written from the rules of the ABI header's comment
// (pleite-gda-8099446:userspace/usb4_rdma/usb4_rdma_dv.h), with the structs and
// constants of this project's mirror (uapi/c/usb4verbs_uapi.h); nothing of the
// module trees' own probes or tests.
//
//   dvconsumer DEV_A GID_A DEV_B GID_B [PROVIDER]
//
// An RC QP on DEV_A (host A) and its peer on DEV_B (host B) are created and
// connected through libibverbs and whichever provider it loaded (PROVIDER, when
// given, must be a substring of the provider file /proc/self/maps shows). Then,
// on A's QP, through ctx->cmd_fd and qp->handle only:
//   QUERY_CAPS; CREATE_QUEUE with SQ, CQ and doorbell pages this program
//   allocated; a second CREATE_QUEUE (EBUSY: one queue per QP) and an ordinary
//   ibv_post_send (the kernel refuses it while the queue lives); then, once
//   rung with KICK and once left to the kernel's poller: SEND, SEND_WITH_IMM,
//   RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, the three atomics where the
//   caps have them, WRITEs three times the SQ's depth (the ring wraps; tail
//   and head packing), unsignaled WRITEs before a signaled one, and a WQE of
//   a stale generation (a STALE_GEN CQE, the QP stays live); DESTROY_QUEUE once the
//   queue is drained (the consumer line says DEAD with a new generation), a
//   second one (ENOENT), and ordinary verbs on the QP again.
// Every byte that moves is compared, every CQE and receive completion checked
// field by field. One go-test-style line per case: --- PASS/FAIL/SKIP:
// dv_consumer/<case> (<why>); exit status 1 when a case failed.
//
// With DVCONSUMER_PAIRS=N it times instead N back-to-back pairs (one signaled
// 8 B RDMA WRITE from A to B, posted, then polled until its completion; the
// queue idle before each) on kernel commands (ibv_post_send, ibv_poll_cq) and
// then on its own DV queue (produce, KICK, look at the CQ ring), and prints
//   @@PAIR kc|dv NS
// the mean per pair. Through the module's C provider, which never touches DV,
// that is the module's own cost of a DV completion against a kernel-command
// one: the floor for any provider that posts through DV (issue 23).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "usb4verbs_uapi.h"

#define SQ_ENTRIES 8   // small, so that a few dozen WQEs wrap the ring
#define CQ_ENTRIES 16
#define BUF_SIZE (1 << 17)
#define WAIT_S 20 // a bound on every wait: a lost CQE fails, never hangs

typedef struct usb4v_usb4_rdma_dv_wqe dv_wqe;
typedef struct usb4v_usb4_rdma_dv_cqe dv_cqe;

static int failures;

static void result(const char *verdict, const char *name, const char *fmt, ...)
{
	char why[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
	}
	printf("--- %s: dv_consumer/%s%s%s%s\n", verdict, name, why[0] ? " (" : "", why, why[0] ? ")" : "");
	fflush(stdout);
	if (strcmp(verdict, "FAIL") == 0)
		failures++;
}

// ---- the doorbell record: 32-bit words read and written with atomics ----

// A packed head or tail word: 24-bit index, generation in the top 8 bits.
static uint32_t pack(uint32_t index, uint32_t gen)
{
	return (index & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) | (gen << USB4V_USB4_RDMA_DV_TAIL_GEN_SHIFT);
}

static uint32_t *producer_word(void *db, size_t off)
{
	return (uint32_t *)((char *)db + offsetof(struct usb4v_usb4_rdma_dv_doorbell, producer) + off);
}

static uint32_t *consumer_word(void *db, size_t off)
{
	return (uint32_t *)((char *)db + offsetof(struct usb4v_usb4_rdma_dv_doorbell, consumer) + off);
}

#define PRODUCER(db, f) producer_word(db, offsetof(struct usb4v_usb4_rdma_dv_doorbell_producer_line, f))
#define CONSUMER(db, f) consumer_word(db, offsetof(struct usb4v_usb4_rdma_dv_doorbell_consumer_line, f))

static uint32_t load_acquire(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_release(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// ---- the driver methods, as uverbs ioctls on the command fd ----

static int dv_ioctl(int fd, uint16_t method, const struct ib_uverbs_attr *attrs, uint16_t n)
{
	uint64_t buf[(sizeof(struct ib_uverbs_ioctl_hdr) + 4 * sizeof(struct ib_uverbs_attr)) / 8];
	struct ib_uverbs_ioctl_hdr *h = (struct ib_uverbs_ioctl_hdr *)buf;
	memset(buf, 0, sizeof(buf));
	h->length = (uint16_t)(sizeof(*h) + n * sizeof(struct ib_uverbs_attr));
	h->object_id = USB4V_USB4_RDMA_DV_OBJECT_DEVICE;
	h->method_id = method;
	h->num_attrs = n;
	memcpy(buf + sizeof(*h) / 8, attrs, n * sizeof(struct ib_uverbs_attr));
	return ioctl(fd, RDMA_VERBS_IOCTL, buf) ? errno : 0;
}

static struct ib_uverbs_attr attr_ptr(uint16_t id, void *p, size_t len)
{
	return (struct ib_uverbs_attr){.attr_id = id, .len = (uint16_t)len, .flags = UVERBS_ATTR_F_MANDATORY,
				       .data = (uint64_t)(uintptr_t)p};
}

static struct ib_uverbs_attr attr_obj(uint16_t id, uint32_t handle)
{
	return (struct ib_uverbs_attr){.attr_id = id, .flags = UVERBS_ATTR_F_MANDATORY, .data = handle};
}

static int query_caps(int fd, struct usb4v_usb4_rdma_dv_query_caps_resp *caps)
{
	memset(caps, 0, sizeof(*caps));
	struct ib_uverbs_attr a = attr_ptr(USB4V_USB4_RDMA_DV_ATTR_QUERY_CAPS_RESP, caps, sizeof(*caps));
	return dv_ioctl(fd, USB4V_USB4_RDMA_DV_METHOD_QUERY_CAPS, &a, 1);
}

// The queue as this program owns it: its pages and its private counters.
struct queue {
	int fd;
	uint32_t qp_handle;
	dv_wqe *sq;
	dv_cqe *cq;
	void *db;
	uint32_t gen;
	uint32_t sq_tail; // WQEs produced
	uint32_t cq_head; // CQEs consumed
	// WQEs known complete: those up to the last one whose CQE was taken
	// (CQEs come in SQ order; an unsignaled WQE is complete once a later
	// CQE is). The kernel keeps a WQE's slot until it completed, so at most
	// SQ_ENTRIES may be outstanding in that sense, not merely unconsumed.
	uint32_t done;
	uint64_t ids[SQ_ENTRIES]; // wr_id per outstanding slot
};

static int create_queue(struct queue *q, struct usb4v_usb4_rdma_dv_queue_resp *resp)
{
	struct usb4v_usb4_rdma_dv_queue_create req = {
		.abi_version = USB4V_USB4_RDMA_DV_ABI_VERSION,
		.sq_addr = (uint64_t)(uintptr_t)q->sq,
		.cq_addr = (uint64_t)(uintptr_t)q->cq,
		.doorbell_addr = (uint64_t)(uintptr_t)q->db,
		.sq_entries = SQ_ENTRIES,
		.cq_entries = CQ_ENTRIES,
		.sq_stride = sizeof(dv_wqe),
		.cq_stride = sizeof(dv_cqe),
	};
	memset(resp, 0, sizeof(*resp));
	struct ib_uverbs_attr a[3] = {
		attr_obj(USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP, q->qp_handle),
		attr_ptr(USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ, &req, sizeof(req)),
		attr_ptr(USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP, resp, sizeof(*resp)),
	};
	return dv_ioctl(q->fd, USB4V_USB4_RDMA_DV_METHOD_CREATE_QUEUE, a, 3);
}

static int destroy_queue(struct queue *q)
{
	struct ib_uverbs_attr a = attr_obj(USB4V_USB4_RDMA_DV_ATTR_DESTROY_QUEUE_QP, q->qp_handle);
	return dv_ioctl(q->fd, USB4V_USB4_RDMA_DV_METHOD_DESTROY_QUEUE, &a, 1);
}

static int kick(struct queue *q)
{
	struct usb4v_usb4_rdma_dv_kick k = {.sq_tail = pack(q->sq_tail, q->gen)};
	struct ib_uverbs_attr a[2] = {
		attr_obj(USB4V_USB4_RDMA_DV_ATTR_KICK_QP, q->qp_handle),
		attr_ptr(USB4V_USB4_RDMA_DV_ATTR_KICK_REQ, &k, sizeof(k)),
	};
	return dv_ioctl(q->fd, USB4V_USB4_RDMA_DV_METHOD_KICK, a, 2);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint32_t sq_head(struct queue *q) { return load_acquire(CONSUMER(q->db, sq_head)) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK; }

static int sq_full(const struct queue *q)
{
	return ((q->sq_tail - q->done) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) >= SQ_ENTRIES;
}

// produce writes one WQE into the next slot, which the caller made sure is
// free (!sq_full: the WQE it held completed), and publishes the new tail: the
// generation and every field first, then a release store of the packed tail.
// The caller KICKs or leaves it to the poller. 0, or a message.
static const char *produce(struct queue *q, const dv_wqe *w)
{
	if (sq_full(q))
		return "the SQ is full of outstanding WQEs";
	q->ids[q->sq_tail % SQ_ENTRIES] = w->wr_id;
	dv_wqe *slot = &q->sq[q->sq_tail % SQ_ENTRIES];
	memcpy(slot, w, sizeof(*slot));
	q->sq_tail = (q->sq_tail + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	store_release(PRODUCER(q->db, sq_tail), pack(q->sq_tail, q->gen));
	return NULL;
}

static const char no_cqe[] = "no CQE"; // wait_cqe's timeout, told apart by address

// wait_cqe waits (bounded) for the kernel's next CQE and copies it out: acquire
// cq_tail, read the CQE, release cq_head; with yield, sched_yield between empty
// looks. 0, or a message.
static const char *wait_cqe(struct queue *q, dv_cqe *out, int yield)
{
	double t0 = now_s();
	for (;;) {
		uint32_t tail = load_acquire(CONSUMER(q->db, cq_tail));
		if ((tail >> USB4V_USB4_RDMA_DV_TAIL_GEN_SHIFT) != q->gen)
			return "cq_tail carries another generation";
		if (((tail & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) - q->cq_head) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK)
			break;
		if (load_acquire(CONSUMER(q->db, qp_state)) != USB4V_USB4_RDMA_DV_QP_LIVE)
			return "consumer.qp_state left LIVE";
		if (now_s() - t0 > WAIT_S)
			return no_cqe;
		if (yield)
			sched_yield();
	}
	memcpy(out, &q->cq[q->cq_head % CQ_ENTRIES], sizeof(*out));
	q->cq_head = (q->cq_head + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
	store_release(PRODUCER(q->db, cq_head), pack(q->cq_head, q->gen));
	// Its WQE and every one before it are complete.
	for (uint32_t i = q->done; i != q->sq_tail; i = (i + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) {
		if (q->ids[i % SQ_ENTRIES] == out->wr_id) {
			q->done = (i + 1) & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
			return NULL;
		}
	}
	return "a CQE for no outstanding WQE";
}

// next_cqe is wait_cqe spinning: the consumer cases' way.
static const char *next_cqe(struct queue *q, dv_cqe *out) { return wait_cqe(q, out, 0); }

// ---- the verbs side ----

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
};

static int open_side(struct ibv_device *dev, int gid_index, struct side *s)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC;
	memset(s, 0, sizeof(*s));
	s->gid_index = gid_index;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	s->ctx = s->buf ? ibv_open_device(dev) : NULL;
	s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	if (s->cq)
		memset(s->buf, 0, BUF_SIZE);
	s->mr = s->cq ? ibv_reg_mr(s->pd, s->buf, BUF_SIZE, access) : NULL;
	// What a DV WQE carries: one SGE, no inline data.
	struct ibv_qp_init_attr qia = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	s->qp = s->mr ? ibv_create_qp(s->pd, &qia) : NULL;
	if (!s->qp || ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return errno ? errno : EIO;
	return 0;
}

static int to_rts(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
	int rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 20; // 4.3 s, as the bed's perftest runs use under TCG
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_recv(struct side *s, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(s->buf + off), .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = len ? &sge : NULL, .num_sge = len ? 1 : 0}, *bad;
	return ibv_post_recv(s->qp, &wr, &bad);
}

// poll_one waits (bounded) for one completion on the side's verbs CQ.
static const char *poll_one(struct side *s, struct ibv_wc *wc)
{
	double t0 = now_s();
	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, wc);
		if (n < 0)
			return "ibv_poll_cq failed";
		if (n == 1)
			return NULL;
		if (now_s() - t0 > WAIT_S)
			return "no completion";
	}
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

// ---- the cases ----

struct env {
	struct side a, b;
	struct queue q;
	struct usb4v_usb4_rdma_dv_query_caps_resp caps;
	int use_kick; // this round rings KICK after each publish
	char name[64];
	uint64_t wr_id;
};

static const char *name(struct env *e, const char *c)
{
	snprintf(e->name, sizeof(e->name), "%s/%s", e->use_kick ? "kick" : "poller", c);
	return e->name;
}

static dv_wqe wqe(struct env *e, uint16_t op, size_t local_off, uint32_t len)
{
	dv_wqe w;
	memset(&w, 0, sizeof(w));
	w.opcode = op;
	w.flags = USB4V_USB4_RDMA_DV_WQE_F_SIGNALED;
	w.length = len;
	w.wr_id = ++e->wr_id;
	w.local_addr = (uint64_t)(uintptr_t)(e->a.buf + local_off);
	w.lkey = e->a.mr->lkey;
	w.generation = e->q.gen;
	return w;
}

static dv_wqe wqe_remote(struct env *e, uint16_t op, size_t local_off, uint32_t len, size_t remote_off)
{
	dv_wqe w = wqe(e, op, local_off, len);
	w.remote_addr = (uint64_t)(uintptr_t)(e->b.buf + remote_off);
	w.rkey = e->b.mr->rkey;
	return w;
}

#define ANY_LEN UINT32_MAX // an error CQE's byte_len: the header does not define it

// submit publishes w, KICKs in the KICK round, and checks the CQE it must
// produce. NULL, or a message naming what differs.
static const char *submit(struct env *e, const dv_wqe *w, uint32_t want_status, uint32_t want_len, char *msg,
			  size_t msglen)
{
	const char *err = produce(&e->q, w);
	if (err)
		return err;
	if (e->use_kick) {
		int rc = kick(&e->q);
		if (rc) {
			snprintf(msg, msglen, "KICK: %s", strerror(rc));
			return msg;
		}
	}
	dv_cqe c;
	if ((err = next_cqe(&e->q, &c)))
		return err;
	if (c.wr_id != w->wr_id || c.status != want_status || c.opcode != w->opcode ||
	    (want_len != ANY_LEN && c.byte_len != want_len) ||
	    c.qp_state != USB4V_USB4_RDMA_DV_QP_LIVE) {
		snprintf(msg, msglen,
			 "CQE wr_id %" PRIu64 " status %u opcode %u byte_len %u qp_state %u; want wr_id %" PRIu64
			 " status %u opcode %u byte_len %u qp_state 0",
			 (uint64_t)c.wr_id, c.status, c.opcode, c.byte_len, c.qp_state, (uint64_t)w->wr_id, want_status,
			 w->opcode, want_len);
		return msg;
	}
	return NULL;
}

// recv_check: B's receive completion for a SEND or WRITE_WITH_IMM.
static const char *recv_check(struct env *e, uint64_t id, enum ibv_wc_opcode op, uint32_t len, int with_imm,
			      uint32_t imm_cpu, char *msg, size_t msglen)
{
	struct ibv_wc wc;
	const char *err = poll_one(&e->b, &wc);
	if (err)
		return err;
	// The module reports byte_len 0 for a WRITE_WITH_IMM's receive
	// (tests/usb4/README.md), so only a SEND's length is compared.
	int len_ok = op == IBV_WC_RECV ? wc.byte_len == len : 1;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id || wc.opcode != op || !len_ok ||
	    !!(wc.wc_flags & IBV_WC_WITH_IMM) != with_imm || (with_imm && wc.imm_data != htonl(imm_cpu))) {
		snprintf(msg, msglen,
			 "receive status %s wr_id %" PRIu64 " opcode %d byte_len %u flags 0x%x imm 0x%x; want wr_id %" PRIu64
			 " opcode %d byte_len %u imm 0x%x",
			 ibv_wc_status_str(wc.status), (uint64_t)wc.wr_id, wc.opcode, wc.byte_len, wc.wc_flags,
			 ntohl(wc.imm_data), (uint64_t)id, op, len, imm_cpu);
		return msg;
	}
	return NULL;
}

static void verdict(const char *case_name, const char *err)
{
	if (err)
		result("FAIL", case_name, "%s", err);
	else
		result("PASS", case_name, NULL);
}

static void case_send(struct env *e, int imm)
{
	char msg[384];
	const uint32_t len = 2048, imm_val = 0x12345678;
	fill(e->a.buf, len, 1 + imm + 2 * e->use_kick);
	memset(e->b.buf, 0, len);
	uint64_t rid = 100 + e->wr_id;
	const char *err = NULL;
	if (post_recv(&e->b, rid, 0, 4096))
		err = "ibv_post_recv on the peer failed";
	dv_wqe w = wqe(e, imm ? USB4V_USB4_RDMA_DV_WQE_SEND_IMM : USB4V_USB4_RDMA_DV_WQE_SEND, 0, len);
	w.imm_data = imm_val; // CPU order: the kernel converts it for the wire
	if (!err)
		err = submit(e, &w, USB4V_USB4_RDMA_DV_CQE_SUCCESS, len, msg, sizeof(msg));
	if (!err)
		err = recv_check(e, rid, IBV_WC_RECV, len, imm, imm_val, msg, sizeof(msg));
	if (!err && memcmp(e->b.buf, e->a.buf, len))
		err = "the received bytes differ";
	verdict(name(e, imm ? "send_with_imm" : "send"), err);
}

static void case_write(struct env *e, int imm)
{
	char msg[384];
	const uint32_t len = imm ? 1024 : 8192, imm_val = 0xa5a55a5a;
	const size_t loc = 4096, rem = 16384;
	fill(e->a.buf + loc, len, 7 + imm + 2 * e->use_kick);
	memset(e->b.buf + rem, 0, len + 64);
	uint64_t rid = 200 + e->wr_id;
	const char *err = NULL;
	if (imm && post_recv(&e->b, rid, 0, 0))
		err = "ibv_post_recv (no SGE) on the peer failed";
	dv_wqe w = wqe_remote(e, imm ? USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE_IMM : USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, loc,
			      len, rem);
	w.imm_data = imm_val;
	if (!err)
		err = submit(e, &w, USB4V_USB4_RDMA_DV_CQE_SUCCESS, len, msg, sizeof(msg));
	if (!err && imm)
		err = recv_check(e, rid, IBV_WC_RECV_RDMA_WITH_IMM, 0, 1, imm_val, msg, sizeof(msg));
	static const uint8_t zero[64];
	if (!err && memcmp(e->b.buf + rem, e->a.buf + loc, len))
		err = "the written bytes differ";
	if (!err && memcmp(e->b.buf + rem + len, zero, sizeof(zero)))
		err = "bytes written past the WQE's length";
	verdict(name(e, imm ? "rdma_write_with_imm" : "rdma_write"), err);
}

static void case_read(struct env *e)
{
	char msg[384];
	const uint32_t len = 6000;
	const size_t loc = 32768, rem = 40960;
	fill(e->b.buf + rem, len, 11 + e->use_kick);
	memset(e->a.buf + loc, 0, len + 64);
	dv_wqe w = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_READ, loc, len, rem);
	const char *err = submit(e, &w, USB4V_USB4_RDMA_DV_CQE_SUCCESS, len, msg, sizeof(msg));
	static const uint8_t zero[64];
	if (!err && memcmp(e->a.buf + loc, e->b.buf + rem, len))
		err = "the read bytes differ";
	if (!err && memcmp(e->a.buf + loc + len, zero, sizeof(zero)))
		err = "bytes read past the WQE's length";
	verdict(name(e, "rdma_read"), err);
}

// One atomic: the remote 8 bytes at rem, the original value returned into the
// local 8-byte slot (the header's v2 WQE rules: reserved1[0] the add or swap
// value, reserved1[1] the compare value).
static const char *atomic_one(struct env *e, uint16_t op, uint64_t v0, uint64_t v1, uint64_t want_old,
			      uint64_t want_new, char *msg, size_t msglen)
{
	const size_t loc = 60000, rem = 50000;
	uint64_t sentinel = 0xdeadbeefdeadbeefULL;
	memcpy(e->a.buf + loc, &sentinel, 8);
	dv_wqe w = wqe_remote(e, op, loc, 8, rem);
	w.reserved1[0] = v0;
	w.reserved1[1] = v1;
	const char *err = submit(e, &w, USB4V_USB4_RDMA_DV_CQE_SUCCESS, 8, msg, msglen);
	if (err)
		return err;
	uint64_t old, now;
	memcpy(&old, e->a.buf + loc, 8);
	memcpy(&now, e->b.buf + rem, 8);
	if (old != want_old || now != want_new) {
		snprintf(msg, msglen, "opcode %u: returned %" PRIu64 " (want %" PRIu64 "), remote now %" PRIu64 " (want %" PRIu64 ")",
			 op, old, want_old, now, want_new);
		return msg;
	}
	return NULL;
}

static void case_atomics(struct env *e)
{
	char msg[384];
	const uint32_t need = USB4V_USB4_RDMA_DV_CAP_ATOMIC_FETCH_ADD | USB4V_USB4_RDMA_DV_CAP_ATOMIC_SWAP |
			      USB4V_USB4_RDMA_DV_CAP_ATOMIC_CMP_SWAP;
	if ((e->caps.caps & need) != need) {
		result("SKIP", name(e, "atomics"), "caps 0x%x lack the atomics 0x%x", e->caps.caps, need);
		return;
	}
	uint64_t start = 100;
	memcpy(e->b.buf + 50000, &start, 8);
	const char *err = atomic_one(e, USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD, 23, 0, 100, 123, msg, sizeof(msg));
	if (!err)
		err = atomic_one(e, USB4V_USB4_RDMA_DV_WQE_ATOMIC_SWAP, 555, 0, 123, 555, msg, sizeof(msg));
	if (!err) // compare matches: swapped
		err = atomic_one(e, USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP, 999, 555, 555, 999, msg, sizeof(msg));
	if (!err) // compare differs: left alone
		err = atomic_one(e, USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP, 7, 1, 999, 999, msg, sizeof(msg));
	verdict(name(e, "atomics"), err);
}

// expect_cqe takes the next CQE and checks it is the successful one of wr_id.
static const char *expect_cqe(struct env *e, uint64_t wr_id, char *msg, size_t msglen)
{
	dv_cqe c;
	const char *err = next_cqe(&e->q, &c);
	if (!err && (c.wr_id != wr_id || c.status != USB4V_USB4_RDMA_DV_CQE_SUCCESS)) {
		snprintf(msg, msglen, "CQE wr_id %" PRIu64 " status %u, want wr_id %" PRIu64 " success", (uint64_t)c.wr_id,
			 c.status, wr_id);
		err = msg;
	}
	return err;
}

// Three times the SQ's depth of signaled WRITEs, each to its own 256-byte slot,
// one outstanding at a time: the ring wraps (slot = index % depth, heads and
// tails packed with the generation), every CQE in order.
static void case_ring_wraps(struct env *e)
{
	char msg[384];
	enum { N = 3 * SQ_ENTRIES, SZ = 256 };
	const size_t loc = 12288, rem = 24576;
	const char *err = NULL;
	uint64_t want[N];
	int head = 0, nwant = 0;
	fill(e->a.buf + loc, N * SZ, 13 + e->use_kick);
	memset(e->b.buf + rem, 0, N * SZ);
	for (int i = 0; i < N && !err; i++) {
		// Outstanding: the next CQE frees the slot of its WQE.
		while (!err && head < nwant)
			err = expect_cqe(e, want[head++], msg, sizeof(msg));
		if (err)
			break;
		dv_wqe w = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, loc + (size_t)i * SZ, SZ, rem + (size_t)i * SZ);
		want[nwant++] = w.wr_id;
		err = produce(&e->q, &w);
		int krc = !err && e->use_kick ? kick(&e->q) : 0;
		if (krc) {
			snprintf(msg, sizeof(msg), "KICK: %s", strerror(krc));
			err = msg;
		}
	}
	while (!err && head < nwant)
		err = expect_cqe(e, want[head++], msg, sizeof(msg));
	if (!err && memcmp(e->b.buf + rem, e->a.buf + loc, N * SZ))
		err = "the written bytes differ";
	if (!err && sq_head(&e->q) != e->q.sq_tail)
		err = "sq_head did not reach the tail";
	verdict(name(e, "writes_wrap_the_ring"), err);
}

// Unsignaled WQEs (the verbs rule: completed when a later signaled one is):
// three unsignaled WRITEs and a signaled one; exactly one CQE, the fourth's,
// and all four's bytes.
static void case_unsignaled(struct env *e)
{
	char msg[384];
	enum { N = 4, SZ = 512 };
	const size_t loc = 18432, rem = 32768;
	const char *err = NULL;
	uint64_t last = 0;
	fill(e->a.buf + loc, N * SZ, 19 + e->use_kick);
	memset(e->b.buf + rem, 0, N * SZ);
	for (int i = 0; i < N && !err; i++) {
		dv_wqe w = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, loc + (size_t)i * SZ, SZ, rem + (size_t)i * SZ);
		if (i < N - 1)
			w.flags = 0;
		last = w.wr_id;
		err = produce(&e->q, &w);
	}
	// One KICK drains the four (the header: KICK consumes everything up to
	// the tail it names).
	int krc = !err && e->use_kick ? kick(&e->q) : 0;
	if (krc) {
		snprintf(msg, sizeof(msg), "KICK: %s", strerror(krc));
		err = msg;
	}
	if (!err)
		err = expect_cqe(e, last, msg, sizeof(msg));
	if (!err && memcmp(e->b.buf + rem, e->a.buf + loc, N * SZ))
		err = "the written bytes differ";
	verdict(name(e, "unsignaled_writes_then_a_signaled_one"), err);
}

// A WQE whose embedded generation is not the queue's: the kernel answers a
// STALE_GEN CQE (signaled or not), moves sq_head past it, and the QP stays
// live: the next good WQE completes.
static void case_stale_generation(struct env *e)
{
	char msg[384];
	dv_wqe w = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, 0, 64, 1024);
	w.generation = (e->q.gen % 255) + 1; // another valid generation
	w.flags = 0;                            // unsignaled: errors complete anyway
	const char *err = submit(e, &w, USB4V_USB4_RDMA_DV_CQE_STALE_GEN, ANY_LEN, msg, sizeof(msg));
	if (!err && load_acquire(CONSUMER(e->q.db, qp_state)) != USB4V_USB4_RDMA_DV_QP_LIVE)
		err = "qp_state left LIVE after a stale WQE";
	if (!err) {
		fill(e->a.buf, 64, 17);
		dv_wqe ok = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, 0, 64, 1024);
		err = submit(e, &ok, USB4V_USB4_RDMA_DV_CQE_SUCCESS, 64, msg, sizeof(msg));
		if (!err && memcmp(e->b.buf + 1024, e->a.buf, 64))
			err = "the write after the stale WQE: bytes differ";
	}
	verdict(name(e, "stale_generation_completes_with_STALE_GEN"), err);
}

// ---- DVCONSUMER_PAIRS: the module's DV completion against its kernel commands ----

#define PAIR_WARMUP 20

static double now_ns(void) { return now_s() * 1e9; }

// pairs_kcmd: n pairs through ibv_post_send/ibv_poll_cq on A's QP, which has
// no DV queue yet. The mean ns per pair, or a negative errno.
static double pairs_kcmd(struct env *e, int n)
{
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)e->a.buf, .length = 8, .lkey = e->a.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)e->b.buf;
	wr.wr.rdma.rkey = e->b.mr->rkey;
	double t0 = 0;
	for (int i = 0; i < PAIR_WARMUP + n; i++) {
		if (i == PAIR_WARMUP)
			t0 = now_ns();
		wr.wr_id = (uint64_t)i;
		int rc = ibv_post_send(e->a.qp, &wr, &bad);
		if (rc)
			return -rc;
		struct ibv_wc wc;
		if (poll_one(&e->a, &wc) || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i)
			return -EIO;
	}
	return (now_ns() - t0) / n;
}

// pairs_dv: n pairs through A's DV queue, each produced and KICKed on an idle
// queue (latency first), its CQE awaited on the CQ ring with sched_yield
// between empty looks: the module writes the CQE from a workqueue item
// (pleite-gda-8099446:kernel/ibdev.c tbv_dv_send_complete), which a spin on
// this CPU would keep from running. The mean ns per pair, or a negative errno.
static double pairs_dv(struct env *e, int n)
{
	double t0 = 0;
	for (int i = 0; i < PAIR_WARMUP + n; i++) {
		if (i == PAIR_WARMUP)
			t0 = now_ns();
		dv_wqe w = wqe_remote(e, USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE, 0, 8, 0);
		if (produce(&e->q, &w))
			return -ENOSPC;
		int rc = kick(&e->q);
		if (rc)
			return -rc;
		dv_cqe c;
		const char *err = wait_cqe(&e->q, &c, 1);
		if (err == no_cqe)
			return -ETIMEDOUT;
		if (err || c.wr_id != w.wr_id || c.status != USB4V_USB4_RDMA_DV_CQE_SUCCESS)
			return -EIO;
	}
	return (now_ns() - t0) / n;
}

// print_pairs prints a path's "@@PAIR PATH NS" line, or its FAIL line (ns
// negative: an errno); 0, or 1 after a failure.
static int print_pairs(const char *path, double ns)
{
	if (ns < 0) {
		char case_name[32];
		snprintf(case_name, sizeof(case_name), "pairs/%s", path);
		result("FAIL", case_name, "%s", strerror((int)-ns));
		return 1;
	}
	printf("@@PAIR %s %.1f\n", path, ns);
	return 0;
}

// Which provider file served the device: the first libusb4_rdma mapping.
static void provider_file(char *out, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	snprintf(out, n, "none");
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "/");
		if (p && strstr(p, "libusb4_rdma")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(out, n, "%s", p);
			if (strstr(p, "-go.so")) // ours: the Go part names it best
				break;
		}
	}
	if (f)
		fclose(f);
}

// poller_running: 1, 0, or -1 when the module's debugfs says nothing.
static int poller_running(void)
{
	FILE *f = fopen("/sys/kernel/debug/thunderbolt_ibverbs/summary", "re");
	char line[256];
	int v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "dv_poll_running: %d", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int usage(void)
{
	fprintf(stderr, "usage: dvconsumer DEV_A GID_INDEX_A DEV_B GID_INDEX_B [PROVIDER]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6)
		return usage();
	static struct env e;
	char msg[512];
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *da = NULL, *db = NULL;
	for (int i = 0; list && i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0)
			da = list[i];
		if (strcmp(ibv_get_device_name(list[i]), argv[3]) == 0)
			db = list[i];
	}
	if (!da || !db) {
		result("FAIL", "setup", "%s or %s not listed", argv[1], argv[3]);
		return 1;
	}
	int rc = open_side(da, atoi(argv[2]), &e.a);
	if (!rc)
		rc = open_side(db, atoi(argv[4]), &e.b);
	if (!rc)
		rc = to_rts(&e.a, &e.b);
	if (!rc)
		rc = to_rts(&e.b, &e.a);
	if (rc) {
		result("FAIL", "setup", "%s", strerror(rc));
		return 1;
	}
	char prov[400];
	provider_file(prov, sizeof(prov));
	printf("provider: %s; qp %u (handle %u) on %s, peer qp %u on %s\n", prov, e.a.qp->qp_num, e.a.qp->handle,
	       argv[1], e.b.qp->qp_num, argv[3]);
	if (argc == 6 && !strstr(prov, argv[5])) {
		result("FAIL", "setup", "served by %s, not by a file matching %s", prov, argv[5]);
		return 1;
	}
	result("PASS", "setup", "%s", prov);
	const char *pairs_env = getenv("DVCONSUMER_PAIRS");
	int pairs = pairs_env ? atoi(pairs_env) : 0;
	if (pairs > 0 && print_pairs("kc", pairs_kcmd(&e, pairs)))
		return 1;

	// QUERY_CAPS: the answer describes the layout this program was written for.
	rc = query_caps(e.a.ctx->cmd_fd, &e.caps);
	const struct usb4v_usb4_rdma_dv_query_caps_resp *c = &e.caps;
	if (rc == EPROTONOSUPPORT || rc == EOPNOTSUPP || (!rc && c->caps == 0)) {
		// A tree without DV (hellas-main), or with its objects but no
		// caps (hellas-gda-v2): nothing to attach.
		result("SKIP", "query_caps", "the module offers no DV queues: %s",
		       rc ? strerror(rc) : "QUERY_CAPS answered caps 0");
		return 0;
	}
	if (rc) {
		result("FAIL", "query_caps", "%s", strerror(rc));
		return 1;
	}
	if (c->abi_version != USB4V_USB4_RDMA_DV_ABI_VERSION || c->wqe_size != sizeof(dv_wqe) ||
	    c->cqe_size != sizeof(dv_cqe) || c->doorbell_record_size != USB4V_USB4_RDMA_DV_DOORBELL_RECORD_SIZE ||
	    c->doorbell_page_size != USB4V_USB4_RDMA_DV_DOORBELL_PAGE_SIZE ||
	    c->tail_index_bits != USB4V_USB4_RDMA_DV_TAIL_INDEX_BITS ||
	    c->tail_generation_bits != USB4V_USB4_RDMA_DV_TAIL_GENERATION_BITS || c->max_sq_entries < SQ_ENTRIES ||
	    c->max_cq_entries < CQ_ENTRIES ||
	    (c->caps & (USB4V_USB4_RDMA_DV_CAP_SEND | USB4V_USB4_RDMA_DV_CAP_WRITE)) !=
		    (USB4V_USB4_RDMA_DV_CAP_SEND | USB4V_USB4_RDMA_DV_CAP_WRITE)) {
		result("FAIL", "query_caps",
		       "abi %u caps 0x%x wqe %u cqe %u doorbell %u/%u tail bits %u+%u max sq %u cq %u: not the v2 layout "
		       "with SEND and WRITE",
		       c->abi_version, c->caps, c->wqe_size, c->cqe_size, c->doorbell_record_size, c->doorbell_page_size,
		       c->tail_index_bits, c->tail_generation_bits, c->max_sq_entries, c->max_cq_entries);
		return 1;
	}
	result("PASS", "query_caps", "abi %u caps 0x%x max sq %u cq %u", c->abi_version, c->caps, c->max_sq_entries,
	       c->max_cq_entries);

	// CREATE_QUEUE with pages of ours: the SQ, the CQ and the doorbell page
	// each in separate page-aligned memory.
	struct queue *q = &e.q;
	q->fd = e.a.ctx->cmd_fd;
	q->qp_handle = e.a.qp->handle;
	q->sq = aligned_alloc(4096, 4096);
	q->cq = aligned_alloc(4096, 4096);
	q->db = aligned_alloc(4096, 4096);
	if (!q->sq || !q->cq || !q->db) {
		result("FAIL", "create_queue", "out of memory");
		return 1;
	}
	memset(q->sq, 0, 4096);
	memset(q->cq, 0, 4096);
	memset(q->db, 0, 4096);
	struct usb4v_usb4_rdma_dv_queue_resp resp;
	rc = create_queue(q, &resp);
	if (rc) {
		result("FAIL", "create_queue", "%s%s", strerror(rc),
		       rc == EBUSY ? ": the QP already has a DV queue, which this application did not attach" : "");
		return 1;
	}
	q->gen = resp.generation;
	uint32_t kgen = load_acquire(CONSUMER(q->db, generation));
	if (resp.qp_num != e.a.qp->qp_num || q->gen == 0 || q->gen > 0xff || kgen != q->gen ||
	    load_acquire(CONSUMER(q->db, sq_head)) != pack(0, q->gen) ||
	    load_acquire(CONSUMER(q->db, cq_tail)) != pack(0, q->gen) ||
	    load_acquire(CONSUMER(q->db, qp_state)) != USB4V_USB4_RDMA_DV_QP_LIVE) {
		result("FAIL", "create_queue", "resp qp_num %u generation %u; consumer line generation %u sq_head 0x%x "
					       "cq_tail 0x%x qp_state %u",
		       resp.qp_num, resp.generation, kgen, load_acquire(CONSUMER(q->db, sq_head)),
		       load_acquire(CONSUMER(q->db, cq_tail)), load_acquire(CONSUMER(q->db, qp_state)));
		return 1;
	}
	// Mirror the generation before producing anything.
	store_release(PRODUCER(q->db, generation), q->gen);
	store_release(PRODUCER(q->db, cq_head), pack(0, q->gen));
	store_release(PRODUCER(q->db, sq_tail), pack(0, q->gen));
	result("PASS", "create_queue", "generation %u", q->gen);
	if (pairs > 0)
		return print_pairs("dv", pairs_dv(&e, pairs));

	// One queue per QP: a second CREATE_QUEUE is refused.
	struct queue q2 = *q;
	q2.sq = aligned_alloc(4096, 4096);
	q2.cq = aligned_alloc(4096, 4096);
	q2.db = aligned_alloc(4096, 4096);
	rc = q2.sq && q2.cq && q2.db ? create_queue(&q2, &resp) : ENOMEM;
	if (rc == EBUSY)
		result("PASS", "second_create_queue_ebusy", NULL);
	else
		result("FAIL", "second_create_queue_ebusy", "%s", rc ? strerror(rc) : "succeeded");
	free(q2.sq);
	free(q2.cq);
	free(q2.db);

	// The QP's send queue is DV's now: an ordinary post is refused by the
	// kernel, through whichever provider.
	{
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)e.a.buf, .length = 8, .lkey = e.a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 77, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
		wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)e.b.buf;
		wr.wr.rdma.rkey = e.b.mr->rkey;
		rc = ibv_post_send(e.a.qp, &wr, &bad);
		struct ibv_wc wc;
		int got = ibv_poll_cq(e.a.cq, 1, &wc);
		if (rc == EBUSY && bad == &wr && got == 0)
			result("PASS", "post_send_while_dv_ebusy", NULL);
		else
			result("FAIL", "post_send_while_dv_ebusy", "ibv_post_send %s, bad_wr %s, %d completions",
			       rc ? strerror(rc) : "0", bad == &wr ? "the WR" : "not the WR", got);
	}

	int poller = poller_running();
	for (e.use_kick = 1; e.use_kick >= 0; e.use_kick--) {
		if (!e.use_kick && poller == 0) {
			result("SKIP", "poller", "the module's debugfs says dv_poll_running 0");
			continue;
		}
		case_send(&e, 0);
		case_send(&e, 1);
		case_write(&e, 0);
		case_write(&e, 1);
		if (e.caps.caps & USB4V_USB4_RDMA_DV_CAP_READ)
			case_read(&e);
		else
			result("SKIP", name(&e, "rdma_read"), "caps 0x%x lack READ", e.caps.caps);
		case_ring_wraps(&e);
		case_stale_generation(&e);
		case_unsignaled(&e); // last: a stuck one would hold the SQ's slots
	}

	// DESTROY_QUEUE after the queue drained: every WQE consumed, every CQE
	// taken. The consumer line then says DEAD under a new generation.
	{
		const char *err = NULL;
		double t0 = now_s();
		while (sq_head(q) != q->sq_tail && !err)
			if (now_s() - t0 > WAIT_S)
				err = "sq_head never reached the tail";
		uint32_t tail = load_acquire(CONSUMER(q->db, cq_tail));
		if (!err && tail != pack(q->cq_head, q->gen)) {
			snprintf(msg, sizeof(msg), "cq_tail 0x%x: CQEs nobody asked for (head 0x%x)", tail,
				 pack(q->cq_head, q->gen));
			err = msg;
		}
		if (!err && (rc = destroy_queue(q))) {
			snprintf(msg, sizeof(msg), "DESTROY_QUEUE: %s", strerror(rc));
			err = msg;
		}
		uint32_t g = load_acquire(CONSUMER(q->db, generation)), st = load_acquire(CONSUMER(q->db, qp_state));
		if (!err && (g == q->gen || st != USB4V_USB4_RDMA_DV_QP_DEAD)) {
			snprintf(msg, sizeof(msg), "consumer line after DESTROY_QUEUE: generation %u (was %u), qp_state %u", g,
				 q->gen, st);
			err = msg;
		}
		verdict("destroy_queue", err);
	}
	rc = destroy_queue(q);
	if (rc == ENOENT)
		result("PASS", "second_destroy_queue_enoent", NULL);
	else
		result("FAIL", "second_destroy_queue_enoent", "%s", rc ? strerror(rc) : "succeeded");

	// The QP is an ordinary one again: a SEND through libibverbs arrives.
	{
		const char *err = NULL;
		fill(e.a.buf, 512, 23);
		memset(e.b.buf, 0, 512);
		if (post_recv(&e.b, 900, 0, 512))
			err = "ibv_post_recv failed";
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)e.a.buf, .length = 512, .lkey = e.a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 901, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED}, *bad;
		if (!err && (rc = ibv_post_send(e.a.qp, &wr, &bad))) {
			snprintf(msg, sizeof(msg), "ibv_post_send: %s", strerror(rc));
			err = msg;
		}
		struct ibv_wc wc;
		if (!err && !(err = poll_one(&e.a, &wc)) && (wc.status != IBV_WC_SUCCESS || wc.wr_id != 901)) {
			snprintf(msg, sizeof(msg), "send completion %s wr_id %" PRIu64, ibv_wc_status_str(wc.status),
				 (uint64_t)wc.wr_id);
			err = msg;
		}
		if (!err && !(err = poll_one(&e.b, &wc)) && (wc.status != IBV_WC_SUCCESS || wc.wr_id != 900 ||
							     wc.byte_len != 512)) {
			snprintf(msg, sizeof(msg), "receive %s wr_id %" PRIu64 " byte_len %u", ibv_wc_status_str(wc.status),
				 (uint64_t)wc.wr_id, wc.byte_len);
			err = msg;
		}
		if (!err && memcmp(e.b.buf, e.a.buf, 512))
			err = "the received bytes differ";
		verdict("ordinary_verbs_after_destroy_queue", err);
	}

	// A second queue lifetime on the same QP (a new generation), for the
	// atomics last: on pleite-gda eca80ec the first WRITE after DV atomics
	// was never acknowledged, through every provider (tests/usb4/README.md).
	memset(q->sq, 0, 4096);
	memset(q->cq, 0, 4096);
	memset(q->db, 0, 4096);
	uint32_t old_gen = q->gen;
	q->sq_tail = q->cq_head = q->done = 0;
	rc = create_queue(q, &resp);
	if (rc || resp.generation == old_gen || load_acquire(CONSUMER(q->db, generation)) != resp.generation) {
		result("FAIL", "create_queue_again", "%s, generation %u (was %u)", rc ? strerror(rc) : "0", resp.generation,
		       old_gen);
	} else {
		q->gen = resp.generation;
		store_release(PRODUCER(q->db, generation), q->gen);
		store_release(PRODUCER(q->db, cq_head), pack(0, q->gen));
		store_release(PRODUCER(q->db, sq_tail), pack(0, q->gen));
		result("PASS", "create_queue_again", "generation %u after %u", q->gen, old_gen);
		for (e.use_kick = 1; e.use_kick >= 0; e.use_kick--)
			if (e.use_kick || poller != 0)
				case_atomics(&e);
		verdict("destroy_queue_again", (rc = destroy_queue(q)) ? strerror(rc) : NULL);
	}

	// Teardown through libibverbs: every call answers 0.
	int td = 0;
	struct side *sides[2] = {&e.a, &e.b};
	for (int i = 0; i < 2; i++) {
		struct side *s = sides[i];
		td |= ibv_destroy_qp(s->qp) | ibv_dereg_mr(s->mr) | ibv_destroy_cq(s->cq) | ibv_dealloc_pd(s->pd) |
		      ibv_close_device(s->ctx);
	}
	verdict("teardown", td ? "a destroy or close failed" : NULL);
	ibv_free_device_list(list);
	free(q->sq);
	free(q->cq);
	free(q->db);
	return failures ? 1 : 0;
}
