package dataplane

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
	"usb4verbs/uapi"
)

// The provider SRQ over rxe's kernel QPs (USB4VERBS_SRQ=provider, docs/srq.md
// "Provider SRQ on rxe"), against the rxe double: the SRQ lends its WRs by
// writing them into the QP's own receive ring, as librxe posts (rxe's kernel
// has no POST_RECV command for user QPs: the double counts any command it
// does not serve as bad), and a completion read from the CQ's rxe ring, by
// ibv_poll_cq's fast path that cshim installs on rxe contexts or by
// ibv_start_poll's, carries the application's wr_id, never the lending's
// token; a flush (rxe writes opcode 0 for it) goes back to the SRQ and to
// the next QP, unreported.
func TestProviderSRQOverRxeRings(t *testing.T) {
	for _, poll := range []string{"poll_cq", "start_poll"} {
		t.Run(poll, func(t *testing.T) { testProviderSRQOverRxe(t, poll) })
	}
}

func testProviderSRQOverRxe(t *testing.T, poll string) {
	f := usb4double.NewRxeFake(8, 9, 16, 6, 16)
	t.Cleanup(f.Close)
	cq, err := NewCQ(f.Sys(), 3, 1, 15)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	if err := cq.AttachRxe(nil, usb4double.RxeCQ, f.Len(usb4double.RxeCQ)); err != nil {
		t.Fatal(err)
	}
	srq, err := NewProviderSRQ(f.Sys(), 3, 8, 1, 0, 0xabc1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srq.Close)
	newQP := func(handle, qpn uint32) *QP {
		t.Helper()
		qp, err := NewQP(QPConfig{Sys: f.Sys(), CmdFd: 3, Handle: handle, QPNum: qpn, Type: QPTypeRC, MaxSendSGE: 1,
			MaxRecvSGE: 1, SendCQ: cq, RecvCQ: cq, SRQ: srq})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(qp.Close)
		// A provider SRQ's QP has no SRQ in the kernel: rxe gives it an RQ
		// ring of its own, which the SRQ fills.
		if err := qp.AttachRxe(nil, usb4double.RxeSQ, f.Len(usb4double.RxeSQ), nil, usb4double.RxeRQ,
			f.Len(usb4double.RxeRQ)); err != nil {
			t.Fatal(err)
		}
		if qp.SendBackend() != BackendRxe || qp.RecvBackend() != BackendRxe {
			t.Fatalf("backends send %s recv %s, want rxe rings", qp.SendBackend(), qp.RecvBackend())
		}
		if err := qp.PostRecv([]RecvWR{{WrID: 1}}); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("the application's post_recv on a QP with an SRQ: %v, want EINVAL", err)
		}
		if err := qp.AttachProviderSRQ(8); err != nil {
			t.Fatal(err)
		}
		qp.SetState(QPStateInit)
		return qp
	}
	qp1 := newQP(7, 0x11)
	bufs := make([]byte, 8*64)
	wrs := make([]RecvWR, 4)
	for i := range wrs {
		wrs[i] = RecvWR{WrID: uint64(100 + i), SGEs: []SGE{{Addr: uint64(uintptr(unsafe.Pointer(&bufs[i*64]))), Length: 64, LKey: 5}}}
	}
	if err := srq.PostRecv(wrs); err != nil {
		t.Fatal(err)
	}
	lentTotal := func() uint32 { p, _ := f.Indices(usb4double.RxeRQ); return p }
	if got := lentTotal(); got != 4 {
		t.Fatalf("%d WRs in the RQ ring, want 4", got)
	}
	// What the kernel holds: tokens, with the application's buffers.
	tokens := make([]uint64, 0, 8)
	ring := func(i uint32) (uint64, uint64) {
		s := f.Slot(usb4double.RxeRQ, i)
		return binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[uapi.SizeofRxeRecvWqe:])
	}
	for i := uint32(0); i < 4; i++ {
		tok, addr := ring(i)
		if tok>>56 != 0x5e || addr != wrs[i].SGEs[0].Addr {
			t.Fatalf("RQ slot %d: wr_id %#x addr %#x, want a lending token and %#x", i, tok, addr, wrs[i].SGEs[0].Addr)
		}
		tokens = append(tokens, tok)
	}
	produce := func(wrID uint64, status, opcode, qpn uint32) {
		t.Helper()
		var w uapi.IbUverbsWc
		w.WrId, w.Status, w.Opcode, w.ByteLen, w.QpNum, w.SrcQp = wrID, status, opcode, 5, qpn, 0x22
		if err := f.ProduceCQE(unsafe.Slice((*byte)(unsafe.Pointer(&w)), uapi.SizeofIbUverbsWc)); err != nil {
			t.Fatal(err)
		}
	}
	pollAll := func() []WC {
		t.Helper()
		var out []WC
		switch poll {
		case "poll_cq":
			wc := make([]WC, 8)
			n, err := cq.pollFast(wc)
			if err != nil {
				t.Fatal(err)
			}
			out = wc[:n]
		default:
			k := cq.NewCursor()
			defer k.Free()
			w, err := k.Start()
			for err == nil {
				out = append(out, w)
				w, err = k.Next()
			}
			k.End()
			if !errors.Is(err, unix.ENOENT) {
				t.Fatal(err)
			}
		}
		return out
	}

	// A receive into the second WR: the application's wr_id, the rest as rxe wrote it.
	produce(tokens[1], 0, WCRecv, 0x11)
	got := pollAll()
	if len(got) != 1 || got[0].WrID != 101 || got[0].QPNum != 0x11 || got[0].SrcQP != 0x22 || got[0].ByteLen != 5 ||
		got[0].Opcode != WCRecv || got[0].Status != 0 {
		t.Fatalf("completion %+v, want wr_id 101 of qp 0x11 from 0x22", got)
	}
	if st := srq.Stats(); st.Posted != 3 || st.Lent != 3 {
		t.Fatalf("after one receive: %+v", st)
	}

	// QP 1 fails: rxe flushes its three WRs with opcode 0 (its flush CQE
	// sets no opcode); they are not the application's completions, they go
	// back to the SRQ and, once QP 2 takes receives, to it.
	qp1.SetState(QPStateErr)
	for _, i := range []int{0, 2, 3} {
		produce(tokens[i], WCWRFlushErr, WCSend, 0x11)
	}
	if got := pollAll(); len(got) != 0 {
		t.Fatalf("flushes of lent WRs reported: %+v", got)
	}
	if st := srq.Stats(); st.Posted != 3 || st.Pending != 3 || st.Lent != 0 {
		t.Fatalf("after the flushes: %+v, want 3 posted and pending", st)
	}
	f.Consume(usb4double.RxeRQ, 4)
	newQP(8, 0x12)
	if st := srq.Stats(); st.Lent != 3 || lentTotal() != 7 {
		t.Fatalf("after QP 2 joined: %+v, %d WRs in the RQ ring; want its 3", st, lentTotal())
	}
	seen := map[uint64]bool{}
	for i := uint32(4); i < 7; i++ {
		tok, _ := ring(i)
		produce(tok, 0, WCRecv, 0x12)
	}
	for _, w := range pollAll() {
		if w.QPNum != 0x12 || w.Status != 0 || seen[w.WrID] {
			t.Fatalf("completion %+v", w)
		}
		seen[w.WrID] = true
	}
	if len(seen) != 3 || !seen[100] || !seen[102] || !seen[103] {
		t.Fatalf("QP 2 received %v, want the wr_ids 100, 102, 103 that QP 1's flushes gave back", seen)
	}
	if st := srq.Stats(); st.Posted != 0 || st.Lent != 0 {
		t.Fatalf("after QP 2's receives: %+v", st)
	}

	// A receive behind a flush comes out of the poll that met the flush,
	// even a one-entry poll: a caller that took its empty answer for a
	// drained CQ and waited for the next completion event would not get
	// one for it.
	if err := srq.PostRecv(wrs[:2]); err != nil {
		t.Fatal(err)
	}
	t7, _ := ring(7)
	t8, _ := ring(8)
	produce(t7, WCWRFlushErr, WCSend, 0x12)
	produce(t8, 0, WCRecv, 0x12)
	var one []WC
	if poll == "poll_cq" {
		wc := make([]WC, 1)
		n, err := cq.pollFast(wc)
		if err != nil {
			t.Fatal(err)
		}
		one = wc[:n]
	} else {
		k := cq.NewCursor()
		w, err := k.Start()
		if err == nil {
			one = append(one, w)
			k.End()
		}
		k.Free()
	}
	if len(one) != 1 || one[0].WrID != 101 || one[0].Status != 0 {
		t.Fatalf("one-entry poll behind a flush: %+v, want wr_id 101's receive", one)
	}
	if st := srq.Stats(); st.Posted != 1 || st.Lent != 1 || lentTotal() != 10 {
		t.Fatalf("at the end: %+v, %d WRs in the RQ ring; want the flushed WR lent again", st, lentTotal())
	}
	if f.BadCommands() != 0 || !f.CanaryOK() {
		t.Fatalf("bad commands %d, canary ok %v", f.BadCommands(), f.CanaryOK())
	}
}
