package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The VM tests run inside tests/vm/run.sh (a real kernel with rxe0 and rxe1
// on a veth pair) against the live system: root "/", netlink and the
// provider's queries.
func vmDevices(t *testing.T) (string, string) {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") != "1" {
		t.Skip("needs the VM harness (tests/vm/run.sh); USB4VERBS_VM is not 1")
	}
	d0, d1 := os.Getenv("USB4VERBS_DEV0"), os.Getenv("USB4VERBS_DEV1")
	if d0 == "" || d1 == "" {
		d0, d1 = "rxe0", "rxe1"
	}
	return d0, d1
}

func TestVMShow(t *testing.T) {
	d0, d1 := vmDevices(t)
	out, stderr, code := runCmd(t)
	if code != exitOK {
		t.Fatalf("ibvinfo: exit %d, stderr %s", code, stderr)
	}
	t.Logf("ibvinfo:\n%s", out)
	for _, want := range []string{d0, d1, "rdma_rxe", "Live queries", "GID tables"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestVMShowJSON(t *testing.T) {
	d0, d1 := vmDevices(t)
	out, stderr, code := runCmd(t, "--json")
	if code != exitOK {
		t.Fatalf("ibvinfo --json: exit %d, stderr %s", code, stderr)
	}
	var rep struct {
		Devices []struct {
			Name   string `json:"name"`
			Driver string `json:"driver"`
			Uverbs string `json:"uverbs"`
			ABI    int    `json:"abi_version"`
			Ports  []struct {
				State     string `json:"state"`
				LinkLayer string `json:"link_layer"`
				MTU       int    `json:"active_mtu"`
				GIDs      []struct {
					GID    string `json:"gid"`
					Type   string `json:"type"`
					Netdev string `json:"netdev"`
				} `json:"gids"`
			} `json:"ports"`
		} `json:"devices"`
		Live map[string]*liveDevice `json:"live"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("parse --json: %v\n%s", err, out)
	}
	found := 0
	for _, d := range rep.Devices {
		if d.Name != d0 && d.Name != d1 {
			continue
		}
		found++
		if d.Driver != "rdma_rxe" || !strings.HasPrefix(d.Uverbs, "uverbs") || d.ABI < 1 {
			t.Errorf("%s: driver %q uverbs %q abi %d", d.Name, d.Driver, d.Uverbs, d.ABI)
		}
		if len(d.Ports) != 1 || d.Ports[0].LinkLayer != "Ethernet" || d.Ports[0].State != "ACTIVE" {
			t.Errorf("%s: ports %+v", d.Name, d.Ports)
			continue
		}
		p := d.Ports[0]
		if len(p.GIDs) == 0 || p.GIDs[0].Netdev == "" || !strings.Contains(p.GIDs[0].Type, "RoCE") {
			t.Errorf("%s: GIDs %+v", d.Name, p.GIDs)
		}
		ld := rep.Live[d.Name]
		if ld == nil || ld.MaxQP == nil || *ld.MaxQP == 0 || len(ld.Ports) != 1 {
			t.Errorf("%s: live answers %+v", d.Name, ld)
			continue
		}
		// The MTU derived from sysfs (netdev MTU) must agree with the
		// kernel's query_port answer.
		if ld.Ports[0].ActiveMTU != p.MTU {
			t.Errorf("%s: active MTU sysfs-derived %d, query_port %d", d.Name, p.MTU, ld.Ports[0].ActiveMTU)
		}
		if len(ld.Errors) > 0 {
			t.Errorf("%s: live errors %v", d.Name, ld.Errors)
		}
	}
	if found != 2 {
		t.Errorf("found %d of %s, %s in %s", found, d0, d1, out)
	}
}

func TestVMDoctor(t *testing.T) {
	vmDevices(t)
	out, stderr, code := runCmd(t, "doctor")
	if code != exitOK && code != exitFindings {
		t.Fatalf("doctor: exit %d, stderr %s", code, stderr)
	}
	t.Logf("ibvinfo doctor (exit %d):\n%s", code, out)
	out, _, code2 := runCmd(t, "doctor", "--json")
	if code2 != code {
		t.Errorf("doctor --json exit %d, human exit %d", code2, code)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("parse doctor --json: %v", err)
	}
	verdicts := map[string]string{}
	for _, c := range rep.Checks {
		verdicts[c.ID] = c.Verdict
	}
	// No usb4 hardware in the VM: the usb4 checks skip; rxe has GIDs;
	// the harness runs as root, whose CAP_IPC_LOCK lifts memlock.
	for id, want := range map[string]string{
		"usb4-devices": verdictSkip, "apple-slot-device": verdictSkip,
		"roce-netdev-unset": verdictOK, "memlock-low": verdictOK, "thunderbolt-net-bound": verdictOK,
	} {
		if verdicts[id] != want {
			t.Errorf("check %s: verdict %q, want %q", id, verdicts[id], want)
		}
	}
	if _, ok := verdicts["provider-loadable"]; !ok {
		t.Error("no provider-loadable check")
	}
	if (rep.Errors > 0) != (code == exitFindings) {
		t.Errorf("exit %d with %d errors", code, rep.Errors)
	}
}

func TestVMPerf(t *testing.T) {
	d0, d1 := vmDevices(t)
	out, stderr, code := runCmd(t, "perf", "--iters", "200", "--size", "4096", d0, d1)
	if code == exitUnavailable {
		if !strings.Contains(stderr, "not available in this build") || out != "" {
			t.Errorf("unavailable perf: stdout %q stderr %q", out, stderr)
		}
		t.Skipf("perf: %s", strings.TrimSpace(stderr))
	}
	if code != exitOK {
		t.Fatalf("perf: exit %d, stderr %s", code, stderr)
	}
	t.Logf("perf:\n%s", out)
	for _, want := range []string{"latency p50", "bandwidth", "Gb/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("perf output lacks %q", want)
		}
	}
}
