package uapi

// RDMA netlink (NETLINK_RDMA) constants and structs.
//
// Source: include/uapi/rdma/rdma_netlink.h (Debian 12, linux-libc-dev 6.1:
// /usr/include/rdma/rdma_netlink.h). Values marked "Linux 6.x+" come from
// torvalds/linux:include/uapi/rdma/rdma_netlink.h (mainline, 2025) and are
// absent from the Debian 12 header.
//
// The end-of-enum sentinels RDMA_NL_NUM_GROUPS, RDMA_NLDEV_NUM_OPS and
// RDMA_NLDEV_ATTR_MAX are deliberately not mirrored: they grow with every
// kernel release, so no single value is correct for all kernels we talk to.

// RDMA_NL_GET_CLIENT returns the client id (bits 10..15) of an RDMA netlink
// message type. Mirrors the RDMA_NL_GET_CLIENT macro.
func RDMA_NL_GET_CLIENT(typ uint16) uint16 { return (typ & (((1 << 6) - 1) << 10)) >> 10 }

// RDMA_NL_GET_OP returns the operation (bits 0..9) of an RDMA netlink message
// type. Mirrors the RDMA_NL_GET_OP macro.
func RDMA_NL_GET_OP(typ uint16) uint16 { return typ & ((1 << 10) - 1) }

// RDMA_NL_GET_TYPE builds an RDMA netlink message type from a client id and
// an operation. Mirrors the RDMA_NL_GET_TYPE macro.
func RDMA_NL_GET_TYPE(client, op uint16) uint16 { return (client << 10) + op }

const (
	IWPM_UABI_VERSION_MIN       = 3
	IWPM_UABI_VERSION           = 4
	IWPM_NLA_MAPINFO_SEND_MAX   = 3
	IWPM_NLA_REMOVE_MAPPING_MAX = 3
	RDMA_NL_LS_F_ERR            = 0x0100 // local service: failed response
	LS_DEVICE_NAME_MAX          = 64
	RDMA_NLA_F_MANDATORY        = 1 << 13
	// RDMA_NLA_TYPE_MASK clears NLA_F_NESTED, NLA_F_NET_BYTEORDER and
	// RDMA_NLA_F_MANDATORY from a 16-bit nla_type. C defines it as an int
	// complement; only its low 16 bits are meaningful.
	RDMA_NLA_TYPE_MASK = 0x1fff
)

// RDMA netlink client ids (the "client" part of nlmsg_type).
const (
	RDMA_NL_IWCM        = 2
	RDMA_NL_RSVD        = 3
	RDMA_NL_LS          = 4
	RDMA_NL_NLDEV       = 5
	RDMA_NL_NUM_CLIENTS = 6
)

// RDMA netlink multicast groups.
const (
	RDMA_NL_GROUP_IWPM   = 2
	RDMA_NL_GROUP_LS     = 3
	RDMA_NL_GROUP_NOTIFY = 4 // Linux 6.11+ (absent from Debian 12 headers)
)

// iWARP port mapper message flags.
const (
	IWPM_FLAGS_NO_PORT_MAP = 1
)

// iWARP port mapper operation codes.
const (
	RDMA_NL_IWPM_REG_PID        = 0
	RDMA_NL_IWPM_ADD_MAPPING    = 1
	RDMA_NL_IWPM_QUERY_MAPPING  = 2
	RDMA_NL_IWPM_REMOVE_MAPPING = 3
	RDMA_NL_IWPM_REMOTE_INFO    = 4
	RDMA_NL_IWPM_HANDLE_ERR     = 5
	RDMA_NL_IWPM_MAPINFO        = 6
	RDMA_NL_IWPM_MAPINFO_NUM    = 7
	RDMA_NL_IWPM_HELLO          = 8
	RDMA_NL_IWPM_NUM_OPS        = 9
)

const (
	IWPM_NLA_REG_PID_UNSPEC = 0
	IWPM_NLA_REG_PID_SEQ    = 1
	IWPM_NLA_REG_IF_NAME    = 2
	IWPM_NLA_REG_IBDEV_NAME = 3
	IWPM_NLA_REG_ULIB_NAME  = 4
	IWPM_NLA_REG_PID_MAX    = 5
)

const (
	IWPM_NLA_RREG_PID_UNSPEC = 0
	IWPM_NLA_RREG_PID_SEQ    = 1
	IWPM_NLA_RREG_IBDEV_NAME = 2
	IWPM_NLA_RREG_ULIB_NAME  = 3
	IWPM_NLA_RREG_ULIB_VER   = 4
	IWPM_NLA_RREG_PID_ERR    = 5
	IWPM_NLA_RREG_PID_MAX    = 6
)

const (
	IWPM_NLA_MANAGE_MAPPING_UNSPEC = 0
	IWPM_NLA_MANAGE_MAPPING_SEQ    = 1
	IWPM_NLA_MANAGE_ADDR           = 2
	IWPM_NLA_MANAGE_FLAGS          = 3
	IWPM_NLA_MANAGE_MAPPING_MAX    = 4
)

const (
	IWPM_NLA_RMANAGE_MAPPING_UNSPEC  = 0
	IWPM_NLA_RMANAGE_MAPPING_SEQ     = 1
	IWPM_NLA_RMANAGE_ADDR            = 2
	IWPM_NLA_RMANAGE_MAPPED_LOC_ADDR = 3
	IWPM_NLA_MANAGE_MAPPED_LOC_ADDR  = 3
	IWPM_NLA_RMANAGE_MAPPING_ERR     = 4
	IWPM_NLA_RMANAGE_MAPPING_MAX     = 5
)

const (
	IWPM_NLA_QUERY_MAPPING_UNSPEC = 0
	IWPM_NLA_QUERY_MAPPING_SEQ    = 1
	IWPM_NLA_QUERY_LOCAL_ADDR     = 2
	IWPM_NLA_QUERY_REMOTE_ADDR    = 3
	IWPM_NLA_QUERY_FLAGS          = 4
	IWPM_NLA_QUERY_MAPPING_MAX    = 5
)

const (
	IWPM_NLA_RQUERY_MAPPING_UNSPEC  = 0
	IWPM_NLA_RQUERY_MAPPING_SEQ     = 1
	IWPM_NLA_RQUERY_LOCAL_ADDR      = 2
	IWPM_NLA_RQUERY_REMOTE_ADDR     = 3
	IWPM_NLA_RQUERY_MAPPED_LOC_ADDR = 4
	IWPM_NLA_RQUERY_MAPPED_REM_ADDR = 5
	IWPM_NLA_RQUERY_MAPPING_ERR     = 6
	IWPM_NLA_RQUERY_MAPPING_MAX     = 7
)

const (
	IWPM_NLA_MAPINFO_REQ_UNSPEC = 0
	IWPM_NLA_MAPINFO_ULIB_NAME  = 1
	IWPM_NLA_MAPINFO_ULIB_VER   = 2
	IWPM_NLA_MAPINFO_REQ_MAX    = 3
)

const (
	IWPM_NLA_MAPINFO_UNSPEC      = 0
	IWPM_NLA_MAPINFO_LOCAL_ADDR  = 1
	IWPM_NLA_MAPINFO_MAPPED_ADDR = 2
	IWPM_NLA_MAPINFO_FLAGS       = 3
	IWPM_NLA_MAPINFO_MAX         = 4
)

const (
	IWPM_NLA_MAPINFO_NUM_UNSPEC = 0
	IWPM_NLA_MAPINFO_SEQ        = 1
	IWPM_NLA_MAPINFO_SEND_NUM   = 2
	IWPM_NLA_MAPINFO_ACK_NUM    = 3
	IWPM_NLA_MAPINFO_NUM_MAX    = 4
)

const (
	IWPM_NLA_ERR_UNSPEC = 0
	IWPM_NLA_ERR_SEQ    = 1
	IWPM_NLA_ERR_CODE   = 2
	IWPM_NLA_ERR_MAX    = 3
)

const (
	IWPM_NLA_HELLO_UNSPEC      = 0
	IWPM_NLA_HELLO_ABI_VERSION = 1
	IWPM_NLA_HELLO_MAX         = 2
)

const (
	RDMA_NODE_IB_CA       = 1
	RDMA_NODE_IB_SWITCH   = 2
	RDMA_NODE_IB_ROUTER   = 3
	RDMA_NODE_RNIC        = 4
	RDMA_NODE_USNIC       = 5
	RDMA_NODE_USNIC_UDP   = 6
	RDMA_NODE_UNSPECIFIED = 7
)

const (
	RDMA_NL_LS_OP_RESOLVE     = 0
	RDMA_NL_LS_OP_SET_TIMEOUT = 1
	RDMA_NL_LS_OP_IP_RESOLVE  = 2
	RDMA_NL_LS_NUM_OPS        = 3
)

const (
	LS_RESOLVE_PATH_USE_ALL            = 0
	LS_RESOLVE_PATH_USE_UNIDIRECTIONAL = 1
	LS_RESOLVE_PATH_USE_GMP            = 2
	LS_RESOLVE_PATH_USE_MAX            = 3
)

const (
	LS_NLA_TYPE_UNSPEC      = 0
	LS_NLA_TYPE_PATH_RECORD = 1
	LS_NLA_TYPE_TIMEOUT     = 2
	LS_NLA_TYPE_SERVICE_ID  = 3
	LS_NLA_TYPE_DGID        = 4
	LS_NLA_TYPE_SGID        = 5
	LS_NLA_TYPE_TCLASS      = 6
	LS_NLA_TYPE_PKEY        = 7
	LS_NLA_TYPE_QOS_CLASS   = 8
	LS_NLA_TYPE_IPV4        = 9
	LS_NLA_TYPE_IPV6        = 10
	LS_NLA_TYPE_MAX         = 11
)

// enum rdma_nldev_command.
const (
	RDMA_NLDEV_CMD_UNSPEC          = 0
	RDMA_NLDEV_CMD_GET             = 1
	RDMA_NLDEV_CMD_SET             = 2
	RDMA_NLDEV_CMD_NEWLINK         = 3
	RDMA_NLDEV_CMD_DELLINK         = 4
	RDMA_NLDEV_CMD_PORT_GET        = 5
	RDMA_NLDEV_CMD_SYS_GET         = 6
	RDMA_NLDEV_CMD_SYS_SET         = 7
	RDMA_NLDEV_CMD_RES_GET         = 9
	RDMA_NLDEV_CMD_RES_QP_GET      = 10
	RDMA_NLDEV_CMD_RES_CM_ID_GET   = 11
	RDMA_NLDEV_CMD_RES_CQ_GET      = 12
	RDMA_NLDEV_CMD_RES_MR_GET      = 13
	RDMA_NLDEV_CMD_RES_PD_GET      = 14
	RDMA_NLDEV_CMD_GET_CHARDEV     = 15
	RDMA_NLDEV_CMD_STAT_SET        = 16
	RDMA_NLDEV_CMD_STAT_GET        = 17
	RDMA_NLDEV_CMD_STAT_DEL        = 18
	RDMA_NLDEV_CMD_RES_QP_GET_RAW  = 19
	RDMA_NLDEV_CMD_RES_CQ_GET_RAW  = 20
	RDMA_NLDEV_CMD_RES_MR_GET_RAW  = 21
	RDMA_NLDEV_CMD_RES_CTX_GET     = 22
	RDMA_NLDEV_CMD_RES_SRQ_GET     = 23
	RDMA_NLDEV_CMD_STAT_GET_STATUS = 24
	// Linux 6.x+ additions, absent from Debian 12 headers.
	RDMA_NLDEV_CMD_RES_SRQ_GET_RAW = 25
	RDMA_NLDEV_CMD_NEWDEV          = 26
	RDMA_NLDEV_CMD_DELDEV          = 27
	RDMA_NLDEV_CMD_MONITOR         = 28
)

// enum rdma_nldev_print_type.
const (
	RDMA_NLDEV_PRINT_TYPE_UNSPEC = 0
	RDMA_NLDEV_PRINT_TYPE_HEX    = 1
)

// enum rdma_nldev_attr.
const (
	RDMA_NLDEV_ATTR_UNSPEC                     = 0
	RDMA_NLDEV_ATTR_PAD                        = 0
	RDMA_NLDEV_ATTR_DEV_INDEX                  = 1
	RDMA_NLDEV_ATTR_DEV_NAME                   = 2
	RDMA_NLDEV_ATTR_PORT_INDEX                 = 3
	RDMA_NLDEV_ATTR_CAP_FLAGS                  = 4
	RDMA_NLDEV_ATTR_FW_VERSION                 = 5
	RDMA_NLDEV_ATTR_NODE_GUID                  = 6
	RDMA_NLDEV_ATTR_SYS_IMAGE_GUID             = 7
	RDMA_NLDEV_ATTR_SUBNET_PREFIX              = 8
	RDMA_NLDEV_ATTR_LID                        = 9
	RDMA_NLDEV_ATTR_SM_LID                     = 10
	RDMA_NLDEV_ATTR_LMC                        = 11
	RDMA_NLDEV_ATTR_PORT_STATE                 = 12
	RDMA_NLDEV_ATTR_PORT_PHYS_STATE            = 13
	RDMA_NLDEV_ATTR_DEV_NODE_TYPE              = 14
	RDMA_NLDEV_ATTR_RES_SUMMARY                = 15
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY          = 16
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME     = 17
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR     = 18
	RDMA_NLDEV_ATTR_RES_QP                     = 19
	RDMA_NLDEV_ATTR_RES_QP_ENTRY               = 20
	RDMA_NLDEV_ATTR_RES_LQPN                   = 21
	RDMA_NLDEV_ATTR_RES_RQPN                   = 22
	RDMA_NLDEV_ATTR_RES_RQ_PSN                 = 23
	RDMA_NLDEV_ATTR_RES_SQ_PSN                 = 24
	RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE         = 25
	RDMA_NLDEV_ATTR_RES_TYPE                   = 26
	RDMA_NLDEV_ATTR_RES_STATE                  = 27
	RDMA_NLDEV_ATTR_RES_PID                    = 28
	RDMA_NLDEV_ATTR_RES_KERN_NAME              = 29
	RDMA_NLDEV_ATTR_RES_CM_ID                  = 30
	RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY            = 31
	RDMA_NLDEV_ATTR_RES_PS                     = 32
	RDMA_NLDEV_ATTR_RES_SRC_ADDR               = 33
	RDMA_NLDEV_ATTR_RES_DST_ADDR               = 34
	RDMA_NLDEV_ATTR_RES_CQ                     = 35
	RDMA_NLDEV_ATTR_RES_CQ_ENTRY               = 36
	RDMA_NLDEV_ATTR_RES_CQE                    = 37
	RDMA_NLDEV_ATTR_RES_USECNT                 = 38
	RDMA_NLDEV_ATTR_RES_POLL_CTX               = 39
	RDMA_NLDEV_ATTR_RES_MR                     = 40
	RDMA_NLDEV_ATTR_RES_MR_ENTRY               = 41
	RDMA_NLDEV_ATTR_RES_RKEY                   = 42
	RDMA_NLDEV_ATTR_RES_LKEY                   = 43
	RDMA_NLDEV_ATTR_RES_IOVA                   = 44
	RDMA_NLDEV_ATTR_RES_MRLEN                  = 45
	RDMA_NLDEV_ATTR_RES_PD                     = 46
	RDMA_NLDEV_ATTR_RES_PD_ENTRY               = 47
	RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY         = 48
	RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY     = 49
	RDMA_NLDEV_ATTR_NDEV_INDEX                 = 50
	RDMA_NLDEV_ATTR_NDEV_NAME                  = 51
	RDMA_NLDEV_ATTR_DRIVER                     = 52
	RDMA_NLDEV_ATTR_DRIVER_ENTRY               = 53
	RDMA_NLDEV_ATTR_DRIVER_STRING              = 54
	RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE          = 55
	RDMA_NLDEV_ATTR_DRIVER_S32                 = 56
	RDMA_NLDEV_ATTR_DRIVER_U32                 = 57
	RDMA_NLDEV_ATTR_DRIVER_S64                 = 58
	RDMA_NLDEV_ATTR_DRIVER_U64                 = 59
	RDMA_NLDEV_ATTR_RES_PDN                    = 60
	RDMA_NLDEV_ATTR_RES_CQN                    = 61
	RDMA_NLDEV_ATTR_RES_MRN                    = 62
	RDMA_NLDEV_ATTR_RES_CM_IDN                 = 63
	RDMA_NLDEV_ATTR_RES_CTXN                   = 64
	RDMA_NLDEV_ATTR_LINK_TYPE                  = 65
	RDMA_NLDEV_SYS_ATTR_NETNS_MODE             = 66
	RDMA_NLDEV_ATTR_DEV_PROTOCOL               = 67
	RDMA_NLDEV_NET_NS_FD                       = 68
	RDMA_NLDEV_ATTR_CHARDEV_TYPE               = 69
	RDMA_NLDEV_ATTR_CHARDEV_NAME               = 70
	RDMA_NLDEV_ATTR_CHARDEV_ABI                = 71
	RDMA_NLDEV_ATTR_CHARDEV                    = 72
	RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID           = 73
	RDMA_NLDEV_ATTR_STAT_MODE                  = 74
	RDMA_NLDEV_ATTR_STAT_RES                   = 75
	RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK        = 76
	RDMA_NLDEV_ATTR_STAT_COUNTER               = 77
	RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY         = 78
	RDMA_NLDEV_ATTR_STAT_COUNTER_ID            = 79
	RDMA_NLDEV_ATTR_STAT_HWCOUNTERS            = 80
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY       = 81
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME  = 82
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE = 83
	RDMA_NLDEV_ATTR_DEV_DIM                    = 84
	RDMA_NLDEV_ATTR_RES_RAW                    = 85
	RDMA_NLDEV_ATTR_RES_CTX                    = 86
	RDMA_NLDEV_ATTR_RES_CTX_ENTRY              = 87
	RDMA_NLDEV_ATTR_RES_SRQ                    = 88
	RDMA_NLDEV_ATTR_RES_SRQ_ENTRY              = 89
	RDMA_NLDEV_ATTR_RES_SRQN                   = 90
	RDMA_NLDEV_ATTR_MIN_RANGE                  = 91
	RDMA_NLDEV_ATTR_MAX_RANGE                  = 92
	RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK           = 93
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX       = 94
	RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC     = 95
	// Linux 6.x+ additions, absent from Debian 12 headers.
	RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE = 96  // u8
	RDMA_NLDEV_ATTR_DRIVER_DETAILS           = 97  // u8
	RDMA_NLDEV_ATTR_RES_SUBTYPE              = 98  // string
	RDMA_NLDEV_ATTR_DEV_TYPE                 = 99  // u8
	RDMA_NLDEV_ATTR_PARENT_NAME              = 100 // string
	RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE         = 101 // u8
	RDMA_NLDEV_ATTR_EVENT_TYPE               = 102 // u8
	RDMA_NLDEV_SYS_ATTR_MONITOR_MODE         = 103 // u8
)

// enum rdma_nl_counter_mode.
const (
	RDMA_COUNTER_MODE_NONE   = 0
	RDMA_COUNTER_MODE_AUTO   = 1
	RDMA_COUNTER_MODE_MANUAL = 2
	RDMA_COUNTER_MODE_MAX    = 3
)

// enum rdma_nl_counter_mask.
const (
	RDMA_COUNTER_MASK_QP_TYPE = 1
	RDMA_COUNTER_MASK_PID     = 2
)

// enum rdma_nl_dev_type. Linux 6.11+.
const (
	RDMA_DEVICE_TYPE_SMI = 1
)

// enum rdma_nl_name_assign_type. Linux 6.11+.
const (
	RDMA_NAME_ASSIGN_TYPE_UNKNOWN = 0
	RDMA_NAME_ASSIGN_TYPE_USER    = 1
)

// enum rdma_nl_notify_event_type (RDMA_NLDEV_ATTR_EVENT_TYPE). Linux 6.11+.
const (
	RDMA_REGISTER_EVENT      = 0
	RDMA_UNREGISTER_EVENT    = 1
	RDMA_NETDEV_ATTACH_EVENT = 2
	RDMA_NETDEV_DETACH_EVENT = 3
	RDMA_RENAME_EVENT        = 4
	RDMA_NETDEV_RENAME_EVENT = 5
)

// RdmaLsResolveHeader is struct rdma_ls_resolve_header, the family header of
// a local-service RESOLVE request.
type RdmaLsResolveHeader struct {
	DeviceName [LS_DEVICE_NAME_MAX]uint8
	PortNum    uint8
	PathUse    uint8
}

// RdmaLsIpResolveHeader is struct rdma_ls_ip_resolve_header.
type RdmaLsIpResolveHeader struct {
	Ifindex uint32
}

// RdmaNlaLsGid is struct rdma_nla_ls_gid (big endian GID).
type RdmaNlaLsGid struct {
	Gid [16]uint8
}

const (
	SizeofRdmaLsResolveHeader   = 66
	SizeofRdmaLsIpResolveHeader = 4
	SizeofRdmaNlaLsGid          = 16
)

// Additions from linux-rdma/rdma-core@691953d:kernel-headers/rdma/rdma_netlink.h (newer kernels than Debian 12; absent from its headers).

// enum rdma_nldev_command (continued).
const (
	RDMA_NLDEV_CMD_FRMR_POOLS_GET = 29
	RDMA_NLDEV_CMD_FRMR_POOLS_SET = 30
)

// enum rdma_nldev_attr (continued).
const (
	RDMA_NLDEV_ATTR_STAT_OPCOUNTER_ENABLED          = 104
	RDMA_NLDEV_ATTR_FRMR_POOLS                      = 105
	RDMA_NLDEV_ATTR_FRMR_POOL_ENTRY                 = 106
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY                   = 107
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY_ATS               = 108
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY_ACCESS_FLAGS      = 109
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY_VENDOR_KEY        = 110
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY_NUM_DMA_BLOCKS    = 111
	RDMA_NLDEV_ATTR_FRMR_POOL_QUEUE_HANDLES         = 112
	RDMA_NLDEV_ATTR_FRMR_POOL_MAX_IN_USE            = 113
	RDMA_NLDEV_ATTR_FRMR_POOL_IN_USE                = 114
	RDMA_NLDEV_ATTR_FRMR_POOLS_AGING_PERIOD         = 115
	RDMA_NLDEV_ATTR_FRMR_POOL_PINNED_HANDLES        = 116
	RDMA_NLDEV_ATTR_FRMR_POOL_KEY_KERNEL_VENDOR_KEY = 117
	RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_MAX           = 118
)
