// Which devices this provider claims (DESIGN.md decision 6): usb4 devices by
// node GUID, name prefix or Thunderbolt parent, so udev renames
// (rocep*) and every rail and peer are claimed; rxe only when opted in.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

// node_guid = 0x0200544256524253 + (backend<<56) + (peer<<24) + rail with
// backend native 0 / Apple 1 (hellas-main:kernel/ibdev.c, the node_guid
// assignment in tbv_ibdev_register_one). The addition carries into byte 3
// from peer 0xAA on, so we subtract the base rather than mask bytes; the
// bounds are internal/usb4guid's (peer and rail <= 0xFFFF), and cshim's
// TestMatchGUIDWholeRange holds this function against that package.
bool usb4_guid_is_usb4(uint64_t guid)
{
	uint64_t v = guid - UINT64_C(0x0200544256524253); // wraps below the base
	uint64_t backend = v >> 56, peer = (v >> 24) & 0xffffffff, rail = v & 0xffffff;
	return backend <= 1 && peer <= 0xffff && rail <= 0xffff;
}

// usb4_read_node_guid parses <ibdev_path>/node_guid ("xxxx:xxxx:xxxx:xxxx").
// libibverbs fills sysfs_dev->node_guid only on its netlink path.
int usb4_read_node_guid(const char *ibdev_path, uint64_t *guid)
{
	char path[PATH_MAX], buf[64];
	unsigned int w[4];
	int n;

	if (snprintf(path, sizeof(path), "%s/node_guid", ibdev_path) >= (int)sizeof(path))
		return ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return EINVAL;
	buf[len] = 0;
	if (sscanf(buf, "%4x:%4x:%4x:%4x%n", &w[0], &w[1], &w[2], &w[3], &n) != 4)
		return EINVAL;
	*guid = (uint64_t)w[0] << 48 | (uint64_t)w[1] << 32 | (uint64_t)w[2] << 16 | w[3];
	return 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

// link_basename_is reports whether the symlink <dir>/<link> points at a
// path whose last element is want (e.g. device/driver -> .../thunderbolt).
static bool link_basename_is(const char *dir, const char *link, const char *want)
{
	char path[PATH_MAX], target[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, link) >= (int)sizeof(path))
		return false;
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = 0;
	const char *base = strrchr(target, '/');
	return strcmp(base ? base + 1 : target, want) == 0;
}

static bool has_thunderbolt_parent(const char *ibdev_path)
{
	// The parent is the NHI PCI function (driver "thunderbolt") or a
	// device on the thunderbolt bus.
	return link_basename_is(ibdev_path, "device/driver", "thunderbolt") ||
	       link_basename_is(ibdev_path, "device/subsystem", "thunderbolt");
}

static bool file_exists(const char *dir, const char *name)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return false;
	return access(path, F_OK) == 0;
}

enum usb4_kind usb4_classify(const struct usb4_devid *id)
{
	if (id->driver_id == USB4_RDMA_DRIVER_RXE)
		return USB4_KIND_RXE;
	// Every usb4 kernel module leaves driver_id unset (RDMA_DRIVER_UNKNOWN);
	// a device with any other id belongs to someone else.
	if (id->driver_id != USB4_RDMA_DRIVER_UNKNOWN)
		return USB4_KIND_NONE;
	if (id->guid_valid && usb4_guid_is_usb4(id->node_guid))
		return USB4_KIND_USB4;
	if (has_prefix(id->name, "usb4_rdma") || has_prefix(id->name, "usb4_apple"))
		return USB4_KIND_USB4;
	if (id->ibdev_path[0] && has_thunderbolt_parent(id->ibdev_path))
		return USB4_KIND_USB4;
	// rxe with its driver id hidden (sysfs fallback): an IB CA that names
	// its parent netdev in "parent" (linux:drivers/infiniband/sw/rxe/rxe_verbs.c).
	if (id->node_type == IBV_NODE_CA &&
	    (has_prefix(id->name, "rxe") || (id->ibdev_path[0] && file_exists(id->ibdev_path, "parent"))))
		return USB4_KIND_RXE;
	return USB4_KIND_NONE;
}

static void devid_from_sysfs(void *sysfs_dev, struct usb4_devid *id)
{
	const char *sd = sysfs_dev;
	uint32_t flags;

	memcpy(&flags, sd + SYSFS_DEV_FLAGS, sizeof(flags));
	memcpy(&id->node_guid, sd + SYSFS_DEV_NODE_GUID, sizeof(id->node_guid));
	memcpy(&id->driver_id, sd + SYSFS_DEV_DRIVER_ID, sizeof(id->driver_id));
	memcpy(&id->node_type, sd + SYSFS_DEV_NODE_TYPE, sizeof(id->node_type));
	id->name = sd + SYSFS_DEV_IBDEV_NAME;
	id->ibdev_path = sd + SYSFS_DEV_IBDEV_PATH;
	id->guid_valid = (flags & SYSFS_DEV_READ_NODE_GUID) != 0;
	if (!id->guid_valid && id->ibdev_path[0])
		id->guid_valid = usb4_read_node_guid(id->ibdev_path, &id->node_guid) == 0;
}

static enum usb4_kind sysfs_kind(void *sysfs_dev)
{
	struct usb4_devid id;
	devid_from_sysfs(sysfs_dev, &id);
	return usb4_classify(&id);
}

bool usb4_match_device(void *sysfs_dev)
{
	const struct usb4_abi *abi = usb4_abi_get();
	enum usb4_kind kind = sysfs_kind(sysfs_dev);
	uint32_t abi_ver, want;

	switch (kind) {
	case USB4_KIND_USB4:
		want = USB4_KERNEL_ABI;
		break;
	case USB4_KIND_RXE:
		if (!abi->claim_rxe)
			return false;
		want = RXE_KERNEL_ABI;
		break;
	default:
		return false;
	}
	// libibverbs checks only our [min, max] range, which spans both kinds.
	memcpy(&abi_ver, (const char *)sysfs_dev + abi->sysfs_abi_ver_off, sizeof(abi_ver));
	if (abi_ver != want) {
		fprintf(stderr, USB4_LOG_PREFIX "%s: kernel ABI %" PRIu32 " unsupported (want %" PRIu32 "); not claiming\n",
			(const char *)sysfs_dev + SYSFS_DEV_IBDEV_NAME, abi_ver, want);
		return false;
	}
	return true;
}

// Our verbs_device: libibverbs' 712 bytes, then what we keep per device.
struct usb4_device {
	unsigned char verbs_device[VERBS_DEVICE_SIZE];
	enum usb4_kind kind;
	uint32_t driver_id; // the kernel driver's ops.driver_id, for every ioctl
	uint64_t node_guid; // host order; 0 when unknown
};

void *usb4_alloc_device(void *sysfs_dev)
{
	struct usb4_device *dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	struct usb4_devid id;
	devid_from_sysfs(sysfs_dev, &id);
	dev->kind = usb4_classify(&id);
	dev->node_guid = id.guid_valid ? id.node_guid : 0;
	// netlink hides usb4's id (uverbs_no_driver_id_binding) and the sysfs
	// path never has one; the kernel still checks it in every ioctl.
	dev->driver_id = dev->kind == USB4_KIND_RXE ? USB4_RDMA_DRIVER_RXE : USB4_RDMA_DRIVER_UNKNOWN;
	return dev;
}

void usb4_uninit_device(void *vdev)
{
	free(vdev);
}

enum usb4_kind usb4_device_kind(const void *vdev, uint32_t *driver_id)
{
	const struct usb4_device *dev = vdev;
	*driver_id = dev->driver_id;
	return dev->kind;
}

uint64_t usb4_device_node_guid(const void *vdev)
{
	return ((const struct usb4_device *)vdev)->node_guid;
}
