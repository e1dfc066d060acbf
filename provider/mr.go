package provider

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// MR is a registered memory region.
type MR struct {
	pd        *PD
	handle    uint32
	lkey      uint32
	rkey      uint32
	addr      uintptr
	length    uint64
	iova      uint64
	access    uint32
	dmabufFD  int
	destroyed bool
	// deregistering: a DEREG_MR is in the kernel without the context lock;
	// a second Destroy meanwhile gets EBUSY instead of a second DEREG_MR.
	deregistering bool
}

// RegMR registers length bytes at addr for device access at iova with the
// given IB_UVERBS_ACCESS_* flags (REG_MR write command). The memory must stay
// mapped until the MR is destroyed; Go heap memory is not suitable.
func (pd *PD) RegMR(addr uintptr, length, iova uint64, access uint32) (*MR, error) {
	const verb = "reg mr"
	if length == 0 {
		// ib_umem_get would reject it too; say so before pinning anything.
		return nil, verbError(verb, errInvalid("length 0"))
	}
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	req := uapi.IbUverbsRegMr{Start: uint64(addr), Length: length, HcaVa: iova, PdHandle: pd.handle, AccessFlags: access}
	var resp uapi.IbUverbsRegMrResp
	// A PD destroyed meanwhile is the kernel's to arbitrate: it refuses the
	// dealloc while the MR holds the PD (EBUSY), or the REG_MR on a gone PD.
	err := pd.ctx.outsideLock(func() error {
		return pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_REG_MR, in: bytesOf(&req), out: bytesOf(&resp)})
	})
	if err != nil {
		return nil, verbError(verb, regMRHint(err))
	}
	mr := &MR{pd: pd, handle: resp.MrHandle, lkey: resp.Lkey, rkey: resp.Rkey, addr: addr,
		length: length, iova: iova, access: access, dmabufFD: -1}
	pd.ctx.track(mr)
	return mr, nil
}

// RegDmabufMR registers length bytes at offset of the dma-buf fd at iova
// (UVERBS_METHOD_REG_DMABUF_MR). Kernels or drivers without dma-buf support
// yield an error matching ErrNotSupported (and the kernel's errno).
//
// Every argument goes to the kernel as given, length 0 and fd -1 included:
// the uverbs core answers EOPNOTSUPP for a driver without
// reg_user_mr_dmabuf before it looks at them, and NCCL's probe
// (offset, length, iova 0, fd -1) decides on that errno, so a check here
// would answer "supported" (EINVAL) where the kernel says it is not.
//
// The one exception is NCCL's probe itself (length 0, which never
// registers): where the kernel's answer would read as "supported" but this
// provider has established that no dma-buf can be imported on the device
// (dmabufImport, docs/dmabuf.md), the probe answers EOPNOTSUPP.
func (pd *PD) RegDmabufMR(offset, length, iova uint64, fd int, access uint32) (*MR, error) {
	mr, err := pd.regDmabufMR(offset, length, iova, fd, access)
	if err != nil && length == 0 && !errors.Is(err, ErrNotSupported) {
		if imp := pd.ctx.DmabufImport(); imp.State == DmabufImportRefused {
			return nil, verbError("reg dmabuf mr", errNotSupported("the device cannot import a dma-buf: "+imp.Why, unix.EOPNOTSUPP))
		}
	}
	return mr, err
}

// regDmabufMR is RegDmabufMR's kernel call.
func (pd *PD) regDmabufMR(offset, length, iova uint64, fd int, access uint32) (*MR, error) {
	const verb = "reg dmabuf mr"
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	var lkey, rkey uint32
	c := newIoctl(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_REG_DMABUF_MR).
		newObj(uapi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE).
		idr(uapi.UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd.handle).
		inU64(uapi.UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset).
		inU64(uapi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length).
		inU64(uapi.UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova).
		inU32(uapi.UVERBS_ATTR_REG_DMABUF_MR_FD, uint32(int32(fd))). // UVERBS_ATTR_RAW_FD: an s32
		inU32(uapi.UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access).
		out(uapi.UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, bytesOf(&lkey)).
		out(uapi.UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, bytesOf(&rkey))
	err := pd.ctx.outsideLock(func() error { return pd.ctx.cmd.ioctl(c) })
	if err != nil {
		var u unsupportedIoctl
		if errors.As(err, &u) {
			return nil, verbError(verb, errNotSupported("no dma-buf MR method in this kernel", u.no))
		}
		return nil, verbError(verb, regMRHint(err))
	}
	h, _ := c.result(uapi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
	mr := &MR{pd: pd, handle: uint32(h), lkey: lkey, rkey: rkey, length: length, iova: iova, access: access, dmabufFD: fd}
	pd.ctx.track(mr)
	return mr, nil
}

// Handle is the kernel's handle of the MR.
func (mr *MR) Handle() uint32 { return mr.handle }

// LKey is the local key used in scatter/gather entries.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey is the remote key peers use for RDMA READ/WRITE.
func (mr *MR) RKey() uint32 { return mr.rkey }

// Addr is the registered virtual address (0 for dma-buf MRs).
func (mr *MR) Addr() uintptr { return mr.addr }

// Length is the registered length in bytes.
func (mr *MR) Length() uint64 { return mr.length }

// IOVA is the device-visible address of the first byte.
func (mr *MR) IOVA() uint64 { return mr.iova }

// Access returns the IB_UVERBS_ACCESS_* flags of the registration.
func (mr *MR) Access() uint32 { return mr.access }

// DmabufFD is the dma-buf fd of a dma-buf MR, else -1.
func (mr *MR) DmabufFD() int { return mr.dmabufFD }

// PD returns the protection domain of the MR.
func (mr *MR) PD() *PD { return mr.pd }

// Destroy deregisters the MR.
func (mr *MR) Destroy() error {
	const verb = "dereg mr"
	if mr == nil || mr.pd == nil {
		return verbError(verb, errInvalid("nil mr"))
	}
	c := mr.pd.ctx
	if err := c.lock(verb); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if mr.destroyed {
		return verbError(verb, errClosed("mr"))
	}
	if mr.deregistering {
		return verbError(verb, fmt.Errorf("%v is being deregistered by another thread: %w", mr, errno{unix.EBUSY}))
	}
	mr.deregistering = true
	err := c.outsideLock(mr.deregKernel)
	mr.deregistering = false
	if err != nil {
		return verbError(verb, err)
	}
	mr.destroyed = true
	c.untrack(mr)
	return nil
}

func (mr *MR) destroyRank() int { return rankMR }

func (mr *MR) destroyLocked() error {
	if err := mr.deregKernel(); err != nil {
		return err
	}
	mr.destroyed = true
	return nil
}

// deregKernel issues DEREG_MR; it touches no state the context lock guards.
func (mr *MR) deregKernel() error {
	req := uapi.IbUverbsDeregMr{MrHandle: mr.handle}
	return mr.pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_MR_HANDLE, mr.handle, 0, nil,
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DEREG_MR, in: bytesOf(&req)})
}

func (mr *MR) String() string {
	return fmt.Sprintf("MR{handle %d lkey %#x rkey %#x len %d}", mr.handle, mr.lkey, mr.rkey, mr.length)
}
