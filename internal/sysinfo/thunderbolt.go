package sysinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// TBDevice is one entry of /sys/bus/thunderbolt/devices that has a link
// (a router or an XDomain peer host), with its trained speed and lanes.
type TBDevice struct {
	Name       string `json:"name"` // "0-1"
	DeviceName string `json:"device_name,omitempty"`
	Vendor     string `json:"vendor_name,omitempty"`
	UniqueID   string `json:"unique_id,omitempty"`
	// Speeds in Gb/s per lane and lane counts; -1 when not reported.
	RxSpeed float64 `json:"rx_speed_gbps"`
	TxSpeed float64 `json:"tx_speed_gbps"`
	RxLanes int     `json:"rx_lanes"`
	TxLanes int     `json:"tx_lanes"`
}

// Module is a kernel module under /sys/module.
type Module struct {
	Name       string            `json:"name"`
	Loaded     bool              `json:"loaded"`
	Parameters map[string]string `json:"parameters,omitempty"`
}

// DriverBind lists the devices bound to one Thunderbolt bus driver
// (/sys/bus/thunderbolt/drivers/<driver>/<device>).
type DriverBind struct {
	Driver  string   `json:"driver"`
	Devices []string `json:"devices"`
}

// Debugfs is the thunderbolt_ibverbs debugfs directory.
type Debugfs struct {
	// Present is true when the directory exists and summary was readable.
	Present bool `json:"present"`
	// Summary keeps the "key: value" lines of summary in file order.
	Summary []KV     `json:"summary,omitempty"`
	Peers   []string `json:"peers,omitempty"`
	// PeerList has one entry per "peer N backend=B rails=R" line of peers
	// (hellas-main:kernel/debugfs.c); the other lines are its rails' details.
	PeerList        []DebugfsPeer `json:"peer_list,omitempty"`
	ConfiguredLinks []string      `json:"configured_links,omitempty"`
}

// DebugfsPeer is one peer host as the module's debugfs peers file lists it.
type DebugfsPeer struct {
	ID      int    `json:"id"`
	Backend string `json:"backend"`
	Rails   int    `json:"rails"`
}

// KV is one "key: value" line.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Counter returns the numeric value of summary key k.
func (d Debugfs) Counter(k string) (uint64, bool) {
	for _, kv := range d.Summary {
		if kv.Key == k {
			v, err := strconv.ParseUint(kv.Value, 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

const debugfsDir = "sys/kernel/debug/thunderbolt_ibverbs"

func (t *tree) thunderboltDevices() []TBDevice {
	var out []TBDevice
	for _, name := range t.list("sys/bus/thunderbolt/devices") {
		base := "sys/bus/thunderbolt/devices/" + name
		if !t.exists(base+"/rx_speed") && !t.exists(base+"/tx_speed") {
			continue // domains, host routers, services: no link of their own
		}
		d := TBDevice{Name: name, RxSpeed: -1, TxSpeed: -1, RxLanes: -1, TxLanes: -1}
		d.DeviceName, _ = t.attr(base+"/device_name", true)
		d.Vendor, _ = t.attr(base+"/vendor_name", true)
		d.UniqueID, _ = t.attr(base+"/unique_id", true)
		d.RxSpeed = t.tbSpeed(base + "/rx_speed")
		d.TxSpeed = t.tbSpeed(base + "/tx_speed")
		d.RxLanes = t.tbInt(base + "/rx_lanes")
		d.TxLanes = t.tbInt(base + "/tx_lanes")
		out = append(out, d)
	}
	return out
}

// tbSpeed parses "20.0 Gb/s" (drivers/thunderbolt/switch.c speed_show).
func (t *tree) tbSpeed(rel string) float64 {
	s, ok := t.attr(rel, true)
	if !ok {
		return -1
	}
	v, err := ParseTBSpeed(s)
	if err != nil {
		t.problem(rel, err)
		return -1
	}
	return v
}

// ParseTBSpeed parses a Thunderbolt rx/tx_speed attribute ("20.0 Gb/s").
func ParseTBSpeed(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "Gb/s")
	if !ok {
		return 0, fmt.Errorf("malformed speed %q", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("malformed speed %q", s)
	}
	return v, nil
}

func (t *tree) tbInt(rel string) int {
	s, ok := t.attr(rel, true)
	if !ok {
		return -1
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.problem(rel, fmt.Errorf("not a count: %q", s))
		return -1
	}
	return v
}

// driverDirEntries are the attribute files of a bus driver directory, not
// bound devices.
var driverDirEntries = map[string]bool{
	"bind": true, "unbind": true, "uevent": true, "module": true,
	"new_id": true, "remove_id": true,
}

func (t *tree) thunderboltDrivers() []DriverBind {
	var out []DriverBind
	for _, drv := range t.list("sys/bus/thunderbolt/drivers") {
		b := DriverBind{Driver: drv, Devices: []string{}}
		for _, e := range t.list("sys/bus/thunderbolt/drivers/" + drv) {
			if !driverDirEntries[e] {
				b.Devices = append(b.Devices, e)
			}
		}
		out = append(out, b)
	}
	return out
}

// Bound returns the devices bound to Thunderbolt driver drv.
func (s *System) Bound(drv string) []string {
	for _, b := range s.DriverBinds {
		if b.Driver == drv {
			return b.Devices
		}
	}
	return nil
}

func (t *tree) module(name string) Module {
	base := "sys/module/" + name
	m := Module{Name: name, Loaded: t.exists(base)}
	if !m.Loaded {
		return m
	}
	for _, p := range t.list(base + "/parameters") {
		v, ok := t.attr(base+"/parameters/"+p, false)
		if !ok {
			continue
		}
		if m.Parameters == nil {
			m.Parameters = map[string]string{}
		}
		m.Parameters[p] = v
	}
	return m
}

func (t *tree) debugfs() Debugfs {
	var d Debugfs
	if !t.exists(debugfsDir) {
		return d
	}
	if s, ok := t.read(debugfsDir+"/summary", false); ok {
		d.Present = true
		d.Summary = t.parseSummary(debugfsDir+"/summary", s)
	}
	if s, ok := t.read(debugfsDir+"/peers", true); ok {
		d.Peers = nonEmptyLines(s)
		d.PeerList = parsePeers(d.Peers)
	}
	if s, ok := t.read(debugfsDir+"/configured_links", true); ok {
		d.ConfiguredLinks = nonEmptyLines(s)
	}
	return d
}

// parsePeers picks the "peer N backend=B rails=R" lines out of the peers
// file; the indented lines under each are its rails and their counters.
func parsePeers(lines []string) []DebugfsPeer {
	var out []DebugfsPeer
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "peer" {
			continue
		}
		id, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		p := DebugfsPeer{ID: id}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "backend":
				p.Backend = v
			case "rails":
				p.Rails, _ = strconv.Atoi(v)
			}
		}
		out = append(out, p)
	}
	return out
}

// ReadSummary reads the debugfs summary file name (e.g. "summary" or, in a
// captured tree, "summary.2" for a later snapshot) under root. It is what
// `doctor --watch` polls.
func ReadSummary(root, name string) ([]KV, []Problem) {
	t := &tree{root: root}
	if root == "" {
		t.root = "/"
	}
	s, ok := t.read(debugfsDir+"/"+name, false)
	if !ok {
		return nil, t.problems
	}
	kv := t.parseSummary(debugfsDir+"/"+name, s)
	return kv, t.problems
}

// parseSummary parses "key: value" lines; other non-empty lines are
// reported once as a problem and skipped.
func (t *tree) parseSummary(rel, s string) []KV {
	var out []KV
	bad := 0
	for _, line := range nonEmptyLines(s) {
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			bad++
			continue
		}
		out = append(out, KV{Key: k, Value: strings.TrimSpace(v)})
	}
	if bad > 0 {
		t.problem(rel, fmt.Errorf("%d malformed line(s) skipped", bad))
	}
	return out
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
