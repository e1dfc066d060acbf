package provider

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// TestRegDmabufMRGoesToTheKernel: every argument of a dma-buf registration
// reaches UVERBS_METHOD_REG_DMABUF_MR as given, length 0 and fd -1 included,
// so NCCL's probe (ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)) gets the kernel's
// answer: EOPNOTSUPP from the uverbs core for a module without
// reg_user_mr_dmabuf (hellas-main, rxe), the op's own errno where it has one.
// Saw it fail before: length 0 was refused with EINVAL in user space, which
// NCCL reads as "dma-buf supported" on a kernel that has no dma-buf MRs.
func TestRegDmabufMRGoesToTheKernel(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, Driver{})
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	key := methodKey(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_REG_DMABUF_MR)
	var got *fakeCall
	answer := unix.EOPNOTSUPP // the uverbs core, driver without the op
	k.methods[key] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		got = call
		if answer != 0 {
			return answer
		}
		binary.LittleEndian.PutUint32(out(uapi.UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY), 0x1234)
		binary.LittleEndian.PutUint32(out(uapi.UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY), 0x5678)
		set(uapi.UVERBS_ATTR_REG_DMABUF_MR_HANDLE, 9)
		return nil
	}
	u64 := func(id uint16) uint64 {
		a := got.attr(id)
		if a == nil || len(a.in) != 8 {
			t.Fatalf("attribute %d missing or not 8 bytes: %+v", id, a)
		}
		return binary.LittleEndian.Uint64(a.in)
	}
	u32 := func(id uint16) uint32 {
		a := got.attr(id)
		if a == nil || len(a.in) != 4 {
			t.Fatalf("attribute %d missing or not 4 bytes: %+v", id, a)
		}
		return binary.LittleEndian.Uint32(a.in)
	}

	// NCCL's probe on a kernel without the op.
	_, err = pd.RegDmabufMR(0, 0, 0, -1, 0)
	if !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(err, ErrNotSupported) {
		t.Fatalf("probe on a driver without the op: %v, want EOPNOTSUPP", err)
	}
	if k.callsTo(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_REG_DMABUF_MR) != 1 || got == nil {
		t.Fatal("the probe did not reach the kernel")
	}
	if u64(uapi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH) != 0 || int32(u32(uapi.UVERBS_ATTR_REG_DMABUF_MR_FD)) != -1 {
		t.Errorf("probe sent length %d fd %d", u64(uapi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH),
			int32(u32(uapi.UVERBS_ATTR_REG_DMABUF_MR_FD)))
	}

	// A module with the op refuses length 0 with EINVAL: NCCL's "supported".
	answer = unix.EINVAL
	if _, err = pd.RegDmabufMR(0, 0, 0, -1, 0); !errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNotSupported) {
		t.Errorf("probe on a driver with the op: %v, want EINVAL", err)
	}
	answer = unix.EBADF
	if _, err = pd.RegDmabufMR(0, 4096, 0, 1000, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("bad fd: %v, want EBADF", err)
	}

	// A registration: the attributes as the kernel reads them, the MR as returned.
	answer = 0
	acc := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_READ)
	mr, err := pd.RegDmabufMR(8192, 65536, 0x10000+8192, 7, acc)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.attr(uapi.UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE); a == nil || uint32(a.Data) != pd.Handle() {
		t.Errorf("PD handle attribute %+v, want %d", a, pd.Handle())
	}
	if o, l, i, f, ac := u64(uapi.UVERBS_ATTR_REG_DMABUF_MR_OFFSET), u64(uapi.UVERBS_ATTR_REG_DMABUF_MR_LENGTH),
		u64(uapi.UVERBS_ATTR_REG_DMABUF_MR_IOVA), u32(uapi.UVERBS_ATTR_REG_DMABUF_MR_FD),
		u32(uapi.UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS); o != 8192 || l != 65536 || i != 0x12000 || f != 7 || ac != acc {
		t.Errorf("sent offset %d length %d iova %#x fd %d access %#x", o, l, i, f, ac)
	}
	if mr.Handle() != 9 || mr.LKey() != 0x1234 || mr.RKey() != 0x5678 || mr.Length() != 65536 ||
		mr.IOVA() != 0x12000 || mr.DmabufFD() != 7 || mr.Addr() != 0 || mr.Access() != acc {
		t.Errorf("MR %v: iova %#x fd %d addr %#x access %#x", mr, mr.IOVA(), mr.DmabufFD(), mr.Addr(), mr.Access())
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_DEREG_MR] = func(in, out []byte) error { return nil }
	k.methods[methodKey(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		return nil
	}
	if err := mr.Destroy(); err != nil {
		t.Errorf("dereg: %v", err)
	}
}
