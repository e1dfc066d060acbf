package provider

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// USB4VERBS_SRQ=provider makes SRQs on an rxe context the provider's, read
// when the context opens: query_device answers the provider SRQ's limits,
// create_srq issues no kernel SRQ command, and a QP on it gets a kernel
// receive queue of its own (the SRQ's max_wr, at most max_qp_wr) and no SRQ
// handle. Unset, "kernel" or a word it does not know: rxe's own SRQs.
func TestProviderSRQKnobOnRxe(t *testing.T) {
	for _, tc := range []struct {
		env      string
		provider bool
	}{{"provider", true}, {"Provider", true}, {"", false}, {"kernel", false}, {"bogus", false}} {
		t.Run("USB4VERBS_SRQ="+tc.env, func(t *testing.T) {
			t.Setenv(SRQEnv, tc.env)
			k := newFakeKernel()
			kernelSRQ := false
			k.methods[methodKey(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
				kernelSRQ = true
				return unix.EOPNOTSUPP
			}
			qd := uint32(uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED)
			okQD := k.writeCmd[qd]
			k.writeCmd[qd] = func(in, out []byte) error {
				err := okQD(in, out)
				r := (*uapi.IbUverbsExQueryDeviceResp)(unsafe.Pointer(&out[0]))
				r.Base.MaxQpWr, r.Base.MaxSrq, r.Base.MaxSrqWr, r.Base.MaxSrqSge = 16384, 917503, 1048576, 27 // rxe's
				return err
			}
			gotCap, gotSRQ := recordQPCreate(k)
			c := openFake(t, k, rxe)
			defer c.Close()
			if c.ProviderSRQForced() != tc.provider {
				t.Fatalf("ProviderSRQForced %v", c.ProviderSRQForced())
			}
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			_, err = pd.CreateSRQ(SRQInitAttr{MaxWR: 32768, MaxSGE: 1})
			if !tc.provider {
				if a.ProviderSRQ || a.MaxSRQ != 917503 || !kernelSRQ || !errors.Is(err, unix.EOPNOTSUPP) {
					t.Fatalf("rxe's own SRQs: query_device provider %v max_srq %d; create_srq asked the kernel %v (%v)",
						a.ProviderSRQ, a.MaxSRQ, kernelSRQ, err)
				}
				return
			}
			if !a.ProviderSRQ || a.MaxSRQ != ProviderSRQMaxSRQ || a.MaxSRQWR != ProviderSRQMaxWR || a.MaxSRQSGE != ProviderSRQMaxSGE {
				t.Fatalf("query_device: provider %v max_srq %d max_srq_wr %d max_srq_sge %d, want the provider SRQ's",
					a.ProviderSRQ, a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE)
			}
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("create_srq of 32768 WRs (above the provider's %d): %v, want EINVAL", ProviderSRQMaxWR, err)
			}
			srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 16384, MaxSGE: 1})
			if err != nil || !srq.Provider() || kernelSRQ {
				t.Fatalf("create_srq: %v, provider %v, a kernel SRQ command %v", err, srq != nil && srq.Provider(), kernelSRQ)
			}
			cq, err := c.CreateCQ(CQAttr{CQE: 8})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: QPCap{MaxSendWR: 8, MaxSendSGE: 1}}); err != nil {
				t.Fatal(err)
			}
			if *gotSRQ || gotCap.MaxRecvWr != 16384 || gotCap.MaxRecvSge != 1 {
				t.Fatalf("create_qp: srq handle sent %v, cap %+v; want none, 16384 receive WRs of 1 SGE", *gotSRQ, *gotCap)
			}
		})
	}
}

// A fork() child's view of its parent's provider SRQ answers query_srq,
// modify_srq and destroy_srq without a kernel command: the kernel never gave
// its handle.
func TestForeignProviderSRQ(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k, rxe)
	defer c.Close()
	for _, cmd := range []uint32{uapi.IB_USER_VERBS_CMD_QUERY_SRQ, uapi.IB_USER_VERBS_CMD_MODIFY_SRQ, uapi.IB_USER_VERBS_CMD_DESTROY_SRQ} {
		k.writeCmd[cmd] = func(in, out []byte) error {
			t.Errorf("kernel command %d for a provider SRQ's handle", cmd)
			return unix.EINVAL
		}
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error {
		t.Error("SRQ_DESTROY for a provider SRQ's handle")
		return unix.EINVAL
	}
	srq := c.ForeignPD(3).ForeignProviderSRQ(providerSRQHandleBase+1, SRQAttr{MaxWR: 32, MaxSGE: 1, Limit: 4})
	if a, err := srq.Query(); err != nil || a.MaxWR != 32 {
		t.Fatalf("query_srq: %+v %v", a, err)
	}
	if err := srq.Modify(SRQAttr{Limit: 2}, uapi.IB_SRQ_LIMIT); err != nil {
		t.Fatalf("modify_srq: %v", err)
	}
	if err := srq.Destroy(); err != nil {
		t.Fatalf("destroy_srq: %v", err)
	}
}
