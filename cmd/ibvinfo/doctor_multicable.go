package main

import (
	"fmt"
	"slices"
	"strings"

	"usb4verbs/internal/sysinfo"
)

// checkMultiCable tells a user with two (or more) cables to one host what the module
// makes of them. It keys remote hosts on the XDomain's UUID alone
// (hellas-main:kernel/peer.c:52 tbv_xdomain_same_remote_host) and, while its native
// control is source-blind (every stock kernel: no tb_protocol_handler carries the
// XDomain), refuses a second native peer with that UUID with -EBUSY ("legacy
// source-blind native control: limiting remote host to peer N",
// hellas-main:kernel/peer.c:153-166); its debugfs summary then says
// "native_same_peer_multicable: limited" (hellas-main:kernel/debugfs.c:33). So the
// rails of one cable are all the host gets; "enabled" (a kernel with callback_xd)
// takes every cable.
func checkMultiCable(e doctorEnv) check {
	const id = "multi-cable-same-host"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	byUUID := map[string][]sysinfo.TBDevice{}
	var order []string
	for _, t := range s.Thunderbolt {
		if t.UniqueID == "" {
			continue
		}
		if _, seen := byUUID[t.UniqueID]; !seen {
			order = append(order, t.UniqueID)
		}
		byUUID[t.UniqueID] = append(byUUID[t.UniqueID], t)
	}
	mode := summaryValue(s, "native_same_peer_multicable")
	var msgs []string
	for _, u := range order {
		xs := byUUID[u]
		if len(xs) < 2 {
			continue
		}
		var names, used []string
		for _, x := range xs {
			names = append(names, x.Name)
		}
		for _, d := range usb4Devices(s) {
			if d.Peer != nil && d.Peer.UUID == u {
				used = append(used, d.Name+" (XDomain "+d.Peer.XDomain+")")
			}
		}
		slices.Sort(used)
		host := xs[0].DeviceName
		if host == "" {
			host = u
		}
		msgs = append(msgs, fmt.Sprintf("%d cables to host %s (%s: XDomains %s); its devices here: %s",
			len(xs), host, u, strings.Join(names, ", "), orDash(strings.Join(used, ", "))))
	}
	if len(msgs) == 0 {
		return ok(id, "no host is reached over more than one cable")
	}
	const cite = "thunderbolt_ibverbs keys a remote host on its UUID and, with source-blind native control, refuses the second cable's services with -EBUSY (hellas-main:kernel/peer.c:153-166)"
	switch mode {
	case "enabled":
		return ok(id, strings.Join(msgs, "; ")+": native_same_peer_multicable is enabled (source-aware native control), so every cable carries rails")
	case "limited":
		return warn(id, strings.Join(msgs, "; ")+": native_same_peer_multicable is limited, so only one cable per host carries RDMA and the others add no bandwidth; "+cite,
			"connect the second port to another host instead (a ring, pleite-main docs/MULTI-PORT-TOPOLOGY.md), or run a kernel whose tb_protocol_handler carries the XDomain (callback_xd); more rails on the one cable come from the module's lanes=")
	}
	return warn(id, strings.Join(msgs, "; ")+": the module's debugfs summary does not say whether it takes more than one cable per host (native_same_peer_multicable: "+orDash(mode)+"); on a stock kernel it takes one; "+cite,
		"mount -t debugfs none /sys/kernel/debug and run as root to read /sys/kernel/debug/thunderbolt_ibverbs/summary")
}

// summaryValue is key's value in the module's debugfs summary, "" when absent.
func summaryValue(s *sysinfo.System, key string) string {
	for _, kv := range s.Debugfs.Summary {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}
