package rdmanl

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// These tests need a real RDMA kernel; tests/vm/run.sh sets USB4VERBS_VM=1
// after creating rxe devices DEV0 on NETDEV0 and DEV1 on NETDEV1.

type vmEnv struct {
	devs, netdevs [2]string
}

func needVM(t *testing.T) vmEnv {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") != "1" {
		t.Skip("needs the VM harness (USB4VERBS_VM=1): real kernel with rxe devices")
	}
	e := vmEnv{
		devs:    [2]string{os.Getenv("USB4VERBS_DEV0"), os.Getenv("USB4VERBS_DEV1")},
		netdevs: [2]string{os.Getenv("USB4VERBS_NETDEV0"), os.Getenv("USB4VERBS_NETDEV1")},
	}
	for _, s := range append(e.devs[:], e.netdevs[:]...) {
		if s == "" {
			t.Fatal("USB4VERBS_DEV0/1 and USB4VERBS_NETDEV0/1 must be set")
		}
	}
	return e
}

func vmHandle(t *testing.T) *Handle {
	t.Helper()
	h, err := NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestVMDevices(t *testing.T) {
	env := needVM(t)
	h := vmHandle(t)
	devs, err := h.Devices()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Device{}
	for _, d := range devs {
		t.Logf("%+v", d)
		byName[d.Name] = d
	}
	for _, name := range env.devs {
		d, ok := byName[name]
		if !ok {
			t.Fatalf("%s missing from %+v", name, devs)
		}
		if d.NodeGUID == 0 || d.Protocol != "roce" || d.NodeType != uapi.RDMA_NODE_IB_CA || d.NumPorts != 1 {
			t.Errorf("%s: %+v", name, d)
		}
		if d.DriverID != uapi.RDMA_DRIVER_RXE {
			t.Errorf("%s: driver id %d, want RDMA_DRIVER_RXE (%d)", name, d.DriverID, uapi.RDMA_DRIVER_RXE)
		}
		got, err := h.DeviceByIndex(d.Index)
		if err != nil || got != d {
			t.Errorf("DeviceByIndex(%d) = %+v, %v; want %+v", d.Index, got, err, d)
		}
		if got, err := DeviceByName(name); err != nil || got != d {
			t.Errorf("DeviceByName(%s) = %+v, %v", name, got, err)
		}
	}
	// rxe derives the node GUID from the netdev's MAC (EUI-64).
	for i, name := range env.devs {
		ifc, err := net.InterfaceByName(env.netdevs[i])
		if err != nil {
			t.Fatal(err)
		}
		m := ifc.HardwareAddr
		want := uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xff<<32 | 0xfe<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
		if byName[name].NodeGUID != want {
			t.Errorf("%s: node GUID %#016x, want %#016x from MAC %s", name, byName[name].NodeGUID, want, m)
		}
	}
	// vishvananda/netlink reads the same dump independently.
	links, err := netlink.RdmaLinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != len(devs) {
		t.Errorf("vishvananda sees %d devices, we see %d", len(links), len(devs))
	}
	for _, l := range links {
		if d, ok := byName[l.Attrs.Name]; !ok || d.Index != l.Attrs.Index || d.NumPorts != l.Attrs.NumPorts {
			t.Errorf("vishvananda %+v, ours %+v", l.Attrs, d)
		}
	}
}

func TestVMPorts(t *testing.T) {
	env := needVM(t)
	h := vmHandle(t)
	for i, name := range env.devs {
		d, err := h.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ports, err := h.Ports(d.Index)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, ports)
		ifc, err := net.InterfaceByName(env.netdevs[i])
		if err != nil {
			t.Fatal(err)
		}
		want := Port{DeviceIndex: d.Index, DeviceName: name, Port: 1, State: uapi.IB_PORT_ACTIVE, PhysState: 5, // LinkUp
			LinkLayer: "Ethernet", NetdevIndex: uint32(ifc.Index), NetdevName: env.netdevs[i]}
		if len(ports) != 1 || ports[0] != want {
			t.Errorf("%s ports %+v\nwant %+v", name, ports, want)
		}
	}
}

func TestVMChardev(t *testing.T) {
	env := needVM(t)
	h := vmHandle(t)
	for _, name := range env.devs {
		d, err := h.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		cd, err := h.UverbsChardev(d.Index)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, cd)
		var st unix.Stat_t
		if err := unix.Stat(cd.Path, &st); err != nil {
			t.Errorf("%s: %v", cd.Path, err)
		} else if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != cd.Dev {
			t.Errorf("%s: mode %o rdev %#x, want a char device %#x", cd.Path, st.Mode, st.Rdev, cd.Dev)
		}
		sys := filepath.Join("/sys/class/infiniband_verbs", cd.Name)
		abi, err := os.ReadFile(filepath.Join(sys, "abi_version"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(abi)) != strconv.FormatUint(cd.ABIVersion, 10) {
			t.Errorf("%s: abi %d, sysfs says %s", name, cd.ABIVersion, abi)
		}
		ibdev, _ := os.ReadFile(filepath.Join(sys, "ibdev"))
		if strings.TrimSpace(string(ibdev)) != name {
			t.Errorf("%s: %s belongs to %q", name, cd.Name, ibdev)
		}
		if cd.DriverID != uapi.RDMA_DRIVER_RXE {
			t.Errorf("%s: driver id %d, want %d", name, cd.DriverID, uapi.RDMA_DRIVER_RXE)
		}
		sc, err := SysfsUverbs("", name)
		if err != nil {
			t.Fatal(err)
		}
		sc.DriverID = cd.DriverID // sysfs has no driver id
		if sc != cd {
			t.Errorf("sysfs %+v, netlink %+v", sc, cd)
		}
	}
}

func TestVMNetnsMode(t *testing.T) {
	needVM(t)
	ex, err := NetnsMode()
	if err != nil {
		t.Fatal(err)
	}
	mode, err := netlink.RdmaSystemGetNetnsMode()
	if err != nil {
		t.Fatal(err)
	}
	if ex != (mode == "exclusive") {
		t.Errorf("exclusive %v, vishvananda says %q", ex, mode)
	}
	if ex {
		t.Errorf("a fresh kernel defaults to shared mode (netns_mode=1), got exclusive")
	}
}

func TestVMSysfsMatchesNetlink(t *testing.T) {
	needVM(t)
	h := vmHandle(t)
	nl, err := h.Devices()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := SysfsDevices("")
	if err != nil {
		t.Fatal(err)
	}
	if len(sys) != len(nl) {
		t.Fatalf("sysfs %d devices, netlink %d", len(sys), len(nl))
	}
	for _, n := range nl {
		var s *Device
		for i := range sys {
			if sys[i].Name == n.Name {
				s = &sys[i]
			}
		}
		if s == nil {
			t.Errorf("%s not in sysfs", n.Name)
			continue
		}
		s.Index, s.DriverID = n.Index, n.DriverID // not in sysfs
		if *s != n {
			t.Errorf("sysfs %+v\nnetlink %+v", *s, n)
		}
		nlPorts, err := h.Ports(n.Index)
		if err != nil {
			t.Fatal(err)
		}
		sysPorts, err := SysfsPorts("", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(sysPorts) != len(nlPorts) {
			t.Fatalf("%s: sysfs %d ports, netlink %d", n.Name, len(sysPorts), len(nlPorts))
		}
		for i := range nlPorts {
			sysPorts[i].DeviceIndex = n.Index
			if sysPorts[i] != nlPorts[i] {
				t.Errorf("%s port %d: sysfs %+v\nnetlink %+v", n.Name, i+1, sysPorts[i], nlPorts[i])
			}
		}
	}
}

func TestVMNotFound(t *testing.T) {
	needVM(t)
	h := vmHandle(t)
	check := func(what string, err error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENODEV) {
			t.Errorf("%s: %v, want ErrNotFound", what, err)
		}
	}
	_, err := h.DeviceByName("nosuch0")
	check("DeviceByName", err)
	_, err = h.DeviceByIndex(1 << 30)
	check("DeviceByIndex", err)
	_, err = h.Ports(1 << 30)
	check("Ports", err)
	_, err = h.UverbsChardev(1 << 30)
	check("UverbsChardev", err)
	check("DeleteLink", h.DeleteLink("nosuch0"))
}

// TestVMAddDeleteLink creates rxe2 on a fresh veth pair, checks it the way
// the harness' devices are checked, and removes it.
func TestVMAddDeleteLink(t *testing.T) {
	env := needVM(t)
	h := vmHandle(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vethC"}, PeerName: "vethD"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	for _, n := range []string{"vethC", "vethD"} {
		l, err := netlink.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	const name = "rxe2"
	if err := h.AddRxeLink(name, "vethC"); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = h.DeleteLink(name)
		}
	})
	d, err := h.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if d.Protocol != "roce" || d.DriverID != uapi.RDMA_DRIVER_RXE || d.NodeGUID == 0 {
		t.Errorf("new device %+v", d)
	}
	ports, err := h.Ports(d.Index)
	if err != nil || len(ports) != 1 || ports[0].NetdevName != "vethC" {
		t.Errorf("new device ports %+v %v", ports, err)
	}
	if _, err := h.UverbsChardev(d.Index); err != nil {
		t.Errorf("new device chardev: %v", err)
	}

	// Errors from the kernel keep their errno and text.
	err = h.AddRxeLink(name, "vethD")
	t.Logf("duplicate name: %v", err)
	if err == nil {
		t.Errorf("second %s accepted", name)
	}
	err = h.AddRxeLink("rxe3", env.netdevs[0])
	t.Logf("netdev already bound: %v", err)
	if err == nil {
		t.Errorf("a second rxe on %s accepted", env.netdevs[0])
		_ = h.DeleteLink("rxe3")
	}
	err = h.AddRxeLink("rxe3", "nosuchnetdev")
	t.Logf("unknown netdev: %v", err)
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("unknown netdev: %v, want ENODEV", err)
	}

	if err := h.DeleteLink(name); err != nil {
		t.Fatal(err)
	}
	deleted = true
	if _, err := h.DeviceByName(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if err := h.DeleteLink(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	// The harness' devices are untouched.
	for _, n := range env.devs {
		if _, err := h.DeviceByName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestVMOtherNetns opens a handle in a fresh network namespace. In shared
// mode the devices are visible there, but their netdevs are not, so ports
// carry no netdev (nldev.c fill_port_info only reports a netdev of the
// caller's namespace).
func TestVMOtherNetns(t *testing.T) {
	env := needVM(t)
	ns := newNetns(t)
	h, err := NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d, err := h.DeviceByName(env.devs[0])
	if err != nil {
		t.Fatalf("shared mode, other netns: %v", err)
	}
	ports, err := h.Ports(d.Index)
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %+v %v", ports, err)
	}
	if ports[0].NetdevName != "" || ports[0].NetdevIndex != 0 {
		t.Errorf("netdev of another namespace reported: %+v", ports[0])
	}
	// The calling goroutine is back in its own namespace.
	if _, err := net.InterfaceByName(env.netdevs[0]); err != nil {
		t.Errorf("lost the original netns: %v", err)
	}
}

func newNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		runtime.LockOSThread() // keep the stray thread from being reused
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}
