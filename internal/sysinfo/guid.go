package sysinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// USB4 node GUID layout, as thunderbolt_ibverbs builds it:
// node_guid = 0x0200544256524253 + (backend<<56) + (peer<<24) + rail
// (hellas-ai/thunderbolt-ibverbs:kernel/ibdev.c tbv_ibdev_register_one,
// kernel/tbv.h). Bytes 1..3 (00 54 42) never change; the top byte is
// 2 + backend.
const (
	usb4GUIDBase      = 0x0200544256524253
	usb4GUIDFixedMask = 0x00FFFFFF00000000
	usb4GUIDFixed     = 0x0000544200000000
)

// Backends of a usb4 device (the "backend" term of the GUID).
const (
	BackendNative = 0
	BackendApple  = 1
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
// big-endian GUID). ok is false for any other GUID.
func DecodeUSB4GUID(guid uint64) (id USB4Identity, ok bool) {
	if guid&usb4GUIDFixedMask != usb4GUIDFixed {
		return id, false
	}
	top := guid >> 56
	if top != 2 && top != 3 {
		return id, false
	}
	backend := top - 2
	v := guid - usb4GUIDBase - backend<<56
	id.Peer = uint32(v >> 24)
	id.Rail = uint32(v & 0xFFFFFF)
	if v>>24 > 0xFFFFFFFF {
		return USB4Identity{}, false
	}
	if backend == BackendApple {
		id.Backend, id.AppleSlot = "apple", true
	} else {
		id.Backend = "native"
	}
	return id, true
}

// EncodeUSB4GUID is the inverse of DecodeUSB4GUID.
func EncodeUSB4GUID(backend int, peer, rail uint32) uint64 {
	return usb4GUIDBase + uint64(backend)<<56 + uint64(peer)<<24 + uint64(rail)
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
