package cshim

import (
	"testing"

	"usb4verbs/internal/usb4guid"
)

// TestMatchGUIDWholeRange holds match.c's GUID rule against usb4guid for every
// peer and the rails that matter on both backends (issue 12 item 11: from
// peer 0xAA on the module's addition carries into byte 3), and for GUIDs
// that are not usb4's.
func TestMatchGUIDWholeRange(t *testing.T) {
	rails := []uint32{0, 1, 2, 3, 4, 0xAD, usb4guid.MaxRail}
	bad := 0
	check := func(g uint64, want bool) {
		if got := guidIsUSB4(g); got != want {
			if bad++; bad <= 10 {
				t.Errorf("usb4_guid_is_usb4(%#016x) = %v, want %v", g, got, want)
			}
		}
	}
	for backend := uint32(0); backend <= usb4guid.BackendApple; backend++ {
		for peer := uint32(0); peer <= usb4guid.MaxPeer; peer++ {
			for _, rail := range rails {
				check(usb4guid.Encode(backend, peer, rail), true)
			}
		}
		check(usb4guid.Encode(backend, usb4guid.MaxPeer+1, 0), false)
		check(usb4guid.Encode(backend, 0, usb4guid.MaxRail+1), false)
	}
	for _, g := range []uint64{0, usb4guid.Base - 1, 0x0200544200000000, usb4guid.Encode(2, 0, 0), 0xe41d2d0300fa1b20} {
		check(g, false)
	}
	if bad > 10 {
		t.Errorf("... %d mismatches in all", bad)
	}
}
