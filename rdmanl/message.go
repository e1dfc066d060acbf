package rdmanl

import (
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// message is one netlink message: its header and the payload after it.
type message struct {
	Header unix.NlMsghdr
	Data   []byte
}

const nlmsgAlignTo = 4

func nlmsgAlign(n int) int { return (n + nlmsgAlignTo - 1) &^ (nlmsgAlignTo - 1) }

// marshalMessage frames payload behind a netlink header.
func marshalMessage(typ, flags uint16, seq uint32, payload []byte) []byte {
	n := unix.NLMSG_HDRLEN + len(payload)
	b := make([]byte, 0, n)
	b = binary.NativeEndian.AppendUint32(b, uint32(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // pid 0: the kernel assigns our port id
	// Attributes are 4-byte aligned, so n needs no trailing padding.
	return append(b, payload...)
}

// parseMessages splits one datagram into messages, checking every length
// against the datagram.
func parseMessages(b []byte) ([]message, error) {
	var msgs []message
	for len(b) > 0 {
		if len(b) < unix.NLMSG_HDRLEN {
			return msgs, errBadMessage("%d trailing bytes, shorter than a netlink header", len(b))
		}
		h := unix.NlMsghdr{
			Len:   binary.NativeEndian.Uint32(b[0:4]),
			Type:  binary.NativeEndian.Uint16(b[4:6]),
			Flags: binary.NativeEndian.Uint16(b[6:8]),
			Seq:   binary.NativeEndian.Uint32(b[8:12]),
			Pid:   binary.NativeEndian.Uint32(b[12:16]),
		}
		if h.Len < unix.NLMSG_HDRLEN || uint64(h.Len) > uint64(len(b)) {
			return msgs, errBadMessage("netlink message length %d outside [%d, %d]", h.Len, unix.NLMSG_HDRLEN, len(b))
		}
		msgs = append(msgs, message{Header: h, Data: b[unix.NLMSG_HDRLEN:h.Len]})
		b = b[min(nlmsgAlign(int(h.Len)), len(b)):]
	}
	return msgs, nil
}

// OpError is a failed RDMA netlink operation: the errno the kernel (or our
// validation) returned, and the kernel's extended-ACK text when it sent one.
// errors.Is(err, unix.EPERM) and friends work through Unwrap.
type OpError struct {
	Op      string // "dev show", "link add rxe0", ...
	Err     error  // usually a unix.Errno
	Message string // extended-ACK message, "" if none
	Offset  uint32 // extended-ACK offset of the offending attribute, 0 if none
}

func (e *OpError) Error() string {
	var s strings.Builder
	s.WriteString("rdmanl: ")
	s.WriteString(e.Op)
	s.WriteString(": ")
	s.WriteString(e.Err.Error())
	if e.Message != "" {
		s.WriteString(": ")
		s.WriteString(e.Message)
	}
	if e.Offset != 0 {
		fmt.Fprintf(&s, " (attribute at offset %d)", e.Offset)
	}
	return s.String()
}

func (e *OpError) Unwrap() error { return e.Err }

// nlmsgerr attribute types (include/uapi/linux/netlink.h enum nlmsgerr_attrs).
const (
	nlmsgerrAttrMsg  = unix.NLMSGERR_ATTR_MSG
	nlmsgerrAttrOffs = unix.NLMSGERR_ATTR_OFFS
)

// parseErrorPayload decodes an NLMSG_ERROR payload (struct nlmsgerr: int
// error, then the offending request's header, the request's payload unless
// NLM_F_CAPPED, then extended-ACK TLVs when NLM_F_ACK_TLVS) or an NLMSG_DONE
// payload (int error, then TLVs when NLM_F_ACK_TLVS). It returns the errno (0
// for an ACK), the extended-ACK text and offset.
func parseErrorPayload(m message) (errno unix.Errno, text string, offset uint32, err error) {
	if m.Header.Type == unix.NLMSG_DONE && len(m.Data) == 0 {
		return 0, "", 0, nil // pre-4.x kernels may send an empty DONE
	}
	if len(m.Data) < 4 {
		return 0, "", 0, errBadMessage("error payload of %d bytes", len(m.Data))
	}
	code := int32(binary.NativeEndian.Uint32(m.Data[0:4]))
	if code > 0 || code < -4095 {
		return 0, "", 0, errBadMessage("error code %d is not a negative errno", code)
	}
	errno = unix.Errno(-code)
	if m.Header.Flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno, "", 0, nil
	}
	tlv := m.Data[4:]
	if m.Header.Type == unix.NLMSG_ERROR {
		if len(tlv) < unix.NLMSG_HDRLEN {
			return errno, "", 0, errBadMessage("nlmsgerr of %d bytes lacks the request header", len(m.Data))
		}
		skip := unix.NLMSG_HDRLEN
		if m.Header.Flags&unix.NLM_F_CAPPED == 0 {
			reqLen := binary.NativeEndian.Uint32(tlv[0:4])
			if reqLen < unix.NLMSG_HDRLEN || uint64(nlmsgAlign(int(min(reqLen, 1<<30)))) > uint64(len(tlv)) {
				return errno, "", 0, errBadMessage("echoed request length %d exceeds the %d bytes left", reqLen, len(tlv))
			}
			skip = nlmsgAlign(int(reqLen))
		}
		tlv = tlv[skip:]
	}
	d := newAttrDecoder(tlv)
	for d.Next() {
		switch d.Type() {
		case nlmsgerrAttrMsg:
			text = d.String()
		case nlmsgerrAttrOffs:
			offset = d.Uint32()
		}
	}
	if d.Err() != nil {
		return errno, "", 0, d.Err()
	}
	return errno, text, offset, nil
}
