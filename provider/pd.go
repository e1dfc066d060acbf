package provider

import "usb4verbs/uapi"

// PD is a protection domain.
type PD struct {
	ctx       *Context
	handle    uint32
	destroyed bool
}

// AllocPD allocates a protection domain (ALLOC_PD write command).
func (c *Context) AllocPD() (*PD, error) {
	const verb = "alloc pd"
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	req := uapi.IbUverbsAllocPd{}
	var resp uapi.IbUverbsAllocPdResp
	if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_ALLOC_PD, in: bytesOf(&req), out: bytesOf(&resp)}); err != nil {
		return nil, verbError(verb, err)
	}
	pd := &PD{ctx: c, handle: resp.PdHandle}
	c.track(pd)
	return pd, nil
}

// Handle is the kernel's handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// lock locks the context and checks that neither it nor pd is gone.
func (pd *PD) lock(verb string) error {
	if pd == nil || pd.ctx == nil {
		return verbError(verb, errInvalid("nil pd"))
	}
	if err := pd.ctx.lock(verb); err != nil {
		return err
	}
	if pd.destroyed {
		pd.ctx.mu.Unlock()
		return verbError(verb, errClosed("pd"))
	}
	return nil
}

// Destroy deallocates the PD. The kernel refuses (EBUSY) while MRs, QPs,
// SRQs or AHs still use it.
func (pd *PD) Destroy() error {
	const verb = "dealloc pd"
	if err := pd.lock(verb); err != nil {
		return err
	}
	defer pd.ctx.mu.Unlock()
	if err := pd.destroyLocked(); err != nil {
		return verbError(verb, err)
	}
	pd.ctx.untrack(pd)
	return nil
}

func (pd *PD) destroyRank() int { return rankPD }

func (pd *PD) destroyLocked() error {
	req := uapi.IbUverbsDeallocPd{PdHandle: pd.handle}
	err := pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle, 0, nil,
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DEALLOC_PD, in: bytesOf(&req)})
	if err != nil {
		return err
	}
	pd.destroyed = true
	return nil
}
