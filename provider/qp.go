package provider

import (
	"errors"
	"fmt"

	"usb4verbs/uapi"
)

// QPType is the transport of a QP (enum ib_uverbs_qp_type).
type QPType uint8

// QP types supported here.
const (
	QPTypeRC QPType = uapi.IB_UVERBS_QPT_RC
	QPTypeUC QPType = uapi.IB_UVERBS_QPT_UC
	QPTypeUD QPType = uapi.IB_UVERBS_QPT_UD
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPCap are the queue sizes of a QP.
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPInitAttr describes a QP to create.
type QPInitAttr struct {
	Type       QPType
	SendCQ     *CQ
	RecvCQ     *CQ
	SRQ        *SRQ // optional; receives then come from the SRQ
	Cap        QPCap
	SigAll     bool   // every send WR generates a completion
	UserHandle uint64 // reported in async events; 0: the provider picks one
}

// QPAttr are the modifiable and queryable attributes of a QP (ibv_qp_attr).
// Which fields count is said by a mask of uapi.IB_QP_* bits.
type QPAttr struct {
	State            uint8 // uapi.IB_QPS_*
	CurState         uint8
	PathMTU          uint8 // uapi.IB_MTU_*
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      uint32 // IB_UVERBS_ACCESS_*
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	Port             uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPort          uint8
	AltTimeout       uint8
	AH               AHAttr
	AltAH            AHAttr
	Cap              QPCap
}

// QP is a queue pair.
type QP struct {
	pd         *PD
	handle     uint32
	qpn        uint32
	userHandle uint64
	init       QPInitAttr // as granted by the kernel
	driverResp []byte
	destroyed  bool
}

// CreateQP creates a queue pair (UVERBS_METHOD_QP_CREATE, or the CREATE_QP
// write command). The granted sizes are in QP.InitAttr().Cap.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	const verb = "create qp"
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, verbError(verb, errInvalid("send and receive CQs are required"))
	}
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	c := pd.ctx
	for _, cq := range []*CQ{attr.SendCQ, attr.RecvCQ} {
		if cq.ctx != c {
			return nil, verbError(verb, errInvalid("cq of another context"))
		}
		if cq.destroyed {
			return nil, verbError(verb, errClosed("cq"))
		}
	}
	if attr.SRQ != nil && (attr.SRQ.pd == nil || attr.SRQ.pd.ctx != c) {
		return nil, verbError(verb, errInvalid("srq of another context"))
	}
	if attr.SRQ != nil && attr.SRQ.destroyed {
		return nil, verbError(verb, errClosed("srq"))
	}
	uh := c.userHandle(attr.UserHandle)
	var drv []byte
	if c.info.Driver.Kind == DriverRXE {
		drv = make([]byte, uapi.SizeofRxeCreateQpResp) // rq and sq ring mmap info
	}
	capIn := uapi.IbUverbsQpCap{MaxSendWr: attr.Cap.MaxSendWR, MaxRecvWr: attr.Cap.MaxRecvWR,
		MaxSendSge: attr.Cap.MaxSendSGE, MaxRecvSge: attr.Cap.MaxRecvSGE, MaxInlineData: attr.Cap.MaxInlineData}
	// A provider SRQ: the kernel QP gets a receive queue of its own, which
	// the SRQ feeds (srq.go, docs/srq.md); the kernel never hears of the SRQ.
	kernelSRQ := attr.SRQ
	if attr.SRQ != nil && attr.SRQ.provider {
		kernelSRQ = nil
		capIn.MaxRecvWr = attr.SRQ.attr.MaxWR
		if c.kattr != nil && c.kattr.MaxQPWR > 0 && capIn.MaxRecvWr > c.kattr.MaxQPWR {
			capIn.MaxRecvWr = c.kattr.MaxQPWR
		}
		capIn.MaxRecvSge = ProviderSRQMaxSGE
	}
	var capOut uapi.IbUverbsQpCap
	var qpn uint32
	ic := newIoctl(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE).
		newObj(uapi.UVERBS_ATTR_CREATE_QP_HANDLE).
		idr(uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle).
		idr(uapi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, attr.SendCQ.handle).
		idr(uapi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, attr.RecvCQ.handle)
	if kernelSRQ != nil {
		ic.idr(uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, kernelSRQ.handle)
	}
	ic.inU64(uapi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, uh).
		in(uapi.UVERBS_ATTR_CREATE_QP_CAP, bytesOf(&capIn)).
		constIn(uapi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(attr.Type)).
		out(uapi.UVERBS_ATTR_CREATE_QP_RESP_CAP, bytesOf(&capOut)).
		out(uapi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, bytesOf(&qpn))
	if attr.SigAll {
		ic.inU32(uapi.UVERBS_ATTR_CREATE_QP_FLAGS, uapi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL)
	}
	if len(drv) > 0 {
		ic.out(uapi.UVERBS_ATTR_UHW_OUT, drv)
	}
	var handle uint32
	err := c.cmd.ioctl(ic)
	switch {
	case err == nil:
		h, _ := ic.result(uapi.UVERBS_ATTR_CREATE_QP_HANDLE)
		handle = uint32(h)
	case errors.Is(err, errIoctlUnsupported):
		req := uapi.IbUverbsCreateQp{UserHandle: uh, PdHandle: pd.handle,
			SendCqHandle: attr.SendCQ.handle, RecvCqHandle: attr.RecvCQ.handle,
			MaxSendWr: capIn.MaxSendWr, MaxRecvWr: capIn.MaxRecvWr, MaxSendSge: capIn.MaxSendSge,
			MaxRecvSge: capIn.MaxRecvSge, MaxInlineData: capIn.MaxInlineData, QpType: uint8(attr.Type)}
		if attr.SigAll {
			req.SqSigAll = 1
		}
		if kernelSRQ != nil {
			req.SrqHandle, req.IsSrq = kernelSRQ.handle, 1
		}
		var resp uapi.IbUverbsCreateQpResp
		if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_CREATE_QP, in: bytesOf(&req), out: bytesOf(&resp), uhwOut: drv}); err != nil {
			return nil, verbError(verb, err)
		}
		handle, qpn = resp.QpHandle, resp.Qpn
		capOut = uapi.IbUverbsQpCap{MaxSendWr: resp.MaxSendWr, MaxRecvWr: resp.MaxRecvWr,
			MaxSendSge: resp.MaxSendSge, MaxRecvSge: resp.MaxRecvSge, MaxInlineData: resp.MaxInlineData}
	default:
		return nil, verbError(verb, err)
	}
	init := attr
	init.UserHandle = uh
	init.Cap = QPCap{MaxSendWR: capOut.MaxSendWr, MaxRecvWR: capOut.MaxRecvWr, MaxSendSGE: capOut.MaxSendSge,
		MaxRecvSGE: capOut.MaxRecvSge, MaxInlineData: capOut.MaxInlineData}
	qp := &QP{pd: pd, handle: handle, qpn: qpn, userHandle: uh, init: init, driverResp: drv}
	c.qps[uh] = qp
	c.track(qp)
	return qp, nil
}

// Handle is the kernel's handle of the QP.
func (qp *QP) Handle() uint32 { return qp.handle }

// QPN is the QP number peers address.
func (qp *QP) QPN() uint32 { return qp.qpn }

// UserHandle is the value the kernel reports in this QP's async events.
func (qp *QP) UserHandle() uint64 { return qp.userHandle }

// InitAttr returns the creation attributes with the sizes the kernel granted.
func (qp *QP) InitAttr() QPInitAttr { return qp.init }

// PD returns the protection domain of the QP.
func (qp *QP) PD() *PD { return qp.pd }

// DriverResp is the raw driver response of create_qp (rxe: rxe_create_qp_resp).
func (qp *QP) DriverResp() []byte { return qp.driverResp }

// RxeQueues returns the mmap info of an rxe QP's receive and send rings.
func (qp *QP) RxeQueues() (rq, sq uapi.Mminfo, ok bool) {
	rq, ok1 := rxeMminfo(qp.pd.ctx, qp.driverResp, 0)
	sq, ok2 := rxeMminfo(qp.pd.ctx, qp.driverResp, uapi.SizeofMminfo)
	return rq, sq, ok1 && ok2
}

func (qp *QP) lock(verb string) error {
	if qp == nil || qp.pd == nil {
		return verbError(verb, errInvalid("nil qp"))
	}
	if err := qp.pd.ctx.lock(verb); err != nil {
		return err
	}
	if qp.destroyed {
		qp.pd.ctx.mu.Unlock()
		return verbError(verb, errClosed("qp"))
	}
	return nil
}

// Modify changes the attributes selected by mask (uapi.IB_QP_* bits), e.g.
// RESET->INIT with IB_QP_STATE|IB_QP_PKEY_INDEX|IB_QP_PORT|IB_QP_ACCESS_FLAGS
// (MODIFY_QP write command). The kernel checks the transition and the mask.
func (qp *QP) Modify(attr *QPAttr, mask uint32) error {
	verb := "modify qp"
	if attr == nil {
		return verbError(verb, errInvalid("nil attributes"))
	}
	if mask&uapi.IB_QP_STATE != 0 {
		verb = fmt.Sprintf("modify qp to %s", qpStateName(attr.State))
	}
	if err := qp.lock(verb); err != nil {
		return err
	}
	defer qp.pd.ctx.mu.Unlock()
	req := uapi.IbUverbsModifyQp{
		Dest: attr.AH.toQPDest(), AltDest: attr.AltAH.toQPDest(),
		QpHandle: qp.handle, AttrMask: mask, Qkey: attr.QKey, RqPsn: attr.RQPSN, SqPsn: attr.SQPSN,
		DestQpNum: attr.DestQPN, QpAccessFlags: attr.AccessFlags, PkeyIndex: attr.PKeyIndex,
		AltPkeyIndex: attr.AltPKeyIndex, QpState: attr.State, CurQpState: attr.CurState,
		PathMtu: attr.PathMTU, PathMigState: attr.PathMigState, EnSqdAsyncNotify: attr.EnSQDAsyncNotify,
		MaxRdAtomic: attr.MaxRdAtomic, MaxDestRdAtomic: attr.MaxDestRdAtomic, MinRnrTimer: attr.MinRNRTimer,
		PortNum: attr.Port, Timeout: attr.Timeout, RetryCnt: attr.RetryCnt, RnrRetry: attr.RNRRetry,
		AltPortNum: attr.AltPort, AltTimeout: attr.AltTimeout,
	}
	if err := qp.pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_MODIFY_QP, in: bytesOf(&req)}); err != nil {
		return verbError(verb, err)
	}
	return nil
}

// AttachMcast attaches the QP to the multicast group gid (MGID) with
// multicast LID lid (ATTACH_MCAST write command; the kernel has no ioctl
// method for it). The kernel checks the rest: a UD QP, a multicast GID, a
// valid LID; a device without multicast (every usb4 module tree) answers
// EOPNOTSUPP, reported as ErrNotSupported. Attaching a QP to a group it
// already joined succeeds (the kernel keeps one entry).
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	req := uapi.IbUverbsAttachMcast{Gid: gid, Mlid: lid}
	return qp.mcast("attach mcast", uapi.IB_USER_VERBS_CMD_ATTACH_MCAST, bytesOf(&req), &req.QpHandle)
}

// DetachMcast detaches the QP from the multicast group gid with LID lid
// (DETACH_MCAST write command); a group the QP never joined is the
// kernel's EINVAL.
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	req := uapi.IbUverbsDetachMcast{Gid: gid, Mlid: lid}
	return qp.mcast("detach mcast", uapi.IB_USER_VERBS_CMD_DETACH_MCAST, bytesOf(&req), &req.QpHandle)
}

// mcast issues an ATTACH_MCAST or DETACH_MCAST request (in, whose QP handle
// field is handle) for the QP under the context lock.
func (qp *QP) mcast(verb string, cmd uint32, in []byte, handle *uint32) error {
	if err := qp.lock(verb); err != nil {
		return err
	}
	defer qp.pd.ctx.mu.Unlock()
	*handle = qp.handle
	if err := qp.pd.ctx.cmd.execWrite(&writeCmd{cmd: cmd, in: in}); err != nil {
		return verbError(verb, err)
	}
	return nil
}

// Query returns the QP's current attributes (those selected by mask; the
// kernel may fill more) and its creation attributes (QUERY_QP command).
func (qp *QP) Query(mask uint32) (QPAttr, QPInitAttr, error) {
	const verb = "query qp"
	if err := qp.lock(verb); err != nil {
		return QPAttr{}, QPInitAttr{}, err
	}
	defer qp.pd.ctx.mu.Unlock()
	req := uapi.IbUverbsQueryQp{QpHandle: qp.handle, AttrMask: mask}
	var r uapi.IbUverbsQueryQpResp
	if err := qp.pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_QUERY_QP, in: bytesOf(&req), out: bytesOf(&r)}); err != nil {
		return QPAttr{}, QPInitAttr{}, verbError(verb, err)
	}
	caps := QPCap{MaxSendWR: r.MaxSendWr, MaxRecvWR: r.MaxRecvWr, MaxSendSGE: r.MaxSendSge,
		MaxRecvSGE: r.MaxRecvSge, MaxInlineData: r.MaxInlineData}
	a := QPAttr{
		State: r.QpState, CurState: r.CurQpState, PathMTU: r.PathMtu, PathMigState: r.PathMigState,
		QKey: r.Qkey, RQPSN: r.RqPsn, SQPSN: r.SqPsn, DestQPN: r.DestQpNum, AccessFlags: r.QpAccessFlags,
		PKeyIndex: r.PkeyIndex, AltPKeyIndex: r.AltPkeyIndex, SQDraining: r.SqDraining,
		MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic, MinRNRTimer: r.MinRnrTimer,
		Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RnrRetry,
		AltPort: r.AltPortNum, AltTimeout: r.AltTimeout,
		AH: ahFromQPDest(&r.Dest), AltAH: ahFromQPDest(&r.AltDest), Cap: caps,
	}
	init := qp.init
	init.Cap = caps
	init.SigAll = r.SqSigAll != 0
	return a, init, nil
}

// Destroy destroys the QP.
func (qp *QP) Destroy() error {
	_, err := qp.DestroyWithEvents()
	return err
}

// DestroyWithEvents destroys the QP like Destroy and returns how many async
// events the kernel reported for it (EventCounts.Comp is always 0).
func (qp *QP) DestroyWithEvents() (EventCounts, error) {
	const verb = "destroy qp"
	if err := qp.lock(verb); err != nil {
		return EventCounts{}, err
	}
	defer qp.pd.ctx.mu.Unlock()
	ev, err := qp.destroyEventsLocked()
	if err != nil {
		return EventCounts{}, verbError(verb, err)
	}
	qp.pd.ctx.untrack(qp)
	return ev, nil
}

func (qp *QP) destroyRank() int { return rankQP }

func (qp *QP) destroyLocked() error {
	_, err := qp.destroyEventsLocked()
	return err
}

func (qp *QP) destroyEventsLocked() (EventCounts, error) {
	if qp.init.SRQ != nil && qp.init.SRQ.provider {
		// The provider SRQ's WRs lent to this QP's kernel RQ: to ERR
		// first, where the module flushes them into the receive CQ
		// (hellas-main:kernel/ibdev.c:2975, tbv_qp_flush_recv_wqes :7136),
		// so polling gives them back to the SRQ; DESTROY_QP alone frees
		// them without a completion. A QP already in ERR flushed them then.
		req := uapi.IbUverbsModifyQp{QpHandle: qp.handle, AttrMask: uapi.IB_QP_STATE, QpState: uapi.IB_QPS_ERR}
		_ = qp.pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_MODIFY_QP, in: bytesOf(&req)})
	}
	var resp uapi.IbUverbsDestroyQpResp
	req := uapi.IbUverbsDestroyQp{QpHandle: qp.handle}
	err := qp.pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_QP_HANDLE, qp.handle, uapi.UVERBS_ATTR_DESTROY_QP_RESP, bytesOf(&resp),
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DESTROY_QP, in: bytesOf(&req), out: bytesOf(&resp)})
	if err != nil {
		return EventCounts{}, err
	}
	qp.destroyed = true
	if c := qp.pd.ctx; c.qps[qp.userHandle] == qp {
		delete(c.qps, qp.userHandle)
	}
	return EventCounts{Async: resp.EventsReported}, nil
}

func qpStateName(s uint8) string {
	switch s {
	case uapi.IB_QPS_RESET:
		return "RESET"
	case uapi.IB_QPS_INIT:
		return "INIT"
	case uapi.IB_QPS_RTR:
		return "RTR"
	case uapi.IB_QPS_RTS:
		return "RTS"
	case uapi.IB_QPS_SQD:
		return "SQD"
	case uapi.IB_QPS_SQE:
		return "SQE"
	case uapi.IB_QPS_ERR:
		return "ERR"
	}
	return fmt.Sprintf("state %d", s)
}
