package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePath is a data path double: endpoints record what they were told,
// so the tests check the out-of-band exchange, not data movement.
type fakePath struct {
	mu      sync.Mutex
	nextQPN uint32
	eps     []*fakeEndpoint
	failOn  string // device whose Open fails
}

type fakeEndpoint struct {
	info      endpointInfo
	remote    *endpointInfo
	pingpongs int
	written   int
	closed    bool
}

func (f *fakePath) Open(dev string, size int) (endpoint, error) {
	if dev == f.failOn {
		return nil, errors.New("no such device")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextQPN++
	ep := &fakeEndpoint{info: endpointInfo{Device: dev, QPN: 0x900 + f.nextQPN, GID: "fe80::1", MTU: 1024, RKey: 0x1234, Addr: 0x7f0000, Size: size}}
	f.eps = append(f.eps, ep)
	return ep, nil
}

func (e *fakeEndpoint) Info() endpointInfo { return e.info }
func (e *fakeEndpoint) Connect(r endpointInfo) error {
	e.remote = &r
	return nil
}
func (e *fakeEndpoint) PingPong(initiator bool) error {
	e.pingpongs++
	if initiator {
		time.Sleep(50 * time.Microsecond) // a round trip takes time, so latency is > 0
	}
	return nil
}
func (e *fakeEndpoint) WriteBurst(n int) error {
	e.written += n
	return nil
}
func (e *fakeEndpoint) Close() error { e.closed = true; return nil }

func checkExchanged(t *testing.T, f *fakePath, iters int) {
	t.Helper()
	if len(f.eps) != 2 {
		t.Fatalf("%d endpoints opened, want 2", len(f.eps))
	}
	a, b := f.eps[0], f.eps[1]
	if a.remote == nil || b.remote == nil || a.remote.QPN != b.info.QPN || b.remote.QPN != a.info.QPN {
		t.Errorf("QPNs not exchanged: a %+v b %+v", a.remote, b.remote)
	}
	if !a.closed || !b.closed {
		t.Error("endpoints not closed")
	}
	total := a.pingpongs + b.pingpongs
	if total != 2*iters {
		t.Errorf("ping-pongs %d, want %d on each side", total, iters)
	}
}

func TestPerfLocalExchange(t *testing.T) {
	f := &fakePath{}
	po := perfOptions{size: 4096, iters: 10}
	res, err := runLocal(f, "rxe0", "rxe1", po, newProgress(io.Discard, false))
	if err != nil {
		t.Fatal(err)
	}
	checkExchanged(t, f, 10)
	if res.Size != 4096 || res.Iterations != 10 || res.Devices[0] != "rxe0" || res.Devices[1] != "rxe1" {
		t.Errorf("result %+v", res)
	}
	if written := f.eps[0].written + f.eps[1].written; written != 10 {
		t.Errorf("%d writes in the bandwidth phase, want 10", written)
	}
}

func TestPerfTCPServeConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := &fakePath{}
	po := perfOptions{size: 65536, iters: 5}
	done := make(chan error, 1)
	var served perfResult
	go func() {
		var err error
		served, err = serveOnce(ln, f, "rxe1", po, nil)
		done <- err
	}()
	res, err := connectPeer(ln.Addr().String(), f, "rxe0", po, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkExchanged(t, f, 5)
	if res.Peer != ln.Addr().String() {
		t.Errorf("peer %q", res.Peer)
	}
	// The server reports the client's measurements.
	if res.LatencyP50us <= 0 || served.LatencyP50us != res.LatencyP50us || served.LatencyP99us != res.LatencyP99us ||
		served.BandwidthGbps != res.BandwidthGbps || served.Iterations != 5 {
		t.Errorf("client %+v, server %+v", res, served)
	}
}

// TestPerfPeerFailure: a failing server side reaches the client as an
// error that maps to exit code 5, not a hang.
func TestPerfPeerFailure(t *testing.T) {
	f := &fakePath{failOn: "rxe1"}
	_, err := runLocal(f, "rxe0", "rxe1", perfOptions{size: 64, iters: 3}, nil)
	if err == nil || !errors.Is(err, errPerf) || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("err = %v", err)
	}
	if code := report(io.Discard, err); code != exitPerfFailed {
		t.Errorf("exit %d, want %d", code, exitPerfFailed)
	}
}

// TestPerfPeerNotReady: a server that answers the hello but never says
// ready (here: says done instead) fails the client before any data moves.
func TestPerfPeerNotReady(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		r := bufio.NewReader(b)
		if _, err := readMsg(r); err != nil {
			return
		}
		info := endpointInfo{QPN: 7, Size: 64}
		_ = writeMsg(b, perfMsg{Hello: &info})
		_ = writeMsg(b, perfMsg{Done: true})
		_, _ = readMsg(r)
	}()
	f := &fakePath{}
	_, err := clientConn(a, f, "rxe0", perfOptions{size: 64, iters: 3}, nil)
	if err == nil || !errors.Is(err, errPerf) || !strings.Contains(err.Error(), "ready") {
		t.Fatalf("err = %v", err)
	}
	if len(f.eps) != 1 || f.eps[0].pingpongs != 0 || !f.eps[0].closed {
		t.Errorf("endpoint %+v: no ping-pong may run, and it must be closed", f.eps)
	}
}

func TestPerfMalformedPeer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		_, _ = io.WriteString(b, strings.Repeat("x", maxPerfMsg+10)+"\n")
		b.Close()
	}()
	_, err := serveConn(a, &fakePath{}, "rxe1", perfOptions{size: 64, iters: 1}, nil)
	if err == nil || !errors.Is(err, errPerf) {
		t.Fatalf("err = %v", err)
	}
}

// TestPerfNotAvailable: without a data path (a build without cgo), perf
// says so (exit 4) and never prints numbers.
func TestPerfNotAvailable(t *testing.T) {
	saved := newDataPath
	defer func() { newDataPath = saved }()
	newDataPath = func(perfOptions) (dataPath, error) {
		return nil, fmt.Errorf("perf: no data path: %w", errNotAvailable)
	}
	out, stderr, code := runCmd(t, "perf", "rxe0", "rxe1")
	if code != exitUnavailable || !strings.Contains(stderr, "not available in this build") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestRenderBar(t *testing.T) {
	for _, c := range []struct {
		done, total int
		want        string
	}{
		{0, 10, "[" + strings.Repeat(".", 30) + "]   0% latency"},
		{5, 10, "[" + strings.Repeat("#", 15) + strings.Repeat(".", 15) + "]  50% latency"},
		{10, 10, "[" + strings.Repeat("#", 30) + "] 100% latency"},
		{12, 10, "[" + strings.Repeat("#", 30) + "] 100% latency"},
		{3, 0, "[" + strings.Repeat("#", 30) + "] 100% latency"},
	} {
		if got := renderBar(c.done, c.total, "latency"); got != c.want {
			t.Errorf("renderBar(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
	var sb strings.Builder
	p := newProgress(&sb, true)
	p.update(1, 4, "bw")
	p.update(1, 4, "bw") // same percentage: not redrawn
	p.finish()
	if n := strings.Count(sb.String(), "\r["); n != 1 {
		t.Errorf("%d redraws, want 1: %q", n, sb.String())
	}
}

func TestFormatBandwidth(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.00 Gb/s", 39.5: "39.50 Gb/s", 1: "1.00 Gb/s", 0.0042: "4.20 Mb/s", 0.5: "500.00 Mb/s",
	} {
		if got := formatBandwidth(v); got != want {
			t.Errorf("formatBandwidth(%v) = %q, want %q", v, got, want)
		}
	}
}
