package main

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/provider"
)

// gpuMemory says whether GPU memory can be registered on a device: a
// dma-buf MR (ibv_reg_dmabuf_mr), which is how NCCL/RCCL, perftest
// --use_rocm/--use_cuda_dmabuf and PyTorch register GPU buffers. The answer
// is NCCL's own probe, made through our provider: a registration of length
// 0 on fd -1, which a kernel without dma-buf MRs refuses with EOPNOTSUPP
// (or EPROTONOSUPPORT) and one with them with any other errno; our provider
// answers it EOPNOTSUPP too where its one real registration of a udmabuf
// showed that the device cannot import any dma-buf (provider.DmabufImport,
// docs/dmabuf.md).
type gpuMemory struct {
	// Supported: NCCL reads the probe as "dma-buf MRs register" (it was not
	// EOPNOTSUPP/EPROTONOSUPPORT).
	Supported bool `json:"supported"`
	// State: "registers" (a real dma-buf registered), "cannot import" (a
	// real one was refused: the probe says EOPNOTSUPP), "not offered" (the
	// kernel has no dma-buf MRs for the device), "unverified" (the kernel
	// says supported, no real registration could be tried), "" not probed.
	State string `json:"state,omitempty"`
	// Import says how the provider's real registration went (or why it was
	// not made).
	Import string `json:"import,omitempty"`
	// Probe is the probe's errno name (EINVAL, EOPNOTSUPP, ...), or the error.
	Probe string `json:"probe"`
	// GPUDirect is the module's gpu_direct parameter (auto, on, off), where
	// the build has it (pleite-main with tbv_gpu_direct=1).
	GPUDirect string `json:"gpu_direct,omitempty"`
	// Moves says which transfers carry bytes through a registered dma-buf
	// MR, where the module tells (gpuMoves): "write source" or "none"; ""
	// where it does not tell or nothing registers.
	Moves string `json:"moves,omitempty"`
	// Note says why, in words.
	Note string `json:"note"`
}

// gpuDirectParam is thunderbolt_ibverbs' gpu_direct parameter, "" when the
// module is not loaded or was built without it.
func gpuDirectParam(s *sysinfo.System) string {
	return s.Module("thunderbolt_ibverbs").Parameters["gpu_direct"]
}

// zcopyParam is the thunderbolt_ibverbs parameter that moves bytes out of
// a dma-buf MR: hellas-gda-v2 declares it (kernel/ibdev.c:108-111,
// "Experimental: allow native RDMA WRITE raw zcopy from dma-buf MRs using
// pre-mapped DMA addresses"), and with it and zcopy_min_bytes > 0 its send
// path streams an RDMA WRITE's or WRITE_WITH_IMM's dma-buf source from the
// exporter's DMA addresses (kernel/ibdev.c:4623-4672). Every other transfer
// of that module copies with the CPU through the umem's orig_nents, which a
// dma-buf umem leaves 0 (kernel/ibdev.c:4095 send, :6739 receive, :8593
// READ responder), so it fails. Seen on the bed (tests/usb4/dmabuf.c --zcopy,
// docs/dmabuf.md): WRITE and WRITE_WITH_IMM from vgem and udmabuf buffers
// move with native_p2p_zcopy=1 zcopy_min_bytes=4096, a dma-buf target,
// SEND and READ fail, through our provider and the module's C provider.
const zcopyParam = "native_p2p_zcopy"

// gpuMoves says which transfers move bytes through a dma-buf MR that
// registers, from the module's parameters: "write source" (zcopyParam on
// and zcopy_min_bytes > 0), "none" (the module has zcopyParam, off), or ""
// (a module without it: not known).
func gpuMoves(params map[string]string) string {
	v, has := params[zcopyParam]
	if !has {
		return ""
	}
	zmin := strings.TrimSpace(params["zcopy_min_bytes"])
	if (v == "Y" || v == "1") && zmin != "" && zmin != "0" {
		return "write source"
	}
	return "none"
}

// movesNote says what gpuMoves' answer means, with the parameters.
func movesNote(moves string, params map[string]string) string {
	now := zcopyParam + "=" + params[zcopyParam] + " zcopy_min_bytes=" + params["zcopy_min_bytes"]
	switch moves {
	case "write source":
		return "bytes move only out of GPU memory, as the source of an RDMA WRITE or WRITE_WITH_IMM of at least zcopy_min_bytes (" + now +
			"); into GPU memory, and by SEND or READ, transfers fail"
	case "none":
		return "no transfer moves bytes through it with " + now + "; " + zcopyParam + "=1 zcopy_min_bytes=4096 (writable in /sys/module/thunderbolt_ibverbs/parameters) " +
			"moves RDMA WRITE and WRITE_WITH_IMM out of GPU memory; into GPU memory, and by SEND or READ, transfers fail"
	}
	return ""
}

// probeGPUMemory runs NCCL's dma-buf probe on an open context; params are
// thunderbolt_ibverbs' parameters (for a usb4 device).
func probeGPUMemory(ctx *provider.Context, usb4 bool, params map[string]string) gpuMemory {
	g := gpuMemory{}
	if usb4 {
		g.GPUDirect = params["gpu_direct"]
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		g.Probe = "alloc_pd: " + err.Error()
		g.Note = "not probed"
		return g
	}
	defer pd.Destroy()
	mr, err := pd.RegDmabufMR(0, 0, 0, -1, 0)
	if err == nil {
		_ = mr.Destroy()
		g.Supported, g.Probe = true, "registered"
		g.Note = "dma-buf MRs register"
		return g
	}
	var no unix.Errno
	if !errors.As(err, &no) {
		g.Probe = err.Error()
		g.Note = "not probed"
		return g
	}
	g.Probe = errnoName(no)
	g.Supported = no != unix.EOPNOTSUPP && no != unix.EPROTONOSUPPORT
	imp := ctx.DmabufImport()
	g.State, g.Import = gpuState(g.Supported, imp.State), imp.Why
	if usb4 && g.State == "registers" {
		g.Moves = gpuMoves(params)
	}
	g.Note = gpuNote(g, usb4)
	if m := movesNote(g.Moves, params); m != "" {
		g.Note += "; " + m
	}
	return g
}

// gpuState names what the probe and the provider's import attempt showed.
func gpuState(supported bool, imp provider.DmabufImportState) string {
	switch {
	case imp == provider.DmabufImportRefused:
		return "cannot import"
	case !supported:
		return "not offered"
	case imp == provider.DmabufImportWorks:
		return "registers"
	}
	return "unverified"
}

// gpuNote explains a probe's answer.
func gpuNote(g gpuMemory, usb4 bool) string {
	switch {
	case g.State == "cannot import":
		return "the device cannot import a dma-buf: " + g.Import + "; so NCCL's probe answers EOPNOTSUPP and NCCL stages GPU buffers through host memory"
	case g.State == "unverified":
		return "the kernel accepts dma-buf MRs (probe " + g.Probe + "), but no real registration was tried: " + g.Import
	case g.Supported:
		return "dma-buf MRs register (" + g.Import + "; the kernel checked the probe's arguments: " + g.Probe + ")"
	case usb4 && g.GPUDirect == "off":
		return "thunderbolt_ibverbs was loaded with gpu_direct=off"
	case usb4 && g.GPUDirect != "":
		return "thunderbolt_ibverbs refuses dma-buf MRs although gpu_direct=" + g.GPUDirect
	case usb4:
		return "this build of thunderbolt_ibverbs has no reg_user_mr_dmabuf"
	}
	return "the kernel driver has no reg_user_mr_dmabuf"
}

// gpuText is the one-line summary ibvinfo prints per device.
func gpuText(g *gpuMemory) string {
	if g == nil {
		return "-"
	}
	yes := g.State
	switch {
	case yes != "":
	case g.Supported:
		yes = "yes"
	default:
		yes = "no"
	}
	extra := ""
	if g.GPUDirect != "" {
		extra = ", gpu_direct=" + g.GPUDirect
	}
	switch g.Moves {
	case "write source":
		yes += ", moves: WRITE from it"
	case "none":
		yes += ", moves: nothing"
	}
	return fmt.Sprintf("%s (probe %s%s)", yes, g.Probe, extra)
}

// gpuFix names what turns GPU memory on for a usb4 module that refuses it.
func gpuFix(gpuDirect string) string {
	if gpuDirect != "" {
		return "reload thunderbolt_ibverbs with gpu_direct=on (modprobe -r thunderbolt_ibverbs; " +
			"modprobe thunderbolt_ibverbs gpu_direct=on <your other parameters>)"
	}
	return "rebuild thunderbolt_ibverbs with GPU-direct compiled in (pleite-main: make tbv_gpu_direct=1) " +
		"and load it with gpu_direct=on"
}

// probeGPULive probes the named devices on the live system (doctor).
var probeGPULive = func(s *sysinfo.System, names []string) map[string]gpuMemory {
	out := map[string]gpuMemory{}
	for _, n := range names {
		ctx, err := provider.Open(n)
		if err != nil {
			out[n] = gpuMemory{Probe: "open: " + err.Error(), Note: "not probed"}
			continue
		}
		out[n] = probeGPUMemory(ctx, true, s.Module("thunderbolt_ibverbs").Parameters)
		_ = ctx.Close()
	}
	return out
}

// checkGPUMemory: can GPU memory (dma-buf MRs) be registered on the usb4
// devices? Live, NCCL's probe through our provider on each device decides;
// in a captured tree only gpu_direct=off is known to refuse.
func checkGPUMemory(e doctorEnv) check {
	const id = "gpu-memory"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	param := gpuDirectParam(s)
	devs := usb4Devices(s)
	if e.gpu == nil {
		if param == "off" {
			return warn(id, "thunderbolt_ibverbs was loaded with gpu_direct=off: GPU memory (dma-buf MRs) is refused", gpuFix(param))
		}
		what := "no gpu_direct parameter"
		if param != "" {
			what = "gpu_direct=" + param
		}
		return skip(id, "not probed in a captured tree ("+what+")")
	}
	if len(devs) == 0 {
		return skip(id, "no usb4 device to probe")
	}
	var yes, no, unknown, cannot, unverified, limited []string
	moves := ""
	note, cannotWhy := "", ""
	for _, d := range devs {
		g, ok := e.gpu[d.Name]
		switch {
		case !ok || g.Note == "not probed":
			unknown = append(unknown, d.Name+" ("+g.Probe+")")
		case g.State == "cannot import":
			cannot = append(cannot, d.Name)
			cannotWhy = g.Import
		case g.State == "unverified":
			unverified = append(unverified, d.Name)
			yes = append(yes, d.Name)
		case g.Supported:
			yes = append(yes, d.Name)
			if g.Moves != "" {
				limited = append(limited, d.Name)
				moves = g.Moves
			}
		default:
			no = append(no, d.Name)
			note = g.Note
		}
	}
	switch {
	case len(cannot) > 0:
		return warn(id, fmt.Sprintf("GPU memory (dma-buf MRs) cannot be imported on %s: %s; NCCL's dma-buf probe answers EOPNOTSUPP there, "+
			"so NCCL, RCCL and perftest stage GPU buffers through host memory", strings.Join(cannot, ", "), cannotWhy),
			"no module parameter turns the import on: the module registers its ib_device without a DMA device "+
				"(ib_register_device(..., NULL)); a build that passes its ring's DMA device imports dma-bufs (hellas-gda-v2 does)")
	case len(unverified) > 0:
		return warn(id, fmt.Sprintf("the kernel accepts dma-buf MRs on %s (NCCL's probe says supported), but no real dma-buf registration could be tried (%s): "+
			"on a module without a DMA device every GPU-buffer registration then fails with EINVAL", strings.Join(unverified, ", "), e.gpu[unverified[0]].Import),
			"if NCCL/RCCL fail registering GPU buffers (ibv_reg_dmabuf_mr: EINVAL), run them with NCCL_DMABUF_ENABLE=0 "+
				"(or NCCL_NET_GDR_LEVEL=LOC) so they stage through host memory; or let the provider try one registration: "+
				"give the user read-write access to /dev/udmabuf (modprobe udmabuf) and leave USB4VERBS_DMABUF_PROBE unset")
	case len(no) > 0:
		return warn(id, fmt.Sprintf("GPU memory (dma-buf MRs) is refused on %s: %s (NCCL, RCCL and perftest fall back to host memory)",
			strings.Join(no, ", "), note), gpuFix(param))
	case len(yes) == 0:
		return skip(id, "could not probe: "+strings.Join(unknown, ", "))
	case len(limited) > 0:
		return warn(id, fmt.Sprintf("GPU memory (dma-buf MRs) registers on %s, but %s: NCCL and RCCL with GPU Direct receive into GPU memory, so their first receive fails",
			strings.Join(limited, ", "), movesNote(moves, s.Module("thunderbolt_ibverbs").Parameters)),
			"run NCCL/RCCL with NCCL_NET_GDR_LEVEL=LOC (or NCCL_DMABUF_ENABLE=0) so they stage GPU buffers through host memory")
	}
	msg := "GPU memory (dma-buf MRs) registers on " + strings.Join(yes, ", ")
	if param != "" {
		msg += " (gpu_direct=" + param + ")"
	}
	if len(unknown) > 0 {
		msg += "; not probed: " + strings.Join(unknown, ", ")
	}
	return ok(id, msg)
}

// errnoName names an errno as rdma-core's users know it: 95 is EOPNOTSUPP
// (Go's table says ENOTSUP, the same value on Linux).
func errnoName(no unix.Errno) string {
	if no == unix.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	if n := unix.ErrnoName(no); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(no))
}
