package dataplane_test

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
	"usb4verbs/uapi"
)

// TestVMMemoryWindows: through the provider package and the engine, as a Go
// program uses them. For each type, B allocates a window (PD.AllocMW) and
// binds it over 4 KiB of its buffer (type 1 and type 2: a BIND_MW work
// request, PostBindMW), A RDMA-writes through the window's new rkey and
// every byte arrives; then B invalidates it (type 2: LOCAL_INV) and A's next
// write completes REM_ACCESS_ERR with nothing written. On usb4 the module has
// no windows: AllocMW is refused with an errno, then SKIP.
func TestVMMemoryWindows(t *testing.T) {
	for _, typ := range []uint8{provider.MWType1, provider.MWType2} {
		t.Run(map[uint8]string{provider.MWType1: "type1", provider.MWType2: "type2"}[typ], func(t *testing.T) {
			p := newPair(t, provider.QPTypeRC, 64)
			mw, err := p.b.pd.AllocMW(typ)
			if p.b.usb4 {
				refusedCleanly(t, "alloc_mw", err)
				t.Skip("the usb4 module has no memory windows (no alloc_mw)")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := mw.Destroy(); err != nil {
					t.Errorf("dealloc mw: %v", err)
				}
			}()
			base := uintptr(unsafe.Pointer(&p.b.buf[0]))
			mr, err := p.b.pd.RegMR(base, uint64(len(p.b.buf)), uint64(base), vmAccess|uapi.IB_UVERBS_ACCESS_MW_BIND)
			if err != nil {
				t.Fatal(err)
			}
			rkey := dataplane.IncRKey(mw.RKey())
			err = p.qb.d.PostBindMW(dataplane.MWBind{WrID: 1, Flags: dataplane.SendSignaled, MWRKey: mw.RKey(), NewRKey: rkey,
				MRLKey: int64(mr.LKey()), Addr: p.b.addr(8192), Length: 4096, Access: uapi.IB_UVERBS_ACCESS_REMOTE_WRITE})
			if err != nil {
				t.Fatal(err)
			}
			if c := vmPoll(t, p.dcqB, 1)[0]; c.WrID != 1 || c.Opcode != uapi.IB_UVERBS_WC_BIND_MW {
				t.Fatalf("bind completion %+v", c)
			}
			write := func(id uint64) {
				t.Helper()
				err := p.qa.d.PostSend([]dataplane.SendWR{{WrID: id, Opcode: dataplane.WRRDMAWrite, Flags: dataplane.SendSignaled,
					SGEs: []dataplane.SGE{p.a.sge(0, 256)}, RemoteAddr: p.b.addr(8192), RKey: rkey}})
				if err != nil {
					t.Fatal(err)
				}
			}
			fillSeed(p.a.buf[:256], 3)
			write(2)
			vmPoll(t, p.dcqA, 1)
			if !bytes.Equal(p.b.buf[8192:8192+256], p.a.buf[:256]) {
				t.Fatal("bytes written through the window differ")
			}
			if typ == provider.MWType1 {
				return // invalidated by a zero-length bind only; type 2 shows invalidation
			}
			if err := p.qb.d.PostSend([]dataplane.SendWR{{WrID: 3, Opcode: dataplane.WRLocalInv, Flags: dataplane.SendSignaled,
				ImmData: rkey}}); err != nil {
				t.Fatal(err)
			}
			vmPoll(t, p.dcqB, 1)
			clear(p.b.buf[8192 : 8192+256])
			write(4)
			wc := make([]dataplane.WC, 1)
			for deadline := time.Now().Add(10 * time.Second); ; {
				n, err := p.dcqA.Poll(wc)
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no completion for the write after LOCAL_INV")
				}
			}
			if wc[0].WrID != 4 || wc[0].Status != dataplane.WCRemAccessErr {
				t.Fatalf("write after LOCAL_INV: %+v, want REM_ACCESS_ERR", wc[0])
			}
			if !bytes.Equal(p.b.buf[8192:8192+256], make([]byte, 256)) {
				t.Fatal("the write after LOCAL_INV reached memory")
			}
		})
	}
}
