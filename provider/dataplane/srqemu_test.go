package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// srqEnv is a provider SRQ on the usb4 double (kernel commands, or the
// mapped CQ ring) with receiving QPs on cqB, each connected to a sending QP
// on cqA.
type srqEnv struct {
	*usb4Env
	srq   *SRQ
	recv  []*QP // attached to srq, on cqB
	hrecv []uint32
	qpnR  []uint32
	send  []*QP // on cqA, send[i] connected to recv[i]
	qpnS  []uint32
}

func newSRQEnv(t *testing.T, mode string, maxWR, depth uint32, nqp int) *srqEnv {
	t.Helper()
	e := &srqEnv{usb4Env: newUSB4Env(t, mode, 4096)}
	srq, err := NewProviderSRQ(e.d.Sys(), 3, maxWR, 1, 0, 0xabc0)
	if err != nil {
		t.Fatal(err)
	}
	e.srq = srq
	if srq.Backend() != BackendProviderSRQ || !srq.Provider() {
		t.Fatalf("srq backend %q", srq.Backend())
	}
	for i := 0; i < nqp; i++ {
		e.addPair(t, depth)
	}
	t.Cleanup(func() {
		for _, qp := range append(e.recv, e.send...) {
			if qp != nil {
				qp.Close()
			}
		}
		srq.Close()
	})
	return e
}

// addPair adds a receiving QP on the SRQ (kernel RQ of depth WRs, moved to
// INIT so it takes receives) and its sending peer.
func (e *srqEnv) addPair(t *testing.T, depth uint32) {
	t.Helper()
	hr, qpnR, err := e.d.CreateQP(QPTypeRC, e.hcqB, e.hcqB)
	if err != nil {
		t.Fatal(err)
	}
	e.d.SetRQDepth(hr, depth)
	r, err := NewQP(QPConfig{Sys: e.d.Sys(), CmdFd: 3, Handle: hr, QPNum: qpnR, Type: QPTypeRC, MaxSendWR: 64,
		MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: e.cqB, RecvCQ: e.cqB, SRQ: e.srq})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AttachProviderSRQ(depth); err != nil {
		t.Fatal(err)
	}
	hs, qpnS, err := e.d.CreateQP(QPTypeRC, e.hcqA, e.hcqA)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewQP(QPConfig{Sys: e.d.Sys(), CmdFd: 3, Handle: hs, QPNum: qpnS, Type: QPTypeRC, MaxSendWR: 1024,
		MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: e.cqA, RecvCQ: e.cqA})
	if err != nil {
		t.Fatal(err)
	}
	e.d.Connect(hr, hs)
	if r.ProviderSRQLent() != 0 {
		t.Fatal("a QP in RESET was lent receives (the module refuses them there)")
	}
	r.SetState(QPStateInit)
	s.SetState(QPStateRTS)
	e.recv, e.hrecv, e.qpnR = append(e.recv, r), append(e.hrecv, hr), append(e.qpnR, qpnR)
	e.send, e.qpnS = append(e.send, s), append(e.qpnS, qpnS)
}

// postSRQ posts n receives with wr_ids base..base+n-1, each a 64-byte slot
// of bufB at its wr_id.
func (e *srqEnv) postSRQ(t testing.TB, base, n int) {
	t.Helper()
	wrs := make([]RecvWR, n)
	for i := range wrs {
		id := base + i
		wrs[i] = RecvWR{WrID: uint64(id), SGEs: []SGE{e.sgeB((id%1000)*64, 64)}}
	}
	if err := e.srq.PostRecv(wrs); err != nil {
		t.Fatal(err)
	}
}

// sendTagged sends a message from send[i] whose first 8 bytes are tag.
func (e *srqEnv) sendTagged(t testing.TB, i int, tag uint64, signaled bool) {
	t.Helper()
	off := (i * 8) % 4096
	binary.LittleEndian.PutUint64(e.bufA[off:], tag)
	var fl uint32
	if signaled {
		fl = SendSignaled
	}
	if err := e.send[i].PostSend([]SendWR{{WrID: tag, Opcode: WRSend, Flags: fl, SGEs: []SGE{e.sgeA(off, 8)}}}); err != nil {
		t.Fatal(err)
	}
}

func forSRQModes(t *testing.T, f func(t *testing.T, mode string)) {
	for _, m := range []string{"kcmd", "cqring"} {
		t.Run(m, func(t *testing.T) { f(t, m) })
	}
}

// Receives through the provider SRQ complete as an SRQ's: the application's
// wr_id, the receiving QP's qp_num, the sender's src_qp, the byte count, the
// data in that WR's buffer; each WR once. A QP without the SRQ on the same
// CQ keeps its own completions untouched.
func TestProviderSRQCompletions(t *testing.T) {
	forSRQModes(t, func(t *testing.T, mode string) {
		e := newSRQEnv(t, mode, 64, 16, 2)
		e.postSRQ(t, 100, 8)
		if st := e.srq.Stats(); st.Posted != 8 || st.Lent != 8 || st.QPs != 2 {
			t.Fatalf("after posting 8: %+v", st)
		}
		if a, b := e.recv[0].ProviderSRQLent(), e.recv[1].ProviderSRQLent(); a != 4 || b != 4 {
			t.Fatalf("lent %d and %d, want 4 each (the SRQ's WRs shared)", a, b)
		}
		// A QP without SRQ receiving on the same CQ.
		plainB, hb, qpnPlain := e.newQP(t, e.cqB, e.hcqB)
		defer plainB.Close()
		plainA, ha, _ := e.newQP(t, e.cqA, e.hcqA)
		defer plainA.Close()
		e.d.Connect(ha, hb)
		if err := plainB.PostRecv([]RecvWR{{WrID: 0x5e00000000000001, SGEs: []SGE{e.sgeB(60000, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := plainA.PostSend([]SendWR{{WrID: 1, Opcode: WRSend, SGEs: []SGE{e.sgeA(8000, 5)}}}); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			e.sendTagged(t, 0, uint64(1000+k), false)
			e.sendTagged(t, 1, uint64(2000+k), false)
		}
		got := pollN(t, e.cqB, 7)
		seen := map[uint64]bool{}
		for _, w := range got {
			if w.QPNum == qpnPlain {
				if w.WrID != 0x5e00000000000001 || w.ByteLen != 5 {
					t.Fatalf("plain QP's completion changed: %+v", w)
				}
				continue
			}
			if w.Status != WCSuccess || w.Opcode != WCRecv || w.ByteLen != 8 || w.WrID < 100 || w.WrID >= 108 || seen[w.WrID] {
				t.Fatalf("srq completion %+v (seen %v)", w, seen)
			}
			seen[w.WrID] = true
			tag := binary.LittleEndian.Uint64(e.bufB[int(w.WrID%1000)*64:])
			switch {
			case w.QPNum == e.qpnR[0] && w.SrcQP == e.qpnS[0] && tag/1000 == 1:
			case w.QPNum == e.qpnR[1] && w.SrcQP == e.qpnS[1] && tag/1000 == 2:
			default:
				t.Fatalf("completion %+v with tag %d: wrong QP or data", w, tag)
			}
		}
		if st := e.srq.Stats(); st.Posted != 2 {
			t.Fatalf("after 6 receives: %+v, want 2 posted", st)
		}
	})
}

// A burst on one QP beyond its kernel RQ depth waits (RNR, the module's
// rnr_retry 7) and lands in the SRQ's WRs as polling lends them: no
// receive lost or duplicated, in order.
func TestProviderSRQBurstBeyondDepth(t *testing.T) {
	forSRQModes(t, func(t *testing.T, mode string) {
		e := newSRQEnv(t, mode, 64, 4, 1)
		e.d.SetRNRWait(true)
		e.postSRQ(t, 0, 40)
		if got := e.recv[0].ProviderSRQLent(); got != 4 {
			t.Fatalf("lent %d, want the depth 4", got)
		}
		for k := 0; k < 30; k++ {
			e.sendTagged(t, 0, uint64(k), k == 29)
		}
		if e.d.RNRWaits() == 0 {
			t.Fatal("no message met an empty RQ: the test does not test the burst")
		}
		got := pollN(t, e.cqB, 30)
		for k, w := range got {
			if w.Status != WCSuccess || w.WrID != uint64(k) {
				t.Fatalf("receive %d: %+v", k, w)
			}
			if tag := binary.LittleEndian.Uint64(e.bufB[int(w.WrID)*64:]); tag != uint64(k) {
				t.Fatalf("receive %d holds message %d", k, tag)
			}
		}
		if s := pollN(t, e.cqA, 1)[0]; s.Status != WCSuccess || s.WrID != 29 {
			t.Fatalf("sender's completion %+v", s)
		}
		if st := e.srq.Stats(); st.Posted != 10 || st.Lent != 4 {
			t.Fatalf("after 30 of 40: %+v", st)
		}
		expectEmpty(t, e.cqB)
	})
}

// The limit event: once fewer WRs than the limit remain, one
// IBV_EVENT_SRQ_LIMIT_REACHED with the SRQ's user handle on the event
// socket, and the limit reads 0 until modify_srq arms it again.
func TestProviderSRQLimitEvent(t *testing.T) {
	e := newSRQEnv(t, "kcmd", 16, 16, 1)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	e.srq.SetEventFD(fds[1])
	if err := e.srq.ModifyProvider(0, 17, SRQAttrLimit); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("limit above max_wr: %v, want EINVAL", err)
	}
	if err := e.srq.ModifyProvider(0, 3, SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	readEvent := func() (uint64, uint32, bool) {
		b := make([]byte, 32)
		n, _, err := unix.Recvfrom(fds[0], b, unix.MSG_DONTWAIT)
		if err != nil {
			return 0, 0, false
		}
		if n != 16 {
			t.Fatalf("event of %d bytes", n)
		}
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), true
	}
	e.postSRQ(t, 0, 5)
	for k := 0; k < 2; k++ {
		e.sendTagged(t, 0, uint64(k), false)
	}
	pollN(t, e.cqB, 2)
	if _, _, ok := readEvent(); ok {
		t.Fatal("event with 3 WRs left (limit 3)")
	}
	e.sendTagged(t, 0, 2, false)
	pollN(t, e.cqB, 1)
	el, typ, ok := readEvent()
	if !ok || el != 0xabc0 || typ != 15 {
		t.Fatalf("event %v: element %#x type %d, want 0xabc0 and 15 (SRQ_LIMIT_REACHED)", ok, el, typ)
	}
	if st := e.srq.Stats(); st.Limit != 0 || st.Events != 1 {
		t.Fatalf("after the event: %+v", st)
	}
	e.sendTagged(t, 0, 3, false)
	pollN(t, e.cqB, 1)
	if _, _, ok := readEvent(); ok {
		t.Fatal("a second event without re-arming")
	}
	if err := e.srq.ModifyProvider(0, 2, SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	e.postSRQ(t, 10, 2) // 3 posted
	e.sendTagged(t, 0, 4, false)
	pollN(t, e.cqB, 1)
	if _, _, ok := readEvent(); ok {
		t.Fatal("event with 2 left, limit 2")
	}
	e.sendTagged(t, 0, 5, false)
	pollN(t, e.cqB, 1)
	if _, typ, ok := readEvent(); !ok || typ != 15 {
		t.Fatal("no event after re-arming")
	}
}

// A QP destroyed with the SRQ's WRs in its kernel RQ: the control path moves
// it to ERR first (the module flushes them into the CQ), destroys it, and
// the flushed WRs go back to the SRQ, unreported, and to the other QP.
func TestProviderSRQQPDestroyedWithReceivesOutstanding(t *testing.T) {
	forSRQModes(t, func(t *testing.T, mode string) {
		e := newSRQEnv(t, mode, 64, 32, 2)
		e.postSRQ(t, 0, 20)
		if a := e.recv[0].ProviderSRQLent(); a != 10 {
			t.Fatalf("QP 0 lent %d, want 10", a)
		}
		e.sendTagged(t, 0, 7, false) // one real receive on QP 0 before it goes
		if err := e.d.QPError(e.hrecv[0]); err != nil {
			t.Fatal(err)
		}
		if err := e.d.DestroyQP(e.hrecv[0]); err != nil {
			t.Fatal(err)
		}
		e.recv[0].Close()
		e.recv[0] = nil
		if st := e.srq.Stats(); st.QPs != 1 || st.Zombies != 1 {
			t.Fatalf("after the destroy: %+v", st)
		}
		got := pollN(t, e.cqB, 1)
		if w := got[0]; w.Status != WCSuccess || w.QPNum != e.qpnR[0] {
			t.Fatalf("the receive before the destroy: %+v", w)
		}
		expectEmpty(t, e.cqB) // the 9 flushed WRs are the SRQ's again, not reported
		st := e.srq.Stats()
		if st.Zombies != 0 || st.Posted != 19 || st.Lent != 19 {
			t.Fatalf("after polling the flushes: %+v", st)
		}
		first := got[0].WrID
		for k := 0; k < 19; k++ {
			e.sendTagged(t, 1, uint64(100+k), false)
		}
		seen := map[uint64]bool{first: true}
		for _, w := range pollN(t, e.cqB, 19) {
			if w.Status != WCSuccess || w.QPNum != e.qpnR[1] || w.WrID >= 20 || seen[w.WrID] {
				t.Fatalf("completion %+v", w)
			}
			seen[w.WrID] = true
		}
		if len(seen) != 20 {
			t.Fatalf("%d distinct WRs of 20", len(seen))
		}
	})
}

// The CQ of a destroyed QP freed before its flushes were polled: the WRs
// come back to the SRQ then (the kernel QP is gone, nothing writes them).
func TestProviderSRQCQFreedBeforeFlushesPolled(t *testing.T) {
	e := newSRQEnv(t, "kcmd", 64, 32, 1)
	hcq, _, err := e.d.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := NewCQ(e.d.Sys(), 3, hcq, 64)
	if err != nil {
		t.Fatal(err)
	}
	hr, qpnR, err := e.d.CreateQP(QPTypeRC, hcq, hcq)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewQP(QPConfig{Sys: e.d.Sys(), CmdFd: 3, Handle: hr, QPNum: qpnR, Type: QPTypeRC, MaxSendWR: 16,
		MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: cq, RecvCQ: cq, SRQ: e.srq})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AttachProviderSRQ(32); err != nil {
		t.Fatal(err)
	}
	r.SetState(QPStateRTR)
	e.postSRQ(t, 0, 10)
	if a, b := e.recv[0].ProviderSRQLent(), r.ProviderSRQLent(); a+b != 10 || b == 0 {
		t.Fatalf("lent %d and %d", a, b)
	}
	_ = e.d.QPError(hr)
	_ = e.d.DestroyQP(hr)
	r.Close()
	cq.Close()
	if st := e.srq.Stats(); st.Zombies != 0 || st.Posted != 10 || e.recv[0].ProviderSRQLent() != 10 {
		t.Fatalf("after the CQ's free: %+v, lent to the other QP %d", st, e.recv[0].ProviderSRQLent())
	}
}

// Posts the provider SRQ refuses, at the WR that does not fit.
func TestProviderSRQRefusals(t *testing.T) {
	e := newSRQEnv(t, "kcmd", 4, 4, 1)
	err := e.srq.PostRecv([]RecvWR{{WrID: 1}, {WrID: 2, SGEs: []SGE{e.sgeB(0, 8), e.sgeB(8, 8)}}})
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("2 SGEs on a 1-SGE SRQ: %v, want EINVAL at WR 1", err)
	}
	err = e.srq.PostRecv([]RecvWR{{WrID: 3}, {WrID: 4}, {WrID: 5}, {WrID: 6}})
	if !errors.As(err, &pe) || pe.Index != 3 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("a fifth WR on a 4-WR SRQ: %v, want ENOMEM at WR 3", err)
	}
	if err := e.srq.ModifyProvider(2, 0, SRQAttrMaxWR); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("max_wr below the 4 posted: %v, want EINVAL", err)
	}
	if err := e.srq.ModifyProvider(8, 0, SRQAttrMaxWR); err != nil {
		t.Fatal(err)
	}
	if err := e.srq.PostRecv([]RecvWR{{WrID: 7}}); err != nil {
		t.Fatalf("after growing to 8: %v", err)
	}
	if st := e.srq.Stats(); st.MaxWR != 8 || st.Posted != 5 {
		t.Fatalf("%+v", st)
	}
	if err := e.recv[0].PostRecv([]RecvWR{{WrID: 9}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("post_recv on a QP with an SRQ: %v, want EINVAL", err)
	}
}

// Several threads post to the SRQ while messages arrive on two QPs and a
// poller consumes and refills: every message lands in a WR, no WR is
// received twice. The posters post slack WRs beyond the messages: a QP's
// kernel RQ holds lent WRs only it can consume (docs/srq.md), at most its
// depth each.
func TestProviderSRQConcurrentPosters(t *testing.T) {
	forSRQModes(t, func(t *testing.T, mode string) {
		const depth = 16
		e := newSRQEnv(t, mode, 128, depth, 2)
		e.d.SetRNRWait(true)
		const posters, perPoster, slack = 4, 250, depth / 2
		const total = posters * perPoster
		var received atomic.Int64
		var wg sync.WaitGroup
		for p := 0; p < posters; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for k := 0; k < perPoster+slack && received.Load() < total; {
					id := uint64(p*(perPoster+slack) + k)
					err := e.srq.PostRecv([]RecvWR{{WrID: id, SGEs: []SGE{e.sgeB(int(id%1000)*64, 64)}}})
					if errors.Is(err, unix.ENOMEM) {
						continue // full: the poller frees slots
					}
					if err != nil {
						t.Error(err)
						return
					}
					k++
				}
			}(p)
		}
		// Senders: never more than 256 messages ahead of the receives
		// (the double parks at most 1024).
		var sendMu sync.Mutex
		for s := 0; s < 2; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				for k := 0; k < total/2; k++ {
					for int64(k*2)-received.Load() > 256 {
						if t.Failed() {
							return
						}
					}
					sendMu.Lock() // the double's wire is one lock anyway
					e.sendTagged(t, s, uint64(k), false)
					sendMu.Unlock()
				}
			}(s)
		}
		seen := make(map[uint64]bool, total)
		wc := make([]WC, 32)
		for received.Load() < total && !t.Failed() {
			n, err := e.cqB.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:n] {
				if w.Status != WCSuccess || w.WrID >= posters*(perPoster+slack) || seen[w.WrID] {
					t.Fatalf("completion %+v", w)
				}
				seen[w.WrID] = true
			}
			received.Add(int64(n))
		}
		wg.Wait()
		if got := received.Load(); got != total || e.d.RNRWaits() == 0 {
			t.Fatalf("%d received of %d, %d RNR waits", got, total, e.d.RNRWaits())
		}
	})
}

// A destroyed QP whose engine object lives on (objects.c frees it later)
// gets nothing more from the SRQ once the control path set it to ERR, even
// when the kernel hands its handle to the next QP: seen on the bed, where
// the WRs the flushes gave back went into the next QP with the old handle
// and their completions came out with the SRQ's wr_id.
func TestProviderSRQDestroyedQPHandleReused(t *testing.T) {
	e := newSRQEnv(t, "kcmd", 64, 32, 2)
	e.postSRQ(t, 0, 20)
	old := e.hrecv[0]
	e.recv[0].SetState(QPStateErr) // as cshim/gopart's destroy_qp does first
	if err := e.d.QPError(old); err != nil {
		t.Fatal(err)
	}
	if err := e.d.DestroyQP(old); err != nil {
		t.Fatal(err)
	}
	// The next QP on the double takes the handle.
	h, _, err := e.d.CreateQP(QPTypeRC, e.hcqB, e.hcqB)
	if err != nil {
		t.Fatal(err)
	}
	if h != old {
		t.Fatalf("the double gave handle %d, not the freed %d: the test tests nothing", h, old)
	}
	for k := 0; k < 5; k++ {
		expectEmpty(t, e.cqB) // the 10 flushes: back to the SRQ, never reported
	}
	if _, _, _, held := e.d.RQCounts(h); held != 0 {
		t.Fatalf("the new QP at the old handle holds %d of the SRQ's WRs", held)
	}
	if st := e.srq.Stats(); st.Posted != 20 || e.recv[1].ProviderSRQLent() != 20 {
		t.Fatalf("%+v, lent to QP 1: %d", st, e.recv[1].ProviderSRQLent())
	}
}

// A kernel RQ fuller than the provider counted (ENOMEM from POST_RECV) is
// transient: the QP gets the rest at a later poll, and no message waits for
// ever. Before, the QP took nothing more until its state changed.
func TestProviderSRQFullKernelRQIsTransient(t *testing.T) {
	e := newSRQEnv(t, "kcmd", 64, 8, 1)
	e.d.SetRNRWait(true)
	e.d.SetRQDepth(e.hrecv[0], 4) // the kernel holds 4 where the provider counts on 8
	e.postSRQ(t, 0, 8)
	if got := e.recv[0].ProviderSRQLent(); got != 4 {
		t.Fatalf("lent %d, want the 4 the kernel took", got)
	}
	for k := 0; k < 8; k++ {
		e.sendTagged(t, 0, uint64(k), false)
	}
	got := pollN(t, e.cqB, 8)
	for k, w := range got {
		if w.Status != WCSuccess || w.WrID != uint64(k) {
			t.Fatalf("receive %d: %+v", k, w)
		}
	}
}

// The module's poll reads a completion's qp_num from the ib_qp, which the
// core frees after destroy_qp: the flushes of a destroyed QP's lent WRs,
// polled after the destroy, carry whatever that memory holds (seen on
// pleite-gda-8099446, where the 10 WRs a destroyed QP held never reached the
// other QP: their flushes were taken for another QP's and dropped). Such a
// QP's completions are matched by their token alone: the flushes go back to
// the SRQ, a receive completion gets the application's wr_id and the number
// the QP had. Both orders of the engine's side: the engine QP freed before
// the poll, and kept (objects.c frees it after the async events' acks).
func TestProviderSRQDestroyedQPFlushesWithFreedQPNum(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "engine_qp_freed"
		if keep {
			name = "engine_qp_kept"
		}
		for _, junk := range []uint32{0, 0x6b6b6b6b} {
			t.Run(fmt.Sprintf("%s/qpn_%#x", name, junk), func(t *testing.T) {
				e := newSRQEnv(t, "kcmd", 64, 32, 2)
				e.d.SetFreedQPNum(true, junk)
				e.postSRQ(t, 0, 20)
				if a := e.recv[0].ProviderSRQLent(); a != 10 {
					t.Fatalf("QP 0 lent %d, want 10", a)
				}
				e.sendTagged(t, 0, 7, false)   // a real receive on QP 0, polled after the destroy
				e.recv[0].SetState(QPStateErr) // as cshim/gopart's destroy_qp does first
				if err := e.d.QPError(e.hrecv[0]); err != nil {
					t.Fatal(err)
				}
				if err := e.d.DestroyQP(e.hrecv[0]); err != nil {
					t.Fatal(err)
				}
				if !keep {
					e.recv[0].Close()
					e.recv[0] = nil
				}
				got := pollN(t, e.cqB, 1)
				if w := got[0]; w.Status != WCSuccess || w.QPNum != e.qpnR[0] || w.WrID >= 20 {
					t.Fatalf("the receive before the destroy: %+v (QP 0 was %#x)", w, e.qpnR[0])
				}
				expectEmpty(t, e.cqB) // the 9 flushes: the SRQ's again, not reported
				if st := e.srq.Stats(); st.Posted != 19 || st.Pending != 0 || e.recv[1].ProviderSRQLent() != 19 {
					t.Fatalf("after polling the flushes: %+v, lent to QP 1: %d", st, e.recv[1].ProviderSRQLent())
				}
				seen := map[uint64]bool{got[0].WrID: true}
				for k := 0; k < 19; k++ {
					e.sendTagged(t, 1, uint64(100+k), false)
				}
				for _, w := range pollN(t, e.cqB, 19) {
					if w.Status != WCSuccess || w.QPNum != e.qpnR[1] || w.WrID >= 20 || seen[w.WrID] {
						t.Fatalf("completion %+v", w)
					}
					seen[w.WrID] = true
				}
			})
		}
	}
}
