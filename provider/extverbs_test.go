package provider

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// CQ.Resize: RESIZE_CQ with the CQ's handle and the asked size, the
// kernel's grant kept, rxe's new ring reported by RxeQueue, the kernel's
// errno passed through, and no command for a size the kernel could not take.
func TestCQResize(t *testing.T) {
	k := newFakeKernel()
	ring := uapi.Mminfo{Offset: 0x1234000, Size: 8192}
	var asked uapi.IbUverbsResizeCq
	fail := unix.Errno(0)
	k.writeCmd[uapi.IB_USER_VERBS_CMD_RESIZE_CQ] = func(in, out []byte) error {
		asked = *(*uapi.IbUverbsResizeCq)(unsafe.Pointer(&in[0]))
		if fail != 0 {
			return fail
		}
		(*uapi.IbUverbsResizeCqResp)(unsafe.Pointer(&out[0])).Cqe = 127
		return nil
	}
	// rxe_resize_cq writes the new ring's mmap info into the driver response.
	invoke := k.methods[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE)]
	k.methods[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE)] = func(c *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		err := invoke(c, out, set)
		if err == nil && c.writeCmd == uapi.IB_USER_VERBS_CMD_RESIZE_CQ {
			b := out(uapi.UVERBS_ATTR_UHW_OUT)
			if len(b) < uapi.SizeofRxeResizeCqResp {
				t.Errorf("driver response of %d bytes, rxe writes %d", len(b), uapi.SizeofRxeResizeCqResp)
			} else {
				*(*uapi.Mminfo)(unsafe.Pointer(&b[0])) = ring
			}
		}
		return err
	}
	c := openFake(t, k, rxe)
	defer c.Close()
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := cq.RxeQueue()
	got, err := cq.Resize(100)
	if err != nil || got != 127 || cq.CQE() != 127 {
		t.Fatalf("resize: %d %v, CQE %d", got, err, cq.CQE())
	}
	if asked.CqHandle != cq.Handle() || asked.Cqe != 100 {
		t.Fatalf("command asked %+v for handle %d", asked, cq.Handle())
	}
	if mi, ok := cq.RxeQueue(); !ok || mi != ring || mi == before {
		t.Fatalf("ring after the resize %+v %v, want %+v", mi, ok, ring)
	}

	fail = unix.EINVAL // rxe: fewer entries than are outstanding
	if _, err := cq.Resize(2); !errors.Is(err, unix.EINVAL) || cq.CQE() != 127 {
		t.Fatalf("resize below the outstanding count: %v, CQE %d", err, cq.CQE())
	}
	n := len(k.calls)
	for _, bad := range []int{0, -1, 1 << 31} {
		if _, err := cq.Resize(bad); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("resize %d: %v", bad, err)
		}
	}
	if len(k.calls) != n {
		t.Fatal("a size the kernel cannot take reached it")
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Resize(8); err == nil {
		t.Fatal("resize of a destroyed CQ succeeded")
	}
}

// A device without resize_cq (every usb4 module tree): the uverbs core's
// EOPNOTSUPP, as the fake answers a command it has no handler for.
func TestCQResizeUnsupported(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, usb4Drv)
	defer c.Close()
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Resize(64); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("resize on usb4: %v", err)
	}
}

// CreateSRQEx: basic is CreateSRQ's SRQ; XRC and TM are refused, EINVAL for
// what libibverbs checks first, else EOPNOTSUPP, without a kernel command.
func TestCreateSRQEx(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQEx(SRQInitAttrEx{SRQInitAttr: SRQInitAttr{MaxWR: 8, MaxSGE: 1}, CQ: cq})
	if err != nil || k.callsTo(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE) != 1 {
		t.Fatalf("basic: %v, %d SRQ_CREATE", err, k.callsTo(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE))
	}
	_ = srq.Destroy()
	for _, tc := range []struct {
		a    SRQInitAttrEx
		want unix.Errno
	}{
		{SRQInitAttrEx{Type: SRQTypeXRC}, unix.EINVAL},
		{SRQInitAttrEx{Type: SRQTypeXRC, CQ: cq}, unix.EOPNOTSUPP},
		{SRQInitAttrEx{Type: SRQTypeTM, CQ: cq}, unix.EINVAL},
		{SRQInitAttrEx{Type: SRQTypeTM, CQ: cq, MaxNumTags: 16}, unix.EOPNOTSUPP},
		{SRQInitAttrEx{Type: 7}, unix.EINVAL},
	} {
		if _, err := pd.CreateSRQEx(tc.a); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.a, err, tc.want)
		}
	}
	if n := k.callsTo(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE); n != 1 {
		t.Fatalf("%d SRQ_CREATE after the refusals, want 1", n)
	}
}
