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

#include "../shim.h"

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

int usb4goQueryDevice(uintptr_t ctx, struct usb4_device_attr *attr, uint64_t *cap_flags_ex)
{
	(void)ctx, (void)attr, (void)cap_flags_ex;
	return EOPNOTSUPP;
}

int usb4goQueryPort(uintptr_t ctx, uint8_t port, struct usb4_port_attr *attr)
{
	(void)ctx, (void)port, (void)attr;
	return EOPNOTSUPP;
}

// With USB4_STUB_PD_OK=1 PDs are heap handles (a missing dealloc leaks).
int usb4goAllocPD(uintptr_t ctx, uintptr_t *pd, uint32_t *pd_handle)
{
	(void)ctx;
	if (!getenv("USB4_STUB_PD_OK"))
		return EOPNOTSUPP;
	void *h = malloc(16);
	if (!h)
		return ENOMEM;
	*pd = (uintptr_t)h;
	*pd_handle = 1;
	return 0;
}

int usb4goDeallocPD(uintptr_t pd)
{
	if (!getenv("USB4_STUB_PD_OK"))
		return EOPNOTSUPP;
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

int usb4goDeregMR(uintptr_t mr)
{
	(void)mr;
	return EOPNOTSUPP;
}

// Objects: every create fails, as without a kernel, unless
// USB4_STUB_OBJ_OK=1: then CQs, QPs and SRQs are heap handles (a missing
// destroy leaks) without an engine object, and their destroys report
// USB4_STUB_EVENTS events of each kind (default 0). Destroy of an unknown
// handle is EBADF, as in the Go handle table.
static uint32_t stub_events(void)
{
	const char *v = getenv("USB4_STUB_EVENTS");
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

static int stub_obj(struct usb4_obj_info *out, uint32_t num)
{
	if (!getenv("USB4_STUB_OBJ_OK"))
		return EOPNOTSUPP;
	void *h = malloc(16);
	if (!h)
		return ENOMEM;
	out->go = (uintptr_t)h;
	out->handle = 1;
	out->num = num;
	out->eng = NULL;
	return 0;
}

// USB4_STUB_DESTROY_EIO=1 plays a disassociated device: destroys fail with
// EIO. Go then keeps the entry until the context closes; the stub frees it
// at once when the application opted in to such destroys succeeding
// (RDMAV_ALLOW_DISASSOC_DESTROY), since C will not destroy it again.
static int stub_destroy(uintptr_t h, struct usb4_event_counts *ev, bool comp)
{
	if (!getenv("USB4_STUB_OBJ_OK") || !h)
		return EBADF;
	if (getenv("USB4_STUB_DESTROY_EIO")) {
		if (getenv("RDMAV_ALLOW_DISASSOC_DESTROY"))
			free((void *)h);
		return EIO;
	}
	free((void *)h);
	ev->comp = comp ? stub_events() : 0;
	ev->async = stub_events();
	return 0;
}

int usb4goCreateCQ(uintptr_t ctx, int cqe, int channel_fd, int comp_vector, uint64_t user_handle,
		   struct usb4_obj_info *out)
{
	(void)ctx, (void)channel_fd, (void)comp_vector, (void)user_handle;
	return stub_obj(out, (uint32_t)cqe);
}

int usb4goDestroyCQ(uintptr_t cq, struct usb4_event_counts *ev)
{
	return stub_destroy(cq, ev, true);
}

int usb4goCreateQP(uintptr_t pd, struct usb4_qp_req *req, struct usb4_obj_info *out)
{
	(void)pd, (void)req;
	return stub_obj(out, 42);
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

int usb4goCreateSRQ(uintptr_t pd, uint64_t user_handle, struct usb4_ibv_srq_attr *attr, struct usb4_obj_info *out)
{
	(void)pd, (void)user_handle, (void)attr;
	return stub_obj(out, 0);
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

void usb4goWarm(void)
{
}
