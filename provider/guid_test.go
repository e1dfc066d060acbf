package provider

import (
	"testing"

	"usb4verbs/internal/usb4guid"
	"usb4verbs/uapi"
)

// TestClassifyUSB4GUIDWholeRange: every peer and rail the module can give a
// device is a usb4 device, under a name udev chose (issue 12 item 11: from
// peer 0xAA on the GUID's byte 3 carries to 0x43).
func TestClassifyUSB4GUIDWholeRange(t *testing.T) {
	bad := 0
	for backend := uint32(0); backend <= usb4guid.BackendApple; backend++ {
		for peer := uint32(0); peer <= usb4guid.MaxPeer; peer++ {
			for _, rail := range []uint32{0, 1, 3, 0xAD, usb4guid.MaxRail} {
				g := usb4guid.Encode(backend, peer, rail)
				if d := classifyDriver("rocep1s0f0", g, uapi.RDMA_DRIVER_UNKNOWN); d.Kind != DriverUSB4 {
					if bad++; bad <= 10 {
						t.Errorf("classifyDriver(%#016x) = %v, want usb4", g, d)
					}
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d mismatches in all", bad)
	}
	if d := classifyDriver("rocep1s0f0", usb4guid.Encode(2, 1, 0), uapi.RDMA_DRIVER_UNKNOWN); d.Kind == DriverUSB4 {
		t.Errorf("backend 2 classified usb4")
	}
}
