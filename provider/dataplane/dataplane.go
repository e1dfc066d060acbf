package dataplane

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wextra -Werror -O2 -I${SRCDIR}/../../uapi/c
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include <string.h>
#include "engine.h"
*/
import "C"

import (
	"fmt"
	"log"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Backend names as (*CQ).Backend and (*QP).SendBackend report them.
const (
	BackendRxe    = "rxe-rings"
	BackendKCmd   = "usb4-kernel-commands"
	BackendCQRing = "usb4-cq-ring"
	BackendDV     = "usb4-dv"
	// BackendProviderSRQ is an SRQ of the provider's own, over the kernel
	// receive queues of its QPs (srqemu.c).
	BackendProviderSRQ = "provider-srq"
)

// Work request opcodes (enum ibv_wr_opcode), send flags (enum
// ibv_send_flags), completion opcodes and statuses (enum ibv_wc_opcode,
// ibv_wc_status), QP types and states: the public libibverbs values.
const (
	WRRDMAWrite        = C.USB4V_WR_RDMA_WRITE
	WRRDMAWriteWithImm = C.USB4V_WR_RDMA_WRITE_WITH_IMM
	WRSend             = C.USB4V_WR_SEND
	WRSendWithImm      = C.USB4V_WR_SEND_WITH_IMM
	WRRDMARead         = C.USB4V_WR_RDMA_READ
	WRAtomicCmpAndSwp  = C.USB4V_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   = C.USB4V_WR_ATOMIC_FETCH_AND_ADD
	WRSendWithInv      = C.USB4V_WR_SEND_WITH_INV

	SendFence     = C.USB4V_SEND_FENCE
	SendSignaled  = C.USB4V_SEND_SIGNALED
	SendSolicited = C.USB4V_SEND_SOLICITED
	SendInline    = C.USB4V_SEND_INLINE

	WCSend             = C.USB4V_WC_SEND
	WCRDMAWrite        = C.USB4V_WC_RDMA_WRITE
	WCRDMARead         = C.USB4V_WC_RDMA_READ
	WCCompSwap         = C.USB4V_WC_COMP_SWAP
	WCFetchAdd         = C.USB4V_WC_FETCH_ADD
	WCRecv             = C.USB4V_WC_RECV
	WCRecvRDMAWithImm  = C.USB4V_WC_RECV_RDMA_WITH_IMM
	WCWithImm          = C.USB4V_WC_WITH_IMM
	WCSuccess          = C.USB4V_WC_SUCCESS
	WCLocLenErr        = C.USB4V_WC_LOC_LEN_ERR
	WCLocProtErr       = C.USB4V_WC_LOC_PROT_ERR
	WCWRFlushErr       = C.USB4V_WC_WR_FLUSH_ERR
	WCRemAccessErr     = C.USB4V_WC_REM_ACCESS_ERR
	WCRetryExcErr      = C.USB4V_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr   = C.USB4V_WC_RNR_RETRY_EXC_ERR
	WCGeneralErr       = C.USB4V_WC_GENERAL_ERR
	QPTypeRC           = C.USB4V_QPT_RC
	QPTypeUC           = C.USB4V_QPT_UC
	QPTypeUD           = C.USB4V_QPT_UD
	QPStateReset       = C.USB4V_QPS_RESET
	QPStateInit        = C.USB4V_QPS_INIT
	QPStateRTR         = C.USB4V_QPS_RTR
	QPStateRTS         = C.USB4V_QPS_RTS
	QPStateErr         = C.USB4V_QPS_ERR
	DVStaleGeneration  = C.USB4V_USB4_RDMA_DV_CQE_STALE_GEN
	DVCapsV1           = C.USB4V_USB4_RDMA_DV_CAPS_V1 // SEND, SEND_IMM, WRITE, WRITE_IMM, FENCE
	DVCapsV2           = C.USB4V_USB4_RDMA_DV_CAPS_V2 // V1, READ and the atomics
	DVCapRead          = C.USB4V_USB4_RDMA_DV_CAP_READ
	DVCapFence         = C.USB4V_USB4_RDMA_DV_CAP_FENCE
	SizeofCreateCQTail = C.sizeof_struct_usb4v_tbv_uresp_create_cq
)

// WC is one completion, laid out exactly as struct ibv_wc so Poll fills Go
// memory directly. ImmData is in network byte order, as libibverbs gives it.
type WC struct {
	WrID         uint64
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	ImmData      uint32
	QPNum        uint32
	SrcQP        uint32
	WCFlags      uint32
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	_            [2]byte
}

// SGE is one scatter/gather element (struct ibv_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is one send work request. ImmData is in network byte order (the
// caller's __be32, as in ibv_send_wr); Atomic* are used by the atomic
// opcodes, RemoteAddr/RKey by RDMA and atomics, AH/RemoteQPN/RemoteQKey by
// UD.
type SendWR struct {
	WrID       uint64
	Opcode     uint32
	Flags      uint32
	ImmData    uint32
	SGEs       []SGE
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is one receive work request.
type RecvWR struct {
	WrID uint64
	SGEs []SGE
}

// PostError reports the first work request a post refused: Index is its
// position in the slice; the errno is reachable through errors.Is.
type PostError struct {
	Verb  string
	Index int
	Err   unix.Errno
}

func (e *PostError) Error() string {
	return fmt.Sprintf("%s: work request %d: %v", e.Verb, e.Index, e.Err)
}

func (e *PostError) Unwrap() error { return e.Err }

var debug = os.Getenv("USB4VERBS_DEBUG") == "1"

func debugf(format string, args ...any) {
	if debug {
		log.Printf("usb4verbs: "+format, args...)
	}
}

func errnoErr(verb string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	if rc < 0 {
		rc = -rc
	}
	return fmt.Errorf("%s: %w", verb, unix.Errno(rc))
}

func sysPtr(sys unsafe.Pointer) *C.struct_usb4v_sys {
	return (*C.struct_usb4v_sys)(sys)
}

// CQ is a completion queue's data-path object (C memory).
type CQ struct {
	c  *C.struct_usb4v_cq
	mu sync.Mutex // guards c against Close during Poll and ReqNotify from Go
}

// NewCQ creates the C object for a CQ the control path created in the
// kernel. sys is a struct usb4v_sys * (nil: the real system calls). It starts
// on kernel-command polling; AttachRxe or TryMappedRing switch it.
func NewCQ(sys unsafe.Pointer, cmdFd int, handle, cqe uint32) (*CQ, error) {
	c := C.usb4v_cq_new(sysPtr(sys), C.int(cmdFd), C.uint32_t(handle), C.uint32_t(cqe))
	if c == nil {
		return nil, fmt.Errorf("create cq data path: %w", unix.ENOMEM)
	}
	return &CQ{c: c}, nil
}

// AttachRxe puts the CQ on the rxe ring described by create_cq's mmap_info.
// With addr nil the engine maps (and later unmaps) it itself; otherwise it
// adopts a mapping the caller owns.
func (cq *CQ) AttachRxe(addr unsafe.Pointer, offset uint64, size uint32) error {
	if err := errnoErr("attach rxe cq ring", C.usb4v_cq_attach_rxe(cq.c, addr, C.uint64_t(offset), C.size_t(size))); err != nil {
		return err
	}
	debugf("cq %d: backend %s", cq.c.handle, cq.Backend())
	return nil
}

// TryMappedRing takes the usb4 mapped CQ ring (ABI 2) that create_cq's
// response tail (struct tbv_uresp_create_cq, raw bytes) offers, if it
// validates. It reports whether the ring is in use; otherwise the CQ keeps
// kernel-command polling and FallbackReason says why.
func (cq *CQ) TryMappedRing(tail []byte, requestedCQE uint32) bool {
	var t C.struct_usb4v_tbv_uresp_create_cq
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&t)), SizeofCreateCQTail), tail)
	ok := C.usb4v_cq_try_shm(cq.c, &t, C.uint32_t(requestedCQE)) == 1
	if ok {
		debugf("cq %d: backend %s", cq.c.handle, cq.Backend())
	} else {
		debugf("cq %d: backend %s (mapped ring not used: %s)", cq.c.handle, cq.Backend(), cq.FallbackReason())
	}
	return ok
}

// Backend names the path this CQ polls through.
func (cq *CQ) Backend() string { return C.GoString(C.usb4v_backend_name(cq.c.backend)) }

// FallbackReason says why a mapped ring was not taken ("" if it was or none
// was offered yet).
func (cq *CQ) FallbackReason() string { return C.GoString(&cq.c.fallback_reason[0]) }

// Poll fills wc with up to len(wc) completions and returns how many. An
// overrun of a mapped ring is a permanent error wrapping EIO.
func (cq *CQ) Poll(wc []WC) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	// Close takes mu too: it must not free the C object under a poll.
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.c == nil {
		return 0, errnoErr("poll cq", C.int(unix.EBADF))
	}
	n := C.usb4v_poll_cq(cq.c, C.int(len(wc)), (*C.struct_usb4v_ibv_wc)(unsafe.Pointer(&wc[0])))
	if n < 0 {
		return 0, errnoErr("poll cq", n)
	}
	return int(n), nil
}

// ReqNotify arms the CQ's completion event.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	s := C.int(0)
	if solicitedOnly {
		s = 1
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.c == nil {
		return errnoErr("req notify cq", C.int(unix.EBADF))
	}
	return errnoErr("req notify cq", C.usb4v_req_notify_cq(cq.c, s))
}

// CPtr is the struct usb4v_cq * for cshim's ops table.
func (cq *CQ) CPtr() unsafe.Pointer { return unsafe.Pointer(cq.c) }

// Disown gives the C object up without freeing it: after a successful
// kernel destroy, cshim's objects.c owns it, and frees it with
// usb4v_cq_free once the application acknowledged the CQ's events (a thread
// holding one may still poll and re-arm until then). Close is then a no-op.
func (cq *CQ) Disown() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.c = nil
}

// Close frees the C object (and unmaps rings the engine mapped). The kernel
// CQ must already be destroyed or about to be; QPs using it go first.
func (cq *CQ) Close() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.c != nil {
		C.usb4v_cq_free(cq.c)
		cq.c = nil
	}
}

// AdoptCQ, AdoptQP and AdoptSRQ wrap an engine object that a fork()
// parent's Go part created, for the child's Go part (cshim adopts the
// parent's objects at their first control verb in the child): the child's
// copy of the object, which the front drives as before. The caller frees
// it only after a destroy (Disown, then cshim's objects.c), never with
// Close: it is the parent's.
// The child's copy forgets the parent's removal record (Dev) without
// touching it: the child's removals are its own contexts'.
func AdoptCQ(p unsafe.Pointer) *CQ {
	c := (*C.struct_usb4v_cq)(p)
	C.usb4v_cq_forget_dev(c)
	return &CQ{c: c}
}

// AdoptQP: see AdoptCQ.
func AdoptQP(p unsafe.Pointer) *QP {
	c := (*C.struct_usb4v_qp)(p)
	C.usb4v_qp_forget_dev(c)
	return &QP{c: c}
}

// AdoptSRQ: see AdoptCQ.
func AdoptSRQ(p unsafe.Pointer) *SRQ {
	c := (*C.struct_usb4v_srq)(p)
	C.usb4v_srq_forget_dev(c)
	return &SRQ{c: c}
}

// SRQ is a shared receive queue's data-path object.
type SRQ struct {
	c       *C.struct_usb4v_srq
	scratch scratch
}

// NewSRQ creates the C object for an SRQ (kernel commands until AttachRxe).
func NewSRQ(sys unsafe.Pointer, cmdFd int, handle, maxSGE uint32) (*SRQ, error) {
	c := C.usb4v_srq_new(sysPtr(sys), C.int(cmdFd), C.uint32_t(handle), C.uint32_t(maxSGE))
	if c == nil {
		return nil, fmt.Errorf("create srq data path: %w", unix.ENOMEM)
	}
	return &SRQ{c: c}, nil
}

// NewProviderSRQ creates an SRQ of the provider's own for a kernel without
// SRQs (engine.h, "the provider's SRQ"): maxWR WRs of at most maxSGE SGEs,
// the limit event armed at limit (0: not), reported with userHandle as its
// element. QPs created for it join with QP.AttachProviderSRQ.
func NewProviderSRQ(sys unsafe.Pointer, cmdFd int, maxWR, maxSGE, limit uint32, userHandle uint64) (*SRQ, error) {
	c := C.usb4v_srq_new_emu(sysPtr(sys), C.int(cmdFd), C.uint32_t(maxWR), C.uint32_t(maxSGE), C.uint32_t(limit),
		C.uint64_t(userHandle))
	if c == nil {
		return nil, fmt.Errorf("create provider srq: %w", unix.ENOMEM)
	}
	return &SRQ{c: c}, nil
}

// ProviderSRQStats is what a provider SRQ holds now (usb4v_srq_emu_stats).
type ProviderSRQStats struct {
	MaxWR, MaxSGE, Limit uint32
	Posted               uint32 // posted and not consumed
	Pending              uint32 // ... in no QP's kernel RQ
	Lent                 uint32 // ... in QPs' kernel RQs
	QPs                  uint32 // attached QPs
	Zombies              uint32 // destroyed QPs whose lent WRs have not come back yet
	Events               uint64 // limit events raised
	Refills              uint64 // POST_RECV commands that lent WRs
}

// Backend names the SRQ's backend (BackendProviderSRQ for a provider SRQ).
func (s *SRQ) Backend() string { return C.GoString(C.usb4v_backend_name(s.c.backend)) }

// Provider reports whether this is a provider SRQ.
func (s *SRQ) Provider() bool { return s.c != nil && s.c.backend == C.USB4V_BACKEND_SRQ_EMU }

// Stats returns a provider SRQ's counts (zero for other SRQs).
func (s *SRQ) Stats() ProviderSRQStats {
	var st C.struct_usb4v_srq_emu_stats
	C.usb4v_srq_emu_stats(s.c, &st)
	return ProviderSRQStats{MaxWR: uint32(st.max_wr), MaxSGE: uint32(st.max_sge), Limit: uint32(st.limit),
		Posted: uint32(st.posted), Pending: uint32(st.pending), Lent: uint32(st.lent), QPs: uint32(st.qps),
		Zombies: uint32(st.zombies), Events: uint64(st.events), Refills: uint64(st.refills)}
}

// Provider SRQ attributes ModifyProvider changes (enum ibv_srq_attr_mask).
const (
	SRQAttrMaxWR = C.USB4V_SRQ_EMU_MAX_WR
	SRQAttrLimit = C.USB4V_SRQ_EMU_LIMIT
)

// ModifyProvider is modify_srq of a provider SRQ: max_wr (never below the
// WRs posted and not consumed) and/or the limit (at most max_wr; arms the
// limit event), as mask (SRQAttr*) says.
func (s *SRQ) ModifyProvider(maxWR, limit uint32, mask int) error {
	return errnoErr("modify provider srq", C.usb4v_srq_emu_modify(s.c, C.uint32_t(maxWR), C.uint32_t(limit), C.int(mask)))
}

// SetEventFD makes a provider SRQ send its limit event to fd (a
// SOCK_SEQPACKET socket whose peer is the application's async fd); -1: none.
func (s *SRQ) SetEventFD(fd int) { C.usb4v_srq_emu_set_event_fd(s.c, C.int(fd)) }

// AttachRxe puts the SRQ on its rxe ring (addr nil: the engine maps it).
func (s *SRQ) AttachRxe(addr unsafe.Pointer, offset uint64, size uint32) error {
	return errnoErr("attach rxe srq ring", C.usb4v_srq_attach_rxe(s.c, addr, C.uint64_t(offset), C.size_t(size)))
}

// Resize runs modify, the MODIFY_SRQ command that grows or shrinks the
// kernel's queue (IB_SRQ_MAX_WR), with every poster of the SRQ held off, and
// then moves an rxe SRQ to the ring at the offset and size the kernel wrote
// back: rxe copies the outstanding receives into a new ring during the
// command and never reads the old one again. On other backends it only runs
// modify. If the new ring cannot be mapped, Resize returns why and every
// later post fails with that errno.
func (s *SRQ) Resize(modify func() (offset uint64, size uint32, err error)) (err error) {
	// The engine's lock is a pthread mutex, released by the thread that
	// took it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.usb4v_srq_resize_begin(s.c)
	var remap C.int
	var offset uint64
	var size uint32
	defer func() { // also when modify panics: posters must not wait forever
		rc := C.usb4v_srq_resize_end(s.c, remap, C.uint64_t(offset), C.size_t(size))
		if err == nil {
			err = errnoErr("map resized srq ring", rc)
		}
	}()
	offset, size, err = modify()
	if err == nil {
		remap = 1
	}
	return err
}

// Resize runs resize, the RESIZE_CQ command, with every poller of the CQ
// held off, and then moves an rxe CQ to the ring at the offset and size the
// kernel wrote back: rxe copies the outstanding completions into a new ring
// during the command, from the consumer index the pollers published. On
// other backends it only runs resize. If the new ring cannot be mapped,
// Resize returns why and every later poll fails with that errno.
func (cq *CQ) Resize(resize func() (offset uint64, size uint32, err error)) (err error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.c == nil {
		return fmt.Errorf("resize cq data path: %w", unix.EBADF)
	}
	// An rxe CQ's lock is a spinlock: unlocked by the thread that took it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.usb4v_cq_resize_begin(cq.c)
	var remap C.int
	var offset uint64
	var size uint32
	defer func() { // also when resize panics: pollers must not spin forever
		rc := C.usb4v_cq_resize_end(cq.c, remap, C.uint64_t(offset), C.size_t(size))
		if err == nil {
			err = errnoErr("map resized cq ring", rc)
		}
	}()
	offset, size, err = resize()
	if err == nil {
		remap = 1
	}
	return err
}

// PostRecv posts receive work requests to the SRQ.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	return s.scratch.postRecv("post srq recv", wrs, func(first *C.struct_usb4v_ibv_recv_wr, bad **C.struct_usb4v_ibv_recv_wr) C.int {
		return C.usb4v_post_srq_recv(s.c, first, bad)
	})
}

// CPtr is the struct usb4v_srq * for cshim.
func (s *SRQ) CPtr() unsafe.Pointer { return unsafe.Pointer(s.c) }

// Disown gives the C object up without freeing it (see CQ.Disown; objects.c
// frees it with usb4v_srq_free).
func (s *SRQ) Disown() {
	s.c = nil
	s.scratch.free()
}

// Close frees the C object.
func (s *SRQ) Close() {
	if s.c != nil {
		C.usb4v_srq_free(s.c)
		s.c = nil
	}
	s.scratch.free()
}

// AH is an address handle as the engine needs it (rxe UD sends).
type AH struct{ c *C.struct_usb4v_ah }

// NewAH wraps a kernel AH: handle, the rxe AH index (0 on kernels before
// 5.14) and, for those, the struct rxe_av bytes to copy into WQEs.
func NewAH(handle, ahNum uint32, av []byte) (*AH, error) {
	c := (*C.struct_usb4v_ah)(C.calloc(1, C.sizeof_struct_usb4v_ah))
	if c == nil {
		return nil, fmt.Errorf("create ah data path: %w", unix.ENOMEM)
	}
	c.ibv_ah.handle = C.uint32_t(handle)
	c.ah_num = C.uint32_t(ahNum)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.av)), C.sizeof_struct_usb4v_rxe_av), av)
	return &AH{c}, nil
}

// CPtr is the struct usb4v_ah * (its first member is the struct ibv_ah).
func (a *AH) CPtr() unsafe.Pointer { return unsafe.Pointer(a.c) }

// Close frees the AH.
func (a *AH) Close() {
	if a.c != nil {
		C.free(unsafe.Pointer(a.c))
		a.c = nil
	}
}

// QPConfig describes a QP the control path created in the kernel.
type QPConfig struct {
	Sys        unsafe.Pointer // struct usb4v_sys *; nil: real system calls
	CmdFd      int
	Handle     uint32
	QPNum      uint32
	Type       uint32 // QPTypeRC, QPTypeUC, QPTypeUD
	SqSigAll   bool
	MaxSendWR  uint32 // granted: the most WRs a post takes; sizes a DV send queue
	MaxSendSGE uint32
	MaxRecvSGE uint32
	MaxInline  uint32
	SendCQ     *CQ
	RecvCQ     *CQ
	SRQ        *SRQ
	// SendCQChannel: the send CQ has a completion channel. DV completions
	// raise no event on it, so TryDV keeps such a QP on kernel commands.
	SendCQChannel bool
}

// QP is a queue pair's data-path object.
type QP struct {
	c         *C.struct_usb4v_qp
	send      scratch
	recv      scratch
	sendCQ    *CQ
	driverID  uint32
	maxSendWR uint32
	// The send CQ has a completion channel (QPConfig.SendCQChannel).
	sendCQChannel bool
}

// NewQP creates the C object for a QP (kernel commands until AttachRxe or
// TryDV).
func NewQP(cfg QPConfig) (*QP, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, fmt.Errorf("create qp data path: %w", unix.EINVAL)
	}
	var srq *C.struct_usb4v_srq
	if cfg.SRQ != nil {
		srq = cfg.SRQ.c
	}
	sig := C.int(0)
	if cfg.SqSigAll {
		sig = 1
	}
	c := C.usb4v_qp_new(sysPtr(cfg.Sys), C.int(cfg.CmdFd), C.uint32_t(cfg.Handle), C.uint32_t(cfg.QPNum),
		C.uint32_t(cfg.Type), sig, C.uint32_t(cfg.MaxSendSGE), C.uint32_t(cfg.MaxRecvSGE),
		C.uint32_t(cfg.MaxInline), cfg.SendCQ.c, cfg.RecvCQ.c, srq)
	if c == nil {
		return nil, fmt.Errorf("create qp data path: %w", unix.ENOMEM)
	}
	c.max_send_wr = C.uint32_t(cfg.MaxSendWR)
	if debug {
		c.debug = 1
	}
	return &QP{c: c, sendCQ: cfg.SendCQ, maxSendWR: cfg.MaxSendWR, sendCQChannel: cfg.SendCQChannel}, nil
}

// AttachRxe puts the QP on its rxe SQ and RQ rings (create_qp's sq_mi and
// rq_mi). With nil addresses the engine maps them itself.
func (qp *QP) AttachRxe(sqAddr unsafe.Pointer, sqOffset uint64, sqSize uint32,
	rqAddr unsafe.Pointer, rqOffset uint64, rqSize uint32) error {
	rc := C.usb4v_qp_attach_rxe(qp.c, sqAddr, C.uint64_t(sqOffset), C.size_t(sqSize),
		rqAddr, C.uint64_t(rqOffset), C.size_t(rqSize))
	if err := errnoErr("attach rxe qp rings", rc); err != nil {
		return err
	}
	debugf("qp %d: backend %s", qp.c.qp_num, qp.SendBackend())
	return nil
}

// DVCaps is the usb4 DV QUERY_CAPS answer.
type DVCaps = C.struct_usb4v_usb4_rdma_dv_query_caps_resp

// TryDV probes QUERY_CAPS and CREATE_QUEUE and, when both answer well, moves
// the QP's sends onto a DV send queue of the provider's own, now. It reports
// whether DV is in use; otherwise the QP keeps the kernel-command path and
// FallbackReason says why. The DV queue is sized for the QP's granted
// MaxSendWR. A QP has one DV queue at most (the kernel answers a second
// CREATE_QUEUE with EBUSY), so a QP whose application attaches its own must
// not get one: the shipped provider uses DeferDV, and only when the user
// opted in (cshim/README.md, dv_send).
func (qp *QP) TryDV(driverID uint32) bool {
	caps, ok := qp.dvCaps(driverID)
	if !ok {
		return false
	}
	ok = C.usb4v_qp_try_dv(qp.c, C.uint32_t(driverID), &caps, C.uint32_t(qp.maxSendWR)) == 1
	if ok {
		debugf("qp %d: backend %s (DV queue: ours)", qp.c.qp_num, qp.SendBackend())
	} else {
		debugf("qp %d: backend %s (DV not used: %s; DV queue: %s)", qp.c.qp_num, qp.SendBackend(), qp.FallbackReason(), qp.DVOwner())
	}
	return ok
}

// DeferDV makes the same checks as TryDV now and leaves the CREATE_QUEUE to
// the QP's first post_send: a QP on which nothing is posted through the
// provider (a GPU producer's, which attaches its own DV queue on the QP's
// handle) never gets one of ours, and one whose application attached a queue
// first stays on kernel commands (the kernel's EBUSY tells). It reports
// whether the attach is deferred; otherwise FallbackReason says why not.
func (qp *QP) DeferDV(driverID uint32) bool {
	caps, ok := qp.dvCaps(driverID)
	if !ok {
		return false
	}
	switch C.usb4v_qp_defer_dv(qp.c, C.uint32_t(driverID), &caps, C.uint32_t(qp.maxSendWR)) {
	case 1:
		debugf("qp %d: backend %s until its first post, then a DV queue of ours (dv_send on)", qp.c.qp_num, qp.SendBackend())
		return true
	case 0:
		debugf("qp %d: backend %s (DV not used: %s; DV queue: none of ours)", qp.c.qp_num, qp.SendBackend(), qp.FallbackReason())
	default:
		qp.keepKernelCommands("DV attach: out of memory")
	}
	return false
}

// LeaveDV records that the provider takes no DV queue on this QP because
// the user did not opt in (why): any DV queue on it is the application's.
func (qp *QP) LeaveDV(why string) {
	qp.keepKernelCommands(why)
}

// dvCaps is the QUERY_CAPS answer, unless the QP must not use DV at all.
func (qp *QP) dvCaps(driverID uint32) (DVCaps, bool) {
	var caps DVCaps
	qp.driverID = driverID
	if qp.sendCQChannel {
		// The kernel writes DV CQEs into our ring and raises no completion
		// event for them (pleite-gda:kernel/ibdev.c: only tbv_cq_push calls
		// comp_handler): a sleeper on the channel would never wake.
		qp.keepKernelCommands("send CQ has a completion channel; DV completions raise no event")
		return caps, false
	}
	if rc := C.usb4v_dv_query_caps(qp.c.sys, qp.c.cmd_fd, C.uint32_t(driverID), &caps); rc < 0 {
		qp.keepKernelCommands(fmt.Sprintf("QUERY_CAPS: %v", unix.Errno(-rc)))
		return caps, false
	}
	return caps, true
}

// keepKernelCommands records why the QP stays on kernel commands.
func (qp *QP) keepKernelCommands(why string) {
	debugf("qp %d: backend %s (DV not used: %s; DV queue: none of ours)", qp.c.qp_num, qp.SendBackend(), why)
	cs := C.CString(why)
	C.strncpy(&qp.c.fallback_reason[0], cs, C.size_t(len(qp.c.fallback_reason)-1))
	C.free(unsafe.Pointer(cs))
}

// SendBackend and RecvBackend name the paths the QP posts through.
func (qp *QP) SendBackend() string { return C.GoString(C.usb4v_backend_name(qp.c.send_backend)) }
func (qp *QP) RecvBackend() string { return C.GoString(C.usb4v_backend_name(qp.c.recv_backend)) }

// DVKick says when the QP's DV send queue rings KICK: "" without a DV
// queue; "undecided" before the first batch that finds the queue busy
// (idle ones KICK); "every batch" when no kernel poller consumed that
// batch; "when idle" when the kernel polls the queue (a busy batch, one
// behind unconsumed or uncompleted WQEs, rides on the poller; a full SQ
// KICKs too).
func (qp *QP) DVKick() string {
	switch C.usb4v_dv_kick_mode(qp.c) {
	case C.USB4V_DV_KICK_UNKNOWN:
		return "undecided"
	case C.USB4V_DV_KICK_ALWAYS:
		return "every batch"
	case C.USB4V_DV_KICK_IDLE:
		return "when idle"
	}
	return ""
}

// DVKicks is the number of KICKs the QP's DV queue rang (0 without one).
func (qp *QP) DVKicks() uint64 { return uint64(C.usb4v_dv_kicks(qp.c)) }

// The answers of DVOwner.
const (
	DVOwnerOurs    = "ours"
	DVOwnerPending = "ours at the first post"
	DVOwnerApp     = "the application's"
	DVOwnerNone    = "none of ours"
)

// DVOwner says who holds the QP's DV send queue as far as the provider
// knows: DVOwnerOurs, DVOwnerPending (deferred to the first post),
// DVOwnerApp (our CREATE_QUEUE got the kernel's EBUSY), or DVOwnerNone (the
// provider took none: not offered, not usable, or its own use is off; an
// application may hold one without the provider knowing).
func (qp *QP) DVOwner() string {
	switch C.usb4v_dv_owner(qp.c) {
	case C.USB4V_DV_OWNER_OURS:
		return DVOwnerOurs
	case C.USB4V_DV_OWNER_PENDING:
		return DVOwnerPending
	case C.USB4V_DV_OWNER_APP:
		return DVOwnerApp
	}
	return DVOwnerNone
}

// FallbackReason says why DV was not taken.
func (qp *QP) FallbackReason() string { return C.GoString(&qp.c.fallback_reason[0]) }

// SetState records the QP state the control path moved the QP to.
func (qp *QP) SetState(state int) { C.usb4v_qp_set_state(qp.c, C.int(state)) }

// AttachProviderSRQ joins a QP created with a provider SRQ (QPConfig.SRQ) to
// it, with a kernel receive queue of depth WRs, which the SRQ keeps fed.
func (qp *QP) AttachProviderSRQ(depth uint32) error {
	return errnoErr("attach qp to provider srq", C.usb4v_srq_emu_attach(qp.c.srq, qp.c, C.uint32_t(depth)))
}

// ProviderSRQLent is how many of its provider SRQ's WRs the QP's kernel
// receive queue holds now.
func (qp *QP) ProviderSRQLent() uint32 { return uint32(C.usb4v_srq_emu_lent(qp.c)) }

// CPtr is the struct usb4v_qp * for cshim's ops table.
func (qp *QP) CPtr() unsafe.Pointer { return unsafe.Pointer(qp.c) }

// PostSend posts send work requests with one call into the engine.
func (qp *QP) PostSend(wrs []SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	qp.send.mu.Lock()
	defer qp.send.mu.Unlock()
	nsge := 0
	for i := range wrs {
		nsge += len(wrs[i].SGEs)
	}
	first := qp.send.grow(len(wrs)*C.sizeof_struct_usb4v_ibv_send_wr, nsge)
	cwrs := unsafe.Slice((*C.struct_usb4v_ibv_send_wr)(first), len(wrs))
	sges := unsafe.Slice((*C.struct_usb4v_ibv_sge)(qp.send.sges), nsge+1)
	k := 0
	for i := range wrs {
		w := &wrs[i]
		c := &cwrs[i]
		*c = C.struct_usb4v_ibv_send_wr{}
		c.wr_id = C.uint64_t(w.WrID)
		c.opcode = C.uint32_t(w.Opcode)
		c.send_flags = C.uint32_t(w.Flags)
		c.imm_data = C.uint32_t(w.ImmData)
		c.num_sge = C.int(len(w.SGEs))
		if len(w.SGEs) > 0 {
			c.sg_list = &sges[k]
			for _, s := range w.SGEs {
				sges[k] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(s.Addr), length: C.uint32_t(s.Length), lkey: C.uint32_t(s.LKey)}
				k++
			}
		}
		u := unsafe.Pointer(&c.wr)
		switch w.Opcode {
		case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
			a := (*[4]uint64)(u)
			a[0], a[1], a[2] = w.RemoteAddr, w.CompareAdd, w.Swap
			*(*uint32)(unsafe.Add(u, 24)) = w.RKey
		default:
			if w.AH != nil {
				*(*unsafe.Pointer)(u) = unsafe.Pointer(w.AH.c)
				*(*uint32)(unsafe.Add(u, 8)) = w.RemoteQPN
				*(*uint32)(unsafe.Add(u, 12)) = w.RemoteQKey
			} else {
				*(*uint64)(u) = w.RemoteAddr
				*(*uint32)(unsafe.Add(u, 8)) = w.RKey
			}
		}
		if i+1 < len(wrs) {
			c.next = &cwrs[i+1]
		}
	}
	var bad *C.struct_usb4v_ibv_send_wr
	rc := C.usb4v_post_send(qp.c, &cwrs[0], &bad)
	if rc == 0 {
		return nil
	}
	return &PostError{Verb: "post send", Index: badIndex(unsafe.Pointer(bad), first, C.sizeof_struct_usb4v_ibv_send_wr, len(wrs)), Err: unix.Errno(rc)}
}

// PostRecv posts receive work requests to the QP's own receive queue.
func (qp *QP) PostRecv(wrs []RecvWR) error {
	return qp.recv.postRecv("post recv", wrs, func(first *C.struct_usb4v_ibv_recv_wr, bad **C.struct_usb4v_ibv_recv_wr) C.int {
		return C.usb4v_post_recv(qp.c, first, bad)
	})
}

// Disown gives the C object up without freeing it (see CQ.Disown; objects.c
// frees it with usb4v_qp_free_destroyed, which sends no DESTROY_QUEUE).
func (qp *QP) Disown() {
	qp.c = nil
	qp.send.free()
	qp.recv.free()
}

// CloseDestroyed frees the C object of a QP whose kernel object is already
// destroyed. The kernel tore its DV queue down with it, and the handle may
// already be another QP's, so no DESTROY_QUEUE is sent.
func (qp *QP) CloseDestroyed() {
	if qp.c != nil {
		C.usb4v_qp_free_destroyed(qp.c)
		qp.c = nil
	}
	qp.send.free()
	qp.recv.free()
}

// Close tears down the DV queue (if any) and frees the C object, while the
// kernel QP still exists (use CloseDestroyed after its destroy).
func (qp *QP) Close() {
	if qp.c != nil {
		C.usb4v_qp_free(qp.c, C.uint32_t(qp.driverID))
		qp.c = nil
	}
	qp.send.free()
	qp.recv.free()
}

// scratch is C memory for building WR lists: Go memory may not hold the
// pointers (next, sg_list) C follows.
type scratch struct {
	mu      sync.Mutex
	wrs     unsafe.Pointer
	wrBytes int
	sges    unsafe.Pointer
	nsges   int
}

func (s *scratch) grow(wrBytes, nsge int) unsafe.Pointer {
	if wrBytes > s.wrBytes {
		C.free(s.wrs)
		s.wrs = C.malloc(C.size_t(wrBytes))
		s.wrBytes = wrBytes
	}
	if nsge+1 > s.nsges {
		C.free(s.sges)
		s.sges = C.malloc(C.size_t((nsge + 1) * C.sizeof_struct_usb4v_ibv_sge))
		s.nsges = nsge + 1
	}
	if s.wrs == nil || s.sges == nil {
		panic("dataplane: out of C memory")
	}
	return s.wrs
}

func (s *scratch) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	C.free(s.wrs)
	C.free(s.sges)
	s.wrs, s.sges, s.wrBytes, s.nsges = nil, nil, 0, 0
}

func (s *scratch) postRecv(verb string, wrs []RecvWR,
	post func(*C.struct_usb4v_ibv_recv_wr, **C.struct_usb4v_ibv_recv_wr) C.int) error {
	if len(wrs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	nsge := 0
	for i := range wrs {
		nsge += len(wrs[i].SGEs)
	}
	first := s.grow(len(wrs)*C.sizeof_struct_usb4v_ibv_recv_wr, nsge)
	cwrs := unsafe.Slice((*C.struct_usb4v_ibv_recv_wr)(first), len(wrs))
	sges := unsafe.Slice((*C.struct_usb4v_ibv_sge)(s.sges), nsge+1)
	k := 0
	for i := range wrs {
		c := &cwrs[i]
		*c = C.struct_usb4v_ibv_recv_wr{wr_id: C.uint64_t(wrs[i].WrID), num_sge: C.int(len(wrs[i].SGEs))}
		if len(wrs[i].SGEs) > 0 {
			c.sg_list = &sges[k]
			for _, g := range wrs[i].SGEs {
				sges[k] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
				k++
			}
		}
		if i+1 < len(wrs) {
			c.next = &cwrs[i+1]
		}
	}
	var bad *C.struct_usb4v_ibv_recv_wr
	rc := post(&cwrs[0], &bad)
	if rc == 0 {
		return nil
	}
	return &PostError{Verb: verb, Index: badIndex(unsafe.Pointer(bad), first, C.sizeof_struct_usb4v_ibv_recv_wr, len(wrs)), Err: unix.Errno(rc)}
}

func badIndex(bad, first unsafe.Pointer, size, n int) int {
	if bad == nil {
		return 0
	}
	i := int((uintptr(bad) - uintptr(first)) / uintptr(size))
	if i < 0 || i >= n {
		return 0
	}
	return i
}
