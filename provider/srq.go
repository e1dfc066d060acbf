package provider

import (
	"errors"

	"usb4verbs/uapi"
)

// SRQInitAttr describes a shared receive queue to create.
type SRQInitAttr struct {
	MaxWR      uint32
	MaxSGE     uint32
	Limit      uint32 // arm the limit event at this many WRs (0: not armed)
	UserHandle uint64 // reported in async events; 0: the provider picks one
}

// SRQAttr are the modifiable/queryable attributes of an SRQ.
type SRQAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	Limit  uint32
}

// The provider SRQ's limits (ibv_query_device answers them on a usb4
// kernel without SRQs). One SGE: every module tree's post_recv takes at most
// one (hellas-main:kernel/ibdev.c:5307, pleite-gda-8099446:kernel/ibdev.c:6676,
// pleite-main:kernel/ibdev_qp.c:480), and the SRQ's WRs go there.
const (
	ProviderSRQMaxSRQ = 1024
	ProviderSRQMaxWR  = 16384
	ProviderSRQMaxSGE = 1
)

// providerSRQLocked says whether SRQs on this context are the provider's:
// a usb4 kernel that answers max_srq 0 (every thunderbolt_ibverbs tree, which
// also refuses a QP with an SRQ: hellas-main:kernel/ibdev.c:2498), or any
// device with USB4VERBS_SRQ=provider (srqmode.go).
func (c *Context) providerSRQLocked(a DeviceAttr) bool {
	return c.srqForced || c.info.Driver.Kind == DriverUSB4 && a.MaxSRQ == 0
}

// SRQ is a shared receive queue.
type SRQ struct {
	// provider: no kernel object; the data path (provider/dataplane's
	// NewProviderSRQ) is the queue, over the kernel RQs of its QPs.
	provider   bool
	pd         *PD
	handle     uint32
	srqn       uint32
	userHandle uint64
	attr       SRQAttr // as granted at creation
	driverResp []byte
	ring       *uapi.Mminfo // rxe: the ring since the last resize (under ctx.mu)
	destroyed  bool
}

// CreateSRQ creates a basic SRQ (UVERBS_METHOD_SRQ_CREATE, or the CREATE_SRQ
// write command). On a usb4 kernel without SRQs it is the provider's
// (Provider): no kernel object, the sizes checked against the provider
// SRQ's limits (EINVAL above them, as a kernel answers); its data path is
// provider/dataplane's NewProviderSRQ.
func (pd *PD) CreateSRQ(attr SRQInitAttr) (*SRQ, error) {
	const verb = "create srq"
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	c := pd.ctx
	uh := c.userHandle(attr.UserHandle)
	if c.info.Driver.Kind == DriverUSB4 || c.srqForced {
		a, err := c.queryDeviceLocked()
		if err != nil {
			return nil, verbError(verb, err)
		}
		if c.providerSRQLocked(a) {
			return pd.createProviderSRQLocked(attr, uh)
		}
	}
	var drv []byte
	if c.info.Driver.Kind == DriverRXE {
		drv = make([]byte, uapi.SizeofRxeCreateSrqResp)
	}
	var maxWR, maxSGE, srqn uint32
	ic := newIoctl(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE).
		newObj(uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE).
		idr(uapi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.handle).
		constIn(uapi.UVERBS_ATTR_CREATE_SRQ_TYPE, uapi.IB_UVERBS_SRQT_BASIC).
		inU64(uapi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, uh).
		inU32(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, attr.MaxWR).
		inU32(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, attr.MaxSGE).
		inU32(uapi.UVERBS_ATTR_CREATE_SRQ_LIMIT, attr.Limit).
		out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, bytesOf(&maxWR)).
		out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, bytesOf(&maxSGE)).
		out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, bytesOf(&srqn)).optional()
	if len(drv) > 0 {
		ic.out(uapi.UVERBS_ATTR_UHW_OUT, drv)
	}
	var handle uint32
	err := c.cmd.ioctl(ic)
	switch {
	case err == nil:
		h, _ := ic.result(uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
		handle = uint32(h)
	case errors.Is(err, errIoctlUnsupported):
		req := uapi.IbUverbsCreateSrq{UserHandle: uh, PdHandle: pd.handle, MaxWr: attr.MaxWR, MaxSge: attr.MaxSGE, SrqLimit: attr.Limit}
		var resp uapi.IbUverbsCreateSrqResp
		if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_CREATE_SRQ, in: bytesOf(&req), out: bytesOf(&resp), uhwOut: drv}); err != nil {
			return nil, verbError(verb, err)
		}
		handle, maxWR, maxSGE, srqn = resp.SrqHandle, resp.MaxWr, resp.MaxSge, resp.Srqn
	default:
		return nil, verbError(verb, err)
	}
	srq := &SRQ{pd: pd, handle: handle, srqn: srqn, userHandle: uh,
		attr: SRQAttr{MaxWR: maxWR, MaxSGE: maxSGE, Limit: attr.Limit}, driverResp: drv}
	c.srqs[uh] = srq
	c.track(srq)
	return srq, nil
}

func (pd *PD) createProviderSRQLocked(attr SRQInitAttr, uh uint64) (*SRQ, error) {
	const verb = "create srq"
	c := pd.ctx
	switch {
	case attr.MaxWR == 0 || attr.MaxWR > ProviderSRQMaxWR:
		return nil, verbError(verb, errInvalid("max_wr %d (the provider's SRQ takes 1..%d)", attr.MaxWR, ProviderSRQMaxWR))
	case attr.MaxSGE > ProviderSRQMaxSGE:
		return nil, verbError(verb, errInvalid("max_sge %d (the provider's SRQ takes %d)", attr.MaxSGE, ProviderSRQMaxSGE))
	case attr.Limit > attr.MaxWR:
		return nil, verbError(verb, errInvalid("srq_limit %d above max_wr %d", attr.Limit, attr.MaxWR))
	}
	n := 0
	for _, s := range c.srqs {
		if s.provider {
			n++
		}
	}
	if n >= ProviderSRQMaxSRQ {
		return nil, verbError(verb, errNoMem("the provider's %d SRQs", ProviderSRQMaxSRQ))
	}
	c.nextProviderSRQ++
	srq := &SRQ{pd: pd, provider: true, handle: providerSRQHandleBase + c.nextProviderSRQ, userHandle: uh,
		attr: SRQAttr{MaxWR: attr.MaxWR, MaxSGE: ProviderSRQMaxSGE, Limit: attr.Limit}}
	c.srqs[uh] = srq
	c.track(srq)
	return srq, nil
}

// providerSRQHandleBase: provider SRQs' handles, never a kernel's (ibv_srq's
// handle field; no command carries it).
const providerSRQHandleBase = 0xfff00000

// Provider reports whether the SRQ is the provider's (no kernel object).
func (srq *SRQ) Provider() bool { return srq.provider }

// ProviderRQDepth is the kernel receive queue depth a QP on a provider SRQ
// gets: the SRQ's max_wr, at most the kernel's max_qp_wr, so that a burst
// on one QP meets as many WRs as the SRQ holds (docs/srq.md).
func (srq *SRQ) ProviderRQDepth() uint32 {
	d := srq.attr.MaxWR
	c := srq.pd.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kattr != nil && c.kattr.MaxQPWR > 0 && d > c.kattr.MaxQPWR {
		d = c.kattr.MaxQPWR
	}
	return d
}

// SRQType is enum ibv_srq_type.
type SRQType uint32

// The SRQ types of ibv_create_srq_ex.
const (
	SRQTypeBasic SRQType = 0
	SRQTypeXRC   SRQType = 1
	SRQTypeTM    SRQType = 2
)

// SRQInitAttrEx is CreateSRQEx's request (ibv_srq_init_attr_ex in Go terms).
type SRQInitAttrEx struct {
	SRQInitAttr
	Type       SRQType
	CQ         *CQ    // XRC and TM: the CQ of the SRQ's completions
	MaxNumTags uint32 // TM
}

// CreateSRQEx is ibv_create_srq_ex: a basic SRQ is CreateSRQ's (its CQ
// ignored, as librxe's path does); XRC needs an XRC domain, which this
// provider does not have, and tag matching a data path it does not have, so
// both are ErrNotSupported (EOPNOTSUPP) after libibverbs' own argument
// checks (EINVAL): XRC without a CQ, TM without a CQ or tags.
func (pd *PD) CreateSRQEx(attr SRQInitAttrEx) (*SRQ, error) {
	const verb = "create srq"
	switch attr.Type {
	case SRQTypeBasic:
		return pd.CreateSRQ(attr.SRQInitAttr)
	case SRQTypeXRC:
		if attr.CQ == nil {
			return nil, verbError(verb, errInvalid("an XRC SRQ needs a CQ"))
		}
		return nil, verbError(verb, errNotSupported("XRC SRQs (no XRC domains)", 0))
	case SRQTypeTM:
		if attr.CQ == nil || attr.MaxNumTags == 0 {
			return nil, verbError(verb, errInvalid("a tag-matching SRQ needs a CQ and max_num_tags"))
		}
		return nil, verbError(verb, errNotSupported("tag-matching SRQs", 0))
	}
	return nil, verbError(verb, errInvalid("srq type %d", attr.Type))
}

// Handle is the kernel's handle of the SRQ.
func (srq *SRQ) Handle() uint32 { return srq.handle }

// SRQN is the SRQ number (XRC peers address it; 0 if the kernel did not say).
func (srq *SRQ) SRQN() uint32 { return srq.srqn }

// UserHandle is the value the kernel reports in this SRQ's async events.
func (srq *SRQ) UserHandle() uint64 { return srq.userHandle }

// InitAttr returns the sizes the kernel granted at creation.
func (srq *SRQ) InitAttr() SRQAttr { return srq.attr }

// PD returns the protection domain of the SRQ.
func (srq *SRQ) PD() *PD { return srq.pd }

// DriverResp is the raw driver response of create_srq (rxe: rxe_create_srq_resp).
func (srq *SRQ) DriverResp() []byte { return srq.driverResp }

// RxeQueue returns the mmap info of an rxe SRQ's current ring: create_srq's,
// or the one the last resize (Modify with IB_SRQ_MAX_WR) moved it to.
func (srq *SRQ) RxeQueue() (uapi.Mminfo, bool) {
	c := srq.pd.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if srq.ring != nil {
		return *srq.ring, true
	}
	return rxeMminfo(c, srq.driverResp, 0)
}

func (srq *SRQ) lock(verb string) error {
	if srq == nil || srq.pd == nil {
		return verbError(verb, errInvalid("nil srq"))
	}
	if err := srq.pd.ctx.lock(verb); err != nil {
		return err
	}
	if srq.destroyed {
		srq.pd.ctx.mu.Unlock()
		return verbError(verb, errClosed("srq"))
	}
	return nil
}

// Modify changes the SRQ's limit (uapi.IB_SRQ_LIMIT) and/or size
// (uapi.IB_SRQ_MAX_WR) (MODIFY_SRQ write command). On rxe a resize moves the
// queue to a new ring, which RxeQueue describes afterwards; a data path on
// the old ring must move with it (dataplane.SRQ.Resize runs Modify for that).
//
// A provider SRQ has no kernel object: Modify records max_wr and the limit
// after the data path took them (provider/dataplane SRQ.ModifyProvider
// checks them against what it holds).
func (srq *SRQ) Modify(attr SRQAttr, mask uint32) error {
	const verb = "modify srq"
	if err := srq.lock(verb); err != nil {
		return err
	}
	defer srq.pd.ctx.mu.Unlock()
	if srq.provider {
		if mask&uapi.IB_SRQ_MAX_WR != 0 {
			if attr.MaxWR == 0 || attr.MaxWR > ProviderSRQMaxWR {
				return verbError(verb, errInvalid("max_wr %d (the provider's SRQ takes 1..%d)", attr.MaxWR, ProviderSRQMaxWR))
			}
			srq.attr.MaxWR = attr.MaxWR
		}
		if mask&uapi.IB_SRQ_LIMIT != 0 {
			srq.attr.Limit = attr.Limit
		}
		return nil
	}
	req := uapi.IbUverbsModifySrq{SrqHandle: srq.handle, AttrMask: mask, MaxWr: attr.MaxWR, SrqLimit: attr.Limit}
	w := &writeCmd{cmd: uapi.IB_USER_VERBS_CMD_MODIFY_SRQ, in: bytesOf(&req)}
	var mi *uapi.Mminfo
	if srq.pd.ctx.info.Driver.Kind == DriverRXE {
		// rxe_modify_srq insists on rxe_modify_srq_cmd: the address where
		// it writes the resized ring's mmap info
		// (linux:drivers/infiniband/sw/rxe/rxe_srq.c rxe_srq_from_attr).
		mi = new(uapi.Mminfo)
		cmd := uapi.RxeModifySrqCmd{MmapInfoAddr: uint64(addrOf(bytesOf(mi)))}
		w.uhwIn = bytesOf(&cmd)
		w.pin = [][]byte{bytesOf(mi)}
	}
	if err := srq.pd.ctx.cmd.execWrite(w); err != nil {
		return verbError(verb, err)
	}
	if mi != nil && mask&uapi.IB_SRQ_MAX_WR != 0 {
		// As written back, unchecked: the data path validates the ring
		// when it maps it, and refuses a bad one.
		srq.ring = mi
	}
	return nil
}

// Query returns the SRQ's current attributes (QUERY_SRQ command).
func (srq *SRQ) Query() (SRQAttr, error) {
	const verb = "query srq"
	if err := srq.lock(verb); err != nil {
		return SRQAttr{}, err
	}
	defer srq.pd.ctx.mu.Unlock()
	if srq.provider {
		return srq.attr, nil // the data path has the current limit (SRQ.Stats)
	}
	req := uapi.IbUverbsQuerySrq{SrqHandle: srq.handle}
	var r uapi.IbUverbsQuerySrqResp
	if err := srq.pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_QUERY_SRQ, in: bytesOf(&req), out: bytesOf(&r)}); err != nil {
		return SRQAttr{}, verbError(verb, err)
	}
	return SRQAttr{MaxWR: r.MaxWr, MaxSGE: r.MaxSge, Limit: r.SrqLimit}, nil
}

// Destroy destroys the SRQ. The kernel refuses (EBUSY) while QPs use it.
func (srq *SRQ) Destroy() error {
	_, err := srq.DestroyWithEvents()
	return err
}

// DestroyWithEvents destroys the SRQ like Destroy and returns how many async
// events the kernel reported for it (EventCounts.Comp is always 0).
func (srq *SRQ) DestroyWithEvents() (EventCounts, error) {
	const verb = "destroy srq"
	if err := srq.lock(verb); err != nil {
		return EventCounts{}, err
	}
	defer srq.pd.ctx.mu.Unlock()
	ev, err := srq.destroyEventsLocked()
	if err != nil {
		return EventCounts{}, verbError(verb, err)
	}
	srq.pd.ctx.untrack(srq)
	return ev, nil
}

func (srq *SRQ) destroyRank() int { return rankSRQ }

func (srq *SRQ) destroyLocked() error {
	_, err := srq.destroyEventsLocked()
	return err
}

func (srq *SRQ) destroyEventsLocked() (EventCounts, error) {
	if srq.provider {
		// As the kernel: not while a QP uses it
		// (linux:drivers/infiniband/core/verbs.c ib_destroy_srq_user).
		for _, qp := range srq.pd.ctx.qps {
			if qp.init.SRQ == srq && !qp.destroyed {
				return EventCounts{}, errBusy("a QP uses the SRQ")
			}
		}
		srq.destroyed = true
		if c := srq.pd.ctx; c.srqs[srq.userHandle] == srq {
			delete(c.srqs, srq.userHandle)
		}
		return EventCounts{}, nil // the data path counts its limit events
	}
	var resp uapi.IbUverbsDestroySrqResp
	req := uapi.IbUverbsDestroySrq{SrqHandle: srq.handle}
	err := srq.pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, srq.handle, uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, bytesOf(&resp),
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DESTROY_SRQ, in: bytesOf(&req), out: bytesOf(&resp)})
	if err != nil {
		return EventCounts{}, err
	}
	srq.destroyed = true
	if c := srq.pd.ctx; c.srqs[srq.userHandle] == srq {
		delete(c.srqs, srq.userHandle)
	}
	return EventCounts{Async: resp.EventsReported}, nil
}
