package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"usb4verbs/internal/sysinfo"
)

// showReport is what `ibvinfo` prints; its JSON form is the System facts
// plus the live answers.
type showReport struct {
	*sysinfo.System
	Live map[string]*liveDevice `json:"live,omitempty"`
}

// importantParams are the thunderbolt_ibverbs parameters that change
// performance or whether devices register at all (reference §1.7).
var importantParams = []string{
	"profile", "register_verbs", "roce_netdev", "lanes", "tbnet", "tbnet_identity",
	"native_data", "apple_data", "native_fragment_striping", "zcopy_min_bytes",
	"native_tx_max_inflight", "nhi_interrupt_throttle_ns", "native_e2e", "qp_timeout_ms",
}

// summaryCounters are the debugfs summary lines shown by default: whether
// verbs registered, how many objects exist and whether traffic and errors
// move.
var summaryCounters = []string{
	"verbs_registered", "configured_links", "verbs_ucontexts", "verbs_qps", "verbs_mrs",
	"data_wr_send", "data_tx_posted", "data_tx_completed", "data_tx_errors",
	"data_rx_completed", "data_rx_bad_frame", "data_wr_retransmit", "data_wr_timeout",
	"data_cq_overflow", "dv_poll_qps",
}

func collect(opts options) *sysinfo.System {
	return sysinfo.Collect(opts.root, sysinfo.Options{Live: opts.live()})
}

func runShow(w io.Writer, opts options, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("show takes no arguments, got %q", args)}
	}
	rep := showReport{System: collect(opts)}
	if opts.live() {
		var names []string
		ports := map[string][]int{}
		for _, d := range rep.Devices {
			names = append(names, d.Name)
			for _, p := range d.Ports {
				ports[d.Name] = append(ports[d.Name], p.Num)
			}
		}
		usb4 := map[string]bool{}
		for _, d := range usb4Devices(rep.System) {
			usb4[d.Name] = true
		}
		rep.Live = queryLive(names, ports, usb4, rep.System.Module("thunderbolt_ibverbs").Parameters)
	}
	if opts.json {
		if err := writeJSON(w, rep); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	p := &printer{w: w, color: opts.color}
	printShow(p, rep)
	if p.err != nil {
		return fmt.Errorf("write output: %w", p.err)
	}
	return nil
}

func printShow(p *printer, rep showReport) {
	s := rep.System
	p.section("RDMA devices")
	if len(s.Devices) == 0 {
		p.printf("  none (no entries in /sys/class/infiniband)\n")
	}
	var rows [][]string
	for _, d := range s.Devices {
		abi := "-"
		if d.ABI >= 0 {
			abi = strconv.Itoa(d.ABI)
		}
		rows = append(rows, []string{d.Name, orDash(d.Driver), orDash(d.NodeGUIDText), orDash(d.Uverbs), abi, strconv.Itoa(len(d.Ports))})
	}
	p.table([]string{"DEVICE", "DRIVER", "NODE GUID", "UVERBS", "ABI", "PORTS"}, rows)

	rows = nil
	for _, d := range s.Devices {
		if d.USB4 == nil {
			continue
		}
		dom, slot := "-", "-"
		if d.Domain >= 0 {
			dom, slot = strconv.Itoa(d.Domain), strconv.Itoa(d.Slot)
		}
		var notes []string
		if d.USB4.AppleSlot {
			notes = append(notes, "Apple slot: max_qp 1, UC only, no RDMA READ")
		}
		if d.Renamed {
			notes = append(notes, "renamed by udev")
		}
		rows = append(rows, []string{d.Name, d.USB4.Backend, strconv.Itoa(int(d.USB4.Peer)), strconv.Itoa(int(d.USB4.Rail)), dom, slot, orDash(strings.Join(notes, "; "))})
	}
	if len(rows) > 0 {
		p.section("\nusb4 identity (from the node GUID)")
		p.table([]string{"DEVICE", "BACKEND", "PEER", "RAIL", "DOMAIN", "SLOT", "NOTE"}, rows)
		p.section("\nusb4 peer hosts (the host each device reaches)")
		p.table([]string{"DEVICE", "XDOMAIN", "HOST", "UNIQUE ID"}, peerRows(s))
	}

	rows = nil
	var gidRows [][]string
	for _, d := range s.Devices {
		for _, pt := range d.Ports {
			mtu := "-"
			if pt.MTU > 0 {
				mtu = strconv.Itoa(pt.MTU)
			}
			rows = append(rows, []string{d.Name, strconv.Itoa(pt.Num), orDash(pt.State), orDash(pt.PhysState), orDash(pt.Rate), mtu, orDash(pt.LinkLayer), fmt.Sprintf("%d/%d", len(pt.GIDs), pt.GIDTableLen)})
			if len(pt.GIDs) == 0 {
				gidRows = append(gidRows, []string{d.Name, strconv.Itoa(pt.Num), "-", "(empty)", "-", "-"})
			}
			for _, g := range pt.GIDs {
				gidRows = append(gidRows, []string{d.Name, strconv.Itoa(pt.Num), strconv.Itoa(g.Index), g.GID, orDash(g.Type), orDash(g.Netdev)})
			}
		}
	}
	if len(rows) > 0 {
		p.section("\nPorts")
		p.table([]string{"DEVICE", "PORT", "STATE", "PHYS STATE", "RATE", "MTU", "LINK LAYER", "GIDS"}, rows)
		p.section("\nGID tables")
		p.table([]string{"DEVICE", "PORT", "INDEX", "GID", "TYPE", "NETDEV"}, gidRows)
	}

	if len(rep.Live) > 0 {
		p.section("\nLive queries (netlink, query_device, query_port)")
		rows = nil
		var errs []string
		for _, d := range s.Devices {
			ld := rep.Live[d.Name]
			if ld == nil {
				continue
			}
			maxQP := "-"
			if ld.MaxQP != nil {
				maxQP = strconv.Itoa(int(*ld.MaxQP))
			}
			srq := ld.SRQ
			if srq == "" {
				srq = "-"
			}
			if len(ld.Ports) == 0 {
				rows = append(rows, []string{d.Name, "-", maxQP, "-", "-", "-", ld.DataPath, srq})
			}
			for _, lp := range ld.Ports {
				rows = append(rows, []string{d.Name, strconv.Itoa(lp.Port), maxQP, strconv.Itoa(lp.ActiveMTU), lp.Speed, lp.Width, ld.DataPath, srq})
			}
			for _, e := range ld.Errors {
				errs = append(errs, d.Name+": "+e)
			}
		}
		p.table([]string{"DEVICE", "PORT", "MAX QP", "ACTIVE MTU", "SPEED", "WIDTH", "DATA PATH", "SRQ"}, rows)
		for _, e := range errs {
			p.printf("  error: %s\n", e)
		}
		p.section("\nGPU memory (dma-buf MRs: NCCL's probe through our provider)")
		rows = nil
		for _, d := range s.Devices {
			if ld := rep.Live[d.Name]; ld != nil && ld.GPUMemory != nil {
				rows = append(rows, []string{d.Name, gpuText(ld.GPUMemory), ld.GPUMemory.Note})
			}
		}
		p.table([]string{"DEVICE", "GPU MEMORY", "WHY"}, rows)
	}

	p.section("\nThunderbolt links")
	if len(s.Thunderbolt) == 0 {
		p.printf("  none (no link entries in /sys/bus/thunderbolt/devices)\n")
	}
	rows = nil
	for _, t := range s.Thunderbolt {
		rows = append(rows, []string{t.Name, orDash(t.DeviceName), linkText(t.RxSpeed, t.RxLanes), linkText(t.TxSpeed, t.TxLanes), orDash(t.UniqueID)})
	}
	p.table([]string{"DEVICE", "NAME", "RX", "TX", "UNIQUE ID"}, rows)

	p.section("\nKernel modules")
	for _, m := range s.Modules {
		if !m.Loaded {
			p.printf("  %s: not loaded\n", m.Name)
			continue
		}
		p.printf("  %s: loaded\n", m.Name)
		rows = nil
		for _, k := range importantParams {
			if v, ok := m.Parameters[k]; ok {
				rows = append(rows, []string{"  " + k, orDash(v)})
			}
		}
		p.table(nil, rows)
	}
	for _, b := range s.DriverBinds {
		if len(b.Devices) > 0 {
			p.printf("  thunderbolt driver %s bound to: %s\n", b.Driver, strings.Join(b.Devices, ", "))
		}
	}

	p.section("\nlibibverbs and providers")
	v := s.Verbs
	if v.Path == "" {
		p.printf("  libibverbs.so.1: not installed\n")
	} else {
		ver := "unknown version"
		if v.Version != "" {
			ver = "rdma-core " + v.Version
		}
		pabi := "PABI unknown"
		if v.PABI != 0 {
			pabi = "PABI " + strconv.Itoa(v.PABI)
		}
		p.printf("  %s (%s, %s, %s)\n", orDash(v.RealPath), ver, pabi, orDash(v.PublicNode))
		p.printf("  provider dir %s\n", v.ProviderDir)
	}
	rows = nil
	for _, e := range v.Drivers {
		state := "missing"
		if e.Installed {
			state = "installed"
			if e.Ours {
				state += " (usb4verbs)"
			} else if e.GoModule != "" {
				state += " (Go module " + e.GoModule + ")"
			}
		}
		other := "-"
		if len(e.OtherPABIs) > 0 {
			other = joinInts(e.OtherPABIs)
		}
		rows = append(rows, []string{e.File, e.Name, orDash(e.Library), state, other})
	}
	p.table([]string{"DRIVER FILE", "NAME", "LIBRARY FOR THIS PABI", "STATE", "OTHER PABIS"}, rows)
	for _, k := range sysinfo.EnvVars {
		if val, ok := s.Env[k]; ok {
			p.printf("  %s=%s\n", k, val)
		}
	}

	if s.Module("thunderbolt_ibverbs").Loaded || s.Debugfs.Present {
		p.section("\nthunderbolt_ibverbs debugfs")
		if !s.Debugfs.Present {
			p.printf("  not readable (mount debugfs and run as root)\n")
		} else {
			rows = nil
			for _, k := range summaryCounters {
				for _, kv := range s.Debugfs.Summary {
					if kv.Key == k {
						rows = append(rows, []string{k, kv.Value})
					}
				}
			}
			p.table(nil, rows)
			var peers []string
			for _, pe := range s.Debugfs.PeerList {
				peers = append(peers, fmt.Sprintf("%d (%s, %d rails)", pe.ID, pe.Backend, pe.Rails))
			}
			if len(peers) == 0 {
				peers = []string{"none"}
			}
			p.printf("  peers: %s; configured links: %d\n", strings.Join(peers, ", "), len(s.Debugfs.ConfiguredLinks))
		}
	}

	if len(s.Problems) > 0 {
		p.section("\nCould not read")
		for _, pr := range s.Problems {
			p.printf("  %s: %s\n", pr.Path, pr.Err)
		}
	}
}

// linkText shows a Thunderbolt direction as "20.0 Gb/s x2".
func linkText(speed float64, lanes int) string {
	sp, ln := "?", "?"
	if speed >= 0 {
		sp = strconv.FormatFloat(speed, 'f', 1, 64) + " Gb/s"
	}
	if lanes >= 0 {
		ln = strconv.Itoa(lanes)
	}
	return sp + " x" + ln
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// usb4Devices returns the devices with a usb4 GUID.
func usb4Devices(s *sysinfo.System) []sysinfo.Device {
	return slices.DeleteFunc(slices.Clone(s.Devices), func(d sysinfo.Device) bool { return d.USB4 == nil })
}

// peerRows: per usb4 device the XDomain, name and UUID of the host it
// reaches (sysinfo resolvePeers), "-" where that cannot be told.
func peerRows(s *sysinfo.System) [][]string {
	var rows [][]string
	for _, d := range s.Devices {
		if d.USB4 == nil {
			continue
		}
		if d.Peer == nil {
			rows = append(rows, []string{d.Name, "-", "-", "- (no route in the module's debugfs and not the only XDomain on its domain)"})
			continue
		}
		rows = append(rows, []string{d.Name, d.Peer.XDomain, orDash(d.Peer.Name), orDash(d.Peer.UUID)})
	}
	return rows
}
