// In the VM (cshim/vmtest.sh): ibv_create_qp_ex with the ibv_qp_ex
// work-request API (ibv_wr_*) and memory windows, through the stock
// libibverbs, once through our provider and once through librxe in a child
// process of the same boot (RDMAV_DRIVERS=rxe, our rxe claim off). Every
// case is a row: what it returned, every completion's fields, whether every
// byte arrived. The rows of both providers must be the same, except the
// deliberate differences listed in `deliberate` below (where librxe would
// call a NULL pointer, post stale WQEs, or accept what the kernel cannot
// do); our own rows must also pass their checks. Prints go-test-style lines
// "--- PASS/FAIL: cshim/qpex/<case>" with a table row each ("    | ...").
//
//   qpex DEV GID_INDEX           compare (our provider in this process)
//   qpex --rows DEV GID_INDEX    print this process's rows only
//   qpex --usb4 DEV0 GID0 DEV1 GID1   the usb4 bed (tests/usb4/guest-smoke.sh):
//                                the cases the module's opcodes allow, A on
//                                host 0, B on host 1, each row on its own checks
//
// Two QPs (A, B) on one device, looped back over its RoCE v2 GID; a fresh
// pair per case, so an error in one case leaves nothing behind.
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/utsname.h>
#include <infiniband/verbs.h>

enum { BUF = 64 * 1024, HALF = BUF / 2, CQE = 64 };
#define QP_EX_WITH_FLUSH (1ull << 11) // IBV_QP_EX_WITH_FLUSH (v45+ headers)

static const char *errname(int e)
{
	static char neg[8][24];
	static int k;
	if (e == 0)
		return "0";
	if (e < 0) { // a provider returning -errno where rdma-core's convention is +errno
		const char *n = strerrorname_np(-e);
		char *b = neg[k++ % 8];
		snprintf(b, sizeof(neg[0]), "-%s", n ? n : "?");
		return b;
	}
	const char *n = strerrorname_np(e);
	return n ? n : "?";
}

struct row {
	char out[900];
	int ok;
};

static void add(struct row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct row *r, const char *fmt, ...)
{
	size_t l = strlen(r->out);
	va_list ap;
	va_start(ap, fmt);
	if (l < sizeof(r->out) - 1)
		vsnprintf(r->out + l, sizeof(r->out) - l, fmt, ap);
	va_end(ap);
}

// check: our own verdict on what the kernel did (a byte or field wrong).
static void check(struct row *r, int cond, const char *what)
{
	if (!cond) {
		r->ok = 0;
		add(r, " [BAD: %s]", what);
	}
}

// Side 0 holds QP A and the buffer's first half, side 1 QP B and the
// second half. On rxe both sides are one device (looped back over its GID)
// and one MR covers the whole buffer; on usb4 (--usb4) they are the two
// hosts' devices, each half registered on its own.
struct bed {
	struct ibv_context *ctx[2];
	struct ibv_pd *pd[2];
	union ibv_gid gid[2];
	int gid_index[2];
	struct ibv_mr *mr[2];
	uint8_t *buf;
	uint64_t cap_flags_ex;
	int usb4;
	uint32_t sge, recv_sge, inl; // what QPs ask for
};

#define LKA (bd->mr[0]->lkey) // A's buffer
#define RKB (bd->mr[1]->rkey) // B's buffer, remotely

struct pair {
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *xa, *xb;
	struct ibv_ah *ah; // UD: to B
	uint32_t max_send_wr, max_inline, max_send_sge;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int to_init(struct ibv_qp *qp, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (t == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    (t == IBV_QPT_RC ? IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static int to_rts(struct bed *bd, int side, struct ibv_qp *qp, enum ibv_qp_type t, uint32_t dest)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int mask = IBV_QP_STATE;
	if (t != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dest;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.dgid = bd->gid[!side];
		a.ah_attr.grh.sgid_index = (uint8_t)bd->gid_index[side];
		a.ah_attr.grh.hop_limit = 64;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (t == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	int rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static struct ibv_qp *create(struct bed *bd, int side, struct ibv_cq *cq, enum ibv_qp_type t, uint64_t ops,
			     uint32_t wr, uint32_t sge, uint32_t inl)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = t,
		.cap = {.max_send_wr = wr, .max_recv_wr = 16, .max_send_sge = sge, .max_recv_sge = bd->recv_sge, .max_inline_data = inl},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = bd->pd[side],
		.send_ops_flags = ops,
	};
	return ibv_create_qp_ex(bd->ctx[side], &ia);
}

static void pair_free(struct pair *p)
{
	if (p->ah)
		ibv_destroy_ah(p->ah);
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	if (p->cqa)
		ibv_destroy_cq(p->cqa);
	if (p->cqb)
		ibv_destroy_cq(p->cqb);
	memset(p, 0, sizeof(*p));
}

// pair_new: A and B of type t created with send_ops_flags ops, connected
// (RTS) unless connect is 0 (then both stay in RESET). 0 or an errno, with
// the step in r.
static int pair_new_sge(struct bed *bd, struct pair *p, struct row *r, enum ibv_qp_type t, uint64_t ops,
			uint32_t wr, int connect, uint32_t sge)
{
	memset(p, 0, sizeof(*p));
	p->cqa = ibv_create_cq(bd->ctx[0], CQE, NULL, NULL, 0);
	p->cqb = ibv_create_cq(bd->ctx[1], CQE, NULL, NULL, 0);
	if (!p->cqa || !p->cqb) {
		add(r, "create_cq: %s", errname(errno));
		return errno;
	}
	p->a = create(bd, 0, p->cqa, t, ops, wr, sge, bd->inl);
	p->b = p->a ? create(bd, 1, p->cqb, t, ops, wr, sge, bd->inl) : NULL;
	if (!p->b) {
		add(r, "create_qp_ex: %s", errname(errno));
		return errno;
	}
	p->xa = ibv_qp_to_qp_ex(p->a);
	p->xb = ibv_qp_to_qp_ex(p->b);
	if (!p->xa || !p->xb) {
		add(r, "ibv_qp_to_qp_ex: NULL");
		return EINVAL;
	}
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	if (ibv_query_qp(p->a, &qa, IBV_QP_CAP, &qi) == 0) {
		p->max_send_wr = qi.cap.max_send_wr;
		p->max_inline = qi.cap.max_inline_data;
		p->max_send_sge = qi.cap.max_send_sge;
	}
	if (!connect)
		return 0;
	int rc = to_init(p->a, t);
	rc = rc ? rc : to_init(p->b, t);
	rc = rc ? rc : to_rts(bd, 0, p->a, t, p->b->qp_num);
	rc = rc ? rc : to_rts(bd, 1, p->b, t, p->a->qp_num);
	if (rc) {
		add(r, "connect: %s", errname(rc));
		return rc;
	}
	if (t == IBV_QPT_UD) {
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
		aa.grh.dgid = bd->gid[1];
		aa.grh.sgid_index = (uint8_t)bd->gid_index[0];
		aa.grh.hop_limit = 64;
		p->ah = ibv_create_ah(bd->pd[0], &aa);
		if (!p->ah) {
			add(r, "create_ah: %s", errname(errno));
			return errno;
		}
	}
	return 0;
}

static int pair_new(struct bed *bd, struct pair *p, struct row *r, enum ibv_qp_type t, uint64_t ops, uint32_t wr,
		    int connect)
{
	return pair_new_sge(bd, p, r, t, ops, wr, connect, bd->sge);
}

static const char *opname(enum ibv_wc_opcode o)
{
	switch (o) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "?";
	}
}

// drain: up to n completions of cq within ms (fewer if the CQ stays empty
// that long), each added to r with every field; returns how many.
static int drain(struct row *r, const char *who, struct ibv_cq *cq, int n, int ms, const struct pair *p,
		 struct ibv_wc *out)
{
	struct ibv_wc wc[CQE];
	int got = 0;
	double deadline = now() + ms / 1000.0;
	while (got < n && now() < deadline) {
		int k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0) {
			add(r, " %s:poll=%d", who, k);
			return got;
		}
		got += k;
		if (!k)
			usleep(1000);
	}
	for (int i = 0; i < got; i++) {
		const struct ibv_wc *w = &wc[i];
		const char *qp = w->qp_num == p->a->qp_num ? "A" : w->qp_num == p->b->qp_num ? "B" : "?";
		add(r, " %s{id=%llu %s", who, (unsigned long long)w->wr_id, ibv_wc_status_str(w->status));
		if (w->status == IBV_WC_SUCCESS) {
			// Every field. imm_data only with WITH_IMM: with an
			// invalidation it is the rkey, whose index differs between
			// runs (the case compares it).
			add(r, " %s len=%u qp=%s flags=%#x", opname(w->opcode), w->byte_len, qp, w->wc_flags);
			if (w->wc_flags & IBV_WC_WITH_IMM)
				add(r, " imm=%#x", ntohl(w->imm_data));
			add(r, " src=%s pkey=%u slid=%u sl=%u dlid_bits=%u vendor_err=%u",
			    w->src_qp == p->a->qp_num ? "A" : w->src_qp == p->b->qp_num ? "B" : w->src_qp ? "?" : "0",
			    w->pkey_index, w->slid, w->sl, w->dlid_path_bits, w->vendor_err);
		} else {
			add(r, " qp=%s vendor_err=%u", qp, w->vendor_err);
		}
		add(r, "}");
		if (out)
			out[i] = *w;
	}
	if (got < n)
		add(r, " (%s: %d of %d)", who, got, n);
	return got;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

static int post_recv(struct bed *bd, struct ibv_qp *qp, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge s = {.addr = (uintptr_t)(bd->buf + off), .length = len, .lkey = bd->mr[off >= HALF]->lkey};
	struct ibv_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &w, &bad);
}

#define A(off) ((uintptr_t)(bd->buf + (off)))
#define B(off) ((uintptr_t)(bd->buf + HALF + (off)))

static const uint64_t RC_ALL = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

// What usb4 QPs ask for: the opcodes the module executes.
static const uint64_t RC_USB4 = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
				IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ;
#define RCOPS (bd->usb4 ? RC_USB4 : RC_ALL)

// ---- the cases ----

// A sends len bytes (SGE list of nsge pieces, or inline) to B; B's receive
// and every byte checked.
static void send_case_flag(struct bed *bd, struct row *r, int imm, int inl, int nsge, enum ibv_qp_type t, int inl_flag);

static void send_case(struct bed *bd, struct row *r, int imm, int inl, int nsge, enum ibv_qp_type t)
{
	send_case_flag(bd, r, imm, inl, nsge, t, inl);
}

// inl_flag: IBV_SEND_INLINE in wr_flags. ibv_wr_post(3): an inline setter
// "is identical to the IBV_SEND_INLINE flag", so the flag is not needed.
static void send_case_flag(struct bed *bd, struct row *r, int imm, int inl, int nsge, enum ibv_qp_type t, int inl_flag)
{
	struct pair p;
	uint64_t ops = t == IBV_QPT_UD ? IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM
		       : t == IBV_QPT_UC ? IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE
					 : RCOPS;
	if (pair_new_sge(bd, &p, r, t, ops, 16, 1, nsge > 1 && !inl ? 4 : bd->sge))
		goto out;
	uint32_t len = inl ? 48 : 3000, grh = t == IBV_QPT_UD ? 40 : 0;
	if (t == IBV_QPT_UD && len > 900)
		len = 900;
	memset(bd->buf, 0, BUF);
	fill(bd->buf, len, 1);
	check(r, post_recv(bd, p.b, 7, HALF, len + grh) == 0, "post_recv");
	ibv_wr_start(p.xa);
	p.xa->wr_id = 42;
	p.xa->wr_flags = IBV_SEND_SIGNALED | (inl_flag ? IBV_SEND_INLINE : 0);
	if (imm)
		ibv_wr_send_imm(p.xa, htonl(0xabcd0123));
	else
		ibv_wr_send(p.xa);
	if (t == IBV_QPT_UD)
		ibv_wr_set_ud_addr(p.xa, p.ah, p.b->qp_num, 0x11111111);
	uint8_t shadow[64];
	if (inl && nsge == 1) {
		memcpy(shadow, bd->buf, len);
		ibv_wr_set_inline_data(p.xa, shadow, len);
		memset(shadow, 0xee, sizeof(shadow)); // copied at the call: this must not travel
	} else if (inl) {
		memcpy(shadow, bd->buf, len);
		struct ibv_data_buf bl[2] = {{shadow, 20}, {shadow + 20, len - 20}};
		ibv_wr_set_inline_data_list(p.xa, 2, bl);
		memset(shadow, 0xee, sizeof(shadow));
	} else if (nsge == 1) {
		ibv_wr_set_sge(p.xa, LKA, A(0), len);
	} else {
		struct ibv_sge sl[3] = {{A(0), 1000, LKA}, {A(1000), 1000, LKA}, {A(2000), len - 2000, LKA}};
		ibv_wr_set_sge_list(p.xa, 3, sl);
	}
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	if (inl && p.max_inline < len) { // usb4: max_inline_data 0
		check(r, rc == ENOSPC, "ENOSPC for inline data beyond max_inline_data");
		drain(r, "A", p.cqa, 1, 300, &p, NULL);
		goto out;
	}
	drain(r, "A", p.cqa, 1, 5000, &p, NULL);
	drain(r, "B", p.cqb, 1, 5000, &p, NULL);
	check(r, rc == 0, "wr_complete");
	check(r, memcmp(bd->buf + HALF + grh, bd->buf, len) == 0, "bytes");
	add(r, " data=%s", memcmp(bd->buf + HALF + grh, bd->buf, len) ? "differ" : "equal");
out:
	pair_free(&p);
}

static void rdma_case(struct bed *bd, struct row *r, int op, enum ibv_qp_type t)
{
	struct pair p;
	uint64_t ops = t == IBV_QPT_UC ? IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM : RCOPS;
	if (pair_new(bd, &p, r, t, ops, 16, 1))
		goto out;
	memset(bd->buf, 0, BUF);
	uint32_t len = 5000;
	ibv_wr_start(p.xa);
	p.xa->wr_id = 5;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_RDMA_READ) {
		fill(bd->buf + HALF, len, 3);
		ibv_wr_rdma_read(p.xa, RKB, B(0));
	} else {
		fill(bd->buf, len, 4);
		if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
			check(r, post_recv(bd, p.b, 9, HALF + 8192, 16) == 0, "post_recv");
			ibv_wr_rdma_write_imm(p.xa, RKB, B(0), htonl(0x5566));
		} else {
			ibv_wr_rdma_write(p.xa, RKB, B(0));
		}
	}
	ibv_wr_set_sge(p.xa, LKA, A(0), len);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 5000, &p, NULL);
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		drain(r, "B", p.cqb, 1, 5000, &p, NULL);
	if (t == IBV_QPT_UC) // no ACK on UC: give the write time to land
		usleep(200000);
	int same = memcmp(bd->buf, bd->buf + HALF, len) == 0;
	check(r, rc == 0 && same, "bytes");
	add(r, " data=%s", same ? "equal" : "differ");
out:
	pair_free(&p);
}

static void atomic_case(struct bed *bd, struct row *r, int cas)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 16, 1))
		goto out;
	uint64_t *remote = (uint64_t *)(bd->buf + HALF + 64), *local = (uint64_t *)bd->buf;
	*remote = 1000;
	*local = 0;
	ibv_wr_start(p.xa);
	p.xa->wr_id = 8;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	if (cas)
		ibv_wr_atomic_cmp_swp(p.xa, RKB, (uintptr_t)remote, 1000, 77);
	else
		ibv_wr_atomic_fetch_add(p.xa, RKB, (uintptr_t)remote, 5);
	ibv_wr_set_sge(p.xa, LKA, (uintptr_t)local, 8);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 5000, &p, NULL);
	add(r, " remote=%llu local=%llu", (unsigned long long)*remote, (unsigned long long)*local);
	check(r, *local == 1000 && *remote == (cas ? 77u : 1005u), "atomic values");
out:
	pair_free(&p);
}

// Atomic write where the kernel has it (device_cap_flags_ex); elsewhere
// only whether create_qp_ex takes the flag.
static void atomic_write_case(struct bed *bd, struct row *r)
{
	int have = (int)((bd->cap_flags_ex >> 40) & 1); // IB_UVERBS_DEVICE_ATOMIC_WRITE (linux:include/uapi/rdma/ib_user_verbs.h)
	add(r, "kernel=%s ", have ? "has" : "lacks");
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE, 16, 1)) {
		check(r, !have, "create with ATOMIC_WRITE");
		goto out;
	}
	add(r, "create=0");
	if (!have)
		goto out;
	uint64_t *remote = (uint64_t *)(bd->buf + HALF + 64), v = 0x1122334455667788ull;
	*remote = 0;
	ibv_wr_start(p.xa);
	p.xa->wr_id = 10;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(p.xa, RKB, (uintptr_t)remote, &v);
	int rc = ibv_wr_complete(p.xa);
	add(r, " complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 5000, &p, NULL);
	add(r, " remote=%s", *remote == v ? "written" : "not written");
	check(r, *remote == v, "atomic write value");
out:
	pair_free(&p);
}

// Three WRs in one batch (send, write unsignaled, send) and one doorbell;
// a batch aborted after two builders posts nothing.
static void batch_case(struct bed *bd, struct row *r, int abort_first)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 16, 1))
		goto out;
	memset(bd->buf, 0, BUF);
	fill(bd->buf, 4096, 5);
	check(r, post_recv(bd, p.b, 1, HALF, 1024) == 0 && post_recv(bd, p.b, 2, HALF + 1024, 1024) == 0, "post_recv");
	if (abort_first) {
		ibv_wr_start(p.xa);
		p.xa->wr_id = 100;
		p.xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(p.xa);
		ibv_wr_set_sge(p.xa, LKA, A(3000), 16);
		ibv_wr_rdma_write(p.xa, RKB, B(8000));
		ibv_wr_set_sge(p.xa, LKA, A(3000), 16);
		ibv_wr_abort(p.xa);
		add(r, "aborted:");
		drain(r, "A", p.cqa, 1, 300, &p, NULL);
		drain(r, "B", p.cqb, 1, 300, &p, NULL);
		add(r, " then:");
	}
	ibv_wr_start(p.xa);
	p.xa->wr_id = 1;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(p.xa);
	ibv_wr_set_sge(p.xa, LKA, A(0), 1000);
	p.xa->wr_id = 2;
	p.xa->wr_flags = 0; // unsignaled: no completion of its own
	ibv_wr_rdma_write(p.xa, RKB, B(4096));
	ibv_wr_set_sge(p.xa, LKA, A(2000), 1000);
	p.xa->wr_id = 3;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(p.xa);
	ibv_wr_set_sge(p.xa, LKA, A(1000), 1000);
	int rc = ibv_wr_complete(p.xa);
	add(r, " complete=%s", errname(rc));
	// Two completions on A (the write is unsignaled), two receives on B;
	// a third of either would be wrong, so each drain waits for one more.
	int na = drain(r, "A", p.cqa, 3, 2000, &p, NULL);
	int nb = drain(r, "B", p.cqb, 3, 1000, &p, NULL);
	check(r, na == 2 && nb == 2, "two completions each");
	int same = !memcmp(bd->buf + HALF, bd->buf, 1000) && !memcmp(bd->buf + HALF + 1024, bd->buf + 1000, 1000) &&
		   !memcmp(bd->buf + HALF + 4096, bd->buf + 2000, 1000) && (!abort_first || bd->buf[HALF + 8000] == 0);
	check(r, rc == 0 && same, "bytes");
	add(r, " data=%s", same ? "equal" : "differ");
out:
	pair_free(&p);
}

// wr_* calls outside wr_start (ignored), then a batch of one send.
static void outside_case(struct bed *bd, struct row *r, int complete_outside)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 16, 1))
		goto out;
	memset(bd->buf, 0, BUF);
	fill(bd->buf, 64, 6);
	check(r, post_recv(bd, p.b, 1, HALF, 1024) == 0, "post_recv");
	if (complete_outside) {
		int rc = ibv_wr_complete(p.xa);
		add(r, "complete_without_start=%s", errname(rc));
		ibv_wr_abort(p.xa);
		add(r, " abort_without_start=ok");
		drain(r, "A", p.cqa, 1, 300, &p, NULL);
		goto out;
	}
	p.xa->wr_id = 66;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(p.xa); // outside wr_start
	ibv_wr_set_sge(p.xa, LKA, A(0), 64);
	ibv_wr_start(p.xa);
	p.xa->wr_id = 67;
	ibv_wr_send(p.xa);
	ibv_wr_set_sge(p.xa, LKA, A(0), 64);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 2, 1500, &p, NULL);
	drain(r, "B", p.cqb, 1, 1500, &p, NULL);
out:
	pair_free(&p);
}

// An opcode the QP was not created for (send only: RDMA READ asked).
static void opcode_case(struct bed *bd, struct row *r)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 16, 1))
		goto out;
	if (!p.xa->wr_rdma_read) {
		add(r, "wr_rdma_read=NULL (calling it would crash)");
		goto out;
	}
	ibv_wr_start(p.xa);
	p.xa->wr_id = 1;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(p.xa, RKB, B(0));
	ibv_wr_set_sge(p.xa, LKA, A(0), 64);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 300, &p, NULL);
	check(r, rc == EINVAL, "EINVAL");
out:
	pair_free(&p);
}

// The builders and setters of what neither provider builds (TSO, XRC).
static void unbuilt_case(struct bed *bd, struct row *r, int xrc)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 16, 1))
		goto out;
	if (xrc ? !p.xa->wr_set_xrc_srqn : !p.xa->wr_send_tso) {
		add(r, "%s=NULL (calling it would crash)", xrc ? "wr_set_xrc_srqn" : "wr_send_tso");
		goto out;
	}
	ibv_wr_start(p.xa);
	p.xa->wr_id = 1;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	if (xrc) {
		ibv_wr_send(p.xa);
		ibv_wr_set_xrc_srqn(p.xa, 5);
	} else {
		uint8_t hdr[64] = {0};
		ibv_wr_send_tso(p.xa, hdr, sizeof(hdr), 1000);
	}
	ibv_wr_set_sge(p.xa, LKA, A(0), 64);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 300, &p, NULL);
	check(r, rc == EINVAL, "EINVAL");
out:
	pair_free(&p);
}

// Setter errors: more SGEs than max_send_sge, an inline list beyond
// max_inline_data; a batch larger than the SQ. Nothing may be posted.
static void limit_case(struct bed *bd, struct row *r, int which)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 8, 1))
		goto out;
	check(r, post_recv(bd, p.b, 1, HALF, 4096) == 0, "post_recv");
	ibv_wr_start(p.xa);
	p.xa->wr_id = 1;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	int n = 1;
	if (which == 0) {
		struct ibv_sge sl[64];
		uint32_t k = p.max_send_sge + 1;
		for (uint32_t i = 0; i < k && i < 64; i++)
			sl[i] = (struct ibv_sge){A(i * 8), 8, LKA};
		add(r, "sges=%u/%u ", k, p.max_send_sge);
		ibv_wr_send(p.xa);
		ibv_wr_set_sge_list(p.xa, k, sl);
	} else if (which == 1) {
		static uint8_t big[8192];
		size_t half = p.max_inline / 2 + 1;
		struct ibv_data_buf bl[2] = {{big, half}, {big + half, half}};
		add(r, "inline=%zu/%u ", 2 * half, p.max_inline);
		p.xa->wr_flags |= IBV_SEND_INLINE;
		ibv_wr_send(p.xa);
		ibv_wr_set_inline_data_list(p.xa, 2, bl);
	} else {
		n = (int)p.max_send_wr + 1;
		add(r, "wrs=%d/%u ", n, p.max_send_wr);
		for (int i = 0; i < n; i++) {
			p.xa->wr_id = (uint64_t)i + 1;
			ibv_wr_rdma_write(p.xa, RKB, B(0));
			ibv_wr_set_sge(p.xa, LKA, A(0), 8);
		}
	}
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 300, &p, NULL);
	check(r, rc == ENOSPC, "ENOSPC");
out:
	pair_free(&p);
}

// Posting on a QP in RESET, and in ERR.
static void state_case(struct bed *bd, struct row *r, int err_state)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 8, err_state))
		goto out;
	if (err_state) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		check(r, ibv_modify_qp(p.a, &a, IBV_QP_STATE) == 0, "modify to ERR");
	}
	ibv_wr_start(p.xa);
	p.xa->wr_id = 3;
	p.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(p.xa);
	ibv_wr_set_sge(p.xa, LKA, A(0), 64);
	int rc = ibv_wr_complete(p.xa);
	add(r, "complete=%s", errname(rc));
	drain(r, "A", p.cqa, 1, 1000, &p, NULL);
out:
	pair_free(&p);
}

// A full RQ: one receive more than max_recv_wr (plain ibv_post_recv).
static void full_rq_case(struct bed *bd, struct row *r)
{
	struct pair p;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 8, 1))
		goto out;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	ibv_query_qp(p.b, &qa, IBV_QP_CAP, &qi);
	int rc = 0, i;
	for (i = 0; i <= (int)qi.cap.max_recv_wr && !rc; i++)
		rc = post_recv(bd, p.b, (uint64_t)i, HALF, 64);
	add(r, "posted=%d/%u post_recv=%s", rc ? i - 1 : i, qi.cap.max_recv_wr, errname(rc));
	check(r, bd->usb4 ? rc != 0 : rc == ENOMEM, "a full RQ refuses the next receive");
out:
	pair_free(&p);
}

// Memory windows. B owns a window over its half; A writes through it.
static int write_via(struct bed *bd, struct row *r, struct pair *p, uint32_t rkey, uint64_t id, const char *tag)
{
	fill(bd->buf, 256, (unsigned)id);
	memset(bd->buf + HALF, 0, 256);
	ibv_wr_start(p->xa);
	p->xa->wr_id = id;
	p->xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(p->xa, rkey, B(0));
	ibv_wr_set_sge(p->xa, LKA, A(0), 256);
	int rc = ibv_wr_complete(p->xa);
	add(r, " %s:complete=%s", tag, errname(rc));
	struct ibv_wc wc;
	int n = drain(r, "A", p->cqa, 1, 5000, p, &wc);
	int same = memcmp(bd->buf, bd->buf + HALF, 256) == 0;
	add(r, " data=%s", same ? "equal" : "untouched");
	return n == 1 && wc.status == IBV_WC_SUCCESS && same;
}

static void mw_case(struct bed *bd, struct row *r, int type, int how)
{
	struct pair p;
	struct ibv_mw *mw = NULL;
	if (pair_new(bd, &p, r, IBV_QPT_RC, RCOPS, 16, 1))
		goto out;
	mw = ibv_alloc_mw(bd->pd[1], type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	if (!mw) {
		add(r, "alloc_mw=%s", errname(errno));
		goto out;
	}
	add(r, "alloc_mw=0 type=%d", mw->type);
	struct ibv_mw_bind_info bi = {.mr = bd->mr[1], .addr = B(0), .length = 4096,
				      .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	int rc;
	if (type == 1) {
		struct ibv_mw_bind mb = {.wr_id = 50, .send_flags = IBV_SEND_SIGNALED, .bind_info = bi};
		uint32_t before = mw->rkey;
		rc = ibv_bind_mw(p.b, mw, &mb);
		add(r, " bind_mw=%s rkey_incremented=%s", errname(rc), mw->rkey == ibv_inc_rkey(before) ? "yes" : "no");
		rkey = mw->rkey;
	} else if (how == 1) { // IBV_WR_BIND_MW through ibv_post_send
		struct ibv_send_wr w = {.wr_id = 50, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
		w.bind_mw.mw = mw;
		w.bind_mw.rkey = rkey;
		w.bind_mw.bind_info = bi;
		rc = ibv_post_send(p.b, &w, &bad);
		add(r, " post_send(BIND_MW)=%s", errname(rc));
	} else {
		ibv_wr_start(p.xb);
		p.xb->wr_id = 50;
		p.xb->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(p.xb, mw, rkey, &bi);
		rc = ibv_wr_complete(p.xb);
		add(r, " wr_bind_mw=%s", errname(rc));
	}
	drain(r, "B", p.cqb, 1, 5000, &p, NULL);
	check(r, rc == 0, "bind");
	check(r, write_via(bd, r, &p, rkey, 51, "write"), "write through the window");
	if (type == 1)
		goto out;
	// Invalidate: LOCAL_INV on B (wr API or post_send), or A's SEND_WITH_INV.
	if (how == 2) {
		check(r, post_recv(bd, p.b, 60, HALF + 8192, 256) == 0, "post_recv");
		ibv_wr_start(p.xa);
		p.xa->wr_id = 52;
		p.xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send_inv(p.xa, rkey);
		ibv_wr_set_sge(p.xa, LKA, A(0), 32);
		rc = ibv_wr_complete(p.xa);
		add(r, " send_inv=%s", errname(rc));
		drain(r, "A", p.cqa, 1, 5000, &p, NULL);
		struct ibv_wc wc;
		// rxe sets the kernel's IB_WC_WITH_INVALIDATE (1 << 2), which the
		// uverbs ABI passes on verbatim and libibverbs calls
		// IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is 1 << 3. Either names it.
		if (drain(r, "B", p.cqb, 1, 5000, &p, &wc) == 1)
			check(r, (wc.wc_flags & (IBV_WC_WITH_INV | IBV_WC_IP_CSUM_OK)) && wc.invalidated_rkey == rkey,
			      "invalidated_rkey");
	} else if (how == 1) {
		struct ibv_send_wr w = {.wr_id = 53, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED}, *bad;
		w.invalidate_rkey = rkey;
		rc = ibv_post_send(p.b, &w, &bad);
		add(r, " post_send(LOCAL_INV)=%s", errname(rc));
		drain(r, "B", p.cqb, 1, 5000, &p, NULL);
	} else {
		ibv_wr_start(p.xb);
		p.xb->wr_id = 53;
		p.xb->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_local_inv(p.xb, rkey);
		rc = ibv_wr_complete(p.xb);
		add(r, " wr_local_inv=%s", errname(rc));
		drain(r, "B", p.cqb, 1, 5000, &p, NULL);
	}
	check(r, rc == 0, "invalidate");
	check(r, !write_via(bd, r, &p, rkey, 54, "after_inv"), "no access after invalidation");
out:
	if (mw) {
		rc = ibv_dealloc_mw(mw);
		add(r, " dealloc_mw=%s", errname(rc));
	}
	pair_free(&p);
}

// alloc_mw of a type alone: 3 is no type; on usb4 the module has no
// windows, so every type must fail.
static void mw_alloc_case(struct bed *bd, struct row *r, int type)
{
	struct ibv_mw *mw = ibv_alloc_mw(bd->pd[0], (enum ibv_mw_type)type);
	add(r, "alloc_mw(%d)=%s", type, mw ? "mw" : errname(errno));
	check(r, !mw == (type == 3 || bd->usb4), "alloc_mw outcome");
	if (mw)
		add(r, " dealloc_mw=%s", errname(ibv_dealloc_mw(mw)));
}

// create_qp_ex answers for flags and masks.
static void create_case(struct bed *bd, struct row *r, int which)
{
	struct ibv_cq *cq = ibv_create_cq(bd->ctx[0], 8, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = bd->pd[0],
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	switch (which) {
	case 0: ia.qp_type = IBV_QPT_UD; ia.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE; break;
	case 1: ia.qp_type = IBV_QPT_UC; ia.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ; break;
	case 2: ia.send_ops_flags |= QP_EX_WITH_FLUSH; break;
	case 3: ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS; ia.create_flags = IBV_QP_CREATE_SCATTER_FCS; break;
	case 4: ia.comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER; ia.max_tso_header = 64; break;
	case 5: ia.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_PD; break;
	case 6: ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS; break; // create_flags 0
	case 7: ia.send_ops_flags = IBV_QP_EX_WITH_TSO; break;
	case 8: ia.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD; break;
	case 9: ia.send_ops_flags |= IBV_QP_EX_WITH_BIND_MW; break;
	case 10: ia.send_ops_flags |= IBV_QP_EX_WITH_LOCAL_INV; break;
	case 11: ia.send_ops_flags |= IBV_QP_EX_WITH_SEND_WITH_INV; break;
	case 12: ia.send_ops_flags = RC_USB4; break;
	}
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp_ex(bd->ctx[0], &ia);
	int err = errno;
	add(r, "create_qp_ex=%s", qp ? "qp" : errname(err));
	// usb4: what the module does not execute is refused at create time.
	if (bd->usb4 && which >= 8 && which <= 11)
		check(r, !qp && err == EOPNOTSUPP, "EOPNOTSUPP");
	if (which == 12)
		check(r, qp != NULL, "the module's opcodes");
	if (qp)
		add(r, " to_qp_ex=%s", ibv_qp_to_qp_ex(qp) ? "yes" : "NULL");
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
}

// ---- the table of cases ----

enum { MAXCASE = 64 };
struct casedef {
	const char *name;
	void (*run)(struct bed *, struct row *, int);
	int arg;
	int usb4; // also run on the usb4 bed
};

static void c_send(struct bed *b, struct row *r, int a) { send_case(b, r, a & 1, (a >> 1) & 1, (a >> 2) ? 3 : 1, IBV_QPT_RC); }
static void c_send_inline_list(struct bed *b, struct row *r, int a) { (void)a; send_case(b, r, 0, 1, 2, IBV_QPT_RC); }
static void c_send_inline_noflag(struct bed *b, struct row *r, int a) { (void)a; send_case_flag(b, r, 0, 1, 1, IBV_QPT_RC, 0); }
static void c_uc(struct bed *b, struct row *r, int a) { if (a) rdma_case(b, r, IBV_WR_RDMA_WRITE, IBV_QPT_UC); else send_case(b, r, 1, 0, 1, IBV_QPT_UC); }
static void c_ud(struct bed *b, struct row *r, int a) { send_case(b, r, a, 0, 1, IBV_QPT_UD); }
static void c_rdma(struct bed *b, struct row *r, int a) { rdma_case(b, r, a, IBV_QPT_RC); }
static void c_atomic(struct bed *b, struct row *r, int a) { atomic_case(b, r, a); }
static void c_atomic_write(struct bed *b, struct row *r, int a) { (void)a; atomic_write_case(b, r); }
static void c_batch(struct bed *b, struct row *r, int a) { batch_case(b, r, a); }
static void c_outside(struct bed *b, struct row *r, int a) { outside_case(b, r, a); }
static void c_opcode(struct bed *b, struct row *r, int a) { (void)a; opcode_case(b, r); }
static void c_limit(struct bed *b, struct row *r, int a) { limit_case(b, r, a); }
static void c_unbuilt(struct bed *b, struct row *r, int a) { unbuilt_case(b, r, a); }
static void c_state(struct bed *b, struct row *r, int a) { state_case(b, r, a); }
static void c_full_rq(struct bed *b, struct row *r, int a) { (void)a; full_rq_case(b, r); }
static void c_mw(struct bed *b, struct row *r, int a) { mw_case(b, r, a / 10, a % 10); }
static void c_mw_alloc(struct bed *b, struct row *r, int a) { mw_alloc_case(b, r, a); }
static void c_create(struct bed *b, struct row *r, int a) { create_case(b, r, a); }

static const struct casedef cases[] = {
	{"rc_send_sge", c_send, 0, 1},
	{"rc_send_imm", c_send, 1, 1},
	{"rc_send_inline", c_send, 2, 1},
	{"rc_send_inline_list", c_send_inline_list, 0, 1},
	{"rc_send_inline_without_flag", c_send_inline_noflag, 0, 1},
	{"rc_send_sge_list", c_send, 4, 1},
	{"rc_rdma_write", c_rdma, IBV_WR_RDMA_WRITE, 1},
	{"rc_rdma_write_imm", c_rdma, IBV_WR_RDMA_WRITE_WITH_IMM, 1},
	{"rc_rdma_read", c_rdma, IBV_WR_RDMA_READ, 1},
	{"rc_atomic_cmp_swp", c_atomic, 1, 0},
	{"rc_atomic_fetch_add", c_atomic, 0, 0},
	{"rc_atomic_write", c_atomic_write, 0, 0},
	{"rc_batch_one_doorbell", c_batch, 0, 1},
	{"rc_abort_then_batch", c_batch, 1, 1},
	{"uc_send_imm", c_uc, 0, 1},
	{"uc_rdma_write", c_uc, 1, 1},
	{"ud_send", c_ud, 0, 0},
	{"ud_send_imm", c_ud, 1, 0},
	{"bad_wr_outside_start", c_outside, 0, 1},
	{"bad_complete_outside_start", c_outside, 1, 1},
	{"bad_opcode_not_in_send_ops", c_opcode, 0, 1},
	{"bad_tso_builder", c_unbuilt, 0, 1},
	{"bad_xrc_setter", c_unbuilt, 1, 1},
	{"bad_sges_over_max_send_sge", c_limit, 0, 1},
	{"bad_inline_list_too_long", c_limit, 1, 1},
	{"bad_full_sq", c_limit, 2, 1},
	{"bad_post_in_reset", c_state, 0, 1},
	{"bad_post_in_err", c_state, 1, 1},
	{"bad_full_rq", c_full_rq, 0, 1},
	{"mw1_bind_mw_write", c_mw, 10, 0},
	{"mw2_wr_bind_local_inv", c_mw, 20, 0},
	{"mw2_post_send_bind_local_inv", c_mw, 21, 0},
	{"mw2_send_with_inv", c_mw, 22, 0},
	{"mw_alloc_type1", c_mw_alloc, 1, 1},
	{"mw_alloc_type2", c_mw_alloc, 2, 1},
	{"mw_alloc_type3", c_mw_alloc, 3, 1},
	{"create_ud_rdma_write", c_create, 0, 1},
	{"create_uc_rdma_read", c_create, 1, 1},
	{"create_rc_flush", c_create, 2, 1},
	{"create_flags_scatter_fcs", c_create, 3, 1},
	{"create_max_tso_header", c_create, 4, 1},
	{"create_without_pd", c_create, 5, 1},
	{"create_flags_zero", c_create, 6, 1},
	{"create_tso", c_create, 7, 1},
	{"create_rc_atomics", c_create, 8, 1},
	{"create_rc_bind_mw", c_create, 9, 1},
	{"create_rc_local_inv", c_create, 10, 1},
	{"create_rc_send_inv", c_create, 11, 1},
	{"create_rc_module_opcodes", c_create, 12, 1},
};
enum { NCASE = sizeof(cases) / sizeof(cases[0]) };
_Static_assert((int)NCASE <= (int)MAXCASE, "case count");

// Deliberate differences: what our row of the case must contain, and
// why librxe's differs (docs/extended-verbs.md).
static const struct {
	const char *name, *ours, *why;
} deliberate[] = {
	{"bad_opcode_not_in_send_ops", "complete=EINVAL",
	 "librxe leaves the builder NULL: calling it crashes; we fill every builder and fail the batch"},
	{"bad_tso_builder", "complete=EINVAL", "librxe leaves wr_send_tso NULL: calling it crashes"},
	{"bad_xrc_setter", "complete=EINVAL", "librxe leaves wr_set_xrc_srqn NULL: calling it crashes"},
	{"bad_complete_outside_start", "complete_without_start=EINVAL",
	 "librxe publishes whatever its stale cursor covers and returns 0"},
	{"rc_send_inline_list", "complete=0 A{id=42 success SEND len=48",
	 "librxe before rdma-core v64 never sums the list's lengths (fixed by 1e8ed0aff): it sends 0 bytes"},
	{"bad_inline_list_too_long", "complete=ENOSPC",
	 "librxe before rdma-core v64 never sums the list's lengths (fixed by 1e8ed0aff): it misses the overflow"},
	{"rc_send_inline_without_flag", "success SEND len=48",
	 "librxe's inline setters leave IBV_SEND_INLINE to wr_flags, which ibv_wr_post(3) does not ask for: rxe fails the WR"},
	{"bad_full_rq", "post_recv=ENOMEM",
	 "librxe before rdma-core v40 returns -ENOMEM (fixed by 80df17ced)"},
	{"create_rc_flush", "create_qp_ex=EOPNOTSUPP", "we do not build FLUSH WRs; librxe accepts the flag"},
	{"rc_atomic_write", "kernel=lacks create_qp_ex: EOPNOTSUPP",
	 "librxe accepts the flag on kernels without atomic write (before 6.2); we probe device_cap_flags_ex"},
};

static const char *deliberate_why(const char *name, const char *ours)
{
	for (size_t i = 0; i < sizeof(deliberate) / sizeof(deliberate[0]); i++)
		if (!strcmp(deliberate[i].name, name) && strstr(ours, deliberate[i].ours))
			return deliberate[i].why;
	return NULL;
}

static struct ibv_context *open_named(const char *dev)
{
	int n = 0;
	struct ibv_context *ctx = NULL;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

// open_bed: dev1 NULL is rxe (one device for both sides).
static int open_bed(struct bed *bd, const char *dev0, int gid0, const char *dev1, int gid1)
{
	bd->usb4 = dev1 != NULL;
	// usb4: one send SGE and no inline data, so that a DV-capable tree
	// gives the QPs DV queues (provider/dataplane/doc.go); one receive SGE,
	// all the module takes.
	bd->sge = bd->usb4 ? 1 : 4;
	bd->recv_sge = bd->usb4 ? 1 : 4;
	bd->inl = bd->usb4 ? 0 : 64;
	const char *dev[2] = {dev0, dev1 ? dev1 : dev0};
	int gid[2] = {gid0, dev1 ? gid1 : gid0};
	bd->buf = aligned_alloc(4096, BUF);
	for (int s = 0; s < 2; s++) {
		if (s == 1 && !bd->usb4) {
			bd->ctx[1] = bd->ctx[0];
			bd->pd[1] = bd->pd[0];
			bd->mr[1] = bd->mr[0];
			bd->gid[1] = bd->gid[0];
			bd->gid_index[1] = bd->gid_index[0];
			break;
		}
		bd->ctx[s] = open_named(dev[s]);
		bd->pd[s] = bd->ctx[s] ? ibv_alloc_pd(bd->ctx[s]) : NULL;
		bd->gid_index[s] = gid[s];
		if (!bd->pd[s] || !bd->buf || ibv_query_gid(bd->ctx[s], 1, gid[s], &bd->gid[s]))
			return -1;
		int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		if (!bd->usb4)
			access |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;
		bd->mr[s] = ibv_reg_mr(bd->pd[s], bd->buf + (bd->usb4 ? (size_t)s * HALF : 0), bd->usb4 ? HALF : BUF, access);
		if (!bd->mr[s])
			return -1;
	}
	struct ibv_device_attr_ex ax;
	if (ibv_query_device_ex(bd->ctx[0], NULL, &ax) == 0)
		bd->cap_flags_ex = ax.device_cap_flags_ex;
	return 0;
}

// where: the kernel and the guest userland (tests/vm sets USB4VERBS_USERLAND),
// for the doc's table headers (scripts/extended-verbs-doc.sh).
static const char *where(void)
{
	static char b[200];
	struct utsname u;
	const char *ul = getenv("USB4VERBS_USERLAND");
	snprintf(b, sizeof(b), "kernel %s, userland %s", uname(&u) == 0 ? u.release : "?", ul ? ul : "?");
	return b;
}

static const char *provider_name(struct ibv_context *ctx)
{
	const char *const *ops = *(const char *const *const *)((const char *)ctx->device + 664);
	return ops ? ops[0] : "?";
}

static void run_all(struct bed *bd, struct row *rows)
{
	for (int i = 0; i < NCASE; i++) {
		rows[i].ok = 1;
		rows[i].out[0] = 0;
		if (!bd->usb4 || cases[i].usb4)
			cases[i].run(bd, &rows[i], cases[i].arg);
	}
}

// The usb4 bed: A on host 0's device, B on host 1's; no librxe to compare
// with, so each row passes on its own checks.
static int usb4_main(char **argv)
{
	struct bed bd = {0};
	const char *tree = getenv("USB4VERBS_BACKEND_TREE");
	tree = tree ? tree : "usb4";
	if (open_bed(&bd, argv[2], atoi(argv[3]), argv[4], atoi(argv[5]))) {
		printf("--- FAIL: usb4/%s/qpex/setup\n    open %s/%s: %s\n", tree, argv[2], argv[4], errname(errno));
		return 1;
	}
	static struct row rows[MAXCASE];
	run_all(&bd, rows);
	printf("--- PASS: usb4/%s/qpex/setup\n    %s/%s; %s\n", tree, argv[2], argv[4], where());
	int failures = 0;
	for (int i = 0; i < NCASE; i++) {
		if (!cases[i].usb4)
			continue;
		failures += !rows[i].ok;
		printf("--- %s: usb4/%s/qpex/%s\n", rows[i].ok ? "PASS" : "FAIL", tree, cases[i].name);
		printf("    | %s | %s |\n", cases[i].name, rows[i].out);
	}
	return failures ? 1 : 0;
}

static int rows_main(const char *dev, int gid_index)
{
	struct bed bd = {0};
	if (open_bed(&bd, dev, gid_index, NULL, 0)) {
		printf("setup failed: %s\n", errname(errno));
		return 1;
	}
	printf("provider %s\n", provider_name(bd.ctx[0]));
	static struct row rows[MAXCASE];
	run_all(&bd, rows);
	for (int i = 0; i < NCASE; i++)
		printf("row %s\t%s\n", cases[i].name, rows[i].out);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "--rows"))
		return rows_main(argv[2], atoi(argv[3]));
	if (argc == 6 && !strcmp(argv[1], "--usb4"))
		return usb4_main(argv);
	if (argc != 3) {
		fprintf(stderr, "usage: qpex DEV GID_INDEX | qpex --rows DEV GID_INDEX | qpex --usb4 DEV0 GID0 DEV1 GID1\n");
		return 2;
	}
	struct bed bd = {0};
	if (open_bed(&bd, argv[1], atoi(argv[2]), NULL, 0)) {
		printf("--- FAIL: cshim/qpex/setup\n    open %s: %s\n", argv[1], errname(errno));
		return 1;
	}
	static struct row ours[MAXCASE];
	const char *prov = provider_name(bd.ctx[0]);
	run_all(&bd, ours);

	// librxe's rows, from a child in the same boot.
	static char rxe[MAXCASE][900];
	char self[512], cmd[800], line[1200], rprov[64] = "?";
	ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[l > 0 ? l : 0] = 0;
	snprintf(cmd, sizeof(cmd), "USB4VERBS_CLAIM_RXE=0 RDMAV_DRIVERS=rxe '%s' --rows '%s' %s 2>/dev/null", self, argv[1],
		 argv[2]);
	FILE *p = popen(cmd, "r");
	int got = 0;
	while (p && fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "provider %63s", rprov) == 1)
			continue;
		char *tab = strchr(line, '\t');
		if (strncmp(line, "row ", 4) || !tab)
			continue;
		*tab = 0;
		for (int i = 0; i < NCASE; i++)
			if (!strcmp(cases[i].name, line + 4)) {
				snprintf(rxe[i], sizeof(rxe[i]), "%s", tab + 1);
				got++;
			}
	}
	int st = p ? pclose(p) : -1;
	int failures = 0;
	printf("--- %s: cshim/qpex/providers\n    ours %s, librxe child: %s, exit %d, %d rows; %s\n",
	       !strcmp(prov, "usb4_rdma") && !strcmp(rprov, "rxe") && got == NCASE ? "PASS" : "FAIL", prov, rprov, st,
	       got, where());
	if (strcmp(prov, "usb4_rdma") || strcmp(rprov, "rxe") || got != NCASE)
		failures++;
	for (int i = 0; i < NCASE; i++) {
		const char *why = strcmp(ours[i].out, rxe[i]) ? deliberate_why(cases[i].name, ours[i].out) : NULL;
		int same = !strcmp(ours[i].out, rxe[i]);
		int pass = ours[i].ok && (same || why);
		failures += !pass;
		printf("--- %s: cshim/qpex/%s\n", pass ? "PASS" : "FAIL", cases[i].name);
		printf("    | %s | %s | %s | %s |\n", cases[i].name, rxe[i][0] ? rxe[i] : "(no row)", ours[i].out,
		       same ? "same" : why ? why : "DIFFERENT");
	}
	return failures ? 1 : 0;
}
