// In the VM (cshim/lazyvm.sh): the extended CQ verbs of issue 14 through the
// stock libibverbs, run once through our provider and once through librxe in
// the same boot. Two RC QPs on one rxe device, looped back over its RoCE v2
// GID. Each case prints one canonical outcome line,
//   outcome PROVIDER CASE: <errnos, completion fields, ...>
// which the guest script compares between the two runs, and for our
// provider a verdict against what rdma-core documents,
//   --- PASS|FAIL: cqex/CASE
// (qp numbers are printed as S/R, the sending and receiving QP, so the
// outcomes of both runs compare as text).
//
//   cqex DEV GID_INDEX PROVIDER [RDEV RGID_INDEX]
//
// With RDEV the receiving QP, its CQs and SRQ are on that device, so the
// two sides can be different hosts (the usb4 bed, tests/usb4/guest-smoke.sh:
// PROVIDER usb4, where what the module lacks is expected to be refused with
// the kernel's errno: resize_cq, SRQs).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "testdev.h"

enum { MSG = 512, SLOTS = 64 };

static const char *prov;
static int judge; // print verdicts (our provider's run)
static int usb4;  // the usb4 module: no resize_cq, no SRQs, write-with-imm byte_len 0
static int failures;

// The sending side (ctx, pd, mr, gid) and the receiving side (r*): the same
// device and objects unless a second device was named.
struct bed {
	struct ibv_context *ctx, *rctx;
	struct ibv_pd *pd, *rpd;
	struct ibv_mr *mr, *rmr;
	uint8_t *sbuf, *rbuf;
	union ibv_gid gid, rgid;
	int gid_index, rgid_index;
};

struct pair {
	struct ibv_qp *s, *r;
};

static const char *ename(int e)
{
	switch (e) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOMEM: return "ENOMEM";
	case ENOSYS: return "ENOSYS";
	case EBADF: return "EBADF";
	case EIO: return "EIO";
	case EAGAIN: return "EAGAIN";
	default: {
		static char b[16];
		snprintf(b, sizeof(b), "errno%d", e);
		return b;
	}
	}
}

// out: the canonical outcome of a case, built up with add().
static char out[4096];
static void add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add(const char *fmt, ...)
{
	size_t n = strlen(out);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out + n, sizeof(out) - n, fmt, ap);
	va_end(ap);
}

static char why[512];
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
	if (why[0])
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

static void finish(const char *name)
{
	printf("outcome %s %s: %s\n", prov, name, out);
	if (judge) {
		printf("--- %s: cqex/%s\n", why[0] ? "FAIL" : "PASS", name);
		if (why[0]) {
			printf("    %s\n", why);
			failures++;
		}
	}
	fflush(stdout);
	out[0] = why[0] = 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_pair(struct bed *b, struct ibv_qp *s, struct ibv_qp *r)
{
	int rc = connect_rc(s, r->qp_num, &b->rgid, b->gid_index);
	return rc ? rc : connect_rc(r, s->qp_num, &b->gid, b->rgid_index);
}

// pair_new: sender S on scq, receiver R on rcq, connected to each other.
static int pair_new(struct bed *b, struct ibv_cq *scq, struct ibv_cq *rcq, struct pair *p)
{
	// Each QP's CQs on its own side (the sides may be different devices).
	struct ibv_qp_init_attr ia = {.send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1, .max_recv_sge = 1}};
	p->s = ibv_create_qp(b->pd, &ia);
	ia.send_cq = ia.recv_cq = rcq;
	p->r = ibv_create_qp(b->rpd, &ia);
	if (!p->s || !p->r)
		return bad("create_qp: %s", ename(errno));
	int rc = connect_pair(b, p->s, p->r);
	if (rc)
		return bad("connect: %s", ename(rc));
	return 0;
}

static void pair_free(struct pair *p)
{
	if (p->s)
		ibv_destroy_qp(p->s);
	if (p->r)
		ibv_destroy_qp(p->r);
	p->s = p->r = NULL;
}

static int post_recv(struct bed *b, struct ibv_qp *qp, uint64_t wr_id, int slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(b->rbuf + (size_t)slot * MSG), .length = MSG, .lkey = b->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *badwr = NULL;
	int rc = ibv_post_recv(qp, &wr, &badwr);
	return rc ? bad("post_recv: %s", ename(rc)) : 0;
}

// post: one signaled WR of len bytes from send slot slot, pattern-filled;
// RDMA writes go to receive slot slot.
static int post(struct bed *b, struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, int slot, uint32_t len,
		uint32_t imm)
{
	uint8_t *m = b->sbuf + (size_t)slot * MSG;
	for (uint32_t j = 0; j < len; j++)
		m[j] = (uint8_t)(wr_id * 7 + j * 13 + 1);
	struct ibv_sge sge = {.addr = (uintptr_t)m, .length = len, .lkey = b->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm)}, *badwr = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)(b->rbuf + (size_t)slot * MSG);
	wr.wr.rdma.rkey = b->rmr->rkey;
	int rc = ibv_post_send(qp, &wr, &badwr);
	return rc ? bad("post_send %llu: %s", (unsigned long long)wr_id, ename(rc)) : 0;
}

// A completion as read through the ex accessors (or ibv_poll_cq).
struct rec {
	uint64_t wr_id;
	int status, opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, wc_flags, slid, sl, dlid_path_bits;
};

static void read_ex(struct ibv_cq_ex *cq, uint64_t flags, struct rec *r)
{
	memset(r, 0, sizeof(*r));
	r->wr_id = cq->wr_id;
	r->status = cq->status;
	r->opcode = ibv_wc_read_opcode(cq);
	r->vendor_err = ibv_wc_read_vendor_err(cq);
	r->wc_flags = ibv_wc_read_wc_flags(cq);
	if (flags & IBV_WC_EX_WITH_BYTE_LEN)
		r->byte_len = ibv_wc_read_byte_len(cq);
	if (flags & IBV_WC_EX_WITH_IMM)
		r->imm = ntohl(ibv_wc_read_imm_data(cq));
	if (flags & IBV_WC_EX_WITH_QP_NUM)
		r->qp_num = ibv_wc_read_qp_num(cq);
	if (flags & IBV_WC_EX_WITH_SRC_QP)
		r->src_qp = ibv_wc_read_src_qp(cq);
	if (flags & IBV_WC_EX_WITH_SLID)
		r->slid = ibv_wc_read_slid(cq);
	if (flags & IBV_WC_EX_WITH_SL)
		r->sl = ibv_wc_read_sl(cq);
	if (flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		r->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
}

static const char *qpname(const struct pair *p, uint32_t n)
{
	static char b[4][16];
	static int i;
	if (p->s && n == p->s->qp_num)
		return "S";
	if (p->r && n == p->r->qp_num)
		return "R";
	i = (i + 1) & 3;
	snprintf(b[i], sizeof(b[i]), "%u", n);
	return b[i];
}

static void add_rec(const struct pair *p, const struct rec *r)
{
	add("{wr_id=%llu status=%s opcode=%d vendor_err=%u byte_len=%u imm=0x%x qp_num=%s src_qp=%s wc_flags=0x%x slid=%u "
	    "sl=%u dlid_path_bits=%u} ",
	    (unsigned long long)r->wr_id, ibv_wc_status_str(r->status), r->opcode, r->vendor_err, r->byte_len, r->imm,
	    qpname(p, r->qp_num), qpname(p, r->src_qp), r->wc_flags, r->slid, r->sl, r->dlid_path_bits);
}

// poll_ex: n completions through start/next/end_poll within 10 s.
static int poll_ex(struct ibv_cq_ex *cq, uint64_t flags, int n, struct rec *r)
{
	int got = 0;
	double deadline = now() + 10;
	while (got < n) {
		int rc = ibv_start_poll(cq, &(struct ibv_poll_cq_attr){0});
		if (rc == ENOENT) {
			if (now() > deadline)
				return bad("%d of %d completions after 10 s", got, n);
			continue;
		}
		if (rc)
			return bad("start_poll: %s", ename(rc));
		do
			read_ex(cq, flags, &r[got++]);
		while (got < n && (rc = ibv_next_poll(cq)) == 0);
		ibv_end_poll(cq);
		if (rc && rc != ENOENT)
			return bad("next_poll: %s", ename(rc));
	}
	return 0;
}

static struct ibv_cq_ex *cq_ex_on(struct ibv_context *ctx, int cqe, uint64_t flags, struct ibv_comp_channel *ch,
				  void *cqctx)
{
	struct ibv_cq_init_attr_ex a = {.cqe = (uint32_t)cqe, .wc_flags = flags, .channel = ch, .cq_context = cqctx};
	errno = 0;
	return ibv_create_cq_ex(ctx, &a);
}

// On the sending side.
static struct ibv_cq_ex *cq_ex(struct bed *b, int cqe, uint64_t flags, struct ibv_comp_channel *ch, void *cqctx)
{
	return cq_ex_on(b->ctx, cqe, flags, ch, cqctx);
}

static void check_bytes(struct bed *b, int slot, uint64_t wr_id, uint32_t len)
{
	const uint8_t *m = b->rbuf + (size_t)slot * MSG;
	for (uint32_t j = 0; j < len; j++)
		if (m[j] != (uint8_t)(wr_id * 7 + j * 13 + 1)) {
			bad("wr_id %llu: byte %u is 0x%02x", (unsigned long long)wr_id, j, m[j]);
			return;
		}
}

#define ALL_FLAGS                                                                                              \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |        \
	 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

// Every completion field of sends, receives, write-with-imm and writes.
static void case_fields(struct bed *b)
{
	struct ibv_cq_ex *scq = cq_ex(b, 32, ALL_FLAGS, NULL, NULL), *rcq = cq_ex_on(b->rctx, 32, ALL_FLAGS, NULL, NULL);
	struct pair p = {0};
	struct rec s[4], r[3];
	if (!scq || !rcq) {
		bad("create_cq_ex: %s", ename(errno));
		goto out;
	}
	if (pair_new(b, ibv_cq_ex_to_cq(scq), ibv_cq_ex_to_cq(rcq), &p))
		goto out;
	for (int i = 0; i < 3; i++)
		if (post_recv(b, p.r, 100 + (uint64_t)i, i))
			goto out;
	if (post(b, p.s, IBV_WR_SEND, 1, 0, 256, 0) || post(b, p.s, IBV_WR_SEND_WITH_IMM, 2, 1, 300, 0x11223344) ||
	    post(b, p.s, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 5, 128, 0x55667788) || post(b, p.s, IBV_WR_RDMA_WRITE, 4, 6, 64, 0))
		goto out;
	if (poll_ex(scq, ALL_FLAGS, 4, s) || poll_ex(rcq, ALL_FLAGS, 3, r))
		goto out;
	add("send: ");
	for (int i = 0; i < 4; i++)
		add_rec(&p, &s[i]);
	add("recv: ");
	for (int i = 0; i < 3; i++)
		add_rec(&p, &r[i]);
	static const int sop[4] = {IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE};
	for (int i = 0; i < 4; i++)
		if (s[i].wr_id != (uint64_t)i + 1 || s[i].status != IBV_WC_SUCCESS || s[i].opcode != sop[i] ||
		    s[i].qp_num != p.s->qp_num || s[i].vendor_err)
			bad("send completion %d: wr_id %llu status %d opcode %d qp_num %u", i, (unsigned long long)s[i].wr_id,
			    s[i].status, s[i].opcode, s[i].qp_num);
	static const int rop[3] = {IBV_WC_RECV, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM};
	static const uint32_t rlen[3] = {256, 300, 128}, rimm[3] = {0, 0x11223344, 0x55667788};
	for (int i = 0; i < 3; i++) {
		// The module reports byte_len 0 for a write-with-imm receive
		// (provider/dataplane TestVMRCOperations records it); rxe the length.
		uint32_t want_len = usb4 && i == 2 && r[i].byte_len == 0 ? 0 : rlen[i];
		if (r[i].wr_id != 100 + (uint64_t)i || r[i].status != IBV_WC_SUCCESS || r[i].opcode != rop[i] ||
		    r[i].byte_len != want_len || r[i].qp_num != p.r->qp_num ||
		    !!(r[i].wc_flags & IBV_WC_WITH_IMM) != (i > 0) || (i > 0 && r[i].imm != rimm[i]) || r[i].vendor_err)
			bad("receive completion %d: wr_id %llu status %d opcode %d byte_len %u qp_num %u src_qp %u "
			    "wc_flags 0x%x imm 0x%x", i, (unsigned long long)r[i].wr_id, r[i].status, r[i].opcode,
			    r[i].byte_len, r[i].qp_num, r[i].src_qp, r[i].wc_flags, r[i].imm);
	}
	check_bytes(b, 0, 1, 256);
	check_bytes(b, 1, 2, 300);
	check_bytes(b, 5, 3, 128);
	check_bytes(b, 6, 4, 64);
out:
	pair_free(&p);
	if (scq)
		add("destroy=%s ", ename(ibv_destroy_cq(ibv_cq_ex_to_cq(scq))));
	if (rcq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(rcq));
	finish("fields");
}

// Which accessors a CQ created with exactly one wc_flag has.
static void case_accessors(struct bed *b)
{
	for (int bit = -1; bit < 7; bit++) {
		uint64_t f = bit < 0 ? 0 : 1ull << bit;
		struct ibv_cq_ex *cq = cq_ex(b, 4, f, NULL, NULL);
		if (!cq) {
			add("0x%llx:%s ", (unsigned long long)f, ename(errno));
			bad("wc_flags 0x%llx: %s", (unsigned long long)f, ename(errno));
			continue;
		}
		void *acc[7] = {(void *)cq->read_byte_len, (void *)cq->read_imm_data, (void *)cq->read_qp_num,
				(void *)cq->read_src_qp, (void *)cq->read_slid, (void *)cq->read_sl,
				(void *)cq->read_dlid_path_bits};
		add("0x%llx:", (unsigned long long)f);
		for (int i = 0; i < 7; i++) {
			add("%c", acc[i] ? '1' : '0');
			if (!!acc[i] != (i == bit))
				bad("wc_flags 0x%llx: accessor %d %s", (unsigned long long)f, i, acc[i] ? "set" : "missing");
		}
		if (!cq->start_poll || !cq->next_poll || !cq->end_poll || !cq->read_opcode || !cq->read_vendor_err ||
		    !cq->read_wc_flags)
			bad("wc_flags 0x%llx: a mandatory function is missing", (unsigned long long)f);
		add(" ");
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}
	finish("accessors");
}

static void case_unsupported(struct bed *b)
{
	for (int bit = 7; bit <= 12; bit++) {
		struct ibv_cq_ex *cq = cq_ex(b, 4, 1ull << bit, NULL, NULL);
		int e = errno;
		add("bit%d=%s ", bit, cq ? "created" : ename(e));
		if (cq) {
			bad("wc_flags bit %d accepted", bit);
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
		} else if (e != EOPNOTSUPP)
			bad("wc_flags bit %d: %s, want EOPNOTSUPP", bit, ename(e));
	}
	finish("unsupported_wc_flags");
}

static void case_comp_mask(struct bed *b)
{
	struct {
		const char *name;
		uint32_t comp_mask, flags;
		int want; // 0 = created
	} t[] = {
		{"flags_ignore_overrun", IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, EOPNOTSUPP},
		{"flags_single_threaded", IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_SINGLE_THREADED, 0},
		{"pd", IBV_CQ_INIT_ATTR_MASK_PD, 0, 0},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ibv_cq_init_attr_ex a = {.cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS, .comp_mask = t[i].comp_mask,
						.flags = t[i].flags, .parent_domain = b->pd};
		errno = 0;
		struct ibv_cq_ex *cq = ibv_create_cq_ex(b->ctx, &a);
		int e = cq ? 0 : errno;
		add("%s=%s ", t[i].name, cq ? "created" : ename(e));
		if (e != t[i].want)
			bad("%s: %s, want %s", t[i].name, cq ? "created" : ename(e), ename(t[i].want));
		if (cq)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}
	finish("comp_mask");
	// A comp_mask bit nobody knows: ibv_cmd_create_cq_ex's EOPNOTSUPP.
	struct ibv_cq_init_attr_ex a = {.cqe = 4, .comp_mask = 1u << 2};
	errno = 0;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(b->ctx, &a);
	int e = cq ? 0 : errno;
	add("%s", cq ? "created" : ename(e));
	if (e != EOPNOTSUPP)
		bad("comp_mask bit 2: %s, want EOPNOTSUPP", cq ? "created" : ename(e));
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	finish("comp_mask_unknown_bit");
}

static void case_empty(struct bed *b)
{
	struct ibv_cq_ex *cq = cq_ex(b, 4, 0, NULL, NULL);
	if (!cq) {
		bad("create_cq_ex: %s", ename(errno));
		finish("start_poll_empty");
		return;
	}
	int r1 = ibv_start_poll(cq, &(struct ibv_poll_cq_attr){0});
	int e1 = errno;
	int r2 = ibv_start_poll(cq, &(struct ibv_poll_cq_attr){0});
	struct ibv_wc wc;
	int n = ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc);
	add("start_poll=%s errno=%s again=%s poll_cq=%d", ename(r1), ename(e1), ename(r2), n);
	if (r1 != ENOENT || e1 != ENOENT || r2 != ENOENT || n != 0)
		bad("%s", out);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	finish("start_poll_empty");
}

// The sequence start, next, end, start, next(ENOENT), end, start(ENOENT)
// over 3 completions, then ibv_poll_cq on the same CQ for the rest.
static void case_sequence(struct bed *b, int mixed)
{
	const char *name = mixed ? "mixed_with_poll_cq" : "next_poll_end_poll";
	struct ibv_cq_ex *scq = cq_ex(b, 32, ALL_FLAGS, NULL, NULL);
	struct ibv_cq *rcq = ibv_create_cq(b->rctx, 32, NULL, NULL, 0);
	struct pair p = {0};
	struct ibv_wc wc[8];
	if (!scq || !rcq) {
		bad("create: %s", ename(errno));
		goto out;
	}
	if (pair_new(b, ibv_cq_ex_to_cq(scq), rcq, &p))
		goto out;
	for (int i = 0; i < 4; i++)
		if (post_recv(b, p.r, 100 + (uint64_t)i, i) || post(b, p.s, IBV_WR_SEND, 1 + (uint64_t)i, i, 32, 0))
			goto out;
	int got = 0;
	double deadline = now() + 10;
	while (got < 4 && now() < deadline) {
		int k = ibv_poll_cq(rcq, 4 - got, wc);
		got += k > 0 ? k : 0;
	}
	if (got != 4) {
		bad("%d of 4 receives", got);
		goto out;
	}
	// The receiver has all 4: the acks, and so the 4 send completions,
	// follow within a moment.
	struct timespec ts = {0, 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	struct ibv_poll_cq_attr pa = {0};
	int rc = ibv_start_poll(scq, &pa);
	add("start=%s:%llu ", ename(rc), rc ? 0ull : (unsigned long long)scq->wr_id);
	if (mixed) {
		ibv_end_poll(scq);
		int n = ibv_poll_cq(ibv_cq_ex_to_cq(scq), 8, wc);
		add("poll_cq=%d:", n);
		for (int i = 0; i < n; i++)
			add("%llu/%s,", (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
		rc = ibv_start_poll(scq, &pa);
		add(" start=%s", ename(rc));
		if (!rc)
			ibv_end_poll(scq);
		if (n != 3 || wc[0].wr_id != 2 || wc[1].wr_id != 3 || wc[2].wr_id != 4 || rc != ENOENT)
			bad("%s", out);
		goto out;
	}
	int rc2 = rc ? rc : ibv_next_poll(scq);
	add("next=%s:%llu ", ename(rc2), rc2 ? 0ull : (unsigned long long)scq->wr_id);
	if (!rc)
		ibv_end_poll(scq);
	int rc3 = ibv_start_poll(scq, &pa);
	add("start=%s:%llu ", ename(rc3), rc3 ? 0ull : (unsigned long long)scq->wr_id);
	int rc4 = rc3 ? rc3 : ibv_next_poll(scq);
	add("next=%s:%llu ", ename(rc4), rc4 ? 0ull : (unsigned long long)scq->wr_id);
	int rc5 = rc4 ? rc4 : ibv_next_poll(scq);
	add("next=%s ", ename(rc5));
	if (!rc3)
		ibv_end_poll(scq);
	int rc6 = ibv_start_poll(scq, &pa);
	add("start=%s", ename(rc6));
	if (!rc6)
		add(":%llu/%s", (unsigned long long)scq->wr_id, ibv_wc_status_str(scq->status));
	if (!rc6)
		ibv_end_poll(scq);
	if (strcmp(out, "start=0:1 next=0:2 start=0:3 next=0:4 next=ENOENT start=ENOENT") != 0)
		bad("sequence %s", out);
out:
	pair_free(&p);
	if (scq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(scq));
	if (rcq)
		ibv_destroy_cq(rcq);
	finish(name);
}

// A CQ ex bound to a completion channel: armed, an event on the channel
// naming it and its cq_context, then polled through start_poll.
static void case_channel(struct bed *b)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b->rctx);
	struct ibv_cq_ex *rcq = ch ? cq_ex_on(b->rctx, 8, ALL_FLAGS, ch, (void *)0xfeed) : NULL;
	struct ibv_cq *scq = ibv_create_cq(b->ctx, 8, NULL, NULL, 0);
	struct pair p = {0};
	if (!ch || !rcq || !scq) {
		bad("create: %s", ename(errno));
		goto out;
	}
	if (pair_new(b, scq, ibv_cq_ex_to_cq(rcq), &p))
		goto out;
	int rc = ibv_req_notify_cq(ibv_cq_ex_to_cq(rcq), 0);
	add("req_notify=%s ", ename(rc));
	if (post_recv(b, p.r, 7, 0) || post(b, p.s, IBV_WR_SEND, 8, 0, 64, 0))
		goto out;
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	int pr = poll(&pfd, 1, 10000);
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	int gr = pr == 1 ? ibv_get_cq_event(ch, &ev_cq, &ev_ctx) : -1;
	add("event=%s cq=%s cq_context=%s ", gr == 0 ? "yes" : "no", ev_cq == ibv_cq_ex_to_cq(rcq) ? "ours" : "other",
	    ev_ctx == (void *)0xfeed ? "0xfeed" : "other");
	if (gr == 0)
		ibv_ack_cq_events(ev_cq, 1);
	struct rec r;
	if (!poll_ex(rcq, ALL_FLAGS, 1, &r))
		add_rec(&p, &r);
	if (gr != 0 || ev_cq != ibv_cq_ex_to_cq(rcq) || ev_ctx != (void *)0xfeed || r.wr_id != 7 ||
	    r.status != IBV_WC_SUCCESS || r.byte_len != 64)
		bad("%s", out);
	check_bytes(b, 0, 8, 64);
out:
	pair_free(&p);
	if (rcq)
		add("destroy_cq=%s ", ename(ibv_destroy_cq(ibv_cq_ex_to_cq(rcq))));
	if (scq)
		ibv_destroy_cq(scq);
	if (ch)
		add("destroy_channel=%s", ename(ibv_destroy_comp_channel(ch)));
	finish("channel");
}

// resize_cq with completions outstanding: grow (the ring moves; every
// completion still polls, in order) and shrink below the outstanding count.
static void case_resize(struct bed *b, int shrink)
{
	const char *name = shrink ? "resize_below_outstanding" : "resize_grow";
	struct ibv_cq_ex *scq = cq_ex(b, 16, ALL_FLAGS, NULL, NULL);
	struct ibv_cq *rcq = ibv_create_cq(b->rctx, 32, NULL, NULL, 0);
	struct pair p = {0};
	struct ibv_wc wc[16];
	if (!scq || !rcq) {
		bad("create: %s", ename(errno));
		goto out;
	}
	if (pair_new(b, ibv_cq_ex_to_cq(scq), rcq, &p))
		goto out;
	for (int i = 0; i < 10; i++)
		if (post_recv(b, p.r, 100 + (uint64_t)i, i) || post(b, p.s, IBV_WR_SEND, 1 + (uint64_t)i, i, 16, 0))
			goto out;
	int got = 0;
	double deadline = now() + 10;
	while (got < 10 && now() < deadline) {
		int k = ibv_poll_cq(rcq, 10 - got, wc);
		got += k > 0 ? k : 0;
	}
	struct timespec ts = {0, 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	int before = ibv_cq_ex_to_cq(scq)->cqe;
	int rc = ibv_resize_cq(ibv_cq_ex_to_cq(scq), shrink ? 4 : 100);
	int after = ibv_cq_ex_to_cq(scq)->cqe;
	add("resize=%s cqe_grew=%s ", ename(rc), after > before ? "yes" : "no");
	int total = 10;
	if (!shrink && !rc) {
		for (int i = 10; i < 14; i++)
			if (post_recv(b, p.r, 100 + (uint64_t)i, i) || post(b, p.s, IBV_WR_SEND, 1 + (uint64_t)i, i, 16, 0))
				goto out;
		total = 14;
	}
	struct rec r[16];
	if (poll_ex(scq, ALL_FLAGS, total, r))
		goto out;
	add("polled:");
	for (int i = 0; i < total; i++) {
		add("%llu/%s,", (unsigned long long)r[i].wr_id, ibv_wc_status_str(r[i].status));
		if (r[i].wr_id != (uint64_t)i + 1 || r[i].status != IBV_WC_SUCCESS)
			bad("completion %d: wr_id %llu status %d", i, (unsigned long long)r[i].wr_id, r[i].status);
	}
	int e = ibv_start_poll(scq, &(struct ibv_poll_cq_attr){0});
	add(" then=%s", ename(e));
	if (!e)
		ibv_end_poll(scq);
	if (usb4 ? rc != EOPNOTSUPP : shrink ? rc != EINVAL : (rc != 0 || after < 100))
		bad("resize to %d: %s, cqe %d -> %d", shrink ? 4 : 100, ename(rc), before, after);
out:
	pair_free(&p);
	if (scq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(scq));
	if (rcq)
		ibv_destroy_cq(rcq);
	finish(name);
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
	return h;
}

// query_device_ex through the op itself at the attr_size of older and
// newer libibverbs: every byte within attr_size (a hash per size; the
// extended members in full), none past it, and input->comp_mask refused.
static void case_query_device_ex(struct bed *b)
{
	struct verbs_context *vctx = verbs_get_ctx_op(b->ctx, query_device_ex);
	if (!vctx) {
		bad("no query_device_ex op");
		finish("query_device_ex");
		return;
	}
	static const size_t sizes[] = {232, 248, 264, 300, 368, 396, sizeof(struct ibv_device_attr_ex)};
	uint8_t buf[sizeof(struct ibv_device_attr_ex) + 64];
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(buf, 0xa5, sizeof(buf));
		int rc = vctx->query_device_ex(b->ctx, NULL, (struct ibv_device_attr_ex *)buf, sizes[i]);
		size_t past = 0;
		for (size_t j = sizes[i]; j < sizeof(buf); j++)
			past += buf[j] != 0xa5;
		add("%zu:%s:%016llx ", sizes[i], ename(rc), (unsigned long long)fnv(buf, sizes[i]));
		if (rc || past)
			bad("attr_size %zu: %s, %zu bytes written past it", sizes[i], ename(rc), past);
	}
	struct ibv_device_attr_ex *a = (struct ibv_device_attr_ex *)buf;
	add("cap_flags_ex=0x%llx odp=0x%llx/%x/%x/%x ts_mask=0x%llx clock=%llu rss=%u/%u/%u max_wq_type_rq=%u "
	    "raw_packet_caps=0x%x tm=%u/%u/%u/%u/%u cq_mod=%u/%u max_dm_size=%llu xrc_odp=0x%x ports=%u comp_mask=%u "
	    "fw_ver=%s ",
	    (unsigned long long)a->device_cap_flags_ex, (unsigned long long)a->odp_caps.general_caps,
	    a->odp_caps.per_transport_caps.rc_odp_caps, a->odp_caps.per_transport_caps.uc_odp_caps,
	    a->odp_caps.per_transport_caps.ud_odp_caps, (unsigned long long)a->completion_timestamp_mask,
	    (unsigned long long)a->hca_core_clock, a->rss_caps.supported_qpts, a->rss_caps.max_rwq_indirection_tables,
	    a->rss_caps.max_rwq_indirection_table_size, a->max_wq_type_rq, a->raw_packet_caps,
	    a->tm_caps.max_rndv_hdr_size, a->tm_caps.max_num_tags, a->tm_caps.flags, a->tm_caps.max_ops,
	    a->tm_caps.max_sge, a->cq_mod_caps.max_cq_count, a->cq_mod_caps.max_cq_period,
	    (unsigned long long)a->max_dm_size, a->xrc_odp_caps, a->phys_port_cnt_ex, a->comp_mask, a->orig_attr.fw_ver);
	if ((!usb4 && !a->device_cap_flags_ex) || a->phys_port_cnt_ex != 1)
		bad("device_cap_flags_ex 0x%llx, phys_port_cnt_ex %u", (unsigned long long)a->device_cap_flags_ex,
		    a->phys_port_cnt_ex);
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	int rc = vctx->query_device_ex(b->ctx, &in, (struct ibv_device_attr_ex *)buf, sizeof(struct ibv_device_attr_ex));
	int small = vctx->query_device_ex(b->ctx, NULL, (struct ibv_device_attr_ex *)buf, 100);
	add("input_comp_mask=%s attr_size100=%s", ename(rc), ename(small));
	if (rc != EINVAL || small != EINVAL)
		bad("input comp_mask 1: %s, attr_size 100: %s; want EINVAL", ename(rc), ename(small));
	finish("query_device_ex");
}

// create_srq_ex: a basic SRQ with a comp_mask ibv_create_srq_ex cannot
// route to create_srq (CQ set), queried, modified and used by a receiver;
// then the refusals.
static void case_srq_ex(struct bed *b)
{
	// The SRQ and its receiver on the receiving side, the sender with its
	// own CQ on the sending side.
	struct ibv_cq *cq = ibv_create_cq(b->rctx, 16, NULL, NULL, 0), *scq = ibv_create_cq(b->ctx, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex sa = {.srq_context = (void *)0x5a, .attr = {.max_wr = 16, .max_sge = 1},
					  .comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_BASIC, .pd = b->rpd, .cq = cq};
	errno = 0;
	struct ibv_srq *srq = cq && scq ? ibv_create_srq_ex(b->rctx, &sa) : NULL;
	struct pair p = {0};
	add("basic=%s ", srq ? "created" : ename(errno));
	if (!srq) {
		// The usb4 module has no SRQs: its errno, passed through.
		if (!usb4 || errno == 0)
			bad("create_srq_ex basic: %s", ename(errno));
		goto refusals;
	}
	add("granted=%u/%u context=%s pd=%s srq_context=%s ", sa.attr.max_wr, sa.attr.max_sge,
	    srq->context == b->rctx ? "ok" : "bad", srq->pd == b->rpd ? "ok" : "bad",
	    srq->srq_context == (void *)0x5a ? "ok" : "bad");
	struct ibv_srq_attr q = {0};
	int rc = ibv_query_srq(srq, &q);
	add("query=%s:%u/%u/%u ", ename(rc), q.max_wr, q.max_sge, q.srq_limit);
	struct ibv_srq_attr lim = {.srq_limit = 4};
	int mrc = ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT);
	int qrc = ibv_query_srq(srq, &q);
	add("limit=%s query=%s:%u ", ename(mrc), ename(qrc), q.srq_limit);
	if (rc || mrc || qrc || q.srq_limit != 4 || q.max_wr < 16 || srq->context != b->rctx || srq->pd != b->rpd ||
	    srq->srq_context != (void *)0x5a)
		bad("%s", out);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	p.r = ibv_create_qp(b->rpd, &ia);
	ia.srq = NULL;
	ia.send_cq = ia.recv_cq = scq;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_recv_sge = 1;
	p.s = ibv_create_qp(b->pd, &ia);
	if (!p.r || !p.s || connect_pair(b, p.s, p.r)) {
		bad("QPs on the SRQ: %s", ename(errno));
		goto refusals;
	}
	struct ibv_sge sge = {.addr = (uintptr_t)b->rbuf, .length = MSG, .lkey = b->rmr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 77, .sg_list = &sge, .num_sge = 1}, *badrw = NULL;
	rc = ibv_post_srq_recv(srq, &rw, &badrw);
	if (rc || post(b, p.s, IBV_WR_SEND, 9, 0, 200, 0)) {
		bad("post: %s", ename(rc));
		goto refusals;
	}
	struct ibv_wc wc;
	int got = 0, recv_ok = 0, send_ok = 0;
	double deadline = now() + 10;
	while ((!recv_ok || !send_ok) && now() < deadline) {
		if (!recv_ok && ibv_poll_cq(cq, 1, &wc) == 1) {
			got++;
			recv_ok = wc.opcode == IBV_WC_RECV && wc.wr_id == 77 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 200;
			recv_ok = recv_ok ? 1 : -1;
		}
		if (!send_ok && ibv_poll_cq(scq, 1, &wc) == 1) {
			got++;
			send_ok = wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS ? 1 : -1;
		}
	}
	add("traffic=%d/%s ", got, recv_ok == 1 && send_ok == 1 ? "ok" : "bad");
	if (got != 2 || recv_ok != 1 || send_ok != 1)
		bad("%d of 2 completions, receive %d, send %d", got, recv_ok, send_ok);
	check_bytes(b, 0, 9, 200);
refusals:
	pair_free(&p);
	if (srq)
		add("destroy=%s ", ename(ibv_destroy_srq(srq)));
	struct {
		const char *name;
		uint32_t comp_mask, type, tags;
		int want;
	} t[] = {
		{"no_pd", IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ, IBV_SRQT_BASIC, 0, EINVAL},
		{"mask_bit5", IBV_SRQ_INIT_ATTR_PD | (1u << 5), IBV_SRQT_BASIC, 0, EOPNOTSUPP},
		{"xrc_without_xrcd", IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ, IBV_SRQT_XRC, 0,
		 EINVAL},
		{"tm_without_tm", IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ, IBV_SRQT_TM, 16,
		 EINVAL},
		{"tm", IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM,
		 IBV_SRQT_TM, 16, EOPNOTSUPP},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ibv_srq_init_attr_ex x = {.attr = {.max_wr = 8, .max_sge = 1}, .comp_mask = t[i].comp_mask,
						 .srq_type = t[i].type, .pd = b->rpd, .cq = cq,
						 .tm_cap = {.max_num_tags = t[i].tags, .max_ops = 4}};
		errno = 0;
		struct ibv_srq *s2 = ibv_create_srq_ex(b->rctx, &x);
		int e = s2 ? 0 : errno;
		add("%s=%s ", t[i].name, s2 ? "created" : ename(e));
		if (e != t[i].want)
			bad("%s: %s, want %s", t[i].name, s2 ? "created" : ename(e), ename(t[i].want));
		if (s2)
			ibv_destroy_srq(s2);
	}
	if (cq)
		ibv_destroy_cq(cq);
	if (scq)
		ibv_destroy_cq(scq);
	finish("create_srq_ex");
}

// end_poll without a start_poll: must not crash, and the CQ stays usable
// and empty. (librxe advances its consumer index here; see docs.)
static void case_end_without_start(struct bed *b)
{
	struct ibv_cq_ex *cq = cq_ex(b, 4, 0, NULL, NULL);
	if (!cq) {
		bad("create_cq_ex: %s", ename(errno));
		finish("end_poll_without_start");
		return;
	}
	ibv_end_poll(cq);
	int rc = ibv_start_poll(cq, &(struct ibv_poll_cq_attr){0});
	add("survived start_poll=%s", ename(rc));
	if (!rc) {
		add(":wr_id=%llu", (unsigned long long)cq->wr_id);
		ibv_end_poll(cq);
	}
	if (rc != ENOENT)
		bad("%s", out);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	finish("end_poll_without_start");
}

// open_side: device name's context, a PD, a 2*SLOTS*MSG buffer in one MR,
// and the GID at gid_index; 0, or -1 after printing a FAIL line.
static int open_side(struct ibv_device **list, int n, const char *name, int gid_index, struct ibv_context **ctx,
		     struct ibv_pd **pd, struct ibv_mr **mr, union ibv_gid *gid)
{
	struct ibv_device *d = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d = list[i];
	size_t len = 2 * (size_t)SLOTS * MSG;
	uint8_t *buf = calloc(1, len);
	*ctx = d ? ibv_open_device(d) : NULL;
	*pd = *ctx ? ibv_alloc_pd(*ctx) : NULL;
	*mr = *pd && buf ? ibv_reg_mr(*pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!*mr || ibv_query_gid(*ctx, 1, gid_index, gid)) {
		printf("--- FAIL: cqex/setup\n    device %s: %s\n", name, ename(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: %s DEV GID_INDEX PROVIDER [RDEV RGID_INDEX]\n", argv[0]);
		return 2;
	}
	prov = argv[3];
	usb4 = strcmp(prov, "usb4") == 0;
	judge = usb4 || strcmp(prov, "ours") == 0;
	struct bed b = {.gid_index = atoi(argv[2])};
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (open_side(list, n, argv[1], b.gid_index, &b.ctx, &b.pd, &b.mr, &b.gid))
		return 1;
	b.rctx = b.ctx, b.rpd = b.pd, b.rmr = b.mr, b.rgid = b.gid, b.rgid_index = b.gid_index;
	if (argc == 6) {
		b.rgid_index = atoi(argv[5]);
		if (open_side(list, n, argv[4], b.rgid_index, &b.rctx, &b.rpd, &b.rmr, &b.rgid))
			return 1;
	}
	b.sbuf = b.mr->addr;
	b.rbuf = (uint8_t *)b.rmr->addr + (size_t)SLOTS * MSG;
	// CQEX_ONLY=create_srq_ex: that case alone (tests/reliability runs it through the
	// provider's SRQ on rxe, USB4VERBS_SRQ=provider).
	const char *only = getenv("CQEX_ONLY");
	if (only && strcmp(only, "create_srq_ex") == 0) {
		case_srq_ex(&b);
	} else {
		case_fields(&b);
		case_accessors(&b);
		case_unsupported(&b);
		case_comp_mask(&b);
		case_empty(&b);
		case_sequence(&b, 0);
		case_sequence(&b, 1);
		case_channel(&b);
		case_resize(&b, 0);
		case_resize(&b, 1);
		case_query_device_ex(&b);
		case_srq_ex(&b);
		case_end_without_start(&b); // last: librxe's CQ state afterwards is not to be trusted
	}
	for (int side = 0; side < (argc == 6 ? 2 : 1); side++) {
		struct ibv_mr *mr = side ? b.rmr : b.mr;
		void *buf = mr->addr;
		ibv_dereg_mr(mr);
		free(buf);
		ibv_dealloc_pd(side ? b.rpd : b.pd);
		ibv_close_device(side ? b.rctx : b.ctx);
	}
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
