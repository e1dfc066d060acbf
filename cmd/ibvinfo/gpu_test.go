package main

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/provider"
)

// gpuSys is a system with two usb4 devices and thunderbolt_ibverbs loaded
// with the given gpu_direct parameter ("" for a build without it).
func gpuSys(param string) *sysinfo.System {
	m := sysinfo.Module{Name: "thunderbolt_ibverbs", Loaded: true, Parameters: map[string]string{"register_verbs": "1"}}
	if param != "" {
		m.Parameters["gpu_direct"] = param
	}
	return &sysinfo.System{
		Modules: []sysinfo.Module{m},
		Devices: []sysinfo.Device{{Name: "usb4_rdma0", USB4: &sysinfo.USB4Identity{}}, {Name: "usb4_rdma5", USB4: &sysinfo.USB4Identity{}}},
	}
}

// TestGPUMemoryCheckLive: doctor's gpu-memory check on the probe's answers
// (NCCL's: EOPNOTSUPP/EPROTONOSUPPORT mean unsupported, anything else
// supported), with the fix naming the module parameter where the build has
// it and the rebuild where it does not.
func TestGPUMemoryCheckLive(t *testing.T) {
	refused := func(param string) gpuMemory {
		g := gpuMemory{Probe: "EOPNOTSUPP", GPUDirect: param}
		g.Note = gpuNote(g, true)
		return g
	}
	supported := gpuMemory{Supported: true, Probe: "EINVAL", GPUDirect: "on"}
	supported.Note = gpuNote(supported, true)
	cases := []struct {
		name, param string
		gpu         map[string]gpuMemory
		verdict     string
		msg, fix    string
	}{
		{"pleite-main gpu_direct=on", "on", map[string]gpuMemory{"usb4_rdma0": supported, "usb4_rdma5": supported},
			verdictOK, "registers on usb4_rdma0, usb4_rdma5 (gpu_direct=on)", ""},
		{"pleite-main gpu_direct=off", "off", map[string]gpuMemory{"usb4_rdma0": refused("off"), "usb4_rdma5": refused("off")},
			verdictWarn, "loaded with gpu_direct=off", "gpu_direct=on"},
		{"hellas-main (no op)", "", map[string]gpuMemory{"usb4_rdma0": refused(""), "usb4_rdma5": refused("")},
			verdictWarn, "has no reg_user_mr_dmabuf", "make tbv_gpu_direct=1"},
		{"one device not probed", "", map[string]gpuMemory{"usb4_rdma0": supported, "usb4_rdma5": {Probe: "open: EBUSY", Note: "not probed"}},
			verdictOK, "not probed: usb4_rdma5 (open: EBUSY)", ""},
		{"none probed", "", map[string]gpuMemory{}, verdictSkip, "could not probe", ""},
	}
	for _, c := range cases {
		got := checkGPUMemory(doctorEnv{sys: gpuSys(c.param), gpu: c.gpu})
		if got.ID != "gpu-memory" || got.Verdict != c.verdict || !strings.Contains(got.Message, c.msg) ||
			!strings.Contains(got.Fix, c.fix) || (c.fix == "") != (got.Fix == "") {
			t.Errorf("%s: %+v, want verdict %s, message with %q, fix with %q", c.name, got, c.verdict, c.msg, c.fix)
		}
	}
	// Captured tree (no probe): only gpu_direct=off is known to refuse.
	if got := checkGPUMemory(doctorEnv{sys: gpuSys("off")}); got.Verdict != verdictWarn || !strings.Contains(got.Fix, "gpu_direct=on") {
		t.Errorf("captured gpu_direct=off: %+v", got)
	}
	if got := checkGPUMemory(doctorEnv{sys: gpuSys("")}); got.Verdict != verdictSkip {
		t.Errorf("captured, no parameter: %+v", got)
	}
	if got := checkGPUMemory(doctorEnv{sys: &sysinfo.System{}}); got.Verdict != verdictSkip {
		t.Errorf("no usb4: %+v", got)
	}
}

func TestGPUText(t *testing.T) {
	g := gpuMemory{Supported: true, Probe: "EINVAL", GPUDirect: "on"}
	if s := gpuText(&g); s != "yes (probe EINVAL, gpu_direct=on)" {
		t.Errorf("gpuText %q", s)
	}
	g = gpuMemory{Probe: "EOPNOTSUPP"}
	if s := gpuText(&g); s != "no (probe EOPNOTSUPP)" {
		t.Errorf("gpuText %q", s)
	}
	if n := gpuNote(g, false); !strings.Contains(n, "kernel driver has no reg_user_mr_dmabuf") {
		t.Errorf("rxe note %q", n)
	}
}

// TestErrnoName: the bed showed "ENOTSUP" for hellas-main's answer; users
// and docs/dmabuf.md call 95 EOPNOTSUPP.
func TestErrnoName(t *testing.T) {
	for no, want := range map[unix.Errno]string{unix.EOPNOTSUPP: "EOPNOTSUPP", unix.EINVAL: "EINVAL", unix.EBADF: "EBADF"} {
		if got := errnoName(no); got != want {
			t.Errorf("errnoName(%d) = %q, want %q", int(no), got, want)
		}
	}
}

// TestGPUMemoryImportStates (issue 33 item 2): per device, "GPU memory:
// registers / cannot import (why) / not offered", and doctor's advice where
// the provider could not establish the import (the kernel's EINVAL stands:
// NCCL_DMABUF_ENABLE=0) or established that it cannot import.
func TestGPUMemoryImportStates(t *testing.T) {
	mk := func(supported bool, probe string, imp provider.DmabufImportState, why string) gpuMemory {
		g := gpuMemory{Supported: supported, Probe: probe, Import: why}
		g.State = gpuState(supported, imp)
		g.Note = gpuNote(g, true)
		return g
	}
	cannot := mk(false, "EOPNOTSUPP", provider.DmabufImportRefused, "a well-formed registration of a 4096-byte udmabuf was refused with EINVAL")
	registers := mk(true, "EINVAL", provider.DmabufImportWorks, "a 4096-byte udmabuf registered")
	unverified := mk(true, "EINVAL", provider.DmabufImportUnknown, "not tried (no dma-buf to try with: /dev/udmabuf: permission denied)")
	notOffered := mk(false, "EOPNOTSUPP", provider.DmabufImportNotOffered, "the kernel has no dma-buf MRs")
	for g, want := range map[*gpuMemory]string{&cannot: "cannot import (probe EOPNOTSUPP)", &registers: "registers (probe EINVAL)",
		&unverified: "unverified (probe EINVAL)", &notOffered: "not offered (probe EOPNOTSUPP)"} {
		if s := gpuText(g); s != want {
			t.Errorf("gpuText %q, want %q", s, want)
		}
	}
	if !strings.Contains(cannot.Note, "refused with EINVAL") || !strings.Contains(cannot.Note, "EOPNOTSUPP") {
		t.Errorf("cannot-import note %q", cannot.Note)
	}
	for _, c := range []struct {
		name     string
		gpu      map[string]gpuMemory
		verdict  string
		msg, fix string
	}{
		{"pleite (no DMA device)", map[string]gpuMemory{"usb4_rdma0": cannot, "usb4_rdma5": cannot}, verdictWarn,
			"cannot be imported on usb4_rdma0, usb4_rdma5", "without a DMA device"},
		{"hellas-gda-v2", map[string]gpuMemory{"usb4_rdma0": registers, "usb4_rdma5": registers}, verdictOK, "registers on usb4_rdma0, usb4_rdma5", ""},
		{"not verified", map[string]gpuMemory{"usb4_rdma0": unverified, "usb4_rdma5": registers}, verdictWarn,
			"no real dma-buf registration could be tried (not tried", "NCCL_DMABUF_ENABLE=0"},
	} {
		got := checkGPUMemory(doctorEnv{sys: gpuSys(""), gpu: c.gpu})
		if got.Verdict != c.verdict || !strings.Contains(got.Message, c.msg) || !strings.Contains(got.Fix, c.fix) || (c.fix == "") != (got.Fix == "") {
			t.Errorf("%s: %+v, want verdict %s, message with %q, fix with %q", c.name, got, c.verdict, c.msg, c.fix)
		}
	}
}

// TestGPUMoves: which transfers move through a registered dma-buf MR, from
// the module's parameters (hellas-gda-v2's native_p2p_zcopy, seen on the
// bed: docs/dmabuf.md), and doctor's warning where GPU memory registers but
// cannot be received into.
func TestGPUMoves(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"register_verbs": "1"}, ""},
		{map[string]string{zcopyParam: "N", "zcopy_min_bytes": "0"}, "none"},
		{map[string]string{zcopyParam: "Y", "zcopy_min_bytes": "0"}, "none"},
		{map[string]string{zcopyParam: "N", "zcopy_min_bytes": "4096"}, "none"},
		{map[string]string{zcopyParam: "Y", "zcopy_min_bytes": "4096"}, "write source"},
	} {
		if got := gpuMoves(c.params); got != c.want {
			t.Errorf("%v: %q, want %q", c.params, got, c.want)
		}
	}
	if n := movesNote("none", map[string]string{zcopyParam: "N", "zcopy_min_bytes": "0"}); !strings.Contains(n, "native_p2p_zcopy=1 zcopy_min_bytes=4096") {
		t.Errorf("none: %q", n)
	}
	g := gpuMemory{Supported: true, State: "registers", Probe: "EINVAL", Moves: "write source"}
	if got := gpuText(&g); got != "registers, moves: WRITE from it (probe EINVAL)" {
		t.Errorf("gpuText: %q", got)
	}
	sys := gpuSys("")
	sys.Modules[0].Parameters[zcopyParam] = "Y"
	sys.Modules[0].Parameters["zcopy_min_bytes"] = "4096"
	got := checkGPUMemory(doctorEnv{sys: sys, gpu: map[string]gpuMemory{"usb4_rdma0": g, "usb4_rdma5": g}})
	if got.Verdict != verdictWarn || !strings.Contains(got.Message, "into GPU memory, and by SEND or READ, transfers fail") ||
		!strings.Contains(got.Fix, "NCCL_NET_GDR_LEVEL=LOC") {
		t.Errorf("doctor, registers but moves only WRITE from it: %+v", got)
	}
	g.Moves = ""
	if got := checkGPUMemory(doctorEnv{sys: gpuSys(""), gpu: map[string]gpuMemory{"usb4_rdma0": g, "usb4_rdma5": g}}); got.Verdict != verdictOK {
		t.Errorf("doctor, registers, module does not tell: %+v", got)
	}
}
