package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
	"usb4verbs/uapi"
)

// The rxe env's limits (newRxeEnvType): SQ 8 slots of 512 bytes, RQ 8 of
// 128, CQ 4 of 64; max_send_sge = max_recv_sge = 4, max_inline 256.
const (
	envMaxSGE    = 4
	envMaxInline = 256
)

// Reliability F1: an empty (NULL) WR list is EINVAL, as rdma-core's rxe
// provider answers, and *bad_wr is not pointed at anything.
func TestRxeNullWRListIsEINVAL(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	if rc, bad := postSendRaw(e.qp, nil); rc != int(unix.EINVAL) || bad == 0 {
		t.Errorf("post_send(NULL): rc %d bad %d, want EINVAL and bad_wr untouched or NULL", rc, bad)
	}
	if rc, bad := postRecvRaw(e.qp, nil, nil); rc != int(unix.EINVAL) || bad == 0 {
		t.Errorf("post_recv(NULL): rc %d bad %d, want EINVAL", rc, bad)
	}
	srq, err := NewSRQ(e.f.Sys(), 3, 9, envMaxSGE)
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if rc, bad := postRecvRaw(nil, srq, nil); rc != int(unix.EINVAL) || bad == 0 {
		t.Errorf("post_srq_recv(NULL): rc %d bad %d, want EINVAL", rc, bad)
	}
	if prod, _ := e.f.Indices(usb4double.RxeSQ); prod != 0 || e.f.Doorbells() != 0 {
		t.Errorf("an empty post moved the SQ (%d) or rang the doorbell (%d)", prod, e.f.Doorbells())
	}
}

// Reliability F2: poll_cq with ne <= 0 returns 0 (rxe, mlx5), not an error
// that perftest, NCCL and UCX would take for a dead CQ.
func TestRxePollNonPositiveIsZero(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	if err := e.f.ProduceCQE(make([]byte, 48)); err != nil {
		t.Fatal(err)
	}
	for _, ne := range []int{0, -1, -1 << 31} {
		if n, _ := pollRaw(e.cq, ne); n != 0 {
			t.Errorf("poll_cq(ne=%d) = %d, want 0", ne, n)
		}
	}
	if n, _ := pollRaw(e.cq, 4); n != 1 {
		t.Errorf("the completion was consumed by a poll with ne <= 0: poll(4) = %d", n)
	}
}

// fuzzBytes hands out fixed-size values from a fuzz input, zeros once it
// runs out.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) take(n int) []byte {
	out := make([]byte, n)
	k := copy(out, f.b)
	f.b = f.b[k:]
	return out
}
func (f *fuzzBytes) u8() uint8   { return f.take(1)[0] }
func (f *fuzzBytes) u16() uint16 { return binary.LittleEndian.Uint16(f.take(2)) }
func (f *fuzzBytes) u32() uint32 { return binary.LittleEndian.Uint32(f.take(4)) }
func (f *fuzzBytes) u64() uint64 { return binary.LittleEndian.Uint64(f.take(8)) }

// rxeOpcodeRC reports whether rxe accepts opcode on an RC QP
// (linux:drivers/infiniband/sw/rxe/rxe_opcode.c, the IB_WR_* an RC QP posts).
// BIND_MW is an RC opcode too, but a rawSendWR carries no window, and a bind
// without one is refused (rxe.c, as librxe's validate_send_wr), so it is not
// listed here.
func rxeOpcodeRC(op uint32) bool {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm, WRSend, WRSendWithImm, WRRDMARead,
		WRAtomicCmpAndSwp, WRAtomicFetchAdd, WRSendWithInv, WRLocalInv:
		return true
	}
	return false
}

// wantSendWQE is the struct rxe_send_wqe (linux:include/uapi/rdma/rdma_user_rxe.h)
// the engine must write for w, header and payload, as rdma-core's rxe
// provider fills it.
func wantSendWQE(w rawSendWR, n int, src []byte) []byte {
	out := make([]byte, uapi.SizeofRxeSendWqe, uapi.SizeofRxeSendWqe+envMaxInline)
	le := binary.LittleEndian
	le.PutUint64(out[0:], w.WrID)
	le.PutUint32(out[12:], w.Opcode)
	le.PutUint32(out[16:], w.Flags)
	le.PutUint32(out[20:], w.ImmData)
	switch w.Opcode {
	case WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead:
		le.PutUint64(out[24:], w.RemoteAddr) // wr.rdma.remote_addr
		le.PutUint32(out[32:], w.RKey)
		le.PutUint64(out[152:], w.RemoteAddr) // iova
	case WRAtomicCmpAndSwp, WRAtomicFetchAdd:
		le.PutUint64(out[24:], w.RemoteAddr) // wr.atomic
		le.PutUint64(out[32:], w.CompareAdd)
		le.PutUint64(out[40:], w.Swap)
		le.PutUint32(out[48:], w.RKey)
		le.PutUint64(out[152:], w.RemoteAddr)
	}
	var length uint32
	for _, g := range w.SGEs[:n] {
		length += g.Length
	}
	le.PutUint32(out[184:], length) // dma.length
	le.PutUint32(out[188:], length) // dma.resid
	le.PutUint32(out[196:], uint32(n))
	for _, g := range w.SGEs[:n] {
		if w.Flags&SendInline != 0 {
			off := g.Addr - addr(src)
			out = append(out, src[off:off+uint64(g.Length)]...)
			continue
		}
		var s [16]byte
		le.PutUint64(s[0:], g.Addr)
		le.PutUint32(s[8:], g.Length)
		le.PutUint32(s[12:], g.LKey)
		out = append(out, s[:]...)
	}
	return out
}

// FuzzRxePostSendWQE posts arbitrary send WR lists (num_sge out of range or
// disagreeing with the list, NULL sg_list, unknown opcodes, inline sizes,
// misaligned atomics) on fake rxe rings with guard pages. Every WR is either
// refused with EINVAL/ENOMEM and *bad_wr at it, leaving the ring where it
// was, or written as exactly the WQE rxe expects; nothing is touched outside
// the ring (guard pages fault, canaries catch small strays).
func FuzzRxePostSendWQE(f *testing.F) {
	f.Add([]byte{2, 1, 2, 2, 0, 0x40, 0, 0x10, 0})
	f.Add(bytes.Repeat([]byte{3, 5, 0x0a, 0xff, 8, 0x10}, 12))
	f.Add(bytes.Repeat([]byte{9, 0x88, 0x0a, 1, 0x80, 0}, 10))
	f.Fuzz(func(t *testing.T, in []byte) {
		e := newRxeEnv(t, QPTypeRC, false)
		src := pinned(t, 4096)
		fill(src, 0x33)
		fb := &fuzzBytes{in}
		var wrs []rawSendWR
		for i := 0; i < int(fb.u8()%12)+1; i++ {
			w := rawSendWR{WrID: uint64(i) + 1<<40, NumSGE: int32(int8(fb.u8())) % 8, Opcode: uint32(fb.u8() % 12),
				Flags: uint32(fb.u8() & 0xf), ImmData: fb.u32(), RemoteAddr: fb.u64(), RKey: fb.u32()}
			if w.NumSGE == 7 {
				w.NilSGList = true
				w.NumSGE = int32(fb.u8() % 3)
			}
			for j := 0; j < envMaxSGE+2; j++ {
				off := int(fb.u8()) * 8
				length := uint32(fb.u16() % 300)
				w.SGEs = append(w.SGEs, SGE{Addr: addr(src) + uint64(off), Length: length, LKey: fb.u32()})
			}
			w.CompareAdd, w.Swap = fb.u64(), fb.u64()
			wrs = append(wrs, w)
		}
		prod0, _ := e.f.Indices(usb4double.RxeSQ)
		rc, bad := postSendRaw(e.qp, wrs)
		if !e.f.CanaryOK() {
			t.Fatal("bytes written around the rings")
		}
		posted := len(wrs)
		if rc != 0 {
			if rc != int(unix.EINVAL) && rc != int(unix.ENOMEM) {
				t.Fatalf("rc %d", rc)
			}
			if bad < 0 {
				t.Fatalf("rc %d with *bad_wr not at a WR (%d)", rc, bad)
			}
			posted = bad
		} else if bad != badNil {
			t.Fatalf("success with *bad_wr = %d", bad)
		}
		prod, _ := e.f.Indices(usb4double.RxeSQ)
		if want := (prod0 + uint32(posted)) & e.f.Mask(usb4double.RxeSQ); prod != want {
			t.Fatalf("SQ producer %d after %d accepted WRs, want %d", prod, posted, want)
		}
		for i, w := range wrs[:posted] {
			n := int(w.NumSGE)
			var length uint64
			if n >= 0 && n <= envMaxSGE {
				for _, g := range w.SGEs[:n] {
					length += uint64(g.Length)
				}
			}
			atomic := w.Opcode == WRAtomicCmpAndSwp || w.Opcode == WRAtomicFetchAdd
			switch {
			case n < 0 || n > envMaxSGE, n > 0 && w.NilSGList, !rxeOpcodeRC(w.Opcode),
				w.Flags&SendInline != 0 && length > envMaxInline, atomic && (length < 8 || w.RemoteAddr&7 != 0):
				t.Fatalf("WR %d accepted: %+v", i, w)
			}
			want := wantSendWQE(w, n, src)
			got, _ := e.sendWQE(prod0 + uint32(i))
			gotb := unsafe.Slice((*byte)(unsafe.Pointer(got)), len(want))
			if !bytes.Equal(gotb, want) {
				t.Fatalf("WR %d (%+v):\n got %x\nwant %x", i, w, gotb, want)
			}
		}
		if posted > 0 && e.f.Doorbells() != 1 {
			t.Fatalf("%d doorbells for one batch", e.f.Doorbells())
		}
	})
}

// FuzzRxePostRecvWQE is the same for receive WR lists on the QP's RQ.
func FuzzRxePostRecvWQE(f *testing.F) {
	f.Add([]byte{3, 1, 2, 4})
	f.Add(bytes.Repeat([]byte{0xfe, 4, 9}, 20))
	f.Fuzz(func(t *testing.T, in []byte) {
		e := newRxeEnv(t, QPTypeRC, false)
		e.qp.SetState(QPStateInit)
		fb := &fuzzBytes{in}
		var wrs []rawRecvWR
		for i := 0; i < int(fb.u8()%12)+1; i++ {
			w := rawRecvWR{WrID: uint64(i) | 7<<50, NumSGE: int32(int8(fb.u8())) % 8}
			if w.NumSGE == 7 {
				w.NilSGList, w.NumSGE = true, int32(fb.u8()%3)
			}
			for j := 0; j < envMaxSGE+2; j++ {
				w.SGEs = append(w.SGEs, SGE{Addr: fb.u64(), Length: fb.u32(), LKey: fb.u32()})
			}
			wrs = append(wrs, w)
		}
		rc, bad := postRecvRaw(e.qp, nil, wrs)
		if !e.f.CanaryOK() {
			t.Fatal("bytes written around the rings")
		}
		posted := len(wrs)
		if rc != 0 {
			if (rc != int(unix.EINVAL) && rc != int(unix.ENOMEM)) || bad < 0 {
				t.Fatalf("rc %d bad %d", rc, bad)
			}
			posted = bad
		}
		if prod, _ := e.f.Indices(usb4double.RxeRQ); prod != uint32(posted) {
			t.Fatalf("RQ producer %d after %d accepted WRs", prod, posted)
		}
		for i, w := range wrs[:posted] {
			n := int(w.NumSGE)
			if n < 0 || n > envMaxSGE || (n > 0 && w.NilSGList) {
				t.Fatalf("WR %d accepted: %+v", i, w)
			}
			le := binary.LittleEndian
			want := make([]byte, uapi.SizeofRxeRecvWqe)
			le.PutUint64(want[0:], w.WrID)
			var length uint32
			for _, g := range w.SGEs[:n] {
				length += g.Length
				var s [16]byte
				le.PutUint64(s[0:], g.Addr)
				le.PutUint32(s[8:], g.Length)
				le.PutUint32(s[12:], g.LKey)
				want = append(want, s[:]...)
			}
			le.PutUint32(want[16:], length)
			le.PutUint32(want[20:], length)
			le.PutUint32(want[28:], uint32(n))
			if got := e.f.Slot(usb4double.RxeRQ, uint32(i))[:len(want)]; !bytes.Equal(got, want) {
				t.Fatalf("WR %d:\n got %x\nwant %x", i, got, want)
			}
		}
	})
}

// FuzzRxeQueueIndices lets the "kernel" write any producer and consumer
// index into each shared queue header (its own and ours: the page is
// writable by both) and fill the CQ with garbage, then posts sends and
// receives and polls. However wrong the indices, the engine may only
// address slots inside each ring (guard pages and canaries), must publish
// indices within the mask, and must return sane counts and errnos.
func FuzzRxeQueueIndices(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint32(0), uint32(0), uint32(2), uint32(0), uint8(3), uint8(3), uint8(4), []byte{1, 2, 3})
	f.Add(^uint32(0), uint32(1<<31), uint32(9), ^uint32(0), ^uint32(0), uint32(1<<30), uint8(20), uint8(20), uint8(9), []byte{0xff})
	f.Fuzz(func(t *testing.T, sqProd, sqCons, rqProd, rqCons, cqProd, cqCons uint32, nsend, nrecv, npoll uint8, cqe []byte) {
		e := newRxeEnv(t, QPTypeRC, false)
		e.qp.SetState(QPStateRTS)
		for i := uint32(0); i <= e.f.Mask(usb4double.RxeCQ); i++ {
			s := e.f.Slot(usb4double.RxeCQ, i)
			for j := range s {
				if len(cqe) > 0 {
					s[j] = cqe[(int(i)*len(s)+j)%len(cqe)]
				}
			}
		}
		e.f.SetIndices(usb4double.RxeSQ, sqProd, sqCons)
		e.f.SetIndices(usb4double.RxeRQ, rqProd, rqCons)
		e.f.SetIndices(usb4double.RxeCQ, cqProd, cqCons)
		sends := make([]SendWR, int(nsend%24))
		for i := range sends {
			sends[i] = SendWR{WrID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
		}
		recvs := make([]RecvWR, int(nrecv%24))
		for i := range recvs {
			recvs[i] = RecvWR{WrID: uint64(i), SGEs: []SGE{{Addr: 0x2000, Length: 64, LKey: 1}}}
		}
		for _, err := range []error{e.qp.PostSend(sends), e.qp.PostRecv(recvs)} {
			if err != nil && !isErrno(err, unix.ENOMEM) {
				t.Fatalf("post with garbage indices: %v (want success or ENOMEM)", err)
			}
		}
		n, _ := pollRaw(e.cq, int(npoll%16))
		if n < 0 || n > int(npoll%16) {
			t.Fatalf("poll(%d) = %d", npoll%16, n)
		}
		if !e.f.CanaryOK() {
			t.Fatal("bytes written around the rings")
		}
		for _, q := range []int{usb4double.RxeSQ, usb4double.RxeRQ, usb4double.RxeCQ} {
			prod, cons := e.f.Indices(q)
			mine, orig := prod, [3]uint32{sqProd, rqProd, cqCons}[q]
			if q == usb4double.RxeCQ {
				mine = cons
			}
			if mine != orig && mine > e.f.Mask(q) {
				t.Fatalf("queue %d: published index %d beyond mask %d", q, mine, e.f.Mask(q))
			}
		}
	})
}

func isErrno(err error, no unix.Errno) bool {
	var pe *PostError
	return errors.As(err, &pe) && pe.Err == no
}
