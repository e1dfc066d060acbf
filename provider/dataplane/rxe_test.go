package dataplane

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
	"usb4verbs/uapi"
)

// rxeEnv is one QP on fake rxe rings: SQ 8 slots of 512 bytes, RQ 8 slots of
// 128 bytes, CQ 4 slots; the engine maps them through the seam.
type rxeEnv struct {
	f  *usb4double.RxeFake
	cq *CQ
	qp *QP
}

func newRxeEnvTB(t testing.TB) *rxeEnv { return newRxeEnvType(t, QPTypeRC, false) }

func newRxeEnv(t *testing.T, qpType uint32, sqSigAll bool) *rxeEnv {
	return newRxeEnvType(t, qpType, sqSigAll)
}

func newRxeEnvType(t testing.TB, qpType uint32, sqSigAll bool) *rxeEnv {
	t.Helper()
	f := usb4double.NewRxeFake(8, 9, 8, 7, 4)
	e := &rxeEnv{f: f}
	t.Cleanup(func() {
		if e.qp != nil {
			e.qp.Close()
		}
		if e.cq != nil {
			e.cq.Close()
		}
		f.Close()
	})
	var err error
	if e.cq, err = NewCQ(f.Sys(), 3, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.cq.AttachRxe(nil, usb4double.RxeCQ, f.Len(usb4double.RxeCQ)); err != nil {
		t.Fatal(err)
	}
	e.qp, err = NewQP(QPConfig{Sys: f.Sys(), CmdFd: 3, Handle: 7, QPNum: 0x11, Type: qpType, SqSigAll: sqSigAll,
		MaxSendSGE: 4, MaxRecvSGE: 4, MaxInline: 256, SendCQ: e.cq, RecvCQ: e.cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.qp.AttachRxe(nil, usb4double.RxeSQ, f.Len(usb4double.RxeSQ), nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); err != nil {
		t.Fatal(err)
	}
	if e.cq.Backend() != BackendRxe || e.qp.SendBackend() != BackendRxe || e.qp.RecvBackend() != BackendRxe {
		t.Fatalf("backends %s/%s/%s", e.cq.Backend(), e.qp.SendBackend(), e.qp.RecvBackend())
	}
	return e
}

func (e *rxeEnv) sendWQE(i uint32) (*uapi.RxeSendWqe, []byte) {
	s := e.f.Slot(usb4double.RxeSQ, i)
	return (*uapi.RxeSendWqe)(unsafe.Pointer(&s[0])), s[uapi.SizeofRxeSendWqe:]
}

func TestRxeSendWQEInPlace(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	err := e.qp.PostSend([]SendWR{{WrID: 0xabc, Opcode: WRSendWithImm, Flags: SendSignaled | SendSolicited,
		ImmData: be32(0x01020304), SGEs: []SGE{{Addr: 0x1000, Length: 100, LKey: 5}, {Addr: 0x2000, Length: 28, LKey: 6}}}})
	if err != nil {
		t.Fatal(err)
	}
	if prod, cons := e.f.Indices(usb4double.RxeSQ); prod != 1 || cons != 0 {
		t.Fatalf("SQ indices %d/%d", prod, cons)
	}
	if e.f.Doorbells() != 1 || e.f.BadCommands() != 0 {
		t.Fatalf("doorbells %d bad %d", e.f.Doorbells(), e.f.BadCommands())
	}
	w, tail := e.sendWQE(0)
	if w.Wr.WrId != 0xabc || w.Wr.Opcode != WRSendWithImm || w.Wr.SendFlags != SendSignaled|SendSolicited ||
		w.Wr.Ex != be32(0x01020304) {
		t.Fatalf("wr %+v", w.Wr)
	}
	if w.Dma.Length != 128 || w.Dma.Resid != 128 || w.Dma.NumSge != 2 || w.Dma.CurSge != 0 || w.Dma.SgeOffset != 0 || w.State != 0 {
		t.Fatalf("dma %+v state %d", w.Dma, w.State)
	}
	sge := unsafe.Slice((*uapi.RxeSge)(unsafe.Pointer(&tail[0])), 2)
	if sge[0] != (uapi.RxeSge{Addr: 0x1000, Length: 100, Lkey: 5}) || sge[1] != (uapi.RxeSge{Addr: 0x2000, Length: 28, Lkey: 6}) {
		t.Fatalf("sges %+v", sge)
	}
}

func TestRxeInlineRDMAAndAtomicWQEs(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	data := pinned(t, 4096)
	fill(data, 3)
	err := e.qp.PostSend([]SendWR{
		{WrID: 1, Opcode: WRRDMAWrite, Flags: SendInline, SGEs: []SGE{{Addr: addr(data), Length: 40}, {Addr: addr(data) + 100, Length: 60}},
			RemoteAddr: 0x7000, RKey: 99},
		{WrID: 2, Opcode: WRAtomicFetchAdd, SGEs: []SGE{{Addr: 0x3000, Length: 8, LKey: 1}}, RemoteAddr: 0x8008, RKey: 77, CompareAdd: 11, Swap: 22},
		{WrID: 3, Opcode: WRRDMARead, SGEs: []SGE{{Addr: 0x4000, Length: 64, LKey: 2}}, RemoteAddr: 0x9000, RKey: 55},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.f.Doorbells() != 1 {
		t.Fatalf("one batch rang %d doorbells", e.f.Doorbells())
	}
	w, tail := e.sendWQE(0)
	if w.Wr.Rdma().RemoteAddr != 0x7000 || w.Wr.Rdma().Rkey != 99 || w.Iova != 0x7000 || w.Dma.Length != 100 {
		t.Fatalf("inline write WQE %+v", w)
	}
	want := append(append([]byte{}, data[:40]...), data[100:160]...)
	if !bytes.Equal(tail[:100], want) {
		t.Fatal("inline data not copied into the WQE")
	}
	w, _ = e.sendWQE(1)
	a := w.Wr.Atomic()
	if a.RemoteAddr != 0x8008 || a.Rkey != 77 || a.CompareAdd != 11 || a.Swap != 22 || w.Iova != 0x8008 || w.Dma.Length != 8 {
		t.Fatalf("atomic WQE %+v %+v", w, a)
	}
	w, _ = e.sendWQE(2)
	if w.Wr.Opcode != WRRDMARead || w.Iova != 0x9000 || w.Wr.Rdma().Rkey != 55 {
		t.Fatalf("read WQE %+v", w)
	}
}

func TestRxeRejectsBadWRs(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	cases := []struct {
		name string
		wr   SendWR
	}{
		{"misaligned atomic", SendWR{Opcode: WRAtomicCmpAndSwp, SGEs: []SGE{{Addr: 1, Length: 8}}, RemoteAddr: 0x1004}},
		{"short atomic", SendWR{Opcode: WRAtomicCmpAndSwp, SGEs: []SGE{{Addr: 1, Length: 4}}, RemoteAddr: 0x1000}},
		{"inline too long", SendWR{Opcode: WRSend, Flags: SendInline, SGEs: []SGE{{Addr: 1, Length: 257}}}},
		{"too many SGEs", SendWR{Opcode: WRSend, SGEs: make([]SGE, 5)}},
		{"unknown opcode", SendWR{Opcode: 42}},
	}
	for _, c := range cases {
		err := e.qp.PostSend([]SendWR{{Opcode: WRSend}, c.wr})
		var pe *PostError
		if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL at WR 1", c.name, err)
		}
	}
}

func TestRxeUDAddressVector(t *testing.T) {
	e := newRxeEnv(t, QPTypeUD, false)
	av := make([]byte, uapi.SizeofRxeAv)
	fill(av, 0x40)
	newer, err := NewAH(3, 9, av)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	older, err := NewAH(4, 0, av)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	err = e.qp.PostSend([]SendWR{
		{Opcode: WRSend, AH: newer, RemoteQPN: 0x123, RemoteQKey: 0x11111111},
		{Opcode: WRSend, AH: older, RemoteQPN: 0x456, RemoteQKey: 0x22222222},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := e.sendWQE(0)
	ud := w.Wr.Ud()
	if ud.AhNum != 9 || ud.RemoteQpn != 0x123 || ud.RemoteQkey != 0x11111111 || ud.Av.PortNum != 0 {
		t.Fatalf("ud WQE with ah_num %+v", ud)
	}
	w, _ = e.sendWQE(1)
	ud = w.Wr.Ud()
	got := unsafe.Slice((*byte)(unsafe.Pointer(&ud.Av)), uapi.SizeofRxeAv)
	if ud.AhNum != 0 || ud.RemoteQpn != 0x456 || !bytes.Equal(got, av) {
		t.Fatalf("ud WQE for an old kernel did not carry the AV: %+v", ud)
	}
	if err := e.qp.PostSend([]SendWR{{Opcode: WRSend}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("UD send without AH: %v", err)
	}
}

func TestRxeFullQueueAndWraparound(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	var wrs []SendWR
	for i := 0; i < 8; i++ {
		wrs = append(wrs, SendWR{WrID: uint64(i), Opcode: WRSend, Flags: SendSignaled})
	}
	err := e.qp.PostSend(wrs)
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 7 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("8 WRs into 7 free slots: %v", err)
	}
	if e.f.Doorbells() != 1 {
		t.Fatal("the 7 posted WRs were not rung")
	}
	e.f.Consume(usb4double.RxeSQ, 100)
	// Now one at a time through the ring many times, completing each.
	e.f.AutoComplete(true)
	wc := make([]WC, 2)
	for i := 0; i < 50; i++ {
		if err := e.qp.PostSend([]SendWR{{WrID: uint64(1000 + i), Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{{Length: 1}}}}); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		n, err := e.cq.Poll(wc)
		if err != nil || n != 1 || wc[0].WrID != uint64(1000+i) || wc[0].ByteLen != 1 {
			t.Fatalf("round %d: n=%d err=%v %+v", i, n, err, wc[0])
		}
	}
	expectEmpty(t, e.cq)
}

func TestRxeCQRing(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	expectEmpty(t, e.cq)
	for i := 0; i < 3; i++ {
		var w uapi.IbUverbsWc
		w.WrId = uint64(50 + i)
		w.Opcode = WCRecv
		w.ByteLen = uint32(i)
		w.QpNum = 0x11
		w.Ex = be32(uint32(i))
		w.WcFlags = WCWithImm
		if err := e.f.ProduceCQE(unsafe.Slice((*byte)(unsafe.Pointer(&w)), uapi.SizeofIbUverbsWc)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.f.ProduceCQE(make([]byte, 48)); err == nil {
		t.Fatal("a 4-slot ring took a 4th entry")
	}
	wc := make([]WC, 2)
	n, err := e.cq.Poll(wc)
	if err != nil || n != 2 || wc[0].WrID != 50 || wc[1].WrID != 51 || wc[1].ImmData != be32(1) || wc[1].WCFlags != WCWithImm {
		t.Fatalf("first poll n=%d err=%v %+v", n, err, wc)
	}
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 2 {
		t.Fatalf("consumer index %d after two entries", cons)
	}
	n, _ = e.cq.Poll(wc)
	if n != 1 || wc[0].WrID != 52 {
		t.Fatalf("second poll %d %+v", n, wc[0])
	}
	if _, err := e.cq.Poll(nil); err != nil {
		t.Fatal(err)
	}
}

func TestRxeReceives(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	if err := e.qp.PostRecv([]RecvWR{{WrID: 1}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("receive in RESET: %v", err)
	}
	e.qp.SetState(QPStateInit)
	err := e.qp.PostRecv([]RecvWR{{WrID: 7, SGEs: []SGE{{Addr: 0x10, Length: 3, LKey: 1}, {Addr: 0x20, Length: 4, LKey: 2}}}, {WrID: 8}})
	if err != nil {
		t.Fatal(err)
	}
	s := e.f.Slot(usb4double.RxeRQ, 0)
	r := (*uapi.RxeRecvWqe)(unsafe.Pointer(&s[0]))
	sge := unsafe.Slice((*uapi.RxeSge)(unsafe.Pointer(&s[uapi.SizeofRxeRecvWqe])), 2)
	if r.WrId != 7 || r.Dma.Length != 7 || r.Dma.NumSge != 2 || sge[1] != (uapi.RxeSge{Addr: 0x20, Length: 4, Lkey: 2}) {
		t.Fatalf("recv WQE %+v %+v", r, sge)
	}
	if err := e.qp.PostRecv([]RecvWR{{SGEs: make([]SGE, 5)}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("5 SGEs with max 4: %v", err)
	}
	if prod, _ := e.f.Indices(usb4double.RxeRQ); prod != 2 {
		t.Fatalf("RQ producer %d", prod)
	}
}

func TestRxeSRQ(t *testing.T) {
	f := usb4double.NewRxeFake(8, 9, 8, 7, 4)
	defer f.Close()
	srq, err := NewSRQ(f.Sys(), 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if err := srq.AttachRxe(nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); err != nil {
		t.Fatal(err)
	}
	var wrs []RecvWR
	for i := 0; i < 8; i++ {
		wrs = append(wrs, RecvWR{WrID: uint64(i), SGEs: []SGE{{Addr: uint64(i), Length: 1}}})
	}
	err = srq.PostRecv(wrs)
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 7 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("8 receives into 7 slots: %v", err)
	}
	s := f.Slot(usb4double.RxeRQ, 6)
	if r := (*uapi.RxeRecvWqe)(unsafe.Pointer(&s[0])); r.WrId != 6 || r.Dma.NumSge != 1 {
		t.Fatalf("srq slot 6 %+v", r)
	}
}

// A resize moves an rxe SRQ to a new ring while other threads post: the
// kernel copies the outstanding receives during MODIFY_SRQ (here: the modify
// callback, which then lingers as if the command were slow), so a receive
// posted after that copy and before the engine moved would land in the old
// ring, which nobody reads. Every accepted receive must end up in the new ring
// exactly once. The fake's SQ region stands in for the new ring.
func TestRxeSRQResizeUnderConcurrentPosters(t *testing.T) {
	const newQ, oldQ = usb4double.RxeSQ, usb4double.RxeRQ
	f := usb4double.NewRxeFake(64, 9, 8, 7, 4)
	defer f.Close()
	srq, err := NewSRQ(f.Sys(), 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if err := srq.AttachRxe(nil, oldQ, f.Len(oldQ)); err != nil {
		t.Fatal(err)
	}
	accepted := map[uint64]bool{}
	for i := uint64(0); i < 3; i++ {
		if err := srq.PostRecv([]RecvWR{{WrID: 1000 + i, SGEs: []SGE{{Addr: i, Length: 1}}}}); err != nil {
			t.Fatal(err)
		}
		accepted[1000+i] = true
	}

	const posters, each = 4, 12
	start := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < posters; g++ {
		wg.Add(1)
		// Its own Go handle on the same C object: the Go API serialises
		// posts per handle, an application's threads reach the C engine
		// side by side.
		h := &SRQ{c: srq.c}
		go func() {
			defer wg.Done()
			defer h.scratch.free()
			<-start
			for i := 0; i < each; i++ {
				id := uint64(g)<<32 | uint64(i)
				if err := h.PostRecv([]RecvWR{{WrID: id, SGEs: []SGE{{Addr: id, Length: 1}}}}); err != nil {
					t.Errorf("poster %d: %v", g, err)
					return
				}
				mu.Lock()
				accepted[id] = true
				mu.Unlock()
			}
		}()
	}
	err = srq.Resize(func() (uint64, uint32, error) {
		close(start)
		prod, cons := f.Indices(oldQ)
		n := uint32(0)
		for ; cons != prod; cons = (cons + 1) & f.Mask(oldQ) {
			copy(f.Slot(newQ, n), f.Slot(oldQ, cons))
			n++
		}
		f.SetIndices(newQ, n, 0)
		f.SetIndices(oldQ, prod, prod)
		time.Sleep(20 * time.Millisecond)
		return newQ, f.Len(newQ), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	prod, cons := f.Indices(newQ)
	found := map[uint64]int{}
	for i := cons; i != prod; i = (i + 1) & f.Mask(newQ) {
		found[(*uapi.RxeRecvWqe)(unsafe.Pointer(&f.Slot(newQ, i)[0])).WrId]++
	}
	for id := range accepted {
		if found[id] != 1 {
			t.Errorf("receive %#x is %d times in the new ring", id, found[id])
		}
	}
	if len(found) != len(accepted) || len(accepted) != 3+posters*each {
		t.Fatalf("new ring holds %d receives, %d accepted, %d posted", len(found), len(accepted), 3+posters*each)
	}
	if p, c := f.Indices(oldQ); p != c {
		t.Fatalf("old ring written after the resize: producer %d consumer %d", p, c)
	}
}

// A resize whose new ring the kernel describes badly leaves no ring to post
// to: modify_srq reports it, and every later post fails instead of writing
// where the kernel no longer reads.
func TestRxeSRQResizeToBadRing(t *testing.T) {
	f := usb4double.NewRxeFake(8, 9, 8, 7, 4)
	defer f.Close()
	srq, err := NewSRQ(f.Sys(), 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if err := srq.AttachRxe(nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); err != nil {
		t.Fatal(err)
	}
	if err := srq.Resize(func() (uint64, uint32, error) { return usb4double.RxeSQ, 0, nil }); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("resize to a zero-size ring: %v", err)
	}
	err = srq.PostRecv([]RecvWR{{WrID: 1}})
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("post after a failed remap: %v", err)
	}
	if p, _ := f.Indices(usb4double.RxeRQ); p != 0 {
		t.Fatalf("old ring written: producer %d", p)
	}
	// A failed command leaves the ring as it was.
	srq2, err := NewSRQ(f.Sys(), 3, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srq2.Close()
	if err := srq2.AttachRxe(nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); err != nil {
		t.Fatal(err)
	}
	if err := srq2.Resize(func() (uint64, uint32, error) { return 0, 0, unix.EINVAL }); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("failed modify: %v", err)
	}
	if err := srq2.PostRecv([]RecvWR{{WrID: 2}}); err != nil {
		t.Fatalf("post after a failed modify: %v", err)
	}
	if p, _ := f.Indices(usb4double.RxeRQ); p != 1 {
		t.Fatalf("old ring producer %d after a failed modify, want 1", p)
	}
}

func TestRxeRejectsBadRingHeader(t *testing.T) {
	f := usb4double.NewRxeFake(8, 4, 8, 7, 4) // 16-byte SQ slots: too small for a WQE
	defer f.Close()
	cq, _ := NewCQ(f.Sys(), 3, 1, 3)
	defer cq.Close()
	qp, _ := NewQP(QPConfig{Sys: f.Sys(), Handle: 1, Type: QPTypeRC, MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: cq, RecvCQ: cq})
	defer qp.Close()
	if err := qp.AttachRxe(nil, usb4double.RxeSQ, f.Len(usb4double.RxeSQ), nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("attach with 16-byte slots: %v", err)
	}
	if err := qp.AttachRxe(nil, usb4double.RxeSQ, f.Len(usb4double.RxeSQ)-1, nil, 1, 0); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("attach with a short mapping: %v", err)
	}
	if qp.SendBackend() != BackendKCmd {
		t.Fatalf("failed attach changed the backend to %s", qp.SendBackend())
	}
}

// The fast path cshim installs on rxe contexts reads the ring as Poll does:
// order, partial batches, the consumer index it publishes, empty = 0.
func TestRxeFastPollRing(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	wc := make([]WC, 2)
	if n, err := e.cq.pollFast(wc); n != 0 || err != nil {
		t.Fatalf("empty ring: n=%d err=%v", n, err)
	}
	for i := 0; i < 3; i++ {
		var w uapi.IbUverbsWc
		w.WrId = uint64(60 + i)
		w.Opcode = WCRecv
		w.ByteLen = uint32(10 + i)
		w.QpNum = 0x11
		if err := e.f.ProduceCQE(unsafe.Slice((*byte)(unsafe.Pointer(&w)), uapi.SizeofIbUverbsWc)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.cq.pollFast(wc)
	if err != nil || n != 2 || wc[0].WrID != 60 || wc[1].WrID != 61 || wc[1].ByteLen != 11 || wc[1].QPNum != 0x11 {
		t.Fatalf("first fast poll n=%d err=%v %+v", n, err, wc)
	}
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 2 {
		t.Fatalf("consumer index %d after two entries", cons)
	}
	n, err = e.cq.pollFast(wc)
	if err != nil || n != 1 || wc[0].WrID != 62 {
		t.Fatalf("second fast poll n=%d err=%v %+v", n, err, wc[0])
	}
	if n, err := e.cq.pollFast(wc); n != 0 || err != nil {
		t.Fatalf("drained ring: n=%d err=%v", n, err)
	}
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 3 {
		t.Fatalf("consumer index %d after three entries", cons)
	}
}

// A CQ that is not an rxe ring (or has DV QPs) reached through the fast
// path must still be polled by its own backend, via cq->slow.
func TestFastPollDivertsOtherBackends(t *testing.T) {
	for _, m := range usb4Modes {
		t.Run(m, func(t *testing.T) {
			e := newUSB4Env(t, m, 64)
			err := e.qpA.PostSend([]SendWR{{WrID: 77, Opcode: WRRDMAWrite, Flags: SendSignaled,
				SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB}})
			if err != nil {
				t.Fatal(err)
			}
			wc := make([]WC, 4)
			for idle := 0; idle < 1000; idle++ {
				n, err := e.cqA.pollFast(wc)
				if err != nil {
					t.Fatalf("fast poll: %v", err)
				}
				if n == 0 {
					continue
				}
				if n != 1 || wc[0].WrID != 77 || wc[0].Status != 0 {
					t.Fatalf("n=%d %+v", n, wc[:n])
				}
				return
			}
			t.Fatal("no completion through the fast path")
		})
	}
}
