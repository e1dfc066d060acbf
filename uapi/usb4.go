package uapi

// Vendor ABIs of the usb4_rdma devices (thunderbolt_ibverbs kernel module
// and its forks). Plain usb4_rdma speaks only generic uverbs; two forks add
// optional fast paths that a provider discovers at run time:
//
//   - donnerkeule's mapped CQ ring (ABI 2): create_cq returns a
//     TbvUrespCreateCq after the generic response; when ShmAbi equals
//     TBV_CQ_SHM_ABI the CQ's completions can be read from an mmap of the
//     uverbs fd: one TbvCqShm header page followed by Cqe IbUverbsWc entries.
//     Source: neuhaus/donnerkeule:proto/tbv_cq_shm.h.
//   - pleite's Direct Verbs queues (DV ABI v2): driver-namespace ioctl methods
//     on object USB4_RDMA_DV_OBJECT_DEVICE create user-allocated send and
//     completion rings with a two-line doorbell record.
//     Source: pleite/thunderbolt-ibverbs@eca80ec (branch
//     codex/gda-on-correctness-stack-20260605):userspace/usb4_rdma/usb4_rdma_dv.h.
//
// The DV rings and doorbell records are declared packed, aligned(64) in C;
// Go cannot express the 64-byte alignment, so place them only in
// page-aligned memory (they are user-allocated, pinned by the kernel).

// USB4_RDMA_ABI_VERSION is the uverbs ABI version usb4_rdma devices report
// (sysfs abi_version; TBV_IBDEV_ABI_VERSION in the kernel module).
// Source: pleite/thunderbolt-ibverbs:userspace/usb4_rdma/usb4_rdma_abi.h
// (same value in hellas-ai/thunderbolt-ibverbs).
const USB4_RDMA_ABI_VERSION = 1

// Mapped CQ ring (donnerkeule).
const (
	TBV_CQ_SHM_MAGIC = 0x54425643 // "TBVC", TbvCqShm.Magic
	TBV_CQ_SHM_ABI   = 2          // TbvCqShm.Abi and TbvUrespCreateCq.ShmAbi
)

// TbvCqShm is struct tbv_cq_shm, page 0 of the mapped CQ. The ring of Cqe
// IbUverbsWc entries (EntrySize bytes each) starts at RingOffset.
// Produced is written only by the kernel (release), Consumed only by the
// provider (release); both are free-running totals and occupancy is
// Produced-Consumed. OvfSeq != 0 latches a permanent overrun.
type TbvCqShm struct {
	Magic      uint32
	Abi        uint32
	Cqe        uint32
	EntrySize  uint32
	RingOffset uint32
	Produced   uint32
	Consumed   uint32
	OvfSeq     uint32
	MapLen     uint32
	Reserved   [39]uint32
}

// TbvUrespCreateCq is struct tbv_uresp_create_cq, the driver data appended
// to ib_uverbs_create_cq_resp. An old kernel leaves it zero: ShmAbi == 0
// means no mapped ring. CqMmapOffset 0 is a valid offset.
type TbvUrespCreateCq struct {
	CqMmapOffset uint64
	Cqe          uint32
	ShmAbi       uint32
	Reserved     uint32
	Pad          uint32
	MapLen       uint64
}

const (
	SizeofTbvCqShm         = 192
	SizeofTbvUrespCreateCq = 32
)

// DV ABI v2 (pleite) sizes and limits.
const (
	USB4_RDMA_DV_ABI_VERSION          = 2
	USB4_RDMA_DV_MIN_QUEUE_ENTRIES    = 2
	USB4_RDMA_DV_MAX_SQ_ENTRIES       = 1024
	USB4_RDMA_DV_MAX_CQ_ENTRIES       = 4096
	USB4_RDMA_DV_DEFAULT_SQ_ENTRIES   = 256
	USB4_RDMA_DV_DEFAULT_CQ_ENTRIES   = 512
	USB4_RDMA_DV_WQE_SIZE             = 64
	USB4_RDMA_DV_CQE_SIZE             = 64
	USB4_RDMA_DV_DOORBELL_LINE_SIZE   = 64
	USB4_RDMA_DV_DOORBELL_RECORD_SIZE = 2 * USB4_RDMA_DV_DOORBELL_LINE_SIZE
	USB4_RDMA_DV_DOORBELL_PAGE_SIZE   = 4096
)

// DV ioctl ids. All live in the driver namespace (UVERBS_ID_DRIVER_NS).
const (
	USB4_RDMA_DV_DRIVER_NS = UVERBS_ID_DRIVER_NS

	// enum usb4_rdma_dv_objects
	USB4_RDMA_DV_OBJECT_DEVICE = USB4_RDMA_DV_DRIVER_NS

	// enum usb4_rdma_dv_methods
	USB4_RDMA_DV_METHOD_QUERY_CAPS    = USB4_RDMA_DV_DRIVER_NS + 0
	USB4_RDMA_DV_METHOD_CREATE_QUEUE  = USB4_RDMA_DV_DRIVER_NS + 1
	USB4_RDMA_DV_METHOD_DESTROY_QUEUE = USB4_RDMA_DV_DRIVER_NS + 2
	USB4_RDMA_DV_METHOD_KICK          = USB4_RDMA_DV_DRIVER_NS + 3

	// enum usb4_rdma_dv_query_caps_attrs
	USB4_RDMA_DV_ATTR_QUERY_CAPS_RESP = USB4_RDMA_DV_DRIVER_NS + 0 // PTR_OUT Usb4RdmaDvQueryCapsResp

	// enum usb4_rdma_dv_create_queue_attrs
	USB4_RDMA_DV_ATTR_CREATE_QUEUE_QP   = USB4_RDMA_DV_DRIVER_NS + 0 // IDR: QP handle
	USB4_RDMA_DV_ATTR_CREATE_QUEUE_REQ  = USB4_RDMA_DV_DRIVER_NS + 1 // PTR_IN Usb4RdmaDvQueueCreate
	USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP = USB4_RDMA_DV_DRIVER_NS + 2 // PTR_OUT Usb4RdmaDvQueueResp

	// enum usb4_rdma_dv_destroy_queue_attrs
	USB4_RDMA_DV_ATTR_DESTROY_QUEUE_QP = USB4_RDMA_DV_DRIVER_NS + 0 // IDR: QP handle

	// enum usb4_rdma_dv_kick_attrs
	USB4_RDMA_DV_ATTR_KICK_QP  = USB4_RDMA_DV_DRIVER_NS + 0 // IDR: QP handle
	USB4_RDMA_DV_ATTR_KICK_REQ = USB4_RDMA_DV_DRIVER_NS + 1 // PTR_IN Usb4RdmaDvKick
)

// Packed head/tail words: a 24-bit free-running index and the 8-bit queue
// generation in the top byte.
const (
	USB4_RDMA_DV_TAIL_INDEX_BITS      = 24
	USB4_RDMA_DV_TAIL_INDEX_MASK      = 1<<USB4_RDMA_DV_TAIL_INDEX_BITS - 1
	USB4_RDMA_DV_TAIL_GEN_SHIFT       = USB4_RDMA_DV_TAIL_INDEX_BITS
	USB4_RDMA_DV_TAIL_GENERATION_BITS = 32 - USB4_RDMA_DV_TAIL_INDEX_BITS
)

// Usb4RdmaDvTailPack packs an index (taken modulo 2^24) and a generation
// into one head/tail word (usb4_rdma_dv_tail_pack).
func Usb4RdmaDvTailPack(index uint32, generation uint8) uint32 {
	return index&USB4_RDMA_DV_TAIL_INDEX_MASK | uint32(generation)<<USB4_RDMA_DV_TAIL_GEN_SHIFT
}

// Usb4RdmaDvTailIndex returns the 24-bit index of a packed word.
func Usb4RdmaDvTailIndex(packed uint32) uint32 { return packed & USB4_RDMA_DV_TAIL_INDEX_MASK }

// Usb4RdmaDvTailGeneration returns the generation of a packed word.
func Usb4RdmaDvTailGeneration(packed uint32) uint8 {
	return uint8(packed >> USB4_RDMA_DV_TAIL_GEN_SHIFT)
}

// enum usb4_rdma_dv_caps (Usb4RdmaDvQueryCapsResp.Caps).
const (
	USB4_RDMA_DV_CAP_SEND             = 1 << 0
	USB4_RDMA_DV_CAP_SEND_IMM         = 1 << 1
	USB4_RDMA_DV_CAP_WRITE            = 1 << 2
	USB4_RDMA_DV_CAP_WRITE_IMM        = 1 << 3
	USB4_RDMA_DV_CAP_FENCE            = 1 << 4
	USB4_RDMA_DV_CAP_READ             = 1 << 5
	USB4_RDMA_DV_CAP_ATOMIC_FETCH_ADD = 1 << 6
	USB4_RDMA_DV_CAP_ATOMIC_SWAP      = 1 << 7
	USB4_RDMA_DV_CAP_ATOMIC_CMP_SWAP  = 1 << 8

	USB4_RDMA_DV_CAPS_V1 = USB4_RDMA_DV_CAP_SEND | USB4_RDMA_DV_CAP_SEND_IMM |
		USB4_RDMA_DV_CAP_WRITE | USB4_RDMA_DV_CAP_WRITE_IMM | USB4_RDMA_DV_CAP_FENCE
	USB4_RDMA_DV_CAPS_V2 = USB4_RDMA_DV_CAPS_V1 | USB4_RDMA_DV_CAP_READ |
		USB4_RDMA_DV_CAP_ATOMIC_FETCH_ADD | USB4_RDMA_DV_CAP_ATOMIC_SWAP |
		USB4_RDMA_DV_CAP_ATOMIC_CMP_SWAP
)

// enum usb4_rdma_dv_wqe_opcode (Usb4RdmaDvWqe.Opcode).
const (
	USB4_RDMA_DV_WQE_NOP              = 0
	USB4_RDMA_DV_WQE_SEND             = 1
	USB4_RDMA_DV_WQE_SEND_IMM         = 2
	USB4_RDMA_DV_WQE_RDMA_WRITE       = 3
	USB4_RDMA_DV_WQE_RDMA_WRITE_IMM   = 4
	USB4_RDMA_DV_WQE_RDMA_READ        = 5
	USB4_RDMA_DV_WQE_ATOMIC_FETCH_ADD = 6
	USB4_RDMA_DV_WQE_ATOMIC_SWAP      = 7
	USB4_RDMA_DV_WQE_ATOMIC_CMP_SWAP  = 8
)

// enum usb4_rdma_dv_wqe_flags (Usb4RdmaDvWqe.Flags).
const (
	USB4_RDMA_DV_WQE_F_SIGNALED       = 1 << 0
	USB4_RDMA_DV_WQE_F_SOLICITED      = 1 << 1
	USB4_RDMA_DV_WQE_F_FENCE          = 1 << 2
	USB4_RDMA_DV_WQE_F_LOCAL_LOOPBACK = 1 << 3
)

// enum usb4_rdma_dv_cqe_status (Usb4RdmaDvCqe.Status).
const (
	USB4_RDMA_DV_CQE_SUCCESS           = 0
	USB4_RDMA_DV_CQE_WR_FLUSH_ERR      = 1
	USB4_RDMA_DV_CQE_LOCAL_LEN_ERR     = 2
	USB4_RDMA_DV_CQE_LOCAL_PROT_ERR    = 3
	USB4_RDMA_DV_CQE_REMOTE_ACCESS_ERR = 4
	USB4_RDMA_DV_CQE_RETRY_EXC_ERR     = 5
	USB4_RDMA_DV_CQE_STALE_GEN         = 6 // WQE generation mismatch; the QP stays live
	USB4_RDMA_DV_CQE_GENERAL_ERR       = 255
)

// enum usb4_rdma_dv_qp_state (Usb4RdmaDvCqe.QpState,
// Usb4RdmaDvDoorbellConsumerLine.QpState).
const (
	USB4_RDMA_DV_QP_LIVE = 0
	USB4_RDMA_DV_QP_ERR  = 1
	USB4_RDMA_DV_QP_DEAD = 2
)

// Usb4RdmaDvWqe is struct usb4_rdma_dv_wqe (C: packed, aligned(64)): one
// send-queue entry with exactly one SGE. For atomics Length is 8,
// LocalAddr/Lkey name the 8-byte result slot, Reserved1[0] is the add or
// swap value and Reserved1[1] the compare value.
type Usb4RdmaDvWqe struct {
	Opcode     uint16
	Flags      uint16
	Length     uint32
	WrId       uint64
	LocalAddr  uint64
	Lkey       uint32
	Rkey       uint32
	RemoteAddr uint64
	ImmData    uint32
	Generation uint32
	Reserved1  [2]uint64
}

// Usb4RdmaDvCqe is struct usb4_rdma_dv_cqe (C: packed, aligned(64)).
type Usb4RdmaDvCqe struct {
	WrId      uint64
	Status    uint32
	Opcode    uint32
	ByteLen   uint32
	ImmData   uint32
	VendorErr uint32
	QpState   uint32
	Reserved  [4]uint64
}

// Usb4RdmaDvDoorbellProducerLine is struct
// usb4_rdma_dv_doorbell_producer_line (C: packed, aligned(64)): the
// user-written, kernel-read cache line.
type Usb4RdmaDvDoorbellProducerLine struct {
	SqTail     uint32
	CqHead     uint32
	Generation uint32
	Reserved0  uint32
	Reserved1  [6]uint64
}

// Usb4RdmaDvDoorbellConsumerLine is struct
// usb4_rdma_dv_doorbell_consumer_line (C: packed, aligned(64)): the
// kernel-written, user-read cache line.
type Usb4RdmaDvDoorbellConsumerLine struct {
	SqHead     uint32
	CqTail     uint32
	QpState    uint32
	Generation uint32
	Reserved1  [6]uint64
}

// Usb4RdmaDvDoorbell is struct usb4_rdma_dv_doorbell (C: packed,
// aligned(64)), the first record of the page at doorbell_addr.
type Usb4RdmaDvDoorbell struct {
	Producer Usb4RdmaDvDoorbellProducerLine
	Consumer Usb4RdmaDvDoorbellConsumerLine
}

// Usb4RdmaDvQueryCapsResp is struct usb4_rdma_dv_query_caps_resp.
type Usb4RdmaDvQueryCapsResp struct {
	AbiVersion         uint32
	Caps               uint32
	MaxSqEntries       uint32
	MaxCqEntries       uint32
	DefaultSqEntries   uint32
	DefaultCqEntries   uint32
	WqeSize            uint32
	CqeSize            uint32
	DoorbellRecordSize uint32
	DoorbellPageSize   uint32
	TailIndexBits      uint32
	TailGenerationBits uint32
	Reserved           [4]uint32
}

// Usb4RdmaDvQueueCreate is struct usb4_rdma_dv_queue_create. Addresses are
// user virtual addresses the kernel pins; DoorbellAddr is page aligned.
type Usb4RdmaDvQueueCreate struct {
	AbiVersion   uint32
	Flags        uint32
	SqAddr       uint64
	CqAddr       uint64
	DoorbellAddr uint64
	SqEntries    uint32
	CqEntries    uint32
	SqStride     uint32
	CqStride     uint32
	Reserved     [4]uint32
}

// Usb4RdmaDvQueueResp is struct usb4_rdma_dv_queue_resp.
type Usb4RdmaDvQueueResp struct {
	QpNum      uint32
	Generation uint32
	Flags      uint32
	Reserved0  uint32
}

// Usb4RdmaDvKick is struct usb4_rdma_dv_kick. SqTail is the packed value
// already published in the producer line.
type Usb4RdmaDvKick struct {
	SqTail   uint32
	Flags    uint32
	Reserved [2]uint32
}

const (
	SizeofUsb4RdmaDvWqe                  = 64
	SizeofUsb4RdmaDvCqe                  = 64
	SizeofUsb4RdmaDvDoorbellProducerLine = 64
	SizeofUsb4RdmaDvDoorbellConsumerLine = 64
	SizeofUsb4RdmaDvDoorbell             = 128
	SizeofUsb4RdmaDvQueryCapsResp        = 64
	SizeofUsb4RdmaDvQueueCreate          = 64
	SizeofUsb4RdmaDvQueueResp            = 16
	SizeofUsb4RdmaDvKick                 = 16
)
