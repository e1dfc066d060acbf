package dataplane_test

// The extended poll API (ibv_start_poll & co., dataplane.Cursor over the
// engine's cqex.c) and CQ resize on the real kernel: rxe, or in the usb4
// bed's mode the module tree's devices, on whatever backend serves them
// (reported as a backend= subtest, as the other TestVM* do).

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
)

// cursorRead reads n completions through k: Start, Next while there are
// more, End; after stopAt completions (0: never) it ends early and reads
// three with cq.Poll, so the cursor and poll_cq share the CQ.
func cursorRead(t *testing.T, k *dataplane.Cursor, cq *dataplane.CQ, n, stopAt int) []dataplane.WC {
	t.Helper()
	var out []dataplane.WC
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		w, err := k.Start()
		if errors.Is(err, unix.ENOENT) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after 10 s", len(out), n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("start_poll: %v", err)
		}
		for {
			out = append(out, w)
			if len(out) == n || len(out) == stopAt {
				break
			}
			if w, err = k.Next(); err != nil {
				if !errors.Is(err, unix.ENOENT) {
					t.Fatalf("next_poll: %v", err)
				}
				break
			}
		}
		k.End()
		if len(out) == stopAt {
			out = append(out, vmPoll(t, cq, 3)...)
		}
	}
	return out
}

func TestVMCQExPollAPI(t *testing.T) {
	a, b := vmSides(t)
	cqA, dcqA := a.newCQ(t, 64, nil)
	cqB, dcqB := b.newCQ(t, 64, nil)
	qa := a.newQP(t, provider.QPTypeRC, cqA, dcqA, nil, nil)
	qb := b.newQP(t, provider.QPTypeRC, cqB, dcqB, nil, nil)
	connect(t, qa, a, b, qb)
	connect(t, qb, b, a, qa)
	reportBackend(t, a, dcqA, qa)
	ka, kb := dcqA.NewCursor(), dcqB.NewCursor()
	defer ka.Free()
	defer kb.Free()
	if _, err := ka.Start(); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("start_poll on an empty CQ: %v", err)
	}
	ka.End() // without a start: must do nothing
	if _, err := ka.Start(); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("start_poll after a stray end_poll: %v", err)
	}

	const n = 24
	fillSeed(a.buf[:n*128], 21)
	var recvs []dataplane.RecvWR
	var sends []dataplane.SendWR
	for i := 0; i < n; i++ {
		r := dataplane.RecvWR{WrID: uint64(1000 + i), SGEs: []dataplane.SGE{b.sge(i*128, 128)}}
		w := dataplane.SendWR{WrID: uint64(i), Flags: dataplane.SendSignaled, SGEs: []dataplane.SGE{a.sge(i*128, 20+i)}}
		switch i % 3 {
		case 0:
			w.Opcode = dataplane.WRSend
		case 1:
			w.Opcode, w.ImmData = dataplane.WRSendWithImm, 0x01020300+uint32(i)
		case 2: // lands in the receive's buffer slot, completes that receive
			w.Opcode, w.ImmData = dataplane.WRRDMAWriteWithImm, 0x0a0b0c00+uint32(i)
			w.RemoteAddr, w.RKey = b.addr(i*128), b.mr.RKey()
		}
		recvs = append(recvs, r)
		sends = append(sends, w)
	}
	if err := qb.d.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	if err := qa.d.PostSend(sends); err != nil {
		t.Fatal(err)
	}
	s := cursorRead(t, ka, dcqA, n, 5)
	r := cursorRead(t, kb, dcqB, n, 0)
	for i := 0; i < n; i++ {
		wantOp := uint32(dataplane.WCSend)
		if i%3 == 2 {
			wantOp = dataplane.WCRDMAWrite
		}
		if s[i].WrID != uint64(i) || s[i].Status != dataplane.WCSuccess || s[i].Opcode != wantOp || s[i].QPNum != qa.qp.QPN() {
			t.Fatalf("send completion %d: %+v", i, s[i])
		}
		c := r[i]
		wantOp, imm := uint32(dataplane.WCRecv), uint32(0)
		switch i % 3 {
		case 1:
			imm = sends[i].ImmData
		case 2:
			wantOp, imm = dataplane.WCRecvRDMAWithImm, sends[i].ImmData
		}
		wantLen := uint32(20 + i)
		if a.usb4 && wantOp == dataplane.WCRecvRDMAWithImm && c.ByteLen == 0 {
			// As TestVMRCOperations records: the module reports byte_len 0
			// for a write-with-imm receive; rxe the write's length.
			wantLen = 0
		}
		if c.WrID != uint64(1000+i) || c.Status != dataplane.WCSuccess || c.Opcode != wantOp || c.ByteLen != wantLen ||
			c.QPNum != qb.qp.QPN() || (c.WCFlags&dataplane.WCWithImm != 0) != (imm != 0) || (imm != 0 && c.ImmData != imm) {
			t.Fatalf("receive completion %d: %+v (want opcode %d imm %#x)", i, c, wantOp, imm)
		}
		if !bytes.Equal(b.buf[i*128:i*128+20+i], a.buf[i*128:i*128+20+i]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
	for _, k := range []*dataplane.Cursor{ka, kb} {
		if _, err := k.Start(); !errors.Is(err, unix.ENOENT) {
			t.Fatalf("start_poll after every completion was read: %v", err)
		}
	}
}

// resize_cq with completions outstanding. rxe: growing keeps them all, in
// order; shrinking below their count is the kernel's EINVAL. usb4: no module
// tree has resize_cq, so the uverbs core's EOPNOTSUPP, and the CQ still works.
func TestVMCQResize(t *testing.T) {
	a, b := vmSides(t)
	cqA, dcqA := a.newCQ(t, 16, nil)
	cqB, dcqB := b.newCQ(t, 64, nil)
	qa := a.newQP(t, provider.QPTypeRC, cqA, dcqA, nil, nil)
	qb := b.newQP(t, provider.QPTypeRC, cqB, dcqB, nil, nil)
	connect(t, qa, a, b, qb)
	connect(t, qb, b, a, qa)
	reportBackend(t, a, dcqA, qa)
	send := func(first, n int) {
		t.Helper()
		var recvs []dataplane.RecvWR
		var sends []dataplane.SendWR
		for i := first; i < first+n; i++ {
			recvs = append(recvs, dataplane.RecvWR{WrID: uint64(i), SGEs: []dataplane.SGE{b.sge(i*64, 64)}})
			sends = append(sends, dataplane.SendWR{WrID: uint64(i), Opcode: dataplane.WRSend, Flags: dataplane.SendSignaled,
				SGEs: []dataplane.SGE{a.sge(i*64, 64)}})
		}
		if err := qb.d.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		if err := qa.d.PostSend(sends); err != nil {
			t.Fatal(err)
		}
		vmPoll(t, dcqB, n)
		time.Sleep(100 * time.Millisecond) // the acks, and so A's completions, follow the receives
	}
	resize := func(cqe int) error {
		return dcqA.Resize(func() (uint64, uint32, error) {
			if _, err := cqA.Resize(cqe); err != nil {
				return 0, 0, err
			}
			mi, _ := cqA.RxeQueue()
			return mi.Offset, mi.Size, nil
		})
	}
	send(0, 10)
	before := cqA.CQE()
	err := resize(100)
	if a.usb4 {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("%s: resize_cq: %v, want EOPNOTSUPP (no resize_cq in the module)", usb4Tree(), err)
		}
		for i, c := range vmPoll(t, dcqA, 10) {
			if c.WrID != uint64(i) {
				t.Fatalf("completion %d after the refused resize: %+v", i, c)
			}
		}
		return
	}
	if err != nil || cqA.CQE() < 100 {
		t.Fatalf("resize 16 -> 100: %v, cqe %d -> %d", err, before, cqA.CQE())
	}
	send(10, 40) // more than the old ring held
	for i, c := range vmPoll(t, dcqA, 50) {
		if c.WrID != uint64(i) {
			t.Fatalf("completion %d after the resize: %+v", i, c)
		}
	}
	send(50, 10)
	if err := resize(4); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("resize below the outstanding count: %v, want EINVAL", err)
	}
	for i, c := range vmPoll(t, dcqA, 10) {
		if c.WrID != uint64(50+i) {
			t.Fatalf("completion %d after the refused shrink: %+v", i, c)
		}
	}
}
