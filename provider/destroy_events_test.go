package provider

import (
	"testing"
	"unsafe"

	"usb4verbs/uapi"
)

// TestDestroyReportsKernelEventCounts checks that DestroyWithEvents returns
// the counts of the kernel's destroy response, on the ioctl path and on the
// write path (here through INVOKE_WRITE), for CQ, QP and SRQ.
func TestDestroyReportsKernelEventCounts(t *testing.T) {
	const cqComp, cqAsync, qpAsync, srqAsync = 7, 3, 5, 9
	for _, path := range []string{"ioctl", "write"} {
		t.Run(path, func(t *testing.T) {
			k := newFakeKernel()
			fill := func(obj uint16, method uint32, attr uint16, resp []uint32) {
				k.methods[methodKey(obj, method)] = func(_ *fakeCall, out func(uint16) []byte, _ func(uint16, uint64)) error {
					b := out(attr)
					if len(b) != 4*len(resp) {
						t.Errorf("object %d: destroy response attribute of %d bytes, want %d", obj, len(b), 4*len(resp))
						return nil
					}
					copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&resp[0])), len(b)))
					return nil
				}
			}
			fillWrite := func(cmd uint32, resp []uint32) {
				k.writeCmd[cmd] = func(_, out []byte) error {
					if len(out) != 4*len(resp) {
						t.Errorf("write %d: response of %d bytes, want %d", cmd, len(out), 4*len(resp))
						return nil
					}
					copy(out, unsafe.Slice((*byte)(unsafe.Pointer(&resp[0])), len(out)))
					return nil
				}
			}
			fill(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY, uapi.UVERBS_ATTR_DESTROY_CQ_RESP, []uint32{cqComp, cqAsync})
			fill(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY, uapi.UVERBS_ATTR_DESTROY_QP_RESP, []uint32{qpAsync})
			fill(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY, uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, []uint32{srqAsync})
			fillWrite(uapi.IB_USER_VERBS_CMD_DESTROY_CQ, []uint32{cqComp, cqAsync})
			fillWrite(uapi.IB_USER_VERBS_CMD_DESTROY_QP, []uint32{qpAsync})
			fillWrite(uapi.IB_USER_VERBS_CMD_DESTROY_SRQ, []uint32{srqAsync})
			if path == "write" {
				for _, m := range []struct {
					obj    uint16
					method uint32
				}{{uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY}, {uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY}, {uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY}} {
					k.noMethod[methodKey(m.obj, m.method)] = true
				}
			}
			c := openFake(t, k, rxe)
			defer c.Close()
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := c.CreateCQ(CQAttr{CQE: 4})
			if err != nil {
				t.Fatal(err)
			}
			srq, err := pd.CreateSRQ(SRQInitAttr{MaxWR: 4, MaxSGE: 1})
			if err != nil {
				t.Fatal(err)
			}
			qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq})
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := qp.DestroyWithEvents(); err != nil || ev != (EventCounts{Async: qpAsync}) {
				t.Errorf("qp: %+v, %v; want async %d", ev, err, qpAsync)
			}
			if ev, err := srq.DestroyWithEvents(); err != nil || ev != (EventCounts{Async: srqAsync}) {
				t.Errorf("srq: %+v, %v; want async %d", ev, err, srqAsync)
			}
			if ev, err := cq.DestroyWithEvents(); err != nil || ev != (EventCounts{Comp: cqComp, Async: cqAsync}) {
				t.Errorf("cq: %+v, %v; want comp %d async %d", ev, err, cqComp, cqAsync)
			}
			if path == "write" {
				if n := k.callsTo(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE); n < 3 {
					t.Errorf("%d INVOKE_WRITE calls, want the three destroys at least", n)
				}
			}
			// A second destroy is an error, and reports no counts.
			if ev, err := cq.DestroyWithEvents(); err == nil || ev != (EventCounts{}) {
				t.Errorf("second destroy: %+v, %v; want an error and no counts", ev, err)
			}
		})
	}
}
