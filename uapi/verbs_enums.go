package uapi

// Enums whose values cross the user/kernel boundary but have no name in the
// uAPI headers: the write-command structs carry them as plain integers
// (qp_state, attr_mask, port state, MTU, wc status, async event type, ...).
// The names are the kernel's, from include/rdma/ib_verbs.h; libibverbs uses
// the same values under IBV_* names.
//
// Source: torvalds/linux:include/rdma/ib_verbs.h. No system header
// carries these, so the layout test cannot check them; they were compared
// once with their IBV_* twins in linux-rdma/rdma-core@691953d:
// libibverbs/verbs.h and all 95 agree, except the wc_flags noted below.

// enum ib_qp_state (ib_uverbs_qp_attr.qp_state, modify_qp.qp_state).
const (
	IB_QPS_RESET = 0
	IB_QPS_INIT  = 1
	IB_QPS_RTR   = 2
	IB_QPS_RTS   = 3
	IB_QPS_SQD   = 4
	IB_QPS_SQE   = 5
	IB_QPS_ERR   = 6
)

// enum ib_mig_state (path_mig_state).
const (
	IB_MIG_MIGRATED = 0
	IB_MIG_REARM    = 1
	IB_MIG_ARMED    = 2
)

// enum ib_qp_attr_mask (modify_qp.attr_mask, query_qp.attr_mask).
const (
	IB_QP_STATE               = 1 << 0
	IB_QP_CUR_STATE           = 1 << 1
	IB_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2
	IB_QP_ACCESS_FLAGS        = 1 << 3
	IB_QP_PKEY_INDEX          = 1 << 4
	IB_QP_PORT                = 1 << 5
	IB_QP_QKEY                = 1 << 6
	IB_QP_AV                  = 1 << 7
	IB_QP_PATH_MTU            = 1 << 8
	IB_QP_TIMEOUT             = 1 << 9
	IB_QP_RETRY_CNT           = 1 << 10
	IB_QP_RNR_RETRY           = 1 << 11
	IB_QP_RQ_PSN              = 1 << 12
	IB_QP_MAX_QP_RD_ATOMIC    = 1 << 13
	IB_QP_ALT_PATH            = 1 << 14
	IB_QP_MIN_RNR_TIMER       = 1 << 15
	IB_QP_SQ_PSN              = 1 << 16
	IB_QP_MAX_DEST_RD_ATOMIC  = 1 << 17
	IB_QP_PATH_MIG_STATE      = 1 << 18
	IB_QP_CAP                 = 1 << 19
	IB_QP_DEST_QPN            = 1 << 20
	IB_QP_RESERVED1           = 1 << 21
	IB_QP_RESERVED2           = 1 << 22
	IB_QP_RESERVED3           = 1 << 23
	IB_QP_RESERVED4           = 1 << 24
	IB_QP_RATE_LIMIT          = 1 << 25

	// IB_QP_ATTR_STANDARD_BITS is GENMASK(20, 0): the bits the legacy
	// IB_USER_VERBS_CMD_MODIFY_QP accepts; higher bits need the _EX command.
	IB_QP_ATTR_STANDARD_BITS = 1<<21 - 1
)

// enum ib_port_state (query_port_resp.state).
const (
	IB_PORT_NOP          = 0
	IB_PORT_DOWN         = 1
	IB_PORT_INIT         = 2
	IB_PORT_ARMED        = 3
	IB_PORT_ACTIVE       = 4
	IB_PORT_ACTIVE_DEFER = 5
)

// enum ib_port_phys_state (query_port_resp.phys_state).
const (
	IB_PORT_PHYS_STATE_SLEEP                       = 1
	IB_PORT_PHYS_STATE_POLLING                     = 2
	IB_PORT_PHYS_STATE_DISABLED                    = 3
	IB_PORT_PHYS_STATE_PORT_CONFIGURATION_TRAINING = 4
	IB_PORT_PHYS_STATE_LINK_UP                     = 5
	IB_PORT_PHYS_STATE_LINK_ERROR_RECOVERY         = 6
	IB_PORT_PHYS_STATE_PHY_TEST                    = 7
)

// enum ib_port_width (query_port_resp.active_width).
const (
	IB_WIDTH_1X  = 1
	IB_WIDTH_2X  = 16
	IB_WIDTH_4X  = 2
	IB_WIDTH_8X  = 4
	IB_WIDTH_12X = 8
)

// enum ib_port_speed (query_port_resp.active_speed; query_port_resp_ex
// widens it with active_speed_ex on newer kernels).
const (
	IB_SPEED_SDR   = 1
	IB_SPEED_DDR   = 2
	IB_SPEED_QDR   = 4
	IB_SPEED_FDR10 = 8
	IB_SPEED_FDR   = 16
	IB_SPEED_EDR   = 32
	IB_SPEED_HDR   = 64
	IB_SPEED_NDR   = 128
	IB_SPEED_XDR   = 256
)

// enum ib_mtu (path_mtu, max_mtu, active_mtu).
const (
	IB_MTU_256  = 1
	IB_MTU_512  = 2
	IB_MTU_1024 = 3
	IB_MTU_2048 = 4
	IB_MTU_4096 = 5
)

// enum ib_send_flags (ib_uverbs_send_wr.send_flags).
const (
	IB_SEND_FENCE          = 1 << 0
	IB_SEND_SIGNALED       = 1 << 1
	IB_SEND_SOLICITED      = 1 << 2
	IB_SEND_INLINE         = 1 << 3
	IB_SEND_IP_CSUM        = 1 << 4
	IB_SEND_RESERVED_START = 1 << 26
	IB_SEND_RESERVED_END   = 1 << 31
)

// enum ib_wc_status (ib_uverbs_wc.status).
const (
	IB_WC_SUCCESS            = 0
	IB_WC_LOC_LEN_ERR        = 1
	IB_WC_LOC_QP_OP_ERR      = 2
	IB_WC_LOC_EEC_OP_ERR     = 3
	IB_WC_LOC_PROT_ERR       = 4
	IB_WC_WR_FLUSH_ERR       = 5
	IB_WC_MW_BIND_ERR        = 6
	IB_WC_BAD_RESP_ERR       = 7
	IB_WC_LOC_ACCESS_ERR     = 8
	IB_WC_REM_INV_REQ_ERR    = 9
	IB_WC_REM_ACCESS_ERR     = 10
	IB_WC_REM_OP_ERR         = 11
	IB_WC_RETRY_EXC_ERR      = 12
	IB_WC_RNR_RETRY_EXC_ERR  = 13
	IB_WC_LOC_RDD_VIOL_ERR   = 14
	IB_WC_REM_INV_RD_REQ_ERR = 15
	IB_WC_REM_ABORT_ERR      = 16
	IB_WC_INV_EECN_ERR       = 17
	IB_WC_INV_EEC_STATE_ERR  = 18
	IB_WC_FATAL_ERR          = 19
	IB_WC_RESP_TIMEOUT_ERR   = 20
	IB_WC_GENERAL_ERR        = 21
)

// enum ib_wc_flags (ib_uverbs_wc.wc_flags). The kernel copies these into
// ib_uverbs_wc unchanged and libibverbs hands them to applications unchanged
// (rdma-core libibverbs/cmd.c ibv_cmd_poll_cq), yet libibverbs names bit 2
// IBV_WC_IP_CSUM_OK and bit 3 IBV_WC_WITH_INV: the opposite of the kernel's
// IB_WC_WITH_INVALIDATE (bit 2) and IB_WC_IP_CSUM_OK (bit 3); rdma_rxe
// sets IB_WC_WITH_INVALIDATE in user CQEs. Stock libibverbs and librxe pass
// the raw bits on; a provider that wants applications to see
// IBV_WC_WITH_INV for an invalidating receive must swap the two bits.
const (
	IB_WC_GRH                   = 1 << 0
	IB_WC_WITH_IMM              = 1 << 1
	IB_WC_WITH_INVALIDATE       = 1 << 2
	IB_WC_IP_CSUM_OK            = 1 << 3
	IB_WC_WITH_SMAC             = 1 << 4
	IB_WC_WITH_VLAN             = 1 << 5
	IB_WC_WITH_NETWORK_HDR_TYPE = 1 << 6
)

// enum ib_event_type (ib_uverbs_async_event_desc.event_type).
const (
	IB_EVENT_CQ_ERR              = 0
	IB_EVENT_QP_FATAL            = 1
	IB_EVENT_QP_REQ_ERR          = 2
	IB_EVENT_QP_ACCESS_ERR       = 3
	IB_EVENT_COMM_EST            = 4
	IB_EVENT_SQ_DRAINED          = 5
	IB_EVENT_PATH_MIG            = 6
	IB_EVENT_PATH_MIG_ERR        = 7
	IB_EVENT_DEVICE_FATAL        = 8
	IB_EVENT_PORT_ACTIVE         = 9
	IB_EVENT_PORT_ERR            = 10
	IB_EVENT_LID_CHANGE          = 11
	IB_EVENT_PKEY_CHANGE         = 12
	IB_EVENT_SM_CHANGE           = 13
	IB_EVENT_SRQ_ERR             = 14
	IB_EVENT_SRQ_LIMIT_REACHED   = 15
	IB_EVENT_QP_LAST_WQE_REACHED = 16
	IB_EVENT_CLIENT_REREGISTER   = 17
	IB_EVENT_GID_CHANGE          = 18
	IB_EVENT_WQ_FATAL            = 19
	// IB_EVENT_DEVICE_SPEED_CHANGE was added in 2025 (mlx5 LAG speed
	// series); older kernels never send it.
	IB_EVENT_DEVICE_SPEED_CHANGE = 20
)

// enum ib_cq_notify_flags (req_notify_cq.solicited_only carries
// IB_CQ_SOLICITED or not; the others are kernel-side).
const (
	IB_CQ_SOLICITED            = 1 << 0
	IB_CQ_NEXT_COMP            = 1 << 1
	IB_CQ_SOLICITED_MASK       = IB_CQ_SOLICITED | IB_CQ_NEXT_COMP
	IB_CQ_REPORT_MISSED_EVENTS = 1 << 2
)

// enum ib_srq_attr_mask (modify_srq.attr_mask).
const (
	IB_SRQ_MAX_WR = 1 << 0
	IB_SRQ_LIMIT  = 1 << 1
)
