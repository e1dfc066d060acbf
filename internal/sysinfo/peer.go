package sysinfo

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// USB4Peer is the host a usb4 device reaches: the XDomain (the peer host as
// the Thunderbolt core sees it) at the other end of the device's rail.
type USB4Peer struct {
	XDomain string `json:"xdomain"`               // "0-1": domain 0, route 1
	UUID    string `json:"unique_id,omitempty"`   // the peer's UUID (XDomain unique_id)
	Name    string `json:"device_name,omitempty"` // what the peer publishes, a Linux peer its hostname
	// How it was found: "route" (the rail's route in the module's debugfs
	// peers file, on the device's domain) or "only-xdomain" (the only XDomain
	// on the device's domain).
	By string `json:"by"`
}

// peerRailRoutes reads, per module peer number, the route of each of its
// rails from the debugfs peers file: "peer N ..." lines followed by
// "  rail=0xR route=0xX ..." lines (hellas-main:kernel/debugfs.c).
func peerRailRoutes(lines []string) map[uint32]map[uint32]uint64 {
	out := map[uint32]map[uint32]uint64{}
	var cur map[uint32]uint64
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "peer" {
			cur = nil
			if id, err := strconv.ParseUint(f[1], 10, 32); err == nil {
				cur = map[uint32]uint64{}
				out[uint32(id)] = cur
			}
			continue
		}
		if cur == nil || len(f) < 2 || !strings.HasPrefix(f[0], "rail=") || !strings.HasPrefix(f[1], "route=") {
			continue
		}
		rail, err1 := strconv.ParseUint(strings.TrimPrefix(f[0], "rail="), 0, 32)
		route, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "route="), 0, 64)
		if err1 == nil && err2 == nil {
			cur[uint32(rail)] = route
		}
	}
	return out
}

// deviceDomain is the Thunderbolt domain a usb4 device belongs to: from its
// kernel-assigned name (the module numbers it domain * 5 + lane), else, for
// a renamed device, from its parent, the NHI, whose child is the domain
// (/sys/class/infiniband/<dev>/device/domainN). -1 when unknown.
func (t *tree) deviceDomain(d *Device) int {
	if d.Domain >= 0 {
		return d.Domain
	}
	for _, e := range t.list("sys/class/infiniband/" + d.Name + "/device") {
		if n, ok := strings.CutPrefix(e, "domain"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return v
			}
		}
	}
	return -1
}

// resolvePeers fills Device.Peer for the usb4 devices whose peer host can be
// told: the XDomain "<domain>-<route>" of the rail's route, else the only
// XDomain on the device's domain. Several XDomains on one domain with no
// route known leave it empty.
func (t *tree) resolvePeers(s *System) {
	routes := peerRailRoutes(s.Debugfs.Peers)
	byName := map[string]TBDevice{}
	for _, x := range s.Thunderbolt {
		byName[x.Name] = x
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		if d.USB4 == nil {
			continue
		}
		dom := t.deviceDomain(d)
		if dom < 0 {
			continue
		}
		if r, ok := routes[d.USB4.Peer][d.USB4.Rail]; ok {
			name := fmt.Sprintf("%d-%x", dom, r)
			if x, ok := byName[name]; ok {
				d.Peer = &USB4Peer{XDomain: name, UUID: x.UniqueID, Name: x.DeviceName, By: "route"}
				continue
			}
		}
		var on []string
		for n := range byName {
			if strings.HasPrefix(n, strconv.Itoa(dom)+"-") {
				on = append(on, n)
			}
		}
		sort.Strings(on)
		if len(on) == 1 {
			x := byName[on[0]]
			d.Peer = &USB4Peer{XDomain: x.Name, UUID: x.UniqueID, Name: x.DeviceName, By: "only-xdomain"}
		}
	}
}
