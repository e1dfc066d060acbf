package rdmanl

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

func TestDevices(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	devs, err := h.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 3, Name: "rxe0", NodeGUID: 0x505400fffe123456, SysImageGUID: 0x505400fffe123456, NodeType: 1, NumPorts: 1, Protocol: "roce", DriverID: 11},
		{Index: 5, Name: "usb4_rdma0", NodeGUID: 0x0200544200000001, SysImageGUID: 0x0200544200000001, NodeType: 1, NumPorts: 2, Protocol: "ib"},
	}
	if len(devs) != len(want) {
		t.Fatalf("got %d devices: %+v", len(devs), devs)
	}
	for i := range want {
		if devs[i] != want[i] {
			t.Errorf("device %d:\n got %+v\nwant %+v", i, devs[i], want[i])
		}
	}
	dump := c.sent[0]
	if dump.Header.Type != 0x1401 || dump.Header.Flags != unix.NLM_F_REQUEST|unix.NLM_F_DUMP || len(dump.Data) != 0 {
		t.Errorf("dump request header %+v, %d payload bytes", dump.Header, len(dump.Data))
	}
	// One chardev query per device, each with its own sequence number.
	if len(c.sent) != 3 || c.sent[1].Header.Seq == c.sent[0].Header.Seq {
		t.Fatalf("requests: %+v", c.sent)
	}
}

// ListDevices is the dump alone: one request however many devices there
// are, names and GUIDs as Devices has them, DriverID 0.
func TestListDevicesIsOneDump(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	devs, err := h.ListDevices()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 1 || c.sent[0].Header.Flags != unix.NLM_F_REQUEST|unix.NLM_F_DUMP {
		t.Fatalf("requests: %+v", c.sent)
	}
	if len(devs) != 2 || devs[0].Name != "rxe0" || devs[0].NodeGUID != 0x505400fffe123456 || devs[0].DriverID != 0 ||
		devs[1].Name != "usb4_rdma0" || devs[1].NodeGUID != 0x0200544200000001 {
		t.Fatalf("devices %+v", devs)
	}
}

func TestChardevRequest(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	cd, err := h.UverbsChardev(3)
	if err != nil {
		t.Fatal(err)
	}
	if cd.Path != "/dev/infiniband/uverbs0" || cd.DriverID != 11 || cd.ABIVersion != 2 || cd.Dev != unix.Mkdev(231, 195) {
		t.Errorf("chardev %+v", cd)
	}
	req := c.sent[0]
	if req.Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_GET_CHARDEV) || req.Header.Flags != unix.NLM_F_REQUEST|unix.NLM_F_ACK {
		t.Errorf("header %+v", req.Header)
	}
	attrs := attrsOf(t, req)
	if idx, _ := u32At(t, attrs, uapi.RDMA_NLDEV_ATTR_DEV_INDEX); idx != 3 || string(attrs[uapi.RDMA_NLDEV_ATTR_CHARDEV_TYPE]) != "uverbs\x00" || len(attrs) != 2 {
		t.Errorf("attributes %x", attrs)
	}
}

func TestNotFound(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENODEV) {
			t.Errorf("%s: %v, want ErrNotFound and ENODEV", what, err)
		}
	}
	_, err := h.DeviceByName("nosuch")
	check("DeviceByName", err)
	if err != nil && !strings.Contains(err.Error(), "dev show nosuch") {
		t.Errorf("error does not name the operation: %v", err)
	}
	_, err = h.DeviceByIndex(99)
	check("DeviceByIndex", err)
	_, err = h.Ports(99)
	check("Ports", err)
	_, err = h.UverbsChardev(99) // kernel: EINVAL
	check("UverbsChardev unknown index", err)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("the kernel's errno is lost: %v", err)
	}
	_, err = h.UverbsChardev(5) // device without uverbs: EOPNOTSUPP
	check("UverbsChardev without uverbs", err)
	n := len(c.sent)
	check("DeleteLink", h.DeleteLink("nosuch"))
	for _, m := range c.sent[n:] {
		if m.Header.Type == nldevType(uapi.RDMA_NLDEV_CMD_DELLINK) {
			t.Errorf("DELLINK sent for a missing device")
		}
	}
}

func TestDeviceLookups(t *testing.T) {
	h, _ := newFake(t, fakeKernel(t, testDevs))
	d, err := h.DeviceByName("usb4_rdma0")
	if err != nil || d.Index != 5 || d.DriverID != 0 {
		t.Errorf("by name: %+v %v", d, err)
	}
	d, err = h.DeviceByIndex(3)
	if err != nil || d.Name != "rxe0" || d.DriverID != 11 {
		t.Errorf("by index: %+v %v", d, err)
	}
}

func TestPorts(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	ports, err := h.Ports(3)
	if err != nil {
		t.Fatal(err)
	}
	want := Port{DeviceIndex: 3, DeviceName: "rxe0", Port: 1, State: 4, PhysState: 5, LinkLayer: "Ethernet", NetdevIndex: 7, NetdevName: "vethA"}
	if len(ports) != 1 || ports[0] != want {
		t.Fatalf("got %+v\nwant %+v", ports, want)
	}
	last := c.sent[len(c.sent)-1]
	if last.Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_PORT_GET) || last.Header.Flags&unix.NLM_F_DUMP == 0 {
		t.Errorf("port request %+v", last.Header)
	}
	if idx, ok := u32At(t, attrsOf(t, last), uapi.RDMA_NLDEV_ATTR_DEV_INDEX); !ok || idx != 3 {
		t.Errorf("port request index %d %v", idx, ok)
	}
	ports, err = h.Ports(5)
	if err != nil || len(ports) != 2 || ports[1].Port != 2 || ports[0].LinkLayer != "InfiniBand" {
		t.Fatalf("ib ports %+v %v", ports, err)
	}
}

func TestPortOfWrongDevice(t *testing.T) {
	inner := fakeKernel(t, testDevs)
	h, _ := newFake(t, func(req message) [][]byte {
		if req.Header.Type == nldevType(uapi.RDMA_NLDEV_CMD_PORT_GET) {
			seq := req.Header.Seq
			return [][]byte{nlmsg(req.Header.Type, unix.NLM_F_MULTI, seq, portPayload(testDevs[1], 1)), doneMsg(seq, 0)}
		}
		return inner(req)
	})
	if _, err := h.Ports(3); !errors.Is(err, unix.EBADMSG) {
		t.Fatalf("err %v, want EBADMSG", err)
	}
}

func TestDumpInterrupted(t *testing.T) {
	h, _ := newFake(t, func(req message) [][]byte {
		seq := req.Header.Seq
		if req.Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_GET) {
			return [][]byte{errMsg(req, unix.EOPNOTSUPP, "")}
		}
		return [][]byte{
			nlmsg(req.Header.Type, unix.NLM_F_MULTI, seq, devPayload(testDevs[0])),
			nlmsg(req.Header.Type, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, seq, devPayload(testDevs[1])),
			doneMsg(seq, unix.NLM_F_DUMP_INTR),
		}
	})
	devs, err := h.Devices()
	if !errors.Is(err, ErrDumpInterrupted) || !errors.Is(err, unix.EINTR) {
		t.Fatalf("err %v, want ErrDumpInterrupted", err)
	}
	if len(devs) != 2 || devs[1].Name != "usb4_rdma0" {
		t.Fatalf("partial results lost: %+v", devs)
	}
	// A lookup that finds its device in an interrupted dump succeeds.
	if d, err := h.DeviceByName("rxe0"); err != nil || d.Index != 3 {
		t.Fatalf("by name: %+v %v", d, err)
	}
	// One it does not find reports the interruption, not "not found".
	if _, err := h.DeviceByName("nosuch"); !errors.Is(err, ErrDumpInterrupted) || errors.Is(err, ErrNotFound) {
		t.Fatalf("by name, missing: %v", err)
	}
}

func TestDumpError(t *testing.T) {
	// nldev reports a failing dump in NLMSG_DONE's payload.
	h, _ := newFake(t, func(req message) [][]byte {
		p := []byte{0xff, 0xff, 0xff, 0xff} // -EPERM
		return [][]byte{nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, req.Header.Seq, p)}
	})
	if _, err := h.Devices(); !errors.Is(err, unix.EPERM) {
		t.Fatalf("err %v, want EPERM", err)
	}
}

func TestAddRxeLink(t *testing.T) {
	var got map[uint16][]byte
	h, c := newFake(t, func(req message) [][]byte {
		got = attrsOf(t, req)
		if string(got[uapi.RDMA_NLDEV_ATTR_NDEV_NAME]) == "nosuch\x00" {
			return [][]byte{errMsg(req, unix.ENODEV, "netdev not found")}
		}
		return [][]byte{errMsg(req, 0, "")}
	})
	if err := h.AddRxeLink("rxe9", "vethC"); err != nil {
		t.Fatal(err)
	}
	req := c.sent[0]
	if req.Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_NEWLINK) || req.Header.Flags != unix.NLM_F_REQUEST|unix.NLM_F_ACK {
		t.Errorf("header %+v", req.Header)
	}
	if string(got[uapi.RDMA_NLDEV_ATTR_DEV_NAME]) != "rxe9\x00" || string(got[uapi.RDMA_NLDEV_ATTR_LINK_TYPE]) != "rxe\x00" ||
		string(got[uapi.RDMA_NLDEV_ATTR_NDEV_NAME]) != "vethC\x00" || len(got) != 3 {
		t.Errorf("attributes %x", got)
	}
	err := h.AddRxeLink("rxe9", "nosuch")
	var op *OpError
	if !errors.Is(err, unix.ENODEV) || !errors.As(err, &op) || op.Message != "netdev not found" {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "link add rxe9 type rxe netdev nosuch") || !strings.Contains(err.Error(), "netdev not found") {
		t.Errorf("error text %q lacks the operation or the kernel's message", err)
	}
}

func TestLinkNameValidation(t *testing.T) {
	h, c := newFake(t, func(req message) [][]byte { return [][]byte{errMsg(req, 0, "")} })
	for _, tc := range [][2]string{
		{"", "vethA"}, {"rxe%d", "vethA"}, {"a/b", "vethA"}, {"x\x00y", "vethA"}, {strings.Repeat("r", 64), "vethA"},
		{"rxe9", ""}, {"rxe9", "0123456789abcdef"}, {"rxe9", "a/b"}, {"rxe9", ".."},
	} {
		if err := h.AddRxeLink(tc[0], tc[1]); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AddRxeLink(%q, %q): %v, want EINVAL", tc[0], tc[1], err)
		}
	}
	if err := h.DeleteLink(""); !errors.Is(err, unix.EINVAL) {
		t.Errorf("DeleteLink(\"\"): %v", err)
	}
	if len(c.sent) != 0 {
		t.Errorf("invalid names reached the kernel: %d requests", len(c.sent))
	}
	if err := h.AddRxeLink(strings.Repeat("r", 63), "0123456789abcde"); err != nil {
		t.Errorf("longest valid names: %v", err)
	}
}

func TestDeleteLink(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	if err := h.DeleteLink("usb4_rdma0"); err != nil {
		t.Fatal(err)
	}
	last := c.sent[len(c.sent)-1]
	if last.Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_DELLINK) {
		t.Fatalf("last request %+v", last.Header)
	}
	if idx, _ := u32At(t, attrsOf(t, last), uapi.RDMA_NLDEV_ATTR_DEV_INDEX); idx != 5 {
		t.Errorf("deleted index %d, want 5", idx)
	}
}

func TestNetnsMode(t *testing.T) {
	for mode, wantExclusive := range map[uint8]bool{0: true, 1: false} {
		h, c := newFake(t, func(req message) [][]byte {
			var e attrEncoder
			e.Uint8(uapi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE, mode)
			e.Uint8(uapi.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1)
			return [][]byte{nlmsg(req.Header.Type, 0, req.Header.Seq, e.Bytes()), errMsg(req, 0, "")}
		})
		ex, err := h.NetnsMode()
		if err != nil || ex != wantExclusive {
			t.Errorf("mode %d: exclusive %v err %v", mode, ex, err)
		}
		if c.sent[0].Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_SYS_GET) {
			t.Errorf("request type %#x", c.sent[0].Header.Type)
		}
	}
	h, _ := newFake(t, func(req message) [][]byte {
		return [][]byte{nlmsg(req.Header.Type, 0, req.Header.Seq, nil), errMsg(req, 0, "")}
	})
	if _, err := h.NetnsMode(); !errors.Is(err, unix.EBADMSG) {
		t.Errorf("reply without mode: %v", err)
	}
}

func TestStaleAndForeignReplies(t *testing.T) {
	h, _ := newFake(t, func(req message) [][]byte {
		var e attrEncoder
		e.Uint8(uapi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 0)
		return [][]byte{
			// A late reply to an abandoned request is skipped ...
			nlmsg(req.Header.Type, 0, req.Header.Seq-1, []byte("junk")),
			nlmsg(req.Header.Type, 0, req.Header.Seq, e.Bytes()),
			errMsg(req, 0, ""),
		}
	})
	if ex, err := h.NetnsMode(); err != nil || !ex {
		t.Fatalf("exclusive %v err %v", ex, err)
	}
	// ... but a reply of the wrong type for our sequence is an error.
	h, _ = newFake(t, func(req message) [][]byte {
		return [][]byte{nlmsg(nldevType(uapi.RDMA_NLDEV_CMD_GET), 0, req.Header.Seq, nil)}
	})
	if _, err := h.NetnsMode(); !errors.Is(err, unix.EBADMSG) {
		t.Fatalf("wrong reply type: %v", err)
	}
}

func TestMissingReplyTimesOut(t *testing.T) {
	h, _ := newFake(t, func(message) [][]byte { return nil })
	if _, err := h.NetnsMode(); !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("err %v", err)
	}
	// A dump cut short (no NLMSG_DONE) must not be reported as complete.
	h, _ = newFake(t, func(req message) [][]byte {
		return [][]byte{nlmsg(req.Header.Type, unix.NLM_F_MULTI, req.Header.Seq, devPayload(testDevs[0]))}
	})
	if _, err := h.devices(); !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("dump without DONE: %v", err)
	}
}

func TestClosedHandle(t *testing.T) {
	h, c := newFake(t, fakeKernel(t, testDevs))
	if err := h.Close(); err != nil || !c.closed {
		t.Fatalf("close: %v", err)
	}
	if err := h.Close(); !errors.Is(err, unix.EBADF) {
		t.Errorf("second close: %v", err)
	}
	if _, err := h.Devices(); !errors.Is(err, unix.EBADF) {
		t.Errorf("Devices after close: %v", err)
	}
}

func TestMalformedDeviceInDump(t *testing.T) {
	h, _ := newFake(t, func(req message) [][]byte {
		seq := req.Header.Seq
		bad := devPayload(testDevs[0])
		bad = bad[:len(bad)-5] // cut the padding and the end of "roce\x00"
		return [][]byte{nlmsg(req.Header.Type, unix.NLM_F_MULTI, seq, bad), doneMsg(seq, 0)}
	})
	if devs, err := h.Devices(); !errors.Is(err, unix.EBADMSG) || devs != nil {
		t.Fatalf("devs %+v err %v", devs, err)
	}
}
