package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

// The trees under testdata/bed were captured on the usb4 bed (the real
// thunderbolt_ibverbs module on tbloop, tests/usb4/capture-ibvinfo-tree.sh),
// not generated: testdata/bed/README.md says how to regenerate them.
var bedTrees = []struct {
	name string
	// findings are the doctor checks that must be warn or error.
	findings []string
}{
	{"healthy", nil},
	{"link-trained-down", []string{"link-trained-down"}},
	{"cable-pulled", []string{"usb4-devices", "link-trained-down"}},
	// tbloop's four hosts in a ring (hosts=4 topology=0-1,1-2,2-3,3-0): 16 devices, 8 peers.
	// The ring's captures saw the module resend 1-2 WRs between summary and summary.2
	// (data_wr_retransmit; four hosts' traffic on 2 vCPUs under TCG): ack-timeout warns.
	{"ring4", []string{"ack-timeout"}},
	{"ring4-renamed", []string{"udev-rename-active", "ack-timeout"}},
	// tbloop cables=2: two cables between the two hosts; the module takes one per host.
	{"two-cables", []string{"multi-cable-same-host", "ack-timeout"}},
}

func bedRoot(name string) string { return filepath.Join("testdata", "bed", name, "root") }

// TestBedGolden: ibvinfo, --json, doctor and doctor --json on each captured tree.
func TestBedGolden(t *testing.T) {
	hostOnly(t)
	for _, bt := range bedTrees {
		t.Run(bt.name, func(t *testing.T) {
			root := bedRoot(bt.name)
			if _, err := os.Stat(root); err != nil {
				t.Fatalf("%v (tests/usb4/capture-ibvinfo-tree.sh captures it)", err)
			}
			for _, c := range []struct {
				golden string
				args   []string
			}{
				{"bed-" + bt.name + ".show.txt", []string{"--root", root}},
				{"bed-" + bt.name + ".show.json", []string{"--json", "--root", root}},
				{"bed-" + bt.name + ".doctor.txt", []string{"--root", root, "doctor", "--watch=0s"}},
				{"bed-" + bt.name + ".doctor.json", []string{"doctor", "--watch=0s", "--json", "--root", root}},
			} {
				out, stderr, code := runCmd(t, c.args...)
				if code != exitOK && code != exitFindings {
					t.Errorf("ibvinfo %s: exit %d; stderr %s", strings.Join(c.args, " "), code, stderr)
				}
				checkGolden(t, c.golden, out)
			}
		})
	}
}

// bedDoctor runs doctor --json on a captured tree.
func bedDoctor(t *testing.T, name string) []check {
	t.Helper()
	out, stderr, _ := runCmd(t, "doctor", "--watch=0s", "--json", "--root", bedRoot(name))
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%s: doctor --json: %v; stderr %s", name, err, stderr)
	}
	return rep.Checks
}

// TestBedFindings: the healthy bed has no finding, a trained-down link and a
// pulled cable are named with a fix that says what to do about that cause.
func TestBedFindings(t *testing.T) {
	hostOnly(t)
	for _, bt := range bedTrees {
		got := map[string]check{}
		for _, c := range bedDoctor(t, bt.name) {
			if c.Verdict == verdictWarn || c.Verdict == verdictError {
				got[c.ID] = c
			}
		}
		if len(got) != len(bt.findings) {
			t.Errorf("%s: findings %v, want %v", bt.name, got, bt.findings)
		}
		for _, id := range bt.findings {
			if _, ok := got[id]; !ok {
				t.Errorf("%s: no finding %s (got %v)", bt.name, id, got)
			}
		}
	}
	for _, c := range bedDoctor(t, "link-trained-down") {
		if c.ID == "link-trained-down" && (c.Verdict != verdictError || !strings.Contains(c.Message, "x1")) {
			t.Errorf("link-trained-down: %s %q, want an error naming the single lane", c.Verdict, c.Message)
		}
	}
	// Two cables to one host: doctor names the host, both XDomains, the devices the module
	// did register (all on the first cable) and the module's limit.
	for _, c := range bedDoctor(t, "two-cables") {
		if c.ID != "multi-cable-same-host" {
			continue
		}
		for _, w := range []string{"2 cables to host tbloop-hostB", "XDomains 0-1, 0-3", "usb4_rdma0 (XDomain 0-1), usb4_rdma1 (XDomain 0-1)", "native_same_peer_multicable is limited"} {
			if !strings.Contains(c.Message, w) {
				t.Errorf("two-cables multi-cable-same-host: %q lacks %q", c.Message, w)
			}
		}
	}
	// A pulled cable is not a module misconfiguration: the finding names the
	// missing peer and the fix is to plug the cable, not to reload the module.
	for _, c := range bedDoctor(t, "cable-pulled") {
		if c.ID != "usb4-devices" {
			continue
		}
		if c.Verdict != verdictError || !strings.Contains(c.Message, "no peer host") ||
			!strings.Contains(c.Fix, "plug the cable") || strings.Contains(c.Fix, "register_verbs") {
			t.Errorf("cable-pulled usb4-devices: %s %q fix %q, want the missing peer and plugging the cable", c.Verdict, c.Message, c.Fix)
		}
	}
}

var bedPeerLine = regexp.MustCompile(`^peer (\d+) backend=(\S+) rails=(\d+)`)

// TestBedAgainstModule checks what ibvinfo --json reports on each captured tree
// against what the module itself wrote into the same tree: rails, peers and
// backend (debugfs peers), parameters (/sys/module/thunderbolt_ibverbs),
// counters (debugfs summary) and links (/sys/bus/thunderbolt).
func TestBedAgainstModule(t *testing.T) {
	hostOnly(t)
	for _, bt := range bedTrees {
		root := bedRoot(bt.name)
		out, stderr, _ := runCmd(t, "--json", "--root", root)
		var rep struct {
			sysinfo.System
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: --json: %v; stderr %s", bt.name, err, stderr)
		}
		dbg := filepath.Join(root, "sys/kernel/debug/thunderbolt_ibverbs")

		// Peers: every "peer N backend=B rails=R" line is one peer of ibvinfo's,
		// and the usb4 devices decode to exactly those peers, backends and rails.
		peersTxt, _ := os.ReadFile(filepath.Join(dbg, "peers"))
		want := map[int]sysinfo.DebugfsPeer{}
		for _, l := range strings.Split(string(peersTxt), "\n") {
			if m := bedPeerLine.FindStringSubmatch(l); m != nil {
				id, _ := strconv.Atoi(m[1])
				rails, _ := strconv.Atoi(m[3])
				want[id] = sysinfo.DebugfsPeer{ID: id, Backend: m[2], Rails: rails}
			}
		}
		if len(rep.Debugfs.PeerList) != len(want) {
			t.Errorf("%s: ibvinfo lists %d peers %v, the module's peers file %d", bt.name, len(rep.Debugfs.PeerList), rep.Debugfs.PeerList, len(want))
		}
		for _, p := range rep.Debugfs.PeerList {
			if w, ok := want[p.ID]; !ok || w != p {
				t.Errorf("%s: ibvinfo peer %+v, module %+v", bt.name, p, w)
			}
		}
		rails := map[int]int{}
		for _, d := range rep.Devices {
			if d.USB4 == nil {
				continue
			}
			w, ok := want[int(d.USB4.Peer)]
			if !ok || w.Backend != d.USB4.Backend || int(d.USB4.Rail) >= w.Rails {
				t.Errorf("%s: %s decodes to peer %d %s rail %d; the module has %+v", bt.name, d.Name, d.USB4.Peer, d.USB4.Backend, d.USB4.Rail, w)
			}
			rails[int(d.USB4.Peer)]++
		}
		for id, w := range want {
			if rails[id] != w.Rails {
				t.Errorf("%s: %d devices of peer %d, the module has %d rails", bt.name, rails[id], id, w.Rails)
			}
		}

		// Parameters: every file, same value.
		pdir := filepath.Join(root, "sys/module/thunderbolt_ibverbs/parameters")
		ents, _ := os.ReadDir(pdir)
		params := rep.Module("thunderbolt_ibverbs").Parameters
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(pdir, e.Name()))
			if got := params[e.Name()]; got != strings.TrimSpace(string(b)) {
				t.Errorf("%s: parameter %s = %q, module %q", bt.name, e.Name(), got, strings.TrimSpace(string(b)))
			}
		}
		if len(ents) == 0 || len(params) != len(ents) {
			t.Errorf("%s: %d parameters, module has %d", bt.name, len(params), len(ents))
		}

		// Counters: every summary line, same value.
		sum, _ := os.ReadFile(filepath.Join(dbg, "summary"))
		n := 0
		for _, l := range strings.Split(string(sum), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			n++
			found := false
			for _, kv := range rep.Debugfs.Summary {
				if kv.Key == k {
					found = true
					if kv.Value != strings.TrimSpace(v) {
						t.Errorf("%s: summary %s = %q, module %q", bt.name, k, kv.Value, strings.TrimSpace(v))
					}
				}
			}
			if !found {
				t.Errorf("%s: summary %s missing", bt.name, k)
			}
		}
		if n == 0 {
			t.Errorf("%s: empty summary", bt.name)
		}

		// Links: one per XDomain (a bus device with rx_speed), same speed and lanes.
		bus := filepath.Join(root, "sys/bus/thunderbolt/devices")
		bents, _ := os.ReadDir(bus)
		links := 0
		for _, e := range bents {
			sp, err := os.ReadFile(filepath.Join(bus, e.Name(), "rx_speed"))
			if err != nil {
				continue
			}
			links++
			lanes, _ := os.ReadFile(filepath.Join(bus, e.Name(), "rx_lanes"))
			found := false
			for _, l := range rep.Thunderbolt {
				if l.Name == e.Name() {
					found = true
					ws, _ := sysinfo.ParseTBSpeed(string(sp))
					wl, _ := strconv.Atoi(strings.TrimSpace(string(lanes)))
					if l.RxSpeed != ws || l.RxLanes != wl {
						t.Errorf("%s: link %s rx %v x%d, sysfs %v x%d", bt.name, e.Name(), l.RxSpeed, l.RxLanes, ws, wl)
					}
				}
			}
			if !found {
				t.Errorf("%s: link %s missing", bt.name, e.Name())
			}
		}
		if links != len(rep.Thunderbolt) {
			t.Errorf("%s: %d links, bus has %d", bt.name, len(rep.Thunderbolt), links)
		}
	}
}
