package provider

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

var rxe = Driver{Kind: DriverRXE, ID: uapi.RDMA_DRIVER_RXE}

func TestGetContextIoctlCarriesDriverID(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	if c.NumCompVectors() != 3 {
		t.Errorf("NumCompVectors = %d, want the 3 the kernel wrote", c.NumCompVectors())
	}
	if fd := c.AsyncFD(); k.openFDs[fd] != "async" {
		t.Errorf("AsyncFD = %d, not the fd the kernel returned (%v)", fd, k.openFDs)
	}
	gc := k.calls[0]
	h := gc.hdr
	if h.ObjectId != uapi.UVERBS_OBJECT_DEVICE || h.MethodId != uapi.UVERBS_METHOD_GET_CONTEXT ||
		h.DriverId != uapi.RDMA_DRIVER_RXE || h.NumAttrs != 2 || h.Length != 24+2*16 || h.Reserved1 != 0 || h.Reserved2 != 0 {
		t.Errorf("GET_CONTEXT header %+v", h)
	}
	a := gc.attr(uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS)
	if a == nil || a.Len != 4 || a.Flags&uapi.UVERBS_ATTR_F_MANDATORY != 0 || a.Data == 0 {
		t.Errorf("NUM_COMP_VECTORS attr %v: want optional 4-byte out pointer", a)
	}
	if a := gc.attr(uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT); a == nil || a.Len != 8 {
		t.Errorf("CORE_SUPPORT attr %v", a)
	}
	ac := k.calls[1]
	if ac.hdr.ObjectId != uapi.UVERBS_OBJECT_ASYNC_EVENT || ac.hdr.MethodId != uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC || ac.hdr.DriverId != uapi.RDMA_DRIVER_RXE {
		t.Errorf("async alloc header %+v", ac.hdr)
	}
}

func TestDriverIDUnknownForUSB4(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, classifyDriver("rocep1s0f0", 0x0200544256524253, uapi.RDMA_DRIVER_UNKNOWN))
	defer c.Close()
	if c.Driver().Kind != DriverUSB4 {
		t.Fatalf("Driver = %v", c.Driver())
	}
	if _, err := c.CreateCQ(CQAttr{CQE: 8}); err != nil {
		t.Fatal(err)
	}
	cc := k.last()
	if cc.hdr.DriverId != uapi.RDMA_DRIVER_UNKNOWN {
		t.Errorf("driver id %d", cc.hdr.DriverId)
	}
	// Room for the mapped CQ-ring offer (a zeroed tail from kernels that make
	// none), and nothing the module would have to parse.
	if a := cc.attr(uapi.UVERBS_ATTR_UHW_OUT); a == nil || a.Len != uapi.SizeofTbvUrespCreateCq {
		t.Errorf("usb4 create_cq UHW_OUT %v, want %d bytes for the CQ-ring offer", a, uapi.SizeofTbvUrespCreateCq)
	}
	if cc.attr(uapi.UVERBS_ATTR_UHW_IN) != nil {
		t.Error("usb4 create_cq must carry no driver input")
	}
}

func TestCreateCQEncoding(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	k.methods[methodKey(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE)] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		*(*uint32)(unsafe.Pointer(&out(uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE)[0])) = 31
		mi := (*uapi.Mminfo)(unsafe.Pointer(&out(uapi.UVERBS_ATTR_UHW_OUT)[0]))
		mi.Offset, mi.Size = 0x3000, 8192
		set(uapi.UVERBS_ATTR_CREATE_CQ_HANDLE, 7)
		return nil
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 20, CompVector: 1, UserHandle: 0xABCDEF0123})
	if err != nil {
		t.Fatal(err)
	}
	call := k.last()
	check := func(id uint16, length uint16, data uint64, mandatory bool) {
		t.Helper()
		a := call.attr(id)
		if a == nil {
			t.Fatalf("attr %#x missing", id)
		}
		if a.Len != length || (data != 0 && a.Data != data) || (a.Flags&uapi.UVERBS_ATTR_F_MANDATORY != 0) != mandatory {
			t.Errorf("attr %#x = %v, want len %d data %#x mandatory %v", id, a, length, data, mandatory)
		}
	}
	check(uapi.UVERBS_ATTR_CREATE_CQ_CQE, 4, 20, true) // small PTR_IN payloads are inline
	check(uapi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 8, 0xABCDEF0123, true)
	check(uapi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 4, 1, true)
	check(uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, 0, true)
	check(uapi.UVERBS_ATTR_UHW_OUT, uapi.SizeofRxeCreateCqResp, 0, true)
	if call.attr(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL) != nil {
		t.Error("absent channel must drop the fd attribute")
	}
	if cq.Handle() != 7 || cq.CQE() != 31 {
		t.Errorf("cq handle %d cqe %d, want 7/31", cq.Handle(), cq.CQE())
	}
	if mi, ok := cq.RxeQueue(); !ok || mi.Offset != 0x3000 || mi.Size != 8192 {
		t.Errorf("rxe mmap info %+v %v", mi, ok)
	}

	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCQ(CQAttr{CQE: 1, Channel: ch}); err != nil {
		t.Fatal(err)
	}
	if a := k.last().attr(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL); a == nil || int(a.Data) != ch.FD() || a.Len != 0 {
		t.Errorf("channel attr %v, want fd %d", a, ch.FD())
	}
}

func TestENOTTYFallsBackToWriteAndIsCached(t *testing.T) {
	k := newFakeKernel()
	k.ioctlErr = unix.ENOTTY
	c := openFake(t, k, Driver{})
	defer c.Close()
	if c.NumCompVectors() != 5 || k.openFDs[c.AsyncFD()] != "async" {
		t.Fatalf("write GET_CONTEXT not decoded: ncomp %d async %d", c.NumCompVectors(), c.AsyncFD())
	}
	w := k.calls[1].write
	hdr := (*uapi.IbUverbsCmdHdr)(unsafe.Pointer(&w[0]))
	if hdr.Command != uapi.IB_USER_VERBS_CMD_GET_CONTEXT || hdr.InWords != 4 || hdr.OutWords != 2 || len(w) != 16 {
		t.Errorf("GET_CONTEXT write header %+v (len %d)", *hdr, len(w))
	}
	if *(*uint64)(unsafe.Pointer(&w[8])) == 0 {
		t.Error("response pointer not set")
	}
	before := len(k.calls)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(k.calls) - before; got != 1 || k.last().write == nil {
		t.Errorf("AllocPD after ENOTTY made %d calls (want one write, no ioctl)", got)
	}
	if err := pd.Destroy(); err != nil {
		t.Fatal(err)
	}
	if k.last().writeCmd != uapi.IB_USER_VERBS_CMD_DEALLOC_PD {
		t.Errorf("PD destroy fell back to write cmd %d", k.last().writeCmd)
	}

	// Extended commands through write(): ex header with the response pointer.
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	w = k.last().write
	hdr = (*uapi.IbUverbsCmdHdr)(unsafe.Pointer(&w[0]))
	ex := (*uapi.IbUverbsExCmdHdr)(unsafe.Pointer(&w[8]))
	if hdr.Command != uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE|uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED ||
		hdr.InWords != 1 || hdr.OutWords != uapi.SizeofIbUverbsExQueryDeviceResp/8 || ex.Response == 0 || ex.ProviderInWords != 0 {
		t.Errorf("ex write headers %+v %+v", *hdr, *ex)
	}
	if da.NodeGUID != 0x0200544256524253 || da.MaxCQE != 4096 || da.DeviceCapFlags != 1<<40 {
		t.Errorf("decoded device attr: guid %#x max_cqe %d caps %#x", da.NodeGUID, da.MaxCQE, da.DeviceCapFlags)
	}

	// CQ create via write, with comp channel -1 when absent.
	cq, err := c.CreateCQ(CQAttr{CQE: 9})
	if err != nil {
		t.Fatal(err)
	}
	req := (*uapi.IbUverbsCreateCq)(unsafe.Pointer(&k.last().write[8]))
	if req.CompChannel != -1 || req.Cqe != 9 || req.UserHandle != cq.UserHandle() || cq.CQE() != 10 {
		t.Errorf("write CREATE_CQ request %+v, cq cqe %d", *req, cq.CQE())
	}
}

func TestEPROTONOSUPPORTMarksOneMethod(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, Driver{})
	defer c.Close()
	k.noMethod[methodKey(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE)] = true
	for i := 0; i < 2; i++ {
		if _, err := c.CreateCQ(CQAttr{CQE: 4}); err != nil {
			t.Fatal(err)
		}
		if cmd := k.last().writeCmd; cmd != uapi.IB_USER_VERBS_CMD_CREATE_CQ || k.last().hdr.MethodId != uapi.UVERBS_METHOD_INVOKE_WRITE {
			t.Errorf("fallback used cmd %d method %d, want CREATE_CQ via INVOKE_WRITE", cmd, k.last().hdr.MethodId)
		}
	}
	if n := k.callsTo(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE); n != 1 {
		t.Errorf("CQ_CREATE tried %d times, want once (then cached)", n)
	}
	// Other methods are still used.
	if _, err := c.QueryPort(1); err != nil && !errors.Is(err, unix.EPROTONOSUPPORT) && !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatal(err)
	}
	if k.callsTo(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT) != 1 {
		t.Error("QUERY_PORT was not tried after an unrelated method was marked")
	}
}

func TestErrorsWrapErrnoAndNameTheVerb(t *testing.T) {
	k := newFakeKernel()
	qp := fakeQP(t, k, QPTypeRC, QPCap{})
	pd := qp.pd
	k.writeCmd[uapi.IB_USER_VERBS_CMD_MODIFY_QP] = func(in, out []byte) error { return unix.EINVAL }
	err := qp.Modify(&QPAttr{State: uapi.IB_QPS_RTS}, uapi.IB_QP_STATE)
	if !errors.Is(err, unix.EINVAL) || !strings.HasPrefix(err.Error(), "provider: modify qp to RTS: ") {
		t.Errorf("modify error %q", err)
	}
	var raw unix.Errno
	if !errors.As(err, &raw) || raw != unix.EINVAL {
		t.Errorf("errors.As to unix.Errno: %v", raw)
	}
	if _, ok := err.(unix.Errno); ok {
		t.Error("errno must be wrapped, not returned bare")
	}

	k.writeCmd[uapi.IB_USER_VERBS_CMD_REG_MR] = func(in, out []byte) error { return unix.ENOMEM }
	_, err = pd.RegMR(0x1000, 4096, 0x1000, 0)
	if !errors.Is(err, unix.ENOMEM) || !strings.Contains(err.Error(), "ulimit -l") || !strings.Contains(err.Error(), "reg mr") {
		t.Errorf("reg mr ENOMEM: %q", err)
	}
	before := len(k.calls)
	if _, err := pd.RegMR(0x1000, 0, 0, 0); !errors.Is(err, unix.EINVAL) || len(k.calls) != before {
		t.Errorf("length 0: %v (%d syscalls)", err, len(k.calls)-before)
	}

	k.writeCmd[uapi.IB_USER_VERBS_CMD_CREATE_AH] = func(in, out []byte) error { return unix.EOPNOTSUPP }
	_, err = pd.CreateAH(AHAttr{Port: 1})
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("create ah EOPNOTSUPP: %v", err)
	}

	// dma-buf without the kernel method: ErrNotSupported carrying the errno.
	_, err = pd.RegDmabufMR(0, 4096, 0, 3, 0)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("dmabuf without method: %v", err)
	}
}

func TestQPEncodingAndModify(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	pd, _ := c.AllocPD()
	cq, _ := c.CreateCQ(CQAttr{CQE: 4})
	var gotCap uapi.IbUverbsQpCap
	k.methods[methodKey(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE)] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		copy(bytesOf(&gotCap), call.attr(uapi.UVERBS_ATTR_CREATE_QP_CAP).in)
		rc := (*uapi.IbUverbsQpCap)(unsafe.Pointer(&out(uapi.UVERBS_ATTR_CREATE_QP_RESP_CAP)[0]))
		*rc = gotCap
		rc.MaxSendWr = 64
		*(*uint32)(unsafe.Pointer(&out(uapi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM)[0])) = 0x11
		set(uapi.UVERBS_ATTR_CREATE_QP_HANDLE, 42)
		return nil
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, SigAll: true, Cap: QPCap{MaxSendWR: 10, MaxRecvWR: 3, MaxSendSGE: 2, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	call := k.last()
	if a := call.attr(uapi.UVERBS_ATTR_CREATE_QP_TYPE); a == nil || a.Len != 8 || a.Data != uapi.IB_UVERBS_QPT_UD {
		t.Errorf("type attr %v (const attrs are inline u64)", a)
	}
	if a := call.attr(uapi.UVERBS_ATTR_CREATE_QP_FLAGS); a == nil || a.Data != uapi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL {
		t.Errorf("flags attr %v", a)
	}
	if a := call.attr(uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE); a == nil || uint32(a.Data) != pd.Handle() || a.Len != 0 {
		t.Errorf("pd attr %v", a)
	}
	if a := call.attr(uapi.UVERBS_ATTR_UHW_OUT); a == nil || a.Len != uapi.SizeofRxeCreateQpResp {
		t.Errorf("rxe uhw out %v", a)
	}
	if gotCap != (uapi.IbUverbsQpCap{MaxSendWr: 10, MaxRecvWr: 3, MaxSendSge: 2, MaxRecvSge: 1}) {
		t.Errorf("cap sent %+v", gotCap)
	}
	if qp.QPN() != 0x11 || qp.Handle() != 42 || qp.InitAttr().Cap.MaxSendWR != 64 {
		t.Errorf("qp %d/%#x granted %+v", qp.Handle(), qp.QPN(), qp.InitAttr().Cap)
	}

	var mod uapi.IbUverbsModifyQp
	k.writeCmd[uapi.IB_USER_VERBS_CMD_MODIFY_QP] = func(in, out []byte) error {
		copy(bytesOf(&mod), in)
		return nil
	}
	dgid := GID{0: 0xfe, 0x80, 15: 1}
	attr := QPAttr{State: uapi.IB_QPS_RTR, PathMTU: uapi.IB_MTU_1024, DestQPN: 0x99, RQPSN: 0xabc,
		AH: AHAttr{IsGlobal: true, Port: 1, GRH: GlobalRoute{DGID: dgid, SGIDIndex: 3, HopLimit: 64}}}
	mask := uint32(uapi.IB_QP_STATE | uapi.IB_QP_AV | uapi.IB_QP_PATH_MTU | uapi.IB_QP_DEST_QPN | uapi.IB_QP_RQ_PSN)
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatal(err)
	}
	if mod.QpHandle != 42 || mod.AttrMask != mask || mod.QpState != uapi.IB_QPS_RTR || mod.PathMtu != uapi.IB_MTU_1024 ||
		mod.DestQpNum != 0x99 || mod.RqPsn != 0xabc || mod.Dest.IsGlobal != 1 || mod.Dest.Dgid != dgid ||
		mod.Dest.SgidIndex != 3 || mod.Dest.HopLimit != 64 || mod.Dest.PortNum != 1 {
		t.Errorf("modify request %+v", mod)
	}
	if k.last().hdr.MethodId != uapi.UVERBS_METHOD_INVOKE_WRITE || k.last().attr(uapi.UVERBS_ATTR_CORE_IN).Len != uapi.SizeofIbUverbsModifyQp {
		t.Errorf("modify not sent through INVOKE_WRITE with the full core request")
	}
}

func TestCloseDestroysInOrderAndClosesFDs(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	pd, _ := c.AllocPD()
	ch, _ := c.CreateCompChannel()
	cq, _ := c.CreateCQ(CQAttr{CQE: 4, Channel: ch})
	if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq}); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAH(AHAttr{Port: 1}); err == nil {
		t.Log("fake accepted an AH") // the fake has no CREATE_AH: not an object
	}
	if _, err := c.MapCmdFD(0, 4096); err != nil {
		t.Fatal(err)
	}
	early, err := c.MapCmdFD(4096, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UnmapCmdFD(early); err != nil || k.mapped != 1 {
		t.Fatalf("UnmapCmdFD: %v, %d mapped", err, k.mapped)
	}
	if _, err := c.MapCmdFD(0, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("MapCmdFD length 0: %v", err)
	}
	start := len(k.calls)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, call := range k.calls[start:] {
		switch {
		case call.write != nil:
			order = append(order, "write")
		case call.hdr.ObjectId == uapi.UVERBS_OBJECT_QP:
			order = append(order, "qp")
		case call.hdr.ObjectId == uapi.UVERBS_OBJECT_CQ:
			order = append(order, "cq")
		case call.hdr.ObjectId == uapi.UVERBS_OBJECT_PD:
			order = append(order, "pd")
		}
	}
	if strings.Join(order, ",") != "qp,cq,pd" {
		t.Errorf("teardown order %v, want qp,cq,pd", order)
	}
	if len(k.openFDs) != 0 || k.mapped != 0 {
		t.Errorf("after Close: open fds %v, mappings %d", k.openFDs, k.mapped)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) || !errors.Is(err, unix.EBADF) {
		t.Errorf("second Close: %v", err)
	}
	if err := cq.ReqNotify(false); !errors.Is(err, ErrClosed) {
		t.Errorf("use after close: %v", err)
	}
	if _, err := ch.GetEvent(0); !errors.Is(err, ErrClosed) {
		t.Errorf("GetEvent after close: %v", err)
	}
}

func TestEventsMapToObjects(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	pd, _ := c.AllocPD()
	ch, _ := c.CreateCompChannel()
	cq, _ := c.CreateCQ(CQAttr{CQE: 4, Channel: ch, UserHandle: 0x77})
	qp, _ := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq})

	k.queueEvent(ch.FD(), bytesOf(&uapi.IbUverbsCompEventDesc{CqHandle: 0x77}))
	got, err := ch.GetEvent(time.Second)
	if err != nil || got != cq {
		t.Fatalf("GetEvent = %v, %v; want the cq", got, err)
	}
	if err := cq.AckEvents(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("over-ack: %v", err)
	}
	if err := cq.AckEvents(1); err != nil {
		t.Error(err)
	}
	if _, err := ch.GetEvent(0); !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("empty channel: %v, want ETIMEDOUT", err)
	}

	k.queueEvent(c.AsyncFD(), bytesOf(&uapi.IbUverbsAsyncEventDesc{Element: qp.UserHandle(), EventType: uapi.IB_EVENT_QP_FATAL}))
	k.queueEvent(c.AsyncFD(), bytesOf(&uapi.IbUverbsAsyncEventDesc{Element: 1, EventType: uapi.IB_EVENT_PORT_ERR}))
	ev, err := c.GetAsyncEvent(time.Second)
	if err != nil || ev.QP != qp || ev.Type != uapi.IB_EVENT_QP_FATAL {
		t.Errorf("async event %+v, %v; want QP_FATAL on the qp", ev, err)
	}
	ev, err = c.GetAsyncEvent(time.Second)
	if err != nil || ev.Port != 1 || ev.QP != nil || !strings.Contains(ev.String(), "PORT_ERR") {
		t.Errorf("async event %v, %v; want PORT_ERR on port 1", ev, err)
	}
}

func TestClassifyDriver(t *testing.T) {
	for _, tc := range []struct {
		name string
		guid uint64
		id   uint32
		want DriverKind
	}{
		{"rxe0", 0xa4a4a4fffec152f8, uapi.RDMA_DRIVER_RXE, DriverRXE},
		{"rocep5s0f0", 0x0200544256524253, 0, DriverUSB4},  // native, peer 0 rail 0, renamed by udev
		{"anything", 0x0200544268524255, 0, DriverUSB4},    // peer 0x12, rail 2
		{"anything", 0x0200544300524253, 0, DriverUSB4},    // peer 0xAA: byte 3 carried
		{"anything", 0x0300544256524254, 0, DriverUSB4},    // Apple backend, rail 1
		{"anything", 0x0100544256524253, 0, DriverGeneric}, // wrong top byte
		{"anything", 0x0200544300000001, 0, DriverGeneric}, // rail 0xADBDAE: not the module's
		{"anything", 0x0200544200000001, 0, DriverGeneric}, // below the base
		{"usb4_rdma3", 0, 0, DriverUSB4},                   // name fallback
		{"usb4_apple0", 0, 0, DriverUSB4},                  // name fallback
		{"mlx5_0", 0x0200544256524253, 5, DriverUSB4},      // GUID wins over an unknown id
		{"mlx5_0", 0x98039b0300a1b2c3, 4, DriverGeneric},
	} {
		if got := classifyDriver(tc.name, tc.guid, tc.id); got.Kind != tc.want || got.ID != tc.id {
			t.Errorf("classifyDriver(%q, %#x, %d) = %v, want %v", tc.name, tc.guid, tc.id, got, tc.want)
		}
	}
}

func TestParseGID(t *testing.T) {
	g, err := parseGID("0000:0000:0000:0000:0000:ffff:0a0b:0001\n")
	if err != nil || g != (GID{10: 0xff, 11: 0xff, 12: 10, 13: 11, 14: 0, 15: 1}) {
		t.Errorf("parseGID = %x, %v", g, err)
	}
	if g, err := parseGID("FE80:0000:0000:0000:A4A4:A4FF:FEC1:52F8"); err != nil || g[0] != 0xfe || g[15] != 0xf8 {
		t.Errorf("upper-case hex: parseGID = %x, %v", g, err)
	}
	for _, bad := range []string{
		"", "fe80::1", "zzzz:0000:0000:0000:0000:0000:0000:0000",
		"1:2:3:4:5:6:7:8",                           // groups are four digits in sysfs
		" fe80:0000:0000:0000:0000:0000:0000:0001",  // leading space
		"fe80:0000:0000:0000:0000:0000:0000:0001xy", // trailing bytes
		"fe80:0000:0000:0000:0000:0000:0000:00 1",   // space inside a group
		"fe80-0000:0000:0000:0000:0000:0000:0001",   // wrong separator
	} {
		if _, err := parseGID(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("parseGID(%q) = %v, want EINVAL", bad, err)
		}
	}
}

func TestOpenUnknownDevice(t *testing.T) {
	if _, err := openInfo(newFakeKernel(), DeviceInfo{Name: "x"}, ""); !errors.Is(err, unix.ENODEV) {
		t.Errorf("device without chardev: %v", err)
	}
}

func TestOversizedAttributeRejectedBeforeTheKernel(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, Driver{})
	defer c.Close()
	before := len(k.calls)
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_TABLE).out(1, make([]byte, 70000))
	if err := c.cmd.ioctl(ic); !errors.Is(err, unix.EINVAL) || len(k.calls) != before {
		t.Errorf("70000-byte attribute: %v after %d syscalls", err, len(k.calls)-before)
	}
}

func TestForgottenCloseIsRepairedByTheGC(t *testing.T) {
	k := newFakeKernel()
	func() {
		c := openFake(t, k, rxe)
		if _, err := c.CreateCompChannel(); err != nil {
			t.Fatal(err)
		}
	}()
	k.mu.Lock()
	open := len(k.openFDs)
	k.mu.Unlock()
	if open != 3 {
		t.Fatalf("%d fds open, want cmd+async+channel", open)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		k.mu.Lock()
		open = len(k.openFDs)
		k.mu.Unlock()
		if open == 0 {
			return
		}
	}
	t.Errorf("%d fds still open after the context became unreachable", open)
}

func TestSysfsDeviceDriverIDIsProbed(t *testing.T) {
	k := newFakeKernel()
	k.checkID, k.wantID = true, uapi.RDMA_DRIVER_RXE
	c, err := openInfo(k, DeviceInfo{Name: "rxe0", Chardev: "/dev/infiniband/uverbs0", FromSysfs: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Driver() != rxe {
		t.Errorf("Driver() = %+v, want probed rxe", c.Driver())
	}
	if _, err := c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if h := k.last().hdr; h.DriverId != uapi.RDMA_DRIVER_RXE {
		t.Errorf("later ioctls carry driver id %d", h.DriverId)
	}
	// A netlink-resolved device is trusted and not probed.
	k2 := newFakeKernel()
	c2 := openFake(t, k2, rxe)
	defer c2.Close()
	if k2.callsTo(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INFO_HANDLES) != 0 {
		t.Error("probed although the driver id was known")
	}
}

func FuzzParseGID(f *testing.F) {
	f.Add("fe80:0000:0000:0000:a4a4:a4ff:fec1:52f8")
	f.Add("0000:0000:0000:0000:0000:ffff:0a0b:0001\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := parseGID(s)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("parseGID(%q): %v is not EINVAL", s, err)
			}
			return
		}
		// Whatever parsed must be exactly the kernel's "%04x:" form, so it
		// prints back to the same text (modulo case and the trailing newline).
		var b strings.Builder
		for i := 0; i < 16; i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			b.WriteString(fmtHex(g[i], g[i+1]))
		}
		if want := strings.ToLower(string(trimNL([]byte(s)))); b.String() != want {
			t.Fatalf("parseGID(%q) = %x, which prints as %q", s, g, b.String())
		}
	})
}

func fmtHex(hi, lo byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[hi>>4], digits[hi&15], digits[lo>>4], digits[lo&15]})
}

func TestConcurrentObjectsOnOneContext(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				cq, err := c.CreateCQ(CQAttr{CQE: 4})
				if err != nil {
					errs <- err
					return
				}
				qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq})
				if err != nil {
					errs <- err
					return
				}
				if err := qp.Destroy(); err != nil {
					errs <- err
					return
				}
				if err := cq.Destroy(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	left, cqs, qps := c.objLive, len(c.cqs), len(c.qps)
	c.mu.Unlock()
	if left != 1 || cqs != 0 || qps != 0 {
		t.Errorf("after create/destroy storms: %d tracked objects (want the PD), %d cqs, %d qps", left, cqs, qps)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCallerOwnedFDsAreLeftOpen(t *testing.T) {
	k := newFakeKernel()
	cmd := k.newFD("/dev/infiniband/uverbs0 (caller's)")
	c, err := newContext(k, DeviceInfo{Name: "rxe0", Chardev: "/dev/infiniband/uverbs0", Driver: rxe}, "", cmd, false)
	if err != nil {
		t.Fatal(err)
	}
	async := c.AsyncFD()
	foreign := k.newFD("caller's comp channel")
	ch, err := c.CompChannelFromFD(foreign)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 2, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if a := k.last().attr(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL); a == nil || int(a.Data) != foreign {
		t.Errorf("foreign channel not passed: %v", a)
	}
	k.queueEvent(foreign, bytesOf(&uapi.IbUverbsCompEventDesc{CqHandle: cq.UserHandle()}))
	if got, err := ch.GetEvent(time.Second); err != nil || got != cq {
		t.Errorf("event on a foreign channel: %v, %v", got, err)
	}
	own, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	ownFD := own.FD()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{cmd, async, foreign} {
		if _, ok := k.openFDs[fd]; !ok {
			t.Errorf("fd %d (%s) closed, but it belongs to the caller", fd, map[int]string{cmd: "cmd", async: "async", foreign: "channel"}[fd])
		}
	}
	if _, ok := k.openFDs[ownFD]; ok {
		t.Error("the context's own comp channel was not closed")
	}
}

func TestNilAndForeignObjectsAreErrorsNotPanics(t *testing.T) {
	var c *Context
	var zero Context
	var pd *PD
	var cq *CQ
	var qp *QP
	var srq *SRQ
	var mr *MR
	var ah *AH
	var ch *CompChannel
	for name, err := range map[string]error{
		"nil ctx AllocPD":    func() error { _, err := c.AllocPD(); return err }(),
		"nil ctx Close":      c.Close(),
		"zero ctx QueryPort": func() error { _, err := zero.QueryPort(1); return err }(),
		"zero ctx Close":     zero.Close(),
		"nil pd RegMR":       func() error { _, err := pd.RegMR(1, 1, 1, 0); return err }(),
		"nil pd Destroy":     pd.Destroy(),
		"nil cq ReqNotify":   cq.ReqNotify(false),
		"nil cq AckEvents":   cq.AckEvents(1),
		"nil cq Destroy":     cq.Destroy(),
		"nil qp Modify":      qp.Modify(&QPAttr{}, 0),
		"nil qp Query":       func() error { _, _, err := qp.Query(0); return err }(),
		"nil srq Query":      func() error { _, err := srq.Query(); return err }(),
		"nil mr Destroy":     mr.Destroy(),
		"nil ah Destroy":     ah.Destroy(),
		"nil ch GetEvent":    func() error { _, err := ch.GetEvent(0); return err }(),
		"nil ch Close":       ch.Close(),
	} {
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}

	k := newFakeKernel()
	c1, c2 := openFake(t, k, rxe), openFake(t, k, rxe)
	defer c1.Close()
	defer c2.Close()
	pd2, _ := c2.AllocPD()
	cq1, _ := c1.CreateCQ(CQAttr{CQE: 1})
	ch1, _ := c1.CreateCompChannel()
	if _, err := pd2.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq1, RecvCQ: cq1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QP with another context's CQ: %v", err)
	}
	if _, err := c2.CreateCQ(CQAttr{CQE: 1, Channel: ch1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CQ with another context's channel: %v", err)
	}
}

// TestUSB4KernelRefusals plays the usb4 kernel's documented refusals
// (usb4-kernel-and-consumers.md §1.2-1.6: no SRQ, no UD, no userspace AH,
// generic uverbs without driver data) and checks how they surface.
func TestUSB4KernelRefusals(t *testing.T) {
	k := newFakeKernel()
	k.checkID, k.wantID = true, uapi.RDMA_DRIVER_UNKNOWN
	usb4 := classifyDriver("usb4_rdma0", 0x0200544256524253, uapi.RDMA_DRIVER_UNKNOWN)
	c := openFake(t, k, usb4)
	defer c.Close()
	qpCreate := methodKey(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE)
	okCreate := k.methods[qpCreate]
	k.methods[qpCreate] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		if call.attr(uapi.UVERBS_ATTR_UHW_OUT) != nil || call.attr(uapi.UVERBS_ATTR_UHW_IN) != nil {
			return unix.EINVAL // the usb4 kernel takes no driver data
		}
		if typ := call.attr(uapi.UVERBS_ATTR_CREATE_QP_TYPE).Data; typ != uapi.IB_UVERBS_QPT_RC && typ != uapi.IB_UVERBS_QPT_UC {
			return unix.EOPNOTSUPP
		}
		return okCreate(call, out, set)
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		return unix.EOPNOTSUPP
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_CREATE_AH] = func(in, out []byte) error { return unix.EOPNOTSUPP }

	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq}); err != nil {
		t.Errorf("RC on usb4: %v", err)
	}
	if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq}); !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("UD on usb4: %v, want ErrNotSupported", err)
	}
	if _, err := pd.CreateAH(AHAttr{Port: 1}); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "create ah") {
		t.Errorf("AH on usb4: %v, want ErrNotSupported naming the verb", err)
	}
}

// On a usb4 kernel without SRQs (max_srq 0) an SRQ is the provider's: no
// kernel SRQ command, the limits in QueryDevice, a QP on it created with a
// kernel RQ of its own (max_wr, at most max_qp_wr; one SGE) and no SRQ
// handle, moved to ERR before its DESTROY_QP (the module flushes the lent
// WRs then), and the SRQ not destroyed while the QP lives.
func TestUSB4ProviderSRQControl(t *testing.T) {
	k := newFakeKernel()
	usb4 := classifyDriver("usb4_rdma0", 0x0200544256524253, uapi.RDMA_DRIVER_UNKNOWN)
	c := openFake(t, k, usb4)
	defer c.Close()
	qd := uint32(uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED)
	okQD := k.writeCmd[qd]
	k.writeCmd[qd] = func(in, out []byte) error {
		err := okQD(in, out)
		(*uapi.IbUverbsExQueryDeviceResp)(unsafe.Pointer(&out[0])).Base.MaxQpWr = 1024
		return err
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		t.Error("a kernel SRQ command on a kernel without SRQs")
		return unix.EOPNOTSUPP
	}
	gotCap, gotSRQ := recordQPCreate(k)
	var cmds []string
	k.writeCmd[uapi.IB_USER_VERBS_CMD_MODIFY_QP] = func(in, out []byte) error {
		r := (*uapi.IbUverbsModifyQp)(unsafe.Pointer(&in[0]))
		cmds = append(cmds, fmt.Sprintf("modify %d", r.QpState))
		return nil
	}
	qpDestroy := methodKey(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY)
	okDestroy := k.methods[qpDestroy]
	k.methods[qpDestroy] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		cmds = append(cmds, "destroy")
		if okDestroy == nil {
			return nil
		}
		return okDestroy(call, out, set)
	}
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if !a.ProviderSRQ || a.MaxSRQ != ProviderSRQMaxSRQ || a.MaxSRQWR != ProviderSRQMaxWR || a.MaxSRQSGE != 1 {
		t.Fatalf("device attrs: provider %v max_srq %d max_srq_wr %d max_srq_sge %d", a.ProviderSRQ, a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SRQInitAttr{{MaxWR: 0}, {MaxWR: ProviderSRQMaxWR + 1}, {MaxWR: 4, MaxSGE: 2}, {MaxWR: 4, Limit: 5}} {
		if _, err := pd.CreateSRQ(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("create srq %+v: %v, want EINVAL", bad, err)
		}
	}
	srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 4096, MaxSGE: 1, Limit: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !srq.Provider() || srq.InitAttr() != (SRQAttr{MaxWR: 4096, MaxSGE: 1, Limit: 8}) || srq.ProviderRQDepth() != 1024 {
		t.Fatalf("srq: provider %v attr %+v depth %d", srq.Provider(), srq.InitAttr(), srq.ProviderRQDepth())
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if *gotSRQ || gotCap.MaxRecvWr != 1024 || gotCap.MaxRecvSge != 1 {
		t.Fatalf("create_qp: srq handle sent %v, cap %+v; want none, 1024 receive WRs of 1 SGE", *gotSRQ, *gotCap)
	}
	if err := srq.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("destroy srq with a QP on it: %v, want EBUSY", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]string{fmt.Sprintf("modify %d", uapi.IB_QPS_ERR), "destroy"}); fmt.Sprint(cmds) != want {
		t.Fatalf("destroy qp sent %v, want %v", cmds, want)
	}
	if err := srq.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkReqNotifyThroughFakeSeam(b *testing.B) {
	k := newFakeKernel()
	c, err := openInfo(k, DeviceInfo{Name: "fake0", Chardev: "/dev/infiniband/uverbs9", Driver: rxe}, "")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := cq.ReqNotify(false); err != nil {
			b.Fatal(err)
		}
	}
}

// recordQPCreate makes k's QP create keep what the provider sent: the capabilities
// (the kernel receive queue a provider SRQ's QP gets) and whether an SRQ handle
// went with them. The pointers read the last QP created.
func recordQPCreate(k *fakeKernel) (*uapi.IbUverbsQpCap, *bool) {
	gotCap, gotSRQ := new(uapi.IbUverbsQpCap), new(bool)
	qpCreate := methodKey(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE)
	okCreate := k.methods[qpCreate]
	k.methods[qpCreate] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
		*gotSRQ = call.attr(uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE) != nil
		if a := call.attr(uapi.UVERBS_ATTR_CREATE_QP_CAP); a != nil {
			*gotCap = *(*uapi.IbUverbsQpCap)(unsafe.Pointer(&a.in[0]))
		}
		return okCreate(call, out, set)
	}
	return gotCap, gotSRQ
}
