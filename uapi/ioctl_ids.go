package uapi

import "unsafe"

// Object, method and attribute ids of the uverbs ioctl API, and the enums
// and structs that travel in its attributes.
//
// Source: include/uapi/rdma/ib_user_ioctl_cmds.h and
// include/uapi/rdma/ib_user_ioctl_verbs.h (Debian 12: /usr/include/rdma/).
// Ids of one enum are positional in C; they are spelled out here so the
// layout test can compare each with the C value.

// Optional access flags: the kernel ignores unknown bits in this range
// instead of failing reg_mr.
const (
	IB_UVERBS_ACCESS_OPTIONAL_FIRST = 1 << 20
	IB_UVERBS_ACCESS_OPTIONAL_LAST  = 1 << 29
)

// enum uverbs_default_objects.
const (
	UVERBS_OBJECT_DEVICE       = 0
	UVERBS_OBJECT_PD           = 1
	UVERBS_OBJECT_COMP_CHANNEL = 2
	UVERBS_OBJECT_CQ           = 3
	UVERBS_OBJECT_QP           = 4
	UVERBS_OBJECT_SRQ          = 5
	UVERBS_OBJECT_AH           = 6
	UVERBS_OBJECT_MR           = 7
	UVERBS_OBJECT_MW           = 8
	UVERBS_OBJECT_FLOW         = 9
	UVERBS_OBJECT_XRCD         = 10
	UVERBS_OBJECT_RWQ_IND_TBL  = 11
	UVERBS_OBJECT_WQ           = 12
	UVERBS_OBJECT_FLOW_ACTION  = 13
	UVERBS_OBJECT_DM           = 14
	UVERBS_OBJECT_COUNTERS     = 15
	UVERBS_OBJECT_ASYNC_EVENT  = 16
)

// enum uverbs_methods_device.
const (
	UVERBS_METHOD_INVOKE_WRITE    = 0
	UVERBS_METHOD_INFO_HANDLES    = 1
	UVERBS_METHOD_QUERY_PORT      = 2
	UVERBS_METHOD_GET_CONTEXT     = 3
	UVERBS_METHOD_QUERY_CONTEXT   = 4
	UVERBS_METHOD_QUERY_GID_TABLE = 5
	UVERBS_METHOD_QUERY_GID_ENTRY = 6
)

// enum uverbs_attrs_invoke_write_cmd_attr_ids.
const (
	UVERBS_ATTR_CORE_IN   = 0
	UVERBS_ATTR_CORE_OUT  = 1
	UVERBS_ATTR_WRITE_CMD = 2
)

// enum uverbs_attrs_query_port_cmd_attr_ids.
const (
	UVERBS_ATTR_QUERY_PORT_PORT_NUM = 0
	UVERBS_ATTR_QUERY_PORT_RESP     = 1
)

// enum uverbs_attrs_get_context_attr_ids.
const (
	UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS = 0
	UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT     = 1
)

// enum uverbs_attrs_query_context_attr_ids.
const (
	UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS = 0
	UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT     = 1
)

// enum uverbs_attrs_create_cq_cmd_attr_ids.
const (
	UVERBS_ATTR_CREATE_CQ_HANDLE       = 0
	UVERBS_ATTR_CREATE_CQ_CQE          = 1
	UVERBS_ATTR_CREATE_CQ_USER_HANDLE  = 2
	UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL = 3
	UVERBS_ATTR_CREATE_CQ_COMP_VECTOR  = 4
	UVERBS_ATTR_CREATE_CQ_FLAGS        = 5
	UVERBS_ATTR_CREATE_CQ_RESP_CQE     = 6
	UVERBS_ATTR_CREATE_CQ_EVENT_FD     = 7
)

// enum uverbs_attrs_destroy_cq_cmd_attr_ids.
const (
	UVERBS_ATTR_DESTROY_CQ_HANDLE = 0
	UVERBS_ATTR_DESTROY_CQ_RESP   = 1
)

// enum uverbs_attrs_create_flow_action_esp.
const (
	UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE = 0
	UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS         = 1
	UVERBS_ATTR_FLOW_ACTION_ESP_ESN           = 2
	UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT        = 3
	UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY        = 4
	UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP         = 5
)

// enum uverbs_attrs_modify_flow_action_esp.
const (
	UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE = 0
)

// enum uverbs_attrs_destroy_flow_action_esp.
const (
	UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE = 0
)

// enum uverbs_attrs_create_qp_cmd_attr_ids.
const (
	UVERBS_ATTR_CREATE_QP_HANDLE           = 0
	UVERBS_ATTR_CREATE_QP_XRCD_HANDLE      = 1
	UVERBS_ATTR_CREATE_QP_PD_HANDLE        = 2
	UVERBS_ATTR_CREATE_QP_SRQ_HANDLE       = 3
	UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE   = 4
	UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE   = 5
	UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE = 6
	UVERBS_ATTR_CREATE_QP_USER_HANDLE      = 7
	UVERBS_ATTR_CREATE_QP_CAP              = 8
	UVERBS_ATTR_CREATE_QP_TYPE             = 9
	UVERBS_ATTR_CREATE_QP_FLAGS            = 10
	UVERBS_ATTR_CREATE_QP_SOURCE_QPN       = 11
	UVERBS_ATTR_CREATE_QP_EVENT_FD         = 12
	UVERBS_ATTR_CREATE_QP_RESP_CAP         = 13
	UVERBS_ATTR_CREATE_QP_RESP_QP_NUM      = 14
)

// enum uverbs_attrs_destroy_qp_cmd_attr_ids.
const (
	UVERBS_ATTR_DESTROY_QP_HANDLE = 0
	UVERBS_ATTR_DESTROY_QP_RESP   = 1
)

// enum uverbs_methods_qp.
const (
	UVERBS_METHOD_QP_CREATE  = 0
	UVERBS_METHOD_QP_DESTROY = 1
)

// enum uverbs_attrs_create_srq_cmd_attr_ids.
const (
	UVERBS_ATTR_CREATE_SRQ_HANDLE       = 0
	UVERBS_ATTR_CREATE_SRQ_PD_HANDLE    = 1
	UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE  = 2
	UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE    = 3
	UVERBS_ATTR_CREATE_SRQ_USER_HANDLE  = 4
	UVERBS_ATTR_CREATE_SRQ_MAX_WR       = 5
	UVERBS_ATTR_CREATE_SRQ_MAX_SGE      = 6
	UVERBS_ATTR_CREATE_SRQ_LIMIT        = 7
	UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS = 8
	UVERBS_ATTR_CREATE_SRQ_TYPE         = 9
	UVERBS_ATTR_CREATE_SRQ_EVENT_FD     = 10
	UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR  = 11
	UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE = 12
	UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM = 13
)

// enum uverbs_attrs_destroy_srq_cmd_attr_ids.
const (
	UVERBS_ATTR_DESTROY_SRQ_HANDLE = 0
	UVERBS_ATTR_DESTROY_SRQ_RESP   = 1
)

// enum uverbs_methods_srq.
const (
	UVERBS_METHOD_SRQ_CREATE  = 0
	UVERBS_METHOD_SRQ_DESTROY = 1
)

// enum uverbs_methods_cq.
const (
	UVERBS_METHOD_CQ_CREATE  = 0
	UVERBS_METHOD_CQ_DESTROY = 1
)

// enum uverbs_attrs_create_wq_cmd_attr_ids.
const (
	UVERBS_ATTR_CREATE_WQ_HANDLE       = 0
	UVERBS_ATTR_CREATE_WQ_PD_HANDLE    = 1
	UVERBS_ATTR_CREATE_WQ_CQ_HANDLE    = 2
	UVERBS_ATTR_CREATE_WQ_USER_HANDLE  = 3
	UVERBS_ATTR_CREATE_WQ_TYPE         = 4
	UVERBS_ATTR_CREATE_WQ_EVENT_FD     = 5
	UVERBS_ATTR_CREATE_WQ_MAX_WR       = 6
	UVERBS_ATTR_CREATE_WQ_MAX_SGE      = 7
	UVERBS_ATTR_CREATE_WQ_FLAGS        = 8
	UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR  = 9
	UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE = 10
	UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM  = 11
)

// enum uverbs_attrs_destroy_wq_cmd_attr_ids.
const (
	UVERBS_ATTR_DESTROY_WQ_HANDLE = 0
	UVERBS_ATTR_DESTROY_WQ_RESP   = 1
)

// enum uverbs_methods_wq.
const (
	UVERBS_METHOD_WQ_CREATE  = 0
	UVERBS_METHOD_WQ_DESTROY = 1
)

// enum uverbs_methods_actions_flow_action_ops.
const (
	UVERBS_METHOD_FLOW_ACTION_ESP_CREATE = 0
	UVERBS_METHOD_FLOW_ACTION_DESTROY    = 1
	UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY = 2
)

// enum uverbs_attrs_alloc_dm_cmd_attr_ids.
const (
	UVERBS_ATTR_ALLOC_DM_HANDLE    = 0
	UVERBS_ATTR_ALLOC_DM_LENGTH    = 1
	UVERBS_ATTR_ALLOC_DM_ALIGNMENT = 2
)

// enum uverbs_attrs_free_dm_cmd_attr_ids.
const (
	UVERBS_ATTR_FREE_DM_HANDLE = 0
)

// enum uverbs_methods_dm.
const (
	UVERBS_METHOD_DM_ALLOC = 0
	UVERBS_METHOD_DM_FREE  = 1
)

// enum uverbs_attrs_reg_dm_mr_cmd_attr_ids.
const (
	UVERBS_ATTR_REG_DM_MR_HANDLE       = 0
	UVERBS_ATTR_REG_DM_MR_OFFSET       = 1
	UVERBS_ATTR_REG_DM_MR_LENGTH       = 2
	UVERBS_ATTR_REG_DM_MR_PD_HANDLE    = 3
	UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS = 4
	UVERBS_ATTR_REG_DM_MR_DM_HANDLE    = 5
	UVERBS_ATTR_REG_DM_MR_RESP_LKEY    = 6
	UVERBS_ATTR_REG_DM_MR_RESP_RKEY    = 7
)

// enum uverbs_methods_mr.
const (
	UVERBS_METHOD_DM_MR_REG     = 0
	UVERBS_METHOD_MR_DESTROY    = 1
	UVERBS_METHOD_ADVISE_MR     = 2
	UVERBS_METHOD_QUERY_MR      = 3
	UVERBS_METHOD_REG_DMABUF_MR = 4
)

// enum uverbs_attrs_mr_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_MR_HANDLE = 0
)

// enum uverbs_attrs_advise_mr_cmd_attr_ids.
const (
	UVERBS_ATTR_ADVISE_MR_PD_HANDLE = 0
	UVERBS_ATTR_ADVISE_MR_ADVICE    = 1
	UVERBS_ATTR_ADVISE_MR_FLAGS     = 2
	UVERBS_ATTR_ADVISE_MR_SGE_LIST  = 3
)

// enum uverbs_attrs_query_mr_cmd_attr_ids.
const (
	UVERBS_ATTR_QUERY_MR_HANDLE      = 0
	UVERBS_ATTR_QUERY_MR_RESP_LKEY   = 1
	UVERBS_ATTR_QUERY_MR_RESP_RKEY   = 2
	UVERBS_ATTR_QUERY_MR_RESP_LENGTH = 3
	UVERBS_ATTR_QUERY_MR_RESP_IOVA   = 4
)

// enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids.
const (
	UVERBS_ATTR_REG_DMABUF_MR_HANDLE       = 0
	UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE    = 1
	UVERBS_ATTR_REG_DMABUF_MR_OFFSET       = 2
	UVERBS_ATTR_REG_DMABUF_MR_LENGTH       = 3
	UVERBS_ATTR_REG_DMABUF_MR_IOVA         = 4
	UVERBS_ATTR_REG_DMABUF_MR_FD           = 5
	UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS = 6
	UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY    = 7
	UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY    = 8
)

// enum uverbs_attrs_create_counters_cmd_attr_ids.
const (
	UVERBS_ATTR_CREATE_COUNTERS_HANDLE = 0
)

// enum uverbs_attrs_destroy_counters_cmd_attr_ids.
const (
	UVERBS_ATTR_DESTROY_COUNTERS_HANDLE = 0
)

// enum uverbs_attrs_read_counters_cmd_attr_ids.
const (
	UVERBS_ATTR_READ_COUNTERS_HANDLE = 0
	UVERBS_ATTR_READ_COUNTERS_BUFF   = 1
	UVERBS_ATTR_READ_COUNTERS_FLAGS  = 2
)

// enum uverbs_methods_actions_counters_ops.
const (
	UVERBS_METHOD_COUNTERS_CREATE  = 0
	UVERBS_METHOD_COUNTERS_DESTROY = 1
	UVERBS_METHOD_COUNTERS_READ    = 2
)

// enum uverbs_attrs_info_handles_id.
const (
	UVERBS_ATTR_INFO_OBJECT_ID     = 0
	UVERBS_ATTR_INFO_TOTAL_HANDLES = 1
	UVERBS_ATTR_INFO_HANDLES_LIST  = 2
)

// enum uverbs_methods_pd.
const (
	UVERBS_METHOD_PD_DESTROY = 0
)

// enum uverbs_attrs_pd_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_PD_HANDLE = 0
)

// enum uverbs_methods_mw.
const (
	UVERBS_METHOD_MW_DESTROY = 0
)

// enum uverbs_attrs_mw_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_MW_HANDLE = 0
)

// enum uverbs_methods_xrcd.
const (
	UVERBS_METHOD_XRCD_DESTROY = 0
)

// enum uverbs_attrs_xrcd_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_XRCD_HANDLE = 0
)

// enum uverbs_methods_ah.
const (
	UVERBS_METHOD_AH_DESTROY = 0
)

// enum uverbs_attrs_ah_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_AH_HANDLE = 0
)

// enum uverbs_methods_rwq_ind_tbl.
const (
	UVERBS_METHOD_RWQ_IND_TBL_DESTROY = 0
)

// enum uverbs_attrs_rwq_ind_tbl_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE = 0
)

// enum uverbs_methods_flow.
const (
	UVERBS_METHOD_FLOW_DESTROY = 0
)

// enum uverbs_attrs_flow_destroy_ids.
const (
	UVERBS_ATTR_DESTROY_FLOW_HANDLE = 0
)

// enum uverbs_method_async_event.
const (
	UVERBS_METHOD_ASYNC_EVENT_ALLOC = 0
)

// enum uverbs_attrs_async_event_create.
const (
	UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE = 0
)

// enum uverbs_attrs_query_gid_table_cmd_attr_ids.
const (
	UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE       = 0
	UVERBS_ATTR_QUERY_GID_TABLE_FLAGS            = 1
	UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES     = 2
	UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES = 3
)

// enum uverbs_attrs_query_gid_entry_cmd_attr_ids.
const (
	UVERBS_ATTR_QUERY_GID_ENTRY_PORT       = 0
	UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX  = 1
	UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS      = 2
	UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY = 3
)

// enum ib_uverbs_core_support.
const (
	IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS = 1
)

// enum ib_uverbs_access_flags.
const (
	IB_UVERBS_ACCESS_LOCAL_WRITE      = 1
	IB_UVERBS_ACCESS_REMOTE_WRITE     = 2
	IB_UVERBS_ACCESS_REMOTE_READ      = 4
	IB_UVERBS_ACCESS_REMOTE_ATOMIC    = 8
	IB_UVERBS_ACCESS_MW_BIND          = 16
	IB_UVERBS_ACCESS_ZERO_BASED       = 32
	IB_UVERBS_ACCESS_ON_DEMAND        = 64
	IB_UVERBS_ACCESS_HUGETLB          = 128
	IB_UVERBS_ACCESS_RELAXED_ORDERING = 0x100000
	IB_UVERBS_ACCESS_OPTIONAL_RANGE   = 1072693248
)

// enum ib_uverbs_srq_type.
const (
	IB_UVERBS_SRQT_BASIC = 0
	IB_UVERBS_SRQT_XRC   = 1
	IB_UVERBS_SRQT_TM    = 2
)

// enum ib_uverbs_wq_type.
const (
	IB_UVERBS_WQT_RQ = 0
)

// enum ib_uverbs_wq_flags.
const (
	IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING       = 1
	IB_UVERBS_WQ_FLAGS_SCATTER_FCS           = 2
	IB_UVERBS_WQ_FLAGS_DELAY_DROP            = 4
	IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING = 8
)

// enum ib_uverbs_qp_type.
const (
	IB_UVERBS_QPT_RC         = 2
	IB_UVERBS_QPT_UC         = 3
	IB_UVERBS_QPT_UD         = 4
	IB_UVERBS_QPT_RAW_PACKET = 8
	IB_UVERBS_QPT_XRC_INI    = 9
	IB_UVERBS_QPT_XRC_TGT    = 10
	IB_UVERBS_QPT_DRIVER     = 255
)

// enum ib_uverbs_qp_create_flags.
const (
	IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK = 2
	IB_UVERBS_QP_CREATE_SCATTER_FCS              = 0x100
	IB_UVERBS_QP_CREATE_CVLAN_STRIPPING          = 0x200
	IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING    = 0x800
	IB_UVERBS_QP_CREATE_SQ_SIG_ALL               = 0x1000
)

// enum ib_uverbs_query_port_cap_flags.
const (
	IB_UVERBS_PCF_SM                              = 2
	IB_UVERBS_PCF_NOTICE_SUP                      = 4
	IB_UVERBS_PCF_TRAP_SUP                        = 8
	IB_UVERBS_PCF_OPT_IPD_SUP                     = 16
	IB_UVERBS_PCF_AUTO_MIGR_SUP                   = 32
	IB_UVERBS_PCF_SL_MAP_SUP                      = 64
	IB_UVERBS_PCF_MKEY_NVRAM                      = 128
	IB_UVERBS_PCF_PKEY_NVRAM                      = 0x100
	IB_UVERBS_PCF_LED_INFO_SUP                    = 0x200
	IB_UVERBS_PCF_SM_DISABLED                     = 0x400
	IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP              = 0x800
	IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP       = 0x1000
	IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP             = 0x4000
	IB_UVERBS_PCF_CM_SUP                          = 0x10000
	IB_UVERBS_PCF_SNMP_TUNNEL_SUP                 = 0x20000
	IB_UVERBS_PCF_REINIT_SUP                      = 0x40000
	IB_UVERBS_PCF_DEVICE_MGMT_SUP                 = 0x80000
	IB_UVERBS_PCF_VENDOR_CLASS_SUP                = 0x100000
	IB_UVERBS_PCF_DR_NOTICE_SUP                   = 0x200000
	IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP             = 0x400000
	IB_UVERBS_PCF_BOOT_MGMT_SUP                   = 0x800000
	IB_UVERBS_PCF_LINK_LATENCY_SUP                = 0x1000000
	IB_UVERBS_PCF_CLIENT_REG_SUP                  = 0x2000000
	IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP      = 0x8000000
	IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP  = 0x10000000
	IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP = 0x20000000
	IB_UVERBS_PCF_MCAST_FDB_TOP_SUP               = 0x40000000
	IB_UVERBS_PCF_HIERARCHY_INFO_SUP              = 0x80000000
	IB_UVERBS_PCF_IP_BASED_GIDS                   = 0x4000000
)

// enum ib_uverbs_query_port_flags.
const (
	IB_UVERBS_QPF_GRH_REQUIRED = 1
)

// enum ib_uverbs_flow_action_esp_keymat.
const (
	IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM = 0
)

// enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo.
const (
	IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ = 0
)

// enum ib_uverbs_flow_action_esp_replay.
const (
	IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE = 0
	IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP  = 1
)

// enum ib_uverbs_flow_action_esp_flags.
const (
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO  = 0
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD   = 1
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL         = 0
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT      = 2
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT        = 0
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT        = 4
	IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW = 8
)

// enum ib_uverbs_read_counters_flags.
const (
	IB_UVERBS_READ_COUNTERS_PREFER_CACHED = 1
)

// enum ib_uverbs_advise_mr_advice.
const (
	IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH          = 0
	IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE    = 1
	IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2
)

// enum ib_uverbs_advise_mr_flag.
const (
	IB_UVERBS_ADVISE_MR_FLAG_FLUSH = 1
)

// enum rdma_driver_id.
const (
	RDMA_DRIVER_UNKNOWN    = 0
	RDMA_DRIVER_MLX5       = 1
	RDMA_DRIVER_MLX4       = 2
	RDMA_DRIVER_CXGB3      = 3
	RDMA_DRIVER_CXGB4      = 4
	RDMA_DRIVER_MTHCA      = 5
	RDMA_DRIVER_BNXT_RE    = 6
	RDMA_DRIVER_OCRDMA     = 7
	RDMA_DRIVER_NES        = 8
	RDMA_DRIVER_I40IW      = 9
	RDMA_DRIVER_IRDMA      = 9
	RDMA_DRIVER_VMW_PVRDMA = 10
	RDMA_DRIVER_QEDR       = 11
	RDMA_DRIVER_HNS        = 12
	RDMA_DRIVER_USNIC      = 13
	RDMA_DRIVER_RXE        = 14
	RDMA_DRIVER_HFI1       = 15
	RDMA_DRIVER_QIB        = 16
	RDMA_DRIVER_EFA        = 17
	RDMA_DRIVER_SIW        = 18
	RDMA_DRIVER_ERDMA      = 19
)

// enum ib_uverbs_gid_type.
const (
	IB_UVERBS_GID_TYPE_IB      = 0
	IB_UVERBS_GID_TYPE_ROCE_V1 = 1
	IB_UVERBS_GID_TYPE_ROCE_V2 = 2
)

// IbUverbsQueryPortRespEx is struct ib_uverbs_query_port_resp_ex.
type IbUverbsQueryPortRespEx struct {
	LegacyResp    IbUverbsQueryPortResp
	PortCapFlags2 uint16
	Reserved      [6]uint8
}

const SizeofIbUverbsQueryPortRespEx = 48

// ActiveSpeedEx returns active_speed_ex, which newer kernels (uAPI field
// added with IB_SPEED_XDR-era speeds; linux-rdma/rdma-core@691953d:
// kernel-headers/rdma/ib_user_ioctl_verbs.h) store at offset 44, in bytes
// 2..5 of Reserved as Debian 12's header lays it out. Older kernels leave
// it zero; then use LegacyResp.ActiveSpeed.
func (r *IbUverbsQueryPortRespEx) ActiveSpeedEx() uint32 {
	return *(*uint32)(unsafe.Pointer(&r.Reserved[2]))
}

// IbUverbsQpCap is struct ib_uverbs_qp_cap.
type IbUverbsQpCap struct {
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
}

const SizeofIbUverbsQpCap = 20

// IbUverbsGidEntry is struct ib_uverbs_gid_entry.
type IbUverbsGidEntry struct {
	Gid           [2]uint64
	GidIndex      uint32
	PortNum       uint32
	GidType       uint32
	NetdevIfindex uint32
}

const SizeofIbUverbsGidEntry = 32

// Additions from linux-rdma/rdma-core@691953d:kernel-headers/rdma/ib_user_ioctl_cmds.h (newer kernels than Debian 12; absent from its headers).

// enum uverbs_default_objects (continued).
const (
	UVERBS_OBJECT_DMAH      = 17
	UVERBS_OBJECT_DMABUF    = 18
	UVERBS_OBJECT_COMP_CNTR = 19
)

// enum uverbs_methods_device (continued).
const (
	UVERBS_METHOD_QUERY_PORT_SPEED     = 7
	UVERBS_METHOD_QUERY_COMP_CNTR_CAPS = 8
)

// enum uverbs_attrs_query_port_speed_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM = 0
	UVERBS_ATTR_QUERY_PORT_SPEED_RESP     = 1
)

// enum uverbs_attrs_query_comp_cntr_caps_attr_ids (continued).
const (
	UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_COUNTERS            = 0
	UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_VALUE               = 1
	UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_SUPPORTED_QP_ATTACH_OPS = 2
)

// enum uverbs_attrs_get_context_attr_ids (continued).
const (
	UVERBS_ATTR_GET_CONTEXT_FD_ARR = 2
)

// enum uverbs_attrs_create_cq_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_CREATE_CQ_BUFFER_VA     = 8
	UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH = 9
	UVERBS_ATTR_CREATE_CQ_BUFFER_FD     = 10
	UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET = 11
	UVERBS_ATTR_CREATE_CQ_BUF_UMEM      = 12
)

// enum uverbs_attrs_create_qp_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_CREATE_QP_BUF_UMEM    = 15
	UVERBS_ATTR_CREATE_QP_RQ_BUF_UMEM = 16
	UVERBS_ATTR_CREATE_QP_SQ_BUF_UMEM = 17
)

// enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE      = 0
	UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE = 1
	UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK     = 2
)

// enum uverbs_methods_qp (continued).
const (
	UVERBS_METHOD_QP_ATTACH_COMP_CNTR = 2
)

// enum uverbs_attrs_alloc_dmah_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_ALLOC_DMAH_HANDLE       = 0
	UVERBS_ATTR_ALLOC_DMAH_CPU_ID       = 1
	UVERBS_ATTR_ALLOC_DMAH_TPH_MEM_TYPE = 2
	UVERBS_ATTR_ALLOC_DMAH_PH           = 3
)

// enum uverbs_attrs_free_dmah_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_FREE_DMA_HANDLE = 0
)

// enum uverbs_methods_dmah (continued).
const (
	UVERBS_METHOD_DMAH_ALLOC = 0
	UVERBS_METHOD_DMAH_FREE  = 1
)

// enum uverbs_attrs_alloc_dmabuf_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_ALLOC_DMABUF_HANDLE = 0
	UVERBS_ATTR_ALLOC_DMABUF_PGOFF  = 1
)

// enum uverbs_methods_dmabuf (continued).
const (
	UVERBS_METHOD_DMABUF_ALLOC = 0
)

// enum uverbs_methods_mr (continued).
const (
	UVERBS_METHOD_REG_MR = 5
)

// enum uverbs_attrs_reg_mr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_REG_MR_HANDLE       = 0
	UVERBS_ATTR_REG_MR_PD_HANDLE    = 1
	UVERBS_ATTR_REG_MR_DMA_HANDLE   = 2
	UVERBS_ATTR_REG_MR_IOVA         = 3
	UVERBS_ATTR_REG_MR_ADDR         = 4
	UVERBS_ATTR_REG_MR_LENGTH       = 5
	UVERBS_ATTR_REG_MR_ACCESS_FLAGS = 6
	UVERBS_ATTR_REG_MR_FD           = 7
	UVERBS_ATTR_REG_MR_FD_OFFSET    = 8
	UVERBS_ATTR_REG_MR_RESP_LKEY    = 9
	UVERBS_ATTR_REG_MR_RESP_RKEY    = 10
)

// enum uverbs_methods_comp_cntr (continued).
const (
	UVERBS_METHOD_COMP_CNTR_CREATE  = 0
	UVERBS_METHOD_COMP_CNTR_DESTROY = 1
	UVERBS_METHOD_COMP_CNTR_MODIFY  = 2
	UVERBS_METHOD_COMP_CNTR_READ    = 3
)

// enum uverbs_attrs_create_comp_cntr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE = 0
)

// enum uverbs_attrs_destroy_comp_cntr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE = 0
)

// enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE = 0
	UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY  = 1
	UVERBS_ATTR_MODIFY_COMP_CNTR_OP     = 2
	UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE  = 3
)

// enum uverbs_attrs_read_comp_cntr_cmd_attr_ids (continued).
const (
	UVERBS_ATTR_READ_COMP_CNTR_HANDLE     = 0
	UVERBS_ATTR_READ_COMP_CNTR_ENTRY      = 1
	UVERBS_ATTR_READ_COMP_CNTR_RESP_VALUE = 2
)

// Additions from linux-rdma/rdma-core@691953d:kernel-headers/rdma/ib_user_ioctl_verbs.h (newer kernels than Debian 12; absent from its headers).

// enum ib_uverbs_core_support (continued).
const (
	IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA = 2
)

// enum ib_uverbs_access_flags (continued).
const (
	IB_UVERBS_ACCESS_FLUSH_GLOBAL     = 256
	IB_UVERBS_ACCESS_FLUSH_PERSISTENT = 512
)

// enum rdma_driver_id (continued).
const (
	RDMA_DRIVER_MANA  = 20
	RDMA_DRIVER_IONIC = 21
)

// enum ib_uverbs_buffer_type (continued).
const (
	IB_UVERBS_BUFFER_TYPE_DMABUF = 0
	IB_UVERBS_BUFFER_TYPE_VA     = 1
)

// enum ib_uverbs_comp_cntr_entry (continued).
const (
	IB_UVERBS_COMP_CNTR_ENTRY_COMP = 0
	IB_UVERBS_COMP_CNTR_ENTRY_ERR  = 1
)

// enum ib_uverbs_comp_cntr_modify_op (continued).
const (
	IB_UVERBS_COMP_CNTR_MODIFY_OP_SET = 0
	IB_UVERBS_COMP_CNTR_MODIFY_OP_INC = 1
)

// enum ib_uverbs_qp_attach_comp_cntr_op (continued).
const (
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND              = 1
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV              = 2
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ         = 4
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ  = 8
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE        = 16
	IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE = 32
)
