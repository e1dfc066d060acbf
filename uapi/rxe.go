package uapi

import "unsafe"

// Soft-RoCE (rdma_rxe) user ABI: the driver data of create_cq/qp/srq/ah, and
// the layout of the queues the kernel maps into the process. A queue is one
// mapping: an RxeQueueBuf header (producer and consumer indices on separate
// cache lines) followed by 1<<log2_elem_size byte elements; indices are
// masked with index_mask. Send queue elements are an RxeSendWqe followed by
// its RxeSge array or inline data; receive queue elements an RxeRecvWqe
// followed by its RxeSge array; completion queue elements an IbUverbsWc.
//
// Source: include/uapi/rdma/rdma_user_rxe.h (Debian 12: /usr/include/rdma/).

// Network types of RxeAv.NetworkType.
const (
	RXE_NETWORK_TYPE_IPV4 = 1
	RXE_NETWORK_TYPE_IPV6 = 2
)

// RxeGlobalRoute is struct rxe_global_route.
type RxeGlobalRoute struct {
	Dgid         [16]byte
	FlowLabel    uint32
	SgidIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	_            [1]byte
}

const SizeofRxeGlobalRoute = 24

// RxeAv is struct rxe_av.
type RxeAv struct {
	PortNum     uint8
	NetworkType uint8
	Dmac        [6]uint8
	Grh         RxeGlobalRoute
	SgidAddr    [28]byte
	DgidAddr    [28]byte
}

const SizeofRxeAv = 88

// RxeSendWr is struct rxe_send_wr.
type RxeSendWr struct {
	WrId      uint64
	Reserved  uint32
	Opcode    uint32
	SendFlags uint32
	Ex        uint32
	Wr        [120]byte
}

const SizeofRxeSendWr = 144

// RxeSge is struct rxe_sge.
type RxeSge struct {
	Addr   uint64
	Length uint32
	Lkey   uint32
}

const SizeofRxeSge = 16

// Mminfo is struct mminfo.
type Mminfo struct {
	Offset uint64
	Size   uint32
	Pad    uint32
}

const SizeofMminfo = 16

// RxeDmaInfo is struct rxe_dma_info.
type RxeDmaInfo struct {
	Length    uint32
	Resid     uint32
	CurSge    uint32
	NumSge    uint32
	SgeOffset uint32
	Reserved  uint32
	// inline_data[] or sge[] follows (flexible union)
}

const SizeofRxeDmaInfo = 24

// RxeSendWqe is struct rxe_send_wqe.
type RxeSendWqe struct {
	Wr          RxeSendWr
	Status      uint32
	State       uint32
	Iova        uint64
	Mask        uint32
	FirstPsn    uint32
	LastPsn     uint32
	AckLength   uint32
	Ssn         uint32
	HasRdAtomic uint32
	Dma         RxeDmaInfo
}

const SizeofRxeSendWqe = 208

// RxeRecvWqe is struct rxe_recv_wqe.
type RxeRecvWqe struct {
	WrId     uint64
	Reserved uint32
	Padding  uint32
	Dma      RxeDmaInfo
}

const SizeofRxeRecvWqe = 40

// RxeCreateAhResp is struct rxe_create_ah_resp.
type RxeCreateAhResp struct {
	AhNum    uint32
	Reserved uint32
}

const SizeofRxeCreateAhResp = 8

// RxeCreateCqResp is struct rxe_create_cq_resp.
type RxeCreateCqResp struct {
	Mi Mminfo
}

const SizeofRxeCreateCqResp = 16

// RxeResizeCqResp is struct rxe_resize_cq_resp.
type RxeResizeCqResp struct {
	Mi Mminfo
}

const SizeofRxeResizeCqResp = 16

// RxeCreateQpResp is struct rxe_create_qp_resp.
type RxeCreateQpResp struct {
	RqMi Mminfo
	SqMi Mminfo
}

const SizeofRxeCreateQpResp = 32

// RxeCreateSrqResp is struct rxe_create_srq_resp.
type RxeCreateSrqResp struct {
	Mi       Mminfo
	SrqNum   uint32
	Reserved uint32
}

const SizeofRxeCreateSrqResp = 24

// RxeModifySrqCmd is struct rxe_modify_srq_cmd.
type RxeModifySrqCmd struct {
	MmapInfoAddr uint64
}

const SizeofRxeModifySrqCmd = 8

// RxeQueueBuf is struct rxe_queue_buf.
type RxeQueueBuf struct {
	Log2ElemSize  uint32
	IndexMask     uint32
	Pad1          [30]uint32
	ProducerIndex uint32
	Pad2          [31]uint32
	ConsumerIndex uint32
	Pad3          [31]uint32
	// data[] follows (flexible array)
}

const SizeofRxeQueueBuf = 384

// RxeSendWrRdma is the wr.rdma view of RxeSendWr.Wr.
type RxeSendWrRdma struct {
	RemoteAddr uint64
	Rkey       uint32
	Reserved   uint32
}

// RxeSendWrAtomic is the wr.atomic view of RxeSendWr.Wr.
type RxeSendWrAtomic struct {
	RemoteAddr uint64
	CompareAdd uint64
	Swap       uint64
	Rkey       uint32
	Reserved   uint32
}

// RxeSendWrUd is the wr.ud view of RxeSendWr.Wr (UD and GSI sends; the
// provider copies the address vector of the AH into Av).
type RxeSendWrUd struct {
	RemoteQpn  uint32
	RemoteQkey uint32
	PkeyIndex  uint16
	Reserved   uint16
	AhNum      uint32
	Pad        [4]uint32
	Av         RxeAv
}

// RxeSendWrMw is the wr.mw view of RxeSendWr.Wr (memory window bind).
type RxeSendWrMw struct {
	Addr   uint64
	Length uint64
	MrLkey uint32
	MwRkey uint32
	Rkey   uint32
	Access uint32
}

const (
	SizeofRxeSendWrRdma   = 16
	SizeofRxeSendWrAtomic = 32
	SizeofRxeSendWrUd     = 120
	SizeofRxeSendWrMw     = 32
)

// Rdma returns the wr.rdma member of the union, aliasing w.
func (w *RxeSendWr) Rdma() *RxeSendWrRdma { return (*RxeSendWrRdma)(unsafe.Pointer(&w.Wr)) }

// Atomic returns the wr.atomic member of the union, aliasing w.
func (w *RxeSendWr) Atomic() *RxeSendWrAtomic { return (*RxeSendWrAtomic)(unsafe.Pointer(&w.Wr)) }

// Ud returns the wr.ud member of the union, aliasing w.
func (w *RxeSendWr) Ud() *RxeSendWrUd { return (*RxeSendWrUd)(unsafe.Pointer(&w.Wr)) }

// Mw returns the wr.mw member of the union, aliasing w.
func (w *RxeSendWr) Mw() *RxeSendWrMw { return (*RxeSendWrMw)(unsafe.Pointer(&w.Wr)) }

// RxeSendWrFlush is the wr.flush view of RxeSendWr.Wr (IB_UVERBS_WR_FLUSH).
// Newer kernels only: linux-rdma/rdma-core@691953d:
// kernel-headers/rdma/rdma_user_rxe.h; Debian 12's header lacks it.
type RxeSendWrFlush struct {
	RemoteAddr uint64
	Length     uint32
	Rkey       uint32
	Type       uint8
	Level      uint8
	_          [6]byte
}

const SizeofRxeSendWrFlush = 24

// Flush returns the wr.flush member of the union, aliasing w.
func (w *RxeSendWr) Flush() *RxeSendWrFlush { return (*RxeSendWrFlush)(unsafe.Pointer(&w.Wr)) }
