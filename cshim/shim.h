// Internal interface of the libibverbs-facing shim. Declarations only: cgo
// includes this header in a file with //export functions, whose preamble may
// not contain definitions.
//
// Struct layouts below are facts of libibverbs' private ABI, identical in
// every rdma-core from v31 to master (../shared reference:
// rdma-core-private-abi.md §3, Appendix B; rdma-core:libibverbs/driver.h).
// We never include rdma-core headers: offsets that move between releases are
// probed at load time instead (probe.c).
#ifndef USB4_SHIM_H
#define USB4_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USB4_PROVIDER_NAME "usb4_rdma"
#define USB4_LOG_PREFIX "libusb4_rdma: "

// Kernel uverbs ABI versions we accept per device kind:
// usb4 TBV_IBDEV_ABI_VERSION (hellas-ai/thunderbolt-ibverbs:kernel/ibdev.c),
// rxe RXE_UVERBS_ABI_VERSION (linux:include/uapi/rdma/rdma_user_rxe.h).
#define USB4_KERNEL_ABI 1
#define RXE_KERNEL_ABI 2

// enum rdma_driver_id values (linux:include/uapi/rdma/ib_user_ioctl_verbs.h).
#define USB4_RDMA_DRIVER_UNKNOWN 0
#define USB4_RDMA_DRIVER_RXE 14

// struct verbs_match_ent, 24 bytes (rdma-core:libibverbs/driver.h).
struct usb4_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind; // 0 sentinel, 1 PCI, 2 modalias, 3 driver id
};
#define USB4_MATCH_DRIVER_ID 3

// struct verbs_device_ops, 72 bytes since v31 (rdma-core:libibverbs/driver.h).
struct usb4_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct usb4_match_ent *match_table;
	const void *const *static_providers;
	bool (*match_device)(void *sysfs_dev);
	void *(*alloc_context)(void *ibdev, int cmd_fd, void *private_data);
	void *(*import_context)(void *ibdev, int cmd_fd);
	void *(*alloc_device)(void *sysfs_dev);
	void (*uninit_device)(void *vdev);
};

// struct verbs_sysfs_dev field offsets (stable v33..master, except abi_ver
// which moved when num_ports was inserted in v35; see usb4_abi).
enum {
	SYSFS_DEV_FLAGS = 32,
	SYSFS_DEV_IBDEV_NAME = 112, // char[64]
	SYSFS_DEV_IBDEV_PATH = 176, // char[256]
	SYSFS_DEV_NODE_GUID = 944,  // host order; valid with READ_NODE_GUID
	SYSFS_DEV_DRIVER_ID = 952,
	SYSFS_DEV_NODE_TYPE = 956,
	SYSFS_DEV_ABI_VER_V34 = 964,
	SYSFS_DEV_ABI_VER_V35 = 968,
	SYSFS_DEV_READ_NODE_GUID = 2, // VSYSFS_READ_NODE_GUID flag
	IBV_NODE_CA = 1,
};

// struct verbs_device is 712 bytes (struct ibv_device 664 + ops, refcount,
// entry, sysfs, core_support); struct ibv_context is 328 bytes and is always
// the last member of struct verbs_context.
enum {
	VERBS_DEVICE_SIZE = 712,
	VERBS_DEVICE_OPS = 664,
	VERBS_DEVICE_SYSFS = 696,
	IBV_DEVICE_NAME = 24, // char[64]
	IBV_CONTEXT_SIZE = 328,
	IBV_CONTEXT_DEVICE = 0,
	IBV_CONTEXT_CMD_FD = 264,
	VERBS_CONTEXT_SZ_BEFORE_CTX = 8, // vctx->sz sits right before context
};

// What the probes found about the running libibverbs. Written once by the
// constructor, read-only afterwards: the only global state, forced on us by
// libibverbs' constructor-based registration.
struct usb4_abi {
	bool registered;
	unsigned pabi;        // private ABI: 34, 57, 59, 64 or 65
	const char *layout;   // ops layout name, e.g. "L36"; NULL if unknown
	unsigned ops_slots;   // members of the running verbs_context_ops
	const int16_t *slots; // slot index per enum usb4_op, -1 = absent
	size_t vctx_size;     // sizeof(struct verbs_context)
	size_t port_attr_size;   // sizeof(struct ibv_port_attr): 52 or 56
	size_t qp_comp_mask_off; // offsetof(struct verbs_qp, comp_mask); 0 = unknown
	size_t sysfs_abi_ver_off;
	bool claim_rxe; // rxe opt-in (settings.c)

	void *(*init_and_alloc_context)(void *ibdev, int cmd_fd, size_t alloc_size,
					void *context_offset, uint32_t driver_id);
	void (*uninit_context)(void *vctx);
	void (*set_ops)(void *vctx, const void *ops);
	void (*register_driver)(const struct usb4_device_ops *ops);
};

// The probe results; valid after the constructor ran.
const struct usb4_abi *usb4_abi_get(void);

// probe.c: inspects the libibverbs behind handle lib and fills *abi.
// Returns true if (PABI, layout) is a known pair. On false, *why holds a
// short description for the one refusal line. Side-effect free: it only
// writes into its own scratch buffers.
bool usb4_probe(void *lib, struct usb4_abi *abi, char *why, size_t why_len);

// Counts the members of the running verbs_context_ops by calling its
// verbs_set_ops on scratch buffers; 0 if the result is not recognisable.
unsigned usb4_probe_ops_slots(void (*set_ops)(void *vctx, const void *ops));

// settings.c: whether rxe devices are claimed (USB4VERBS_CLAIM_RXE, else the
// config file USB4VERBS_CONF or /etc/usb4verbs/usb4_rdma.conf).
bool usb4_settings_claim_rxe(void);
// Parses one config file; returns -1 if unreadable, else 0/1 for claim_rxe.
int usb4_settings_read_claim_rxe(const char *path);

// match.c: device classification (DESIGN.md decision 6).
enum usb4_kind {
	USB4_KIND_NONE = 0,
	USB4_KIND_USB4 = 1,
	USB4_KIND_RXE = 2,
};

struct usb4_devid {
	const char *name;       // ib device name (may be udev-renamed)
	const char *ibdev_path; // <sysfs>/class/infiniband/<name>
	uint64_t node_guid;     // host order
	bool guid_valid;
	uint32_t driver_id; // RDMA_DRIVER_*, 0 when unknown or hidden
	int node_type;
};

bool usb4_guid_is_usb4(uint64_t guid);
int usb4_read_node_guid(const char *ibdev_path, uint64_t *guid);
enum usb4_kind usb4_classify(const struct usb4_devid *id);
bool usb4_match_device(void *sysfs_dev);
void *usb4_alloc_device(void *sysfs_dev);
void usb4_uninit_device(void *vdev);
// Kind and kernel driver id recorded by usb4_alloc_device.
enum usb4_kind usb4_device_kind(const void *vdev, uint32_t *driver_id);

// context.c
void *usb4_alloc_context(void *ibdev, int cmd_fd, void *private_data);

// Implemented in Go (main.go, //export). Return 0 or a positive errno.
int usb4goOpenContext(char *ibdev_name, int cmd_fd, int kind, uintptr_t *handle);
void usb4goCloseContext(uintptr_t handle);

#endif // USB4_SHIM_H
