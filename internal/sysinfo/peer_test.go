package sysinfo

import (
	"path/filepath"
	"testing"
)

func TestPeerRailRoutes(t *testing.T) {
	got := peerRailRoutes([]string{
		"peer 1 backend=native rails=2 native_qp_rr_rail_id=0",
		"  rail=0x0 route=0x1 local=1 remote=1 path=1",
		"    data_tx_enqueued=0",
		"  rail=0x1 route=0x1 local=1 remote=1 path=257",
		"peer 7 backend=native rails=1",
		"  rail=0x0 route=0xd local=13",
		"peer x backend=native",
		"  rail=0x0 route=0x3",
	})
	if len(got) != 2 || got[1][0] != 1 || got[1][1] != 1 || got[7][0] != 0xd {
		t.Errorf("peerRailRoutes = %v; want peer 1 rails 0,1 on route 1, peer 7 rail 0 on route 0xd", got)
	}
}

// TestResolvePeersBed: on the captured two-host bed each device reaches the other
// host: host A's (domain 0) the XDomain 0-1 with host B's UUID, host B's 1-5 with A's.
func TestResolvePeersBed(t *testing.T) {
	s := Collect(filepath.Join("..", "..", "cmd", "ibvinfo", "testdata", "bed", "healthy", "root"), Options{})
	want := map[string]USB4Peer{
		"usb4_rdma0": {XDomain: "0-1", UUID: "74626c6f-6f70-4001-8000-74626c6f6f71", Name: "tbloop-hostB", By: "route"},
		"usb4_rdma1": {XDomain: "0-1", UUID: "74626c6f-6f70-4001-8000-74626c6f6f71", Name: "tbloop-hostB", By: "route"},
		"usb4_rdma5": {XDomain: "1-5", UUID: "74626c6f-6f70-4000-8000-74626c6f6f70", Name: "tbloop-hostA", By: "route"},
		"usb4_rdma6": {XDomain: "1-5", UUID: "74626c6f-6f70-4000-8000-74626c6f6f70", Name: "tbloop-hostA", By: "route"},
	}
	for _, d := range s.Devices {
		w, ok := want[d.Name]
		if !ok {
			continue
		}
		delete(want, d.Name)
		if d.Peer == nil || *d.Peer != w {
			t.Errorf("%s: peer %+v, want %+v", d.Name, d.Peer, w)
		}
	}
	for n := range want {
		t.Errorf("%s: not in the tree", n)
	}
}

// TestResolvePeersWithoutDebugfs: with no debugfs peers file (not root) the only
// XDomain on the device's domain still names the peer; two on one domain name none.
func TestResolvePeersWithoutDebugfs(t *testing.T) {
	tr := &tree{root: t.TempDir()}
	s := &System{
		Devices: []Device{
			{Name: "usb4_rdma0", Domain: 0, USB4: &USB4Identity{Peer: 1}},
			{Name: "usb4_rdma5", Domain: 1, USB4: &USB4Identity{Peer: 2}},
			{Name: "mlx5_0", Domain: -1},
		},
		Thunderbolt: []TBDevice{
			{Name: "0-1", UniqueID: "u-b", DeviceName: "b"},
			{Name: "1-1", UniqueID: "u-a", DeviceName: "a"},
			{Name: "1-3", UniqueID: "u-c", DeviceName: "c"},
		},
	}
	tr.resolvePeers(s)
	if p := s.Devices[0].Peer; p == nil || p.XDomain != "0-1" || p.UUID != "u-b" || p.By != "only-xdomain" {
		t.Errorf("usb4_rdma0: peer %+v, want 0-1 u-b by only-xdomain", p)
	}
	if p := s.Devices[1].Peer; p != nil {
		t.Errorf("usb4_rdma5: peer %+v, want none (two XDomains on domain 1, no route)", p)
	}
	if s.Devices[2].Peer != nil {
		t.Errorf("mlx5_0 got a peer")
	}
}
