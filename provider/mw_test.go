package provider

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// TestAllocMWOnFakeKernel: ALLOC_MW carries the PD handle and the type, the
// response's handle and rkey come back, and Destroy deallocates exactly that
// handle, once.
func TestAllocMWOnFakeKernel(t *testing.T) {
	k := newFakeKernel()
	var gotPD uint32
	var gotType uint8
	k.writeCmd[uapi.IB_USER_VERBS_CMD_ALLOC_MW] = func(in, out []byte) error {
		req := (*uapi.IbUverbsAllocMw)(unsafe.Pointer(&in[0]))
		gotPD, gotType = req.PdHandle, req.MwType
		r := (*uapi.IbUverbsAllocMwResp)(unsafe.Pointer(&out[0]))
		r.MwHandle, r.Rkey = 77, 0x1234ab
		return nil
	}
	var freed []uint32
	k.methods[methodKey(uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY)] = func(c *fakeCall, _ func(uint16) []byte, _ func(uint16, uint64)) error {
		freed = append(freed, uint32(c.attr(uapi.UVERBS_ATTR_DESTROY_MW_HANDLE).Data))
		return nil
	}
	c := openFake(t, k, rxe)
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mw, err := pd.AllocMW(MWType2)
	if err != nil {
		t.Fatalf("AllocMW: %v", err)
	}
	if gotPD != pd.Handle() || gotType != MWType2 {
		t.Errorf("ALLOC_MW got pd %d type %d, want pd %d type 2", gotPD, gotType, pd.Handle())
	}
	if mw.Handle() != 77 || mw.RKey() != 0x1234ab || mw.Type() != MWType2 || mw.PD() != pd {
		t.Errorf("MW = %v, want handle 77 rkey 0x1234ab type 2 on its PD", mw)
	}
	if err := mw.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if len(freed) != 1 || freed[0] != 77 {
		t.Errorf("MW_DESTROY handles %v, want [77]", freed)
	}
	if err := mw.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Destroy = %v, want ErrClosed", err)
	}
}

// TestAllocMWRefusals: a type that is neither 1 nor 2 is EINVAL before any
// command; a kernel without windows (the usb4 module) answers EOPNOTSUPP,
// which is ErrNotSupported; a window left allocated is released when the
// context closes, before its PD.
func TestAllocMWRefusals(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.AllocMW(3); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AllocMW(3) = %v, want EINVAL", err)
	}
	if _, err := pd.AllocMW(MWType1); !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("AllocMW on a kernel without ALLOC_MW = %v, want ErrNotSupported (EOPNOTSUPP)", err)
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_ALLOC_MW] = func(in, out []byte) error {
		(*uapi.IbUverbsAllocMwResp)(unsafe.Pointer(&out[0])).MwHandle = 5
		return nil
	}
	var order []string
	k.methods[methodKey(uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		order = append(order, "mw")
		return nil
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		order = append(order, "pd")
		return nil
	}
	if _, err := pd.AllocMW(MWType1); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "mw" || order[1] != "pd" {
		t.Errorf("teardown order %v, want [mw pd]", order)
	}
}
