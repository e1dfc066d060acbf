/*
 * Kernel ABI structures the data path touches, mirrored from the uAPI headers
 * with the usb4v_ prefix of uapi/c/usb4verbs_uapi.h.
 * TODO(uapi): move. uapi/c/usb4verbs_uapi.h did not exist when this was
 * written; once it does, include it instead and delete this file.
 * Sources: linux:include/uapi/rdma/ib_user_verbs.h, rdma_user_rxe.h,
 * ib_user_ioctl_verbs.h, rdma_user_ioctl_cmds.h; donnerkeule:proto/tbv_cq_shm.h;
 * pleite@eca80ec:userspace/usb4_rdma/usb4_rdma_dv.h (facts only).
 */
#ifndef USB4V_KABI_H
#define USB4V_KABI_H

#include <stdint.h>
#include <assert.h>
#include <stddef.h>

/* ---- legacy write commands (ib_user_verbs.h) ---- */
#define USB4V_IB_USER_VERBS_CMD_POLL_CQ 15
#define USB4V_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ 17
#define USB4V_IB_USER_VERBS_CMD_POST_SEND 25
#define USB4V_IB_USER_VERBS_CMD_POST_RECV 26
#define USB4V_IB_USER_VERBS_CMD_POST_SRQ_RECV 42

struct usb4v_ib_uverbs_cmd_hdr {
	uint32_t command;
	uint16_t in_words;
	uint16_t out_words;
};

struct usb4v_ib_uverbs_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct usb4v_ib_uverbs_send_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t ex; /* imm_data (big endian) or invalidate_rkey */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
			uint32_t reserved;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
			uint32_t reserved;
		} atomic;
		struct {
			uint32_t ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
			uint32_t reserved;
		} ud;
	} wr;
};

struct usb4v_ib_uverbs_post_send {
	uint64_t response;
	uint32_t qp_handle;
	uint32_t wr_count;
	uint32_t sge_count;
	uint32_t wqe_size;
};

struct usb4v_ib_uverbs_post_send_resp {
	uint32_t bad_wr;
};

struct usb4v_ib_uverbs_recv_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t reserved;
};

/* post_recv and post_srq_recv share this layout (qp_handle / srq_handle). */
struct usb4v_ib_uverbs_post_recv {
	uint64_t response;
	uint32_t qp_handle;
	uint32_t wr_count;
	uint32_t sge_count;
	uint32_t wqe_size;
};

struct usb4v_ib_uverbs_post_recv_resp {
	uint32_t bad_wr;
};

struct usb4v_ib_uverbs_poll_cq {
	uint64_t response;
	uint32_t cq_handle;
	uint32_t ne;
};

struct usb4v_ib_uverbs_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t ex;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t port_num;
	uint8_t reserved;
};

struct usb4v_ib_uverbs_poll_cq_resp {
	uint32_t count;
	uint32_t reserved;
};

struct usb4v_ib_uverbs_req_notify_cq {
	uint32_t cq_handle;
	uint32_t solicited_only;
};

_Static_assert(sizeof(struct usb4v_ib_uverbs_cmd_hdr) == 8, "cmd_hdr");
_Static_assert(sizeof(struct usb4v_ib_uverbs_sge) == 16, "sge");
_Static_assert(sizeof(struct usb4v_ib_uverbs_send_wr) == 56, "send_wr");
_Static_assert(offsetof(struct usb4v_ib_uverbs_send_wr, wr) == 24, "send_wr.wr");
_Static_assert(sizeof(struct usb4v_ib_uverbs_post_send) == 24, "post_send");
_Static_assert(sizeof(struct usb4v_ib_uverbs_recv_wr) == 16, "recv_wr");
_Static_assert(sizeof(struct usb4v_ib_uverbs_post_recv) == 24, "post_recv");
_Static_assert(sizeof(struct usb4v_ib_uverbs_poll_cq) == 16, "poll_cq");
_Static_assert(sizeof(struct usb4v_ib_uverbs_wc) == 48, "wc");
_Static_assert(sizeof(struct usb4v_ib_uverbs_req_notify_cq) == 8, "req_notify");

/* ---- ioctl framework (rdma_user_ioctl_cmds.h) ---- */
struct usb4v_ib_uverbs_attr {
	uint16_t attr_id;
	uint16_t len;
	uint16_t flags;
	uint16_t attr_data;
	uint64_t data;
};

struct usb4v_ib_uverbs_ioctl_hdr {
	uint16_t length;
	uint16_t object_id;
	uint16_t method_id;
	uint16_t num_attrs;
	uint64_t reserved1;
	uint32_t driver_id;
	uint32_t reserved2;
};

#define USB4V_UVERBS_ATTR_F_MANDATORY 1u
/* _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, struct ib_uverbs_ioctl_hdr) */
#define USB4V_RDMA_VERBS_IOCTL 0xC0181B01ul
_Static_assert(sizeof(struct usb4v_ib_uverbs_attr) == 16, "attr");
_Static_assert(sizeof(struct usb4v_ib_uverbs_ioctl_hdr) == 24, "ioctl_hdr");

/* ---- Soft-RoCE (rdma_user_rxe.h) ---- */
struct usb4v_rxe_global_route {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct usb4v_rxe_av {
	uint8_t port_num;
	uint8_t network_type;
	uint8_t dmac[6];
	struct usb4v_rxe_global_route grh;
	uint8_t sgid_addr[28]; /* union of sockaddr_in / sockaddr_in6 */
	uint8_t dgid_addr[28];
};

struct usb4v_rxe_send_wr {
	uint64_t wr_id;
	uint32_t reserved;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t ex; /* imm_data (big endian) or invalidate_rkey */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
			uint32_t reserved;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
			uint32_t reserved;
		} atomic;
		struct {
			uint32_t remote_qpn;
			uint32_t remote_qkey;
			uint16_t pkey_index;
			uint16_t reserved;
			uint32_t ah_num;
			uint32_t pad[4];
			struct usb4v_rxe_av av;
		} ud;
		struct {
			uint64_t addr;
			uint64_t length;
			uint32_t mr_lkey;
			uint32_t mw_rkey;
			uint32_t rkey;
			uint32_t access;
		} mw;
	} wr;
};

struct usb4v_rxe_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct usb4v_rxe_dma_info {
	uint32_t length;
	uint32_t resid;
	uint32_t cur_sge;
	uint32_t num_sge;
	uint32_t sge_offset;
	uint32_t reserved;
	/* followed by inline data or struct usb4v_rxe_sge[] */
};

struct usb4v_rxe_send_wqe {
	struct usb4v_rxe_send_wr wr;
	uint32_t status;
	uint32_t state;
	uint64_t iova;
	uint32_t mask;
	uint32_t first_psn;
	uint32_t last_psn;
	uint32_t ack_length;
	uint32_t ssn;
	uint32_t has_rd_atomic;
	struct usb4v_rxe_dma_info dma;
};

struct usb4v_rxe_recv_wqe {
	uint64_t wr_id;
	uint32_t reserved;
	uint32_t padding;
	struct usb4v_rxe_dma_info dma;
};

struct usb4v_rxe_queue_buf {
	uint32_t log2_elem_size;
	uint32_t index_mask;
	uint32_t pad_1[30];
	uint32_t producer_index;
	uint32_t pad_2[31];
	uint32_t consumer_index;
	uint32_t pad_3[31];
	/* data[] follows */
};

_Static_assert(sizeof(struct usb4v_rxe_av) == 88, "rxe_av");
_Static_assert(sizeof(struct usb4v_rxe_send_wr) == 144, "rxe_send_wr");
_Static_assert(sizeof(struct usb4v_rxe_dma_info) == 24, "rxe_dma_info");
_Static_assert(sizeof(struct usb4v_rxe_send_wqe) == 208, "rxe_send_wqe");
_Static_assert(sizeof(struct usb4v_rxe_recv_wqe) == 40, "rxe_recv_wqe");
_Static_assert(offsetof(struct usb4v_rxe_queue_buf, producer_index) == 128, "rxe producer");
_Static_assert(offsetof(struct usb4v_rxe_queue_buf, consumer_index) == 256, "rxe consumer");
_Static_assert(sizeof(struct usb4v_rxe_queue_buf) == 384, "rxe_queue_buf");

/* ---- usb4 mapped CQ ring, ABI 2 (donnerkeule:proto/tbv_cq_shm.h) ---- */
#define USB4V_TBV_CQ_SHM_MAGIC 0x54425643u
#define USB4V_TBV_CQ_SHM_ABI 2u

struct usb4v_tbv_cq_shm {
	uint32_t magic;
	uint32_t abi;
	uint32_t cqe;
	uint32_t entry_size;
	uint32_t ring_offset;
	uint32_t produced;
	uint32_t consumed;
	uint32_t ovf_seq;
	uint32_t map_len;
	uint32_t reserved[39];
};

struct usb4v_tbv_uresp_create_cq {
	uint64_t cq_mmap_offset;
	uint32_t cqe;
	uint32_t shm_abi;
	uint32_t reserved;
	uint32_t pad;
	uint64_t map_len;
};
_Static_assert(sizeof(struct usb4v_tbv_cq_shm) == 192, "tbv_cq_shm");
_Static_assert(sizeof(struct usb4v_tbv_uresp_create_cq) == 32, "tbv_uresp_create_cq");

/* ---- usb4 Direct Verbs ABI v2 (pleite@eca80ec usb4_rdma_dv.h) ---- */
#define USB4V_USB4_RDMA_DV_ABI_VERSION 2
#define USB4V_USB4_RDMA_DV_MIN_QUEUE_ENTRIES 2
#define USB4V_USB4_RDMA_DV_WQE_SIZE 64
#define USB4V_USB4_RDMA_DV_CQE_SIZE 64
#define USB4V_USB4_RDMA_DV_DOORBELL_PAGE_SIZE 4096
#define USB4V_USB4_RDMA_DV_OBJECT_DEVICE 0x1000
#define USB4V_USB4_RDMA_DV_METHOD_QUERY_CAPS 0x1000
#define USB4V_USB4_RDMA_DV_METHOD_CREATE_QUEUE 0x1001
#define USB4V_USB4_RDMA_DV_METHOD_DESTROY_QUEUE 0x1002
#define USB4V_USB4_RDMA_DV_METHOD_KICK 0x1003
#define USB4V_USB4_RDMA_DV_ATTR_QUERY_CAPS_RESP 0x1000
#define USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP 0x1000
#define USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ 0x1001
#define USB4V_USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP 0x1002
#define USB4V_USB4_RDMA_DV_ATTR_DESTROY_QUEUE_QP 0x1000
#define USB4V_USB4_RDMA_DV_ATTR_KICK_QP 0x1000
#define USB4V_USB4_RDMA_DV_ATTR_KICK_REQ 0x1001
#define USB4V_USB4_RDMA_DV_TAIL_INDEX_BITS 24
#define USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK ((1u << 24) - 1)

enum {
	USB4V_USB4_RDMA_DV_CAP_SEND = 1u << 0,
	USB4V_USB4_RDMA_DV_CAP_SEND_IMM = 1u << 1,
	USB4V_USB4_RDMA_DV_CAP_WRITE = 1u << 2,
	USB4V_USB4_RDMA_DV_CAP_WRITE_IMM = 1u << 3,
	USB4V_USB4_RDMA_DV_CAP_FENCE = 1u << 4,
	USB4V_USB4_RDMA_DV_CAP_READ = 1u << 5,
	USB4V_USB4_RDMA_DV_CAP_ATOMIC_FETCH_ADD = 1u << 6,
	USB4V_USB4_RDMA_DV_CAP_ATOMIC_SWAP = 1u << 7,
	USB4V_USB4_RDMA_DV_CAP_ATOMIC_CMP_SWAP = 1u << 8,
};

enum {
	USB4V_USB4_RDMA_DV_WQE_NOP = 0,
	USB4V_USB4_RDMA_DV_WQE_SEND = 1,
	USB4V_USB4_RDMA_DV_WQE_SEND_IMM = 2,
	USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE = 3,
	USB4V_USB4_RDMA_DV_WQE_RDMA_WRITE_IMM = 4,
	USB4V_USB4_RDMA_DV_WQE_RDMA_READ = 5,
	USB4V_USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD = 6,
	USB4V_USB4_RDMA_DV_WQE_ATOMIC_SWAP = 7,
	USB4V_USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP = 8,
};

enum {
	USB4V_USB4_RDMA_DV_WQE_F_SIGNALED = 1u << 0,
	USB4V_USB4_RDMA_DV_WQE_F_SOLICITED = 1u << 1,
	USB4V_USB4_RDMA_DV_WQE_F_FENCE = 1u << 2,
};

enum {
	USB4V_USB4_RDMA_DV_CQE_SUCCESS = 0,
	USB4V_USB4_RDMA_DV_CQE_WR_FLUSH_ERR = 1,
	USB4V_USB4_RDMA_DV_CQE_LOCAL_LEN_ERR = 2,
	USB4V_USB4_RDMA_DV_CQE_LOCAL_PROT_ERR = 3,
	USB4V_USB4_RDMA_DV_CQE_REMOTE_ACCESS_ERR = 4,
	USB4V_USB4_RDMA_DV_CQE_RETRY_EXC_ERR = 5,
	USB4V_USB4_RDMA_DV_CQE_STALE_GEN = 6,
	USB4V_USB4_RDMA_DV_CQE_GENERAL_ERR = 255,
};

enum {
	USB4V_USB4_RDMA_DV_QP_LIVE = 0,
	USB4V_USB4_RDMA_DV_QP_ERR = 1,
	USB4V_USB4_RDMA_DV_QP_DEAD = 2,
};

struct usb4v_usb4_rdma_dv_wqe {
	uint16_t opcode;
	uint16_t flags;
	uint32_t length;
	uint64_t wr_id;
	uint64_t local_addr;
	uint32_t lkey;
	uint32_t rkey;
	uint64_t remote_addr;
	uint32_t imm_data;
	uint32_t generation;
	uint64_t reserved1[2];
} __attribute__((aligned(64)));

struct usb4v_usb4_rdma_dv_cqe {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm_data;
	uint32_t vendor_err;
	uint32_t qp_state;
	uint64_t reserved[4];
} __attribute__((aligned(64)));

struct usb4v_usb4_rdma_dv_doorbell_producer_line {
	uint32_t sq_tail;
	uint32_t cq_head;
	uint32_t generation;
	uint32_t reserved0;
	uint64_t reserved1[6];
} __attribute__((aligned(64)));

struct usb4v_usb4_rdma_dv_doorbell_consumer_line {
	uint32_t sq_head;
	uint32_t cq_tail;
	uint32_t qp_state;
	uint32_t generation;
	uint64_t reserved1[6];
} __attribute__((aligned(64)));

struct usb4v_usb4_rdma_dv_doorbell {
	struct usb4v_usb4_rdma_dv_doorbell_producer_line producer;
	struct usb4v_usb4_rdma_dv_doorbell_consumer_line consumer;
};

struct usb4v_usb4_rdma_dv_query_caps_resp {
	uint32_t abi_version;
	uint32_t caps;
	uint32_t max_sq_entries;
	uint32_t max_cq_entries;
	uint32_t default_sq_entries;
	uint32_t default_cq_entries;
	uint32_t wqe_size;
	uint32_t cqe_size;
	uint32_t doorbell_record_size;
	uint32_t doorbell_page_size;
	uint32_t tail_index_bits;
	uint32_t tail_generation_bits;
	uint32_t reserved[4];
};

struct usb4v_usb4_rdma_dv_queue_create {
	uint32_t abi_version;
	uint32_t flags;
	uint64_t sq_addr;
	uint64_t cq_addr;
	uint64_t doorbell_addr;
	uint32_t sq_entries;
	uint32_t cq_entries;
	uint32_t sq_stride;
	uint32_t cq_stride;
	uint32_t reserved[4];
};

struct usb4v_usb4_rdma_dv_queue_resp {
	uint32_t qp_num;
	uint32_t generation;
	uint32_t flags;
	uint32_t reserved0;
};

struct usb4v_usb4_rdma_dv_kick {
	uint32_t sq_tail;
	uint32_t flags;
	uint32_t reserved[2];
};

_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_wqe) == 64, "dv wqe");
_Static_assert(offsetof(struct usb4v_usb4_rdma_dv_wqe, generation) == 44, "dv wqe gen");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_cqe) == 64, "dv cqe");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_doorbell) == 128, "dv doorbell");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_query_caps_resp) == 64, "dv caps");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_queue_create) == 64, "dv create");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_queue_resp) == 16, "dv resp");
_Static_assert(sizeof(struct usb4v_usb4_rdma_dv_kick) == 16, "dv kick");

static inline uint32_t usb4v_dv_pack(uint32_t index, uint8_t gen)
{
	return (index & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) | ((uint32_t)gen << 24);
}

#endif
