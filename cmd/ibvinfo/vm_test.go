package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
		// The probe's throwaway CQ and QP attached to the mapped rxe rings.
		if ld.DataPath != "mapped rings (rxe)" {
			t.Errorf("%s: data path %q, want %q", d.Name, ld.DataPath, "mapped rings (rxe)")
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

// perfNumber extracts the number a perf output row shows after label
// (latency in µs, bandwidth in Gb/s or Mb/s).
func perfNumber(t *testing.T, out, label string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(label) + `\s+([0-9.]+) (µs|Gb/s|Mb/s)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("perf output has no %q row with a number and unit", label)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	return v
}

func checkPerfJSON(t *testing.T, out string, iters, size int) perfResult {
	t.Helper()
	var r perfResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("parse perf --json: %v\n%s", err, out)
	}
	if r.Iterations != iters || r.Size != size {
		t.Errorf("perf --json: %d iterations of %d B, want %d of %d", r.Iterations, r.Size, iters, size)
	}
	if !strings.Contains(r.DataPath, "rxe-rings") {
		t.Errorf("perf --json: data path %q, want the rxe rings", r.DataPath)
	}
	return r
}

// TestVMPerf moves data between rxe0 and rxe1 in one process: SEND/RECV
// ping-pongs and RDMA WRITE bursts over the veth pair, through the
// provider's control path and the dataplane engine on mapped rxe rings.
func TestVMPerf(t *testing.T) {
	d0, d1 := vmDevices(t)
	out, stderr, code := runCmd(t, "perf", "--iters", "500", "--size", "64", d0, d1)
	if code != exitOK {
		t.Fatalf("perf: exit %d, stderr %s", code, stderr)
	}
	t.Logf("perf:\n%s", out)
	for _, label := range []string{"latency p50", "latency p99", "bandwidth"} {
		if v := perfNumber(t, out, label); v <= 0 {
			t.Errorf("%s = %v, want > 0", label, v)
		}
	}
	if !strings.Contains(out, "rxe-rings") {
		t.Errorf("perf output does not name the rxe rings as its data path")
	}

	out, stderr, code = runCmd(t, "perf", "--json", "--iters", "50", "--size", "65536", d0, d1)
	if code != exitOK {
		t.Fatalf("perf --json: exit %d, stderr %s", code, stderr)
	}
	r := checkPerfJSON(t, out, 50, 65536)
	if r.LatencyP50us <= 0 || r.LatencyP99us < r.LatencyP50us || r.BandwidthGbps <= 0 {
		t.Errorf("perf --json numbers: %+v", r)
	}
	if len(r.Devices) != 2 || r.Devices[0] != d0 || r.Devices[1] != d1 {
		t.Errorf("perf --json devices %v", r.Devices)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestVMPerfServePeer runs perf --serve on one device and perf --peer on
// the other: the exchange goes over TCP on lo, the RDMA over the veths.
func TestVMPerfServePeer(t *testing.T) {
	d0, d1 := vmDevices(t)
	port := strconv.Itoa(freePort(t))
	type result struct {
		out, stderr string
		code        int
	}
	served := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"perf", "--json", "--serve", "--port", port, d1}, &out, &errb)
		served <- result{out.String(), errb.String(), code}
	}()
	// The client retries a refused connection while the server starts.
	out, stderr, code := runCmd(t, "perf", "--json", "--iters", "100", "--size", "8192", "--peer", "127.0.0.1:"+port, d0)
	srv := <-served
	if code != exitOK || srv.code != exitOK {
		t.Fatalf("perf --peer: exit %d, stderr %s; perf --serve: exit %d, stderr %s", code, stderr, srv.code, srv.stderr)
	}
	c := checkPerfJSON(t, out, 100, 8192)
	if c.LatencyP50us <= 0 || c.BandwidthGbps <= 0 || c.Peer != "127.0.0.1:"+port {
		t.Errorf("client result %+v", c)
	}
	s := checkPerfJSON(t, srv.out, 100, 8192) // the server took the client's size and count
	if len(s.Devices) != 1 || s.Devices[0] != d1 || s.Peer == "" {
		t.Errorf("server result %+v", s)
	}
	t.Logf("client: %s\nserver: %s", out, srv.out)
}

// TestVMPerfDeadPeer: a peer whose QP does not exist (destroyed after it
// was announced) makes perf fail within its timeout, with exit 5 and a
// message that says the peer did not answer, never a hang.
func TestVMPerfDeadPeer(t *testing.T) {
	d0, d1 := vmDevices(t)
	dp, err := newDataPath(perfOptions{timeout: time.Second, gidIndex: -1})
	if err != nil {
		t.Skipf("no data path: %v", err)
	}
	ghost, err := dp.Open(d1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	info := ghost.Info()
	if err := ghost.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a server that answers the exchange but has no QP behind it
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := readMsg(r); err != nil {
			return
		}
		_ = writeMsg(c, perfMsg{Hello: &info})
		_ = writeMsg(c, perfMsg{Ready: true})
		_, _ = readMsg(r) // the client's error report
	}()
	start := time.Now()
	_, stderr, code := runCmd(t, "perf", "--iters", "5", "--size", "4096", "--timeout", "2s", "--peer", ln.Addr().String(), d0)
	if code != exitPerfFailed {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitPerfFailed, stderr)
	}
	if !strings.Contains(stderr, "did not answer") && !strings.Contains(stderr, "did not acknowledge") {
		t.Errorf("stderr does not say the peer did not answer: %s", stderr)
	}
	t.Logf("dead peer after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
}
