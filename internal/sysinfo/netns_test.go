package sysinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestActiveMTUOtherNetns: inside a container with its own network,
// /sys/class/net is the container's. The device's netdev is then absent, or
// a different device of the same name (eth0 on both sides) whose MTU is not
// the port's: the active MTU must be unknown, not derived from it.
func TestActiveMTUOtherNetns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"rxe, its own netdev", map[string]string{
			"sys/class/net/eth0/mtu": "9000\n", "sys/class/net/eth0/address": "6a:04:7d:31:32:d8\n"}, 4096},
		{"rxe, the container's eth0", map[string]string{
			"sys/class/net/eth0/mtu": "1500\n", "sys/class/net/eth0/address": "0a:58:0a:58:00:05\n"}, 0},
		{"rxe, netdev not in this namespace", map[string]string{"sys/class/net/lo/mtu": "65536\n"}, 0},
		{"hardware, its own netdev", map[string]string{
			"sys/class/infiniband/rxe0/device/net/eth0/uevent": "", "sys/class/net/eth0/mtu": "9000\n"}, 4096},
		{"hardware, the container's eth0", map[string]string{
			"sys/class/infiniband/rxe0/device/net/ens1f0/uevent": "", "sys/class/net/eth0/mtu": "1500\n"}, 0},
	} {
		root := t.TempDir()
		files := map[string]string{
			"sys/class/infiniband/rxe0/node_guid":                 "6804:7dff:fe31:32d8\n",
			"sys/class/infiniband/rxe0/parent":                    "eth0\n",
			"sys/class/infiniband/rxe0/ports/1/link_layer":        "Ethernet\n",
			"sys/class/infiniband/rxe0/ports/1/state":             "4: ACTIVE\n",
			"sys/class/infiniband/rxe0/ports/1/gids/0":            "fe80:0000:0000:0000:6804:7dff:fe31:32d8\n",
			"sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0": "eth0\n",
			"sys/class/infiniband/rxe0/ports/1/gid_attrs/types/0": "RoCE v2\n",
		}
		for k, v := range tc.files {
			files[k] = v
		}
		for rel, s := range files {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s := Collect(root, Options{})
		if len(s.Devices) != 1 || len(s.Devices[0].Ports) != 1 {
			t.Fatalf("%s: devices %+v", tc.name, s.Devices)
		}
		if p := s.Devices[0].Ports[0]; p.MTU != tc.want {
			t.Errorf("%s: active MTU %d (%s), want %d", tc.name, p.MTU, p.MTUSource, tc.want)
		}
	}
}
