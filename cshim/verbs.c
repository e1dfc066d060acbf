// Control verbs: thin C wrappers that call the Go provider and hand
// libibverbs C memory laid out the way it expects (rdma-core-private-abi.md
// §7.2). Nothing here is on the data path.
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "zopslayout.h"

_Static_assert(sizeof(struct usb4_device_attr) == 232, "ibv_device_attr is 232 bytes");
_Static_assert(offsetof(struct usb4_device_attr, node_guid) == 64, "ibv_device_attr.node_guid@64");
_Static_assert(offsetof(struct usb4_device_attr, vendor_id) == 96, "ibv_device_attr.vendor_id@96");
_Static_assert(offsetof(struct usb4_device_attr, device_cap_flags) == 116, "device_cap_flags@116");
_Static_assert(offsetof(struct usb4_device_attr, atomic_cap) == 164, "atomic_cap@164");
_Static_assert(offsetof(struct usb4_device_attr, max_pkeys) == 224, "max_pkeys@224");
_Static_assert(offsetof(struct usb4_device_attr, phys_port_cnt) == 227, "phys_port_cnt@227");
// Offsets from rdma-core-private-abi.md Appendix B (struct ibv_port_attr).
_Static_assert(offsetof(struct usb4_port_attr, pkey_tbl_len) == 32, "ibv_port_attr.pkey_tbl_len@32");
_Static_assert(offsetof(struct usb4_port_attr, lmc) == 38, "ibv_port_attr.lmc@38");
_Static_assert(offsetof(struct usb4_port_attr, link_layer) == 46, "ibv_port_attr.link_layer@46");
_Static_assert(offsetof(struct usb4_port_attr, port_cap_flags2) == 48, "ibv_port_attr.port_cap_flags2@48");
_Static_assert(offsetof(struct usb4_port_attr, active_speed_ex) == 52, "ibv_port_attr.active_speed_ex@52");
_Static_assert(sizeof(struct usb4_port_attr) == 56, "ibv_port_attr is 56 bytes since v49");

// Public object layouts (rdma-core-private-abi.md Appendix B).
enum {
	IBV_MR_CONTEXT = 0,
	IBV_MR_PD = 8,
	IBV_MR_ADDR = 16,
	IBV_MR_LENGTH = 24,
	IBV_MR_HANDLE = 32,
	IBV_MR_LKEY = 36,
	IBV_MR_RKEY = 40,
	VERBS_MR_TYPE = 48,   // enum ibv_mr_type; IBV_MR_TYPE_MR = 0
	VERBS_MR_ACCESS = 52, // int, since v32
	VERBS_MR_SIZE = 56,
	VERBS_MR_TYPE_DMABUF = 3, // IBV_MR_TYPE_DMABUF_MR, since v34
};

// Our MR: libibverbs' verbs_mr first, then the Go handle.
struct usb4_mr {
	unsigned char verbs_mr[VERBS_MR_SIZE];
	uintptr_t go;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

static void put_u32(void *obj, size_t off, uint32_t v)
{
	memcpy((char *)obj + off, &v, sizeof(v));
}

// usb4_errno: int-returning ops that fail also leave errno set to the code
// they return. rdma-core's providers do so in effect (their failing system
// call set it), and programs that report with perror or %m rely on it.
int usb4_errno(int err)
{
	if (err)
		errno = err;
	return err;
}

// put_group copies a group of ibv_device_attr_ex members only when the
// caller's attr_size holds all of it, as ibv_cmd_query_device_any does.
static void put_group(void *attr, size_t attr_size, size_t off, size_t group_len, const void *v, size_t len)
{
	if (attr_size >= off + group_len)
		memcpy((char *)attr + off, v, len);
}

// query_device_ex(ctx, input, attr, attr_size): ibv_query_device passes
// attr_size 232 (only orig_attr); an older or newer libibverbs passes its
// own sizeof(ibv_device_attr_ex). Everything the kernel's extended
// QUERY_DEVICE returns is filled, what does not fit in attr_size is not
// written, and the rest is zero (librxe: ibv_cmd_query_device_any).
static int usb4_query_device_ex(void *ibv_ctx, const void *input, void *attr, size_t attr_size)
{
	struct usb4_device_attr a;
	struct usb4_device_attr_ext x;

	uint32_t in_mask = 0; // struct ibv_query_device_ex_input { uint32_t comp_mask; }
	if (input)
		memcpy(&in_mask, input, sizeof(in_mask));
	if (!attr || attr_size < sizeof(a) || in_mask)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(ibv_ctx, "query_device"))
		return usb4_errno(ENOSYS);
	memset(&a, 0, sizeof(a));
	memset(&x, 0, sizeof(x));
	int err = USB4_GO(QueryDevice, usb4_ctx_handle(ibv_ctx), &a, &x);
	if (err)
		return usb4_errno(err);
	memset(attr, 0, attr_size);
	memcpy(attr, &a, sizeof(a));
	// comp_mask stays 0, as libibverbs leaves it.
	uint32_t odp[3] = {x.odp_rc_caps, x.odp_uc_caps, x.odp_ud_caps};
	put_group(attr, attr_size, DEVICE_ATTR_EX_ODP_CAPS, 24, &x.odp_general_caps, 8);
	put_group(attr, attr_size, DEVICE_ATTR_EX_ODP_CAPS + 8, 16, odp, sizeof(odp));
	put_group(attr, attr_size, DEVICE_ATTR_EX_TIMESTAMP_MASK, 8, &x.timestamp_mask, 8);
	put_group(attr, attr_size, DEVICE_ATTR_EX_HCA_CORE_CLOCK, 8, &x.hca_core_clock, 8);
	put_group(attr, attr_size, DEVICE_ATTR_EX_CAP_FLAGS_EX, 8, &x.cap_flags_ex, 8);
	uint32_t rss[3] = {x.rss_supported_qpts, x.rss_max_rwq_indirection_tables,
			   x.rss_max_rwq_indirection_table_size};
	put_group(attr, attr_size, DEVICE_ATTR_EX_RSS_CAPS, 32, rss, sizeof(rss));
	put_group(attr, attr_size, DEVICE_ATTR_EX_MAX_WQ_TYPE_RQ, 4, &x.max_wq_type_rq, 4);
	put_group(attr, attr_size, DEVICE_ATTR_EX_RAW_PACKET_CAPS, 4, &x.raw_packet_caps, 4);
	uint32_t tm[5] = {x.tm_max_rndv_hdr_size, x.tm_max_num_tags, x.tm_flags, x.tm_max_ops, x.tm_max_sge};
	put_group(attr, attr_size, DEVICE_ATTR_EX_TM_CAPS, 20, tm, sizeof(tm));
	uint16_t cqmod[2] = {x.max_cq_moderation_count, x.max_cq_moderation_period};
	put_group(attr, attr_size, DEVICE_ATTR_EX_CQ_MOD_CAPS, 4, cqmod, sizeof(cqmod));
	put_group(attr, attr_size, DEVICE_ATTR_EX_MAX_DM_SIZE, 8, &x.max_dm_size, 8);
	put_group(attr, attr_size, DEVICE_ATTR_EX_XRC_ODP_CAPS, 4, &x.xrc_odp_caps, 4);
	uint32_t ports = a.phys_port_cnt;
	put_group(attr, attr_size, DEVICE_ATTR_EX_PHYS_PORT_CNT_EX, 4, &ports, 4);
	return 0;
}

// query_port writes at most the running library's sizeof(ibv_port_attr):
// 52 bytes before v49, 56 from v49 (the caller's buffer may be on its stack).
static int usb4_query_port(void *ibv_ctx, uint8_t port, void *attr)
{
	struct usb4_port_attr a;
	size_t n = usb4_abi_get()->port_attr_size;

	if (!attr)
		return usb4_errno(EINVAL);
	if (usb4_in_fork_child(ibv_ctx, "query_port"))
		return usb4_errno(ENOSYS);
	memset(&a, 0, sizeof(a));
	int err = USB4_GO(QueryPort, usb4_ctx_handle(ibv_ctx), port, &a);
	if (err)
		return usb4_errno(err);
	memcpy(attr, &a, n < sizeof(a) ? n : sizeof(a));
	return 0;
}

static void *usb4_alloc_pd(void *ibv_ctx)
{
	if (usb4_in_fork_child(ibv_ctx, "alloc_pd")) {
		errno = ENOSYS;
		return NULL;
	}
	struct usb4_pd *pd = calloc(1, sizeof(*pd));
	uint32_t handle;
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	int err = USB4_GO(AllocPD, usb4_ctx_handle(ibv_ctx), &pd->go, &handle);
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	// libibverbs sets pd->context after we return.
	pd->image = usb4_go_image();
	put_u32(pd->ibv_pd, IBV_PD_HANDLE, handle);
	return pd;
}

int usb4_pd_adopt(void *ibv_pd)
{
	struct usb4_pd *pd = ibv_pd;
	struct usb4_adopt_req req = {0};
	memcpy(&req.handle, pd->ibv_pd + IBV_PD_HANDLE, sizeof(req.handle));
	return usb4_obj_adopt(USB4_CTX_OF(ibv_pd), &pd->go, &pd->image, USB4_OBJ_PD, &req);
}

int usb4_adopt_req_on_pd(void *ibv_pd, struct usb4_adopt_req *req)
{
	int err = usb4_pd_adopt(ibv_pd);
	if (!err)
		req->pd = ((struct usb4_pd *)ibv_pd)->go;
	return err;
}

static int usb4_dealloc_pd(void *ibv_pd)
{
	struct usb4_pd *pd = ibv_pd;
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), "dealloc_pd"))
		return usb4_errno(ENOSYS);
	int err = usb4_pd_adopt(ibv_pd);
	if (!err)
		err = usb4_destroy_errno(USB4_GO(DeallocPD, pd->go));
	if (err)
		return usb4_errno(err);
	free(pd);
	return 0;
}

// mr_alloc: a zeroed usb4_mr for a registration on ibv_pd, or NULL with
// errno (ENOSYS on a context a fork() child cannot adopt, ENOMEM).
static struct usb4_mr *mr_alloc(void *ibv_pd, const char *verb)
{
	if (usb4_in_fork_child(USB4_CTX_OF(ibv_pd), verb)) {
		errno = ENOSYS;
		return NULL;
	}
	int err = usb4_pd_adopt(ibv_pd);
	if (err) {
		errno = err;
		return NULL;
	}
	struct usb4_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		errno = ENOMEM;
	else
		mr->image = usb4_go_image();
	return mr;
}

// mr_filled writes what libibverbs reads of a verbs_mr we made (handle,
// keys, and at ibv_dereg_mr mr_type and access) and returns it.
static void *mr_filled(struct usb4_mr *mr, uint32_t handle, uint32_t lkey, uint32_t rkey, uint32_t type, int access)
{
	put_u32(mr->verbs_mr, IBV_MR_HANDLE, handle);
	put_u32(mr->verbs_mr, IBV_MR_LKEY, lkey);
	put_u32(mr->verbs_mr, IBV_MR_RKEY, rkey);
	put_u32(mr->verbs_mr, VERBS_MR_TYPE, type);
	put_u32(mr->verbs_mr, VERBS_MR_ACCESS, (uint32_t)access);
	return mr;
}

// reg_mr(pd, addr, length, hca_va, access) returns the ibv_mr inside a
// verbs_mr: libibverbs' ibv_dereg_mr reads mr_type and access from it.
static void *usb4_reg_mr(void *ibv_pd, void *addr, size_t length, uint64_t hca_va, int access)
{
	struct usb4_pd *pd = ibv_pd;
	struct usb4_mr *mr = mr_alloc(ibv_pd, "reg_mr");
	uint32_t handle, lkey, rkey;
	if (!mr)
		return NULL;
	int err = USB4_GO(RegMR, pd->go, (uintptr_t)addr, length, hca_va, (uint32_t)access, &mr->go, &handle, &lkey, &rkey);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	// context, pd, addr and length are set by libibverbs after we return.
	return mr_filled(mr, handle, lkey, rkey, 0, access);
}

// reg_dmabuf_mr(pd, offset, length, iova, fd, access): an MR over a dma-buf
// (UVERBS_METHOD_REG_DMABUF_MR), a verbs_mr of type IBV_MR_TYPE_DMABUF_MR as
// rdma-core's ibv_cmd_reg_dmabuf_mr makes it, so libibverbs' ibv_dereg_mr
// does not undo a dontfork it never did. Every argument goes to the kernel
// as given, length 0 and fd -1 included: NCCL's probe
// ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) must get the module's own answer
// (EOPNOTSUPP without reg_user_mr_dmabuf, else what the op says).
static void *usb4_reg_dmabuf_mr(void *ibv_pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	struct usb4_pd *pd = ibv_pd;
	struct usb4_mr *mr = mr_alloc(ibv_pd, "reg_dmabuf_mr");
	uint32_t handle, lkey, rkey;
	if (!mr)
		return NULL;
	int err = USB4_GO(RegDmabufMR, pd->go, offset, length, iova, fd, (uint32_t)access, &mr->go, &handle, &lkey,
			  &rkey);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	// libibverbs sets context, pd, addr (the offset) and length after we
	// return; rdma-core's own command sets them too, so do we.
	void *ctx;
	memcpy(&ctx, pd->ibv_pd, sizeof(ctx)); // ibv_pd.context@0
	void *addr = (void *)(uintptr_t)offset;
	memcpy(mr->verbs_mr + IBV_MR_CONTEXT, &ctx, sizeof(ctx));
	memcpy(mr->verbs_mr + IBV_MR_PD, &pd, sizeof(void *));
	memcpy(mr->verbs_mr + IBV_MR_ADDR, &addr, sizeof(addr));
	memcpy(mr->verbs_mr + IBV_MR_LENGTH, &length, sizeof(length));
	return mr_filled(mr, handle, lkey, rkey, VERBS_MR_TYPE_DMABUF, access);
}

// mr_adopt: usb4_obj_adopt for an MR (its PD first), from its ibv_mr.
static int mr_adopt(struct usb4_mr *mr)
{
	void *pd;
	memcpy(&pd, mr->verbs_mr + IBV_MR_PD, sizeof(pd));
	struct usb4_adopt_req req = {0};
	int err = usb4_adopt_req_on_pd(pd, &req);
	if (err)
		return err;
	memcpy(&req.handle, mr->verbs_mr + IBV_MR_HANDLE, sizeof(req.handle));
	memcpy(&req.lkey, mr->verbs_mr + IBV_MR_LKEY, sizeof(req.lkey));
	memcpy(&req.rkey, mr->verbs_mr + IBV_MR_RKEY, sizeof(req.rkey));
	memcpy(&req.addr, mr->verbs_mr + IBV_MR_ADDR, sizeof(req.addr));
	memcpy(&req.length, mr->verbs_mr + IBV_MR_LENGTH, sizeof(req.length));
	return usb4_obj_adopt(USB4_CTX_OF(mr), &mr->go, &mr->image, USB4_OBJ_MR, &req);
}

static int usb4_dereg_mr(void *verbs_mr)
{
	struct usb4_mr *mr = verbs_mr;
	if (usb4_in_fork_child(USB4_CTX_OF(verbs_mr), "dereg_mr"))
		return usb4_errno(ENOSYS);
	int err = mr_adopt(mr);
	if (!err)
		err = usb4_destroy_errno(USB4_GO(DeregMR, mr->go));
	if (err)
		return usb4_errno(err);
	free(mr);
	return 0;
}

void usb4_set_slot(void **buf, size_t nslots, int op, void *fn)
{
	int16_t slot = usb4_abi_get()->slots[op];
	if (slot >= 0 && (size_t)slot < nslots)
		buf[slot] = fn;
}

void usb4_install_control_ops(void **buf, size_t nslots)
{
	usb4_set_slot(buf, nslots, USB4_OP_query_device_ex, (void *)usb4_query_device_ex);
	usb4_set_slot(buf, nslots, USB4_OP_query_port, (void *)usb4_query_port);
	usb4_set_slot(buf, nslots, USB4_OP_alloc_pd, (void *)usb4_alloc_pd);
	usb4_set_slot(buf, nslots, USB4_OP_dealloc_pd, (void *)usb4_dealloc_pd);
	usb4_set_slot(buf, nslots, USB4_OP_reg_mr, (void *)usb4_reg_mr);
	usb4_set_slot(buf, nslots, USB4_OP_dereg_mr, (void *)usb4_dereg_mr);
	usb4_set_slot(buf, nslots, USB4_OP_reg_dmabuf_mr, (void *)usb4_reg_dmabuf_mr);
	usb4_install_object_ops(buf, nslots);
}
