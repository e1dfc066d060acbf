package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errNotAvailable marks features this build lacks (exit code 4).
var errNotAvailable = errors.New("not available in this build")

// errPerf marks a perf run that failed (exit code 5).
var errPerf = errors.New("perf failed")

const defaultPerfPort = 18515 // perftest's default port, the number users know

type perfOptions struct {
	serve    bool
	connect  string // --peer (or its older name --connect)
	port     int
	size     int
	iters    int
	timeout  time.Duration // bound on each wait for the peer
	gidIndex int           // -1: the data path chooses
}

// defaultPerfTimeout bounds each wait for a completion the peer causes.
const defaultPerfTimeout = 10 * time.Second

// set reports whether any perf-only flag was given on the command line.
func (o perfOptions) set(fs *flag.FlagSet) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "serve", "connect", "peer", "port", "size", "iters", "timeout", "gid-index":
			found = true
		}
	})
	return found
}

// endpointInfo is what two perf endpoints exchange out of band (over TCP)
// before they connect their RC QPs: the same facts perftest exchanges.
type endpointInfo struct {
	Device string `json:"device"`
	QPN    uint32 `json:"qpn"`
	PSN    uint32 `json:"psn"`
	GID    string `json:"gid"`
	LID    uint16 `json:"lid"`
	MTU    int    `json:"mtu"`
	RKey   uint32 `json:"rkey"`
	Addr   uint64 `json:"addr"`
	Size   int    `json:"size"`
}

// endpoint is one side of a perf run on one device: an RC QP with a
// registered buffer. The data path implements it.
type endpoint interface {
	Info() endpointInfo
	// Connect moves the QP to RTS towards remote, with receives posted.
	Connect(remote endpointInfo) error
	// PingPong runs one SEND/RECV round trip of the endpoint's size with
	// the peer (both sides call it): the initiator sends and returns when
	// the echo arrived, the other side echoes.
	PingPong(initiator bool) error
	// WriteBurst posts n RDMA writes of the endpoint's size and waits
	// for their completions.
	WriteBurst(n int) error
	Close() error
}

// dataPath opens perf endpoints. newDataPath returns the build's data
// path: datapath.go sets it to provider/dataplane's in cgo builds; a build
// without cgo has no data path and perf says it is not available.
type dataPath interface {
	Open(device string, size int) (endpoint, error)
}

// backendReporter is an endpoint that can name the data path it uses.
type backendReporter interface {
	Backends() string
}

var newDataPath = func(perfOptions) (dataPath, error) {
	return nil, fmt.Errorf("perf: the provider's data path (provider/dataplane, needs cgo) is %w", errNotAvailable)
}

// perfResult is perf's output.
type perfResult struct {
	Devices       []string `json:"devices"`
	Peer          string   `json:"peer,omitempty"`
	Size          int      `json:"size"`
	Iterations    int      `json:"iterations"`
	LatencyP50us  float64  `json:"latency_p50_us"`
	LatencyP99us  float64  `json:"latency_p99_us"`
	BandwidthGbps float64  `json:"bandwidth_gbps"`
	// DataPath names the backends this side's endpoint used.
	DataPath string `json:"data_path,omitempty"`
}

func runPerf(stdout, stderr io.Writer, opts options, po perfOptions, args []string) error {
	if po.size <= 0 || po.size > 1<<30 || po.iters <= 0 || po.port <= 0 || po.port > 65535 || po.timeout <= 0 {
		return usageError{"perf: --size (1..1 GiB), --iters, --timeout and --port (1..65535) must be positive"}
	}
	if !opts.live() {
		return usageError{"perf needs the running system; it cannot use --root"}
	}
	switch {
	case po.serve && po.connect != "":
		return usageError{"perf: --serve and --peer exclude each other"}
	case (po.serve || po.connect != "") && len(args) != 1:
		return usageError{"perf --serve/--peer takes one device"}
	case !po.serve && po.connect == "" && (len(args) < 1 || len(args) > 2):
		return usageError{"perf takes DEV [DEV2]"}
	}
	dp, err := newDataPath(po)
	if err != nil {
		return err
	}
	bar := newProgress(stderr, isTerminal(stderr) && !opts.json)
	var res perfResult
	switch {
	case po.serve:
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(po.port)))
		if err != nil {
			return fmt.Errorf("perf --serve: %w: %w", errPerf, err)
		}
		defer ln.Close()
		fmt.Fprintf(stderr, "ibvinfo perf: waiting on %s\n", ln.Addr())
		res, err = serveOnce(ln, dp, args[0], po, bar)
		if err != nil {
			return err
		}
	case po.connect != "":
		addr := po.connect
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(addr, strconv.Itoa(po.port))
		}
		res, err = connectPeer(addr, dp, args[0], po, bar)
		if err != nil {
			return err
		}
	default:
		second := args[0]
		if len(args) == 2 {
			second = args[1]
		}
		res, err = runLocal(dp, args[0], second, po, bar)
		if err != nil {
			return err
		}
	}
	if opts.json {
		return writeJSON(stdout, res)
	}
	p := &printer{w: stdout, color: opts.color}
	printPerf(p, res)
	return p.err
}

// runLocal runs both endpoints in this process: the client side on the
// caller's goroutine, the server side behind an in-memory pipe, through
// the same exchange as a remote run.
func runLocal(dp dataPath, dev1, dev2 string, po perfOptions, bar *progress) (perfResult, error) {
	a, b := net.Pipe()
	errc := make(chan error, 1)
	go func() {
		defer b.Close()
		_, err := serveConn(b, dp, dev2, po, nil)
		errc <- err
	}()
	res, err := clientConn(a, dp, dev1, po, bar)
	a.Close()
	if serr := <-errc; err == nil && serr != nil {
		err = serr
	}
	res.Devices = []string{dev1, dev2}
	return res, err
}

func serveOnce(ln net.Listener, dp dataPath, dev string, po perfOptions, bar *progress) (perfResult, error) {
	c, err := ln.Accept()
	if err != nil {
		return perfResult{}, fmt.Errorf("perf --serve: accept: %w: %w", errPerf, err)
	}
	defer c.Close()
	return serveConn(c, dp, dev, po, bar)
}

// dialRetry is how long a client keeps trying a peer that refuses the
// connection: both sides may be started at the same moment.
const dialRetry = 10 * time.Second

func connectPeer(addr string, dp dataPath, dev string, po perfOptions, bar *progress) (perfResult, error) {
	var c net.Conn
	var err error
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		c, err = net.DialTimeout("tcp", addr, dialRetry)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > dialRetry {
			break
		}
	}
	if err != nil {
		return perfResult{}, fmt.Errorf("perf: connect to %s: %w: %w", addr, errPerf, err)
	}
	defer c.Close()
	res, err := clientConn(c, dp, dev, po, bar)
	res.Peer = addr
	return res, err
}

// The out-of-band protocol is JSON lines over one TCP connection:
//
//	client → server  {"hello": endpointInfo, "iters": N}
//	server → client  {"hello": endpointInfo}
//	both sides connect their QPs (receives posted, RTS)
//	server → client  {"ready": true}
//	for each of the N latency rounds the client sends, the server echoes;
//	then the client's RDMA WRITE burst (one-sided: the server only waits)
//	client → server  {"done": true, "result": {latency and bandwidth}}
//	server → client  {"done": true}
//
// "ready" keeps the client's first SEND from reaching a QP that is not
// yet connected (RC would retry, but a retry costs a timeout). Either side
// may send {"error": "..."} instead of its next message.
type perfMsg struct {
	Hello *endpointInfo `json:"hello,omitempty"`
	Iters int           `json:"iters,omitempty"`
	Ready bool          `json:"ready,omitempty"`
	Done  bool          `json:"done,omitempty"`
	// Result is what the client measured, sent with its done.
	Result *perfNumbers `json:"result,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// perfNumbers are the measurements, as the client reports them to the
// server (only the client times anything).
type perfNumbers struct {
	LatencyP50us  float64 `json:"latency_p50_us"`
	LatencyP99us  float64 `json:"latency_p99_us"`
	BandwidthGbps float64 `json:"bandwidth_gbps"`
}

// oobTimeout bounds each wait for the peer's next message: a dead peer
// ends the run with an error instead of a hang.
const oobTimeout = 2 * time.Minute

// maxPerfMsg bounds one protocol line; a peer cannot make us buffer more.
const maxPerfMsg = 4096

func readMsg(r *bufio.Reader) (perfMsg, error) {
	var m perfMsg
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return m, fmt.Errorf("peer message longer than %d bytes", maxPerfMsg)
		}
		return m, err
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("malformed peer message: %w", err)
	}
	if m.Error != "" {
		return m, fmt.Errorf("peer: %s", m.Error)
	}
	return m, nil
}

func writeMsg(w io.Writer, m perfMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// tellPeer sends err to the peer, best effort: a peer that does not read
// must not block our exit, hence the deadline.
func tellPeer(c net.Conn, err error) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = writeMsg(c, perfMsg{Error: err.Error()})
}

func clientConn(c net.Conn, dp dataPath, dev string, po perfOptions, bar *progress) (perfResult, error) {
	res := perfResult{Devices: []string{dev}, Size: po.size, Iterations: po.iters}
	fail := func(what string, err error) (perfResult, error) {
		tellPeer(c, err)
		return res, fmt.Errorf("perf: %s: %w: %w", what, errPerf, err)
	}
	ep, err := dp.Open(dev, po.size)
	if err != nil {
		return fail("open "+dev, err)
	}
	defer ep.Close()
	r := bufio.NewReaderSize(c, maxPerfMsg)
	info := ep.Info()
	if err := writeMsg(c, perfMsg{Hello: &info, Iters: po.iters}); err != nil {
		return fail("send hello", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(oobTimeout))
	m, err := readMsg(r)
	if err != nil {
		return fail("read peer hello", err)
	}
	if m.Hello == nil {
		return fail("read peer hello", errors.New("no endpoint in reply"))
	}
	if err := ep.Connect(*m.Hello); err != nil {
		return fail("connect QP", err)
	}
	if br, ok := ep.(backendReporter); ok {
		res.DataPath = br.Backends()
	}
	_ = c.SetReadDeadline(time.Now().Add(oobTimeout))
	if m, err = readMsg(r); err != nil || !m.Ready {
		if err == nil {
			err = errors.New("peer sent no ready")
		}
		return fail("wait for peer ready", err)
	}
	lat := make([]time.Duration, 0, po.iters)
	total := 2 * po.iters
	for i := range po.iters {
		t0 := time.Now()
		if err := ep.PingPong(true); err != nil {
			return fail("latency round", err)
		}
		lat = append(lat, time.Since(t0)/2)
		bar.update(i+1, total, "latency")
	}
	t0 := time.Now()
	const batch = 64
	for done := 0; done < po.iters; {
		n := min(batch, po.iters-done)
		if err := ep.WriteBurst(n); err != nil {
			return fail("bandwidth burst", err)
		}
		done += n
		bar.update(po.iters+done, total, "bandwidth")
	}
	el := time.Since(t0)
	bar.finish()
	res.LatencyP50us, res.LatencyP99us = percentileUS(lat, 50), percentileUS(lat, 99)
	if el > 0 {
		res.BandwidthGbps = float64(po.size) * float64(po.iters) * 8 / el.Seconds() / 1e9
	}
	measured := perfNumbers{res.LatencyP50us, res.LatencyP99us, res.BandwidthGbps}
	if err := writeMsg(c, perfMsg{Done: true, Result: &measured}); err != nil {
		return fail("send done", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(oobTimeout))
	if _, err := readMsg(r); err != nil {
		return fail("read peer done", err)
	}
	return res, nil
}

func serveConn(c net.Conn, dp dataPath, dev string, po perfOptions, bar *progress) (perfResult, error) {
	res := perfResult{Devices: []string{dev}, Size: po.size, Peer: c.RemoteAddr().String()}
	fail := func(what string, err error) (perfResult, error) {
		tellPeer(c, err)
		return res, fmt.Errorf("perf --serve: %s: %w: %w", what, errPerf, err)
	}
	r := bufio.NewReaderSize(c, maxPerfMsg)
	_ = c.SetReadDeadline(time.Now().Add(oobTimeout))
	m, err := readMsg(r)
	if err != nil {
		return fail("read client hello", err)
	}
	if m.Hello == nil || m.Iters <= 0 {
		return fail("read client hello", errors.New("no endpoint or iteration count"))
	}
	if m.Hello.Size != po.size && m.Hello.Size > 0 {
		po.size = m.Hello.Size // the client decides the message size
	}
	res.Size, res.Iterations = po.size, m.Iters
	ep, err := dp.Open(dev, po.size)
	if err != nil {
		return fail("open "+dev, err)
	}
	defer ep.Close()
	info := ep.Info()
	if err := writeMsg(c, perfMsg{Hello: &info}); err != nil {
		return fail("send hello", err)
	}
	if err := ep.Connect(*m.Hello); err != nil {
		return fail("connect QP", err)
	}
	if br, ok := ep.(backendReporter); ok {
		res.DataPath = br.Backends()
	}
	if err := writeMsg(c, perfMsg{Ready: true}); err != nil {
		return fail("send ready", err)
	}
	for i := range m.Iters {
		if err := ep.PingPong(false); err != nil {
			return fail("latency round", err)
		}
		bar.update(i+1, m.Iters, "latency")
	}
	bar.finish()
	_ = c.SetReadDeadline(time.Now().Add(oobTimeout))
	if m, err = readMsg(r); err != nil {
		return fail("read done", err)
	}
	if m.Result != nil { // the client measured; the server reports what it saw
		res.LatencyP50us, res.LatencyP99us, res.BandwidthGbps = m.Result.LatencyP50us, m.Result.LatencyP99us, m.Result.BandwidthGbps
	}
	if err := writeMsg(c, perfMsg{Done: true}); err != nil {
		return fail("send done", err)
	}
	return res, nil
}

func percentileUS(d []time.Duration, pct int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ { // insertion sort keeps this dependency-free and n is small
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	i := (len(s)*pct + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i].Nanoseconds()) / 1e3
}

func printPerf(p *printer, r perfResult) {
	p.section("perf " + strings.Join(r.Devices, " → "))
	rows := [][]string{
		{"message size", strconv.Itoa(r.Size) + " B"},
		{"iterations", strconv.Itoa(r.Iterations)},
		{"latency p50", strconv.FormatFloat(r.LatencyP50us, 'f', 2, 64) + " µs"},
		{"latency p99", strconv.FormatFloat(r.LatencyP99us, 'f', 2, 64) + " µs"},
		{"bandwidth", formatBandwidth(r.BandwidthGbps)},
	}
	if r.Peer != "" {
		rows = append([][]string{{"peer", r.Peer}}, rows...)
	}
	if r.DataPath != "" {
		rows = append(rows, []string{"data path", r.DataPath})
	}
	p.table(nil, rows)
}

// formatBandwidth shows Gb/s, or Mb/s below 1 Gb/s so that a slow link
// (Soft-RoCE in a VM) does not print as 0.00.
func formatBandwidth(gbps float64) string {
	if gbps >= 1 || gbps == 0 {
		return strconv.FormatFloat(gbps, 'f', 2, 64) + " Gb/s"
	}
	return strconv.FormatFloat(gbps*1000, 'f', 2, 64) + " Mb/s"
}

// progress draws a one-line bar on a terminal; elsewhere it stays quiet so
// logs and pipes get only the result.
type progress struct {
	w    io.Writer
	on   bool
	last int
}

func newProgress(w io.Writer, on bool) *progress { return &progress{w: w, on: on, last: -1} }

const barWidth = 30

// renderBar is the bar for done of total: "[#######.......]  42% latency".
func renderBar(done, total int, phase string) string {
	if total <= 0 {
		total = 1
	}
	done = min(max(done, 0), total)
	fill := done * barWidth / total
	return fmt.Sprintf("[%s%s] %3d%% %s", strings.Repeat("#", fill), strings.Repeat(".", barWidth-fill), done*100/total, phase)
}

func (p *progress) update(done, total int, phase string) {
	if p == nil || !p.on || total <= 0 {
		return
	}
	pct := done * 100 / total
	if pct == p.last {
		return
	}
	p.last = pct
	fmt.Fprintf(p.w, "\r%s", renderBar(done, total, phase))
}

func (p *progress) finish() {
	if p == nil || !p.on {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	p.last = -1
}
