package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
)

const wrexRC = QPExWithRDMAWrite | QPExWithRDMAWriteWithImm | QPExWithSend | QPExWithSendWithImm | QPExWithRDMARead |
	QPExWithAtomicCmpAndSwp | QPExWithAtomicFetchAdd | QPExWithLocalInv | QPExWithSendWithInv

func wrexEnv(t *testing.T, ops uint64) *rxeEnv {
	t.Helper()
	e := newRxeEnv(t, QPTypeRC, false)
	if err := e.qp.EnableWRex(ops); err != nil {
		t.Fatal(err)
	}
	return e
}

func wantErrno(t *testing.T, err error, no unix.Errno, what string) {
	t.Helper()
	if !errors.Is(err, no) {
		t.Fatalf("%s: %v, want %v", what, err, no)
	}
}

// TestWRexBatchInPlace: three WRs in one batch are written into the SQ
// ring in order, with every field the kernel reads, published by one
// producer-index move and one doorbell at WRComplete, none before.
func TestWRexBatchInPlace(t *testing.T) {
	e := wrexEnv(t, wrexRC)
	data := pinned(t, 256)
	fill(data, 9)
	e.qp.WRStart()
	e.qp.WRBuild(SendWR{WrID: 1, Opcode: WRSendWithImm, Flags: SendSignaled, ImmData: be32(0x0a0b0c0d)})
	e.qp.WRSetSGEs([]SGE{{Addr: 0x1000, Length: 100, LKey: 5}, {Addr: 0x2000, Length: 28, LKey: 6}})
	e.qp.WRBuild(SendWR{WrID: 2, Opcode: WRRDMAWrite, RemoteAddr: 0x7000, RKey: 99})
	e.qp.WRSetInline(data[:40])
	fill(data, 1) // copied by the setter: later changes must not travel
	e.qp.WRBuild(SendWR{WrID: 3, Opcode: WRAtomicCmpAndSwp, Flags: SendSignaled, RemoteAddr: 0x8008, RKey: 77, CompareAdd: 11, Swap: 22})
	e.qp.WRSetSGEs([]SGE{{Addr: 0x3000, Length: 8, LKey: 1}})
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
		t.Fatalf("before WRComplete: producer %d, %d doorbells; want 0 and 0", prod, e.f.Doorbells())
	}
	if err := e.qp.WRComplete(); err != nil {
		t.Fatal(err)
	}
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 3 || e.f.Doorbells() != 1 || e.f.BadCommands() != 0 {
		t.Fatalf("after WRComplete: producer %d, %d doorbells, %d bad commands; want 3, 1, 0", prod, e.f.Doorbells(), e.f.BadCommands())
	}
	w, tail := e.sendWQE(0)
	if w.Wr.WrId != 1 || w.Wr.Opcode != WRSendWithImm || w.Wr.SendFlags != SendSignaled || w.Wr.Ex != be32(0x0a0b0c0d) ||
		w.Dma.NumSge != 2 || w.Dma.Length != 128 || w.Dma.Resid != 128 {
		t.Fatalf("send WQE %+v", w)
	}
	if binary.LittleEndian.Uint64(tail[0:]) != 0x1000 || binary.LittleEndian.Uint32(tail[8:]) != 100 ||
		binary.LittleEndian.Uint32(tail[12:]) != 5 || binary.LittleEndian.Uint64(tail[16:]) != 0x2000 {
		t.Fatalf("send SGEs % x", tail[:32])
	}
	w, tail = e.sendWQE(1)
	if w.Wr.WrId != 2 || w.Wr.Opcode != WRRDMAWrite || w.Wr.SendFlags != SendInline || w.Iova != 0x7000 ||
		w.Wr.Rdma().RemoteAddr != 0x7000 || w.Wr.Rdma().Rkey != 99 || w.Dma.Length != 40 || w.Dma.NumSge != 0 {
		t.Fatalf("inline write WQE %+v", w)
	}
	want := make([]byte, 40)
	fill(want, 9)
	if !bytes.Equal(tail[:40], want) {
		t.Fatal("inline bytes are not the ones given at the setter")
	}
	w, _ = e.sendWQE(2)
	a := w.Wr.Atomic()
	if w.Wr.WrId != 3 || a.RemoteAddr != 0x8008 || a.Rkey != 77 || a.CompareAdd != 11 || a.Swap != 22 || w.Iova != 0x8008 || w.Dma.Length != 8 {
		t.Fatalf("atomic WQE %+v %+v", w, a)
	}
}

// TestWRexAbortPostsNothing: an aborted batch leaves the producer index
// where it was and rings nothing; the next batch reuses the slots.
func TestWRexAbortPostsNothing(t *testing.T) {
	e := wrexEnv(t, wrexRC)
	e.qp.WRStart()
	e.qp.WRBuild(SendWR{WrID: 7, Opcode: WRSend})
	e.qp.WRSetSGEs([]SGE{{Addr: 0x1000, Length: 8, LKey: 1}})
	e.qp.WRAbort()
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
		t.Fatalf("after abort: producer %d, %d doorbells", prod, e.f.Doorbells())
	}
	e.qp.WRStart()
	e.qp.WRBuild(SendWR{WrID: 8, Opcode: WRSend})
	if err := e.qp.WRComplete(); err != nil {
		t.Fatal(err)
	}
	if w, _ := e.sendWQE(0); w.Wr.WrId != 8 || e.f.Doorbells() != 1 {
		t.Fatalf("slot 0 has wr_id %d after the second batch, %d doorbells", w.Wr.WrId, e.f.Doorbells())
	}
}

// TestWRexErrorsPostNothing: each latched error is returned by WRComplete
// and nothing of the batch is posted; librxe's errnos where it has a rule.
func TestWRexErrorsPostNothing(t *testing.T) {
	big := pinned(t, 1024)
	cases := []struct {
		name  string
		ops   uint64
		build func(qp *QP)
		no    unix.Errno
	}{
		{"sq full", wrexRC, func(qp *QP) {
			for i := 0; i < 8; i++ { // an 8-slot ring holds 7
				qp.WRBuild(SendWR{WrID: uint64(i), Opcode: WRSend})
			}
		}, unix.ENOSPC},
		{"more SGEs than max_send_sge", wrexRC, func(qp *QP) {
			qp.WRBuild(SendWR{Opcode: WRSend})
			qp.WRSetSGEs(make([]SGE, 5))
		}, unix.ENOSPC},
		{"inline beyond max_inline_data", wrexRC, func(qp *QP) {
			qp.WRBuild(SendWR{Opcode: WRSend})
			qp.WRSetInline(big[:257])
		}, unix.ENOSPC},
		{"opcode not in send_ops_flags", QPExWithSend, func(qp *QP) {
			qp.WRBuild(SendWR{Opcode: WRSend})
			qp.WRBuild(SendWR{Opcode: WRRDMARead, RemoteAddr: 0x1000, RKey: 1})
		}, unix.EINVAL},
		{"setter before any builder", wrexRC, func(qp *QP) {
			qp.WRSetSGEs([]SGE{{Addr: 0x1000, Length: 8, LKey: 1}})
		}, unix.EINVAL},
		{"bind without a window", wrexRC | QPExWithBindMW, func(qp *QP) {
			qp.WRBuild(SendWR{Opcode: WRBindMW})
		}, unix.EINVAL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := wrexEnv(t, tc.ops)
			e.qp.WRStart()
			tc.build(e.qp)
			wantErrno(t, e.qp.WRComplete(), tc.no, tc.name)
			if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
				t.Fatalf("producer %d, %d doorbells after a failed batch", prod, e.f.Doorbells())
			}
			// The SQ is free again: the next batch works.
			e.qp.WRStart()
			e.qp.WRBuild(SendWR{WrID: 1, Opcode: WRSend})
			if err := e.qp.WRComplete(); err != nil || e.f.Doorbells() != 1 {
				t.Fatalf("next batch: %v, %d doorbells", err, e.f.Doorbells())
			}
		})
	}
}

// TestWRexOutsideStart: builders and setters outside a batch do nothing,
// WRComplete outside one is EINVAL, WRAbort is ignored; the ring is untouched.
func TestWRexOutsideStart(t *testing.T) {
	e := wrexEnv(t, wrexRC)
	e.qp.WRBuild(SendWR{WrID: 5, Opcode: WRSend})
	e.qp.WRSetSGEs([]SGE{{Addr: 0x1000, Length: 8, LKey: 1}})
	e.qp.WRAbort()
	wantErrno(t, e.qp.WRComplete(), unix.EINVAL, "WRComplete outside WRStart")
	if w, _ := e.sendWQE(0); w.Wr.WrId != 0 || w.Wr.Opcode != 0 {
		t.Fatalf("slot 0 written outside a batch: %+v", w.Wr)
	}
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
		t.Fatalf("producer %d, %d doorbells", prod, e.f.Doorbells())
	}
}

// TestWRexNestedStart: a second WRStart inside an open batch on the same
// thread fails the batch instead of waiting on its own lock forever.
func TestWRexNestedStart(t *testing.T) {
	e := wrexEnv(t, wrexRC)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		e.qp.WRStart()
		e.qp.WRBuild(SendWR{WrID: 1, Opcode: WRSend})
		e.qp.WRStart()
		done <- e.qp.WRComplete()
	}()
	select {
	case err := <-done:
		wantErrno(t, err, unix.EINVAL, "nested WRStart")
	case <-time.After(5 * time.Second):
		t.Fatal("nested WRStart hung")
	}
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
		t.Fatalf("producer %d, %d doorbells", prod, e.f.Doorbells())
	}
}

// TestPostSendLocalInv: LOCAL_INV through post_send carries its rkey in
// ex.invalidate_rkey; on UD it is refused (rxe executes it on RC only).
func TestPostSendLocalInv(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	if err := e.qp.PostSend([]SendWR{{WrID: 4, Opcode: WRLocalInv, Flags: SendSignaled, ImmData: 0x1234ab}}); err != nil {
		t.Fatal(err)
	}
	if w, _ := e.sendWQE(0); w.Wr.Opcode != WRLocalInv || w.Wr.Ex != 0x1234ab || w.Dma.Length != 0 {
		t.Fatalf("LOCAL_INV WQE %+v", w)
	}
	u := newRxeEnv(t, QPTypeUD, false)
	wantErrno(t, u.qp.PostSend([]SendWR{{Opcode: WRLocalInv, ImmData: 1}}), unix.EINVAL, "LOCAL_INV on UD")

}

// TestBindMWWQE: a BIND_MW through post_send and through the batch carries
// the window's rkey, the new rkey, the MR's lkey, the range and the access
// as rxe reads them (rxe_send_wr_mw); data on a bind is EINVAL, and so is a
// bind on UD (rxe binds on RC and UC only).
func TestBindMWWQE(t *testing.T) {
	e := wrexEnv(t, wrexRC|QPExWithBindMW)
	b := MWBind{WrID: 3, Flags: SendSignaled, MWRKey: 0x1200, NewRKey: IncRKey(0x12ff), MRLKey: 0x55,
		Addr: 0x10000, Length: 4096, Access: 2}
	if b.NewRKey != 0x1200 {
		t.Fatalf("IncRKey(0x12ff) = %#x", b.NewRKey)
	}
	if err := e.qp.PostBindMW(b); err != nil {
		t.Fatal(err)
	}
	b.WrID, b.MRLKey, b.Length = 4, -1, 0 // an unbind, through the batch
	e.qp.WRStart()
	e.qp.WRBindMW(b)
	if err := e.qp.WRComplete(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		id     uint64
		lkey   uint32
		length uint64
	}{{3, 0x55, 4096}, {4, 0, 0}} {
		w, _ := e.sendWQE(uint32(i))
		m := w.Wr.Mw()
		if w.Wr.WrId != want.id || w.Wr.Opcode != WRBindMW || m.MwRkey != 0x1200 || m.Rkey != 0x1200 ||
			m.MrLkey != want.lkey || m.Length != want.length || m.Addr != 0x10000 || m.Access != 2 {
			t.Fatalf("bind WQE %d: %+v %+v", i, w.Wr, m)
		}
	}
	if e.f.Doorbells() != 2 {
		t.Fatalf("%d doorbells for two posts", e.f.Doorbells())
	}
	b.MRLKey, b.Length = -1, 4096 // a range without an MR
	wantErrno(t, e.qp.PostBindMW(b), unix.EINVAL, "bind of a range without an MR")
	u := newRxeEnv(t, QPTypeUD, false)
	b.MRLKey = 1
	wantErrno(t, u.qp.PostBindMW(b), unix.EINVAL, "BIND_MW on UD")
}

// TestWRexSupportedOps: librxe's sets per QP type on rxe (atomic write only
// when the kernel has it), the module's opcodes elsewhere.
func TestWRexSupportedOps(t *testing.T) {
	if got := WRExSupported(BackendRxe, QPTypeUD, true); got != QPExWithSend|QPExWithSendWithImm {
		t.Errorf("rxe UD: %#x", got)
	}
	if got := WRExSupported(BackendRxe, QPTypeRC, false); got&QPExWithAtomicWrite != 0 || got&QPExWithBindMW == 0 {
		t.Errorf("rxe RC without atomic write: %#x", got)
	}
	if got := WRExSupported(BackendRxe, QPTypeRC, true); got&QPExWithAtomicWrite == 0 {
		t.Errorf("rxe RC with atomic write: %#x", got)
	}
	if got := WRExSupported(BackendKCmd, QPTypeRC, true); got != QPExWithRDMAWrite|QPExWithRDMAWriteWithImm|QPExWithSend|QPExWithSendWithImm|QPExWithRDMARead {
		t.Errorf("usb4 RC: %#x", got)
	}
}

// TestWRexStagedOnUSB4 (usb4 double, every backend): a batch of a SEND and
// an RDMA WRITE reaches the peer byte for byte with both completions, and
// nothing is posted before WRComplete; on DV the batch is one KICK. Inline
// data (the module's max_inline_data is 0) and an opcode the module lacks
// fail the batch with nothing posted.
func TestWRexStagedOnUSB4(t *testing.T) {
	forEachUSB4(t, func(t *testing.T, e *usb4Env) {
		ops := WRExSupported(e.qpA.SendBackend(), QPTypeRC, true)
		if ops&QPExWithAtomicCmpAndSwp != 0 {
			t.Fatalf("usb4 send ops %#x include atomics", ops)
		}
		if err := e.qpA.EnableWRex(ops); err != nil {
			t.Fatal(err)
		}
		fill(e.bufA[:4096], 5)
		if err := e.qpB.PostRecv([]RecvWR{{WrID: 9, SGEs: []SGE{e.sgeB(0, 1024)}}}); err != nil {
			t.Fatal(err)
		}
		kicks, writes := e.d.Kicks(), e.d.Writes()
		e.qpA.WRStart()
		e.qpA.WRBuild(SendWR{WrID: 1, Opcode: WRSendWithImm, Flags: SendSignaled, ImmData: be32(77)})
		e.qpA.WRSetSGEs([]SGE{e.sgeA(0, 512)})
		e.qpA.WRBuild(SendWR{WrID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB) + 4096, RKey: e.rkeyB})
		e.qpA.WRSetSGEs([]SGE{e.sgeA(1024, 256)})
		if e.d.Kicks() != kicks || e.d.Writes() != writes {
			t.Fatal("something was posted before WRComplete")
		}
		if err := e.qpA.WRComplete(); err != nil {
			t.Fatal(err)
		}
		s := pollN(t, e.cqA, 2)
		if s[0].WrID != 1 || s[0].Status != WCSuccess || s[1].WrID != 2 || s[1].Status != WCSuccess || s[1].Opcode != WCRDMAWrite {
			t.Fatalf("send completions %+v", s)
		}
		r := pollN(t, e.cqB, 1)[0]
		if r.WrID != 9 || r.Status != WCSuccess || r.ByteLen != 512 || r.ImmData != be32(77) {
			t.Fatalf("receive completion %+v", r)
		}
		if !bytes.Equal(e.bufB[:512], e.bufA[:512]) || !bytes.Equal(e.bufB[4096:4096+256], e.bufA[1024:1024+256]) {
			t.Fatal("bytes differ")
		}
		if e.qpA.SendBackend() == BackendDV && e.d.Kicks()-kicks != 1 {
			t.Fatalf("a DV batch rang %d KICKs", e.d.Kicks()-kicks)
		}
		kicks, writes = e.d.Kicks(), e.d.Writes()
		e.qpA.WRStart()
		e.qpA.WRBuild(SendWR{WrID: 3, Opcode: WRSend})
		e.qpA.WRSetInline(e.bufA[:8])
		wantErrno(t, e.qpA.WRComplete(), unix.ENOSPC, "inline on the module")
		e.qpA.WRStart()
		e.qpA.WRBuild(SendWR{WrID: 4, Opcode: WRAtomicFetchAdd, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
		wantErrno(t, e.qpA.WRComplete(), unix.EINVAL, "an atomic on the module")
		if e.d.Kicks() != kicks || e.d.Writes() != writes {
			t.Fatal("a failed batch posted something")
		}
	})
}

// ibv_wr_complete posts the whole batch or nothing (rdma-core's
// ibv_wr_post(3): on an error the entire posting is aborted). A DV batch
// with room for its first WR only and a kernel-command batch with a WR
// POST_SEND cannot carry after a good one post nothing; a kernel-command
// batch longer than post_send's 16-WR chunks goes out in one command.
func TestWRexCompleteIsAllOrNothing(t *testing.T) {
	t.Run("dv", func(t *testing.T) {
		e := newUSB4Env(t, "dv", 64)
		if err := e.qpA.EnableWRex(WRExSupported(e.qpA.SendBackend(), QPTypeRC, true)); err != nil {
			t.Fatal(err)
		}
		write := func(i int) SendWR {
			return SendWR{WrID: uint64(i), Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB,
				SGEs: []SGE{e.sgeA(0, 8)}}
		}
		// Signaled WRs in flight until the DV CQ has no room for another.
		c := 0
		for ; c < 1<<16; c++ {
			err := e.qpA.PostSend([]SendWR{write(c)})
			if errors.Is(err, unix.ENOMEM) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if c == 0 || c == 1<<16 {
			t.Fatalf("%d signaled writes before ENOMEM", c)
		}
		pollExactly(t, e.cqA, 1) // room for exactly one
		e.qpA.WRStart()
		for i := 0; i < 2; i++ {
			e.qpA.WRBuild(SendWR{WrID: uint64(1000 + i), Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
			e.qpA.WRSetSGEs([]SGE{e.sgeA(0, 8)})
		}
		wantErrno(t, e.qpA.WRComplete(), unix.ENOMEM, "a batch of two with room for one")
		got := pollExactly(t, e.cqA, c-1)
		for _, w := range got {
			if w.WrID >= 1000 {
				t.Fatalf("a WR of the failed batch completed: %+v", w)
			}
		}
		expectEmpty(t, e.cqA)
	})
	t.Run("kcmd", func(t *testing.T) {
		e := newUSB4Env(t, "kcmd", 64)
		if err := e.qpA.EnableWRex(WRExSupported(e.qpA.SendBackend(), QPTypeRC, true) | QPExWithLocalInv); err != nil {
			t.Fatal(err)
		}
		writes := e.d.Writes()
		// The kernel's POST_SEND decodes no LOCAL_INV (kcmd.c refuses it):
		// the good write before it must not go out either.
		e.qpA.WRStart()
		e.qpA.WRBuild(SendWR{WrID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
		e.qpA.WRSetSGEs([]SGE{e.sgeA(0, 8)})
		e.qpA.WRBuild(SendWR{WrID: 2, Opcode: WRLocalInv, ImmData: 5})
		wantErrno(t, e.qpA.WRComplete(), unix.EINVAL, "a batch with a LOCAL_INV on kernel commands")
		if e.d.Writes() != writes {
			t.Fatalf("%d POST_SEND commands for a failed batch", e.d.Writes()-writes)
		}
		expectEmpty(t, e.cqA)
		// 40 WRs (more than one 16-WR command) go out whole.
		writes = e.d.Writes() // expectEmpty's POLL_CQ is a command too
		e.qpA.WRStart()
		for i := 0; i < 40; i++ {
			e.qpA.WRBuild(SendWR{WrID: uint64(100 + i), Opcode: WRRDMAWrite, Flags: SendSignaled, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
			e.qpA.WRSetSGEs([]SGE{e.sgeA(0, 8)})
		}
		if err := e.qpA.WRComplete(); err != nil {
			t.Fatal(err)
		}
		if n := e.d.Writes() - writes; n != 1 {
			t.Fatalf("a batch of 40 took %d POST_SEND commands, want 1", n)
		}
		pollN(t, e.cqA, 40)
	})
}
