package provider

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// legacySys is the real kernel seen through a filter that makes it look
// older: with noIoctl every ioctl fails with ENOTTY (a kernel without the
// ioctl framework: everything goes through write()); otherwise ioctl methods
// of objects other than DEVICE and ASYNC_EVENT fail with EPROTONOSUPPORT (a
// kernel without the CQ/QP/SRQ/PD/MR/AH methods: INVOKE_WRITE carries the
// legacy commands). The commands that then reach the kernel are real.
type legacySys struct {
	realSys
	noIoctl bool
}

func (s legacySys) Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if s.noIoctl {
		return unix.ENOTTY
	}
	if req == uapi.RDMA_VERBS_IOCTL {
		switch (*uapi.IbUverbsIoctlHdr)(arg).ObjectId {
		case uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_OBJECT_ASYNC_EVENT:
		default:
			return unix.EPROTONOSUPPORT
		}
	}
	return s.realSys.Ioctl(fd, req, arg)
}

func openLegacy(t *testing.T, name string, noIoctl bool) *Context {
	t.Helper()
	info, err := systemLookup{}.byName(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := openInfo(legacySys{noIoctl: noIoctl}, info, "")
	if err != nil {
		t.Fatalf("open %s (noIoctl %v): %v", name, noIoctl, err)
	}
	return c
}

func TestVMWritePath(t *testing.T)       { testLegacyPath(t, true) }
func TestVMInvokeWritePath(t *testing.T) { testLegacyPath(t, false) }

// testLegacyPath runs the object lifecycle and an RC connection with the
// fallback paths against the real kernel; the peer uses the ioctl path.
func testLegacyPath(t *testing.T, noIoctl bool) {
	d0, d1 := vmDevs(t)
	fds0 := ourFDs(t)
	c0 := openLegacy(t, d0.name, noIoctl)
	c1 := mustOpen(t, d1.name)
	defer c1.Close()
	if c0.AsyncFD() < 0 || c0.NumCompVectors() == 0 {
		t.Fatalf("legacy context: async fd %d, %d comp vectors", c0.AsyncFD(), c0.NumCompVectors())
	}
	if _, err := c0.QueryDevice(); err != nil {
		t.Fatal(err)
	}
	pa, err := c0.QueryPort(1)
	if err != nil || pa.State != uapi.IB_PORT_ACTIVE {
		t.Fatalf("QueryPort = %+v, %v", pa, err)
	}
	if _, err := c0.QueryPort(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(0) = %v, want EINVAL", err)
	}
	tbl, err := c0.GIDTable(1) // sysfs when noIoctl
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range tbl {
		found = found || (int(e.Index) == d0.gidIdx && e.GID == ipv4GID(d0.ip) && e.Type == GIDTypeRoCEv2)
	}
	if !found {
		t.Errorf("GID table %+v lacks index %d", tbl, d0.gidIdx)
	}

	pd, err := c0.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c0.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c0.CreateCQ(CQAttr{CQE: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if mi, ok := cq.RxeQueue(); !ok || mi.Size == 0 {
		t.Errorf("rxe cq mmap info through the fallback: %+v", mi)
	}
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srq.Modify(SRQAttr{Limit: 3}, uapi.IB_SRQ_LIMIT); err != nil {
		t.Fatal(err)
	}
	if sa, err := srq.Query(); err != nil || sa.Limit != 3 {
		t.Errorf("srq query %+v, %v", sa, err)
	}
	if err := srq.Destroy(); err != nil {
		t.Fatal(err)
	}
	ah, err := pd.CreateAH(AHAttr{IsGlobal: true, Port: 1, GRH: GlobalRoute{DGID: ipv4GID(d1.ip), SGIDIndex: uint8(d0.gidIdx), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
	q0, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := q0.RxeQueues(); !ok {
		t.Error("rxe qp mmap info missing")
	}
	pd1, err := c1.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq1, err := c1.CreateCQ(CQAttr{CQE: 16})
	if err != nil {
		t.Fatal(err)
	}
	q1, err := pd1.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq1, RecvCQ: cq1, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a0 := connect(t, q0, q1, QPTypeRC, d0, d1, 0x10, 0x20)
	connect(t, q1, q0, QPTypeRC, d1, d0, 0x20, 0x10)
	checkQueried(t, d0.name, q0, QPTypeRC, a0)

	buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	mr, err := pd.RegMR(addrOf(buf), uint64(len(buf)), uint64(addrOf(buf)), uapi.IB_UVERBS_ACCESS_LOCAL_WRITE)
	if err != nil {
		t.Fatal(err)
	}
	if err := mr.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := q0.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := q0.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("destroy twice: %v", err)
	}
	if err := c0.Close(); err != nil { // cq, channel and pd are left for Close
		t.Fatal(err)
	}
	if n := ourFDs(t); n != fds0+2 { // c1's cmd and async fds remain
		t.Errorf("after Close: %d uverbs fds, want %d", n, fds0+2)
	}
}
