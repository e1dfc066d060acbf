package provider

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"usb4verbs/uapi"
)

// TestVMCompletionEvent gets a real completion event through a completion
// channel: it posts one receive WQE straight into the rxe receive ring (the
// ring the QP's mmap info points at, as librxe would), arms the CQ and moves
// the QP to ERR; rxe flushes the WQE with IB_WC_WR_FLUSH_ERR, which raises
// the event. The flushed entry is then read back from the mapped CQ ring.
func TestVMCompletionEvent(t *testing.T) {
	d0, _ := vmDevs(t)
	c := mustOpen(t, d0.name)
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 8, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&QPAttr{State: uapi.IB_QPS_INIT, Port: 1}, uapi.IB_QP_STATE|uapi.IB_QP_PKEY_INDEX|uapi.IB_QP_PORT|uapi.IB_QP_ACCESS_FLAGS); err != nil {
		t.Fatal(err)
	}

	rqInfo, _, ok := qp.RxeQueues()
	if !ok {
		t.Fatal("no rxe rq mmap info")
	}
	rq, err := c.MapCmdFD(rqInfo.Offset, int(rqInfo.Size))
	if err != nil {
		t.Fatal(err)
	}
	rqHdr := (*uapi.RxeQueueBuf)(unsafePointer(rq))
	prod := atomic.LoadUint32(&rqHdr.ProducerIndex)
	slot := uintptr(prod&rqHdr.IndexMask) << rqHdr.Log2ElemSize
	wqe := (*uapi.RxeRecvWqe)(unsafe.Add(unsafePointer(rq), uapi.SizeofRxeQueueBuf+slot))
	*wqe = uapi.RxeRecvWqe{WrId: 0xfeed}
	atomic.StoreUint32(&rqHdr.ProducerIndex, (prod+1)&rqHdr.IndexMask) // publish after the WQE

	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&QPAttr{State: uapi.IB_QPS_ERR}, uapi.IB_QP_STATE); err != nil {
		t.Fatal(err)
	}
	got, err := ch.GetEvent(5 * time.Second)
	if err != nil {
		t.Fatalf("no completion event after the flush: %v", err)
	}
	if got != cq {
		t.Fatalf("event for %v, want the cq", got)
	}
	if err := cq.AckEvents(1); err != nil {
		t.Error(err)
	}

	cqInfo, ok := cq.RxeQueue()
	if !ok {
		t.Fatal("no rxe cq mmap info")
	}
	ring, err := c.MapCmdFD(cqInfo.Offset, int(cqInfo.Size))
	if err != nil {
		t.Fatal(err)
	}
	hdr := (*uapi.RxeQueueBuf)(unsafePointer(ring))
	cons := atomic.LoadUint32(&hdr.ConsumerIndex)
	if p := atomic.LoadUint32(&hdr.ProducerIndex); (p-cons)&hdr.IndexMask == 0 {
		t.Fatalf("cq ring empty (producer %d consumer %d)", p, cons)
	}
	wc := (*uapi.IbUverbsWc)(unsafe.Add(unsafePointer(ring), uapi.SizeofRxeQueueBuf+uintptr(cons&hdr.IndexMask)<<hdr.Log2ElemSize))
	t.Logf("flushed completion: wr_id %#x status %d qp %#x", wc.WrId, wc.Status, wc.QpNum)
	if wc.WrId != 0xfeed || wc.Status != uapi.IB_WC_WR_FLUSH_ERR || wc.QpNum != qp.QPN() {
		t.Errorf("wc %+v, want wr_id 0xfeed FLUSH_ERR on qp %#x", *wc, qp.QPN())
	}
}
