// Stand-in for the Go exports (control.go, objects.go) so the C parts build
// as a plain C shared object, e.g. under AddressSanitizer. With
// USB4_STUB_OPEN_OK=1 the open succeeds with a heap handle (so a missing
// close shows up as a leak) on libibverbs' command fd; other verbs fail
// unless the USB4_STUB_* switches below make them succeed.
#define _GNU_SOURCE // O_CLOEXEC
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../shim.h"
#include "engine.h"
#include "engine_api.h"

// The front's engine, as the real Go part gets it at usb4goStart: the stub
// has no engine of its own either.
static const struct usb4v_engine_api *engine;

int usb4goStart(uint32_t api_version, uint64_t *layout, struct usb4_go_config *cfg)
{
	if (api_version != USB4_GO_API_VERSION || !cfg->engine)
		return ELIBBAD;
	if (*layout != USB4_LAYOUT_HASH) {
		*layout = USB4_LAYOUT_HASH;
		return EPROTO;
	}
	engine = cfg->engine;
	return 0;
}

int usb4goOpenContext(char *ibdev_name, int cmd_fd, int kind, uint32_t driver_id, uint64_t node_guid,
		      struct usb4_open_info *info)
{
	(void)kind, (void)driver_id, (void)node_guid;
	if (!getenv("USB4_STUB_OPEN_OK"))
		return EOPNOTSUPP;
	char *h = malloc(64);
	if (!h)
		return ENOMEM;
	snprintf(h, 64, "%s/%d", ibdev_name, cmd_fd);
	info->handle = (uintptr_t)h;
	// With USB4_STUB_ASYNC_FD=1 libibverbs gets an async fd (which it owns
	// and closes) and the open completes; otherwise its own async-fd ioctl
	// on the fake device fails it.
	info->async_fd = -1;
	if (getenv("USB4_STUB_ASYNC_FD")) {
		info->async_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (info->async_fd < 0) {
			free(h);
			return errno;
		}
	}
	info->num_comp_vectors = 1;
	return 0;
}

void usb4goCloseContext(uintptr_t handle)
{
	char *h = (char *)handle;
	fprintf(stderr, "stub: close %s\n", h);
	free(h);
}

int usb4goQueryDevice(uintptr_t ctx, struct usb4_device_attr *attr, struct usb4_device_attr_ext *ext)
{
	(void)ctx, (void)attr, (void)ext;
	return EOPNOTSUPP;
}

int usb4goQueryPort(uintptr_t ctx, uint8_t port, struct usb4_port_attr *attr)
{
	(void)ctx, (void)port, (void)attr;
	return EOPNOTSUPP;
}

// With USB4_STUB_PD_OK=1 PDs are heap handles (a missing dealloc leaks)
// holding the process id of the image that made them: as in the Go part's
// handle table, another image's handle (a fork() parent's PD not adopted)
// finds nothing, EBADF.
static int stub_pd(uintptr_t *pd)
{
	pid_t *h = malloc(16);
	if (!h)
		return ENOMEM;
	*h = getpid();
	*pd = (uintptr_t)h;
	return 0;
}

int usb4goAllocPD(uintptr_t ctx, uintptr_t *pd, uint32_t *pd_handle)
{
	(void)ctx;
	if (!getenv("USB4_STUB_PD_OK"))
		return EOPNOTSUPP;
	*pd_handle = 1;
	return stub_pd(pd);
}

int usb4goDeallocPD(uintptr_t pd)
{
	if (!getenv("USB4_STUB_PD_OK"))
		return EOPNOTSUPP;
	if (*(pid_t *)pd != getpid())
		return EBADF;
	free((void *)pd);
	return 0;
}

int usb4goRegMR(uintptr_t pd, uintptr_t addr, uint64_t length, uint64_t iova, uint32_t access, uintptr_t *mr,
		uint32_t *mr_handle, uint32_t *lkey, uint32_t *rkey)
{
	(void)pd, (void)addr, (void)length, (void)iova, (void)access, (void)mr, (void)mr_handle, (void)lkey,
		(void)rkey;
	return EOPNOTSUPP;
}

// dma-buf MRs: the kernel's answer without reg_user_mr_dmabuf (EOPNOTSUPP),
// unless USB4_STUB_DMABUF=op plays a module with the op: length 0 EINVAL
// (hellas-gda-v2:kernel/ibdev.c tbv_reg_user_mr_dmabuf), fd < 0 EBADF, else
// an MR (a heap handle: a missing dereg shows up as a leak) with keys made
// from the fd.
enum { STUB_DMABUF_MAGIC = 0x646d6162 };

int usb4goRegDmabufMR(uintptr_t pd, uint64_t offset, uint64_t length, uint64_t iova, int fd, uint32_t access,
		      uintptr_t *mr, uint32_t *mr_handle, uint32_t *lkey, uint32_t *rkey)
{
	(void)pd, (void)offset, (void)iova, (void)access;
	const char *v = getenv("USB4_STUB_DMABUF");
	if (!v || strcmp(v, "op") != 0)
		return EOPNOTSUPP;
	if (!length)
		return EINVAL;
	if (fd < 0)
		return EBADF;
	uint32_t *h = malloc(sizeof(*h));
	if (!h)
		return ENOMEM;
	*h = STUB_DMABUF_MAGIC;
	*mr = (uintptr_t)h;
	*mr_handle = 7;
	*lkey = 0x100u + (uint32_t)fd;
	*rkey = 0x200u + (uint32_t)fd;
	return 0;
}

int usb4goDeregMR(uintptr_t mr)
{
	uint32_t *h = (uint32_t *)mr;
	if (!h || *h != STUB_DMABUF_MAGIC)
		return EOPNOTSUPP;
	*h = 0;
	free(h);
	return 0;
}

// Objects: every create fails, as without a kernel, unless
// USB4_STUB_OBJ_OK=1: then CQs, QPs and SRQs are heap handles (a missing
// destroy leaks), and their destroys report USB4_STUB_EVENTS events of each
// kind (default 0). Destroy of an unknown handle is EBADF, as in the Go
// handle table. With USB4_STUB_ENGINE=1 each object also gets a data-path
// engine object on kernel commands, whose system calls (stub_sys) succeed:
// then posts, polls and re-arms run in the real engine.
struct stub_obj {
	int kind; // 0 CQ, 1 QP, 2 SRQ
	void *eng;
};

static ssize_t stub_write(void *ctx, int fd, const void *buf, size_t len)
{
	(void)ctx, (void)fd, (void)buf;
	return (ssize_t)len; // POLL_CQ: count stays 0; posts and re-arms succeed
}

static int stub_ioctl(void *ctx, int fd, unsigned long req, void *arg)
{
	(void)ctx, (void)fd, (void)req, (void)arg;
	return -EOPNOTSUPP;
}

static int stub_mmap(void *ctx, int fd, uint64_t off, size_t len, void **addr)
{
	(void)ctx, (void)fd, (void)off, (void)len, (void)addr;
	return -ENODEV;
}

static int stub_munmap(void *ctx, void *addr, size_t len)
{
	(void)ctx, (void)addr, (void)len;
	return 0;
}

static const struct usb4v_sys stub_sys = {
	.write = stub_write, .ioctl = stub_ioctl, .mmap = stub_mmap, .munmap = stub_munmap,
};

static uint32_t stub_events(void)
{
	const char *v = getenv("USB4_STUB_EVENTS");
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

static void *stub_engine(uintptr_t h)
{
	return h ? ((struct stub_obj *)h)->eng : NULL;
}

static int stub_obj(struct usb4_obj_info *out, int kind, uint32_t num, const struct usb4_qp_req *req)
{
	if (!getenv("USB4_STUB_OBJ_OK"))
		return EOPNOTSUPP;
	struct stub_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return ENOMEM;
	o->kind = kind;
	if (getenv("USB4_STUB_ENGINE")) {
		if (kind == 0)
			o->eng = engine->cq_new(&stub_sys, -1, 1, num);
		else if (kind == 1)
			o->eng = engine->qp_new(&stub_sys, -1, 1, num, USB4V_QPT_RC, 0, 1, 1, 0,
					      stub_engine(req->send_cq), stub_engine(req->recv_cq),
					      stub_engine(req->srq));
		else
			o->eng = engine->srq_new(&stub_sys, -1, 1, 1);
		if (!o->eng) {
			free(o);
			return ENOMEM;
		}
	}
	out->go = (uintptr_t)o;
	out->handle = 1;
	out->num = num;
	out->eng = o->eng;
	return 0;
}

// The engine object of an object whose destroy failed for good (a gone
// device): Go keeps it until the context closes; on a successful destroy Go
// disowns it and objects.c frees it after the acks.
static void stub_free_engine(struct stub_obj *o)
{
	if (!o->eng)
		return;
	if (o->kind == 0)
		engine->cq_free(o->eng);
	else if (o->kind == 1)
		engine->qp_free(o->eng, 0);
	else
		engine->srq_free(o->eng);
}

// USB4_STUB_DESTROY_EIO=1 plays a disassociated device: destroys fail with
// EIO. Go then keeps the entry until the context closes; the stub frees it
// at once when the application opted in to such destroys succeeding
// (RDMAV_ALLOW_DISASSOC_DESTROY), since C will not destroy it again.
static int stub_destroy(uintptr_t h, struct usb4_event_counts *ev, bool comp)
{
	if (!getenv("USB4_STUB_OBJ_OK") || !h)
		return EBADF;
	struct stub_obj *o = (struct stub_obj *)h;
	if (getenv("USB4_STUB_DESTROY_EIO")) {
		if (getenv("RDMAV_ALLOW_DISASSOC_DESTROY")) {
			stub_free_engine(o);
			free(o);
		}
		return EIO;
	}
	free(o); // the engine is objects.c's now
	ev->comp = comp ? stub_events() : 0;
	ev->async = stub_events();
	return 0;
}

int usb4goCreateCQ(uintptr_t ctx, int cqe, int channel_fd, int comp_vector, uint64_t user_handle,
		   struct usb4_obj_info *out)
{
	(void)ctx, (void)channel_fd, (void)comp_vector, (void)user_handle;
	return stub_obj(out, 0, (uint32_t)cqe, NULL);
}

int usb4goDestroyCQ(uintptr_t cq, struct usb4_event_counts *ev)
{
	return stub_destroy(cq, ev, true);
}

int usb4goResizeCQ(uintptr_t cq, int cqe, uint32_t *granted)
{
	(void)cq, (void)cqe, (void)granted;
	return EOPNOTSUPP;
}

int usb4goCreateQP(uintptr_t pd, struct usb4_qp_req *req, struct usb4_obj_info *out)
{
	(void)pd;
	return stub_obj(out, 1, 42, req);
}

int usb4goModifyQP(uintptr_t qp, struct usb4_ibv_qp_attr *attr, int mask)
{
	(void)qp, (void)attr, (void)mask;
	return EBADF;
}

int usb4goQueryQP(uintptr_t qp, int mask, struct usb4_ibv_qp_attr *attr, struct usb4_ibv_qp_cap *init_cap,
		  int32_t *sq_sig_all)
{
	(void)qp, (void)mask, (void)attr, (void)init_cap, (void)sq_sig_all;
	return EBADF;
}

int usb4goDestroyQP(uintptr_t qp, struct usb4_event_counts *ev)
{
	return stub_destroy(qp, ev, false);
}

// attach_mcast/detach_mcast: logs what reached "the kernel" and answers as
// ib_attach_mcast would (EINVAL for a GID that is not multicast), or as a
// device without multicast with USB4_STUB_MCAST_REFUSE (EOPNOTSUPP).
int usb4goMcast(uintptr_t qp, int attach, uint8_t *gid, uint16_t lid)
{
	const struct stub_obj *o = (const struct stub_obj *)qp;
	if (!o || o->kind != 1)
		return EBADF;
	fprintf(stderr, "stub: %s_mcast qp gid %02x%02x..%02x%02x%02x%02x lid %#x\n", attach ? "attach" : "detach",
		gid[0], gid[1], gid[12], gid[13], gid[14], gid[15], (unsigned)lid);
	if (getenv("USB4_STUB_MCAST_REFUSE"))
		return EOPNOTSUPP;
	return gid[0] == 0xff ? 0 : EINVAL;
}

int usb4goCreateSRQ(uintptr_t pd, uint64_t user_handle, struct usb4_ibv_srq_attr *attr, struct usb4_obj_info *out)
{
	(void)pd, (void)user_handle, (void)attr;
	return stub_obj(out, 2, 0, NULL);
}

int usb4goModifySRQ(uintptr_t srq, struct usb4_ibv_srq_attr *attr, int mask)
{
	(void)srq, (void)attr, (void)mask;
	return EBADF;
}

int usb4goQuerySRQ(uintptr_t srq, struct usb4_ibv_srq_attr *attr)
{
	(void)srq, (void)attr;
	return EBADF;
}

int usb4goDestroySRQ(uintptr_t srq, struct usb4_event_counts *ev)
{
	return stub_destroy(srq, ev, false);
}

int usb4goCreateAH(uintptr_t pd, struct usb4_ibv_ah_attr *attr, struct usb4_obj_info *out)
{
	(void)pd, (void)attr, (void)out;
	return EOPNOTSUPP;
}

int usb4goDestroyAH(uintptr_t ah)
{
	(void)ah;
	return EBADF;
}

int usb4goAllocMW(uintptr_t pd, uint32_t type, uintptr_t *mw, uint32_t *mw_handle, uint32_t *rkey)
{
	(void)pd, (void)type, (void)mw, (void)mw_handle, (void)rkey;
	return EOPNOTSUPP;
}

int usb4goDeallocMW(uintptr_t mw)
{
	(void)mw;
	return EOPNOTSUPP;
}

void usb4goWarm(void)
{
}

void usb4goBeforeFork(void)
{
}

// A context a fork() parent opened: the stub adopts it under a new name.
int usb4goAdoptContext(char *ibdev_name, int cmd_fd, int async_fd, int kind, uint32_t driver_id, uint64_t node_guid,
		       uint32_t num_comp_vectors, uint64_t core_support, uintptr_t *handle)
{
	(void)cmd_fd, (void)async_fd, (void)kind, (void)driver_id, (void)node_guid, (void)num_comp_vectors,
		(void)core_support;
	char *h = malloc(strlen(ibdev_name) + 16);
	if (!h)
		return ENOMEM;
	sprintf(h, "%s/adopted", ibdev_name);
	*handle = (uintptr_t)h;
	return 0;
}

// A fork() parent's object in the child: PDs and the engine objects of CQs,
// QPs and SRQs as the creates make them; the rest as the stub creates them
// (EOPNOTSUPP).
int usb4goAdoptObject(uintptr_t ctx, int kind, struct usb4_adopt_req *req, uintptr_t *out)
{
	(void)ctx;
	if (kind == USB4_OBJ_PD)
		return stub_pd(out);
	if (kind != USB4_OBJ_CQ && kind != USB4_OBJ_QP && kind != USB4_OBJ_SRQ)
		return EOPNOTSUPP;
	struct stub_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return ENOMEM;
	o->kind = kind == USB4_OBJ_CQ ? 0 : kind == USB4_OBJ_QP ? 1 : 2;
	o->eng = req->eng;
	*out = (uintptr_t)o;
	return 0;
}

void usb4goAfterFork(void)
{
}
