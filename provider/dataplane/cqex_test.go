package dataplane

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
	"usb4verbs/uapi"
)

// pollExactly polls n completions, never asking for more than remain.
func pollExactly(t *testing.T, cq *CQ, n int) []WC {
	t.Helper()
	var out []WC
	for idle := 0; len(out) < n && idle < 1000; idle++ {
		wc := make([]WC, n-len(out))
		got, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, wc[:got]...)
	}
	if len(out) != n {
		t.Fatalf("got %d completions, want %d", len(out), n)
	}
	return out
}

func produceRxeCQE(t *testing.T, f *usb4double.RxeFake, id uint64) {
	t.Helper()
	var w uapi.IbUverbsWc
	w.WrId = id
	w.Opcode = WCRecv
	w.ByteLen = uint32(id) * 3
	w.QpNum = 0x11
	w.SrcQp = 0x22
	w.Ex = be32(uint32(id))
	w.WcFlags = WCWithImm
	w.Slid, w.Sl, w.DlidPathBits = 7, 2, 1
	if err := f.ProduceCQE(unsafe.Slice((*byte)(unsafe.Pointer(&w)), uapi.SizeofIbUverbsWc)); err != nil {
		t.Fatal(err)
	}
}

// On the rxe ring the cursor reads in place and hands each entry back as
// it moves on, as librxe does: what End leaves is there for the next poller.
func TestCQExCursorRxeRing(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	k := e.cq.NewCursor()
	defer k.Free()
	if _, err := k.Start(); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("start on empty: %v", err)
	}
	k.End() // without a Start: nothing held, nothing consumed
	for i := uint64(50); i < 53; i++ {
		produceRxeCQE(t, e.f, i)
	}
	w, err := k.Start()
	if err != nil || w.WrID != 50 || w.ByteLen != 150 || w.ImmData != be32(50) || w.QPNum != 0x11 || w.SrcQP != 0x22 ||
		w.WCFlags != WCWithImm || w.SLID != 7 || w.SL != 2 || w.DLIDPathBits != 1 || w.Opcode != WCRecv {
		t.Fatalf("start: %v %+v", err, w)
	}
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 0 {
		t.Fatalf("consumer %d while the first entry is read", cons)
	}
	if w, err = k.Next(); err != nil || w.WrID != 51 {
		t.Fatalf("next: %v %+v", err, w)
	}
	k.End()
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 2 {
		t.Fatalf("consumer %d after reading two, want 2", cons)
	}
	wc := pollExactly(t, e.cq, 1)
	if wc[0].WrID != 52 {
		t.Fatalf("poll_cq after end_poll got %+v", wc[0])
	}
	produceRxeCQE(t, e.f, 60)
	if w, err = k.Start(); err != nil || w.WrID != 60 {
		t.Fatalf("start: %v %+v", err, w)
	}
	if _, err = k.Next(); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("next past the last: %v", err)
	}
	k.End()
	if _, err := k.Start(); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("start after all were read: %v", err)
	}
	if _, cons := e.f.Indices(usb4double.RxeCQ); cons != 0 { // 4-slot ring: 4 consumed wraps to 0
		t.Fatalf("consumer %d after four entries", cons)
	}
}

// The cursor over every usb4 backend: 20 signalled sends and their receives,
// read partly with the cursor and partly with Poll, in posting order, none
// lost or repeated (kernel commands: batches of 16, the rest stashed).
func TestCQExCursorUSB4(t *testing.T) {
	for _, m := range []string{"kcmd", "cqring", "dv", "kcmd+dv"} {
		t.Run(m, func(t *testing.T) {
			e := newUSB4Env(t, m, 64)
			ka, kb := e.cqA.NewCursor(), e.cqB.NewCursor()
			defer ka.Free()
			defer kb.Free()
			if _, err := ka.Start(); !errors.Is(err, unix.ENOENT) {
				t.Fatalf("start on empty: %v", err)
			}
			ka.End()
			const n = 20
			fill(e.bufA[:n*64], 5)
			for i := 0; i < n; i++ {
				if err := e.qpB.PostRecv([]RecvWR{{WrID: uint64(100 + i), SGEs: []SGE{e.sgeB(i*64, 64)}}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < n; i++ {
				wr := SendWR{WrID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{e.sgeA(i*64, 10+i)}}
				if i%2 == 1 {
					wr.Opcode, wr.ImmData = WRSendWithImm, be32(uint32(i))
				}
				if err := e.qpA.PostSend([]SendWR{wr}); err != nil {
					t.Fatal(err)
				}
			}
			var sends, recvs []WC
			// 5 through the cursor, 3 through Poll, the rest through the cursor.
			read := func(k *Cursor, cq *CQ, out *[]WC) {
				for idle := 0; len(*out) < n && idle < 1000; idle++ {
					w, err := k.Start()
					if errors.Is(err, unix.ENOENT) {
						continue
					}
					if err != nil {
						t.Fatalf("start: %v", err)
					}
					for {
						*out = append(*out, w)
						if len(*out) == 5 {
							break
						}
						if w, err = k.Next(); err != nil {
							if !errors.Is(err, unix.ENOENT) {
								t.Fatalf("next: %v", err)
							}
							break
						}
					}
					k.End()
					if len(*out) == 5 {
						*out = append(*out, pollExactly(t, cq, 3)...)
					}
				}
			}
			read(ka, e.cqA, &sends)
			read(kb, e.cqB, &recvs)
			if len(sends) != n || len(recvs) != n {
				t.Fatalf("%d sends, %d receives, want %d each", len(sends), len(recvs), n)
			}
			for i := 0; i < n; i++ {
				s, r := sends[i], recvs[i]
				if s.WrID != uint64(i) || s.Status != WCSuccess || s.Opcode != WCSend {
					t.Fatalf("send %d: %+v", i, s)
				}
				imm := i%2 == 1
				if r.WrID != uint64(100+i) || r.Status != WCSuccess || r.Opcode != WCRecv || r.ByteLen != uint32(10+i) ||
					r.QPNum != e.qpnB || (r.WCFlags&WCWithImm != 0) != imm || (imm && r.ImmData != be32(uint32(i))) {
					t.Fatalf("receive %d: %+v", i, r)
				}
			}
			expectEmpty(t, e.cqA)
			expectEmpty(t, e.cqB)
		})
	}
}

// Resize on an rxe ring: the completions outstanding at the command are
// polled after it, in order, from the new ring; a new ring that does not
// validate latches the errno on every poll.
func TestCQResizeRxe(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	for i := uint64(1); i <= 3; i++ {
		produceRxeCQE(t, e.f, i)
	}
	pollExactly(t, e.cq, 1) // consumer 1: the kernel copies from there
	const newQ = usb4double.RxeSQ
	err := e.cq.Resize(func() (uint64, uint32, error) {
		prod, cons := e.f.Indices(usb4double.RxeCQ)
		n := uint32(0)
		for ; cons != prod; cons = (cons + 1) & e.f.Mask(usb4double.RxeCQ) {
			copy(e.f.Slot(newQ, n), e.f.Slot(usb4double.RxeCQ, cons))
			n++
		}
		e.f.SetIndices(newQ, n, 0)
		return newQ, e.f.Len(newQ), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wc := pollN(t, e.cq, 2)
	if wc[0].WrID != 2 || wc[1].WrID != 3 {
		t.Fatalf("after the resize: %+v", wc)
	}
	expectEmpty(t, e.cq)
	if _, cons := e.f.Indices(newQ); cons != 2 {
		t.Fatalf("new ring consumer %d, want 2", cons)
	}

	// The command failed: nothing moves.
	if err := e.cq.Resize(func() (uint64, uint32, error) { return 0, 0, unix.EINVAL }); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("failed resize: %v", err)
	}
	expectEmpty(t, e.cq)
	// A ring too small to hold its header: every poll fails from now on.
	if err := e.cq.Resize(func() (uint64, uint32, error) { return usb4double.RxeRQ, 0, nil }); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("resize to a zero-size ring: %v", err)
	}
	if _, err := e.cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("poll after a failed remap: %v", err)
	}
	k := e.cq.NewCursor()
	defer k.Free()
	if _, err := k.Start(); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("start_poll after a failed remap: %v", err)
	}
}

// done waits for ch, failing the test when it does not close within a
// minute: what it waits for hangs when the defect is back.
func done(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still blocked after a minute", what)
	}
}

// end_poll from another thread than start_poll's releases the CQ, as
// librxe's (rdma-core:providers/rxe/rxe.c cq_end_poll unlocks whoever
// calls it): an application that hands a CQ between threads must not leave
// every later poller spinning.
func TestCQExEndPollOtherThread(t *testing.T) {
	check := func(t *testing.T, cq *CQ, produce func(n int)) {
		k := cq.NewCursor()
		defer k.Free()
		produce(2)
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread() // the holder's thread ends with the goroutine
			if _, err := k.Start(); err != nil {
				t.Errorf("start: %v", err)
			}
			close(started)
		}()
		done(t, "start_poll", started)
		ended := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			k.End()
			close(ended)
		}()
		done(t, "end_poll", ended)
		polled := make(chan struct{})
		var n int
		var err error
		go func() {
			n, err = cq.Poll(make([]WC, 4))
			close(polled)
		}()
		done(t, "poll_cq after end_poll on another thread", polled)
		if err != nil || n != 1 {
			t.Fatalf("poll after a cross-thread end_poll: %d, %v; want the one left", n, err)
		}
	}
	t.Run("rxe", func(t *testing.T) {
		e := newRxeEnv(t, QPTypeRC, false)
		check(t, e.cq, func(n int) {
			for i := 0; i < n; i++ {
				produceRxeCQE(t, e.f, uint64(70+i))
			}
		})
	})
	for _, m := range []string{"kcmd", "cqring"} {
		t.Run(m, func(t *testing.T) {
			e := newUSB4Env(t, m, 64)
			check(t, e.cqB, func(n int) {
				for i := 0; i < n; i++ {
					if err := e.qpB.PostRecv([]RecvWR{{WrID: uint64(100 + i), SGEs: []SGE{e.sgeB(i*64, 64)}}}); err != nil {
						t.Fatal(err)
					}
					if err := e.qpA.PostSend([]SendWR{{WrID: uint64(i), Opcode: WRSend, SGEs: []SGE{e.sgeA(i*64, 8)}}}); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
