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
	VERBS_DEVICE_CORE_SUPPORT = 704,
	IBV_DEVICE_NAME = 24, // char[64]
	IBV_CONTEXT_SIZE = 328,
	IBV_CONTEXT_DEVICE = 0,
	IBV_CONTEXT_CMD_FD = 264,
	IBV_CONTEXT_ASYNC_FD = 268,
	IBV_CONTEXT_NUM_COMP_VECTORS = 272,
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
	bool force_kernel_commands; // usb4: no CQ ring, no DV (settings.c)
	bool dv_send;               // usb4: DV send queues of ours, at a QP's first post (settings.c)

	void *(*init_and_alloc_context)(void *ibdev, int cmd_fd, size_t alloc_size,
					void *context_offset, uint32_t driver_id);
	void (*uninit_context)(void *vctx);
	void (*set_ops)(void *vctx, const void *ops);
	void (*register_driver)(const struct usb4_device_ops *ops);
	// libibverbs' verbs_allow_disassociate_destroy; NULL if not exported.
	const bool *allow_disassoc_destroy;
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

// settings.c: the user settings, from the environment, else the config
// file USB4VERBS_CONF or /etc/usb4verbs/usb4_rdma.conf.
struct usb4_settings {
	bool claim_rxe;             // claim rxe devices
	bool force_kernel_commands; // usb4: kernel-command polling, no DV
	bool dv_send;               // usb4: DV send queues of ours (off: left to applications)
};
struct usb4_settings usb4_settings_read(void);
// Parses one config file into *s (keys it does not set stay); -1 if
// unreadable, else 0.
int usb4_settings_read_file(const char *path, struct usb4_settings *s);

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
// usb4_errno(err) sets errno to err when it is not 0 and returns err: every
// failing int-returning control op ends with it (verbs.c).
int usb4_errno(int err);
// usb4_destroy_errno(err) is what a destroy, dealloc or dereg reports for the
// kernel's err: 0 also for EIO when the application opted in with
// RDMAV_ALLOW_DISASSOC_DESTROY (a removed device: libibverbs'
// verbs_is_destroy_err), and the caller then frees its object as after a
// success. objects.c.
int usb4_destroy_errno(int err);
int usb4_read_node_guid(const char *ibdev_path, uint64_t *guid);
enum usb4_kind usb4_classify(const struct usb4_devid *id);
bool usb4_match_device(void *sysfs_dev);
void *usb4_alloc_device(void *sysfs_dev);
void usb4_uninit_device(void *vdev);
// Kind and kernel driver id recorded by usb4_alloc_device.
enum usb4_kind usb4_device_kind(const void *vdev, uint32_t *driver_id);
// Node GUID (host order) recorded by usb4_alloc_device; 0 when unknown.
uint64_t usb4_device_node_guid(const void *vdev);

// context.c
void *usb4_alloc_context(void *ibdev, int cmd_fd, void *private_data);
// The Go context handle of an ibv_context of ours.
uintptr_t usb4_ctx_handle(void *ibv_ctx);

// A destroyed CQ, QP or SRQ whose memory is kept (objects.c): libibverbs'
// data-op inlines read ibv_cq/ibv_qp/ibv_srq->context before any provider
// code runs, so a poll or post after destroy would read freed memory. The
// shell stays valid, marked destroyed, until its context closes or
// USB4_QUARANTINE_MAX newer shells of the same context push it out.
enum usb4_shell_kind { USB4_SHELL_CQ = 1, USB4_SHELL_QP, USB4_SHELL_SRQ };
struct usb4_shell {
	struct usb4_shell *next;
	enum usb4_shell_kind kind;
};
#define USB4_QUARANTINE_MAX 4096u
// Appends s to ibv_ctx's quarantine, freeing the oldest shell beyond the bound.
void usb4_quarantine(void *ibv_ctx, struct usb4_shell *s);
// Frees a quarantined shell's whole object (objects.c).
void usb4_shell_free(struct usb4_shell *s);

// A CQ of ours (objects.c): the ibv_cq/ibv_cq_ex pointer libibverbs hands
// back is a pointer to it. An extended CQ (cqex.c) embeds it first.
enum { VERBS_CQ_SIZE = 288 }; // struct verbs_cq, a union of ibv_cq and ibv_cq_ex
struct usb4v_cq;
struct usb4_cq {
	unsigned char verbs_cq[VERBS_CQ_SIZE];
	uintptr_t go;         // 0 once destroyed
	struct usb4v_cq *eng; // NULL once destroyed: data ops then fail
	struct usb4_shell shell;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};
// Creates the kernel CQ and a zeroed object of size bytes (at least a
// struct usb4_cq) around it; NULL with errno set on failure.
struct usb4_cq *usb4_cq_create(void *ibv_ctx, int cqe, void *channel, int comp_vector, size_t size);

// verbs.c: control ops, installed by slot index (enum usb4_op).
void usb4_install_control_ops(void **ops_buf, size_t nslots);

// struct ibv_device_attr, 232 bytes, unchanged v28..master
// (rdma-core:libibverbs/verbs.h; rdma-core-private-abi.md §5).
struct usb4_device_attr {
	char fw_ver[64];
	uint64_t node_guid;      // big endian, as libibverbs hands it out
	uint64_t sys_image_guid; // big endian
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int32_t max_qp;
	int32_t max_qp_wr;
	uint32_t device_cap_flags;
	int32_t max_sge;
	int32_t max_sge_rd;
	int32_t max_cq;
	int32_t max_cqe;
	int32_t max_mr;
	int32_t max_pd;
	int32_t max_qp_rd_atom;
	int32_t max_ee_rd_atom;
	int32_t max_res_rd_atom;
	int32_t max_qp_init_rd_atom;
	int32_t max_ee_init_rd_atom;
	uint32_t atomic_cap;
	int32_t max_ee;
	int32_t max_rdd;
	int32_t max_mw;
	int32_t max_raw_ipv6_qp;
	int32_t max_raw_ethy_qp;
	int32_t max_mcast_grp;
	int32_t max_mcast_qp_attach;
	int32_t max_total_mcast_qp_attach;
	int32_t max_ah;
	int32_t max_fmr;
	int32_t max_map_per_fmr;
	int32_t max_srq;
	int32_t max_srq_wr;
	int32_t max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

// Members of struct ibv_device_attr_ex past orig_attr (rdma-core:libibverbs/
// verbs.h; offsets of v44, unchanged since v35 added phys_port_cnt_ex), and
// the end of each group libibverbs' ibv_cmd_query_device_any copies whole.
enum {
	DEVICE_ATTR_EX_COMP_MASK = 232,
	DEVICE_ATTR_EX_ODP_CAPS = 240,           // general_caps u64, rc/uc/ud u32; ends 264
	DEVICE_ATTR_EX_TIMESTAMP_MASK = 264,     // u64
	DEVICE_ATTR_EX_HCA_CORE_CLOCK = 272,     // u64
	DEVICE_ATTR_EX_CAP_FLAGS_EX = 280,       // uint64_t device_cap_flags_ex
	DEVICE_ATTR_EX_RSS_CAPS = 296,           // three u32 copied; the group ends 328
	DEVICE_ATTR_EX_MAX_WQ_TYPE_RQ = 328,     // u32
	DEVICE_ATTR_EX_RAW_PACKET_CAPS = 344,    // u32
	DEVICE_ATTR_EX_TM_CAPS = 348,            // five u32; ends 368
	DEVICE_ATTR_EX_CQ_MOD_CAPS = 368,        // max_cq_count u16, max_cq_period u16
	DEVICE_ATTR_EX_MAX_DM_SIZE = 376,        // u64
	DEVICE_ATTR_EX_XRC_ODP_CAPS = 392,       // u32
	DEVICE_ATTR_EX_PHYS_PORT_CNT_EX = 396,   // uint32_t, since v35
	DEVICE_ATTR_EX_SIZE = 400,
};

// What ib_uverbs_ex_query_device_resp carries past its base, as the Go part
// hands it over (0 where the kernel's response_length stopped short).
struct usb4_device_attr_ext {
	uint64_t cap_flags_ex;
	uint64_t odp_general_caps;
	uint32_t odp_rc_caps, odp_uc_caps, odp_ud_caps, xrc_odp_caps;
	uint64_t timestamp_mask;
	uint64_t hca_core_clock;
	uint32_t rss_supported_qpts, rss_max_rwq_indirection_tables, rss_max_rwq_indirection_table_size;
	uint32_t max_wq_type_rq;
	uint32_t raw_packet_caps;
	uint32_t tm_max_rndv_hdr_size, tm_max_num_tags, tm_flags, tm_max_ops, tm_max_sge;
	uint16_t max_cq_moderation_count, max_cq_moderation_period;
	uint64_t max_dm_size;
};

// struct ibv_port_attr in its v49+ form (56 bytes); older libraries have 52
// and get only that much (usb4_abi.port_attr_size).
struct usb4_port_attr {
	uint32_t state;
	uint32_t max_mtu;
	uint32_t active_mtu;
	int32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
	uint32_t active_speed_ex;
};

// Public libibverbs structs the control ops read and write, mirrored with
// the layouts of rdma-core:libibverbs/verbs.h (unchanged v28..master,
// rdma-core-private-abi.md §5; offsets asserted in objects.c).
struct usb4_ibv_global_route {
	_Alignas(8) uint8_t dgid[16]; // union ibv_gid has 8-byte alignment
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct usb4_ibv_ah_attr {
	struct usb4_ibv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

struct usb4_ibv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct usb4_ibv_qp_attr {
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu;
	uint32_t path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	struct usb4_ibv_qp_cap cap;
	struct usb4_ibv_ah_attr ah_attr;
	struct usb4_ibv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

struct usb4_ibv_qp_init_attr {
	void *qp_context;
	void *send_cq;
	void *recv_cq;
	void *srq;
	struct usb4_ibv_qp_cap cap;
	uint32_t qp_type;
	int32_t sq_sig_all;
};

struct usb4_ibv_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

// Events the kernel reported for a CQ, QP or SRQ up to its destruction
// (ib_uverbs_destroy_{cq,qp,srq}_resp); QPs and SRQs have only async events.
struct usb4_event_counts {
	uint32_t comp;
	uint32_t async;
};

// What Go reports about a new kernel object. eng is the data-path engine's
// object (struct usb4v_cq/qp/srq of provider/dataplane), C memory owned by Go.
struct usb4_obj_info {
	uintptr_t go;    // our Go handle
	uint32_t handle; // kernel handle
	uint32_t num;    // CQ: entries granted; QP: qp_num; AH: rxe AH index
	void *eng;
};

// A QP to create: Go handles of its objects plus the caller's request.
struct usb4_qp_req {
	uintptr_t send_cq, recv_cq, srq; // srq 0 = none
	uint64_t user_handle;
	uint32_t qp_type;
	int32_t sq_sig_all;
	struct usb4_ibv_qp_cap cap; // in: requested, out: granted
};

// struct ibv_pd (16 bytes: context@0, handle@8) followed by our Go handle.
enum { IBV_PD_CONTEXT = 0, IBV_PD_HANDLE = 8, IBV_PD_SIZE = 16 };
struct usb4_pd {
	unsigned char ibv_pd[IBV_PD_SIZE];
	uintptr_t go;
	unsigned image; // usb4_go_image() of go's image (usb4_obj_adopt)
};

// What the Go side reports about a freshly opened context.
struct usb4_open_info {
	uintptr_t handle; // Go handle of the context
	int async_fd;     // -1 if none; libibverbs owns it (closes it on uninit)
	uint32_t num_comp_vectors;
	uint64_t core_support; // UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT
};

// Implemented in the Go part (gopart/*.go, //export), which the front
// library loads only when it opens a context (golib.c) and reaches through
// struct usb4_go_api, never by link. Return 0 or a positive errno.
//
// Bump USB4_GO_API_VERSION whenever an entry below or a struct it takes
// changes: a front and a Go part from different builds then refuse each
// other (usb4goStart) instead of misreading arguments.
#define USB4_GO_API_VERSION 7
// The layout both libraries were built with: the hash of the C headers they
// share (cshim/*.h, provider/dataplane/*.h, uapi/c/*.h), which
// scripts/cgo-headers.sh computes at build time and scripts/build-provider.sh
// gives both builds (-DUSB4_CGO_HEADERS=0x...). The Go part reads engine and
// front structs field by field, so a pair whose hashes differ refuses to
// start (usb4goStart: EPROTO) even where nobody bumped USB4_GO_API_VERSION.
// 0 when built without it (plain `go build`, test builds).
#ifndef USB4_CGO_HEADERS
#define USB4_CGO_HEADERS 0
#endif
#define USB4_LAYOUT_HASH ((uint64_t)USB4_CGO_HEADERS)
// What the Go part takes over from the front at start (settings.c).
// Version 3 added dv_send, version 4 usb4goAdoptObject and engine, version 5
// the removal record's entries in engine (provider/dataplane/engine_api.h),
// version 6 the layout hash, version 7 usb4goMcast.
struct usb4_go_config {
	bool force_kernel_commands;
	bool dv_send;
	// The front's engine (golib.c): the Go part has none of its own and
	// makes, drives and frees every data-path object through this table.
	const struct usb4v_engine_api *engine;
};
// layout: the front's USB4_LAYOUT_HASH; on EPROTO (the Go part was built
// from other headers) it gets the Go part's.
int usb4goStart(uint32_t api_version, uint64_t *layout, struct usb4_go_config *cfg);
// Creates the kernel ucontext on libibverbs' cmd_fd, which stays libibverbs',
// for the device as libibverbs and match.c identified it (kind, kernel
// driver id for the ioctl headers, node GUID or 0).
int usb4goOpenContext(char *ibdev_name, int cmd_fd, int kind, uint32_t driver_id, uint64_t node_guid,
		      struct usb4_open_info *info);
void usb4goCloseContext(uintptr_t ctx);
int usb4goQueryDevice(uintptr_t ctx, struct usb4_device_attr *attr, struct usb4_device_attr_ext *ext);
int usb4goQueryPort(uintptr_t ctx, uint8_t port, struct usb4_port_attr *attr);
int usb4goAllocPD(uintptr_t ctx, uintptr_t *pd, uint32_t *pd_handle);
int usb4goDeallocPD(uintptr_t pd);
int usb4goRegMR(uintptr_t pd, uintptr_t addr, uint64_t length, uint64_t iova, uint32_t access, uintptr_t *mr,
		uint32_t *mr_handle, uint32_t *lkey, uint32_t *rkey);
int usb4goDeregMR(uintptr_t mr);
// A dma-buf MR (UVERBS_METHOD_REG_DMABUF_MR); fd and length go to the kernel
// unchecked, so a module without reg_user_mr_dmabuf answers EOPNOTSUPP.
int usb4goRegDmabufMR(uintptr_t pd, uint64_t offset, uint64_t length, uint64_t iova, int fd, uint32_t access,
		      uintptr_t *mr, uint32_t *mr_handle, uint32_t *lkey, uint32_t *rkey);
int usb4goCreateCQ(uintptr_t ctx, int cqe, int channel_fd, int comp_vector, uint64_t user_handle,
		   struct usb4_obj_info *out);
int usb4goDestroyCQ(uintptr_t cq, struct usb4_event_counts *ev);
// On success *granted is the kernel's new size (also when remapping failed).
int usb4goResizeCQ(uintptr_t cq, int cqe, uint32_t *granted);
int usb4goCreateQP(uintptr_t pd, struct usb4_qp_req *req, struct usb4_obj_info *out);
int usb4goModifyQP(uintptr_t qp, struct usb4_ibv_qp_attr *attr, int mask);
int usb4goQueryQP(uintptr_t qp, int mask, struct usb4_ibv_qp_attr *attr, struct usb4_ibv_qp_cap *init_cap,
		  int32_t *sq_sig_all);
int usb4goDestroyQP(uintptr_t qp, struct usb4_event_counts *ev);
// ATTACH_MCAST (attach 1) or DETACH_MCAST (attach 0) of the QP to the
// multicast group gid (16 bytes, MGID; read only: cgo exports no const) with
// MLID lid; the kernel's errno.
int usb4goMcast(uintptr_t qp, int attach, uint8_t *gid, uint16_t lid);
int usb4goCreateSRQ(uintptr_t pd, uint64_t user_handle, struct usb4_ibv_srq_attr *attr, struct usb4_obj_info *out);
int usb4goModifySRQ(uintptr_t srq, struct usb4_ibv_srq_attr *attr, int mask);
int usb4goQuerySRQ(uintptr_t srq, struct usb4_ibv_srq_attr *attr);
int usb4goDestroySRQ(uintptr_t srq, struct usb4_event_counts *ev);
int usb4goCreateAH(uintptr_t pd, struct usb4_ibv_ah_attr *attr, struct usb4_obj_info *out);
int usb4goDestroyAH(uintptr_t ah);
// Memory windows (provider.PD.AllocMW): the kernel's handle and rkey.
int usb4goAllocMW(uintptr_t pd, uint32_t type, uintptr_t *mw, uint32_t *mw_handle, uint32_t *rkey);
int usb4goDeallocMW(uintptr_t mw);
// A no-op: a thread that calls it has a Go M bound afterwards (fork.c).
void usb4goWarm(void);
// Around fork() in a process whose Go part runs (fork.c's atfork prepare and
// parent handlers): no runtime thread is being created while it forks.
void usb4goBeforeFork(void);
void usb4goAfterFork(void);
// A Go context of this image for a context a fork() parent opened (its
// ucontext exists on cmd_fd; async_fd, the vector count and core support are
// what the first open reported): fork.c, at the first control verb on it.
int usb4goAdoptContext(char *ibdev_name, int cmd_fd, int async_fd, int kind, uint32_t driver_id, uint64_t node_guid,
		       uint32_t num_comp_vectors, uint64_t core_support, uintptr_t *handle);
// An object a fork() parent created, as fork.c's usb4_obj_adopt describes it
// to the child's Go part (the kernel's handle and what its ibv struct says).
enum usb4_obj_kind { USB4_OBJ_PD = 1, USB4_OBJ_MR, USB4_OBJ_CQ, USB4_OBJ_QP, USB4_OBJ_SRQ, USB4_OBJ_AH, USB4_OBJ_MW };
struct usb4_adopt_req {
	uintptr_t pd;           // MR, QP, SRQ, AH, MW: this image's Go handle of its PD
	void *eng;              // CQ, QP, SRQ: the engine object
	uint64_t addr, length;  // MR
	uint32_t handle;        // ibv_*->handle
	uint32_t num;           // CQ: cqe; QP: qp_num
	uint32_t type;          // QP: qp_type; MW: type
	uint32_t lkey, rkey;    // MR; MW: rkey
};
// A Go object of this image for it on the adopted context ctx: *out is its
// handle. Control verbs on it then go to the kernel, as rdma-core's do.
int usb4goAdoptObject(uintptr_t ctx, int kind, struct usb4_adopt_req *req, uintptr_t *out);

// Every Go entry point as (member of struct usb4_go_api, exported name).
#define USB4_GO_ENTRIES(X)                                                                                   \
	X(Start, usb4goStart)                                                                                \
	X(OpenContext, usb4goOpenContext)                                                                    \
	X(CloseContext, usb4goCloseContext)                                                                  \
	X(QueryDevice, usb4goQueryDevice)                                                                    \
	X(QueryPort, usb4goQueryPort)                                                                        \
	X(AllocPD, usb4goAllocPD)                                                                            \
	X(DeallocPD, usb4goDeallocPD)                                                                        \
	X(RegMR, usb4goRegMR)                                                                                \
	X(DeregMR, usb4goDeregMR)                                                                            \
	X(CreateCQ, usb4goCreateCQ)                                                                          \
	X(DestroyCQ, usb4goDestroyCQ)                                                                        \
	X(ResizeCQ, usb4goResizeCQ)                                                                          \
	X(CreateQP, usb4goCreateQP)                                                                          \
	X(ModifyQP, usb4goModifyQP)                                                                          \
	X(QueryQP, usb4goQueryQP)                                                                            \
	X(DestroyQP, usb4goDestroyQP)                                                                        \
	X(Mcast, usb4goMcast)                                                                                \
	X(CreateSRQ, usb4goCreateSRQ)                                                                        \
	X(ModifySRQ, usb4goModifySRQ)                                                                        \
	X(QuerySRQ, usb4goQuerySRQ)                                                                          \
	X(DestroySRQ, usb4goDestroySRQ)                                                                      \
	X(CreateAH, usb4goCreateAH)                                                                          \
	X(DestroyAH, usb4goDestroyAH)                                                                        \
	X(AllocMW, usb4goAllocMW)                                                                            \
	X(DeallocMW, usb4goDeallocMW)                                                                        \
	X(RegDmabufMR, usb4goRegDmabufMR)                                                                    \
	X(BeforeFork, usb4goBeforeFork)                                                                      \
	X(AfterFork, usb4goAfterFork)                                                                        \
	X(AdoptContext, usb4goAdoptContext)                                                                  \
	X(AdoptObject, usb4goAdoptObject)                                                                    \
	X(Warm, usb4goWarm)

// The Go part's entry points, resolved with dlsym (golib.c); each member has
// the type of the prototype above, so a call through it is checked as a
// direct call would be.
#define USB4_GO_MEMBER(member, name) __typeof__(&name) member;
struct usb4_go_api {
	USB4_GO_ENTRIES(USB4_GO_MEMBER)
};

// gogate.c: every call from the front into the Go part goes through
// USB4_GO (int entries) or USB4_GO_VOID (issue 22). The Go part runs on
// small goroutine stacks; an application signal handler installed without
// SA_ONSTACK (qperf's, old Pythons') that runs there overflows them, and a
// siglongjmp out of a handler that runs there jumps over Go frames. So
// usb4_go_enter blocks every asynchronous signal on the calling thread
// (all but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) and
// usb4_go_leave restores the caller's mask: a signal that arrives
// meanwhile is delivered on return, in C. The Go part was loaded under the
// same mask and without asynchronous preemption, so the runtime's own
// threads block those signals for good but SIGCHLD and SIGPROF, which it
// unblocks on its threads whatever the mask: for these (and SIGURG, should
// GODEBUG turn preemption back on) an application handler gets SA_ONSTACK
// added at every call, as the runtime does at load to the handlers it
// finds. A thread whose earlier call never came back (it left
// Go by a longjmp) is refused: USB4_GO gives ENOTRECOVERABLE, one line.
// The caller's signal mask (a sigset_t; shim.h is also compiled without
// the POSIX headers' feature macros).
struct usb4_go_saved {
	_Alignas(8) unsigned char sigset[128];
};
int usb4_go_enter(struct usb4_go_saved *saved, const char *entry);
void usb4_go_leave(const struct usb4_go_saved *saved);
// Blocks what usb4_go_enter blocks, without the other checks (golib.c: the
// load of the Go part runs under it); usb4_go_restore_signals undoes it.
void usb4_go_block_signals(struct usb4_go_saved *saved);
void usb4_go_restore_signals(const struct usb4_go_saved *saved);
// Whether this thread is inside a call into the Go part (async-signal-safe:
// golib.c's fault handler asks).
bool usb4_go_inside(void);
#define USB4_GO(member, ...)                                                                                 \
	__extension__({                                                                                      \
		struct usb4_go_saved usb4_go_saved_;                                                                     \
		int usb4_go_err_ = usb4_go_enter(&usb4_go_saved_, #member);                                  \
		if (!usb4_go_err_) {                                                                         \
			usb4_go_err_ = usb4_go()->member(__VA_ARGS__);                                       \
			usb4_go_leave(&usb4_go_saved_);                                                      \
		}                                                                                            \
		usb4_go_err_;                                                                                \
	})
#define USB4_GO_VOID(member, ...)                                                                            \
	do {                                                                                                 \
		struct usb4_go_saved usb4_go_saved_;                                                                     \
		if (!usb4_go_enter(&usb4_go_saved_, #member)) {                                              \
			usb4_go()->member(__VA_ARGS__);                                                      \
			usb4_go_leave(&usb4_go_saved_);                                                      \
		}                                                                                            \
	} while (0)

// golib.c: the Go part, libusb4_rdma-go.so in the directory of the front
// library's own file (symlinks resolved).
#define USB4_GO_PART_NAME "libusb4_rdma-go.so"
// Loads and starts the Go part once per process (thread-safe). Returns 0, or
// an errno after writing one line naming the cause and the fix (on every
// call that fails, so each failed open has its line). dev names the device
// being opened, for that line.
int usb4_go_load(const char *dev);
// usb4_host_runs_go (gohost.c): true, with the sign found written to why,
// when the process already runs a Go runtime; the Go part is then refused.
// Our own Go part (own_go_part, its real path; NULL if unknown) is not a
// sign: README's fix for a static-TLS failure is to LD_PRELOAD it.
bool usb4_host_runs_go(const char *own_go_part, char *why, size_t len);
// The Go part's entry points; only valid after usb4_go_load returned 0
// (every op of a context of ours runs after its alloc_context did), and
// only for contexts opened in this process image (usb4_in_fork_child).
const struct usb4_go_api *usb4_go(void);
// The process image: 0 in the process that loaded the front, one more in
// each fork() child. A context records the image that opened it; the Go
// part of an earlier image is dead in a child (fork() keeps one thread),
// so a context of an earlier image never enters Go (context.c, fork.c).
unsigned usb4_go_image(void);
// The atfork child handler's part (fork.c calls it): the dead image's
// signal handlers are put back to what was there before it was loaded, and
// the load state starts afresh, so the child's first open loads a new copy.
void usb4_go_forked(void);
// The atfork prepare and parent handlers' part (fork.c): while this thread
// forks, the live Go runtime creates no thread (usb4goBeforeFork, C code
// in the Go part: gopart/forkguard.c).
void usb4_go_fork_prepare(void);
void usb4_go_fork_parent(void);

// fork.c: fork() child handling and thread pre-warming.
void usb4_fork_guard_install(void);
// For a control op on ibv_ctx or one of its objects. When ibv_ctx was
// opened by an earlier process image (the parent of this fork() child), its
// Go context is in a dead Go part: the first call adopts it into this
// image's (usb4_ctx_adopt) and returns false; only if that fails it returns
// true (the op fails with ENOSYS; logged once per process). Objects the
// parent created are adopted one by one (usb4_obj_adopt).
bool usb4_in_fork_child(void *ibv_ctx, const char *verb);
// For a control op on an object whose Go handle *go an image gave out
// (*image: usb4_go_image() when it was stored), after usb4_in_fork_child
// adopted its context: when that was an earlier image (this is a fork()
// child of the process that made the object), makes this image's Go object
// for it from req (usb4goAdoptObject) and stores its handle and this image.
// 0, or the errno the op returns. A handle of 0 (destroyed) stays as it is.
int usb4_obj_adopt(void *ibv_ctx, uintptr_t *go, unsigned *image, enum usb4_obj_kind kind,
		   struct usb4_adopt_req *req);
// usb4_obj_adopt for a PD (verbs.c) and a CQ (objects.c): 0 or an errno.
int usb4_pd_adopt(void *ibv_pd);
int usb4_cq_adopt(void *ibv_cq);
// For an object on ibv_pd (MR, QP, SRQ, AH, MW): adopts the PD, then
// starts *req with the PD's Go handle (verbs.c). 0 or an errno.
int usb4_adopt_req_on_pd(void *ibv_pd, struct usb4_adopt_req *req);
// context.c: the process image whose Go part serves ibv_ctx.
unsigned usb4_ctx_image(void *ibv_ctx);
// context.c: a context an earlier image opened gets a Go context of this
// image on the same kernel ucontext (loading this image's Go part first).
// 0 or an errno.
int usb4_ctx_adopt(void *ibv_ctx);
// The context of a verbs object: struct ibv_pd, ibv_mr, ibv_cq, ibv_qp,
// ibv_srq, ibv_ah and ibv_mw all begin with their struct ibv_context *.
#define USB4_CTX_OF(obj) (*(void *const *)(obj))
// Warms the Go runtime for calls from new threads (first context open only).
void usb4_prewarm_threads(void);

// cqex.c: create_cq_ex and the ibv_cq_ex poll API, resize_cq, and
// create_srq_ex (srqex.c).
void usb4_install_cqex_ops(void **ops_buf, size_t nslots);
void usb4_install_srqex_ops(void **ops_buf, size_t nslots);
// The basic SRQ of create_srq (objects.c): init is a struct
// ibv_srq_init_attr (or the _ex, which starts with one).
void *usb4_srq_create(void *ibv_pd, void *init);
// objects.c: CQ, QP, SRQ and AH ops plus the data-path trampolines.
void usb4_install_object_ops(void **ops_buf, size_t nslots);
// Overrides for rxe contexts (after usb4_install_object_ops): poll_cq
// straight to the rxe ring poll.
void usb4_install_rxe_fast_ops(void **ops_buf, size_t nslots);
// qpex.c: create_qp_ex with ibv_qp_ex (ibv_wr_*), alloc_mw, dealloc_mw,
// bind_mw (after usb4_install_object_ops).
void usb4_install_qpex_ops(void **ops_buf, size_t nslots);
// objects.c, for qpex.c: create_qp and destroy_qp as the ops do them. A QP
// is our allocation with the verbs_qp first; its engine object (struct
// usb4v_qp *, NULL once destroyed) sits at USB4_QP_ENG_OFFSET.
void *usb4_qp_create(void *ibv_pd, void *init_attr);
int usb4_qp_destroy(void *ibv_qp);
enum { USB4_QP_ENG_OFFSET = 384 };
// verbs.c helper shared with objects.c.
void usb4_set_slot(void **buf, size_t nslots, int op, void *fn);

#endif // USB4_SHIM_H
