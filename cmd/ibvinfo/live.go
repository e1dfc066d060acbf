package main

import (
	"errors"
	"fmt"

	"usb4verbs/provider"
	"usb4verbs/rdmanl"
	"usb4verbs/uapi"
)

// liveDevice is what the running kernel answers for one device, beyond
// sysfs: netlink's view and the provider's query_device/query_port.
type liveDevice struct {
	Index    *uint32    `json:"index,omitempty"`
	DriverID *uint32    `json:"driver_id,omitempty"`
	Protocol string     `json:"protocol,omitempty"`
	MaxQP    *uint32    `json:"max_qp,omitempty"`
	MaxCQE   *uint32    `json:"max_cqe,omitempty"`
	MaxMR    *uint32    `json:"max_mr,omitempty"`
	Ports    []livePort `json:"ports,omitempty"`
	// DataPath is the data path our provider negotiates for the device.
	DataPath string `json:"data_path"`
	// SRQ: whose shared receive queues the device gets: the kernel's, the
	// provider's (a usb4 kernel without SRQs: provider/srq.go), or none.
	SRQ string `json:"srq,omitempty"`
	// GPUMemory: can GPU memory (dma-buf MRs) be registered (gpu.go).
	GPUMemory *gpuMemory `json:"gpu_memory,omitempty"`
	Errors    []string   `json:"errors,omitempty"`
}

type livePort struct {
	Port      int    `json:"port"`
	ActiveMTU int    `json:"active_mtu"`
	MaxMTU    int    `json:"max_mtu"`
	Speed     string `json:"speed"`
	Width     string `json:"width"`
	Netdev    string `json:"netdev,omitempty"`
}

// dataPathOf reports the data path the provider negotiates on an open
// context (rxe rings; usb4 kernel commands, mapped CQ ring, DV queues).
// datapath.go sets it in cgo builds (a throwaway CQ and QP as the probe);
// without cgo the data path does not exist and the answer says so.
var dataPathOf = func(*provider.Context) string {
	return "not reported by this build (no cgo: provider/dataplane not built)"
}

// queryLive asks netlink and the provider about the named devices (usb4
// marks the usb4 ones; params are thunderbolt_ibverbs' parameters).
// Errors are kept per device: one broken device must not hide the others.
func queryLive(names []string, ports map[string][]int, usb4 map[string]bool, params map[string]string) map[string]*liveDevice {
	out := map[string]*liveDevice{}
	nl := map[string]rdmanl.Device{}
	nlErr := ""
	if devs, err := rdmanl.Devices(); err == nil {
		for _, d := range devs {
			nl[d.Name] = d
		}
	} else {
		nlErr = fmt.Sprintf("netlink: %v", err)
	}
	for _, name := range names {
		ld := &liveDevice{DataPath: "unknown"}
		out[name] = ld
		if nlErr != "" {
			ld.Errors = append(ld.Errors, nlErr)
		}
		var netdevs = map[int]string{}
		if d, ok := nl[name]; ok {
			idx := d.Index
			ld.Index, ld.Protocol = &idx, d.Protocol
			if cd, err := rdmanl.UverbsChardev(d.Index); err == nil {
				id := cd.DriverID
				ld.DriverID = &id
			}
			if ps, err := rdmanl.Ports(d.Index); err == nil {
				for _, p := range ps {
					netdevs[int(p.Port)] = p.NetdevName
				}
			}
		}
		ctx, err := provider.Open(name)
		if err != nil {
			ld.Errors = append(ld.Errors, err.Error())
			continue
		}
		if a, err := ctx.QueryDevice(); err == nil {
			ld.MaxQP, ld.MaxCQE, ld.MaxMR = &a.MaxQP, &a.MaxCQE, &a.MaxMR
			ld.SRQ = srqText(a, ctx.ProviderSRQForced())
		} else {
			ld.Errors = append(ld.Errors, err.Error())
		}
		for _, pn := range ports[name] {
			pa, err := ctx.QueryPort(uint8(pn))
			if err != nil {
				ld.Errors = append(ld.Errors, err.Error())
				continue
			}
			ld.Ports = append(ld.Ports, livePort{
				Port:      pn,
				ActiveMTU: mtuBytes(pa.ActiveMTU),
				MaxMTU:    mtuBytes(pa.MaxMTU),
				Speed:     speedName(pa.ActiveSpeed),
				Width:     widthName(pa.ActiveWidth),
				Netdev:    netdevs[pn],
			})
		}
		g := probeGPUMemory(ctx, usb4[name], params)
		ld.GPUMemory = &g
		ld.DataPath = dataPathOf(ctx)
		if err := ctx.Close(); err != nil && !errors.Is(err, provider.ErrClosed) {
			ld.Errors = append(ld.Errors, err.Error())
		}
	}
	return out
}

// srqText says whose SRQs the device gets and their limits; forced: the
// provider's by USB4VERBS_SRQ=provider, whatever the kernel has.
func srqText(a provider.DeviceAttr, forced bool) string {
	switch {
	case a.ProviderSRQ && forced:
		return fmt.Sprintf("provider's (%s=provider): %d WRs, %d SGE", provider.SRQEnv, a.MaxSRQWR, a.MaxSRQSGE)
	case a.ProviderSRQ:
		return fmt.Sprintf("provider's (the kernel has none): %d WRs, %d SGE", a.MaxSRQWR, a.MaxSRQSGE)
	case a.MaxSRQ > 0:
		return fmt.Sprintf("kernel's: %d WRs, %d SGE", a.MaxSRQWR, a.MaxSRQSGE)
	}
	return "none"
}

// mtuBytes maps enum ib_mtu to bytes.
func mtuBytes(m uint8) int {
	if m >= uapi.IB_MTU_256 && m <= uapi.IB_MTU_4096 {
		return 128 << m
	}
	return 0
}

// speedName maps enum ib_port_speed (per-lane rate) to its name and Gb/s.
func speedName(s uint8) string {
	switch s {
	case uapi.IB_SPEED_SDR:
		return "SDR 2.5"
	case uapi.IB_SPEED_DDR:
		return "DDR 5"
	case uapi.IB_SPEED_QDR:
		return "QDR 10"
	case uapi.IB_SPEED_FDR10:
		return "FDR10 10"
	case uapi.IB_SPEED_FDR:
		return "FDR 14"
	case uapi.IB_SPEED_EDR:
		return "EDR 25"
	case uapi.IB_SPEED_HDR:
		return "HDR 50"
	case uapi.IB_SPEED_NDR:
		return "NDR 100"
	}
	return fmt.Sprintf("speed %d", s)
}

// widthName maps enum ib_port_width to "1X".."12X".
func widthName(w uint8) string {
	switch w {
	case uapi.IB_WIDTH_1X:
		return "1X"
	case uapi.IB_WIDTH_2X:
		return "2X"
	case uapi.IB_WIDTH_4X:
		return "4X"
	case uapi.IB_WIDTH_8X:
		return "8X"
	case uapi.IB_WIDTH_12X:
		return "12X"
	}
	return fmt.Sprintf("width %d", w)
}
