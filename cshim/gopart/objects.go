package main

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
	"usb4verbs/uapi"
)

// The Go side of a CQ, QP and SRQ: the kernel object (provider) and the data
// path's C object (dataplane), which objects.c calls directly.
type cqEntry struct {
	cq      *provider.CQ
	dp      *dataplane.CQ
	ch      *provider.CompChannel // libibverbs' channel, adopted; or nil
	foreign bool                  // a fork() parent's (usb4goAdoptObject)
}

type qpEntry struct {
	qp      *provider.QP
	dp      *dataplane.QP
	foreign bool
}

type srqEntry struct {
	srq     *provider.SRQ
	dp      *dataplane.SRQ
	foreign bool
}

// closeContext frees the data-path objects the application left behind
// (QPs before the CQs they point at; DV teardown needs the command fd), then
// closes the context, which destroys the kernel objects. A fork() parent's
// objects that this image adopted stay as they are: they are the parent's.
func closeContext(ctx *provider.Context) {
	left := handles.takeOwnedBy(ctx)
	for _, v := range left {
		if e, ok := v.(*qpEntry); ok && !e.foreign {
			e.dp.Close()
		}
	}
	for _, v := range left {
		switch e := v.(type) {
		case *srqEntry:
			if !e.foreign {
				e.dp.Close()
			}
		case *cqEntry:
			if !e.foreign {
				e.dp.Close()
			}
		}
	}
	_ = ctx.Close()
	closeEngineDev(ctx)
}

// engineDevs holds each open context's removal record in the engine: its
// CQs, QPs and SRQs join it when made, and the removal stops them through it
// alone. Its lock is a leaf (a map access under it, nothing else).
var engineDevs = engineDevTable{m: map[*provider.Context]*dataplane.Dev{}}

type engineDevTable struct {
	mu sync.Mutex
	m  map[*provider.Context]*dataplane.Dev
}

// openEngineDev makes ctx's record and hands the removal watcher the one
// call that stops ctx's data path.
func openEngineDev(ctx *provider.Context) error {
	dev, err := dataplane.NewDev()
	if err != nil {
		return err
	}
	engineDevs.mu.Lock()
	engineDevs.m[ctx] = dev
	engineDevs.mu.Unlock()
	name := ctx.Device().Name
	ctx.WatchRemoval(func() {
		ctx.StopAsyncRelay() // the kernel's async file must go too
		removeEngine(name, dev)
	})
	return nil
}

// of is ctx's record (nil, which joins nothing, for a context of none).
func (t *engineDevTable) of(ctx *provider.Context) *dataplane.Dev {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[ctx]
}

// closeEngineDev drops ctx's record, after its objects are freed.
func closeEngineDev(ctx *provider.Context) {
	engineDevs.mu.Lock()
	dev := engineDevs.m[ctx]
	delete(engineDevs.m, ctx)
	engineDevs.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

// removeEngine stops the data path of every object of the removed device's
// context (provider/removal.go calls it, holding no lock): posts and polls
// answer EIO from now on, without reaching the command fd or the rings, and
// the rings the engine mapped from the command fd become anonymous memory,
// so they stop holding the kernel's file. A ring whose object is held (an
// rxe start_poll holder, a resize) is tried again a millisecond later, for
// up to two seconds (docs/DESIGN.md, "Lock order").
func removeEngine(name string, dev *dataplane.Dev) {
	for deadline := time.Now().Add(2 * time.Second); dev.Remove() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "libusb4_rdma: %s: a CQ or SRQ stayed held for 2 s after the removal; its ring stays mapped until it is destroyed\n", name)
			return
		}
	}
}

//export usb4goWarm
func usb4goWarm() {}

//export usb4goCreateCQ
func usb4goCreateCQ(h C.uintptr_t, cqe, channelFD, compVector C.int, userHandle C.uint64_t, out *C.struct_usb4_obj_info) (rc C.int) {
	defer contain("create_cq", &rc)
	forcedPanic("create_cq")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	// ibv_create_comp_channel is core-only: libibverbs created the channel
	// on our command fd and owns its fd. Binding the CQ to that fd makes the
	// kernel deliver events to the file the application reads.
	var ch *provider.CompChannel
	if channelFD >= 0 {
		var err error
		if ch, err = ctx.CompChannelFromFD(int(channelFD)); err != nil {
			return errnoOf(err)
		}
	}
	cq, err := ctx.CreateCQ(provider.CQAttr{CQE: int(cqe), CompVector: uint32(compVector), Channel: ch, UserHandle: uint64(userHandle)})
	if err != nil {
		if ch != nil {
			_ = ch.Close()
		}
		return errnoOf(err)
	}
	e := &cqEntry{cq: cq, ch: ch}
	if err := attachCQ(ctx, e, uint32(cqe)); err != nil {
		destroyCQ(e)
		return errnoOf(err)
	}
	e.dp.Join(engineDevs.of(ctx))
	out._go = C.uintptr_t(handles.add(ctx, e))
	out.handle = C.uint32_t(cq.Handle())
	out.num = C.uint32_t(cq.CQE())
	out.eng = e.dp.CPtr()
	return 0
}

// attachCQ creates the data-path CQ on the backend the device offers.
func attachCQ(ctx *provider.Context, e *cqEntry, requested uint32) error {
	dp, err := dataplane.NewCQ(nil, ctx.CmdFD(), e.cq.Handle(), e.cq.CQE())
	if err != nil {
		return err
	}
	e.dp = dp
	switch ctx.Driver().Kind {
	case provider.DriverRXE:
		mi, ok := e.cq.RxeQueue()
		if !ok {
			return unix.EPROTO
		}
		return dp.AttachRxe(nil, mi.Offset, mi.Size)
	case provider.DriverUSB4:
		if kernelCommandsForced() {
			break
		}
		if tail := e.cq.DriverResp(); len(tail) >= dataplane.SizeofCreateCQTail {
			dp.TryMappedRing(tail, requested)
		}
	}
	return nil
}

// kernelCommandsForced says whether the user set force_kernel_commands
// (settings.c, handed over by usb4goStart): usb4 CQs and QPs then stay on
// kernel commands.
func kernelCommandsForced() bool { return settings.forceKernelCommands }

func destroyCQ(e *cqEntry) {
	_ = e.cq.Destroy()
	if e.dp != nil {
		e.dp.Close()
	}
	if e.ch != nil {
		_ = e.ch.Close()
	}
}

// reportDestroyed hands the kernel's event counts of a destroyed CQ, QP or
// SRQ to objects.c, which waits until the application has acknowledged as
// many (as ibv_cmd_destroy_* do), and retires the Go handle. The caller then
// disowns the engine object: objects.c frees it after that wait, in
// rdma-core's order (destroy in the kernel, wait for the acks, unmap and
// free), since a thread holding an event may use it until it acks.
func reportDestroyed(h C.uintptr_t, ev provider.EventCounts, out *C.struct_usb4_event_counts) {
	out.comp = C.uint32_t(ev.Comp)
	out.async = C.uint32_t(ev.Async)
	handles.remove(uintptr(h))
}

// usb4goDestroyCQ destroys the CQ and reports the kernel's event counts;
// objects.c waits for the application to acknowledge as many.
//
//export usb4goDestroyCQ
func usb4goDestroyCQ(h C.uintptr_t, out *C.struct_usb4_event_counts) (rc C.int) {
	defer contain("destroy_cq", &rc)
	forcedPanic("destroy_cq")
	e, ok := lookup[*cqEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	ev, err := e.cq.DestroyWithEvents()
	if err != nil {
		return errnoOf(err) // EBUSY while QPs use it: the CQ stays usable
	}
	reportDestroyed(h, ev, out)
	e.dp.Disown() // objects.c frees it after the acks
	if e.ch != nil {
		_ = e.ch.Close()
	}
	return 0
}

// usb4goResizeCQ asks the kernel for at least cqe entries and reports what
// it granted; an rxe CQ's data path moves to the kernel's new ring with its
// pollers held off.
//
//export usb4goResizeCQ
func usb4goResizeCQ(h C.uintptr_t, cqe C.int, granted *C.uint32_t) (rc C.int) {
	defer contain("resize_cq", &rc)
	forcedPanic("resize_cq")
	e, ok := lookup[*cqEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	var resized bool
	err := e.dp.Resize(func() (uint64, uint32, error) {
		if _, err := e.cq.Resize(int(cqe)); err != nil {
			return 0, 0, err
		}
		resized = true
		mi, _ := e.cq.RxeQueue()
		return mi.Offset, mi.Size, nil
	})
	if err != nil && resized {
		fmt.Fprintf(os.Stderr, "libusb4_rdma: resize_cq: the kernel resized CQ %d but its new ring is unusable (%v); polling it fails from now on\n",
			e.cq.Handle(), err)
	}
	if resized {
		*granted = C.uint32_t(e.cq.CQE())
	}
	return errnoOf(err)
}

func capFromC(c *C.struct_usb4_ibv_qp_cap) provider.QPCap {
	return provider.QPCap{MaxSendWR: uint32(c.max_send_wr), MaxRecvWR: uint32(c.max_recv_wr),
		MaxSendSGE: uint32(c.max_send_sge), MaxRecvSGE: uint32(c.max_recv_sge), MaxInlineData: uint32(c.max_inline_data)}
}

func capToC(p provider.QPCap, c *C.struct_usb4_ibv_qp_cap) {
	c.max_send_wr = C.uint32_t(p.MaxSendWR)
	c.max_recv_wr = C.uint32_t(p.MaxRecvWR)
	c.max_send_sge = C.uint32_t(p.MaxSendSGE)
	c.max_recv_sge = C.uint32_t(p.MaxRecvSGE)
	c.max_inline_data = C.uint32_t(p.MaxInlineData)
}

//export usb4goCreateQP
func usb4goCreateQP(h C.uintptr_t, req *C.struct_usb4_qp_req, out *C.struct_usb4_obj_info) (rc C.int) {
	defer contain("create_qp", &rc)
	forcedPanic("create_qp")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	scq, ok1 := lookup[*cqEntry](req.send_cq)
	rcq, ok2 := lookup[*cqEntry](req.recv_cq)
	if !ok1 || !ok2 {
		return C.int(unix.EBADF)
	}
	var srq *srqEntry
	if req.srq != 0 {
		if srq, ok = lookup[*srqEntry](req.srq); !ok {
			return C.int(unix.EBADF)
		}
	}
	attr := provider.QPInitAttr{
		Type:       provider.QPType(req.qp_type),
		SendCQ:     scq.cq,
		RecvCQ:     rcq.cq,
		Cap:        capFromC(&req.cap),
		SigAll:     req.sq_sig_all != 0,
		UserHandle: uint64(req.user_handle),
	}
	if srq != nil {
		attr.SRQ = srq.srq
	}
	qp, err := pd.CreateQP(attr)
	if err != nil {
		return errnoOf(err)
	}
	granted := qp.InitAttr().Cap
	ctx := pd.Context()
	cfg := dataplane.QPConfig{
		CmdFd: ctx.CmdFD(), Handle: qp.Handle(), QPNum: qp.QPN(), Type: uint32(req.qp_type),
		SqSigAll: attr.SigAll, MaxSendWR: granted.MaxSendWR, MaxSendSGE: granted.MaxSendSGE, MaxRecvSGE: granted.MaxRecvSGE,
		MaxInline: granted.MaxInlineData, SendCQ: scq.dp, RecvCQ: rcq.dp, SendCQChannel: scq.ch != nil,
	}
	if srq != nil {
		cfg.SRQ = srq.dp
	}
	dp, err := dataplane.NewQP(cfg)
	if err != nil {
		_ = qp.Destroy()
		return errnoOf(err)
	}
	switch drv := ctx.Driver(); drv.Kind {
	case provider.DriverRXE:
		rq, sq, ok := qp.RxeQueues()
		if !ok {
			err = unix.EPROTO
		} else {
			err = dp.AttachRxe(nil, sq.Offset, sq.Size, nil, rq.Offset, rq.Size)
		}
	case provider.DriverUSB4:
		switch {
		case kernelCommandsForced():
			dp.LeaveDV("force_kernel_commands set")
		case settings.dvSend:
			// At the QP's first post, and not when the application
			// attached its own queue first (the kernel's EBUSY).
			dp.DeferDV(drv.ID) // falls back to kernel commands by itself
		default:
			// DV queues are the applications' (GPU producers attach
			// theirs on the QP's handle): the provider takes none.
			dp.LeaveDV("the provider's own DV use is off (dv_send); a DV queue on this QP is the application's")
		}
	}
	if err == nil && srq != nil && srq.srq.Provider() {
		// The SRQ feeds the QP's own kernel RQ (provider/srq.go).
		err = dp.AttachProviderSRQ(granted.MaxRecvWR)
		granted.MaxRecvWR, granted.MaxRecvSGE = 0, 0 // the application's receives are the SRQ's
	}
	if err != nil {
		dp.Close()
		_ = qp.Destroy()
		return errnoOf(err)
	}
	capToC(granted, &req.cap)
	dp.Join(engineDevs.of(ctx))
	out._go = C.uintptr_t(handles.add(ctx, &qpEntry{qp: qp, dp: dp}))
	out.handle = C.uint32_t(qp.Handle())
	out.num = C.uint32_t(qp.QPN())
	out.eng = dp.CPtr()
	return 0
}

func ahAttrFromC(a *C.struct_usb4_ibv_ah_attr) provider.AHAttr {
	var r provider.AHAttr
	copy(r.GRH.DGID[:], C.GoBytes(unsafe.Pointer(&a.grh.dgid[0]), 16))
	r.GRH.FlowLabel = uint32(a.grh.flow_label)
	r.GRH.SGIDIndex = uint8(a.grh.sgid_index)
	r.GRH.HopLimit = uint8(a.grh.hop_limit)
	r.GRH.TrafficClass = uint8(a.grh.traffic_class)
	r.DLID = uint16(a.dlid)
	r.SL = uint8(a.sl)
	r.SrcPathBits = uint8(a.src_path_bits)
	r.StaticRate = uint8(a.static_rate)
	r.IsGlobal = a.is_global != 0
	r.Port = uint8(a.port_num)
	return r
}

func ahAttrToC(r provider.AHAttr, a *C.struct_usb4_ibv_ah_attr) {
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&a.grh.dgid[0])), 16)
	copy(dst, r.GRH.DGID[:])
	a.grh.flow_label = C.uint32_t(r.GRH.FlowLabel)
	a.grh.sgid_index = C.uint8_t(r.GRH.SGIDIndex)
	a.grh.hop_limit = C.uint8_t(r.GRH.HopLimit)
	a.grh.traffic_class = C.uint8_t(r.GRH.TrafficClass)
	a.dlid = C.uint16_t(r.DLID)
	a.sl = C.uint8_t(r.SL)
	a.src_path_bits = C.uint8_t(r.SrcPathBits)
	a.static_rate = C.uint8_t(r.StaticRate)
	a.is_global = 0
	if r.IsGlobal {
		a.is_global = 1
	}
	a.port_num = C.uint8_t(r.Port)
}

func qpAttrFromC(a *C.struct_usb4_ibv_qp_attr) provider.QPAttr {
	return provider.QPAttr{
		State: uint8(a.qp_state), CurState: uint8(a.cur_qp_state), PathMTU: uint8(a.path_mtu),
		PathMigState: uint8(a.path_mig_state), QKey: uint32(a.qkey), RQPSN: uint32(a.rq_psn),
		SQPSN: uint32(a.sq_psn), DestQPN: uint32(a.dest_qp_num), AccessFlags: uint32(a.qp_access_flags),
		PKeyIndex: uint16(a.pkey_index), AltPKeyIndex: uint16(a.alt_pkey_index),
		EnSQDAsyncNotify: uint8(a.en_sqd_async_notify), SQDraining: uint8(a.sq_draining),
		MaxRdAtomic: uint8(a.max_rd_atomic), MaxDestRdAtomic: uint8(a.max_dest_rd_atomic),
		MinRNRTimer: uint8(a.min_rnr_timer), Port: uint8(a.port_num), Timeout: uint8(a.timeout),
		RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry), AltPort: uint8(a.alt_port_num),
		AltTimeout: uint8(a.alt_timeout), AH: ahAttrFromC(&a.ah_attr), AltAH: ahAttrFromC(&a.alt_ah_attr),
		Cap: capFromC(&a.cap),
	}
}

func qpAttrToC(p provider.QPAttr, a *C.struct_usb4_ibv_qp_attr) {
	*a = C.struct_usb4_ibv_qp_attr{}
	a.qp_state = C.uint32_t(p.State)
	a.cur_qp_state = C.uint32_t(p.CurState)
	a.path_mtu = C.uint32_t(p.PathMTU)
	a.path_mig_state = C.uint32_t(p.PathMigState)
	a.qkey = C.uint32_t(p.QKey)
	a.rq_psn = C.uint32_t(p.RQPSN)
	a.sq_psn = C.uint32_t(p.SQPSN)
	a.dest_qp_num = C.uint32_t(p.DestQPN)
	a.qp_access_flags = C.uint32_t(p.AccessFlags)
	capToC(p.Cap, &a.cap)
	ahAttrToC(p.AH, &a.ah_attr)
	ahAttrToC(p.AltAH, &a.alt_ah_attr)
	a.pkey_index = C.uint16_t(p.PKeyIndex)
	a.alt_pkey_index = C.uint16_t(p.AltPKeyIndex)
	a.en_sqd_async_notify = C.uint8_t(p.EnSQDAsyncNotify)
	a.sq_draining = C.uint8_t(p.SQDraining)
	a.max_rd_atomic = C.uint8_t(p.MaxRdAtomic)
	a.max_dest_rd_atomic = C.uint8_t(p.MaxDestRdAtomic)
	a.min_rnr_timer = C.uint8_t(p.MinRNRTimer)
	a.port_num = C.uint8_t(p.Port)
	a.timeout = C.uint8_t(p.Timeout)
	a.retry_cnt = C.uint8_t(p.RetryCnt)
	a.rnr_retry = C.uint8_t(p.RNRRetry)
	a.alt_port_num = C.uint8_t(p.AltPort)
	a.alt_timeout = C.uint8_t(p.AltTimeout)
}

//export usb4goModifyQP
func usb4goModifyQP(h C.uintptr_t, attr *C.struct_usb4_ibv_qp_attr, mask C.int) (rc C.int) {
	defer contain("modify_qp", &rc)
	forcedPanic("modify_qp")
	e, ok := lookup[*qpEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	a := qpAttrFromC(attr)
	return errnoOf(e.qp.Modify(&a, uint32(mask)))
}

//export usb4goQueryQP
func usb4goQueryQP(h C.uintptr_t, mask C.int, attr *C.struct_usb4_ibv_qp_attr, initCap *C.struct_usb4_ibv_qp_cap, sigAll *C.int32_t) (rc C.int) {
	defer contain("query_qp", &rc)
	forcedPanic("query_qp")
	e, ok := lookup[*qpEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	a, init, err := e.qp.Query(uint32(mask))
	if err != nil {
		return errnoOf(err)
	}
	qpAttrToC(a, attr)
	capToC(init.Cap, initCap)
	*sigAll = 0
	if init.SigAll {
		*sigAll = 1
	}
	return 0
}

// usb4goMcast attaches the QP to the multicast group gid (16 bytes) with
// MLID lid, or detaches it (attach 0): the kernel's ATTACH_MCAST/DETACH_MCAST,
// whose errno comes back as it is (a device without multicast, as the usb4
// module, answers EOPNOTSUPP).
//
//export usb4goMcast
func usb4goMcast(h C.uintptr_t, attach C.int, gid *C.uint8_t, lid C.uint16_t) (rc C.int) {
	verb := "attach_mcast"
	if attach == 0 {
		verb = "detach_mcast"
	}
	defer contain(verb, &rc)
	forcedPanic(verb)
	e, ok := lookup[*qpEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	g := provider.GID(*(*[16]byte)(unsafe.Pointer(gid)))
	if attach == 0 {
		return errnoOf(e.qp.DetachMcast(g, uint16(lid)))
	}
	return errnoOf(e.qp.AttachMcast(g, uint16(lid)))
}

// usb4goDestroyQP destroys the QP and reports the kernel's async event
// count; objects.c waits for the application to acknowledge as many.
//
//export usb4goDestroyQP
func usb4goDestroyQP(h C.uintptr_t, out *C.struct_usb4_event_counts) (rc C.int) {
	defer contain("destroy_qp", &rc)
	forcedPanic("destroy_qp")
	e, ok := lookup[*qpEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if srq := e.qp.InitAttr().SRQ; srq != nil && srq.Provider() {
		// The provider SRQ lends this QP nothing more: its kernel QP goes to
		// ERR and away now, while objects.c keeps the engine object until
		// later, and the kernel may give its handle to the next QP.
		e.dp.SetState(dataplane.QPStateErr)
	}
	ev, err := e.qp.DestroyWithEvents()
	if err != nil {
		return errnoOf(err)
	}
	reportDestroyed(h, ev, out)
	e.dp.Disown() // objects.c frees it after the acks, without DESTROY_QUEUE
	return 0
}

//export usb4goCreateSRQ
func usb4goCreateSRQ(h C.uintptr_t, userHandle C.uint64_t, attr *C.struct_usb4_ibv_srq_attr, out *C.struct_usb4_obj_info) (rc C.int) {
	defer contain("create_srq", &rc)
	forcedPanic("create_srq")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	srq, err := pd.CreateSRQ(provider.SRQInitAttr{MaxWR: uint32(attr.max_wr), MaxSGE: uint32(attr.max_sge),
		Limit: uint32(attr.srq_limit), UserHandle: uint64(userHandle)})
	if err != nil {
		return errnoOf(err)
	}
	ctx := pd.Context()
	granted := srq.InitAttr()
	var dp *dataplane.SRQ
	if srq.Provider() {
		// The kernel has none: the provider's, over its QPs' kernel RQs.
		dp, err = dataplane.NewProviderSRQ(nil, ctx.CmdFD(), granted.MaxWR, granted.MaxSGE, granted.Limit, uint64(userHandle))
		if err == nil && granted.Limit > 0 {
			srqLimitEvents(ctx, dp, "create_srq")
		}
	} else {
		dp, err = dataplane.NewSRQ(nil, ctx.CmdFD(), srq.Handle(), granted.MaxSGE)
	}
	if err == nil && ctx.Driver().Kind == provider.DriverRXE && !srq.Provider() {
		// (a provider SRQ on rxe, USB4VERBS_SRQ=provider: no kernel ring)
		if mi, ok := srq.RxeQueue(); !ok {
			err = unix.EPROTO
		} else {
			err = dp.AttachRxe(nil, mi.Offset, mi.Size)
		}
	}
	if err != nil {
		if dp != nil {
			dp.Close()
		}
		_ = srq.Destroy()
		return errnoOf(err)
	}
	// Report the granted sizes back, as rdma-core providers do.
	attr.max_wr = C.uint32_t(granted.MaxWR)
	attr.max_sge = C.uint32_t(granted.MaxSGE)
	dp.Join(engineDevs.of(ctx))
	out._go = C.uintptr_t(handles.add(ctx, &srqEntry{srq: srq, dp: dp}))
	out.handle = C.uint32_t(srq.Handle())
	out.eng = dp.CPtr()
	return 0
}

// srqLimitEvents gives a provider SRQ the socket its limit event goes to,
// putting the async relay at the context's async fd (provider/asyncrelay.go)
// when the first SRQ arms a limit, not before: an epoll registration follows
// the file, not the fd number, so an epoll set made before the relay keeps
// watching the kernel's file, and a process that never arms a limit (UCX's
// rc_verbs) keeps reading the kernel's events from the kernel's file.
func srqLimitEvents(ctx *provider.Context, dp *dataplane.SRQ, verb string) {
	if fd, err := ctx.ProviderEventFD(); err == nil {
		dp.SetEventFD(fd)
	} else if os.Getenv("USB4VERBS_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "libusb4_rdma: %s: no limit events for this SRQ: %v\n", verb, err)
	}
}

//export usb4goModifySRQ
func usb4goModifySRQ(h C.uintptr_t, attr *C.struct_usb4_ibv_srq_attr, mask C.int) (rc C.int) {
	defer contain("modify_srq", &rc)
	forcedPanic("modify_srq")
	e, ok := lookup[*srqEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	a := provider.SRQAttr{MaxWR: uint32(attr.max_wr), MaxSGE: uint32(attr.max_sge), Limit: uint32(attr.srq_limit)}
	if e.srq.Provider() {
		if err := e.srq.Modify(a, uint32(mask)); err != nil { // the provider's bounds
			return errnoOf(err)
		}
		if uint32(mask)&uapi.IB_SRQ_LIMIT != 0 && a.Limit > 0 {
			srqLimitEvents(e.srq.PD().Context(), e.dp, "modify_srq")
		}
		m := int(uint32(mask) & (uapi.IB_SRQ_MAX_WR | uapi.IB_SRQ_LIMIT))
		return errnoOf(e.dp.ModifyProvider(a.MaxWR, a.Limit, m))
	}
	if uint32(mask)&uapi.IB_SRQ_MAX_WR == 0 {
		return errnoOf(e.srq.Modify(a, uint32(mask)))
	}
	// A resize: rxe moves the queue to a new ring, and the posters with it.
	var modified bool
	err := e.dp.Resize(func() (uint64, uint32, error) {
		if err := e.srq.Modify(a, uint32(mask)); err != nil {
			return 0, 0, err
		}
		modified = true
		mi, _ := e.srq.RxeQueue()
		return mi.Offset, mi.Size, nil
	})
	if err != nil && modified {
		fmt.Fprintf(os.Stderr, "libusb4_rdma: modify_srq: the kernel resized SRQ %d but its new ring is unusable (%v); posting to it fails from now on\n",
			e.srq.Handle(), err)
	}
	return errnoOf(err)
}

//export usb4goQuerySRQ
func usb4goQuerySRQ(h C.uintptr_t, attr *C.struct_usb4_ibv_srq_attr) (rc C.int) {
	defer contain("query_srq", &rc)
	forcedPanic("query_srq")
	e, ok := lookup[*srqEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	a, err := e.srq.Query()
	if err != nil {
		return errnoOf(err)
	}
	if e.srq.Provider() {
		st := e.dp.Stats() // the limit reads 0 once its event fired
		a = provider.SRQAttr{MaxWR: st.MaxWR, MaxSGE: st.MaxSGE, Limit: st.Limit}
	}
	attr.max_wr = C.uint32_t(a.MaxWR)
	attr.max_sge = C.uint32_t(a.MaxSGE)
	attr.srq_limit = C.uint32_t(a.Limit)
	return 0
}

// usb4goDestroySRQ destroys the SRQ and reports the kernel's async event
// count; objects.c waits for the application to acknowledge as many.
//
//export usb4goDestroySRQ
func usb4goDestroySRQ(h C.uintptr_t, out *C.struct_usb4_event_counts) (rc C.int) {
	defer contain("destroy_srq", &rc)
	forcedPanic("destroy_srq")
	e, ok := lookup[*srqEntry](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	ev, err := e.srq.DestroyWithEvents()
	if err != nil {
		return errnoOf(err)
	}
	if e.srq.Provider() {
		// Its limit events are not waited for (objects.c: UINT32_MAX): an
		// application that never reads its async fd would hang in
		// ibv_destroy_srq (cshim/testdata/cqex.c on the bed; through rxe's
		// kernel SRQ the same program does not wait), and libibverbs'
		// wait is for equality, so a count of the events sent would hang
		// one that acked fewer. The ibv_srq stays on the context's
		// quarantine, so a late ack finds it.
		ev.Async = ^uint32(0)
	}
	reportDestroyed(h, ev, out)
	e.dp.Disown() // objects.c frees it after the acks
	return 0
}

//export usb4goCreateAH
func usb4goCreateAH(h C.uintptr_t, attr *C.struct_usb4_ibv_ah_attr, out *C.struct_usb4_obj_info) (rc C.int) {
	defer contain("create_ah", &rc)
	forcedPanic("create_ah")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	ah, err := pd.CreateAH(ahAttrFromC(attr))
	if err != nil {
		return errnoOf(err)
	}
	var ahNum uint32
	if resp := ah.DriverResp(); pd.Context().Driver().Kind == provider.DriverRXE {
		if len(resp) >= 4 {
			ahNum = binary.LittleEndian.Uint32(resp)
		}
		// Kernels before 5.14 give no AH index; the engine would then need
		// the address vector built in user space, which we do not do.
		if ahNum == 0 {
			_ = ah.Destroy()
			return C.int(unix.EOPNOTSUPP)
		}
	}
	out._go = C.uintptr_t(handles.add(pd.Context(), ah))
	out.handle = C.uint32_t(ah.Handle())
	out.num = C.uint32_t(ahNum)
	return 0
}

//export usb4goDestroyAH
func usb4goDestroyAH(h C.uintptr_t) (rc C.int) {
	defer contain("destroy_ah", &rc)
	forcedPanic("destroy_ah")
	ah, ok := lookup[*provider.AH](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if err := ah.Destroy(); err != nil {
		return errnoOf(err)
	}
	handles.remove(uintptr(h))
	return 0
}
