package dataplane

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

var le = binary.LittleEndian

func FuzzUverbsWCDecode(f *testing.F) {
	f.Add(make([]byte, 48))
	f.Fuzz(func(t *testing.T, b []byte) {
		wc, ok := decodeUverbsWC(b)
		if !ok {
			if len(b) >= 48 {
				t.Fatal("48 bytes refused")
			}
			return
		}
		if wc.WrID != le.Uint64(b) || wc.Status != le.Uint32(b[8:]) || wc.Opcode != le.Uint32(b[12:]) ||
			wc.ByteLen != le.Uint32(b[20:]) || wc.ImmData != le.Uint32(b[24:]) || wc.QPNum != le.Uint32(b[28:]) ||
			wc.WCFlags != le.Uint32(b[36:]) || wc.PkeyIndex != le.Uint16(b[40:]) || wc.SL != b[44] || wc.DLIDPathBits != b[45] {
			t.Fatalf("field lost in conversion: %x -> %+v", b[:48], wc)
		}
	})
}

func FuzzRingHeaderValidate(f *testing.F) {
	good := make([]byte, 192)
	for i, v := range []uint32{0x54425643, 2, 16, 48, 4096, 0, 0, 0, 8192} {
		le.PutUint32(good[i*4:], v)
	}
	tail := make([]byte, 32)
	le.PutUint32(tail[8:], 16)
	le.PutUint32(tail[12:], 2)
	le.PutUint64(tail[24:], 8192)
	f.Add(good, tail, uint32(16), 8192)
	f.Fuzz(func(t *testing.T, hdr, tail []byte, requested uint32, mapped int) {
		ok, why := validateRingHeader(hdr, tail, requested, mapped)
		if !ok {
			if why == "" {
				t.Fatal("refused without a reason")
			}
			return
		}
		cqe, entry, ring, mapLen := le.Uint32(hdr[8:]), le.Uint32(hdr[12:]), le.Uint32(hdr[16:]), le.Uint32(hdr[32:])
		produced, consumed := le.Uint32(hdr[20:]), le.Uint32(hdr[24:])
		switch {
		case le.Uint32(hdr) != 0x54425643, le.Uint32(hdr[4:]) != 2, entry != 48, cqe < requested, cqe == 0,
			uint64(ring)+uint64(cqe)*48 > uint64(mapped), ring < 192, int(mapLen) != mapped,
			produced-consumed > cqe, le.Uint32(hdr[28:]) != 0:
			t.Fatalf("accepted a bad header %x (tail %x, requested %d, mapped %d)", hdr[:36], tail[:32], requested, mapped)
		}
	})
}

func FuzzDVCQEDecode(f *testing.F) {
	f.Add(make([]byte, 64), uint32(0x900))
	f.Fuzz(func(t *testing.T, b []byte, qpn uint32) {
		wc, ok := decodeDVCQE(b, qpn)
		if !ok {
			return
		}
		if wc.WrID != le.Uint64(b) || wc.QPNum != qpn {
			t.Fatalf("wr_id/qp_num lost: %+v", wc)
		}
		switch wc.Status {
		case WCSuccess, WCWRFlushErr, WCLocLenErr, WCLocProtErr, WCRemAccessErr, WCRetryExcErr, WCGeneralErr:
		default:
			t.Fatalf("status %d is no ibv_wc_status the DV ABI maps to", wc.Status)
		}
		if le.Uint32(b[8:]) == 0 && wc.Status != WCSuccess {
			t.Fatal("success mapped to an error")
		}
	})
}

func FuzzDVWQEEncode(f *testing.F) {
	f.Add(uint32(WRSend), uint32(SendSignaled), uint8(1), uint32(64), uint64(0x1000), uint64(5), uint8(3))
	f.Add(uint32(WRAtomicFetchAdd), uint32(0), uint8(1), uint32(8), uint64(0x1000), uint64(5), uint8(3))
	f.Fuzz(func(t *testing.T, opcode, flags uint32, nsge uint8, length uint32, remote, add uint64, gen uint8) {
		w := SendWR{WrID: 7, Opcode: opcode, Flags: flags, RemoteAddr: remote, CompareAdd: add, Swap: ^add}
		for i := 0; i < int(nsge%4); i++ {
			w.SGEs = append(w.SGEs, SGE{Addr: 0x5000, Length: length, LKey: 9})
		}
		wqe, rc := encodeDVWQE(w, 0x1ff, gen)
		switch rc {
		case 0:
		case int(unix.EOPNOTSUPP), int(unix.EINVAL):
			return
		default:
			t.Fatalf("rc %d", rc)
		}
		if len(w.SGEs) > 1 || flags&SendInline != 0 {
			t.Fatalf("encoded a WR DV cannot carry: %+v", w)
		}
		// No SGE is a zero-length WQE without a local address.
		wantLen, wantAddr, wantKey := length, uint64(0x5000), uint32(9)
		if len(w.SGEs) == 0 {
			wantLen, wantAddr, wantKey = 0, 0, 0
		}
		if le.Uint32(wqe[4:]) != wantLen || le.Uint64(wqe[8:]) != 7 || le.Uint32(wqe[44:]) != uint32(gen) ||
			le.Uint64(wqe[16:]) != wantAddr || le.Uint32(wqe[24:]) != wantKey {
			t.Fatalf("WQE fields wrong: %x", wqe)
		}
		if op := le.Uint16(wqe[:]); op == 0 || op > 8 {
			t.Fatalf("DV opcode %d", op)
		}
		if (opcode == WRAtomicFetchAdd || opcode == WRAtomicCmpAndSwp) && (length != 8 || remote&7 != 0) {
			t.Fatal("atomic with a bad length or alignment encoded")
		}
	})
}

// FuzzKCmdPostSend drives whole WR lists through the kernel-command encoder
// into the kernel double, which decodes them as uverbs does.
func FuzzKCmdPostSend(f *testing.F) {
	f.Add(uint8(3), uint32(WRSend), uint32(SendSignaled), uint8(2), uint32(64), uint32(0))
	f.Add(uint8(20), uint32(WRRDMAWrite), uint32(SendSignaled), uint8(1), uint32(8), uint32(1))
	f.Fuzz(func(t *testing.T, count uint8, opcode, flags uint32, nsge uint8, length uint32, rkeyDelta uint32) {
		e := newUSB4Env(t, "kcmd", 64)
		length %= 4096
		var recvs []RecvWR
		var wrs []SendWR
		for i := 0; i < int(count%24); i++ {
			recvs = append(recvs, RecvWR{WrID: uint64(i), SGEs: []SGE{e.sgeB(0, 8192)}})
			w := SendWR{WrID: uint64(i), Opcode: opcode % 12, Flags: flags & 0xf,
				RemoteAddr: addr(e.bufB) + 1024, RKey: e.rkeyB + rkeyDelta%2}
			for j := 0; j < int(nsge%7); j++ {
				w.SGEs = append(w.SGEs, e.sgeA(j*512, int(length%512)))
			}
			wrs = append(wrs, w)
		}
		if err := e.qpB.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		err := e.qpA.PostSend(wrs)
		if err != nil {
			var pe *PostError
			if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(wrs) {
				t.Fatalf("post error %v", err)
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOMEM) {
				t.Fatalf("unexpected errno %v", err)
			}
		}
		wc := make([]WC, 64)
		for {
			n, err := e.cqA.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, c := range wc[:n] {
				if c.WrID >= uint64(len(wrs)) {
					t.Fatalf("completion for a WR never posted: %+v", c)
				}
			}
		}
	})
}
