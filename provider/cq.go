package provider

import (
	"errors"

	"usb4verbs/uapi"
)

// CQAttr describes a completion queue to create.
type CQAttr struct {
	CQE        int          // minimum number of entries
	CompVector uint32       // < Context.NumCompVectors()
	Channel    *CompChannel // nil: no completion events
	UserHandle uint64       // reported in events; 0: the provider picks one
	Flags      uint32       // IB_UVERBS_CQ_FLAGS_* (ioctl path only)
}

// CQ is a completion queue.
type CQ struct {
	ctx        *Context
	handle     uint32
	userHandle uint64
	cqe        uint32
	channel    *CompChannel
	driverResp []byte       // driver udata the kernel answered with
	ring       *uapi.Mminfo // rxe: the ring the last Resize moved the CQ to

	compEvents  uint32 // events returned by GetEvent
	ackedEvents uint32
	destroyed   bool
}

// usb4CQOfferLen is the size of the driver response reserved on usb4
// create_cq for the mapped CQ-ring offer (neuhaus/donnerkeule:proto/tbv_cq_shm.h
// struct tbv_uresp_create_cq). A kernel that makes no offer leaves it zeroed
// (shm_abi 0) and the data path polls with kernel commands; the data path
// (provider/dataplane CQ.TryMappedRing) validates whatever comes back.
const usb4CQOfferLen = uapi.SizeofTbvUrespCreateCq

// cqDriverResp sizes the driver response buffer of create_cq per backend.
func (c *Context) cqDriverResp() []byte {
	switch c.info.Driver.Kind {
	case DriverRXE:
		return make([]byte, uapi.SizeofRxeCreateCqResp)
	case DriverUSB4:
		return make([]byte, usb4CQOfferLen)
	}
	return nil
}

// allocatedCQE is the number of entries the kernel really gave a CQ created
// with requested entries, whose create_cq response said resp.
//
// The thunderbolt_ibverbs trees answer 0: their tbv_create_cq refuses
// cqe <= 0 and cqe > TBV_IBDEV_MAX_CQE (4096), then allocates exactly
// attr->cqe entries (kcalloc(attr->cqe, ...); tcq->cqe = attr->cqe) and never
// sets ib_cq.cqe, which is what the uverbs core copies into the response
// (linux:drivers/infiniband/core/uverbs_std_types_cq.c, UVERBS_ATTR_CREATE_CQ_RESP_CQE
// from cq->cqe). Seen in hellas-main:kernel/ibdev.c:2458 (tbv_create_cq),
// hellas-gda-v2:kernel/ibdev.c:2505, pleite-gda:kernel/ibdev.c:2488,
// pleite-gda-8099446:kernel/ibdev.c:3263, pleite-main:kernel/ibdev_cq.c:19;
// on the bed (tests/usb4/ncclpattern.c, create_cq_cqe) the response is 0 on
// every tree, and a CQ of N entries holds exactly N completions
// (ncclpattern's cq_capacity). A response of 0 for a CQ that was created is
// such a tree's answer (no driver can create a CQ of no entries), so a usb4
// device then reports the requested count; a nonzero response (a tree that
// sets ib_cq.cqe) is taken as it is, and so is every other device's.
func (c *Context) allocatedCQE(requested, resp uint32) uint32 {
	if resp == 0 && c.info.Driver.Kind == DriverUSB4 {
		return requested
	}
	return resp
}

// CreateCQ creates a completion queue (UVERBS_METHOD_CQ_CREATE, or the
// CREATE_CQ write command).
func (c *Context) CreateCQ(attr CQAttr) (*CQ, error) {
	const verb = "create cq"
	if attr.CQE <= 0 || attr.CQE > 1<<31-1 {
		return nil, verbError(verb, errInvalid("cqe %d", attr.CQE))
	}
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	chFD := -1
	if attr.Channel != nil {
		if attr.Channel.ctx != c {
			return nil, verbError(verb, errInvalid("comp channel of another context"))
		}
		if attr.Channel.destroyed {
			return nil, verbError(verb, errClosed("comp channel"))
		}
		chFD = attr.Channel.fd
	}
	uh := c.userHandle(attr.UserHandle)
	drv := c.cqDriverResp()
	var cqe uint32
	ic := newIoctl(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE).
		newObj(uapi.UVERBS_ATTR_CREATE_CQ_HANDLE).
		inU32(uapi.UVERBS_ATTR_CREATE_CQ_CQE, uint32(attr.CQE)).
		inU64(uapi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, uh).
		fd(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, chFD).
		inU32(uapi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, attr.CompVector).
		out(uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, bytesOf(&cqe))
	if attr.Flags != 0 {
		ic.inU32(uapi.UVERBS_ATTR_CREATE_CQ_FLAGS, attr.Flags)
	}
	if len(drv) > 0 {
		ic.out(uapi.UVERBS_ATTR_UHW_OUT, drv)
	}
	var handle uint32
	err := c.cmd.ioctl(ic)
	switch {
	case err == nil:
		h, _ := ic.result(uapi.UVERBS_ATTR_CREATE_CQ_HANDLE)
		handle = uint32(h)
	case errors.Is(err, errIoctlUnsupported):
		if attr.Flags != 0 {
			return nil, verbError(verb, errNotSupported("cq flags need the ioctl path", 0))
		}
		req := uapi.IbUverbsCreateCq{UserHandle: uh, Cqe: uint32(attr.CQE), CompVector: attr.CompVector, CompChannel: int32(chFD)}
		var resp uapi.IbUverbsCreateCqResp
		if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_CREATE_CQ, in: bytesOf(&req), out: bytesOf(&resp), uhwOut: drv}); err != nil {
			return nil, verbError(verb, err)
		}
		handle, cqe = resp.CqHandle, resp.Cqe
	default:
		return nil, verbError(verb, err)
	}
	cqe = c.allocatedCQE(uint32(attr.CQE), cqe)
	cq := &CQ{ctx: c, handle: handle, userHandle: uh, cqe: cqe, channel: attr.Channel, driverResp: drv}
	c.cqs[uh] = cq
	c.track(cq)
	return cq, nil
}

// Handle is the kernel's handle of the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// UserHandle is the value the kernel reports in this CQ's events.
func (cq *CQ) UserHandle() uint64 { return cq.userHandle }

// CQE is the number of entries the kernel actually allocated.
func (cq *CQ) CQE() uint32 { return cq.cqe }

// Channel is the completion channel of the CQ, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.channel }

// Context returns the context the CQ belongs to.
func (cq *CQ) Context() *Context { return cq.ctx }

// DriverResp is the raw driver response of create_cq (rxe: rxe_create_cq_resp;
// usb4: the CQ-ring offer, when requested). Nil for generic devices.
func (cq *CQ) DriverResp() []byte { return cq.driverResp }

// RxeQueue returns the mmap info of an rxe CQ's completion ring: create_cq's,
// or the one the last Resize moved it to.
func (cq *CQ) RxeQueue() (uapi.Mminfo, bool) {
	cq.ctx.mu.Lock()
	defer cq.ctx.mu.Unlock()
	if cq.ring != nil {
		return *cq.ring, true
	}
	return rxeMminfo(cq.ctx, cq.driverResp, 0)
}

// Resize asks the kernel for at least cqe entries (RESIZE_CQ write command)
// and returns what it granted, which CQE reports from then on. The kernel's
// errno is the answer: rxe refuses fewer entries than are outstanding
// (EINVAL); a device without resize_cq (the usb4 module trees) gets
// EOPNOTSUPP from the uverbs core. On rxe the completions move to a new ring,
// which RxeQueue describes afterwards; a data path polling the old ring must
// move with it, with every poller held off (dataplane.CQ.Resize runs Resize
// for that).
func (cq *CQ) Resize(cqe int) (uint32, error) {
	const verb = "resize cq"
	if cqe <= 0 || cqe > 1<<31-1 {
		return 0, verbError(verb, errInvalid("cqe %d", cqe))
	}
	if err := cq.lock(verb); err != nil {
		return 0, err
	}
	defer cq.ctx.mu.Unlock()
	req := uapi.IbUverbsResizeCq{CqHandle: cq.handle, Cqe: uint32(cqe)}
	var resp uapi.IbUverbsResizeCqResp
	w := &writeCmd{cmd: uapi.IB_USER_VERBS_CMD_RESIZE_CQ, in: bytesOf(&req), out: bytesOf(&resp)}
	var drv uapi.RxeResizeCqResp
	if cq.ctx.info.Driver.Kind == DriverRXE {
		w.uhwOut = bytesOf(&drv) // rxe_resize_cq writes the new ring's mmap info there
	}
	if err := cq.ctx.cmd.execWrite(w); err != nil {
		return 0, verbError(verb, err)
	}
	cq.cqe = resp.Cqe
	if cq.ctx.info.Driver.Kind == DriverRXE {
		// As written back, unchecked: the data path validates the ring
		// when it maps it, and refuses a bad one.
		mi := drv.Mi
		cq.ring = &mi
	}
	return resp.Cqe, nil
}

// rxeMminfo decodes one struct mminfo at offset off of an rxe driver response.
func rxeMminfo(c *Context, b []byte, off int) (uapi.Mminfo, bool) {
	if c.info.Driver.Kind != DriverRXE || len(b) < off+uapi.SizeofMminfo {
		return uapi.Mminfo{}, false
	}
	var mi uapi.Mminfo
	copy(bytesOf(&mi), b[off:])
	return mi, true
}

func (cq *CQ) lock(verb string) error {
	if cq == nil || cq.ctx == nil {
		return verbError(verb, errInvalid("nil cq"))
	}
	if err := cq.ctx.lock(verb); err != nil {
		return err
	}
	if cq.destroyed {
		cq.ctx.mu.Unlock()
		return verbError(verb, errClosed("cq"))
	}
	return nil
}

// ReqNotify arms the CQ: the next completion (only solicited ones if
// solicitedOnly) produces an event on its channel (REQ_NOTIFY_CQ command).
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	const verb = "req notify cq"
	if err := cq.lock(verb); err != nil {
		return err
	}
	defer cq.ctx.mu.Unlock()
	req := uapi.IbUverbsReqNotifyCq{CqHandle: cq.handle}
	if solicitedOnly {
		req.SolicitedOnly = 1
	}
	if err := cq.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, in: bytesOf(&req)}); err != nil {
		return verbError(verb, err)
	}
	return nil
}

// AckEvents acknowledges n events returned by GetEvent for this CQ.
// Acknowledging more than were received is an error (EINVAL).
func (cq *CQ) AckEvents(n uint32) error {
	const verb = "ack cq events"
	if cq == nil || cq.ctx == nil {
		return verbError(verb, errInvalid("nil cq"))
	}
	cq.ctx.mu.Lock()
	defer cq.ctx.mu.Unlock()
	if cq.ackedEvents+n > cq.compEvents || cq.ackedEvents+n < cq.ackedEvents {
		return verbError(verb, errInvalid("ack %d with %d unacknowledged", n, cq.compEvents-cq.ackedEvents))
	}
	cq.ackedEvents += n
	return nil
}

// EventCounts are the events the kernel delivered for a CQ, QP or SRQ up to
// its destruction, from the destroy response (ib_uverbs_destroy_cq_resp,
// ib_uverbs_destroy_qp_resp, ib_uverbs_destroy_srq_resp;
// linux:include/uapi/rdma/ib_user_verbs.h). A libibverbs provider must not
// free the object before the application acknowledged as many
// (ibv_ack_cq_events, ibv_ack_async_event): those calls still touch it.
type EventCounts struct {
	Comp  uint32 // completion events on the CQ's channel (CQs only)
	Async uint32 // async events on the context's async fd
}

// Destroy destroys the CQ. The kernel refuses (EBUSY) while QPs use it.
func (cq *CQ) Destroy() error {
	_, err := cq.DestroyWithEvents()
	return err
}

// DestroyWithEvents destroys the CQ like Destroy and returns how many
// completion and async events the kernel reported for it.
func (cq *CQ) DestroyWithEvents() (EventCounts, error) {
	const verb = "destroy cq"
	if err := cq.lock(verb); err != nil {
		return EventCounts{}, err
	}
	defer cq.ctx.mu.Unlock()
	ev, err := cq.destroyEventsLocked()
	if err != nil {
		return EventCounts{}, verbError(verb, err)
	}
	cq.ctx.untrack(cq)
	return ev, nil
}

func (cq *CQ) destroyRank() int { return rankCQ }

func (cq *CQ) destroyLocked() error {
	_, err := cq.destroyEventsLocked()
	return err
}

func (cq *CQ) destroyEventsLocked() (EventCounts, error) {
	var resp uapi.IbUverbsDestroyCqResp
	req := uapi.IbUverbsDestroyCq{CqHandle: cq.handle}
	err := cq.ctx.cmd.destroy(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_CQ_HANDLE, cq.handle, uapi.UVERBS_ATTR_DESTROY_CQ_RESP, bytesOf(&resp),
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DESTROY_CQ, in: bytesOf(&req), out: bytesOf(&resp)})
	if err != nil {
		return EventCounts{}, err
	}
	cq.destroyed = true
	if cq.ctx.cqs[cq.userHandle] == cq {
		delete(cq.ctx.cqs, cq.userHandle)
	}
	return EventCounts{Comp: resp.CompEventsReported, Async: resp.AsyncEventsReported}, nil
}
