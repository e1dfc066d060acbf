package rdmanl

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// nlattr framing (include/uapi/linux/netlink.h): a 4-byte header {len u16,
// type u16} in host order, payload, padding to 4 bytes. len counts header and
// payload but not the padding.
const (
	nlaHeaderLen = 4
	nlaAlignTo   = 4
)

func nlaAlign(n int) int { return (n + nlaAlignTo - 1) &^ (nlaAlignTo - 1) }

// errBadMessage builds the error for a malformed kernel reply.
func errBadMessage(format string, args ...any) error {
	return fmt.Errorf("malformed reply: %s: %w", fmt.Sprintf(format, args...), unix.EBADMSG)
}

// attrDecoder walks a flat attribute stream. Every accessor checks the
// payload length against the type it reads; the first error is latched, Next
// then returns false and Err reports it. Nothing is trusted: lengths are
// checked against the remaining buffer before any slice is taken.
type attrDecoder struct {
	b    []byte
	typ  uint16
	data []byte
	err  error
}

func newAttrDecoder(b []byte) *attrDecoder { return &attrDecoder{b: b} }

// Next advances to the next attribute; it returns false at the end of the
// stream or after an error.
func (d *attrDecoder) Next() bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	if len(d.b) < nlaHeaderLen {
		d.err = errBadMessage("%d trailing bytes, shorter than an attribute header", len(d.b))
		return false
	}
	n := int(binary.NativeEndian.Uint16(d.b[0:2]))
	typ := binary.NativeEndian.Uint16(d.b[2:4])
	if n < nlaHeaderLen || n > len(d.b) {
		d.err = errBadMessage("attribute %d: length %d outside [%d, %d]", typ&uapi.RDMA_NLA_TYPE_MASK, n, nlaHeaderLen, len(d.b))
		return false
	}
	d.typ = typ & uapi.RDMA_NLA_TYPE_MASK
	d.data = d.b[nlaHeaderLen:n]
	// The last attribute may omit its padding.
	d.b = d.b[min(nlaAlign(n), len(d.b)):]
	return true
}

// Type is the current attribute's type with the flag bits masked off.
func (d *attrDecoder) Type() uint16 { return d.typ }

// Err is the first error met, or nil.
func (d *attrDecoder) Err() error { return d.err }

func (d *attrDecoder) fixed(want int, kind string) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.data) != want {
		d.err = errBadMessage("attribute %d: %s needs %d bytes, got %d", d.typ, kind, want, len(d.data))
		return nil
	}
	return d.data
}

func (d *attrDecoder) Uint8() uint8 {
	if b := d.fixed(1, "u8"); b != nil {
		return b[0]
	}
	return 0
}

func (d *attrDecoder) Uint32() uint32 {
	if b := d.fixed(4, "u32"); b != nil {
		return binary.NativeEndian.Uint32(b)
	}
	return 0
}

func (d *attrDecoder) Uint64() uint64 {
	if b := d.fixed(8, "u64"); b != nil {
		return binary.NativeEndian.Uint64(b)
	}
	return 0
}

// Uint32Or64 reads a u32 sent either as 4 bytes or widened to 8; a value that
// does not fit in 32 bits is an error. rdma_netlink.h documents
// RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID as u64 while the kernel policy and sender
// use u32 (linux:drivers/infiniband/core/nldev.c nldev_policy).
func (d *attrDecoder) Uint32Or64() uint32 {
	if d.err != nil {
		return 0
	}
	switch len(d.data) {
	case 4:
		return binary.NativeEndian.Uint32(d.data)
	case 8:
		v := binary.NativeEndian.Uint64(d.data)
		if v > 0xffffffff {
			d.err = errBadMessage("attribute %d: value %#x does not fit in 32 bits", d.typ, v)
			return 0
		}
		return uint32(v)
	}
	d.err = errBadMessage("attribute %d: u32 needs 4 or 8 bytes, got %d", d.typ, len(d.data))
	return 0
}

// String reads a NUL-terminated string; the kernel always sends the NUL
// (nla_put_string). Bytes after the first NUL are ignored.
func (d *attrDecoder) String() string {
	if d.err != nil {
		return ""
	}
	for i, c := range d.data {
		if c == 0 {
			return string(d.data[:i])
		}
	}
	d.err = errBadMessage("attribute %d: string of %d bytes lacks its NUL terminator", d.typ, len(d.data))
	return ""
}

// Bytes returns the raw payload (valid until the buffer is reused).
func (d *attrDecoder) Bytes() []byte { return d.data }

// attrEncoder appends attributes in nlattr framing.
type attrEncoder struct{ b []byte }

func (e *attrEncoder) put(typ uint16, payload []byte) {
	n := nlaHeaderLen + len(payload)
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(n))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, payload...)
	for range nlaAlign(n) - n {
		e.b = append(e.b, 0)
	}
}

func (e *attrEncoder) Uint8(typ uint16, v uint8) { e.put(typ, []byte{v}) }

func (e *attrEncoder) Uint32(typ uint16, v uint32) {
	e.put(typ, binary.NativeEndian.AppendUint32(nil, v))
}

func (e *attrEncoder) Uint64(typ uint16, v uint64) {
	e.put(typ, binary.NativeEndian.AppendUint64(nil, v))
}

// String appends s with its NUL terminator, as the kernel's NLA_NUL_STRING
// policy expects.
func (e *attrEncoder) String(typ uint16, s string) { e.put(typ, append([]byte(s), 0)) }

// Bytes is the encoded stream.
func (e *attrEncoder) Bytes() []byte { return e.b }
