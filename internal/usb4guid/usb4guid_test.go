package usb4guid

import "testing"

// TestDecodeWholeRange round-trips every peer the decoder accepts with the
// rails that matter (the first ones, those around the 0x53+rail byte carry,
// the largest) on both backends; peers from 0xAA on carry into byte 3.
func TestDecodeWholeRange(t *testing.T) {
	rails := []uint32{0, 1, 2, 3, 4, 5, 0xAC, 0xAD, 0xAE, 0x100, MaxRail}
	bad := 0
	for backend := uint32(0); backend <= BackendApple; backend++ {
		for peer := uint32(0); peer <= MaxPeer; peer++ {
			for _, rail := range rails {
				g := Encode(backend, peer, rail)
				id, ok := Decode(g)
				if !ok || id != (ID{backend, peer, rail}) {
					if bad++; bad <= 10 {
						t.Errorf("Decode(%#016x) = %+v, %v; want backend %d peer %#x rail %#x", g, id, ok, backend, peer, rail)
					}
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d mismatches in all", bad)
	}
}

func TestDecodeRejectsForeignGUIDs(t *testing.T) {
	for _, g := range []uint64{
		0,
		Base - 1,                            // below the base
		0x0200544200000000,                  // the old mask's pattern, but below the base
		Encode(2, 0, 0),                     // backend 2
		Encode(BackendNative, MaxPeer+1, 0), // peer past the bound
		Encode(BackendApple, MaxPeer+1, 0),
		Encode(BackendNative, 0, MaxRail+1), // rail past the bound
		0x0200544300000001,                  // peer 0xA9, rail 0xADBDAE
		0xe41d2d0300fa1b20,                  // a ConnectX GUID
		0x0c42a10300657e4a,
		^uint64(0),
	} {
		if id, ok := Decode(g); ok {
			t.Errorf("Decode(%#016x) = %+v, ok; want not a usb4 GUID", g, id)
		}
	}
}

// TestDecodePeerCarry pins the defect of issue 12 item 11: peer 0xAA carries
// into byte 3, which a byte mask read as a foreign GUID.
func TestDecodePeerCarry(t *testing.T) {
	g := Encode(BackendNative, 0xAA, 1)
	if g>>32&0xFF != 0x43 {
		t.Fatalf("Encode(native, 0xAA, 1) = %#016x: expected byte 3 to carry to 0x43", g)
	}
	if id, ok := Decode(g); !ok || id.Peer != 0xAA || id.Rail != 1 {
		t.Errorf("Decode(%#016x) = %+v, %v", g, id, ok)
	}
}
