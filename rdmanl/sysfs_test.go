package rdmanl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// writeTree creates files (path -> content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeSysfs is what Linux 6.1 shows for one rxe device on vethA and one IB
// device with two ports.
func fakeSysfs(t *testing.T) string {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"sys/class/infiniband/rxe0/node_guid":                 "5054:00ff:fe12:3456\n",
		"sys/class/infiniband/rxe0/sys_image_guid":            "5054:00ff:fe12:3456\n",
		"sys/class/infiniband/rxe0/node_type":                 "1: CA\n",
		"sys/class/infiniband/rxe0/fw_ver":                    "\n",
		"sys/class/infiniband/rxe0/ports/1/state":             "4: ACTIVE\n",
		"sys/class/infiniband/rxe0/ports/1/phys_state":        "5: LinkUp\n",
		"sys/class/infiniband/rxe0/ports/1/link_layer":        "Ethernet\n",
		"sys/class/infiniband/rxe0/ports/1/lid":               "0x0\n",
		"sys/class/infiniband/rxe0/ports/1/sm_lid":            "0x0\n",
		"sys/class/infiniband/rxe0/ports/1/cap_mask":          "0x00890000\n",
		"sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0": "vethA\n",
		"sys/class/net/vethA/ifindex":                         "7\n",
		"sys/class/infiniband/mlx5_0/node_guid":               "0002:c903:0010:1234\n",
		"sys/class/infiniband/mlx5_0/node_type":               "1: CA\n",
		"sys/class/infiniband/mlx5_0/fw_ver":                  "16.35.2000\n",
		"sys/class/infiniband/mlx5_0/ports/1/state":           "1: DOWN\n",
		"sys/class/infiniband/mlx5_0/ports/1/phys_state":      "3: Disabled\n",
		"sys/class/infiniband/mlx5_0/ports/1/link_layer":      "InfiniBand\n",
		"sys/class/infiniband/mlx5_0/ports/1/lid":             "0x1a\n",
		"sys/class/infiniband/mlx5_0/ports/1/sm_lid":          "0x1\n",
		"sys/class/infiniband/mlx5_0/ports/1/cap_mask":        "0x2659e848\n",
		"sys/class/infiniband/mlx5_0/ports/2/state":           "4: ACTIVE\n",
		"sys/class/infiniband/mlx5_0/ports/2/phys_state":      "5: LinkUp\n",
		"sys/class/infiniband/mlx5_0/ports/2/link_layer":      "InfiniBand\n",
		"sys/class/infiniband_verbs/abi_version":              "6\n",
		"sys/class/infiniband_verbs/uverbs0/ibdev":            "rxe0\n",
		"sys/class/infiniband_verbs/uverbs0/abi_version":      "2\n",
		"sys/class/infiniband_verbs/uverbs0/dev":              "231:192\n",
		"sys/class/infiniband_verbs/uverbs1/ibdev":            "mlx5_0\n",
		"sys/class/infiniband_verbs/uverbs1/abi_version":      "1\n",
		"sys/class/infiniband_verbs/uverbs1/dev":              "231:193\n",
	})
	return root
}

func TestSysfsDevices(t *testing.T) {
	root := fakeSysfs(t)
	devs, err := SysfsDevices(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Name: "mlx5_0", NodeGUID: 0x0002c90300101234, NodeType: 1, FirmwareVersion: "16.35.2000", NumPorts: 2, Protocol: "ib"},
		{Name: "rxe0", NodeGUID: 0x505400fffe123456, SysImageGUID: 0x505400fffe123456, NodeType: 1, NumPorts: 1, Protocol: "roce"},
	}
	if len(devs) != 2 || devs[0] != want[0] || devs[1] != want[1] {
		t.Fatalf("got  %+v\nwant %+v", devs, want)
	}
}

func TestSysfsPorts(t *testing.T) {
	root := fakeSysfs(t)
	ports, err := SysfsPorts(root, "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	want := Port{DeviceName: "rxe0", Port: 1, State: 4, PhysState: 5, LinkLayer: "Ethernet", NetdevName: "vethA", NetdevIndex: 7}
	if len(ports) != 1 || ports[0] != want {
		t.Fatalf("got  %+v\nwant %+v", ports, want)
	}
	ports, err = SysfsPorts(root, "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	wantIB := Port{DeviceName: "mlx5_0", Port: 1, State: 1, PhysState: 3, LinkLayer: "InfiniBand", LID: 0x1a, SMLID: 1, CapFlags: 0x2659e848}
	if len(ports) != 2 || ports[0] != wantIB || ports[1].Port != 2 || ports[1].State != 4 {
		t.Fatalf("got %+v", ports)
	}
	if _, err := SysfsPorts(root, "nosuch"); !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("missing device: %v", err)
	}
	if _, err := SysfsPorts(root, "../../etc"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("path in device name: %v", err)
	}
}

func TestSysfsUverbs(t *testing.T) {
	root := fakeSysfs(t)
	c, err := SysfsUverbs(root, "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	want := Chardev{Path: filepath.Join(root, "dev/infiniband/uverbs1"), Name: "uverbs1", ABIVersion: 1, Dev: unix.Mkdev(231, 193)}
	if c != want {
		t.Fatalf("got %+v want %+v", c, want)
	}
	if _, err := SysfsUverbs(root, "nosuch"); !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("missing: %v", err)
	}
	if c, err := SysfsUverbs("", "surely-not-a-device"); !errors.Is(err, ErrNotFound) {
		t.Errorf("real root: %+v %v", c, err)
	}
}

func TestSysfsMalformed(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"guid groups":  {"sys/class/infiniband/d/node_guid": "5054:00ff:fe12\n"},
		"guid digits":  {"sys/class/infiniband/d/node_guid": "5054:00ff:fe12:34zz\n"},
		"guid width":   {"sys/class/infiniband/d/node_guid": "5054:00ff:fe12:123456\n"},
		"no guid":      {"sys/class/infiniband/d/node_type": "1: CA\n"},
		"node type":    {"sys/class/infiniband/d/node_guid": "0000:0000:0000:0001\n", "sys/class/infiniband/d/node_type": "CA\n"},
		"node type ov": {"sys/class/infiniband/d/node_guid": "0000:0000:0000:0001\n", "sys/class/infiniband/d/node_type": "300: CA\n"},
	} {
		root := t.TempDir()
		writeTree(t, root, files)
		if devs, err := SysfsDevices(root); err == nil {
			t.Errorf("%s: no error, devs %+v", name, devs)
		}
	}
	for name, files := range map[string]map[string]string{
		"state":     {"sys/class/infiniband/d/ports/1/state": "ACTIVE\n", "sys/class/infiniband/d/ports/1/phys_state": "5: LinkUp\n"},
		"no phys":   {"sys/class/infiniband/d/ports/1/state": "4: ACTIVE\n"},
		"lid":       {"sys/class/infiniband/d/ports/1/state": "4: A\n", "sys/class/infiniband/d/ports/1/phys_state": "5: L\n", "sys/class/infiniband/d/ports/1/lid": "zz\n"},
		"lid range": {"sys/class/infiniband/d/ports/1/state": "4: A\n", "sys/class/infiniband/d/ports/1/phys_state": "5: L\n", "sys/class/infiniband/d/ports/1/lid": "0x1ffffffff\n"},
	} {
		root := t.TempDir()
		writeTree(t, root, files)
		if ports, err := SysfsPorts(root, "d"); err == nil {
			t.Errorf("%s: no error, ports %+v", name, ports)
		}
	}
	for name, dev := range map[string]string{"no colon": "231\n", "letters": "a:b\n", "empty": "\n"} {
		root := t.TempDir()
		writeTree(t, root, map[string]string{
			"sys/class/infiniband_verbs/uverbs0/ibdev":       "d\n",
			"sys/class/infiniband_verbs/uverbs0/abi_version": "1\n",
			"sys/class/infiniband_verbs/uverbs0/dev":         dev,
		})
		if c, err := SysfsUverbs(root, "d"); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
}

func TestSysfsEmpty(t *testing.T) {
	devs, err := SysfsDevices(t.TempDir())
	if err != nil || len(devs) != 0 {
		t.Fatalf("%+v %v", devs, err)
	}
}
