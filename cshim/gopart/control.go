package main

/*
#include <stdint.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
)

// errnoOf turns a provider error into the positive errno libibverbs callers
// expect; errors without one become EIO.
func errnoOf(err error) C.int {
	if err == nil {
		return 0
	}
	var no unix.Errno
	if errors.As(err, &no) && no != 0 {
		return C.int(no)
	}
	return C.int(unix.EIO)
}

var memlockHintOnce sync.Once

// memlockHint prints, once per process, why a registration failed when the
// kernel's pinning limit is the likely cause: ENOMEM or EPERM under a finite
// RLIMIT_MEMLOCK. The application only sees the errno (ibv_rc_pingpong:
// "Couldn't register MR"); a container started without --ulimit memlock=-1
// has the engine's small default.
func memlockHint(length uint64, err error) {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) {
		return
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) != nil || rl.Cur == unix.RLIM_INFINITY {
		return
	}
	no := unix.ENOMEM
	if errors.Is(err, unix.EPERM) {
		no = unix.EPERM
	}
	memlockHintOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "libusb4_rdma: reg_mr of %d bytes: %s: the memlock limit is %d KiB; raise it (ulimit -l unlimited; containers: --ulimit memlock=-1 --cap-add=IPC_LOCK)\n",
			length, unix.ErrnoName(no), rl.Cur>>10)
	})
}

var netpollerOnce sync.Once

// startNetpoller makes the Go runtime open its netpoller (an epoll fd and an
// eventfd) now, on the first context open, instead of whenever its first
// timer is armed: the background scavenger arms one after the heap shrinks,
// which under open/close churn happened after about a thousand cycles and
// made the process's fd count move long after start. Adding any timer to the
// runtime's heap initialises the poller (runtime/time.go, addHeap); the timer
// itself is stopped at once.
func startNetpoller() {
	time.AfterFunc(time.Hour, func() {}).Stop()
}

// knownDevice is the device as libibverbs and match.c identified it; false
// for a kind match.c never claims.
func knownDevice(name *C.char, kind C.int, driverID C.uint32_t, nodeGUID C.uint64_t) (provider.KnownDevice, bool) {
	dev := provider.KnownDevice{Name: C.GoString(name), NodeGUID: uint64(nodeGUID), DriverID: uint32(driverID)}
	switch kind {
	case C.USB4_KIND_RXE:
		dev.Kind = provider.DriverRXE
	case C.USB4_KIND_USB4:
		dev.Kind = provider.DriverUSB4
	default:
		return dev, false
	}
	return dev, true
}

// usb4goOpenContext creates the kernel ucontext on libibverbs' command fd,
// on the application's thread, for the device libibverbs and match.c
// identified. The fd, and the async fd the context allocates, stay
// libibverbs': it closes both in verbs_uninit_context.
//
//export usb4goOpenContext
func usb4goOpenContext(name *C.char, cmdFD C.int, kind C.int, driverID C.uint32_t, nodeGUID C.uint64_t,
	info *C.struct_usb4_open_info) (rc C.int) {
	defer contain("open_context", &rc)
	forcedPanic("open_context")
	netpollerOnce.Do(startNetpoller)
	dev, ok := knownDevice(name, kind, driverID, nodeGUID)
	if !ok {
		return C.int(unix.ENODEV) // match.c claims nothing else
	}
	// libibverbs resolved the device already: no second lookup per open.
	ctx, err := provider.OpenFDKnown(dev, int(cmdFD))
	if err != nil {
		return errnoOf(err)
	}
	if err := openEngineDev(ctx); err != nil {
		_ = ctx.Close()
		return errnoOf(err)
	}
	info.handle = C.uintptr_t(handles.add(nil, ctx))
	info.async_fd = C.int(ctx.AsyncFD())
	info.num_comp_vectors = C.uint32_t(ctx.NumCompVectors())
	info.core_support = C.uint64_t(ctx.CoreSupport())
	return 0
}

// usb4goAdoptContext makes a Go context of this image for a context a
// fork() parent opened (issue 24): the kernel ucontext on cmdFD exists and is
// shared with the parent; libibverbs keeps cmdFD and asyncFD.
//
//export usb4goAdoptContext
func usb4goAdoptContext(name *C.char, cmdFD, asyncFD C.int, kind C.int, driverID C.uint32_t, nodeGUID C.uint64_t,
	numCompVectors C.uint32_t, coreSupport C.uint64_t, handle *C.uintptr_t) (rc C.int) {
	defer contain("adopt_context", &rc)
	forcedPanic("adopt_context")
	netpollerOnce.Do(startNetpoller)
	dev, ok := knownDevice(name, kind, driverID, nodeGUID)
	if !ok {
		return C.int(unix.ENODEV)
	}
	ctx, err := provider.AdoptFDKnown(dev, int(cmdFD), int(asyncFD), uint32(numCompVectors), uint64(coreSupport))
	if err != nil {
		return errnoOf(err)
	}
	if err := openEngineDev(ctx); err != nil {
		_ = ctx.Close()
		return errnoOf(err)
	}
	*handle = C.uintptr_t(handles.add(nil, ctx))
	return 0
}

//export usb4goCloseContext
func usb4goCloseContext(h C.uintptr_t) {
	defer contain("close_context", nil)
	forcedPanic("close_context")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return
	}
	closeContext(ctx) // destroys leftovers; libibverbs' close has no error path
	handles.remove(uintptr(h))
}

//export usb4goQueryDevice
func usb4goQueryDevice(h C.uintptr_t, attr *C.struct_usb4_device_attr, ext *C.struct_usb4_device_attr_ext) (rc C.int) {
	defer contain("query_device", &rc)
	forcedPanic("query_device")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	a, err := ctx.QueryDevice()
	if err != nil {
		return errnoOf(err)
	}
	fw := fmt.Sprintf("%d.%d.%d", a.FWVer>>32, (a.FWVer>>16)&0xffff, a.FWVer&0xffff)
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&attr.fw_ver[0])), len(attr.fw_ver))
	copy(dst[:len(dst)-1], fw)
	// ibv_device_attr carries the GUIDs in network order.
	attr.node_guid = C.uint64_t(bits.ReverseBytes64(a.NodeGUID))
	attr.sys_image_guid = C.uint64_t(bits.ReverseBytes64(a.SysImageGUID))
	attr.max_mr_size = C.uint64_t(a.MaxMRSize)
	attr.page_size_cap = C.uint64_t(a.PageSizeCap)
	attr.vendor_id = C.uint32_t(a.VendorID)
	attr.vendor_part_id = C.uint32_t(a.VendorPartID)
	attr.hw_ver = C.uint32_t(a.HWVer)
	attr.max_qp = clampInt(a.MaxQP)
	attr.max_qp_wr = clampInt(a.MaxQPWR)
	attr.device_cap_flags = C.uint32_t(uint32(a.DeviceCapFlags))
	attr.max_sge = clampInt(a.MaxSGE)
	attr.max_sge_rd = clampInt(a.MaxSGERd)
	attr.max_cq = clampInt(a.MaxCQ)
	attr.max_cqe = clampInt(a.MaxCQE)
	attr.max_mr = clampInt(a.MaxMR)
	attr.max_pd = clampInt(a.MaxPD)
	attr.max_qp_rd_atom = clampInt(a.MaxQPRdAtom)
	attr.max_ee_rd_atom = clampInt(a.MaxEERdAtom)
	attr.max_res_rd_atom = clampInt(a.MaxResRdAtom)
	attr.max_qp_init_rd_atom = clampInt(a.MaxQPInitRdAtom)
	attr.max_ee_init_rd_atom = clampInt(a.MaxEEInitRdAtom)
	attr.atomic_cap = C.uint32_t(a.AtomicCap)
	attr.max_ee = clampInt(a.MaxEE)
	attr.max_rdd = clampInt(a.MaxRDD)
	attr.max_mw = clampInt(a.MaxMW)
	attr.max_raw_ipv6_qp = clampInt(a.MaxRawIPv6QP)
	attr.max_raw_ethy_qp = clampInt(a.MaxRawEthyQP)
	attr.max_mcast_grp = clampInt(a.MaxMcastGrp)
	attr.max_mcast_qp_attach = clampInt(a.MaxMcastQPAttach)
	attr.max_total_mcast_qp_attach = clampInt(a.MaxTotalMcastQPAttach)
	attr.max_ah = clampInt(a.MaxAH)
	attr.max_fmr = clampInt(a.MaxFMR)
	attr.max_map_per_fmr = clampInt(a.MaxMapPerFMR)
	attr.max_srq = clampInt(a.MaxSRQ)
	attr.max_srq_wr = clampInt(a.MaxSRQWR)
	attr.max_srq_sge = clampInt(a.MaxSRQSGE)
	attr.max_pkeys = C.uint16_t(a.MaxPkeys)
	attr.local_ca_ack_delay = C.uint8_t(a.LocalCAAckDelay)
	attr.phys_port_cnt = C.uint8_t(a.PhysPortCnt)
	// The extended response's members; zero where the kernel's
	// response_length stopped short (provider.QueryDevice).
	ext.cap_flags_ex = C.uint64_t(a.DeviceCapFlags)
	ext.odp_general_caps = C.uint64_t(a.ODPCaps.GeneralCaps)
	ext.odp_rc_caps = C.uint32_t(a.ODPCaps.RCCaps)
	ext.odp_uc_caps = C.uint32_t(a.ODPCaps.UCCaps)
	ext.odp_ud_caps = C.uint32_t(a.ODPCaps.UDCaps)
	ext.xrc_odp_caps = C.uint32_t(a.ODPCaps.XRCCaps)
	ext.timestamp_mask = C.uint64_t(a.TimestampMask)
	ext.hca_core_clock = C.uint64_t(a.HCACoreClock)
	ext.rss_supported_qpts = C.uint32_t(a.RSSCaps.SupportedQPTs)
	ext.rss_max_rwq_indirection_tables = C.uint32_t(a.RSSCaps.MaxRWQIndirectionTables)
	ext.rss_max_rwq_indirection_table_size = C.uint32_t(a.RSSCaps.MaxRWQIndirectionTableSize)
	ext.max_wq_type_rq = C.uint32_t(a.MaxWQTypeRQ)
	ext.raw_packet_caps = C.uint32_t(a.RawPacketCaps)
	ext.tm_max_rndv_hdr_size = C.uint32_t(a.TMCaps.MaxRndvHdrSize)
	ext.tm_max_num_tags = C.uint32_t(a.TMCaps.MaxNumTags)
	ext.tm_flags = C.uint32_t(a.TMCaps.Flags)
	ext.tm_max_ops = C.uint32_t(a.TMCaps.MaxOps)
	ext.tm_max_sge = C.uint32_t(a.TMCaps.MaxSGE)
	ext.max_cq_moderation_count = C.uint16_t(a.MaxCQModeration)
	ext.max_cq_moderation_period = C.uint16_t(a.MaxCQModPeriod)
	ext.max_dm_size = C.uint64_t(a.MaxDMSize)
	return 0
}

// clampInt maps a kernel u32 limit onto ibv_device_attr's int fields.
func clampInt(v uint32) C.int32_t {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return C.int32_t(v)
}

//export usb4goQueryPort
func usb4goQueryPort(h C.uintptr_t, port C.uint8_t, attr *C.struct_usb4_port_attr) (rc C.int) {
	defer contain("query_port", &rc)
	forcedPanic("query_port")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	p, err := ctx.QueryPort(uint8(port))
	if err != nil {
		return errnoOf(err)
	}
	attr.state = C.uint32_t(p.State)
	attr.max_mtu = C.uint32_t(p.MaxMTU)
	attr.active_mtu = C.uint32_t(p.ActiveMTU)
	attr.gid_tbl_len = clampInt(p.GIDTblLen)
	attr.port_cap_flags = C.uint32_t(p.PortCapFlags)
	attr.max_msg_sz = C.uint32_t(p.MaxMsgSz)
	attr.bad_pkey_cntr = C.uint32_t(p.BadPkeyCntr)
	attr.qkey_viol_cntr = C.uint32_t(p.QkeyViolCntr)
	attr.pkey_tbl_len = C.uint16_t(p.PkeyTblLen)
	attr.lid = C.uint16_t(p.LID)
	attr.sm_lid = C.uint16_t(p.SMLID)
	attr.lmc = C.uint8_t(p.LMC)
	attr.max_vl_num = C.uint8_t(p.MaxVLNum)
	attr.sm_sl = C.uint8_t(p.SMSL)
	attr.subnet_timeout = C.uint8_t(p.SubnetTimeout)
	attr.init_type_reply = C.uint8_t(p.InitTypeReply)
	attr.active_width = C.uint8_t(p.ActiveWidth)
	attr.active_speed = C.uint8_t(p.ActiveSpeed)
	attr.phys_state = C.uint8_t(p.PhysState)
	attr.link_layer = C.uint8_t(p.LinkLayer)
	attr.flags = C.uint8_t(p.Flags)
	attr.port_cap_flags2 = C.uint16_t(p.PortCapFlags2)
	return 0
}

//export usb4goAllocPD
func usb4goAllocPD(h C.uintptr_t, pdOut *C.uintptr_t, pdHandle *C.uint32_t) (rc C.int) {
	defer contain("alloc_pd", &rc)
	forcedPanic("alloc_pd")
	ctx, ok := lookup[*provider.Context](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return errnoOf(err)
	}
	*pdOut = C.uintptr_t(handles.add(ctx, pd))
	*pdHandle = C.uint32_t(pd.Handle())
	return 0
}

//export usb4goDeallocPD
func usb4goDeallocPD(h C.uintptr_t) (rc C.int) {
	defer contain("dealloc_pd", &rc)
	forcedPanic("dealloc_pd")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if err := pd.Destroy(); err != nil {
		return errnoOf(err)
	}
	handles.remove(uintptr(h))
	return 0
}

//export usb4goRegMR
func usb4goRegMR(h C.uintptr_t, addr C.uintptr_t, length, iova C.uint64_t, access C.uint32_t,
	mrOut *C.uintptr_t, mrHandle, lkey, rkey *C.uint32_t) (rc C.int) {
	defer contain("reg_mr", &rc)
	forcedPanic("reg_mr")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	mr, err := pd.RegMR(uintptr(addr), uint64(length), uint64(iova), uint32(access))
	if err != nil {
		memlockHint(uint64(length), err)
		return errnoOf(err)
	}
	*mrOut = C.uintptr_t(handles.add(pd.Context(), mr))
	*mrHandle = C.uint32_t(mr.Handle())
	*lkey = C.uint32_t(mr.LKey())
	*rkey = C.uint32_t(mr.RKey())
	return 0
}

//export usb4goRegDmabufMR
func usb4goRegDmabufMR(h C.uintptr_t, offset, length, iova C.uint64_t, fd C.int, access C.uint32_t,
	mrOut *C.uintptr_t, mrHandle, lkey, rkey *C.uint32_t) (rc C.int) {
	defer contain("reg_dmabuf_mr", &rc)
	forcedPanic("reg_dmabuf_mr")
	pd, ok := lookup[*provider.PD](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	mr, err := pd.RegDmabufMR(uint64(offset), uint64(length), uint64(iova), int(fd), uint32(access))
	if err != nil {
		return errnoOf(err)
	}
	*mrOut = C.uintptr_t(handles.add(pd.Context(), mr))
	*mrHandle = C.uint32_t(mr.Handle())
	*lkey = C.uint32_t(mr.LKey())
	*rkey = C.uint32_t(mr.RKey())
	return 0
}

//export usb4goDeregMR
func usb4goDeregMR(h C.uintptr_t) (rc C.int) {
	defer contain("dereg_mr", &rc)
	forcedPanic("dereg_mr")
	mr, ok := lookup[*provider.MR](h)
	if !ok {
		return C.int(unix.EBADF)
	}
	if err := mr.Destroy(); err != nil {
		return errnoOf(err)
	}
	handles.remove(uintptr(h))
	return 0
}
