package sysinfo

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo/fakeelf"
)

func TestDecodeUSB4GUID(t *testing.T) {
	cases := []struct {
		guid    uint64
		ok      bool
		backend string
		peer    uint32
		rail    uint32
	}{
		{0x0200544256524253, true, "native", 0, 0},
		{0x0200544256524254, true, "native", 0, 1}, // the C provider's "Apple" constant is native rail 1
		{0x0300544256524253, true, "apple", 0, 0},
		{EncodeUSB4GUID(BackendNative, 3, 2), true, "native", 3, 2},
		{EncodeUSB4GUID(BackendApple, 1, 0), true, "apple", 1, 0},
		{0x0400544256524253, false, "", 0, 0},               // top byte 4
		{0x0200544356524253, true, "native", 0x100, 0},      // byte 3 carried: peer 256
		{0x0200544256524253 + 0x10000<<24, false, "", 0, 0}, // peer past usb4guid.MaxPeer
		{0x0200544200000000, false, "", 0, 0},               // below the base
		{0xe41d2d0300fa1b20, false, "", 0, 0},               // a ConnectX GUID
		{0, false, "", 0, 0},
	}
	for _, c := range cases {
		id, ok := DecodeUSB4GUID(c.guid)
		if ok != c.ok || id.Backend != c.backend || id.Peer != c.peer || id.Rail != c.rail {
			t.Errorf("DecodeUSB4GUID(%#x) = %+v, %v; want %s peer %d rail %d, %v", c.guid, id, ok, c.backend, c.peer, c.rail, c.ok)
		}
		if ok && id.AppleSlot != (c.backend == "apple") {
			t.Errorf("DecodeUSB4GUID(%#x).AppleSlot = %v", c.guid, id.AppleSlot)
		}
	}
}

func TestParseGUID(t *testing.T) {
	g, err := ParseGUID("0200:5442:5652:4253\n")
	if err != nil || g != 0x0200544256524253 {
		t.Fatalf("ParseGUID = %#x, %v", g, err)
	}
	if FormatGUID(g) != "0200:5442:5652:4253" {
		t.Errorf("FormatGUID = %s", FormatGUID(g))
	}
	for _, bad := range []string{"", "0200:5442", "zz00:5442:5652:4253", "0x", "0200:5442:5652:4253:0000"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", bad)
		}
	}
}

func TestUSB4Slot(t *testing.T) {
	for name, want := range map[string][3]int{
		"usb4_rdma0": {0, 0, 1}, "usb4_rdma4": {0, 4, 1}, "usb4_rdma5": {1, 0, 1}, "usb4_rdma9": {1, 4, 1},
		"rocep1s0f1": {0, 0, 0}, "usb4_rdma": {0, 0, 0}, "usb4_rdmax": {0, 0, 0},
	} {
		d, s, ok := USB4Slot(name)
		if d != want[0] || s != want[1] || ok != (want[2] == 1) {
			t.Errorf("USB4Slot(%s) = %d %d %v", name, d, s, ok)
		}
	}
}

func TestParseRate(t *testing.T) {
	g, w, err := ParseRate("40 Gb/sec (4X FDR10)")
	if err != nil || g != 40 || w != "4X" {
		t.Errorf("ParseRate = %v %q %v", g, w, err)
	}
	g, w, err = ParseRate("2.5 Gb/sec (1X SDR)")
	if err != nil || g != 2.5 || w != "1X" {
		t.Errorf("ParseRate = %v %q %v", g, w, err)
	}
	if _, _, err := ParseRate("fast"); err == nil {
		t.Error("ParseRate(fast) succeeded")
	}
}

func TestIBMTUForNetdev(t *testing.T) {
	for mtu, want := range map[int]int{1500: 1024, 9000: 4096, 4200: 4096, 4183: 2048, 300: 0, 65536: 4096} {
		if got := IBMTUForNetdev(mtu); got != want {
			t.Errorf("IBMTUForNetdev(%d) = %d, want %d", mtu, got, want)
		}
	}
}

// TestVersionNodesRealLibibverbs reads the host's libibverbs (Debian 12 ships
// rdma-core 44, PABI 34) when it is installed.
func TestVersionNodesRealLibibverbs(t *testing.T) {
	const lib = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
	if _, err := os.Stat(lib); err != nil {
		t.Skip("libibverbs1 not installed on the host")
	}
	nodes, err := VersionNodes(lib)
	if err != nil {
		t.Fatal(err)
	}
	pabi, public := pabiFromNodes(nodes)
	if pabi < 34 || !strings.HasPrefix(public, "IBVERBS_1.") {
		t.Errorf("pabi %d public %q from %v", pabi, public, nodes)
	}
	real, _ := filepath.EvalSymlinks(lib)
	if strings.HasSuffix(real, ".44.0") && (pabi != 34 || public != "IBVERBS_1.14") {
		t.Errorf("rdma-core 44: pabi %d public %s", pabi, public)
	}
}

func TestFakeELFRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "lib.so")
	if err := os.WriteFile(f, fakeelf.SharedObject("libibverbs.so.1", fakeelf.LibibverbsNodes(15, 59), ""), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := VersionNodes(f)
	if err != nil {
		t.Fatal(err)
	}
	if pabi, pub := pabiFromNodes(nodes); pabi != 59 || pub != "IBVERBS_1.15" {
		t.Errorf("pabi %d public %s from %v", pabi, pub, nodes)
	}
	if nodes[0] != "libibverbs.so.1" {
		t.Errorf("base node %q", nodes[0])
	}
}

// TestCollectMalformedTree feeds garbage into every file Collect reads:
// it must report problems, not panic.
func TestCollectMalformedTree(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/class/infiniband/usb4_rdma0/node_guid", "not-a-guid")
	write("sys/class/infiniband/usb4_rdma0/ports/1/rate", "garbage")
	write("sys/class/infiniband/usb4_rdma0/ports/1/state", "")
	write("sys/class/infiniband_verbs/uverbs0/ibdev", "usb4_rdma0")
	write("sys/class/infiniband_verbs/uverbs0/abi_version", "one")
	write("sys/bus/thunderbolt/devices/0-1/rx_speed", "fast")
	write("sys/bus/thunderbolt/devices/0-1/rx_lanes", "-3")
	write("sys/kernel/debug/thunderbolt_ibverbs/summary", "ok line: 1\njust garbage here\n")
	write("proc/self/limits", "Max locked memory  lots\n")
	write("proc/cmdline", "\x00\xff")
	write("etc/libibverbs.d/x.driver", "drive usb4_rdma extra\n")
	write("usr/lib/x86_64-linux-gnu/libibverbs.so.1", "\x7fELF garbage")
	write("usr/lib64/libibverbs.so.1", "\x7fELF garbage")
	s := Collect(root, Options{})
	want := []string{
		"/sys/class/infiniband/usb4_rdma0/node_guid",
		"/sys/class/infiniband/usb4_rdma0/ports/1/rate",
		"/sys/class/infiniband_verbs/uverbs0/abi_version",
		"/sys/bus/thunderbolt/devices/0-1/rx_speed",
		"/sys/bus/thunderbolt/devices/0-1/rx_lanes",
		"/sys/kernel/debug/thunderbolt_ibverbs/summary",
		"/proc/self/limits",
		"/etc/libibverbs.d/x.driver",
	}
	got := map[string]bool{}
	for _, p := range s.Problems {
		got[p.Path] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no problem reported for %s; problems: %v", w, s.Problems)
		}
	}
	if s.Verbs.PABI != 0 {
		t.Errorf("PABI %d from a garbage libibverbs", s.Verbs.PABI)
	}
	if len(s.Devices) != 1 || s.Devices[0].USB4 != nil {
		t.Errorf("devices %+v", s.Devices)
	}
}

func TestCollectMissingRoot(t *testing.T) {
	s := Collect(filepath.Join(t.TempDir(), "nope"), Options{})
	if len(s.Devices) != 0 || s.Verbs.Path != "" || s.Memlock.Known {
		t.Errorf("facts from a missing root: %+v", s)
	}
}

func TestParseUdevRule(t *testing.T) {
	var u UdevRename
	parseUdevRule(`# comment rdma_rename NAME_FALLBACK
ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"`, &u)
	if !u.Active || u.ExcludesUSB4 || u.Policy != "NAME_FALLBACK" {
		t.Errorf("%+v", u)
	}
	u = UdevRename{}
	parseUdevRule(`ACTION=="add", SUBSYSTEM=="infiniband", KERNEL=="usb4_rdma*", GOTO="end"
ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"`, &u)
	if !u.ExcludesUSB4 {
		t.Errorf("%+v", u)
	}
	u = UdevRename{}
	parseUdevRule(`ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"`, &u)
	if u.Active {
		t.Errorf("NAME_KERNEL counted as a rename: %+v", u)
	}
}

func FuzzParseVerdef(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, []byte("\x00A\x00"))
	f.Fuzz(func(t *testing.T, d, strs []byte) {
		_, _ = parseVerdef(d, strs, binary.LittleEndian)
	})
}

func FuzzParseGUID(f *testing.F) {
	f.Add("0200:5442:5652:4253")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGUID(s)
		if err == nil && strings.Contains(s, ":") {
			if back, err := ParseGUID(FormatGUID(g)); err != nil || back != g {
				t.Fatalf("round trip %q -> %#x -> %v", s, g, err)
			}
		}
	})
}

// TestDecodeUSB4GUIDWholeRange: every peer (issue 12 item 11: from 0xAA on
// the GUID's byte 3 carries) and the rails that matter, on both backends.
func TestDecodeUSB4GUIDWholeRange(t *testing.T) {
	bad := 0
	for backend := 0; backend <= BackendApple; backend++ {
		for peer := uint32(0); peer <= 0xFFFF; peer++ {
			for _, rail := range []uint32{0, 1, 3, 0xAD} {
				g := EncodeUSB4GUID(backend, peer, rail)
				id, ok := DecodeUSB4GUID(g)
				if !ok || id.Peer != peer || id.Rail != rail || id.AppleSlot != (backend == BackendApple) {
					if bad++; bad <= 10 {
						t.Errorf("DecodeUSB4GUID(%#016x) = %+v, %v; want peer %#x rail %#x", g, id, ok, peer, rail)
					}
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d mismatches in all", bad)
	}
}
