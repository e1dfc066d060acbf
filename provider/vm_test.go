package provider

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/rdmanl"
	"usb4verbs/uapi"
)

// These tests need a real kernel with Soft-RoCE: tests/vm/run.sh sets
// USB4VERBS_VM=1 and names rxe0 (vethA) and rxe1 (vethB) with their RoCE v2
// GID indices. On the host they skip.

type vmDev struct {
	name   string
	netdev string
	ip     net.IP
	gidIdx int
}

func vmDevs(t *testing.T) (vmDev, vmDev) {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") != "1" {
		t.Skip("needs the VM (USB4VERBS_VM=1, tests/vm/run.sh)")
	}
	get := func(i string) vmDev {
		g, err := strconv.Atoi(os.Getenv("USB4VERBS_GID" + i))
		if err != nil {
			t.Fatalf("USB4VERBS_GID%s: %v", i, err)
		}
		return vmDev{name: os.Getenv("USB4VERBS_DEV" + i), netdev: os.Getenv("USB4VERBS_NETDEV" + i),
			ip: net.ParseIP(os.Getenv("USB4VERBS_IP" + i)), gidIdx: g}
	}
	return get("0"), get("1")
}

func mustOpen(t *testing.T, name string) *Context {
	t.Helper()
	c, err := Open(name)
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	return c
}

// ourFDs counts this process's fds on uverbs char devices and uverbs event
// files; ourMaps counts mappings of /dev/infiniband.
func ourFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (strings.Contains(l, "infiniband") || strings.Contains(l, "uverbs")) {
			n++
		}
	}
	return n
}

func ourMaps(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/dev/infiniband")
}

func ipv4GID(ip net.IP) GID {
	var g GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], ip.To4())
	return g
}

func TestVMDevicesAndQueries(t *testing.T) {
	d0, _ := vmDevs(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range devs {
		if d.Name == d0.name {
			found = true
			if d.Driver.Kind != DriverRXE || d.Driver.ID != uapi.RDMA_DRIVER_RXE {
				t.Errorf("%s: driver %v, want rxe/%d", d.Name, d.Driver, uapi.RDMA_DRIVER_RXE)
			}
			if !strings.HasPrefix(d.Chardev, "/dev/infiniband/uverbs") {
				t.Errorf("%s: chardev %q", d.Name, d.Chardev)
			}
		}
	}
	if !found {
		t.Fatalf("Devices() = %+v: no %s", devs, d0.name)
	}

	c := mustOpen(t, d0.name)
	defer c.Close()
	if c.Driver().Kind != DriverRXE {
		t.Errorf("Driver() = %v", c.Driver())
	}
	if c.NumCompVectors() == 0 {
		t.Error("NumCompVectors() = 0")
	}
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device: guid %016x max_qp %d max_cqe %d max_srq %d max_mr_size %#x ports %d resp_len %d caps %#x",
		da.NodeGUID, da.MaxQP, da.MaxCQE, da.MaxSRQ, da.MaxMRSize, da.PhysPortCnt, da.ResponseLength, da.DeviceCapFlags)
	if da.PhysPortCnt != 1 || da.MaxCQE == 0 || da.MaxQP == 0 || da.NodeGUID == 0 || da.VendorID == 0 && da.MaxPD == 0 {
		t.Errorf("implausible device attributes: %+v", da)
	}
	if da.ResponseLength == 0 {
		t.Error("extended query returned no extension (response_length 0)")
	}
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("port 1: %+v", pa)
	if pa.State != uapi.IB_PORT_ACTIVE || pa.LinkLayer != 2 /* Ethernet */ || pa.GIDTblLen == 0 || pa.ActiveMTU < uapi.IB_MTU_1024 {
		t.Errorf("port 1 = %+v, want ACTIVE Ethernet with a GID table", pa)
	}

	tbl, err := c.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := net.InterfaceByName(d0.netdev)
	if err != nil {
		t.Fatal(err)
	}
	var want *GIDEntry
	for i := range tbl {
		t.Logf("gid %d: %x %v ifindex %d", tbl[i].Index, tbl[i].GID, tbl[i].Type, tbl[i].NetdevIndex)
		if int(tbl[i].Index) == d0.gidIdx {
			want = &tbl[i]
		}
	}
	if want == nil {
		t.Fatalf("GID table has no index %d", d0.gidIdx)
	}
	if want.GID != ipv4GID(d0.ip) || want.Type != GIDTypeRoCEv2 || want.NetdevIndex != uint32(nd.Index) || want.Port != 1 {
		t.Errorf("gid entry %+v, want %x RoCE v2 on ifindex %d", *want, ipv4GID(d0.ip), nd.Index)
	}
	g, err := c.QueryGID(1, d0.gidIdx)
	if err != nil || g != want.GID {
		t.Errorf("QueryGID(1,%d) = %x, %v; want %x", d0.gidIdx, g, err, want.GID)
	}
	// The sysfs fallback must agree with the kernel's answer.
	se, err := c.sysfsGID(1, d0.gidIdx)
	if err != nil || se != *want {
		t.Errorf("sysfs gid = %+v, %v; want %+v", se, err, *want)
	}
}

// TestVMSysfsFallback opens a device found the way libibverbs finds it
// without netlink; sysfs has no driver id, so Open must probe it.
func TestVMSysfsFallback(t *testing.T) {
	d0, _ := vmDevs(t)
	nl, err := (systemLookup{}).byName(d0.name)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := (systemLookup{}).bySysfs(d0.name)
	if err != nil {
		t.Fatal(err)
	}
	if !sf.FromSysfs || sf.Chardev != nl.Chardev || sf.NodeGUID != nl.NodeGUID || sf.Driver.ID != 0 {
		t.Errorf("sysfs info %+v vs netlink %+v", sf, nl)
	}
	c, err := openInfo(realSys{}, sf, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Driver().Kind != DriverRXE || c.Driver().ID != uapi.RDMA_DRIVER_RXE {
		t.Errorf("probed driver %+v, want rxe", c.Driver())
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cq.RxeQueue(); !ok {
		t.Error("rxe driver data not passed after the probe")
	}
	if _, err := (systemLookup{}).bySysfs("no_such_rdma_dev"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("unknown device via sysfs: %v", err)
	}
}

func TestVMObjectLifecycle(t *testing.T) {
	d0, _ := vmDevs(t)
	fds0, maps0 := ourFDs(t), ourMaps(t)
	c := mustOpen(t, d0.name)
	if ourFDs(t) < fds0+2 {
		t.Errorf("open: %d uverbs fds, want at least %d (cmd + async)", ourFDs(t), fds0+2)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}

	// MR over an mmap'd buffer.
	buf, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	acc := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_READ)
	mr, err := pd.RegMR(addrOf(buf), uint64(len(buf)), uint64(addrOf(buf)), acc)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey() == 0 || mr.RKey() == 0 {
		t.Errorf("mr keys %#x/%#x", mr.LKey(), mr.RKey())
	}
	if err := mr.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Destroy(); !errors.Is(err, ErrClosed) || !errors.Is(err, unix.EBADF) {
		t.Errorf("second dereg: %v, want ErrClosed/EBADF", err)
	}

	// dma-buf: rxe has no reg_user_mr_dmabuf.
	_, err = pd.RegDmabufMR(0, 4096, 0, 0, acc)
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("RegDmabufMR on rxe: %v, want ErrNotSupported", err)
	} else {
		var no unix.Errno
		errors.As(err, &no)
		t.Logf("dmabuf on rxe: %v (errno %d %s)", err, int(no), unix.ErrnoName(no))
		if no != unix.EOPNOTSUPP && no != unix.EPROTONOSUPPORT {
			t.Errorf("dmabuf errno %v, want EOPNOTSUPP or EPROTONOSUPPORT", no)
		}
	}

	// CQ with a completion channel.
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 16, Channel: ch, UserHandle: 0xC0FFEE})
	if err != nil {
		t.Fatal(err)
	}
	if cq.CQE() < 16 || cq.UserHandle() != 0xC0FFEE {
		t.Errorf("cq cqe %d handle %#x", cq.CQE(), cq.UserHandle())
	}
	mi, ok := cq.RxeQueue()
	if !ok || mi.Size == 0 {
		t.Fatalf("rxe cq mmap info %+v %v", mi, ok)
	}
	// Map the ring the kernel offered and check its header: proof that the
	// driver response was passed and decoded. Close must unmap it.
	ring, err := c.MapCmdFD(mi.Offset, int(mi.Size))
	if err != nil {
		t.Fatal(err)
	}
	qb := (*uapi.RxeQueueBuf)(unsafePointer(ring))
	if qb.IndexMask+1 < 16 || qb.IndexMask&(qb.IndexMask+1) != 0 || qb.Log2ElemSize == 0 {
		t.Errorf("rxe cq ring header: log2_elem_size %d index_mask %#x", qb.Log2ElemSize, qb.IndexMask)
	}
	if ourMaps(t) != maps0+1 {
		t.Errorf("maps: %d, want %d", ourMaps(t), maps0+1)
	}
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	// No work was posted, so no event may arrive.
	if got, err := ch.GetEvent(50 * time.Millisecond); !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("GetEvent with nothing posted = %v, %v; want ETIMEDOUT", got, err)
	}
	if err := cq.AckEvents(0); err != nil {
		t.Error(err)
	}
	if err := cq.AckEvents(1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ack of an event never received: %v, want EINVAL", err)
	}

	// SRQ: create, modify the limit, query, destroy.
	srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 32, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if srq.InitAttr().MaxWR < 32 {
		t.Errorf("srq granted %+v", srq.InitAttr())
	}
	if err := srq.Modify(SRQAttr{Limit: 5}, uapi.IB_SRQ_LIMIT); err != nil {
		t.Fatal(err)
	}
	sa, err := srq.Query()
	if err != nil || sa.Limit != 5 || sa.MaxWR < 32 {
		t.Errorf("srq query = %+v, %v; want limit 5", sa, err)
	}

	// An RC QP on the SRQ; destroy order is enforced by the kernel.
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
		Cap: QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, sq, ok := qp.RxeQueues(); !ok || sq.Size == 0 {
		t.Error("rxe qp: no ring mmap info")
	} else {
		sqRing, err := c.MapCmdFD(sq.Offset, int(sq.Size))
		if err != nil {
			t.Fatal(err)
		}
		if sb := (*uapi.RxeQueueBuf)(unsafePointer(sqRing)); sb.IndexMask+1 < 8 {
			t.Errorf("rxe sq ring index_mask %#x for 8 WRs", sb.IndexMask)
		}
		if err := c.UnmapCmdFD(sqRing); err != nil {
			t.Fatal(err)
		}
		if err := c.UnmapCmdFD(sqRing); !errors.Is(err, unix.EINVAL) {
			t.Errorf("second unmap: %v, want EINVAL", err)
		}
		if ourMaps(t) != maps0+1 {
			t.Errorf("maps after unmap: %d, want %d", ourMaps(t), maps0+1)
		}
	}
	if err := cq.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy of a CQ in use: %v, want EBUSY", err)
	}
	_, init, err := qp.Query(uapi.IB_QP_STATE | uapi.IB_QP_CAP)
	if err != nil || init.SRQ != srq || init.Type != QPTypeRC || init.Cap.MaxSendWR < 8 {
		t.Errorf("qp query init = %+v, %v", init, err)
	}
	for _, step := range []func() error{qp.Destroy, srq.Destroy, cq.Destroy, ch.Close, pd.Destroy} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	for name, again := range map[string]func() error{"qp": qp.Destroy, "srq": srq.Destroy, "cq": cq.Destroy, "channel": ch.Close, "pd": pd.Destroy} {
		if err := again(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s destroyed twice: %v, want ErrClosed", name, err)
		}
	}

	// Leftovers are destroyed by Close; then nothing of ours remains.
	pd2, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq2, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd2.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq2, RecvCQ: cq2, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ourFDs(t); n != fds0 {
		t.Errorf("after Close: %d uverbs fds, want %d", n, fds0)
	}
	if n := ourMaps(t); n != maps0 {
		t.Errorf("after Close: %d /dev/infiniband mappings, want %d", n, maps0)
	}

	// Use after close.
	if _, err := c.AllocPD(); !errors.Is(err, ErrClosed) || !errors.Is(err, unix.EBADF) {
		t.Errorf("AllocPD after Close: %v", err)
	}
	if err := pd2.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("PD destroy after Close: %v", err)
	}
	if _, err := c.QueryPort(1); !errors.Is(err, ErrClosed) {
		t.Errorf("QueryPort after Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestVMBadInput(t *testing.T) {
	d0, _ := vmDevs(t)
	if _, err := Open("no_such_rdma_dev"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("Open(unknown) = %v, want ENODEV", err)
	}
	// The kernel checks the ioctl header's driver id: a wrong one fails.
	info, err := systemLookup{}.byName(d0.name)
	if err != nil {
		t.Fatal(err)
	}
	fds0 := ourFDs(t)
	info.Driver.ID = uapi.RDMA_DRIVER_UNKNOWN
	if _, err := openInfo(realSys{}, info, ""); !errors.Is(err, unix.EINVAL) {
		t.Errorf("GET_CONTEXT with driver id UNKNOWN on rxe: %v, want EINVAL", err)
	}
	if n := ourFDs(t); n != fds0 {
		t.Errorf("failed open left %d fds (had %d)", n, fds0)
	}
	c := mustOpen(t, d0.name)
	defer c.Close()
	if g, err := c.QueryGID(1, 1000); err != nil || g != (GID{}) {
		t.Errorf("empty GID entry = %x, %v; want the zero GID", g, err)
	}
	if _, err := c.QueryGIDEntry(1, 1000); !errors.Is(err, unix.ENODATA) {
		t.Errorf("empty GID entry: %v, want ENODATA", err)
	}
	if _, err := c.QueryGID(1, 5000); !errors.Is(err, unix.EINVAL) {
		t.Errorf("GID index beyond the table: %v, want EINVAL", err)
	}
	for _, p := range []uint8{0, 2} {
		_, err := c.QueryPort(p)
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("QueryPort(%d) = %v, want EINVAL", p, err)
		} else {
			t.Logf("QueryPort(%d): %v", p, err)
		}
		if _, err := c.GIDTable(p); err == nil {
			t.Errorf("GIDTable(%d) succeeded", p)
		}
	}
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCQ(CQAttr{CQE: int(da.MaxCQE) + 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CQ of max_cqe+1 = %v, want EINVAL", err)
	}
	if _, err := c.CreateCQ(CQAttr{CQE: 1, CompVector: c.NumCompVectors()}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CQ on comp vector %d = %v, want EINVAL", c.NumCompVectors(), err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var x [64]byte
	if _, err := pd.RegMR(addrOf(x[:]), 0, 0, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("MR of length 0 = %v, want EINVAL", err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = qp.Modify(&QPAttr{State: uapi.IB_QPS_RTS}, uapi.IB_QP_STATE)
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "modify qp to RTS") {
		t.Errorf("RESET->RTS = %v, want EINVAL naming the verb", err)
	}
	if _, err := pd.CreateQP(QPInitAttr{Type: QPType(99), SendCQ: cq, RecvCQ: cq}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QP type 99 = %v, want EINVAL", err)
	}
	if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QP without CQs = %v, want EINVAL", err)
	}
	if err := pd.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("PD with a QP: %v, want EBUSY", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("destroy twice = %v, want ErrClosed", err)
	}
	if err := qp.Modify(&QPAttr{}, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("modify after destroy = %v, want ErrClosed", err)
	}
}

// connect brings a to RTS against b (both of type typ) and returns what it set.
func connect(t *testing.T, a, b *QP, typ QPType, local, remote vmDev, psnA, psnB uint32) QPAttr {
	t.Helper()
	access := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE)
	if typ == QPTypeRC {
		access |= uapi.IB_UVERBS_ACCESS_REMOTE_READ
	}
	attr := QPAttr{State: uapi.IB_QPS_INIT, PKeyIndex: 0, Port: 1, AccessFlags: access}
	if err := a.Modify(&attr, uapi.IB_QP_STATE|uapi.IB_QP_PKEY_INDEX|uapi.IB_QP_PORT|uapi.IB_QP_ACCESS_FLAGS); err != nil {
		t.Fatal(err)
	}
	attr.State = uapi.IB_QPS_RTR
	attr.PathMTU = uapi.IB_MTU_1024
	attr.DestQPN = b.QPN()
	attr.RQPSN = psnB
	attr.AH = AHAttr{IsGlobal: true, Port: 1, GRH: GlobalRoute{DGID: ipv4GID(remote.ip), SGIDIndex: uint8(local.gidIdx), HopLimit: 64}}
	mask := uint32(uapi.IB_QP_STATE | uapi.IB_QP_AV | uapi.IB_QP_PATH_MTU | uapi.IB_QP_DEST_QPN | uapi.IB_QP_RQ_PSN)
	if typ == QPTypeRC {
		attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
		mask |= uapi.IB_QP_MAX_DEST_RD_ATOMIC | uapi.IB_QP_MIN_RNR_TIMER
	}
	if err := a.Modify(&attr, mask); err != nil {
		t.Fatal(err)
	}
	attr.State = uapi.IB_QPS_RTS
	attr.SQPSN = psnA
	mask = uapi.IB_QP_STATE | uapi.IB_QP_SQ_PSN
	if typ == QPTypeRC {
		attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = 14, 7, 7, 1
		mask |= uapi.IB_QP_TIMEOUT | uapi.IB_QP_RETRY_CNT | uapi.IB_QP_RNR_RETRY | uapi.IB_QP_MAX_QP_RD_ATOMIC
	}
	if err := a.Modify(&attr, mask); err != nil {
		t.Fatal(err)
	}
	return attr
}

func checkQueried(t *testing.T, name string, qp *QP, typ QPType, want QPAttr) {
	t.Helper()
	got, init, err := qp.Query(0x1fffff)
	if err != nil {
		t.Fatal(err)
	}
	type cmp struct {
		field     string
		got, want any
	}
	cs := []cmp{
		{"state", got.State, uint8(uapi.IB_QPS_RTS)}, {"path_mtu", got.PathMTU, want.PathMTU},
		{"dest_qpn", got.DestQPN, want.DestQPN}, {"rq_psn", got.RQPSN, want.RQPSN}, {"sq_psn", got.SQPSN, want.SQPSN},
		{"port", got.Port, want.Port}, {"access", got.AccessFlags, want.AccessFlags},
		{"is_global", got.AH.IsGlobal, true}, {"dgid", got.AH.GRH.DGID, want.AH.GRH.DGID},
		{"sgid_index", got.AH.GRH.SGIDIndex, want.AH.GRH.SGIDIndex}, {"hop_limit", got.AH.GRH.HopLimit, want.AH.GRH.HopLimit},
		{"type", init.Type, typ},
	}
	if typ == QPTypeRC {
		cs = append(cs, cmp{"timeout", got.Timeout, want.Timeout}, cmp{"retry_cnt", got.RetryCnt, want.RetryCnt},
			cmp{"rnr_retry", got.RNRRetry, want.RNRRetry}, cmp{"max_rd_atomic", got.MaxRdAtomic, want.MaxRdAtomic},
			cmp{"max_dest_rd_atomic", got.MaxDestRdAtomic, want.MaxDestRdAtomic}, cmp{"min_rnr_timer", got.MinRNRTimer, want.MinRNRTimer})
	}
	for _, c := range cs {
		if c.got != c.want {
			t.Errorf("%s: queried %s = %v, set %v", name, c.field, c.got, c.want)
		}
	}
}

func testConnectedPair(t *testing.T, typ QPType) {
	d0, d1 := vmDevs(t)
	c0, c1 := mustOpen(t, d0.name), mustOpen(t, d1.name)
	defer c0.Close()
	defer c1.Close()
	mk := func(c *Context) *QP {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := c.CreateCQ(CQAttr{CQE: 16})
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	q0, q1 := mk(c0), mk(c1)
	a0 := connect(t, q0, q1, typ, d0, d1, 0x1234, 0x4321)
	a1 := connect(t, q1, q0, typ, d1, d0, 0x4321, 0x1234)
	checkQueried(t, d0.name, q0, typ, a0)
	checkQueried(t, d1.name, q1, typ, a1)
	t.Logf("%v pair %s qpn %#x <-> %s qpn %#x at RTS", typ, d0.name, q0.QPN(), d1.name, q1.QPN())
}

func TestVMRCPair(t *testing.T) { testConnectedPair(t, QPTypeRC) }

func TestVMUCPair(t *testing.T) { testConnectedPair(t, QPTypeUC) }

func TestVMUDAndAH(t *testing.T) {
	d0, d1 := vmDevs(t)
	c := mustOpen(t, d0.name)
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, SigAll: true, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	const qkey = 0x11111111
	steps := []struct {
		attr QPAttr
		mask uint32
	}{
		{QPAttr{State: uapi.IB_QPS_INIT, Port: 1, QKey: qkey}, uapi.IB_QP_STATE | uapi.IB_QP_PKEY_INDEX | uapi.IB_QP_PORT | uapi.IB_QP_QKEY},
		{QPAttr{State: uapi.IB_QPS_RTR}, uapi.IB_QP_STATE},
		{QPAttr{State: uapi.IB_QPS_RTS, SQPSN: 77}, uapi.IB_QP_STATE | uapi.IB_QP_SQ_PSN},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	got, init, err := qp.Query(uapi.IB_QP_STATE | uapi.IB_QP_QKEY | uapi.IB_QP_SQ_PSN)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != uapi.IB_QPS_RTS || got.QKey != qkey || got.SQPSN != 77 || !init.SigAll || init.Type != QPTypeUD {
		t.Errorf("UD query: state %d qkey %#x sq_psn %d sig_all %v type %v", got.State, got.QKey, got.SQPSN, init.SigAll, init.Type)
	}
	ah, err := pd.CreateAH(AHAttr{IsGlobal: true, Port: 1, GRH: GlobalRoute{DGID: ipv4GID(d1.ip), SGIDIndex: uint8(d0.gidIdx), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ah.DriverResp()) != uapi.SizeofRxeCreateAhResp {
		t.Errorf("rxe ah driver response %d bytes", len(ah.DriverResp()))
	}
	t.Logf("ah handle %d rxe resp %x", ah.Handle(), ah.DriverResp())
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := ah.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("ah destroyed twice: %v", err)
	}
}

// TestVMAsyncEvent bounces the carrier of a scratch rxe device's netdev (its
// own veth pair, so rxe0/rxe1 and their routes are untouched) and expects
// IB_EVENT_PORT_ERR, then IB_EVENT_PORT_ACTIVE, on the async fd.
func TestVMAsyncEvent(t *testing.T) {
	vmDevs(t)
	ip := "/usr/sbin/ip"
	if _, err := os.Stat(ip); err != nil {
		ip = "ip"
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("link", "add", "vethC", "type", "veth", "peer", "name", "vethD")
	defer exec.Command(ip, "link", "del", "vethC").Run()
	run("link", "set", "vethC", "up")
	run("link", "set", "vethD", "up")
	const dev = "rxe_async"
	if err := rdmanl.AddRxeLink(dev, "vethC"); err != nil {
		t.Fatalf("add rxe link: %v", err)
	}
	defer rdmanl.DeleteLink(dev)

	var c *Context
	var err error
	for i := 0; i < 50; i++ { // udev-less: wait for the char device node
		if c, err = Open(dev); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitState := func(want uint8) {
		t.Helper()
		for i := 0; i < 50; i++ {
			if pa, err := c.QueryPort(1); err == nil && pa.State == want {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("port never reached state %d", want)
	}
	waitState(uapi.IB_PORT_ACTIVE)
	expect := func(typ uint32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			ev, err := c.GetAsyncEvent(time.Until(deadline))
			if err != nil {
				t.Fatalf("waiting for %s: %v", asyncEventName(typ), err)
			}
			t.Logf("async event: %v port %d", ev, ev.Port)
			if ev.Type == typ {
				if ev.Port != 1 {
					t.Errorf("%v: port %d, want 1", ev, ev.Port)
				}
				return
			}
		}
		t.Fatalf("no %s", asyncEventName(typ))
	}
	run("link", "set", "vethD", "down") // vethC loses its carrier
	expect(uapi.IB_EVENT_PORT_ERR)
	waitState(uapi.IB_PORT_DOWN)
	run("link", "set", "vethD", "up")
	expect(uapi.IB_EVENT_PORT_ACTIVE)
	if _, err := c.GetAsyncEvent(0); !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("GetAsyncEvent(0) with nothing pending: %v, want ETIMEDOUT", err)
	}
}

// TestVMOpenFD runs a context on a command fd opened by the caller, the way
// cshim gets one from libibverbs: Close destroys the objects but leaves the
// command and async fds to the caller.
func TestVMOpenFD(t *testing.T) {
	d0, _ := vmDevs(t)
	info, err := (systemLookup{}).byName(d0.name)
	if err != nil {
		t.Fatal(err)
	}
	fds0 := ourFDs(t)
	fd, err := unix.Open(info.Chardev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenFD(d0.name, fd)
	if err != nil {
		t.Fatal(err)
	}
	async := c.AsyncFD()
	if flags, err := unix.FcntlInt(uintptr(async), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Errorf("caller's async fd flags %#x, %v: must stay blocking", flags, err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeUC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := kernelHandles(info, fd, uapi.UVERBS_OBJECT_QP); err != nil || n != 1 {
		t.Fatalf("INFO_HANDLES before Close: %d QPs, %v; want 1", n, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []int{fd, async} {
		if _, err := unix.FcntlInt(uintptr(f), unix.F_GETFD, 0); err != nil {
			t.Errorf("fd %d closed by the context: %v", f, err)
		}
	}
	// The kernel context lives on with the fd; its object tables are empty.
	for _, obj := range []uint16{uapi.UVERBS_OBJECT_QP, uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_OBJECT_PD} {
		if n, err := kernelHandles(info, fd, obj); err != nil || n != 0 {
			t.Errorf("object type %d after Close: %d handles, %v", obj, n, err)
		}
	}
	unix.Close(async)
	unix.Close(fd)
	if n := ourFDs(t); n != fds0 {
		t.Errorf("%d uverbs fds, want %d", n, fds0)
	}
}

// kernelHandles asks the kernel how many objects of type obj the ucontext on
// fd holds (UVERBS_METHOD_INFO_HANDLES).
func kernelHandles(info DeviceInfo, fd int, obj uint16) (uint32, error) {
	raw := &cmdFD{sys: realSys{}, fd: fd, driverID: info.Driver.ID}
	var total uint32
	var list [4]uint32
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INFO_HANDLES).
		constIn(uapi.UVERBS_ATTR_INFO_OBJECT_ID, uint64(obj)).
		out(uapi.UVERBS_ATTR_INFO_TOTAL_HANDLES, bytesOf(&total)).
		out(uapi.UVERBS_ATTR_INFO_HANDLES_LIST, unsafe.Slice((*byte)(unsafe.Pointer(&list[0])), 16))
	err := raw.ioctl(ic)
	return total, err
}
