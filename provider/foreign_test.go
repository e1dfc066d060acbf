package provider

import (
	"testing"

	"usb4verbs/uapi"
)

// A fork() child's context adopted on the parent's command fd reaches the
// parent's objects by their kernel handles, and closing it destroys none of
// them (they are the parent's: rdma-core's child closes only its fd copies).
func TestForeignObjectsGoToTheKernelAndStayTheParents(t *testing.T) {
	k := newFakeKernel()
	qp := fakeQP(t, k, QPTypeRC, QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	pd, cq := qp.PD(), qp.InitAttr().SendCQ
	parent := pd.Context()

	child, err := newContextAdopted(k, parent.info, parent.CmdFD())
	if err != nil {
		t.Fatal(err)
	}
	var mod uapi.IbUverbsModifyQp
	k.writeCmd[uapi.IB_USER_VERBS_CMD_MODIFY_QP] = func(in, out []byte) error {
		copy(bytesOf(&mod), in)
		return nil
	}
	fpd := child.ForeignPD(pd.Handle())
	fqp := fpd.ForeignQP(qp.Handle(), qp.QPN(), QPTypeRC)
	if err := fqp.Modify(&QPAttr{State: uapi.IB_QPS_ERR}, uapi.IB_QP_STATE); err != nil {
		t.Fatal(err)
	}
	if mod.QpHandle != qp.Handle() || mod.QpState != uapi.IB_QPS_ERR {
		t.Errorf("modify of the parent's QP went out as handle %d state %d, want %d %d", mod.QpHandle, mod.QpState, qp.Handle(), uapi.IB_QPS_ERR)
	}
	before := k.callsTo(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY) + k.callsTo(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY)
	if err := child.Close(); err != nil {
		t.Fatal(err)
	}
	after := k.callsTo(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY) + k.callsTo(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY)
	if after != before {
		t.Errorf("closing the child's context destroyed %d of the parent's objects", after-before)
	}

	// A destroy through the child is the kernel's destroy (the parent's
	// object is gone for both, as with rdma-core's providers).
	child2, err := newContextAdopted(k, parent.info, parent.CmdFD())
	if err != nil {
		t.Fatal(err)
	}
	defer child2.Close()
	fcq := child2.ForeignCQ(cq.Handle(), cq.CQE())
	gqp := child2.ForeignPD(pd.Handle()).ForeignQP(qp.Handle(), qp.QPN(), QPTypeRC)
	if err := gqp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := fcq.Destroy(); err != nil {
		t.Fatal(err)
	}
	destroys := k.callsTo(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY) + k.callsTo(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY)
	if destroys-before != 2 {
		t.Errorf("%d destroys reached the kernel, want 2 (the QP and the CQ)", destroys-before)
	}
}
