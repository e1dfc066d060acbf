package provider

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// TestMcastAttachDetach (issue 31 item 13): AttachMcast and DetachMcast send
// the kernel's ATTACH_MCAST/DETACH_MCAST write commands (struct
// ib_uverbs_attach_mcast: MGID, the QP's handle, MLID) through INVOKE_WRITE,
// and through write() on a kernel without it; a kernel that refuses
// (a device without attach_mcast, as every usb4 module tree) gives its errno.
func TestMcastAttachDetach(t *testing.T) {
	k := newFakeKernel()
	qp := fakeQP(t, k, QPTypeUD, QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	mgid := GID{0: 0xff, 1: 0x0e, 10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 3}
	type req struct {
		cmd uint32
		r   uapi.IbUverbsAttachMcast
		n   int
	}
	var got []req
	for _, cmd := range []uint32{uapi.IB_USER_VERBS_CMD_ATTACH_MCAST, uapi.IB_USER_VERBS_CMD_DETACH_MCAST} {
		cmd := cmd
		k.writeCmd[cmd] = func(in, out []byte) error {
			g := req{cmd: cmd, n: len(in)}
			copy(bytesOf(&g.r), in)
			if out != nil {
				t.Errorf("command %d: a response buffer (%d bytes) for a command without one", cmd, len(out))
			}
			got = append(got, g)
			return nil
		}
	}
	check := func(what string, cmd uint32) {
		t.Helper()
		if len(got) != 1 {
			t.Fatalf("%s: %d commands reached the kernel, want 1", what, len(got))
		}
		g := got[0]
		got = nil
		want := uapi.IbUverbsAttachMcast{Gid: mgid, QpHandle: qp.Handle(), Mlid: 0xc001}
		if g.cmd != cmd || g.n != uapi.SizeofIbUverbsAttachMcast || g.r != want {
			t.Errorf("%s: command %d, %d bytes %+v; want %d, %d bytes %+v", what, g.cmd, g.n, g.r,
				cmd, uapi.SizeofIbUverbsAttachMcast, want)
		}
	}

	if err := qp.AttachMcast(mgid, 0xc001); err != nil {
		t.Fatalf("attach: %v", err)
	}
	check("attach", uapi.IB_USER_VERBS_CMD_ATTACH_MCAST)
	c := k.last()
	if c.hdr.MethodId != uapi.UVERBS_METHOD_INVOKE_WRITE || c.attr(uapi.UVERBS_ATTR_CORE_OUT) != nil {
		t.Errorf("attach not sent through INVOKE_WRITE without a response: %+v", c.hdr)
	}
	if err := qp.DetachMcast(mgid, 0xc001); err != nil {
		t.Fatalf("detach: %v", err)
	}
	check("detach", uapi.IB_USER_VERBS_CMD_DETACH_MCAST)

	// A kernel without INVOKE_WRITE: the same requests by write().
	k.noMethod[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE)] = true
	if err := qp.AttachMcast(mgid, 0xc001); err != nil {
		t.Fatalf("attach by write(): %v", err)
	}
	check("attach by write()", uapi.IB_USER_VERBS_CMD_ATTACH_MCAST)
	if c := k.last(); c.write == nil || len(c.write) != uapi.SizeofIbUverbsCmdHdr+uapi.SizeofIbUverbsAttachMcast {
		t.Errorf("attach by write(): %d bytes written", len(c.write))
	}
	if err := qp.DetachMcast(mgid, 0xc001); err != nil {
		t.Fatalf("detach by write(): %v", err)
	}
	check("detach by write()", uapi.IB_USER_VERBS_CMD_DETACH_MCAST)
	delete(k.noMethod, methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE))

	// A device without multicast: the kernel's errno, unchanged.
	delete(k.writeCmd, uapi.IB_USER_VERBS_CMD_ATTACH_MCAST) // the fake answers EOPNOTSUPP
	err := qp.AttachMcast(mgid, 0xc001)
	if !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(err, ErrNotSupported) {
		t.Errorf("attach on a device without multicast: %v, want EOPNOTSUPP", err)
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_DETACH_MCAST] = func(in, out []byte) error { return unix.EINVAL }
	if err := qp.DetachMcast(mgid, 0xc001); !errors.Is(err, unix.EINVAL) {
		t.Errorf("detach of a group not joined: %v, want EINVAL", err)
	}

	// A destroyed QP never reaches the kernel.
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	before := len(k.calls)
	if err := qp.AttachMcast(mgid, 0xc001); err == nil || len(k.calls) != before {
		t.Errorf("attach on a destroyed QP: %v, %d commands", err, len(k.calls)-before)
	}
}
