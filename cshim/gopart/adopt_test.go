package main

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
)

// A fork() child that adopts its parent's CQ, QP and SRQ drives their data
// path itself; the removal this child's Go part sees must stop them like
// its own, so each adopted engine object joins the child's removal record
// of the context (the parent's record is a dead copy there).
func TestAdoptedObjectsJoinTheChildsRecord(t *testing.T) {
	// Commands go to fd -1: EBADF from a live object, EIO once it is gone.
	const cmdFD = -1
	parentDev, err := dataplane.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dataplane.NewCQ(nil, cmdFD, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := dataplane.NewSRQ(nil, cmdFD, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := dataplane.NewQP(dataplane.QPConfig{CmdFd: cmdFD, Handle: 3, QPNum: 3, Type: dataplane.QPTypeRC,
		MaxSendWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, SendCQ: cq, RecvCQ: cq, SRQ: srq})
	if err != nil {
		t.Fatal(err)
	}
	cq.Join(parentDev)
	srq.Join(parentDev)
	qp.Join(parentDev)
	t.Cleanup(func() { qp.Close(); srq.Close(); cq.Close() }) // parentDev: as a dead copy, never touched again

	ctx := new(provider.Context) // the record's key only: foreign objects issue nothing here
	childDev, err := dataplane.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	engineDevs.mu.Lock()
	engineDevs.m[ctx] = childDev
	engineDevs.mu.Unlock()
	t.Cleanup(func() { closeEngineDev(ctx) })
	pd := ctx.ForeignPD(9)

	ce := adoptCQ(ctx, 1, 4, cq.CPtr())
	se := adoptSRQ(pd, 2, srq.CPtr())
	qe := adoptQP(pd, 3, 3, provider.QPTypeRC, qp.CPtr())
	if n := childDev.Remove(); n != 0 {
		t.Fatalf("removal: %d objects held", n)
	}
	wc := make([]dataplane.WC, 1)
	if _, err := ce.dp.Poll(wc); !errors.Is(err, unix.EIO) {
		t.Errorf("poll on the adopted CQ after the child's removal: %v, want EIO", err)
	}
	if err := qe.dp.PostSend([]dataplane.SendWR{{WrID: 1}}); !errors.Is(err, unix.EIO) {
		t.Errorf("post_send on the adopted QP after the child's removal: %v, want EIO", err)
	}
	if err := se.dp.PostRecv([]dataplane.RecvWR{{WrID: 1}}); !errors.Is(err, unix.EIO) {
		t.Errorf("post_srq_recv on the adopted SRQ after the child's removal: %v, want EIO", err)
	}
}

// A fork() child's view of its parent's provider SRQ (no kernel object:
// USB4VERBS_SRQ=provider, or a usb4 kernel without SRQs) is a provider SRQ
// with the sizes of the data path it copied, so that query_srq, modify_srq
// and destroy_srq in the child issue no kernel command for a handle the
// kernel never gave (provider's TestForeignProviderSRQ; they did, and got
// ENOENT, before: fork.c's child_parent_objects with USB4VERBS_SRQ=provider
// on rxe).
func TestAdoptedProviderSRQ(t *testing.T) {
	const cmdFD = -1 // any command would fail with EBADF
	dp, err := dataplane.NewProviderSRQ(nil, cmdFD, 32, 1, 4, 0x77)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dp.Close)
	ctx := new(provider.Context)
	childDev, err := dataplane.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	engineDevs.mu.Lock()
	engineDevs.m[ctx] = childDev
	engineDevs.mu.Unlock()
	t.Cleanup(func() { closeEngineDev(ctx) })
	se := adoptSRQ(ctx.ForeignPD(9), 0xfff00001, dp.CPtr())
	if !se.srq.Provider() {
		t.Fatal("the parent's provider SRQ adopted as a kernel SRQ")
	}
	if a := se.srq.InitAttr(); a.MaxWR != 32 || a.MaxSGE != 1 || a.Limit != 4 {
		t.Fatalf("adopted sizes %+v, want the data path's 32 WRs, 1 SGE, limit 4", a)
	}
}
