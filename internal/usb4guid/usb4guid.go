// Package usb4guid decodes the node GUIDs that thunderbolt_ibverbs gives its
// devices. The module computes
//
//	node_guid = 0x0200544256524253 + (backend << 56) + (peer << 24) + rail
//
// (hellas-main:kernel/ibdev.c, the node_guid assignment in
// tbv_ibdev_register_one; peer_id and rail_id are u32 in kernel/tbv.h). The
// addition carries: from peer 0xAA on, byte 3 is 0x43 instead of 0x42, so
// the identity is found by subtracting the base, never by masking bytes.
// cshim/match.c applies the same rule in C; cshim's tests check both agree.
package usb4guid

// Base is the GUID of native peer 0, rail 0.
const Base = 0x0200544256524253

// Backends (the module's enum tbv_backend_type).
const (
	BackendNative = 0
	BackendApple  = 1
)

// MaxPeer bounds the peer numbers we accept. The module numbers peers from 1
// in a u32 that grows with every new XDomain peer; 65,535 peers in one module
// lifetime is far beyond any machine, and the bound keeps GUIDs of other
// vendors that merely start with 02 or 03 from matching.
const MaxPeer = 0xFFFF

// MaxRail bounds the rails we accept. The low 24 bits could carry more, but
// the module has a handful of rails per peer (TBV_NATIVE_MAX_LANES per
// domain, hellas-main:kernel/tbv.h); the bound keeps foreign GUIDs out.
const MaxRail = 0xFFFF

// ID is what a usb4 node GUID encodes.
type ID struct {
	Backend uint32 // BackendNative or BackendApple
	Peer    uint32
	Rail    uint32
}

// Decode reports the identity in a node GUID (host-order value of the
// big-endian GUID), and whether it is a usb4 GUID at all.
func Decode(guid uint64) (ID, bool) {
	v := guid - Base // wraps for GUIDs below the base: backend is then > 1
	backend := v >> 56
	peer := v >> 24 & 0xFFFFFFFF
	rail := v & 0xFFFFFF
	if backend > BackendApple || peer > MaxPeer || rail > MaxRail {
		return ID{}, false
	}
	return ID{Backend: uint32(backend), Peer: uint32(peer), Rail: uint32(rail)}, true
}

// Encode is the module's formula (the inverse of Decode).
func Encode(backend, peer, rail uint32) uint64 {
	return Base + uint64(backend)<<56 + uint64(peer)<<24 + uint64(rail)
}
