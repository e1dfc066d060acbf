package uapi

import "unsafe"

// Legacy write() commands of include/uapi/rdma/ib_user_verbs.h. Modern
// kernels reach them through the ioctl method UVERBS_METHOD_INVOKE_WRITE
// (object UVERBS_OBJECT_DEVICE) with the command number in
// UVERBS_ATTR_WRITE_CMD, the request in UVERBS_ATTR_CORE_IN and the response
// in UVERBS_ATTR_CORE_OUT; only commands without an ioctl method need it.
//
// Source: include/uapi/rdma/ib_user_verbs.h (Debian 12: /usr/include/rdma/).

const (
	IB_USER_VERBS_ABI_VERSION          = 6
	IB_USER_VERBS_CMD_THRESHOLD        = 50
	IB_USER_VERBS_CMD_COMMAND_MASK     = 0xff
	IB_USER_VERBS_CMD_FLAG_EXTENDED    = 0x80000000
	IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE = 0x0d
	IB_DEVICE_NAME_MAX                 = 64
)

// enum ib_uverbs_write_cmds: command numbers of the write() ABI.
const (
	IB_USER_VERBS_CMD_GET_CONTEXT         = 0
	IB_USER_VERBS_CMD_QUERY_DEVICE        = 1
	IB_USER_VERBS_CMD_QUERY_PORT          = 2
	IB_USER_VERBS_CMD_ALLOC_PD            = 3
	IB_USER_VERBS_CMD_DEALLOC_PD          = 4
	IB_USER_VERBS_CMD_CREATE_AH           = 5
	IB_USER_VERBS_CMD_MODIFY_AH           = 6
	IB_USER_VERBS_CMD_QUERY_AH            = 7
	IB_USER_VERBS_CMD_DESTROY_AH          = 8
	IB_USER_VERBS_CMD_REG_MR              = 9
	IB_USER_VERBS_CMD_REG_SMR             = 10
	IB_USER_VERBS_CMD_REREG_MR            = 11
	IB_USER_VERBS_CMD_QUERY_MR            = 12
	IB_USER_VERBS_CMD_DEREG_MR            = 13
	IB_USER_VERBS_CMD_ALLOC_MW            = 14
	IB_USER_VERBS_CMD_BIND_MW             = 15
	IB_USER_VERBS_CMD_DEALLOC_MW          = 16
	IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL = 17
	IB_USER_VERBS_CMD_CREATE_CQ           = 18
	IB_USER_VERBS_CMD_RESIZE_CQ           = 19
	IB_USER_VERBS_CMD_DESTROY_CQ          = 20
	IB_USER_VERBS_CMD_POLL_CQ             = 21
	IB_USER_VERBS_CMD_PEEK_CQ             = 22
	IB_USER_VERBS_CMD_REQ_NOTIFY_CQ       = 23
	IB_USER_VERBS_CMD_CREATE_QP           = 24
	IB_USER_VERBS_CMD_QUERY_QP            = 25
	IB_USER_VERBS_CMD_MODIFY_QP           = 26
	IB_USER_VERBS_CMD_DESTROY_QP          = 27
	IB_USER_VERBS_CMD_POST_SEND           = 28
	IB_USER_VERBS_CMD_POST_RECV           = 29
	IB_USER_VERBS_CMD_ATTACH_MCAST        = 30
	IB_USER_VERBS_CMD_DETACH_MCAST        = 31
	IB_USER_VERBS_CMD_CREATE_SRQ          = 32
	IB_USER_VERBS_CMD_MODIFY_SRQ          = 33
	IB_USER_VERBS_CMD_QUERY_SRQ           = 34
	IB_USER_VERBS_CMD_DESTROY_SRQ         = 35
	IB_USER_VERBS_CMD_POST_SRQ_RECV       = 36
	IB_USER_VERBS_CMD_OPEN_XRCD           = 37
	IB_USER_VERBS_CMD_CLOSE_XRCD          = 38
	IB_USER_VERBS_CMD_CREATE_XSRQ         = 39
	IB_USER_VERBS_CMD_OPEN_QP             = 40
)

// Extended command numbers (sent with IB_USER_VERBS_CMD_FLAG_EXTENDED).
const (
	IB_USER_VERBS_EX_CMD_QUERY_DEVICE        = 1
	IB_USER_VERBS_EX_CMD_CREATE_CQ           = 18
	IB_USER_VERBS_EX_CMD_CREATE_QP           = 24
	IB_USER_VERBS_EX_CMD_MODIFY_QP           = 26
	IB_USER_VERBS_EX_CMD_CREATE_FLOW         = 50
	IB_USER_VERBS_EX_CMD_DESTROY_FLOW        = 51
	IB_USER_VERBS_EX_CMD_CREATE_WQ           = 52
	IB_USER_VERBS_EX_CMD_MODIFY_WQ           = 53
	IB_USER_VERBS_EX_CMD_DESTROY_WQ          = 54
	IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL  = 55
	IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL = 56
	IB_USER_VERBS_EX_CMD_MODIFY_CQ           = 57
)

// enum ib_uverbs_ex_create_cq_flags.
const (
	IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION = 1
	IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN       = 2
)

// enum ib_uverbs_wc_opcode.
const (
	IB_UVERBS_WC_SEND       = 0
	IB_UVERBS_WC_RDMA_WRITE = 1
	IB_UVERBS_WC_RDMA_READ  = 2
	IB_UVERBS_WC_COMP_SWAP  = 3
	IB_UVERBS_WC_FETCH_ADD  = 4
	IB_UVERBS_WC_BIND_MW    = 5
	IB_UVERBS_WC_LOCAL_INV  = 6
	IB_UVERBS_WC_TSO        = 7
)

// enum ib_uverbs_create_qp_mask.
const (
	IB_UVERBS_CREATE_QP_MASK_IND_TABLE = 1
)

// Supported comp_mask bits of ib_uverbs_ex_create_qp.
const (
	IB_UVERBS_CREATE_QP_SUP_COMP_MASK = 1
)

// enum ib_uverbs_wr_opcode.
const (
	IB_UVERBS_WR_RDMA_WRITE                  = 0
	IB_UVERBS_WR_RDMA_WRITE_WITH_IMM         = 1
	IB_UVERBS_WR_SEND                        = 2
	IB_UVERBS_WR_SEND_WITH_IMM               = 3
	IB_UVERBS_WR_RDMA_READ                   = 4
	IB_UVERBS_WR_ATOMIC_CMP_AND_SWP          = 5
	IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD        = 6
	IB_UVERBS_WR_LOCAL_INV                   = 7
	IB_UVERBS_WR_BIND_MW                     = 8
	IB_UVERBS_WR_SEND_WITH_INV               = 9
	IB_UVERBS_WR_TSO                         = 10
	IB_UVERBS_WR_RDMA_READ_WITH_INV          = 11
	IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP   = 12
	IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD = 13
)

// enum ib_uverbs_device_cap_flags.
const (
	IB_UVERBS_DEVICE_RESIZE_MAX_WR         = 1
	IB_UVERBS_DEVICE_BAD_PKEY_CNTR         = 2
	IB_UVERBS_DEVICE_BAD_QKEY_CNTR         = 4
	IB_UVERBS_DEVICE_RAW_MULTI             = 8
	IB_UVERBS_DEVICE_AUTO_PATH_MIG         = 16
	IB_UVERBS_DEVICE_CHANGE_PHY_PORT       = 32
	IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE    = 64
	IB_UVERBS_DEVICE_CURR_QP_STATE_MOD     = 128
	IB_UVERBS_DEVICE_SHUTDOWN_PORT         = 0x100
	IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT     = 0x400
	IB_UVERBS_DEVICE_SYS_IMAGE_GUID        = 0x800
	IB_UVERBS_DEVICE_RC_RNR_NAK_GEN        = 0x1000
	IB_UVERBS_DEVICE_SRQ_RESIZE            = 0x2000
	IB_UVERBS_DEVICE_N_NOTIFY_CQ           = 0x4000
	IB_UVERBS_DEVICE_MEM_WINDOW            = 0x20000
	IB_UVERBS_DEVICE_UD_IP_CSUM            = 0x40000
	IB_UVERBS_DEVICE_XRC                   = 0x100000
	IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS    = 0x200000
	IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A    = 0x800000
	IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B    = 0x1000000
	IB_UVERBS_DEVICE_RC_IP_CSUM            = 0x2000000
	IB_UVERBS_DEVICE_RAW_IP_CSUM           = 0x4000000
	IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING = 0x20000000
	IB_UVERBS_DEVICE_RAW_SCATTER_FCS       = 0x400000000
	IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING = 0x1000000000
)

// enum ib_uverbs_raw_packet_caps.
const (
	IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING = 1
	IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS     = 2
	IB_UVERBS_RAW_PACKET_CAP_IP_CSUM         = 4
	IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP      = 8
)

// IbUverbsAsyncEventDesc is struct ib_uverbs_async_event_desc.
type IbUverbsAsyncEventDesc struct {
	Element   uint64
	EventType uint32
	Reserved  uint32
}

const SizeofIbUverbsAsyncEventDesc = 16

// IbUverbsCompEventDesc is struct ib_uverbs_comp_event_desc.
type IbUverbsCompEventDesc struct {
	CqHandle uint64
}

const SizeofIbUverbsCompEventDesc = 8

// IbUverbsCqModerationCaps is struct ib_uverbs_cq_moderation_caps.
type IbUverbsCqModerationCaps struct {
	MaxCqModerationCount  uint16
	MaxCqModerationPeriod uint16
	Reserved              uint32
}

const SizeofIbUverbsCqModerationCaps = 8

// IbUverbsCmdHdr is struct ib_uverbs_cmd_hdr.
type IbUverbsCmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

const SizeofIbUverbsCmdHdr = 8

// IbUverbsExCmdHdr is struct ib_uverbs_ex_cmd_hdr.
type IbUverbsExCmdHdr struct {
	Response         uint64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

const SizeofIbUverbsExCmdHdr = 16

// IbUverbsGetContext is struct ib_uverbs_get_context.
type IbUverbsGetContext struct {
	Response uint64
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsGetContext = 8

// IbUverbsGetContextResp is struct ib_uverbs_get_context_resp.
type IbUverbsGetContextResp struct {
	AsyncFd        uint32
	NumCompVectors uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsGetContextResp = 8

// IbUverbsQueryDevice is struct ib_uverbs_query_device.
type IbUverbsQueryDevice struct {
	Response uint64
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsQueryDevice = 8

// IbUverbsQueryDeviceResp is struct ib_uverbs_query_device_resp.
type IbUverbsQueryDeviceResp struct {
	FwVer                 uint64
	NodeGuid              uint64
	SysImageGuid          uint64
	MaxMrSize             uint64
	PageSizeCap           uint64
	VendorId              uint32
	VendorPartId          uint32
	HwVer                 uint32
	MaxQp                 uint32
	MaxQpWr               uint32
	DeviceCapFlags        uint32
	MaxSge                uint32
	MaxSgeRd              uint32
	MaxCq                 uint32
	MaxCqe                uint32
	MaxMr                 uint32
	MaxPd                 uint32
	MaxQpRdAtom           uint32
	MaxEeRdAtom           uint32
	MaxResRdAtom          uint32
	MaxQpInitRdAtom       uint32
	MaxEeInitRdAtom       uint32
	AtomicCap             uint32
	MaxEe                 uint32
	MaxRdd                uint32
	MaxMw                 uint32
	MaxRawIpv6Qp          uint32
	MaxRawEthyQp          uint32
	MaxMcastGrp           uint32
	MaxMcastQpAttach      uint32
	MaxTotalMcastQpAttach uint32
	MaxAh                 uint32
	MaxFmr                uint32
	MaxMapPerFmr          uint32
	MaxSrq                uint32
	MaxSrqWr              uint32
	MaxSrqSge             uint32
	MaxPkeys              uint16
	LocalCaAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]uint8
}

const SizeofIbUverbsQueryDeviceResp = 176

// IbUverbsExQueryDevice is struct ib_uverbs_ex_query_device.
type IbUverbsExQueryDevice struct {
	CompMask uint32
	Reserved uint32
}

const SizeofIbUverbsExQueryDevice = 8

// IbUverbsOdpCaps is struct ib_uverbs_odp_caps.
type IbUverbsOdpCaps struct {
	GeneralCaps      uint64
	PerTransportCaps struct {
		RcOdpCaps uint32
		UcOdpCaps uint32
		UdOdpCaps uint32
	}
	Reserved uint32
}

const SizeofIbUverbsOdpCaps = 24

// IbUverbsRssCaps is struct ib_uverbs_rss_caps.
type IbUverbsRssCaps struct {
	SupportedQpts              uint32
	MaxRwqIndirectionTables    uint32
	MaxRwqIndirectionTableSize uint32
	Reserved                   uint32
}

const SizeofIbUverbsRssCaps = 16

// IbUverbsTmCaps is struct ib_uverbs_tm_caps.
type IbUverbsTmCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32
	MaxOps         uint32
	MaxSge         uint32
	Reserved       uint32
}

const SizeofIbUverbsTmCaps = 24

// IbUverbsExQueryDeviceResp is struct ib_uverbs_ex_query_device_resp.
type IbUverbsExQueryDeviceResp struct {
	Base             IbUverbsQueryDeviceResp
	CompMask         uint32
	ResponseLength   uint32
	OdpCaps          IbUverbsOdpCaps
	TimestampMask    uint64
	HcaCoreClock     uint64
	DeviceCapFlagsEx uint64
	RssCaps          IbUverbsRssCaps
	MaxWqTypeRq      uint32
	RawPacketCaps    uint32
	TmCaps           IbUverbsTmCaps
	CqModerationCaps IbUverbsCqModerationCaps
	MaxDmSize        uint64
	XrcOdpCaps       uint32
	Reserved         uint32
}

const SizeofIbUverbsExQueryDeviceResp = 304

// IbUverbsQueryPort is struct ib_uverbs_query_port.
type IbUverbsQueryPort struct {
	Response uint64
	PortNum  uint8
	Reserved [7]uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsQueryPort = 16

// IbUverbsQueryPortResp is struct ib_uverbs_query_port_resp.
type IbUverbsQueryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	GidTblLen     uint32
	PkeyTblLen    uint16
	Lid           uint16
	SmLid         uint16
	State         uint8
	MaxMtu        uint8
	ActiveMtu     uint8
	Lmc           uint8
	MaxVlNum      uint8
	SmSl          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

const SizeofIbUverbsQueryPortResp = 40

// IbUverbsAllocPd is struct ib_uverbs_alloc_pd.
type IbUverbsAllocPd struct {
	Response uint64
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsAllocPd = 8

// IbUverbsAllocPdResp is struct ib_uverbs_alloc_pd_resp.
type IbUverbsAllocPdResp struct {
	PdHandle uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsAllocPdResp = 4

// IbUverbsDeallocPd is struct ib_uverbs_dealloc_pd.
type IbUverbsDeallocPd struct {
	PdHandle uint32
}

const SizeofIbUverbsDeallocPd = 4

// IbUverbsOpenXrcd is struct ib_uverbs_open_xrcd.
type IbUverbsOpenXrcd struct {
	Response uint64
	Fd       uint32
	Oflags   uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsOpenXrcd = 16

// IbUverbsOpenXrcdResp is struct ib_uverbs_open_xrcd_resp.
type IbUverbsOpenXrcdResp struct {
	XrcdHandle uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsOpenXrcdResp = 4

// IbUverbsCloseXrcd is struct ib_uverbs_close_xrcd.
type IbUverbsCloseXrcd struct {
	XrcdHandle uint32
}

const SizeofIbUverbsCloseXrcd = 4

// IbUverbsRegMr is struct ib_uverbs_reg_mr.
type IbUverbsRegMr struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HcaVa       uint64
	PdHandle    uint32
	AccessFlags uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsRegMr = 40

// IbUverbsRegMrResp is struct ib_uverbs_reg_mr_resp.
type IbUverbsRegMrResp struct {
	MrHandle uint32
	Lkey     uint32
	Rkey     uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsRegMrResp = 12

// IbUverbsReregMr is struct ib_uverbs_rereg_mr.
type IbUverbsReregMr struct {
	Response    uint64
	MrHandle    uint32
	Flags       uint32
	Start       uint64
	Length      uint64
	HcaVa       uint64
	PdHandle    uint32
	AccessFlags uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsReregMr = 48

// IbUverbsReregMrResp is struct ib_uverbs_rereg_mr_resp.
type IbUverbsReregMrResp struct {
	Lkey uint32
	Rkey uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsReregMrResp = 8

// IbUverbsDeregMr is struct ib_uverbs_dereg_mr.
type IbUverbsDeregMr struct {
	MrHandle uint32
}

const SizeofIbUverbsDeregMr = 4

// IbUverbsAllocMw is struct ib_uverbs_alloc_mw.
type IbUverbsAllocMw struct {
	Response uint64
	PdHandle uint32
	MwType   uint8
	Reserved [3]uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsAllocMw = 16

// IbUverbsAllocMwResp is struct ib_uverbs_alloc_mw_resp.
type IbUverbsAllocMwResp struct {
	MwHandle uint32
	Rkey     uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsAllocMwResp = 8

// IbUverbsDeallocMw is struct ib_uverbs_dealloc_mw.
type IbUverbsDeallocMw struct {
	MwHandle uint32
}

const SizeofIbUverbsDeallocMw = 4

// IbUverbsCreateCompChannel is struct ib_uverbs_create_comp_channel.
type IbUverbsCreateCompChannel struct {
	Response uint64
}

const SizeofIbUverbsCreateCompChannel = 8

// IbUverbsCreateCompChannelResp is struct ib_uverbs_create_comp_channel_resp.
type IbUverbsCreateCompChannelResp struct {
	Fd uint32
}

const SizeofIbUverbsCreateCompChannelResp = 4

// IbUverbsCreateCq is struct ib_uverbs_create_cq.
type IbUverbsCreateCq struct {
	Response    uint64
	UserHandle  uint64
	Cqe         uint32
	CompVector  uint32
	CompChannel int32
	Reserved    uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateCq = 32

// IbUverbsExCreateCq is struct ib_uverbs_ex_create_cq.
type IbUverbsExCreateCq struct {
	UserHandle  uint64
	Cqe         uint32
	CompVector  uint32
	CompChannel int32
	CompMask    uint32
	Flags       uint32
	Reserved    uint32
}

const SizeofIbUverbsExCreateCq = 32

// IbUverbsCreateCqResp is struct ib_uverbs_create_cq_resp.
type IbUverbsCreateCqResp struct {
	CqHandle uint32
	Cqe      uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateCqResp = 8

// IbUverbsExCreateCqResp is struct ib_uverbs_ex_create_cq_resp.
type IbUverbsExCreateCqResp struct {
	Base           IbUverbsCreateCqResp
	CompMask       uint32
	ResponseLength uint32
}

const SizeofIbUverbsExCreateCqResp = 16

// IbUverbsResizeCq is struct ib_uverbs_resize_cq.
type IbUverbsResizeCq struct {
	Response uint64
	CqHandle uint32
	Cqe      uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsResizeCq = 16

// IbUverbsResizeCqResp is struct ib_uverbs_resize_cq_resp.
type IbUverbsResizeCqResp struct {
	Cqe      uint32
	Reserved uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsResizeCqResp = 8

// IbUverbsPollCq is struct ib_uverbs_poll_cq.
type IbUverbsPollCq struct {
	Response uint64
	CqHandle uint32
	Ne       uint32
}

const SizeofIbUverbsPollCq = 16

// IbUverbsWc is struct ib_uverbs_wc.
type IbUverbsWc struct {
	WrId         uint64
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	Ex           uint32
	QpNum        uint32
	SrcQp        uint32
	WcFlags      uint32
	PkeyIndex    uint16
	Slid         uint16
	Sl           uint8
	DlidPathBits uint8
	PortNum      uint8
	Reserved     uint8
}

const SizeofIbUverbsWc = 48

// IbUverbsPollCqResp is struct ib_uverbs_poll_cq_resp.
type IbUverbsPollCqResp struct {
	Count    uint32
	Reserved uint32
	// wc[] follows (flexible array)
}

const SizeofIbUverbsPollCqResp = 8

// IbUverbsReqNotifyCq is struct ib_uverbs_req_notify_cq.
type IbUverbsReqNotifyCq struct {
	CqHandle      uint32
	SolicitedOnly uint32
}

const SizeofIbUverbsReqNotifyCq = 8

// IbUverbsDestroyCq is struct ib_uverbs_destroy_cq.
type IbUverbsDestroyCq struct {
	Response uint64
	CqHandle uint32
	Reserved uint32
}

const SizeofIbUverbsDestroyCq = 16

// IbUverbsDestroyCqResp is struct ib_uverbs_destroy_cq_resp.
type IbUverbsDestroyCqResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

const SizeofIbUverbsDestroyCqResp = 8

// IbUverbsGlobalRoute is struct ib_uverbs_global_route.
type IbUverbsGlobalRoute struct {
	Dgid         [16]uint8
	FlowLabel    uint32
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
}

const SizeofIbUverbsGlobalRoute = 24

// IbUverbsAhAttr is struct ib_uverbs_ah_attr.
type IbUverbsAhAttr struct {
	Grh         IbUverbsGlobalRoute
	Dlid        uint16
	Sl          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
	Reserved    uint8
}

const SizeofIbUverbsAhAttr = 32

// IbUverbsQpAttr is struct ib_uverbs_qp_attr.
type IbUverbsQpAttr struct {
	QpAttrMask       uint32
	QpState          uint32
	CurQpState       uint32
	PathMtu          uint32
	PathMigState     uint32
	Qkey             uint32
	RqPsn            uint32
	SqPsn            uint32
	DestQpNum        uint32
	QpAccessFlags    uint32
	AhAttr           IbUverbsAhAttr
	AltAhAttr        IbUverbsAhAttr
	MaxSendWr        uint32
	MaxRecvWr        uint32
	MaxSendSge       uint32
	MaxRecvSge       uint32
	MaxInlineData    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	EnSqdAsyncNotify uint8
	SqDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRnrTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RnrRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [5]uint8
}

const SizeofIbUverbsQpAttr = 144

// IbUverbsCreateQp is struct ib_uverbs_create_qp.
type IbUverbsCreateQp struct {
	Response      uint64
	UserHandle    uint64
	PdHandle      uint32
	SendCqHandle  uint32
	RecvCqHandle  uint32
	SrqHandle     uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	SqSigAll      uint8
	QpType        uint8
	IsSrq         uint8
	Reserved      uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateQp = 56

// IbUverbsExCreateQp is struct ib_uverbs_ex_create_qp.
type IbUverbsExCreateQp struct {
	UserHandle      uint64
	PdHandle        uint32
	SendCqHandle    uint32
	RecvCqHandle    uint32
	SrqHandle       uint32
	MaxSendWr       uint32
	MaxRecvWr       uint32
	MaxSendSge      uint32
	MaxRecvSge      uint32
	MaxInlineData   uint32
	SqSigAll        uint8
	QpType          uint8
	IsSrq           uint8
	Reserved        uint8
	CompMask        uint32
	CreateFlags     uint32
	RwqIndTblHandle uint32
	SourceQpn       uint32
}

const SizeofIbUverbsExCreateQp = 64

// IbUverbsOpenQp is struct ib_uverbs_open_qp.
type IbUverbsOpenQp struct {
	Response   uint64
	UserHandle uint64
	PdHandle   uint32
	Qpn        uint32
	QpType     uint8
	Reserved   [7]uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsOpenQp = 32

// IbUverbsCreateQpResp is struct ib_uverbs_create_qp_resp.
type IbUverbsCreateQpResp struct {
	QpHandle      uint32
	Qpn           uint32
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSge    uint32
	MaxRecvSge    uint32
	MaxInlineData uint32
	Reserved      uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateQpResp = 32

// IbUverbsExCreateQpResp is struct ib_uverbs_ex_create_qp_resp.
type IbUverbsExCreateQpResp struct {
	Base           IbUverbsCreateQpResp
	CompMask       uint32
	ResponseLength uint32
}

const SizeofIbUverbsExCreateQpResp = 40

// IbUverbsQpDest is struct ib_uverbs_qp_dest.
type IbUverbsQpDest struct {
	Dgid         [16]uint8
	FlowLabel    uint32
	Dlid         uint16
	Reserved     uint16
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Sl           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

const SizeofIbUverbsQpDest = 32

// IbUverbsQueryQp is struct ib_uverbs_query_qp.
type IbUverbsQueryQp struct {
	Response uint64
	QpHandle uint32
	AttrMask uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsQueryQp = 16

// IbUverbsQueryQpResp is struct ib_uverbs_query_qp_resp.
type IbUverbsQueryQpResp struct {
	Dest            IbUverbsQpDest
	AltDest         IbUverbsQpDest
	MaxSendWr       uint32
	MaxRecvWr       uint32
	MaxSendSge      uint32
	MaxRecvSge      uint32
	MaxInlineData   uint32
	Qkey            uint32
	RqPsn           uint32
	SqPsn           uint32
	DestQpNum       uint32
	QpAccessFlags   uint32
	PkeyIndex       uint16
	AltPkeyIndex    uint16
	QpState         uint8
	CurQpState      uint8
	PathMtu         uint8
	PathMigState    uint8
	SqDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRnrTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RnrRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SqSigAll        uint8
	Reserved        [5]uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsQueryQpResp = 128

// IbUverbsModifyQp is struct ib_uverbs_modify_qp.
type IbUverbsModifyQp struct {
	Dest             IbUverbsQpDest
	AltDest          IbUverbsQpDest
	QpHandle         uint32
	AttrMask         uint32
	Qkey             uint32
	RqPsn            uint32
	SqPsn            uint32
	DestQpNum        uint32
	QpAccessFlags    uint32
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	QpState          uint8
	CurQpState       uint8
	PathMtu          uint8
	PathMigState     uint8
	EnSqdAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRnrTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RnrRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsModifyQp = 112

// IbUverbsExModifyQp is struct ib_uverbs_ex_modify_qp.
type IbUverbsExModifyQp struct {
	Base      IbUverbsModifyQp
	RateLimit uint32
	Reserved  uint32
}

const SizeofIbUverbsExModifyQp = 120

// IbUverbsExModifyQpResp is struct ib_uverbs_ex_modify_qp_resp.
type IbUverbsExModifyQpResp struct {
	CompMask       uint32
	ResponseLength uint32
}

const SizeofIbUverbsExModifyQpResp = 8

// IbUverbsDestroyQp is struct ib_uverbs_destroy_qp.
type IbUverbsDestroyQp struct {
	Response uint64
	QpHandle uint32
	Reserved uint32
}

const SizeofIbUverbsDestroyQp = 16

// IbUverbsDestroyQpResp is struct ib_uverbs_destroy_qp_resp.
type IbUverbsDestroyQpResp struct {
	EventsReported uint32
}

const SizeofIbUverbsDestroyQpResp = 4

// IbUverbsSge is struct ib_uverbs_sge.
type IbUverbsSge struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

const SizeofIbUverbsSge = 16

// IbUverbsSendWr is struct ib_uverbs_send_wr.
type IbUverbsSendWr struct {
	WrId      uint64
	NumSge    uint32
	Opcode    uint32
	SendFlags uint32
	Ex        uint32
	Wr        [32]byte
}

const SizeofIbUverbsSendWr = 56

// IbUverbsPostSend is struct ib_uverbs_post_send.
type IbUverbsPostSend struct {
	Response uint64
	QpHandle uint32
	WrCount  uint32
	SgeCount uint32
	WqeSize  uint32
	// send_wr[] follows (flexible array)
}

const SizeofIbUverbsPostSend = 24

// IbUverbsPostSendResp is struct ib_uverbs_post_send_resp.
type IbUverbsPostSendResp struct {
	BadWr uint32
}

const SizeofIbUverbsPostSendResp = 4

// IbUverbsRecvWr is struct ib_uverbs_recv_wr.
type IbUverbsRecvWr struct {
	WrId     uint64
	NumSge   uint32
	Reserved uint32
}

const SizeofIbUverbsRecvWr = 16

// IbUverbsPostRecv is struct ib_uverbs_post_recv.
type IbUverbsPostRecv struct {
	Response uint64
	QpHandle uint32
	WrCount  uint32
	SgeCount uint32
	WqeSize  uint32
	// recv_wr[] follows (flexible array)
}

const SizeofIbUverbsPostRecv = 24

// IbUverbsPostRecvResp is struct ib_uverbs_post_recv_resp.
type IbUverbsPostRecvResp struct {
	BadWr uint32
}

const SizeofIbUverbsPostRecvResp = 4

// IbUverbsPostSrqRecv is struct ib_uverbs_post_srq_recv.
type IbUverbsPostSrqRecv struct {
	Response  uint64
	SrqHandle uint32
	WrCount   uint32
	SgeCount  uint32
	WqeSize   uint32
	// recv[] follows (flexible array)
}

const SizeofIbUverbsPostSrqRecv = 24

// IbUverbsPostSrqRecvResp is struct ib_uverbs_post_srq_recv_resp.
type IbUverbsPostSrqRecvResp struct {
	BadWr uint32
}

const SizeofIbUverbsPostSrqRecvResp = 4

// IbUverbsCreateAh is struct ib_uverbs_create_ah.
type IbUverbsCreateAh struct {
	Response   uint64
	UserHandle uint64
	PdHandle   uint32
	Reserved   uint32
	Attr       IbUverbsAhAttr
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateAh = 56

// IbUverbsCreateAhResp is struct ib_uverbs_create_ah_resp.
type IbUverbsCreateAhResp struct {
	AhHandle uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateAhResp = 4

// IbUverbsDestroyAh is struct ib_uverbs_destroy_ah.
type IbUverbsDestroyAh struct {
	AhHandle uint32
}

const SizeofIbUverbsDestroyAh = 4

// IbUverbsAttachMcast is struct ib_uverbs_attach_mcast.
type IbUverbsAttachMcast struct {
	Gid      [16]uint8
	QpHandle uint32
	Mlid     uint16
	Reserved uint16
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsAttachMcast = 24

// IbUverbsDetachMcast is struct ib_uverbs_detach_mcast.
type IbUverbsDetachMcast struct {
	Gid      [16]uint8
	QpHandle uint32
	Mlid     uint16
	Reserved uint16
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsDetachMcast = 24

// IbUverbsCreateFlowResp is struct ib_uverbs_create_flow_resp.
type IbUverbsCreateFlowResp struct {
	CompMask   uint32
	FlowHandle uint32
}

const SizeofIbUverbsCreateFlowResp = 8

// IbUverbsCreateSrq is struct ib_uverbs_create_srq.
type IbUverbsCreateSrq struct {
	Response   uint64
	UserHandle uint64
	PdHandle   uint32
	MaxWr      uint32
	MaxSge     uint32
	SrqLimit   uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateSrq = 32

// IbUverbsCreateXsrq is struct ib_uverbs_create_xsrq.
type IbUverbsCreateXsrq struct {
	Response   uint64
	UserHandle uint64
	SrqType    uint32
	PdHandle   uint32
	MaxWr      uint32
	MaxSge     uint32
	SrqLimit   uint32
	MaxNumTags uint32
	XrcdHandle uint32
	CqHandle   uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateXsrq = 48

// IbUverbsCreateSrqResp is struct ib_uverbs_create_srq_resp.
type IbUverbsCreateSrqResp struct {
	SrqHandle uint32
	MaxWr     uint32
	MaxSge    uint32
	Srqn      uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsCreateSrqResp = 16

// IbUverbsModifySrq is struct ib_uverbs_modify_srq.
type IbUverbsModifySrq struct {
	SrqHandle uint32
	AttrMask  uint32
	MaxWr     uint32
	SrqLimit  uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsModifySrq = 16

// IbUverbsQuerySrq is struct ib_uverbs_query_srq.
type IbUverbsQuerySrq struct {
	Response  uint64
	SrqHandle uint32
	Reserved  uint32
	// driver_data[] follows (flexible array)
}

const SizeofIbUverbsQuerySrq = 16

// IbUverbsQuerySrqResp is struct ib_uverbs_query_srq_resp.
type IbUverbsQuerySrqResp struct {
	MaxWr    uint32
	MaxSge   uint32
	SrqLimit uint32
	Reserved uint32
}

const SizeofIbUverbsQuerySrqResp = 16

// IbUverbsDestroySrq is struct ib_uverbs_destroy_srq.
type IbUverbsDestroySrq struct {
	Response  uint64
	SrqHandle uint32
	Reserved  uint32
}

const SizeofIbUverbsDestroySrq = 16

// IbUverbsDestroySrqResp is struct ib_uverbs_destroy_srq_resp.
type IbUverbsDestroySrqResp struct {
	EventsReported uint32
}

const SizeofIbUverbsDestroySrqResp = 4

// IbUverbsExCreateWqResp is struct ib_uverbs_ex_create_wq_resp.
type IbUverbsExCreateWqResp struct {
	CompMask       uint32
	ResponseLength uint32
	WqHandle       uint32
	MaxWr          uint32
	MaxSge         uint32
	Wqn            uint32
}

const SizeofIbUverbsExCreateWqResp = 24

// IbUverbsExDestroyWqResp is struct ib_uverbs_ex_destroy_wq_resp.
type IbUverbsExDestroyWqResp struct {
	CompMask       uint32
	ResponseLength uint32
	EventsReported uint32
	Reserved       uint32
}

const SizeofIbUverbsExDestroyWqResp = 16

// IbUverbsExCreateRwqIndTableResp is struct ib_uverbs_ex_create_rwq_ind_table_resp.
type IbUverbsExCreateRwqIndTableResp struct {
	CompMask       uint32
	ResponseLength uint32
	IndTblHandle   uint32
	IndTblNum      uint32
}

const SizeofIbUverbsExCreateRwqIndTableResp = 16

// IbUverbsCqModeration is struct ib_uverbs_cq_moderation.
type IbUverbsCqModeration struct {
	CqCount  uint16
	CqPeriod uint16
}

const SizeofIbUverbsCqModeration = 4

// IbUverbsExModifyCq is struct ib_uverbs_ex_modify_cq.
type IbUverbsExModifyCq struct {
	CqHandle uint32
	AttrMask uint32
	Attr     IbUverbsCqModeration
	Reserved uint32
}

const SizeofIbUverbsExModifyCq = 16

// IbUverbsSendWrRdma is the wr.rdma view of IbUverbsSendWr.Wr
// (RDMA WRITE/READ work requests).
type IbUverbsSendWrRdma struct {
	RemoteAddr uint64
	Rkey       uint32
	Reserved   uint32
}

// IbUverbsSendWrAtomic is the wr.atomic view of IbUverbsSendWr.Wr.
type IbUverbsSendWrAtomic struct {
	RemoteAddr uint64
	CompareAdd uint64
	Swap       uint64
	Rkey       uint32
	Reserved   uint32
}

// IbUverbsSendWrUd is the wr.ud view of IbUverbsSendWr.Wr.
type IbUverbsSendWrUd struct {
	Ah         uint32
	RemoteQpn  uint32
	RemoteQkey uint32
	Reserved   uint32
}

const (
	SizeofIbUverbsSendWrRdma   = 16
	SizeofIbUverbsSendWrAtomic = 32
	SizeofIbUverbsSendWrUd     = 16
)

// Rdma returns the wr.rdma member of the union, aliasing w.
func (w *IbUverbsSendWr) Rdma() *IbUverbsSendWrRdma {
	return (*IbUverbsSendWrRdma)(unsafe.Pointer(&w.Wr))
}

// Atomic returns the wr.atomic member of the union, aliasing w.
func (w *IbUverbsSendWr) Atomic() *IbUverbsSendWrAtomic {
	return (*IbUverbsSendWrAtomic)(unsafe.Pointer(&w.Wr))
}

// Ud returns the wr.ud member of the union, aliasing w.
func (w *IbUverbsSendWr) Ud() *IbUverbsSendWrUd {
	return (*IbUverbsSendWrUd)(unsafe.Pointer(&w.Wr))
}

// Additions from linux-rdma/rdma-core@691953d:kernel-headers/rdma/ib_user_verbs.h (newer kernels than Debian 12; absent from its headers).

// enum ib_placement_type (continued).
const (
	IB_FLUSH_GLOBAL     = 1
	IB_FLUSH_PERSISTENT = 2
)

// enum ib_selectivity_level (continued).
const (
	IB_FLUSH_RANGE = 0
	IB_FLUSH_MR    = 1
)

// enum ib_uverbs_odp_general_cap_bits (continued).
const (
	IB_UVERBS_ODP_SUPPORT          = 1
	IB_UVERBS_ODP_SUPPORT_IMPLICIT = 2
)

// enum ib_uverbs_odp_transport_cap_bits (continued).
const (
	IB_UVERBS_ODP_SUPPORT_SEND         = 1
	IB_UVERBS_ODP_SUPPORT_RECV         = 2
	IB_UVERBS_ODP_SUPPORT_WRITE        = 4
	IB_UVERBS_ODP_SUPPORT_READ         = 8
	IB_UVERBS_ODP_SUPPORT_ATOMIC       = 16
	IB_UVERBS_ODP_SUPPORT_SRQ_RECV     = 32
	IB_UVERBS_ODP_SUPPORT_FLUSH        = 64
	IB_UVERBS_ODP_SUPPORT_ATOMIC_WRITE = 128
)

// enum ib_uverbs_wc_opcode (continued).
const (
	IB_UVERBS_WC_FLUSH        = 8
	IB_UVERBS_WC_ATOMIC_WRITE = 9
)

// enum ib_uverbs_wr_opcode (continued).
const (
	IB_UVERBS_WR_FLUSH        = 14
	IB_UVERBS_WR_ATOMIC_WRITE = 15
)

// enum ib_uverbs_device_cap_flags (continued).
const (
	IB_UVERBS_DEVICE_FLUSH_GLOBAL     = 0x4000000000
	IB_UVERBS_DEVICE_FLUSH_PERSISTENT = 0x8000000000
	IB_UVERBS_DEVICE_ATOMIC_WRITE     = 0x10000000000
	IB_UVERBS_DEVICE_CC_DMA_BOUNCE    = 0x20000000000
)
