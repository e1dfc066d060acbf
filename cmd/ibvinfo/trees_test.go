package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/internal/sysinfo/fakeelf"
)

// The fixture trees under testdata/trees are written by this generator
// (go test ./cmd/ibvinfo -run TestGenerateTrees -gentrees) and committed;
// the golden tests read the committed files. Each tree is the healthy
// two-cable setup with one thing broken.
var genTrees = flag.Bool("gentrees", false, "rewrite testdata/trees from the generator")

// node is one file of a tree: content, or a symlink target when link is set.
type node struct {
	data string
	link string
}

type treeSpec map[string]node

func (t treeSpec) file(p, s string) { t[p] = node{data: s} }
func (t treeSpec) link(p, target string) {
	t[p] = node{link: target}
}

// dir makes a directory the way sysfs shows an empty driver directory: with
// its uevent attribute (git stores no empty directories).
func (t treeSpec) dir(p string) { t[p+"/uevent"] = node{data: ""} }

func (t treeSpec) removePrefix(prefix string) {
	for k := range t {
		if strings.HasPrefix(k, prefix) {
			delete(t, k)
		}
	}
}

const (
	libdir      = "usr/lib/x86_64-linux-gnu"
	debugfs     = "sys/kernel/debug/thunderbolt_ibverbs"
	tbnetBind   = "sys/bus/thunderbolt/drivers/thunderbolt-net"
	udevVendor  = "usr/lib/udev/rules.d/60-rdma-persistent-naming.rules"
	udevLocal   = "etc/udev/rules.d/60-rdma-persistent-naming.rules"
	udevRuleTxt = `# Name RDMA devices by their bus path (fixture written for usb4verbs tests)
ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"
`
)

// usb4Dev describes one device of the healthy setup.
type usb4Dev struct {
	name    string
	backend int
	peer    uint32
	rail    uint32
}

// The healthy setup: two cables (domains 0 and 1) to one peer host, two
// native rails per cable plus each domain's Apple slot (usb4_rdmaN with
// N = domain*5 + slot). Checked against the bed's capture (testdata/bed):
// the module numbers peers from 1, its GID table holds RoCE v2 entries only
// (link-local, then IPv4-mapped), fw_ver is empty and verbs_registered is a
// flag. Two cables to one peer need the patched header's source-aware
// control handler (tests/usb4/tbloop/README.md); a stock kernel binds one.
var healthyDevs = []usb4Dev{
	{"usb4_rdma0", sysinfo.BackendNative, 1, 0},
	{"usb4_rdma1", sysinfo.BackendNative, 1, 1},
	{"usb4_rdma4", sysinfo.BackendApple, 1, 0},
	{"usb4_rdma5", sysinfo.BackendNative, 1, 2},
	{"usb4_rdma6", sysinfo.BackendNative, 1, 3},
	{"usb4_rdma9", sysinfo.BackendApple, 1, 1},
}

func summaryText(send, posted, completed, rx uint64) string {
	return fmt.Sprintf(`profile: linux_perf
native_enabled: 1
apple_enabled: 1
rc_supported: 1
uc_supported: 1
configured_links: 2
register_verbs: 1
verbs_registered: 1
verbs_ucontexts: 2
verbs_pds: 2
verbs_cqs: 4
verbs_qps: 4
verbs_mrs: 8
data_wr_send: %d
data_tx_posted: %d
data_tx_completed: %d
data_tx_errors: 0
data_rx_completed: %d
data_rx_bad_frame: 0
data_wr_retransmit: 0
data_wr_timeout: 0
data_cq_overflow: 0
`, send, posted, completed, rx)
}

func addDevice(t treeSpec, name string, guid uint64, uverbs int, gids bool) {
	base := "sys/class/infiniband/" + name
	g := sysinfo.FormatGUID(guid)
	t.file(base+"/node_guid", g+"\n")
	t.file(base+"/sys_image_guid", g+"\n")
	t.file(base+"/node_type", "1: CA\n")
	t.file(base+"/fw_ver", "\n")
	t.link(base+"/device/driver", "../../../../../bus/pci/drivers/thunderbolt")
	p := base + "/ports/1"
	t.file(p+"/state", "4: ACTIVE\n")
	t.file(p+"/phys_state", "5: LinkUp\n")
	t.file(p+"/rate", "40 Gb/sec (4X FDR10)\n")
	t.file(p+"/link_layer", "Ethernet\n")
	// The kernel GID cache fills entries from roce_netdev (tbv0, 10.77.0.1):
	// a link-local and an IPv4-mapped GID, each as RoCE v1 and v2.
	entries := []struct{ gid, typ string }{
		{"fe80:0000:0000:0000:0c2a:4bff:fe11:0001", "RoCE v2"},
		{"0000:0000:0000:0000:0000:ffff:0a4d:0001", "RoCE v2"},
	}
	for i := range 8 {
		idx := fmt.Sprint(i)
		if gids && i < len(entries) {
			t.file(p+"/gids/"+idx, entries[i].gid+"\n")
			t.file(p+"/gid_attrs/types/"+idx, entries[i].typ+"\n")
			t.file(p+"/gid_attrs/ndevs/"+idx, "tbv0\n")
		} else {
			t.file(p+"/gids/"+idx, "0000:0000:0000:0000:0000:0000:0000:0000\n")
		}
	}
	u := fmt.Sprintf("sys/class/infiniband_verbs/uverbs%d", uverbs)
	t.file(u+"/ibdev", name+"\n")
	t.file(u+"/abi_version", "1\n")
}

func addLibibverbs(t treeSpec, public int, version string, pabi int) {
	real := fmt.Sprintf("libibverbs.so.1.%d.%s", public, version)
	t.link(libdir+"/libibverbs.so.1", real)
	t.file(libdir+"/"+real, string(fakeelf.SharedObject("libibverbs.so.1", fakeelf.LibibverbsNodes(public, pabi), "")))
}

// ourProvider installs our Go provider as one file with a link per PABI,
// the way the package does.
func ourProvider(t treeSpec, dir string, pabis ...int) {
	first := fmt.Sprintf("libusb4_rdma-rdmav%d.so", pabis[0])
	t.file(dir+"/"+first, string(fakeelf.SharedObject("libusb4_rdma.so", nil, sysinfo.OurModule)))
	for _, p := range pabis[1:] {
		t.link(fmt.Sprintf("%s/libusb4_rdma-rdmav%d.so", dir, p), first)
	}
}

func healthyTree() treeSpec {
	t := treeSpec{}
	t.file("sys/class/infiniband_verbs/abi_version", "6\n")
	for i, d := range healthyDevs {
		addDevice(t, d.name, sysinfo.EncodeUSB4GUID(d.backend, d.peer, d.rail), i, true)
	}
	for dom := range 2 {
		ds := fmt.Sprint(dom)
		t.file("sys/bus/thunderbolt/devices/domain"+ds+"/security", "user\n")
		t.file("sys/bus/thunderbolt/devices/"+ds+"-0/device_name", "Strix Halo host router\n")
		x := "sys/bus/thunderbolt/devices/" + ds + "-1"
		t.file(x+"/device_name", "strix-b\n")
		t.file(x+"/vendor_name", "Linux\n")
		t.file(x+"/unique_id", fmt.Sprintf("c1a0b3d2-55e7-4a1f-9d0e-2f6a7c1b000%d\n", dom))
		t.file(x+"/rx_speed", "20.0 Gb/s\n")
		t.file(x+"/tx_speed", "20.0 Gb/s\n")
		t.file(x+"/rx_lanes", "2\n")
		t.file(x+"/tx_lanes", "2\n")
		t.file(x+".1/key", "\n") // the RDMA service of the peer: no link attributes
	}
	t.dir("sys/bus/thunderbolt/drivers/thunderbolt_ibverbs")
	params := map[string]string{
		"profile": "linux_perf", "register_verbs": "Y", "roce_netdev": "tbv0", "lanes": "auto",
		"tbnet": "block", "tbnet_identity": "auto", "native_data": "Y", "apple_data": "Y",
		"native_fragment_striping": "1", "zcopy_min_bytes": "4096", "native_tx_max_inflight": "32",
		"nhi_interrupt_throttle_ns": "0", "qp_timeout_ms": "5000", "bind_services": "Y",
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		t.file("sys/module/thunderbolt_ibverbs/parameters/"+k, params[k]+"\n")
	}
	t.file(debugfs+"/summary", summaryText(1000, 1000, 998, 1200))
	t.file(debugfs+"/summary.2", summaryText(51000, 51000, 50990, 61200))
	t.file(debugfs+"/peers", "peer 1 backend=native rails=4 native_qp_rr_rail_id=0\n  rail=0x0 route=0x1 local=1 remote=1 path=1 link_speed=20Gb/s link_width=0x2 active=1 service_ready=1 data_ready=1 state=tunnel_enabled negotiated=1\n    data_tx_enqueued=0 data_tx_posted=0 data_tx_completed=0 tx_credits=768/768\n")
	t.file(debugfs+"/configured_links", "link 0 name=rails01 backend=native dev=usb4_rdma0 port=1 gid=1 gid_type=v2 addr=10.77.0.1\nlink 1 name=rails56 backend=native dev=usb4_rdma5 port=1 gid=1 gid_type=v2 addr=10.77.0.1\n")
	t.file("sys/class/net/tbv0/mtu", "1500\n")
	t.file("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.14.0 root=/dev/nvme0n1p2 ro quiet iommu=pt\n")
	t.link("sys/class/iommu/ivhd0", "../../devices/pci0000:00/0000:00:00.2/iommu/ivhd0")
	for g := range 3 {
		t.file(fmt.Sprintf("sys/kernel/iommu_groups/%d/type", g), "identity\n")
	}
	t.file("proc/self/limits", limitsText("unlimited"))
	t.file("proc/self/status", "Name:\tibvinfo\nCapEff:\t0000000000000000\n")
	t.file("proc/self/environ", "HOME=/home/user\x00PATH=/usr/bin:/bin\x00")
	t.file(udevVendor, udevRuleTxt)
	t.file(udevLocal, `# usb4verbs: keep kernel names for usb4_rdma devices
ACTION=="add", SUBSYSTEM=="infiniband", KERNEL=="usb4_rdma*", GOTO="rdma_naming_end"
ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"
LABEL="rdma_naming_end"
`)
	// Ubuntu 24.04: rdma-core 50, PABI 34.
	addLibibverbs(t, 14, "50.0", 34)
	t.file("etc/libibverbs.d/usb4_rdma.driver", "driver usb4_rdma\n")
	t.file("etc/libibverbs.d/rxe.driver", "driver rxe\n")
	t.file(libdir+"/libibverbs/librxe-rdmav34.so", string(fakeelf.SharedObject("librxe.so", nil, "")))
	ourProvider(t, libdir+"/libibverbs", 34, 57, 59, 64, 65)
	return t
}

func limitsText(memlock string) string {
	return fmt.Sprintf(`Limit                     Soft Limit           Hard Limit           Units
Max open files            1024                 524288               files
Max locked memory         %-20s %-20s bytes
`, memlock, memlock)
}

// fixtureTrees maps each tree to how it differs from the healthy one and
// the findings (check IDs with verdict warn or error) it must produce.
var fixtureTrees = []struct {
	name     string
	mutate   func(treeSpec)
	findings []string
}{
	{"healthy", func(treeSpec) {}, nil},
	{"link-trained-down", func(t treeSpec) {
		t.file("sys/bus/thunderbolt/devices/1-1/rx_speed", "10.0 Gb/s\n")
		t.file("sys/bus/thunderbolt/devices/1-1/tx_lanes", "1\n")
	}, []string{"link-trained-down"}},
	{"thunderbolt-net-loaded", func(t treeSpec) {
		t.file("sys/module/thunderbolt_net/initstate", "live\n")
		t.dir(tbnetBind)
	}, []string{"thunderbolt-net-loaded"}},
	{"thunderbolt-net-bound", func(t treeSpec) {
		// thunderbolt_net took domain 0's second ring: rail 1 is gone.
		t.file("sys/module/thunderbolt_net/initstate", "live\n")
		t.file(tbnetBind+"/0-1.0/key", "\n")
		t.file("sys/bus/thunderbolt/devices/0-1.0/key", "\n")
		t.removePrefix("sys/class/infiniband/usb4_rdma1/")
		t.removePrefix("sys/class/infiniband_verbs/uverbs1/")
	}, []string{"thunderbolt-net-bound"}},
	{"roce-netdev-unset", func(t treeSpec) {
		t.file("sys/module/thunderbolt_ibverbs/parameters/roce_netdev", "\n")
		for i, d := range healthyDevs {
			t.removePrefix("sys/class/infiniband/" + d.name + "/")
			addDevice(t, d.name, sysinfo.EncodeUSB4GUID(d.backend, d.peer, d.rail), i, false)
		}
	}, []string{"roce-netdev-unset"}},
	{"udev-rename-active", func(t treeSpec) {
		// Ubuntu's stock rule renamed every device after its NHI's bus path.
		delete(t, udevLocal)
		t.removePrefix("sys/class/infiniband/")
		t.removePrefix("sys/class/infiniband_verbs/uverbs")
		for i, d := range healthyDevs {
			name := fmt.Sprintf("rocep%ds0f%d", 195+i/3, i%3)
			addDevice(t, name, sysinfo.EncodeUSB4GUID(d.backend, d.peer, d.rail), i, true)
		}
	}, []string{"udev-rename-active"}},
	// pleite-main built with tbv_gpu_direct=1 but loaded with gpu_direct=off.
	{"gpu-direct-off", func(t treeSpec) {
		t.file("sys/module/thunderbolt_ibverbs/parameters/gpu_direct", "off\n")
	}, []string{"gpu-memory"}},
	{"memlock-low", func(t treeSpec) {
		t.file("proc/self/limits", limitsText("8388608"))
	}, []string{"memlock-low"}},
	// A container started without --device: its sysfs lists every device,
	// its /dev has no infiniband nodes.
	{"uverbs-device-missing", func(t treeSpec) {
		t.file("dev/null", "")
	}, []string{"uverbs-device-missing"}},
	// A container given one device: the others' nodes are absent, no finding.
	{"uverbs-device-one-passed", func(t treeSpec) {
		t.file("dev/infiniband/uverbs0", "")
	}, nil},
	{"iommu-on", func(t treeSpec) {
		t.file("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.14.0 root=/dev/nvme0n1p2 ro quiet\n")
		for g := range 3 {
			t.file(fmt.Sprintf("sys/kernel/iommu_groups/%d/type", g), "DMA-FQ\n")
		}
	}, []string{"iommu-on"}},
	{"provider-not-installed", func(t treeSpec) {
		delete(t, "etc/libibverbs.d/usb4_rdma.driver")
		t.removePrefix(libdir + "/libibverbs/libusb4_rdma")
	}, []string{"provider-loadable"}},
	{"provider-wrong-pabi", func(t treeSpec) {
		// Ubuntu 26.04: rdma-core 61 (PABI 59) with a provider built for 34 only.
		t.removePrefix(libdir + "/libibverbs.so")
		addLibibverbs(t, 15, "61.0", 59)
		t.removePrefix(libdir + "/libibverbs/libusb4_rdma")
		t.file(libdir+"/libibverbs/libusb4_rdma-rdmav34.so", string(fakeelf.SharedObject("libusb4_rdma.so", nil, "")))
		t.removePrefix(libdir + "/libibverbs/librxe")
		t.file(libdir+"/libibverbs/librxe-rdmav59.so", string(fakeelf.SharedObject("librxe.so", nil, "")))
	}, []string{"provider-loadable"}},
	{"device-claimed-by-another-provider", func(t treeSpec) {
		// Ours lives in its own directory behind an absolute .driver path;
		// the old C provider (rdma_provider(usb4_rdma)) is also installed.
		t.removePrefix(libdir + "/libibverbs/libusb4_rdma")
		ourProvider(t, libdir+"/usb4verbs", 34, 57, 59, 64, 65)
		t.file("etc/libibverbs.d/usb4verbs.driver", "driver /"+libdir+"/usb4verbs/libusb4_rdma\n")
		t.file(libdir+"/libibverbs/libusb4_rdma-rdmav34.so", string(fakeelf.SharedObject("libusb4_rdma.so", nil, "")))
	}, []string{"device-claimed-by-another-provider"}},
	{"apple-slot-device", func(t treeSpec) {
		t.file("proc/self/environ", "HOME=/home/user\x00NCCL_IB_HCA=usb4_rdma4\x00PATH=/usr/bin:/bin\x00")
	}, []string{"apple-slot-device"}},
	{"counters-not-moving", func(t treeSpec) {
		t.file(debugfs+"/summary.2", summaryText(1000, 1000, 998, 1200))
	}, []string{"counters-not-moving"}},
}

func writeTree(t *testing.T, dir string, spec treeSpec) {
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(spec)) {
		n := spec[p]
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if n.link != "" {
			if err := os.Symlink(n.link, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(n.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGenerateTrees(t *testing.T) {
	if !*genTrees {
		t.Skip("run with -gentrees to rewrite testdata/trees")
	}
	for _, ft := range fixtureTrees {
		spec := healthyTree()
		ft.mutate(spec)
		writeTree(t, filepath.Join("testdata", "trees", ft.name), spec)
	}
}

// TestTreesUpToDate regenerates every tree into a temporary directory and
// compares it with the committed one, so the generator stays the source.
func TestTreesUpToDate(t *testing.T) {
	hostOnly(t)
	for _, ft := range fixtureTrees {
		spec := healthyTree()
		ft.mutate(spec)
		tmp := filepath.Join(t.TempDir(), ft.name)
		writeTree(t, tmp, spec)
		want := snapshotTree(t, tmp)
		got := snapshotTree(t, treeDir(ft.name))
		for p, w := range want {
			if g, ok := got[p]; !ok || g != w {
				t.Errorf("%s/%s differs from the generator (run -gentrees)", ft.name, p)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				t.Errorf("%s/%s is not produced by the generator (run -gentrees)", ft.name, p)
			}
		}
	}
}

// snapshotTree maps each file or symlink under dir to its content or
// "-> target".
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			m[rel] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
