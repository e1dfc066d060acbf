// create_qp_ex with the ibv_qp_ex work-request API, and memory windows
// (alloc_mw, dealloc_mw, bind_mw). The ibv_wr_* functions are C trampolines
// into the engine's batch builders (provider/dataplane/wrex.c) and never
// enter Go (DESIGN.md decision 1); create_qp_ex and the MW control ops go
// through the Go part as every control op does.
//
// What we answer is what librxe answers (rdma-core:providers/rxe/rxe.c
// rxe_create_qp_ex, check_qp_init_attr, rxe_alloc_mw, rxe_bind_mw), except
// where librxe would crash or corrupt: docs/extended-verbs.md lists each.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "shim.h"
#include "zopslayout.h"

// struct ibv_qp_init_attr_ex (136 bytes, unchanged v28..master; the first
// 64 bytes are struct ibv_qp_init_attr).
enum {
	QPIA_EX_COMP_MASK = 60,
	QPIA_EX_PD = 64,
	QPIA_EX_CREATE_FLAGS = 80,
	QPIA_EX_SEND_OPS_FLAGS = 128,
	// enum ibv_qp_init_attr_mask
	QP_INIT_ATTR_PD = 1,
	QP_INIT_ATTR_CREATE_FLAGS = 4,
	QP_INIT_ATTR_SEND_OPS_FLAGS = 64,
};

// struct ibv_qp_ex: ibv_qp (160 bytes), comp_mask, wr_id, wr_flags, then the
// function pointers; wr_atomic_write (v44+) and wr_flush (v45+) are appended,
// so which of them exist is told by the probed offset of verbs_qp.comp_mask
// (344, 352, 360), which is exactly sizeof(ibv_qp_ex) of the running library.
enum {
	QPX_WR_ID = 168,
	QPX_WR_FLAGS = 176,
	QPX_ATOMIC_CMP_SWP = 184,
	QPX_ATOMIC_FETCH_ADD = 192,
	QPX_BIND_MW = 200,
	QPX_LOCAL_INV = 208,
	QPX_RDMA_READ = 216,
	QPX_RDMA_WRITE = 224,
	QPX_RDMA_WRITE_IMM = 232,
	QPX_SEND = 240,
	QPX_SEND_IMM = 248,
	QPX_SEND_INV = 256,
	QPX_SEND_TSO = 264,
	QPX_SET_UD_ADDR = 272,
	QPX_SET_XRC_SRQN = 280,
	QPX_SET_INLINE_DATA = 288,
	QPX_SET_INLINE_DATA_LIST = 296,
	QPX_SET_SGE = 304,
	QPX_SET_SGE_LIST = 312,
	QPX_START = 320,
	QPX_COMPLETE = 328,
	QPX_ABORT = 336,
	QPX_ATOMIC_WRITE = 344,
	QPX_FLUSH = 352,
	QPX_SIZE_V43 = 344,
	QPX_SIZE_V44 = 352,
	WR_TSO = 10, // enum ibv_wr_opcode
	WR_FLUSH = 14,
	VERBS_QP_EX = 2, // verbs_qp.comp_mask bit ibv_qp_to_qp_ex tests
	IBV_ACCESS_ZERO_BASED = 1 << 5,
	IB_UVERBS_DEVICE_ATOMIC_WRITE_BIT = 40, // linux:include/uapi/rdma/ib_user_verbs.h
};

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

static uint32_t rd32(const void *p, size_t off)
{
	uint32_t v;
	memcpy(&v, (const char *)p + off, sizeof(v));
	return v;
}

static uint64_t rd64(const void *p, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)p + off, sizeof(v));
	return v;
}

static void *rdptr(const void *p, size_t off)
{
	void *v;
	memcpy(&v, (const char *)p + off, sizeof(v));
	return v;
}

static void wrptr(void *p, size_t off, const void *fn)
{
	memcpy((char *)p + off, &fn, sizeof(fn));
}

// ---- the ibv_qp_ex trampolines ----
//
// The ibv_qp_ex pointer is our QP (the verbs_qp is its first member). A QP
// destroyed meanwhile has no engine: builders and setters do nothing,
// wr_complete returns EINVAL, as the other data ops of a destroyed QP.

static struct usb4v_qp *qx(void *qpx)
{
	return __atomic_load_n((struct usb4v_qp **)((char *)qpx + USB4_QP_ENG_OFFSET), __ATOMIC_ACQUIRE);
}

static void qx_build(void *qpx, struct usb4v_ibv_send_wr *t, uint32_t opcode)
{
	struct usb4v_qp *eng = qx(qpx);
	if (!eng)
		return;
	t->wr_id = rd64(qpx, QPX_WR_ID);
	t->send_flags = rd32(qpx, QPX_WR_FLAGS);
	t->opcode = opcode;
	usb4v_wr_build(eng, t);
}

static void qx_rdma(void *qpx, uint32_t opcode, uint32_t rkey, uint64_t addr, uint32_t imm)
{
	struct usb4v_ibv_send_wr t = {.imm_data = imm};
	t.wr.rdma.remote_addr = addr;
	t.wr.rdma.rkey = rkey;
	qx_build(qpx, &t, opcode);
}

static void qx_rdma_write(void *qpx, uint32_t rkey, uint64_t addr)
{
	qx_rdma(qpx, USB4V_WR_RDMA_WRITE, rkey, addr, 0);
}

static void qx_rdma_write_imm(void *qpx, uint32_t rkey, uint64_t addr, uint32_t imm_be)
{
	qx_rdma(qpx, USB4V_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm_be);
}

static void qx_rdma_read(void *qpx, uint32_t rkey, uint64_t addr)
{
	qx_rdma(qpx, USB4V_WR_RDMA_READ, rkey, addr, 0);
}

static void qx_atomic(void *qpx, uint32_t opcode, uint32_t rkey, uint64_t addr, uint64_t compare_add,
		      uint64_t swap)
{
	struct usb4v_ibv_send_wr t = {0};
	t.wr.atomic.remote_addr = addr;
	t.wr.atomic.compare_add = compare_add;
	t.wr.atomic.swap = swap;
	t.wr.atomic.rkey = rkey;
	qx_build(qpx, &t, opcode);
}

static void qx_atomic_cmp_swp(void *qpx, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap)
{
	qx_atomic(qpx, USB4V_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void qx_atomic_fetch_add(void *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	qx_atomic(qpx, USB4V_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void qx_atomic_write(void *qpx, uint32_t rkey, uint64_t addr, const void *atomic_wr)
{
	struct usb4v_ibv_send_wr t = {0};
	t.wr.rdma.remote_addr = addr;
	t.wr.rdma.rkey = rkey;
	memcpy(&t.wr.atomic.swap, atomic_wr, 8); // engine.h: ATOMIC_WRITE's 8 bytes
	qx_build(qpx, &t, USB4V_WR_ATOMIC_WRITE);
}

static void qx_send(void *qpx)
{
	struct usb4v_ibv_send_wr t = {0};
	qx_build(qpx, &t, USB4V_WR_SEND);
}

static void qx_send_imm(void *qpx, uint32_t imm_be)
{
	struct usb4v_ibv_send_wr t = {.imm_data = imm_be};
	qx_build(qpx, &t, USB4V_WR_SEND_WITH_IMM);
}

static void qx_send_inv(void *qpx, uint32_t invalidate_rkey)
{
	struct usb4v_ibv_send_wr t = {.imm_data = invalidate_rkey};
	qx_build(qpx, &t, USB4V_WR_SEND_WITH_INV);
}

static void qx_local_inv(void *qpx, uint32_t invalidate_rkey)
{
	struct usb4v_ibv_send_wr t = {.imm_data = invalidate_rkey};
	qx_build(qpx, &t, USB4V_WR_LOCAL_INV);
}

// struct ibv_mw_bind_info: mr@0, addr@8, length@16, mw_access_flags@24.
static void qx_bind_mw(void *qpx, void *mw, uint32_t rkey, const void *info)
{
	struct usb4v_ibv_send_wr t = {0};
	t.ext.bind_mw.mw = mw;
	t.ext.bind_mw.rkey = rkey;
	t.ext.bind_mw.bind_info.mr = rdptr(info, 0);
	t.ext.bind_mw.bind_info.addr = rd64(info, 8);
	t.ext.bind_mw.bind_info.length = rd64(info, 16);
	t.ext.bind_mw.bind_info.mw_access_flags = rd32(info, 24);
	qx_build(qpx, &t, USB4V_WR_BIND_MW);
}

// TSO, FLUSH and XRC are not built (rxe has no TSO or XRC QPs; FLUSH is
// refused at create_qp_ex): their slots fail the batch with EINVAL and one
// line instead of being NULL, which librxe leaves them (a crash if called).
static void qx_send_tso(void *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	struct usb4v_ibv_send_wr t = {0};
	qx_build(qpx, &t, WR_TSO);
}

static void qx_flush(void *qpx, uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level)
{
	(void)rkey, (void)addr, (void)len, (void)type, (void)level;
	struct usb4v_ibv_send_wr t = {0};
	qx_build(qpx, &t, WR_FLUSH);
}

static void qx_set_xrc_srqn(void *qpx, uint32_t remote_srqn)
{
	(void)remote_srqn;
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_fail(eng, EINVAL, "ibv_wr_set_xrc_srqn on a QP that is not XRC");
}

static void qx_set_sge(void *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct usb4v_qp *eng = qx(qpx);
	struct usb4v_ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};
	// A zero length leaves the WR without data, as librxe's wr_set_sge.
	if (eng)
		usb4v_wr_set_sge_list(eng, length ? 1 : 0, &sge);
}

static void qx_set_sge_list(void *qpx, size_t n, const void *sg_list)
{
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_set_sge_list(eng, n, sg_list);
}

static void qx_set_inline_data(void *qpx, void *addr, size_t length)
{
	struct usb4v_qp *eng = qx(qpx);
	struct usb4v_ibv_data_buf b = {.addr = addr, .length = length};
	if (eng)
		usb4v_wr_set_inline_list(eng, 1, &b);
}

static void qx_set_inline_data_list(void *qpx, size_t n, const void *bufs)
{
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_set_inline_list(eng, n, bufs);
}

static void qx_set_ud_addr(void *qpx, void *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_set_ud_addr(eng, ah, remote_qpn, remote_qkey);
}

static void qx_start(void *qpx)
{
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_start(eng);
}

static int qx_complete(void *qpx)
{
	struct usb4v_qp *eng = qx(qpx);
	if (!eng)
		return EINVAL;
	return usb4v_wr_complete(eng);
}

static void qx_abort(void *qpx)
{
	struct usb4v_qp *eng = qx(qpx);
	if (eng)
		usb4v_wr_abort(eng);
}

// ---- create_qp_ex ----

static int kind_of(void *ibv_ctx)
{
	uint32_t drv = 0;
	return (int)usb4_device_kind(rdptr(ibv_ctx, IBV_CONTEXT_DEVICE), &drv);
}

static void *refuse(int err, const char *fmt, unsigned long long v)
{
	fprintf(stderr, USB4_LOG_PREFIX "create_qp_ex: ");
	fprintf(stderr, fmt, v);
	fprintf(stderr, ": %s\n", strerrorname_np(err));
	return fail_null(err);
}

// has_atomic_write asks the kernel (query_device_ex's device_cap_flags_ex):
// rxe executes IB_WR_ATOMIC_WRITE from Linux 6.2 on.
static int has_atomic_write(void *ibv_ctx)
{
	struct usb4_device_attr attr;
	struct usb4_device_attr_ext ex = { 0 };
	if (USB4_GO(QueryDevice, usb4_ctx_handle(ibv_ctx), &attr, &ex) != 0)
		return 0;
	return (ex.cap_flags_ex >> IB_UVERBS_DEVICE_ATOMIC_WRITE_BIT) & 1;
}

static void *usb4_create_qp_ex(void *ibv_ctx, void *attr)
{
	if (!attr)
		return fail_null(EINVAL);
	if (usb4_in_fork_child(ibv_ctx, "create_qp_ex")) // before has_atomic_write enters Go
		return fail_null(ENOSYS);
	uint32_t mask = rd32(attr, QPIA_EX_COMP_MASK);
	uint32_t known = QP_INIT_ATTR_PD | QP_INIT_ATTR_CREATE_FLAGS | QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (mask & ~known)
		return refuse(EOPNOTSUPP, "comp_mask bits %#llx (XRC, TSO, RSS tables) are not supported",
			      mask & ~known);
	if ((mask & QP_INIT_ATTR_CREATE_FLAGS) && rd32(attr, QPIA_EX_CREATE_FLAGS))
		return refuse(EOPNOTSUPP, "create_flags %#llx are not supported", rd32(attr, QPIA_EX_CREATE_FLAGS));
	if (!(mask & QP_INIT_ATTR_PD) || !rdptr(attr, QPIA_EX_PD))
		return fail_null(EINVAL); // libibverbs' ibv_cmd_create_qp_ex2 answers so
	uint32_t qpt = ((struct usb4_ibv_qp_init_attr *)attr)->qp_type;
	uint64_t ops = (mask & QP_INIT_ATTR_SEND_OPS_FLAGS) ? rd64(attr, QPIA_EX_SEND_OPS_FLAGS) : 0;
	size_t qpx_size = usb4_abi_get()->qp_comp_mask_off;
	if (!qpx_size)
		return refuse(EOPNOTSUPP, "the running libibverbs' ibv_qp_ex layout is unknown (%llu)", 0);
	if (mask & QP_INIT_ATTR_SEND_OPS_FLAGS) {
		if (qpt != USB4V_QPT_RC && qpt != USB4V_QPT_UC && qpt != USB4V_QPT_UD)
			return refuse(EOPNOTSUPP, "send_ops_flags on QP type %llu", qpt);
		int rxe = kind_of(ibv_ctx) == USB4_KIND_RXE;
		int aw = (ops & USB4V_QP_EX_WITH_ATOMIC_WRITE) && qpx_size > QPX_SIZE_V43 && rxe &&
			 has_atomic_write(ibv_ctx);
		uint64_t sup = usb4v_wrex_supported_ops(rxe ? USB4V_BACKEND_RXE : USB4V_BACKEND_KCMD, qpt, aw);
		if (ops & ~sup)
			return refuse(EOPNOTSUPP,
				      rxe ? "send_ops_flags %#llx are not supported on this QP type by rxe here"
					  : "send_ops_flags %#llx name opcodes the usb4 module does not execute",
				      (unsigned long long)(ops & ~sup));
	}
	void *qp = usb4_qp_create(rdptr(attr, QPIA_EX_PD), attr);
	if (!qp)
		return NULL; // errno set
	struct usb4v_qp *eng = qx(qp);
	uint32_t max_send_wr = ((struct usb4_ibv_qp_init_attr *)attr)->cap.max_send_wr;
	int err = usb4v_qp_enable_wrex(eng, ops, max_send_wr);
	if (err) {
		int derr = usb4_qp_destroy(qp);
		(void)derr; // the QP was never handed out: nothing else to do
		return fail_null(err);
	}
	// Every builder and setter is filled, not only those of send_ops_flags:
	// an opcode the QP was not created for then fails at wr_complete with
	// EINVAL instead of calling a NULL pointer (librxe leaves it NULL).
	wrptr(qp, QPX_ATOMIC_CMP_SWP, (void *)qx_atomic_cmp_swp);
	wrptr(qp, QPX_ATOMIC_FETCH_ADD, (void *)qx_atomic_fetch_add);
	wrptr(qp, QPX_BIND_MW, (void *)qx_bind_mw);
	wrptr(qp, QPX_LOCAL_INV, (void *)qx_local_inv);
	wrptr(qp, QPX_RDMA_READ, (void *)qx_rdma_read);
	wrptr(qp, QPX_RDMA_WRITE, (void *)qx_rdma_write);
	wrptr(qp, QPX_RDMA_WRITE_IMM, (void *)qx_rdma_write_imm);
	wrptr(qp, QPX_SEND, (void *)qx_send);
	wrptr(qp, QPX_SEND_IMM, (void *)qx_send_imm);
	wrptr(qp, QPX_SEND_INV, (void *)qx_send_inv);
	wrptr(qp, QPX_SEND_TSO, (void *)qx_send_tso);
	wrptr(qp, QPX_SET_UD_ADDR, (void *)qx_set_ud_addr);
	wrptr(qp, QPX_SET_XRC_SRQN, (void *)qx_set_xrc_srqn);
	wrptr(qp, QPX_SET_INLINE_DATA, (void *)qx_set_inline_data);
	wrptr(qp, QPX_SET_INLINE_DATA_LIST, (void *)qx_set_inline_data_list);
	wrptr(qp, QPX_SET_SGE, (void *)qx_set_sge);
	wrptr(qp, QPX_SET_SGE_LIST, (void *)qx_set_sge_list);
	wrptr(qp, QPX_START, (void *)qx_start);
	wrptr(qp, QPX_COMPLETE, (void *)qx_complete);
	wrptr(qp, QPX_ABORT, (void *)qx_abort);
	if (qpx_size > QPX_SIZE_V43) // never past the running library's ibv_qp_ex
		wrptr(qp, QPX_ATOMIC_WRITE, (void *)qx_atomic_write);
	if (qpx_size > QPX_SIZE_V44)
		wrptr(qp, QPX_FLUSH, (void *)qx_flush);
	uint32_t cm = VERBS_QP_EX;
	memcpy((char *)qp + qpx_size, &cm, sizeof(cm));
	return qp;
}

// ---- memory windows ----

// struct ibv_mw (32 bytes): context@0, pd@8, rkey@16, handle@20, type@24.
enum { IBV_MW_CONTEXT = 0, IBV_MW_PD = 8, IBV_MW_RKEY = 16, IBV_MW_HANDLE = 20, IBV_MW_TYPE = 24, IBV_MW_SIZE = 32 };
struct usb4_mw {
	unsigned char ibv_mw[IBV_MW_SIZE];
	uintptr_t go;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

static void *usb4_alloc_mw(void *ibv_pd, int type)
{
	struct usb4_pd *pd = ibv_pd;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), "alloc_mw"))
		return fail_null(ENOSYS);
	if (type < 0)
		return fail_null(EINVAL);
	int err = usb4_pd_adopt(ibv_pd);
	if (err)
		return fail_null(err);
	struct usb4_mw *mw = calloc(1, sizeof(*mw));
	if (!mw)
		return fail_null(ENOMEM);
	uint32_t handle = 0, rkey = 0;
	err = USB4_GO(AllocMW, pd->go, (uint32_t)type, &mw->go, &handle, &rkey);
	if (err) {
		free(mw);
		return fail_null(err);
	}
	// libibverbs' ibv_alloc_mw sets nothing: every field is ours.
	mw->image = usb4_go_image();
	void *ctx = rdptr(pd->ibv_pd, IBV_PD_CONTEXT);
	memcpy(mw->ibv_mw + IBV_MW_CONTEXT, &ctx, sizeof(ctx));
	memcpy(mw->ibv_mw + IBV_MW_PD, &ibv_pd, sizeof(ibv_pd));
	memcpy(mw->ibv_mw + IBV_MW_RKEY, &rkey, sizeof(rkey));
	memcpy(mw->ibv_mw + IBV_MW_HANDLE, &handle, sizeof(handle));
	memcpy(mw->ibv_mw + IBV_MW_TYPE, &type, sizeof(type));
	return mw;
}

static int usb4_dealloc_mw(void *ibv_mw)
{
	struct usb4_mw *mw = ibv_mw;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_mw), "dealloc_mw"))
		return usb4_errno(ENOSYS);
	struct usb4_adopt_req req = {0};
	int err = usb4_adopt_req_on_pd(rdptr(mw->ibv_mw, IBV_MW_PD), &req);
	if (!err) {
		memcpy(&req.handle, mw->ibv_mw + IBV_MW_HANDLE, sizeof(req.handle));
		memcpy(&req.rkey, mw->ibv_mw + IBV_MW_RKEY, sizeof(req.rkey));
		memcpy(&req.type, mw->ibv_mw + IBV_MW_TYPE, sizeof(req.type));
		err = usb4_obj_adopt(USB4_CTX_OF(ibv_mw), &mw->go, &mw->image, USB4_OBJ_MW, &req);
	}
	if (!err)
		err = usb4_destroy_errno(USB4_GO(DeallocMW, mw->go));
	if (err)
		return usb4_errno(err);
	free(mw);
	return 0;
}

// bind_mw binds a type 1 window with a BIND_MW work request, as librxe does
// (libibverbs' ibv_bind_mw has checked the type and the MR's PD): the new
// rkey is the window's with its key byte incremented (ibv_inc_rkey), and
// the window takes it once the WR is posted; an error completion is the
// application's to undo. struct ibv_mw_bind: wr_id@0, send_flags@8,
// bind_info@16.
static int usb4_bind_mw(void *ibv_qp, void *ibv_mw, void *mw_bind)
{
	if (!ibv_qp || !ibv_mw || !mw_bind)
		return usb4_errno(EINVAL);
	struct usb4v_qp *eng = qx(ibv_qp);
	if (!eng)
		return usb4_errno(EINVAL);
	const char *bi = (const char *)mw_bind + 16;
	uint32_t access = rd32(bi, 24);
	if (access & IBV_ACCESS_ZERO_BASED)
		return usb4_errno(EINVAL);
	uint32_t rkey = rd32(ibv_mw, IBV_MW_RKEY);
	uint32_t next = (rkey & 0xffffff00u) | ((rkey + 1) & 0xffu);
	struct usb4v_ibv_send_wr wr = {
		.wr_id = rd64(mw_bind, 0),
		.opcode = USB4V_WR_BIND_MW,
		.send_flags = rd32(mw_bind, 8),
	};
	wr.ext.bind_mw.mw = ibv_mw;
	wr.ext.bind_mw.rkey = next;
	wr.ext.bind_mw.bind_info.mr = rdptr(bi, 0);
	wr.ext.bind_mw.bind_info.addr = rd64(bi, 8);
	wr.ext.bind_mw.bind_info.length = rd64(bi, 16);
	wr.ext.bind_mw.bind_info.mw_access_flags = access;
	struct usb4v_ibv_send_wr *bad = NULL;
	int err = usb4v_post_send(eng, &wr, &bad);
	if (err)
		return usb4_errno(err);
	memcpy((char *)ibv_mw + IBV_MW_RKEY, &next, sizeof(next));
	return 0;
}

void usb4_install_qpex_ops(void **buf, size_t n)
{
	usb4_set_slot(buf, n, USB4_OP_create_qp_ex, (void *)usb4_create_qp_ex);
	usb4_set_slot(buf, n, USB4_OP_alloc_mw, (void *)usb4_alloc_mw);
	usb4_set_slot(buf, n, USB4_OP_dealloc_mw, (void *)usb4_dealloc_mw);
	usb4_set_slot(buf, n, USB4_OP_bind_mw, (void *)usb4_bind_mw);
}
