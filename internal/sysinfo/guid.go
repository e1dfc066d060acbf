package sysinfo

import (
	"fmt"
	"strconv"
	"strings"

	"usb4verbs/internal/usb4guid"
)

// Backends of a usb4 device (the "backend" term of the GUID).
const (
	BackendNative = usb4guid.BackendNative
	BackendApple  = usb4guid.BackendApple
)

// USB4Identity is what a usb4_rdma node GUID encodes.
type USB4Identity struct {
	Backend string `json:"backend"` // "native" or "apple"
	Peer    uint32 `json:"peer"`
	Rail    uint32 `json:"rail"`
	// AppleSlot is true for the Apple-compatible backend device, which
	// offers one QP only and no RDMA READ.
	AppleSlot bool `json:"apple_slot"`
}

// DecodeUSB4GUID decodes a usb4_rdma node GUID (host-order value of the
// big-endian GUID; the layout is internal/usb4guid's). ok is false for any
// other GUID.
func DecodeUSB4GUID(guid uint64) (id USB4Identity, ok bool) {
	g, ok := usb4guid.Decode(guid)
	if !ok {
		return id, false
	}
	id.Peer, id.Rail = g.Peer, g.Rail
	if g.Backend == BackendApple {
		id.Backend, id.AppleSlot = "apple", true
	} else {
		id.Backend = "native"
	}
	return id, true
}

// EncodeUSB4GUID is the inverse of DecodeUSB4GUID.
func EncodeUSB4GUID(backend int, peer, rail uint32) uint64 {
	return usb4guid.Encode(uint32(backend), peer, rail)
}

// ParseGUID parses a sysfs GUID ("0200:5442:5652:4253") or a plain hex
// number ("0x0200544256524253").
func ParseGUID(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	h := strings.ReplaceAll(s, ":", "")
	if strings.Contains(s, ":") && len(h) != 16 {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	h = strings.TrimPrefix(strings.TrimPrefix(h, "0x"), "0X")
	if h == "" || len(h) > 16 {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	return v, nil
}

// FormatGUID writes a GUID the way sysfs does.
func FormatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// USB4Slot derives domain and slot from a kernel-assigned usb4_rdmaN name:
// N = domain*5 + slot, slot 4 being the Apple backend
// (hellas-ai/thunderbolt-ibverbs:kernel/ibdev.c tbv_ibdev_rail_name_index,
// TBV_NATIVE_MAX_LANES = 4). ok is false for renamed devices.
func USB4Slot(name string) (domain, slot int, ok bool) {
	num, found := strings.CutPrefix(name, "usb4_rdma")
	if !found || num == "" {
		return 0, 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, 0, false
	}
	return n / 5, n % 5, true
}
