package provider

import (
	"fmt"

	"usb4verbs/uapi"
)

// Memory window types (enum ib_uverbs_mw_type / ibv_mw_type).
const (
	MWType1 = 1 // bound with ibv_bind_mw (a BIND_MW work request), usable on any QP of the PD
	MWType2 = 2 // bound with a BIND_MW work request, usable only through the QP that bound it
)

// MW is a memory window: an rkey that a BIND_MW work request attaches to a
// range of an MR (registered with IB_UVERBS_ACCESS_MW_BIND), and that LOCAL_INV or a
// SEND_WITH_INV from the peer invalidates. The binding itself is a data-path
// operation (the engine's post_send); the window object is the kernel's.
type MW struct {
	pd        *PD
	handle    uint32
	rkey      uint32
	mwType    uint8
	destroyed bool
}

// AllocMW allocates a memory window of type MWType1 or MWType2 (ALLOC_MW
// write command). Whether the device has windows is the kernel's answer:
// rxe has both types; the usb4 module has none (an error matching
// ErrNotSupported, with the kernel's errno).
func (pd *PD) AllocMW(mwType uint8) (*MW, error) {
	const verb = "alloc mw"
	if mwType != MWType1 && mwType != MWType2 {
		return nil, verbError(verb, errInvalid("memory window type %d (want 1 or 2)", mwType))
	}
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	req := uapi.IbUverbsAllocMw{PdHandle: pd.handle, MwType: mwType}
	var resp uapi.IbUverbsAllocMwResp
	err := pd.ctx.outsideLock(func() error {
		return pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_ALLOC_MW, in: bytesOf(&req), out: bytesOf(&resp)})
	})
	if err != nil {
		return nil, verbError(verb, err)
	}
	mw := &MW{pd: pd, handle: resp.MwHandle, rkey: resp.Rkey, mwType: mwType}
	pd.ctx.track(mw)
	return mw, nil
}

// Handle is the kernel's handle of the window.
func (mw *MW) Handle() uint32 { return mw.handle }

// RKey is the rkey the kernel gave the window at allocation. A bind moves
// the key byte (the application's choice, ibv_inc_rkey in libibverbs); the
// kernel object keeps only the index, so this stays the allocation's key.
func (mw *MW) RKey() uint32 { return mw.rkey }

// Type is MWType1 or MWType2.
func (mw *MW) Type() uint8 { return mw.mwType }

// PD returns the protection domain of the window.
func (mw *MW) PD() *PD { return mw.pd }

// Destroy deallocates the window (DEALLOC_MW; the ioctl MW_DESTROY where
// the kernel has it). A window still bound is released by the kernel.
func (mw *MW) Destroy() error {
	const verb = "dealloc mw"
	if mw == nil || mw.pd == nil {
		return verbError(verb, errInvalid("nil mw"))
	}
	c := mw.pd.ctx
	if err := c.lock(verb); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if mw.destroyed {
		return verbError(verb, errClosed("mw"))
	}
	if err := mw.destroyLocked(); err != nil {
		return verbError(verb, err)
	}
	c.untrack(mw)
	return nil
}

func (mw *MW) destroyRank() int { return rankMW }

func (mw *MW) destroyLocked() error {
	req := uapi.IbUverbsDeallocMw{MwHandle: mw.handle}
	err := mw.pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_MW_HANDLE, mw.handle, 0, nil,
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DEALLOC_MW, in: bytesOf(&req)})
	if err != nil {
		return err
	}
	mw.destroyed = true
	return nil
}

func (mw *MW) String() string {
	return fmt.Sprintf("MW{handle %d rkey %#x type %d}", mw.handle, mw.rkey, mw.mwType)
}
