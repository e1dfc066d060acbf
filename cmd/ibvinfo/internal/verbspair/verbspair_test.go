package verbspair

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
)

// fakeCQ hands out scripted completions, one batch per Poll.
type fakeCQ struct {
	batches [][]dataplane.WC
	err     error
	polls   int
}

func (f *fakeCQ) Poll(wc []dataplane.WC) (int, error) {
	f.polls++
	if f.err != nil {
		return 0, f.err
	}
	if len(f.batches) == 0 {
		return 0, nil
	}
	n := copy(wc, f.batches[0])
	f.batches = f.batches[1:]
	return n, nil
}

func waitEndpoint(cq *fakeCQ, size int, timeout time.Duration) *Endpoint {
	return &Endpoint{cfg: Config{Device: "fake0", Size: size}, timeout: timeout, poll: cq, wc: make([]dataplane.WC, 4)}
}

func TestWaitConsumesAndKeepsExtras(t *testing.T) {
	cq := &fakeCQ{batches: [][]dataplane.WC{
		{{WrID: 1, Opcode: dataplane.WCRecv, ByteLen: 64}},
		{{WrID: 2, Opcode: dataplane.WCSend}, {WrID: 3, Opcode: dataplane.WCRecv, ByteLen: 64}},
	}}
	e := waitEndpoint(cq, 64, time.Second)
	// dqp is nil: wait must not repost receives then (host double).
	if err := e.wait("test", 1, 1); err != nil {
		t.Fatal(err)
	}
	if e.sendsReady != 0 || e.recvsReady != 1 {
		t.Fatalf("after wait: %d sends, %d recvs ready; want 0 and 1 (the extra receive kept)", e.sendsReady, e.recvsReady)
	}
	// The kept receive satisfies the next wait without polling.
	polls := cq.polls
	if err := e.wait("test", 0, 1); err != nil {
		t.Fatal(err)
	}
	if cq.polls != polls {
		t.Errorf("polled %d more times for a completion already counted", cq.polls-polls)
	}
}

func TestWaitTimesOut(t *testing.T) {
	e := waitEndpoint(&fakeCQ{}, 64, 30*time.Millisecond)
	start := time.Now()
	err := e.wait("ping-pong", 1, 1)
	if !errors.Is(err, unix.ETIMEDOUT) || !strings.Contains(err.Error(), "peer did not answer within 30ms") ||
		!strings.HasPrefix(err.Error(), "ping-pong: ") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("a 30 ms deadline took %s", el) // a hang, not a speed check
	}
}

func TestWaitReportsFailedCompletion(t *testing.T) {
	cq := &fakeCQ{batches: [][]dataplane.WC{{{WrID: 7, Status: dataplane.WCRetryExcErr, Opcode: dataplane.WCSend}}}}
	err := waitEndpoint(cq, 64, time.Second).wait("write burst", 1, 0)
	var ce *CompletionError
	if !errors.As(err, &ce) || ce.WrID != 7 || !errors.Is(err, unix.EIO) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "retry counter exceeded") || !strings.Contains(err.Error(), "did not acknowledge") {
		t.Errorf("message %q does not say what happened", err)
	}
}

func TestWaitRejectsShortReceive(t *testing.T) {
	cq := &fakeCQ{batches: [][]dataplane.WC{{{WrID: 1, Opcode: dataplane.WCRecv, ByteLen: 100}}}}
	err := waitEndpoint(cq, 4096, time.Second).wait("ping-pong", 0, 1)
	if !errors.Is(err, unix.EMSGSIZE) || !strings.Contains(err.Error(), "received 100 bytes, expected 4096") {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitPollError(t *testing.T) {
	err := waitEndpoint(&fakeCQ{err: unix.EIO}, 64, time.Second).wait("ping-pong", 1, 0)
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("err = %v", err)
	}
}

func gidOf(b ...byte) provider.GID {
	var g provider.GID
	copy(g[16-len(b):], b)
	return g
}

func TestChooseGID(t *testing.T) {
	v4 := provider.GID{10: 0xff, 11: 0xff, 12: 10, 13: 11, 14: 0, 15: 1}
	link := provider.GID{0: 0xfe, 1: 0x80, 15: 1}
	table := []provider.GIDEntry{
		{Index: 0, GID: link, Type: provider.GIDTypeRoCEv1},
		{Index: 1, GID: link, Type: provider.GIDTypeRoCEv2},
		{Index: 2, GID: v4, Type: provider.GIDTypeRoCEv1},
		{Index: 3, GID: v4, Type: provider.GIDTypeRoCEv2},
	}
	if e, err := ChooseGID(table, -1); err != nil || e.Index != 3 {
		t.Errorf("auto: %+v %v, want index 3 (RoCE v2 IPv4)", e, err)
	}
	if e, err := ChooseGID(table[:3], -1); err != nil || e.Index != 1 {
		t.Errorf("no v2 IPv4: %+v %v, want index 1 (RoCE v2)", e, err)
	}
	if e, err := ChooseGID([]provider.GIDEntry{{Index: 0, GID: gidOf(1), Type: provider.GIDTypeIB}}, -1); err != nil || e.Index != 0 {
		t.Errorf("IB: %+v %v", e, err)
	}
	if e, err := ChooseGID(table, 2); err != nil || e.Index != 2 {
		t.Errorf("explicit 2: %+v %v", e, err)
	}
	if _, err := ChooseGID(table, 9); !errors.Is(err, unix.EINVAL) {
		t.Errorf("index 9: %v", err)
	}
	if _, err := ChooseGID([]provider.GIDEntry{{Index: 0}}, -1); !errors.Is(err, unix.ENODATA) || !strings.Contains(err.Error(), "roce_netdev") {
		t.Errorf("empty table: %v", err)
	}
}

func TestMTU(t *testing.T) {
	for m := uint8(1); m <= 5; m++ {
		if MTUEnum(MTUBytes(m)) != m {
			t.Errorf("round trip of %d: %d bytes -> %d", m, MTUBytes(m), MTUEnum(MTUBytes(m)))
		}
	}
	if MTUBytes(5) != 4096 || MTUBytes(0) != 0 || MTUBytes(6) != 0 || MTUEnum(1500) != 0 {
		t.Error("MTU mapping wrong at the edges")
	}
}

// TestVerbsNeedConnection: verbs on an endpoint that is not connected or
// already closed fail with an errno, not a nil dereference.
func TestVerbsNeedConnection(t *testing.T) {
	e := &Endpoint{cfg: Config{Size: 64}}
	if err := e.PingPong(true); !errors.Is(err, unix.EBADF) {
		t.Errorf("closed ping-pong: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close of an empty endpoint: %v", err)
	}
	if _, err := Open(Config{Device: "x", Size: 0}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("size 0: %v", err)
	}
	if _, err := Open(Config{Device: "x", Size: MaxSize + 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("size too large: %v", err)
	}
}

func TestNegotiatedString(t *testing.T) {
	for _, c := range []struct {
		n    Negotiated
		want string
	}{
		{Negotiated{Kind: provider.DriverRXE, CQ: dataplane.BackendRxe, Send: dataplane.BackendRxe, Recv: dataplane.BackendRxe},
			"mapped rings (rxe)"},
		{Negotiated{Kind: provider.DriverRXE, CQ: dataplane.BackendRxe, Err: errors.New("create qp: ENOMEM")},
			"cq rxe-rings, send none, recv none; probe failed: create qp: ENOMEM"},
		{Negotiated{Kind: provider.DriverUSB4, CQ: dataplane.BackendCQRing, Send: dataplane.BackendDV, Recv: dataplane.BackendKCmd,
			ProviderDV: &sysinfo.ProviderDV{Source: "default"}},
			"kernel commands; CQ ring: offered, validated, in use; DV: offered, a queue attached and validated on a probe QP; " +
				"DV queues of QPs: left to applications (the provider's own use is off: dv_send, default)"},
		{Negotiated{Kind: provider.DriverUSB4, CQ: dataplane.BackendKCmd, Send: dataplane.BackendDV, Recv: dataplane.BackendKCmd,
			ProviderDV: &sysinfo.ProviderDV{On: true, Source: "USB4VERBS_DV_SEND"}},
			"kernel commands; CQ ring: not used (none); DV: offered, a queue attached and validated on a probe QP; " +
				"DV queues of QPs: the provider's own, each at the QP's first post (dv_send on: USB4VERBS_DV_SEND); " +
				"an application's CREATE_QUEUE on a QP already posted to gets EBUSY"},
		{Negotiated{Kind: provider.DriverUSB4, CQ: dataplane.BackendKCmd, CQReason: "no ABI 2 offer (shm_abi=0)",
			Send: dataplane.BackendKCmd, Recv: dataplane.BackendKCmd, QPReason: "QUERY_CAPS: operation not supported"},
			"kernel commands; CQ ring: not used (no ABI 2 offer (shm_abi=0)); DV: not used (QUERY_CAPS: operation not supported)"},
		{Negotiated{Kind: provider.DriverUSB4, CQ: dataplane.BackendKCmd, CQReason: "malformed header: bad magic",
			QPSkipped: "max_qp 1: its only QP is left to applications"},
			"kernel commands; CQ ring: not used (malformed header: bad magic); DV: not probed (max_qp 1: its only QP is left to applications)"},
		{Negotiated{Kind: provider.DriverUSB4, Err: errors.New("alloc pd: EPERM")}, "probe failed: alloc pd: EPERM"},
		{Negotiated{}, "unknown"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.n, got, c.want)
		}
	}
}

// TestFirstMessageChecked: the first message received must carry the
// pattern the peer sends; a corrupted one is EBADMSG.
func TestFirstMessageChecked(t *testing.T) {
	const size = 256
	recv := func() *fakeCQ {
		return &fakeCQ{batches: [][]dataplane.WC{{{WrID: 1, Opcode: dataplane.WCRecv, ByteLen: size}}}}
	}
	e := waitEndpoint(recv(), size, time.Second)
	e.buf = make([]byte, 2*size)
	for i := range size {
		e.buf[size+i] = patternByte(i)
	}
	if err := e.wait("ping-pong", 0, 1); err != nil {
		t.Fatalf("intact message: %v", err)
	}
	e = waitEndpoint(recv(), size, time.Second)
	e.buf = make([]byte, 2*size)
	for i := range size {
		e.buf[size+i] = patternByte(i)
	}
	e.buf[size+100] ^= 0xff
	err := e.wait("ping-pong", 0, 1)
	if !errors.Is(err, unix.EBADMSG) || !strings.Contains(err.Error(), "at byte 100") {
		t.Fatalf("corrupted message: %v", err)
	}
}
