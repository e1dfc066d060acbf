package dataplane

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
)

// usb4Env is two connected usb4 QPs on the kernel double, each with one CQ
// for sends and receives, and one registered buffer per side.
type usb4Env struct {
	d             *usb4double.Double
	cqA, cqB      *CQ
	qpA, qpB      *QP
	hcqA, hcqB    uint32
	hqpA, hqpB    uint32
	bufA, bufB    []byte
	lkeyA, lkeyB  uint32
	rkeyA, rkeyB  uint32
	qpnA, qpnB    uint32
	wantCQBackend string
	wantQPBackend string
	sendSGE       uint32 // max_send_sge of the env's QPs
}

// The three usb4 backends the semantic list runs against.
var usb4Modes = []string{"kcmd", "cqring", "dv"}

func newUSB4Env(t *testing.T, mode string, cqe uint32) *usb4Env { return newUSB4EnvTB(t, mode, cqe) }

func newUSB4EnvTB(t testing.TB, mode string, cqe uint32) *usb4Env {
	t.Helper()
	// A DV WQE carries one SGE: QPs that ask for more stay on kernel
	// commands, so the DV env's QPs ask for one.
	e := &usb4Env{d: usb4double.New(), sendSGE: 4}
	if mode == "dv" || mode == "kcmd+dv" {
		e.sendSGE = 1
	}
	t.Cleanup(e.close)
	switch mode {
	case "kcmd":
		e.d.SetShmSpoil(usb4double.ShmNoOffer)
		e.d.SetDV(false)
		e.wantCQBackend, e.wantQPBackend = BackendKCmd, BackendKCmd
	case "cqring":
		e.d.SetDV(false)
		e.wantCQBackend, e.wantQPBackend = BackendCQRing, BackendKCmd
	case "dv":
		e.wantCQBackend, e.wantQPBackend = BackendCQRing, BackendDV
	case "kcmd+dv": // pleite-gda's shape: no CQ ring offer, DV send queues
		e.d.SetShmSpoil(usb4double.ShmNoOffer)
		e.wantCQBackend, e.wantQPBackend = BackendKCmd, BackendDV
	}
	e.cqA, e.hcqA = e.newCQ(t, cqe)
	e.cqB, e.hcqB = e.newCQ(t, cqe)
	e.qpA, e.hqpA, e.qpnA = e.newQP(t, e.cqA, e.hcqA)
	e.qpB, e.hqpB, e.qpnB = e.newQP(t, e.cqB, e.hcqB)
	e.d.Connect(e.hqpA, e.hqpB)
	e.bufA, e.bufB = pinned(t, 1<<16), pinned(t, 1<<16)
	var err error
	if e.lkeyA, e.rkeyA, err = e.d.RegMR(ptr(e.bufA), len(e.bufA), accAll); err != nil {
		t.Fatal(err)
	}
	if e.lkeyB, e.rkeyB, err = e.d.RegMR(ptr(e.bufB), len(e.bufB), accAll); err != nil {
		t.Fatal(err)
	}
	if got := e.cqA.Backend(); got != e.wantCQBackend {
		t.Fatalf("cq backend %q, want %q (reason %q)", got, e.wantCQBackend, e.cqA.FallbackReason())
	}
	if got := e.qpA.SendBackend(); got != e.wantQPBackend {
		t.Fatalf("qp backend %q, want %q (reason %q)", got, e.wantQPBackend, e.qpA.FallbackReason())
	}
	return e
}

func (e *usb4Env) newCQ(t testing.TB, cqe uint32) (*CQ, uint32) {
	h, tail, err := e.d.CreateCQ(cqe)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := NewCQ(e.d.Sys(), 3, h, cqe)
	if err != nil {
		t.Fatal(err)
	}
	cq.TryMappedRing(tail[:], cqe)
	return cq, h
}

func (e *usb4Env) newQP(t testing.TB, cq *CQ, hcq uint32) (*QP, uint32, uint32) {
	sge := e.sendSGE
	if sge == 0 {
		sge = 1
	}
	return e.newQPWith(t, cq, hcq, QPConfig{Type: QPTypeRC, MaxSendSGE: sge})
}

// newQPWith creates a QP on the double as cfg says (Type, MaxSendSGE,
// MaxInline) and tries DV on it, as cshim does.
func (e *usb4Env) newQPWith(t testing.TB, cq *CQ, hcq uint32, cfg QPConfig) (*QP, uint32, uint32) {
	h, qpn, err := e.d.CreateQP(cfg.Type, hcq, hcq)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sys, cfg.CmdFd, cfg.Handle, cfg.QPNum, cfg.MaxRecvSGE, cfg.SendCQ, cfg.RecvCQ = e.d.Sys(), 3, h, qpn, 1, cq, cq
	if cfg.MaxSendWR == 0 {
		cfg.MaxSendWR = 64
	}
	qp, err := NewQP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	qp.TryDV(0)
	return qp, h, qpn
}

// newPeeredQP is an RC QP on cqA, connected to a peer on cqB, with one send
// SGE (DV-able) and no DV decision yet; closed at the test's end.
func (e *usb4Env) newPeeredQP(t testing.TB, maxSendWR uint32) *QP {
	t.Helper()
	h, qpn, err := e.d.CreateQP(QPTypeRC, e.hcqA, e.hcqA)
	if err != nil {
		t.Fatal(err)
	}
	peer, _, err := e.d.CreateQP(QPTypeRC, e.hcqB, e.hcqB)
	if err != nil {
		t.Fatal(err)
	}
	e.d.Connect(h, peer)
	qp, err := NewQP(QPConfig{Sys: e.d.Sys(), CmdFd: 3, Handle: h, QPNum: qpn, Type: QPTypeRC, MaxSendWR: maxSendWR,
		MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: e.cqA, RecvCQ: e.cqA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qp.Close)
	return qp
}

func (e *usb4Env) close() {
	for _, qp := range []*QP{e.qpA, e.qpB} {
		if qp != nil {
			qp.Close()
		}
	}
	for _, cq := range []*CQ{e.cqA, e.cqB} {
		if cq != nil {
			cq.Close()
		}
	}
	e.d.Close()
}

func (e *usb4Env) sgeA(off, n int) SGE {
	return SGE{Addr: addr(e.bufA) + uint64(off), Length: uint32(n), LKey: e.lkeyA}
}
func (e *usb4Env) sgeB(off, n int) SGE {
	return SGE{Addr: addr(e.bufB) + uint64(off), Length: uint32(n), LKey: e.lkeyB}
}

func forEachUSB4(t *testing.T, f func(t *testing.T, e *usb4Env)) {
	for _, m := range usb4Modes {
		t.Run(m, func(t *testing.T) { f(t, newUSB4Env(t, m, 64)) })
	}
}

func TestUSB4SendRecvMultiSGE(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		fill(e.bufA[:300], 1)
		if err := e.qpB.PostRecv([]RecvWR{{WrID: 77, SGEs: []SGE{e.sgeB(1000, 512)}}}); err != nil {
			t.Fatal(err)
		}
		err := e.qpA.PostSend([]SendWR{{WrID: 5, Opcode: WRSend, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(0, 100), e.sgeA(200, 100)}}})
		if e.sendSGE < 2 {
			// The DV QP was granted one SGE: two are above its
			// max_send_sge (TestUSB4DVNeverPostsThroughKernel has the
			// 2-SGE QP, which stays on kernel commands).
			var pe *PostError
			if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, unix.EINVAL) {
				t.Fatalf("2 SGEs on a 1-SGE QP: %v, want EINVAL at WR 0", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 1)[0]
		if s.WrID != 5 || s.Status != WCSuccess || s.Opcode != WCSend || s.QPNum != e.qpnA {
			t.Fatalf("send completion %+v", s)
		}
		r := pollN(t, e.cqB, 1)[0]
		if r.WrID != 77 || r.Status != WCSuccess || r.Opcode != WCRecv || r.ByteLen != 200 || r.SrcQP != e.qpnA {
			t.Fatalf("recv completion %+v", r)
		}
		want := append(append([]byte{}, e.bufA[:100]...), e.bufA[200:300]...)
		if !bytes.Equal(e.bufB[1000:1200], want) {
			t.Fatal("received bytes differ from the two SGEs sent")
		}
	})
}

func TestUSB4SendWithImmAndWrites(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		fill(e.bufA[:4096], 9)
		if err := e.qpB.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeB(0, 64)}}, {WrID: 2}}); err != nil {
			t.Fatal(err)
		}
		err := e.qpA.PostSend([]SendWR{
			{WrID: 10, Opcode: WRSendWithImm, Flags: SendSignaled, ImmData: be32(0xdeadbeef), SGEs: []SGE{e.sgeA(0, 64)}},
			{WrID: 11, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(64, 1000)},
				RemoteAddr: addr(e.bufB) + 4096, RKey: e.rkeyB},
			// WRITE_WITH_IMM lands in the 0-SGE receive posted above.
			{WrID: 12, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, ImmData: be32(42), SGEs: []SGE{e.sgeA(2000, 333)},
				RemoteAddr: addr(e.bufB) + 8192, RKey: e.rkeyB},
		})
		if err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 3)
		for i, want := range []struct {
			id uint64
			op uint32
		}{{10, WCSend}, {11, WCRDMAWrite}, {12, WCRDMAWrite}} {
			if s[i].WrID != want.id || s[i].Opcode != want.op || s[i].Status != WCSuccess {
				t.Fatalf("send completion %d: %+v", i, s[i])
			}
		}
		r := pollN(t, e.cqB, 2)
		if r[0].WrID != 1 || r[0].Opcode != WCRecv || r[0].WCFlags&WCWithImm == 0 || r[0].ImmData != be32(0xdeadbeef) {
			t.Fatalf("send-with-imm receive %+v", r[0])
		}
		if r[1].WrID != 2 || r[1].Opcode != WCRecvRDMAWithImm || r[1].ImmData != be32(42) || r[1].ByteLen != 333 {
			t.Fatalf("write-with-imm receive %+v", r[1])
		}
		if !bytes.Equal(e.bufB[:64], e.bufA[:64]) || !bytes.Equal(e.bufB[4096:5096], e.bufA[64:1064]) ||
			!bytes.Equal(e.bufB[8192:8192+333], e.bufA[2000:2333]) {
			t.Fatal("bytes moved do not match")
		}
	})
}

func TestUSB4RDMARead(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		fill(e.bufB[:2048], 33)
		err := e.qpA.PostSend([]SendWR{{WrID: 3, Opcode: WRRDMARead, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(512, 2048)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}})
		if err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 1)[0]
		if s.WrID != 3 || s.Opcode != WCRDMARead || s.Status != WCSuccess || s.ByteLen != 2048 {
			t.Fatalf("read completion %+v", s)
		}
		if !bytes.Equal(e.bufA[512:2560], e.bufB[:2048]) {
			t.Fatal("read bytes differ")
		}
	})
}

func TestUSB4RemoteAccessError(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		err := e.qpA.PostSend([]SendWR{{WrID: 8, Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(0, 16)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB + 1000}})
		if err != nil {
			t.Fatal(err)
		}
		if s := pollN(t, e.cqA, 1)[0]; s.WrID != 8 || s.Status != WCRemAccessErr {
			t.Fatalf("bad rkey completion %+v", s)
		}
	})
}

func TestUSB4UnsignaledWithPeriodicSignaled(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		const n = 20
		var recvs []RecvWR
		for i := 0; i < n; i++ {
			recvs = append(recvs, RecvWR{WrID: uint64(100 + i), SGEs: []SGE{e.sgeB(i*64, 64)}})
		}
		if err := e.qpB.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		var sends []SendWR
		for i := 0; i < n; i++ {
			w := SendWR{WrID: uint64(i), Opcode: WRSend, SGEs: []SGE{e.sgeA(i*64, 64)}}
			if i%5 == 4 {
				w.Flags = SendSignaled
			}
			sends = append(sends, w)
		}
		fill(e.bufA[:n*64], 5)
		if err := e.qpA.PostSend(sends); err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 4)
		for i, c := range s {
			if c.WrID != uint64(5*i+4) || c.Status != WCSuccess {
				t.Fatalf("signaled completion %d: %+v", i, c)
			}
		}
		expectEmpty(t, e.cqA)
		r := pollN(t, e.cqB, n)
		for i, c := range r {
			if c.WrID != uint64(100+i) || c.ByteLen != 64 {
				t.Fatalf("receive %d: %+v", i, c)
			}
		}
		if !bytes.Equal(e.bufB[:n*64], e.bufA[:n*64]) {
			t.Fatal("bytes differ")
		}
	})
}

func TestUSB4Atomics(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		*(*uint64)(ptr(e.bufB[64:])) = 1000
		wrs := []SendWR{
			{WrID: 1, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
				RemoteAddr: addr(e.bufB) + 64, RKey: e.rkeyB, CompareAdd: 5},
			{WrID: 2, Opcode: WRAtomicCmpAndSwp, Flags: SendSignaled, SGEs: []SGE{e.sgeA(8, 8)},
				RemoteAddr: addr(e.bufB) + 64, RKey: e.rkeyB, CompareAdd: 1005, Swap: 7},
		}
		err := e.qpA.PostSend(wrs)
		if e.wantQPBackend != BackendDV {
			// thunderbolt_ibverbs: atomics only through DV.
			var pe *PostError
			if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, unix.EOPNOTSUPP) {
				t.Fatalf("atomic through kernel commands: %v, want EOPNOTSUPP at WR 0", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 2)
		if s[0].Opcode != WCFetchAdd || s[1].Opcode != WCCompSwap || s[0].Status != 0 || s[1].Status != 0 {
			t.Fatalf("atomic completions %+v", s)
		}
		if old := *(*uint64)(ptr(e.bufA)); old != 1000 {
			t.Fatalf("fetch-add returned %d, want 1000", old)
		}
		if old := *(*uint64)(ptr(e.bufA[8:])); old != 1005 {
			t.Fatalf("cmp-swap returned %d, want 1005", old)
		}
		if v := *(*uint64)(ptr(e.bufB[64:])); v != 7 {
			t.Fatalf("target is %d, want 7", v)
		}
	})
}

func TestUSB4RefusedWorkRequests(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		// Inline: the kernel refuses it (tbv_prepare_send_segments).
		err := e.qpA.PostSend([]SendWR{
			{WrID: 1, Opcode: WRSend, SGEs: []SGE{e.sgeA(0, 8)}},
			{WrID: 2, Opcode: WRSend, Flags: SendInline, SGEs: []SGE{e.sgeA(0, 8)}},
		})
		var pe *PostError
		if !errors.As(err, &pe) || !errors.Is(err, unix.EOPNOTSUPP) || pe.Index != 1 {
			t.Fatalf("inline send: %v, want EOPNOTSUPP at WR 1", err)
		}
		// Receives: one SGE at most (tbv_post_recv).
		err = e.qpB.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeB(0, 8)}}, {WrID: 2, SGEs: []SGE{e.sgeB(0, 8), e.sgeB(8, 8)}}})
		if !errors.As(err, &pe) || !errors.Is(err, unix.EINVAL) || pe.Index != 1 {
			t.Fatalf("2-SGE receive: %v, want EINVAL at WR 1", err)
		}
		// Negative SGE count never reaches the kernel.
		err = e.qpA.PostSend([]SendWR{{WrID: 1, Opcode: 0x7f, SGEs: nil}})
		if err == nil {
			t.Fatal("unknown opcode accepted")
		}
		if !strings.Contains(err.Error(), "post send") {
			t.Fatalf("error does not name the verb: %v", err)
		}
	})
}

// issue 11 (bad input on the real module): on kernel commands a WR the
// uverbs core cannot decode (an opcode outside its list) makes it refuse the
// whole POST_SEND before the driver sees any WR, with resp.bad_wr 0
// (linux:drivers/infiniband/core/uverbs_cmd.c ib_uverbs_post_send), and
// hellas-main takes num_sge up to its device maximum (TBV_IBDEV_MAX_SGE 4,
// hellas-main:kernel/ibdev.c tbv_prepare_send_segments) whatever max_send_sge
// the QP was created with. Both must be refused at that WR, with the WRs
// before it posted, as ibv_post_send's contract and librxe have it.
func TestUSB4KCmdRefusesAtTheBadWR(t *testing.T) {
	for _, m := range []string{"kcmd", "cqring"} {
		t.Run(m, func(t *testing.T) {
			e := newUSB4Env(t, m, 64)
			qp, hqp, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 1})
			defer qp.Close()
			e.d.Connect(hqp, e.hqpB)
			good := func(id uint64) SendWR {
				return SendWR{WrID: id, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
					RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
			}
			overSGE := good(2)
			overSGE.SGEs = append(overSGE.SGEs, e.sgeA(8, 8))
			unknownOp := good(2)
			unknownOp.Opcode = 0x7f
			for _, c := range []struct {
				name string
				bad  SendWR
			}{{"num_sge over max_send_sge", overSGE}, {"unknown opcode", unknownOp}} {
				var pe *PostError
				err := qp.PostSend([]SendWR{good(1), c.bad})
				if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, unix.EINVAL) {
					t.Errorf("%s in WR 1: %v, want EINVAL at WR 1", c.name, err)
					_, _ = e.cqA.Poll(make([]WC, 4)) // the double completes at post: the next case starts clean
					continue
				}
				if wc := pollN(t, e.cqA, 1)[0]; wc.WrID != 1 || wc.Status != WCSuccess {
					t.Fatalf("%s: WR 0 before the refused one: %+v, want it posted and successful", c.name, wc)
				}
				expectEmpty(t, e.cqA)
			}
		})
	}
}

func TestUSB4CompletionEvent(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		if err := e.cqB.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		if n := e.d.Notifies(e.hcqB); n != 0 {
			t.Fatalf("event before any completion: %d", n)
		}
		if err := e.qpB.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeB(0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		if err := e.qpA.PostSend([]SendWR{{WrID: 1, Opcode: WRSend, SGEs: []SGE{e.sgeA(0, 8)}}}); err != nil {
			t.Fatal(err)
		}
		if n := e.d.Notifies(e.hcqB); n != 1 {
			t.Fatalf("completion events: %d, want 1", n)
		}
		pollN(t, e.cqB, 1)
	})
}

// DV: a batch of DV WRs, one unsignaled, completes in posting order and
// rings KICK.
func TestUSB4DVOrderAndKick(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	if err := e.qpB.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeB(0, 64)}}, {WrID: 2}}); err != nil {
		t.Fatal(err)
	}
	ioctls := e.d.Ioctls()
	err := e.qpA.PostSend([]SendWR{
		{WrID: 1, Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 16)}},
		{WrID: 2, Opcode: WRSend, Flags: SendSignaled}, // no SGE: a zero-length WQE
		{WrID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB) + 512, RKey: e.rkeyB},
		{WrID: 4, Opcode: WRRDMAWrite, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB) + 600, RKey: e.rkeyB}, // unsignaled
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.d.Kicks() == 0 || e.d.Ioctls() == ioctls {
		t.Fatal("DV posts rang no KICK")
	}
	s := pollN(t, e.cqA, 3)
	for i, c := range s {
		if c.WrID != uint64(i+1) || c.Status != WCSuccess {
			t.Fatalf("completion %d out of order or failed: %+v", i, s)
		}
	}
	expectEmpty(t, e.cqA)
	if r := pollN(t, e.cqB, 2); r[1].WrID != 2 || r[1].ByteLen != 0 {
		t.Fatalf("zero-length send arrived as %+v", r[1])
	}
}

// issue 11: both DV trees answer EBUSY to an ordinary post_send on a QP with a
// DV queue. A QP that may ask for what a DV WQE cannot carry stays on
// kernel commands; on a DV QP what is left is refused with EOPNOTSUPP.
func TestUSB4DVNeverPostsThroughKernel(t *testing.T) {
	e := newUSB4Env(t, "dv", 256)
	t.Run("two SGEs stay on kernel commands", func(t *testing.T) {
		qp, _, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 2})
		defer qp.Close()
		if qp.SendBackend() != BackendKCmd || !strings.Contains(qp.FallbackReason(), "max_send_sge 2") {
			t.Fatalf("backend %q reason %q, want kernel commands for max_send_sge 2", qp.SendBackend(), qp.FallbackReason())
		}
	})
	t.Run("inline stays on kernel commands", func(t *testing.T) {
		qp, _, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 1, MaxInline: 64})
		defer qp.Close()
		if qp.SendBackend() != BackendKCmd || !strings.Contains(qp.FallbackReason(), "inline") {
			t.Fatalf("backend %q reason %q, want kernel commands for inline", qp.SendBackend(), qp.FallbackReason())
		}
	})
	t.Run("refused on a DV QP", func(t *testing.T) {
		var pe *PostError
		err := e.qpA.PostSend([]SendWR{
			{WrID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB},
			{WrID: 2, Opcode: WRSend, Flags: SendInline | SendSignaled, SGEs: []SGE{e.sgeA(0, 8)}},
		})
		if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("inline on a DV QP: %v, want EOPNOTSUPP at WR 1", err)
		}
		if s := pollN(t, e.cqA, 1)[0]; s.WrID != 1 || s.Status != WCSuccess {
			t.Fatalf("WR before the refused one: %+v", s)
		}
		err = e.qpA.PostSend([]SendWR{{WrID: 3, Opcode: WRSendWithInv, SGEs: []SGE{e.sgeA(0, 8)}}})
		if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("SEND_WITH_INV on a DV QP: %v, want EOPNOTSUPP", err)
		}
	})
	t.Run("atomics outside the caps", func(t *testing.T) {
		d := usb4double.New()
		d.SetDVCaps(DVCapsV1 | DVCapRead)
		e2 := &usb4Env{d: d}
		t.Cleanup(e2.close)
		e2.cqA, e2.hcqA = e2.newCQ(t, 16)
		e2.qpA, e2.hqpA, e2.qpnA = e2.newQP(t, e2.cqA, e2.hcqA)
		if e2.qpA.SendBackend() != BackendDV {
			t.Fatalf("backend %q (%s), want DV", e2.qpA.SendBackend(), e2.qpA.FallbackReason())
		}
		e2.bufA = pinned(t, 4096)
		e2.lkeyA, e2.rkeyA, _ = d.RegMR(ptr(e2.bufA), 4096, accAll)
		err := e2.qpA.PostSend([]SendWR{{WrID: 1, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGEs: []SGE{e2.sgeA(0, 8)},
			RemoteAddr: addr(e2.bufA) + 64, RKey: e2.rkeyA, CompareAdd: 1}})
		var pe *PostError
		if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("atomic without the DV cap: %v, want EOPNOTSUPP", err)
		}
	})
	if n := e.d.PostSendBusy(); n != 0 {
		t.Fatalf("%d ordinary post_sends reached the kernel on a DV QP (the module answers EBUSY)", n)
	}
}

// issue 11: attach DV only when the caps cover what the QP needs.
// hellas-gda-v2 answers caps = 0; a kernel without READ cannot carry RC.
func TestUSB4DVAttachNeedsCaps(t *testing.T) {
	for _, c := range []struct {
		name   string
		model  int
		caps   uint32
		qpType uint32
		want   string
		reason string
	}{
		{"hellas-gda-v2 caps 0", usb4double.DVHellasGDAv2, 0, QPTypeRC, BackendKCmd, "DV caps 0x0 lack 0x3f"},
		{"pleite caps V2 RC", usb4double.DVPleite, DVCapsV2, QPTypeRC, BackendDV, ""},
		{"caps V1 RC lacks READ", usb4double.DVPleite, DVCapsV1, QPTypeRC, BackendKCmd, "lack 0x20"},
		{"caps V1 UC", usb4double.DVPleite, DVCapsV1, QPTypeUC, BackendDV, ""},
		{"no FENCE", usb4double.DVPleite, DVCapsV2 &^ DVCapFence, QPTypeUC, BackendKCmd, "lack 0x10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := usb4double.New()
			d.SetDVModel(c.model)
			d.SetDVCaps(c.caps)
			e := &usb4Env{d: d}
			t.Cleanup(e.close)
			e.cqA, e.hcqA = e.newCQ(t, 16)
			e.cqB, e.hcqB = e.newCQ(t, 16)
			e.qpA, e.hqpA, e.qpnA = e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: c.qpType, MaxSendSGE: 1})
			e.qpB, e.hqpB, e.qpnB = e.newQPWith(t, e.cqB, e.hcqB, QPConfig{Type: c.qpType, MaxSendSGE: 1})
			d.Connect(e.hqpA, e.hqpB)
			if got := e.qpA.SendBackend(); got != c.want || !strings.Contains(e.qpA.FallbackReason(), c.reason) {
				t.Fatalf("backend %q reason %q, want %q and %q", got, e.qpA.FallbackReason(), c.want, c.reason)
			}
			// Whichever path was chosen carries a write.
			e.bufA = pinned(t, 4096)
			e.lkeyA, e.rkeyA, _ = d.RegMR(ptr(e.bufA), 4096, accAll)
			fill(e.bufA[:8], 3)
			err := e.qpA.PostSend([]SendWR{{WrID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
				RemoteAddr: addr(e.bufA) + 100, RKey: e.rkeyA}})
			if err != nil {
				t.Fatal(err)
			}
			if s := pollN(t, e.cqA, 1)[0]; s.WrID != 9 || s.Status != WCSuccess || !bytes.Equal(e.bufA[100:108], e.bufA[:8]) {
				t.Fatalf("write on %s: %+v", c.want, s)
			}
		})
	}
}

// issue 12 item 4: more than 64 kernel-path send completions in one poll
// overflowed the 64-entry DV stash (completions reordered, a ticket
// orphaned). Send completions come out in posting order for any number.
func TestUSB4SendCompletionsInPostingOrder(t *testing.T) {
	e := newUSB4Env(t, "dv", 512)
	qp, hqp, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 2, MaxSendWR: 256})
	defer qp.Close()
	e.d.Connect(hqp, hqp) // loopback: writes land in the same buffer
	const n = 200
	var wrs []SendWR
	for i := 0; i < n; i++ {
		w := SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
			RemoteAddr: addr(e.bufA) + 4096, RKey: e.rkeyA}
		if i%2 == 1 { // two SGEs: a DV WQE cannot carry these
			w.SGEs = append(w.SGEs, e.sgeA(8, 8))
		}
		wrs = append(wrs, w)
	}
	if err := qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	wc := make([]WC, 2*n)
	got, err := e.cqA.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("one poll returned %d completions, want %d", got, n)
	}
	for i := 0; i < n; i++ {
		if wc[i].WrID != uint64(i) || wc[i].Status != WCSuccess {
			t.Fatalf("completion %d is wr_id %d status %d: not in posting order", i, wc[i].WrID, wc[i].Status)
		}
	}
	// Nothing is left waiting: another signaled post completes.
	if err := qp.PostSend(wrs[:1]); err != nil {
		t.Fatalf("post after the burst: %v", err)
	}
	pollN(t, e.cqA, 1)
}

// issue 12 item 3: concurrent posters on one DV QP. pleite's KICK drains to
// the tail in the request and marks the queue in error when that tail is
// more than sq_entries ahead of its head, which a stale tail (another
// poster already kicked past it) wraps to. 8 threads post on one QP; every
// post succeeds or is ENOMEM (then the thread polls), every completion
// arrives, and the queue stays live.
func TestUSB4DVConcurrentPostersOneQP(t *testing.T) {
	e := newUSB4Env(t, "dv", 4096)
	e.d.SetKickEntryDelay(2000)
	w := SendWR{Opcode: WRRDMAWrite, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
	if err := e.qpA.postThreadsC(e.cqA, w, 8, 500); err != nil {
		t.Fatalf("%v (KICKs refused %d, DV qp_state %d)", err, e.d.KickErrors(), e.d.DVQPState(e.hqpA))
	}
	if n := e.d.KickErrors(); n != 0 || e.d.DVQPState(e.hqpA) != 0 {
		t.Fatalf("%d KICKs refused, DV qp_state %d", n, e.d.DVQPState(e.hqpA))
	}
}

// issue 12 item 6: the DV queue took the kernel's default 256 entries
// whatever the QP was granted, so the 257th outstanding WR was ENOMEM. It
// now holds the granted max_send_wr, or the QP stays on kernel commands.
func TestUSB4DVQueueHoldsGrantedMaxSendWR(t *testing.T) {
	e := newUSB4Env(t, "dv", 2048)
	qp, hqp, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 1, MaxSendWR: 600})
	defer qp.Close()
	e.d.Connect(hqp, hqp)
	if qp.SendBackend() != BackendDV {
		t.Fatalf("backend %q (%s), want DV", qp.SendBackend(), qp.FallbackReason())
	}
	var wrs []SendWR
	for i := 0; i < 600; i++ {
		wrs = append(wrs, SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
			RemoteAddr: addr(e.bufA) + 4096, RKey: e.rkeyA})
	}
	// One batch: the engine kicks once at its end, so all 600 sit in the
	// SQ at the same time.
	if err := qp.PostSend(wrs); err != nil {
		t.Fatalf("600 outstanding on a QP granted 600: %v", err)
	}
	wc := make([]WC, 1024)
	n, err := e.cqA.Poll(wc)
	if err != nil || n != 600 {
		t.Fatalf("one poll: %d completions, %v; want 600", n, err)
	}
	for i := 0; i < n; i++ {
		if wc[i].WrID != uint64(i) || wc[i].Status != WCSuccess {
			t.Fatalf("completion %d: %+v", i, wc[i])
		}
	}
	big, _, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 1, MaxSendWR: 2000})
	defer big.Close()
	if big.SendBackend() != BackendKCmd || !strings.Contains(big.FallbackReason(), "max_send_wr 2000") {
		t.Fatalf("max_send_wr 2000 (pleite holds 1024): backend %q reason %q", big.SendBackend(), big.FallbackReason())
	}
}

// issue 12 item 7: a kernel that publishes a DV cq_tail more than the DV CQ
// holds ahead of our head gives a latched EIO, as a mapped-ring overrun does,
// not slots read as completions.
func TestUSB4DVCQTailBeyondCQIsLatchedEIO(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	e.d.SpoilDVCQTail(e.hqpA, 5)
	wc := make([]WC, 512)
	for i := 0; i < 3; i++ {
		n, err := e.cqA.Poll(wc)
		if !errors.Is(err, unix.EIO) {
			t.Fatalf("poll %d after a bad cq_tail: %d completions, %v; want EIO", i, n, err)
		}
	}
}

// ---- malformed offers and error latches ----

func TestUSB4MalformedRingOffersFallBack(t *testing.T) {
	cases := []struct {
		name   string
		spoil  int
		reason string
	}{
		{"bad magic", usb4double.ShmBadMagic, "bad magic"},
		{"wrong entry size", usb4double.ShmBadEntrySize, "entry size"},
		{"ring outside mapping", usb4double.ShmRingOutside, "outside"},
		{"cqe mismatch", usb4double.ShmCqeMismatch, "cqe"},
		{"already overflowed", usb4double.ShmPreOverflow, "overflow"},
		{"mmap refused", usb4double.ShmRefuseMmap, "mmap refused"},
		{"no offer", usb4double.ShmNoOffer, "no ABI 2 offer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := usb4double.New()
			d.SetShmSpoil(c.spoil)
			d.SetDV(false)
			e := &usb4Env{d: d}
			t.Cleanup(e.close)
			e.cqA, e.hcqA = e.newCQ(t, 16)
			if e.cqA.Backend() != BackendKCmd || !strings.Contains(e.cqA.FallbackReason(), c.reason) {
				t.Fatalf("backend %q reason %q, want kernel commands and %q", e.cqA.Backend(), e.cqA.FallbackReason(), c.reason)
			}
			// The fallback works: a completion arrives through POLL_CQ.
			e.cqB, e.hcqB = e.newCQ(t, 16)
			e.qpA, e.hqpA, e.qpnA = e.newQP(t, e.cqA, e.hcqA)
			e.qpB, e.hqpB, e.qpnB = e.newQP(t, e.cqB, e.hcqB)
			d.Connect(e.hqpA, e.hqpB)
			e.bufA = pinned(t, 4096)
			e.lkeyA, e.rkeyA, _ = d.RegMR(ptr(e.bufA), 4096, accAll)
			err := e.qpA.PostSend([]SendWR{{WrID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
				RemoteAddr: addr(e.bufA) + 100, RKey: e.rkeyA}})
			if err != nil {
				t.Fatal(err)
			}
			if s := pollN(t, e.cqA, 1)[0]; s.WrID != 9 || s.Status != WCSuccess {
				t.Fatalf("completion after fallback %+v", s)
			}
		})
	}
}

func TestUSB4RingOverrunIsPermanentEIO(t *testing.T) {
	e := newUSB4Env(t, "cqring", 4)
	e.d.FloodCQ(e.hcqA, 6)
	wc := make([]WC, 8)
	for i := 0; i < 3; i++ {
		if _, err := e.cqA.Poll(wc); !errors.Is(err, unix.EIO) {
			t.Fatalf("poll %d after overrun: %v, want EIO", i, err)
		}
	}
	if e.d.Overflows(e.hcqA) == 0 {
		t.Fatal("double did not overflow")
	}
}

func TestUSB4RingWrapsAtCQE1(t *testing.T) {
	e := newUSB4Env(t, "cqring", 1)
	e.d.SetShmSpoil(usb4double.ShmOK)
	for i := 0; i < 10; i++ {
		err := e.qpA.PostSend([]SendWR{{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}})
		if err != nil {
			t.Fatal(err)
		}
		if s := pollN(t, e.cqA, 1)[0]; s.WrID != uint64(i) {
			t.Fatalf("round %d: %+v", i, s)
		}
	}
}

func TestUSB4DVFallbacks(t *testing.T) {
	t.Run("no DV methods", func(t *testing.T) {
		d := usb4double.New()
		d.SetDV(false)
		e := &usb4Env{d: d}
		t.Cleanup(e.close)
		e.cqA, e.hcqA = e.newCQ(t, 16)
		e.qpA, e.hqpA, e.qpnA = e.newQP(t, e.cqA, e.hcqA)
		if e.qpA.SendBackend() != BackendKCmd || !strings.Contains(e.qpA.FallbackReason(), "QUERY_CAPS") {
			t.Fatalf("backend %q reason %q", e.qpA.SendBackend(), e.qpA.FallbackReason())
		}
	})
	t.Run("generation mismatch", func(t *testing.T) {
		d := usb4double.New()
		d.SetBadGenerationResponse(true)
		e := &usb4Env{d: d}
		t.Cleanup(e.close)
		e.cqA, e.hcqA = e.newCQ(t, 16)
		e.qpA, e.hqpA, e.qpnA = e.newQP(t, e.cqA, e.hcqA)
		if e.qpA.SendBackend() != BackendKCmd || !strings.Contains(e.qpA.FallbackReason(), "CREATE_QUEUE") {
			t.Fatalf("backend %q reason %q", e.qpA.SendBackend(), e.qpA.FallbackReason())
		}
	})
}

func TestUSB4DVStaleGenerationCQE(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	e.d.StaleNextWQE()
	w := SendWR{WrID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
	if err := e.qpA.PostSend([]SendWR{w}); err != nil {
		t.Fatal(err)
	}
	s := pollN(t, e.cqA, 1)[0]
	if s.Status != WCGeneralErr || s.VendorErr != DVStaleGeneration {
		t.Fatalf("stale WQE completion %+v", s)
	}
	// The QP stays live.
	w.WrID = 2
	if err := e.qpA.PostSend([]SendWR{w}); err != nil {
		t.Fatal(err)
	}
	if s := pollN(t, e.cqA, 1)[0]; s.WrID != 2 || s.Status != WCSuccess {
		t.Fatalf("after stale WQE %+v", s)
	}
}

func TestUSB4DVQueueFullIsENOMEM(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	// 64 SQ entries, DV CQ 128: more signaled writes than the SQ holds
	// in one batch would need the kernel to drain mid-batch; the engine
	// kicks only at the end, so the 65th must fail with ENOMEM.
	var wrs []SendWR
	for i := 0; i < 65; i++ {
		wrs = append(wrs, SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
	}
	err := e.qpA.PostSend(wrs)
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 64 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("overfull batch: %v", err)
	}
	s := pollN(t, e.cqA, 64)
	for i, c := range s {
		if c.WrID != uint64(i) {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
}

// A list longer than the send queue fails with ENOMEM at the first WR past
// max_send_wr on every backend, as a full ring answers. hellas-main's
// post_send takes WRs without a bound (kernel/ibdev.c tbv_post_send_one
// allocates each), as the double does, so through kernel commands the
// provider is what stops a list, and a cyclic one (tests/reliability
// badinput post_send_cycle) looped forever without that stop.
func TestUSB4ListLongerThanSQIsENOMEM(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		wrs := make([]SendWR, 65)
		for i := range wrs {
			wrs[i] = SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
		}
		// A 0-byte unsignaled write (usb4_write_of_nothing, never sent)
		// still takes its place in the list.
		wrs[3] = SendWR{WrID: 3, Opcode: WRRDMAWrite, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
		err := e.qpA.PostSend(wrs)
		var pe *PostError
		if !errors.As(err, &pe) || pe.Index != 64 || !errors.Is(err, unix.ENOMEM) {
			t.Fatalf("65 WRs on a 64-deep send queue: %v", err)
		}
		for i, c := range pollN(t, e.cqA, 63) {
			want := uint64(i)
			if i >= 3 {
				want++ // WR 3 completes nothing
			}
			if c.WrID != want || c.Status != WCSuccess {
				t.Fatalf("completion %d: %+v, want wr_id %d", i, c, want)
			}
		}
		expectEmpty(t, e.cqA)
	})
}

// pleite-gda's kernel writes DV send CQEs into the user ring and raises no
// completion event for them (pleite-gda:kernel/ibdev.c: only tbv_cq_push calls
// comp_handler), so an application asleep on the send CQ's channel would never
// wake (ibv_rc_pingpong -e hung on the usb4 bed). A QP whose send CQ has a
// completion channel stays on kernel commands, whose completions raise it.
func TestUSB4DVNotOnSendCQWithChannel(t *testing.T) {
	d := usb4double.New()
	d.SetDVModel(usb4double.DVPleite)
	d.SetDVCaps(DVCapsV2)
	e := &usb4Env{d: d}
	t.Cleanup(e.close)
	e.cqA, e.hcqA = e.newCQ(t, 16)
	e.cqB, e.hcqB = e.newCQ(t, 16)
	e.qpA, e.hqpA, e.qpnA = e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 1, SendCQChannel: true})
	e.qpB, e.hqpB, e.qpnB = e.newQPWith(t, e.cqB, e.hcqB, QPConfig{Type: QPTypeRC, MaxSendSGE: 1})
	d.Connect(e.hqpA, e.hqpB)
	if got := e.qpA.SendBackend(); got != BackendKCmd || !strings.Contains(e.qpA.FallbackReason(), "completion channel") {
		t.Fatalf("backend %q reason %q, want %q and a completion channel reason", got, e.qpA.FallbackReason(), BackendKCmd)
	}
	if got := e.qpB.SendBackend(); got != BackendDV {
		t.Fatalf("qp without a channel on its send CQ: backend %q (reason %q), want %q", got, e.qpB.FallbackReason(), BackendDV)
	}
	e.bufA = pinned(t, 4096)
	e.lkeyA, e.rkeyA, _ = d.RegMR(ptr(e.bufA), 4096, accAll)
	if err := e.cqA.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	err := e.qpA.PostSend([]SendWR{{WrID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)},
		RemoteAddr: addr(e.bufA) + 100, RKey: e.rkeyA}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.d.Notifies(e.hcqA); n != 1 {
		t.Fatalf("completion events on the armed send CQ: %d, want 1", n)
	}
	if s := pollN(t, e.cqA, 1)[0]; s.WrID != 4 || s.Status != WCSuccess {
		t.Fatalf("completion %+v", s)
	}
}

// issue 23: latency first. pleite-gda's kernel DV poll worker drains every
// queue it attached at CREATE_QUEUE (pleite-gda:kernel/ibdev.c
// tbv_dv_poll_attach_locked; "KICK is not required when polling is enabled":
// its usb4_rdma_dv.h), but it sleeps 10-15 us between scans, so a WQE left
// to it waits for the next scan. A post that finds the queue idle KICKs:
// every message of a ping-pong rings one (issue 15's engine rang none here
// and each message waited for a scan). A stream (posts behind WQEs whose
// CQEs are not yet polled) rides on the poller once the engine saw it
// drain a queue: one KICK for the stream's first, idle, post.
func TestUSB4DVKicksWhenIdleWhileTheKernelPolls(t *testing.T) {
	e := newUSB4Env(t, "dv", 256)
	if err := e.d.SetDVPoller(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.d.SetDVPoller(false) })
	write := func(i int, off int) SendWR {
		return SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(off, 32)}, RemoteAddr: addr(e.bufB) + 1024 + uint64(off), RKey: e.rkeyB}
	}
	kicks := e.d.Kicks()
	for i := 0; i < 50; i++ {
		fill(e.bufA[:32], byte(i))
		if err := e.qpA.PostSend([]SendWR{write(i, 0)}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		if e.d.Kicks() != kicks+uint64(i)+1 {
			t.Fatalf("ping-pong post %d on an idle queue: %d KICKs in all, want %d (a KICK per idle post)", i, e.d.Kicks()-kicks, i+1)
		}
		if c := pollAsync(t, e.cqA, 1)[0]; c.WrID != uint64(i) || c.Status != WCSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
		if !bytes.Equal(e.bufB[1024:1056], e.bufA[:32]) {
			t.Fatalf("write %d: bytes differ", i)
		}
	}
	if m := e.qpA.DVKick(); m != "undecided" {
		t.Fatalf("DVKick %q after idle posts only, want \"undecided\"", m)
	}
	if n := e.qpA.DVKicks(); n != 50 {
		t.Fatalf("the QP counted %d KICKs, the kernel saw 50", n)
	}
	// A stream: 40 writes posted without polling in between.
	kicks = e.d.Kicks()
	const stream = 40
	for i := 0; i < stream; i++ {
		fill(e.bufA[64*i:64*i+32], byte(100+i))
		if err := e.qpA.PostSend([]SendWR{write(1000+i, 64*i)}); err != nil {
			t.Fatalf("stream post %d: %v", i, err)
		}
	}
	if n := e.d.Kicks() - kicks; n != 1 {
		t.Fatalf("%d KICKs for a stream of %d posts while the kernel polls; want 1 (its first, idle, post)", n, stream)
	}
	if m := e.qpA.DVKick(); m != "when idle" {
		t.Fatalf("DVKick %q, want \"when idle\"", m)
	}
	s := pollAsync(t, e.cqA, stream)
	for i, c := range s {
		if c.WrID != uint64(1000+i) || c.Status != WCSuccess {
			t.Fatalf("stream completion %d: %+v", i, c)
		}
		if !bytes.Equal(e.bufB[1024+64*i:1024+64*i+32], e.bufA[64*i:64*i+32]) {
			t.Fatalf("stream write %d: bytes differ", i)
		}
	}
	// Idle again: the next post KICKs.
	kicks = e.d.Kicks()
	if err := e.qpA.PostSend([]SendWR{write(2000, 0)}); err != nil {
		t.Fatal(err)
	}
	if e.d.Kicks() != kicks+1 {
		t.Fatal("a post on an idle queue after a stream rang no KICK")
	}
	pollAsync(t, e.cqA, 1)
}

// A queue the kernel stopped draining (its worker gone after the engine
// learned it polls) must not wedge: a post that finds the SQ full KICKs and
// goes through instead of failing with ENOMEM.
func TestUSB4DVFullSQKicksWhenThePollerStops(t *testing.T) {
	e := newUSB4Env(t, "dv", 256)
	if err := e.d.SetDVPoller(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.d.SetDVPoller(false) })
	write := func(id uint64) SendWR {
		return SendWR{WrID: id, Opcode: WRRDMAWrite, SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
	}
	w := write(0)
	w.Flags = SendSignaled
	if err := e.qpA.PostSend([]SendWR{w}); err != nil {
		t.Fatal(err)
	}
	pollAsync(t, e.cqA, 1)
	if err := e.d.SetDVPoller(false); err != nil {
		t.Fatal(err)
	}
	kicks := e.d.Kicks()
	for i := 1; i <= 100; i++ { // the SQ holds 64
		if err := e.qpA.PostSend([]SendWR{write(uint64(i))}); err != nil {
			t.Fatalf("post %d with the poller stopped: %v", i, err)
		}
	}
	if e.d.Kicks() == kicks {
		t.Fatal("no KICK although the SQ filled up with nothing draining it")
	}
}

// Without a kernel poller: idle posts KICK; the first busy one waits for a
// poller that never comes, KICKs, and from then on every batch KICKs.
func TestUSB4DVKicksEveryBatchWithoutAPoller(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	if m := e.qpA.DVKick(); m != "undecided" {
		t.Fatalf("DVKick before the first post %q", m)
	}
	write := func(i int) SendWR {
		return SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled,
			SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
	}
	for i := 0; i < 3; i++ {
		kicks := e.d.Kicks()
		if err := e.qpA.PostSend([]SendWR{write(i)}); err != nil {
			t.Fatal(err)
		}
		if e.d.Kicks() != kicks+1 {
			t.Fatalf("post %d: %d KICKs, want 1", i, e.d.Kicks()-kicks)
		}
		pollN(t, e.cqA, 1)
	}
	if m := e.qpA.DVKick(); m != "undecided" {
		t.Fatalf("DVKick %q after idle posts, want \"undecided\"", m)
	}
	// Busy posts: the completions of the earlier ones are not polled.
	for i := 3; i < 8; i++ {
		kicks := e.d.Kicks()
		if err := e.qpA.PostSend([]SendWR{write(i)}); err != nil {
			t.Fatal(err)
		}
		if e.d.Kicks() != kicks+1 {
			t.Fatalf("post %d: %d KICKs, want 1", i, e.d.Kicks()-kicks)
		}
	}
	if m := e.qpA.DVKick(); m != "every batch" {
		t.Fatalf("DVKick %q, want \"every batch\"", m)
	}
	for i, c := range pollN(t, e.cqA, 5) {
		if c.WrID != uint64(3+i) || c.Status != WCSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
}

// issue 23: a CQ fed by DV QPs on a kernel-command CQ (pleite-gda's shape)
// asks the kernel only while kernel-path completions may come: a stream of
// DV writes polled 16 at a time paid a POLL_CQ write() for every poll the DV
// CQ could not fill (~1.3 system calls a streamed message on the bed), though
// the kernel had nothing for the CQ. Receives posted through the kernel on a
// QP of the same CQ are still found.
func TestUSB4DVCQAsksTheKernelOnlyForKernelWork(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 256)
	const n = 200
	writes := e.d.Writes()
	polls, got := 0, 0
	wc := make([]WC, 16)
	for posted := 0; got < n; {
		if posted < n && posted-got < 48 {
			var wrs []SendWR
			for i := 0; i < 8; i++ {
				wrs = append(wrs, SendWR{WrID: uint64(posted + i), Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
			}
			if err := e.qpA.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			posted += 8
		}
		k, err := e.cqA.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range wc[:k] {
			if c.WrID != uint64(got) || c.Status != WCSuccess {
				t.Fatalf("completion %d: %+v", got, c)
			}
			got++
		}
		polls++
	}
	if w := e.d.Writes() - writes; w > uint64(polls/256+1) {
		t.Fatalf("%d POLL_CQ write()s for %d polls of %d DV completions; the kernel had none for this CQ", w, polls, n)
	}
	// Kernel-path work on the same CQ: a receive on qpA, a SEND from qpB.
	if err := e.qpA.PostRecv([]RecvWR{{WrID: 900, SGEs: []SGE{e.sgeA(4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := e.qpB.PostSend([]SendWR{{WrID: 901, Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{e.sgeB(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if r := pollN(t, e.cqA, 1)[0]; r.WrID != 900 || r.Status != WCSuccess || r.Opcode != WCRecv {
		t.Fatalf("receive completion %+v", r)
	}
	expectEmpty(t, e.cqA)
}

// issue 31 item 12: a kernel-command batch that ibv_wr_complete refuses
// before any POST_SEND (a WR the kernel's POST_SEND cannot carry, after good
// ones) posts nothing, so its signaled WRs must not count as kernel work of
// the CQ: a CQ that DV QPs feed would then ask the kernel (POLL_CQ) at every
// poll for completions that never come.
func TestUSB4RefusedBatchIsNoKernelWork(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 64)
	// Two SGEs: no DV queue for it, so it posts through kernel commands
	// to the CQ qpA's DV queue feeds.
	qp, _, _ := e.newQPWith(t, e.cqA, e.hcqA, QPConfig{Type: QPTypeRC, MaxSendSGE: 2})
	defer qp.Close()
	if qp.SendBackend() != BackendKCmd {
		t.Fatalf("qp backend %q, want %q", qp.SendBackend(), BackendKCmd)
	}
	if err := qp.EnableWRex(WRExSupported(BackendKCmd, QPTypeRC, true) | QPExWithLocalInv); err != nil {
		t.Fatal(err)
	}
	writes := e.d.Writes()
	qp.WRStart()
	for i := 0; i < 2; i++ {
		qp.WRBuild(SendWR{WrID: uint64(1 + i), Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
		qp.WRSetSGEs([]SGE{e.sgeA(0, 8)})
	}
	qp.WRBuild(SendWR{WrID: 3, Opcode: WRLocalInv, Flags: SendSignaled, ImmData: 5})
	wantErrno(t, qp.WRComplete(), unix.EINVAL, "a batch with a LOCAL_INV on kernel commands")
	if n := e.d.Writes() - writes; n != 0 {
		t.Fatalf("%d commands for a refused batch", n)
	}
	const polls = 200
	wc := make([]WC, 16)
	for i := 0; i < polls; i++ {
		if n, err := e.cqA.Poll(wc); n != 0 || err != nil {
			t.Fatalf("poll %d: %d completions, %v: %+v", i, n, err, wc[:n])
		}
	}
	if n := e.d.Writes() - writes; n > polls/256+1 {
		t.Fatalf("%d POLL_CQ write()s for %d empty polls after a refused batch; the kernel took none of it", n, polls)
	}
}

// issue 23: the provider's own DV queue waits for the QP's first post, so a
// QP nobody posts on through the provider (a GPU producer's) never gets one.
func TestUSB4DVDeferredToTheFirstPost(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 64)
	qp := e.newPeeredQP(t, 64)
	creates := e.d.CreateQueues()
	if !qp.DeferDV(0) {
		t.Fatalf("DeferDV refused: %s", qp.FallbackReason())
	}
	if n := e.d.CreateQueues() - creates; n != 0 {
		t.Fatalf("%d CREATE_QUEUE at create time, want none before the first post", n)
	}
	if qp.SendBackend() != BackendKCmd || qp.DVOwner() != DVOwnerPending {
		t.Fatalf("backend %q owner %q before the first post", qp.SendBackend(), qp.DVOwner())
	}
	fill(e.bufA[:16], 0x5a)
	if err := qp.PostSend([]SendWR{{WrID: 7, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 16)},
		RemoteAddr: addr(e.bufB) + 256, RKey: e.rkeyB}}); err != nil {
		t.Fatal(err)
	}
	if qp.SendBackend() != BackendDV || qp.DVOwner() != DVOwnerOurs {
		t.Fatalf("backend %q owner %q after the first post (%s)", qp.SendBackend(), qp.DVOwner(), qp.FallbackReason())
	}
	if n := e.d.CreateQueues() - creates; n != 1 {
		t.Fatalf("%d CREATE_QUEUE, want 1", n)
	}
	if e.d.PostSendBusy() != 0 {
		t.Fatal("the first post went to the kernel's send queue")
	}
	if c := pollN(t, e.cqA, 1)[0]; c.WrID != 7 || c.Status != WCSuccess {
		t.Fatalf("completion %+v", c)
	}
	if !bytes.Equal(e.bufB[256:272], e.bufA[:16]) {
		t.Fatal("bytes differ")
	}
}

// issue 31 item 10: a fork() child's copy of a QP whose DV queue waits for
// the first post never attaches one: its CREATE_QUEUE would hand the kernel
// the child's memory for the parent's QP (the kernel QP is shared through
// the inherited command fd), and the parent's own first post would then get
// EBUSY. The child posts through kernel commands, as through the module's C
// provider; the parent's copy still attaches at its first post.
func TestUSB4DVForkChildNeverAttaches(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 64)
	qp := e.newPeeredQP(t, 64)
	if !qp.DeferDV(0) {
		t.Fatalf("DeferDV refused: %s", qp.FallbackReason())
	}
	e.d.Fork() // from here on the engine runs in the "child"
	creates := e.d.CreateQueues()
	if err := qp.PostSend([]SendWR{{WrID: 7, Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 16)},
		RemoteAddr: addr(e.bufB) + 256, RKey: e.rkeyB}}); err != nil {
		t.Fatalf("the child's post: %v", err)
	}
	if n := e.d.CreateQueues() - creates; n != 0 {
		t.Fatalf("the fork() child's first post issued %d CREATE_QUEUE on the parent's QP, want none", n)
	}
	if qp.SendBackend() != BackendKCmd || !strings.Contains(qp.FallbackReason(), "fork") {
		t.Fatalf("child's QP: backend %q owner %q reason %q, want kernel commands for a fork() child",
			qp.SendBackend(), qp.DVOwner(), qp.FallbackReason())
	}
	if c := pollN(t, e.cqA, 1)[0]; c.WrID != 7 || c.Status != WCSuccess {
		t.Fatalf("completion %+v", c)
	}
}

// issue 31 item 10: the DV queue memory the provider hands the kernel is
// MADV_DONTFORK (VmFlags "dc"), as rdma-core's providers keep their queue
// buffers (ibv_dontfork_range): a fork() child gets no copy of pages the
// kernel reads and writes for the parent.
func TestUSB4DVQueueMemoryNotInherited(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	mem := e.d.DVQueueMemory(e.hqpA)
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	for i, what := range []string{"SQ", "CQ", "doorbell"} {
		flags, ok := vmFlagsAt(string(smaps), mem[i])
		if !ok {
			t.Fatalf("%s at %#x: no mapping in /proc/self/smaps", what, mem[i])
		}
		if !strings.Contains(" "+flags+" ", " dc ") {
			t.Errorf("%s at %#x: VmFlags %q lack dc (MADV_DONTFORK)", what, mem[i], flags)
		}
	}
}

// vmFlagsAt is the VmFlags line of the mapping of smaps that holds addr.
func vmFlagsAt(smaps string, addr uintptr) (string, bool) {
	in := false
	for _, line := range strings.Split(smaps, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && f[0] == "VmFlags:" {
			return strings.Join(f[1:], " "), true
		}
	}
	return "", false
}

// issue 23: an application that attached its own DV queue to the QP (the
// ABI's GPU producer) keeps it: the provider's deferred CREATE_QUEUE gets
// the kernel's EBUSY, the QP stays on kernel commands, whose post the kernel
// refuses with EBUSY, as it refuses the module's own C provider's; the
// application's queue is never touched (no DESTROY_QUEUE from us).
func TestUSB4DVApplicationQueueIsLeftAlone(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 64)
	h, qpn, err := e.d.CreateQP(QPTypeRC, e.hcqA, e.hcqA)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := NewQP(QPConfig{Sys: e.d.Sys(), CmdFd: 3, Handle: h, QPNum: qpn, Type: QPTypeRC, MaxSendWR: 64,
		MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: e.cqA, RecvCQ: e.cqA})
	if err != nil {
		t.Fatal(err)
	}
	if !qp.DeferDV(0) {
		t.Fatalf("DeferDV refused: %s", qp.FallbackReason())
	}
	if _, err := e.d.AppCreateQueue(h); err != nil {
		t.Fatalf("the application's CREATE_QUEUE on a QP of ours: %v (the provider holds a queue it must not)", err)
	}
	busy := e.d.PostSendBusy()
	err = qp.PostSend([]SendWR{{WrID: 1, Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 8)}}})
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("post_send on a QP with the application's DV queue: %v, want the kernel's EBUSY", err)
	}
	if e.d.PostSendBusy() != busy+1 {
		t.Fatal("the post did not reach the kernel's send queue")
	}
	if qp.SendBackend() != BackendKCmd || qp.DVOwner() != DVOwnerApp ||
		!strings.Contains(qp.FallbackReason(), "application") {
		t.Fatalf("backend %q owner %q reason %q", qp.SendBackend(), qp.DVOwner(), qp.FallbackReason())
	}
	destroys := e.d.DestroyQueues()
	qp.Close()
	if e.d.DestroyQueues() != destroys {
		t.Fatal("closing our QP object destroyed the application's DV queue")
	}
}

// Concurrent first posts on a deferred QP: one CREATE_QUEUE, every post goes
// through DV, nothing through the kernel's send queue.
func TestUSB4DVDeferredAttachFromEightThreads(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 256)
	qp := e.newPeeredQP(t, 256)
	if !qp.DeferDV(0) {
		t.Fatalf("DeferDV refused: %s", qp.FallbackReason())
	}
	creates := e.d.CreateQueues()
	const threads, per = 8, 8
	errs := make(chan error, threads)
	for g := 0; g < threads; g++ {
		go func(g int) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for i := 0; i < per; i++ {
				if err := qp.PostSend([]SendWR{{WrID: uint64(g*per + i), Opcode: WRRDMAWrite, Flags: SendSignaled,
					SGEs: []SGE{e.sgeA(8*g, 8)}, RemoteAddr: addr(e.bufB) + uint64(8*g), RKey: e.rkeyB}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < threads; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.d.CreateQueues() - creates; n != 1 {
		t.Fatalf("%d CREATE_QUEUE for one QP, want 1", n)
	}
	if e.d.PostSendBusy() != 0 || qp.SendBackend() != BackendDV {
		t.Fatalf("backend %q, %d posts reached the kernel's send queue", qp.SendBackend(), e.d.PostSendBusy())
	}
	seen := map[uint64]bool{}
	for _, c := range pollN(t, e.cqA, threads*per) {
		if c.Status != WCSuccess || seen[c.WrID] {
			t.Fatalf("completion %+v (duplicate %v)", c, seen[c.WrID])
		}
		seen[c.WrID] = true
	}
}

// pollAsync is pollN for completions a kernel thread produces: it keeps
// polling (yielding) until n arrived or, as a failure, 10 s passed.
func pollAsync(t testing.TB, cq *CQ, n int) []WC {
	t.Helper()
	var out []WC
	wc := make([]WC, 16)
	for deadline := time.Now().Add(10 * time.Second); len(out) < n && time.Now().Before(deadline); {
		got, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if got == 0 {
			runtime.Gosched()
			continue
		}
		out = append(out, wc[:got]...)
	}
	if len(out) != n {
		t.Fatalf("got %d completions in 10 s, want %d: %+v", len(out), n, out)
	}
	return out
}

// NCCL's multi-receive chain carries unsignaled RDMA WRITEs of 0 bytes; the
// module refuses those (an error ACK, the sender's QP to ERR; the double
// plays it), so the provider does not send them. Saw it fail before the fix:
// "got 3 completions, want 1" (two WR_FLUSH_ERR for the 0-byte writes), and
// on the bed ncclpattern's multi8 stopped at message 1-5 with EINVAL.
func TestUSB4ZeroByteUnsignaledWriteNotSent(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		fill(e.bufA[:64], 5)
		if err := e.qpB.PostRecv([]RecvWR{{WrID: 7}}); err != nil {
			t.Fatal(err)
		}
		err := e.qpA.PostSend([]SendWR{
			{WrID: 1, Opcode: WRRDMAWrite, RemoteAddr: addr(e.bufB), RKey: e.rkeyB},                                 // 0 SGEs
			{WrID: 2, Opcode: WRRDMAWrite, SGEs: []SGE{e.sgeA(0, 0)}, RemoteAddr: addr(e.bufB) + 64, RKey: e.rkeyB}, // one SGE of 0 bytes
			{WrID: 3, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, ImmData: be32(64), SGEs: []SGE{e.sgeA(0, 64)},
				RemoteAddr: addr(e.bufB) + 128, RKey: e.rkeyB},
		})
		if err != nil {
			t.Fatal(err)
		}
		if s := pollN(t, e.cqA, 1)[0]; s.WrID != 3 || s.Status != WCSuccess || s.Opcode != WCRDMAWrite {
			t.Fatalf("send completion %+v", s)
		}
		if r := pollN(t, e.cqB, 1)[0]; r.WrID != 7 || r.Opcode != WCRecvRDMAWithImm || r.ImmData != be32(64) {
			t.Fatalf("receive completion %+v", r)
		}
		if !bytes.Equal(e.bufB[128:192], e.bufA[:64]) {
			t.Fatal("bytes moved do not match")
		}
		expectEmpty(t, e.cqA)
		// The rule is narrow: a signaled 0-byte write still goes to the module,
		// and gets its answer.
		if err := e.qpA.PostSend([]SendWR{{WrID: 4, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}}); err != nil {
			t.Fatal(err)
		}
		// (kernel commands: WR_FLUSH_ERR; DV: GENERAL_ERR, vendor_err 0xff)
		if s := pollN(t, e.cqA, 1)[0]; s.WrID != 4 || (s.Status != WCWRFlushErr && s.Status != WCGeneralErr) {
			t.Fatalf("signaled 0-byte write: %+v", s)
		}
	})
}
