package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

// ringNeighbour is pleite-main docs/MULTI-PORT-TOPOLOGY.md's table for the ring
// A-B, B-C, C-D, D-A: the host port p of host h reaches.
var ringNeighbour = [4][2]int{{1, 3}, {0, 2}, {1, 3}, {2, 0}}

// TestBedRingPeers: on the ring captured on the bed (testdata/bed/ring4, tbloop
// hosts=4 topology=0-1,1-2,2-3,3-0: a domain and UUID per port, host h port p is
// domain 2h+p), every device reaches the host the guide's table says, by the UUID of
// that host's port (74626c6f-6f70-400H-80PP-74626c6f6f7H), and the XDomain on the
// device's own domain.
func TestBedRingPeers(t *testing.T) {
	hostOnly(t)
	for _, tree := range []string{"ring4", "ring4-renamed"} {
		s := sysinfo.Collect(bedRoot(tree), sysinfo.Options{})
		n := 0
		for _, d := range s.Devices {
			if d.USB4 == nil {
				continue
			}
			n++
			dom := d.Domain
			if dom < 0 { // renamed: the domain below the device's NHI
				ents, _ := os.ReadDir(filepath.Join(bedRoot(tree), "sys/class/infiniband", d.Name, "device"))
				for _, e := range ents {
					fmt.Sscanf(e.Name(), "domain%d", &dom)
				}
			}
			if dom < 0 || dom > 7 {
				t.Errorf("%s: %s: domain %d", tree, d.Name, dom)
				continue
			}
			want := ringNeighbour[dom/2][dom%2]
			if d.Peer == nil {
				t.Errorf("%s: %s: no peer host", tree, d.Name)
				continue
			}
			if !strings.HasPrefix(d.Peer.UUID, fmt.Sprintf("74626c6f-6f70-400%d-80", want)) || !strings.HasSuffix(d.Peer.UUID, fmt.Sprintf("6f7%d", want)) ||
				d.Peer.Name != "tbloop-host"+string(rune('A'+want)) || !strings.HasPrefix(d.Peer.XDomain, fmt.Sprintf("%d-", dom)) {
				t.Errorf("%s: %s (domain %d, host %c) reaches %+v, want host %c", tree, d.Name, dom, 'A'+dom/2, *d.Peer, 'A'+want)
			}
		}
		if n != 16 {
			t.Errorf("%s: %d usb4 devices, want 16", tree, n)
		}
	}
}

// TestBedRingNCCL: `ibvinfo nccl tbloop-hostB` on the ring names per neighbour of B the
// devices that reach B: A's to B (usb4_rdma0/1) and C's to B (usb4_rdma20/21), each group
// its own peer, and no device of another neighbour.
func TestBedRingNCCL(t *testing.T) {
	hostOnly(t)
	js, stderr, code := runCmd(t, "--root", bedRoot("ring4"), "--json", "nccl", "tbloop-hostB")
	var rep ncclReport
	if code != exitOK || json.Unmarshal([]byte(js), &rep) != nil {
		t.Fatalf("exit %d: %s\n%s", code, stderr, js)
	}
	var got []string
	for _, p := range rep.Peers {
		if p.Host == nil || p.Host.Name != "tbloop-hostB" {
			t.Errorf("peer %d: host %+v, want tbloop-hostB", p.Peer, p.Host)
		}
		got = append(got, strings.Join(p.Devices, ","))
	}
	if strings.Join(got, " ") != "usb4_rdma0,usb4_rdma1 usb4_rdma20,usb4_rdma21" {
		t.Errorf("nccl tbloop-hostB: %v, want usb4_rdma0,usb4_rdma1 and usb4_rdma20,usb4_rdma21", got)
	}
	out, _, _ := runCmd(t, "--root", bedRoot("ring4"), "nccl", "tbloop-hostB")
	if !strings.Contains(out, "export NCCL_IB_HCA==usb4_rdma0:1,usb4_rdma1:1\n") || !strings.Contains(out, "export NCCL_IB_HCA==usb4_rdma20:1,usb4_rdma21:1\n") {
		t.Errorf("nccl tbloop-hostB:\n%s", out)
	}
}
