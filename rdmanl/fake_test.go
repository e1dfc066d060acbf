package rdmanl

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// fakeConn answers each request with the datagrams its handler returns, the
// way nltest.Dial does for mdlayher/netlink. Receive on an empty queue fails
// with ETIMEDOUT, like the real socket's receive timeout, so a test never
// hangs on a missing reply.
type fakeConn struct {
	t       testing.TB
	handler func(req message) [][]byte
	sent    []message
	queue   [][]byte
	closed  bool
}

func newFake(t testing.TB, handler func(req message) [][]byte) (*Handle, *fakeConn) {
	c := &fakeConn{t: t, handler: handler}
	return newHandle(c), c
}

func (c *fakeConn) Send(b []byte) error {
	msgs, err := parseMessages(b)
	if err != nil || len(msgs) != 1 {
		c.t.Fatalf("request does not parse as one message: %v (%d)", err, len(msgs))
	}
	if int(msgs[0].Header.Len) != len(b) {
		c.t.Fatalf("request nlmsg_len %d, datagram %d bytes", msgs[0].Header.Len, len(b))
	}
	c.sent = append(c.sent, msgs[0])
	c.queue = append(c.queue, c.handler(msgs[0])...)
	return nil
}

func (c *fakeConn) Receive() ([]byte, error) {
	if len(c.queue) == 0 {
		return nil, unix.ETIMEDOUT
	}
	b := c.queue[0]
	c.queue = c.queue[1:]
	return b, nil
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

// Reply builders. They frame what the kernel would send.

func nlmsg(typ, flags uint16, seq uint32, payload []byte) []byte {
	b := marshalMessage(typ, flags, seq, payload)
	binary.NativeEndian.PutUint32(b[12:16], 4242) // the kernel fills our port id
	return b
}

func concat(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
	}
	return b
}

func doneMsg(seq uint32, flags uint16) []byte {
	return nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI|flags, seq, []byte{0, 0, 0, 0})
}

// errMsg is an NLMSG_ERROR for req: errno 0 is an ACK. With text it carries
// extended-ACK TLVs the way a kernel with NETLINK_CAP_ACK does.
func errMsg(req message, errno unix.Errno, text string) []byte {
	p := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	hdr := marshalMessage(req.Header.Type, req.Header.Flags, req.Header.Seq, nil)
	binary.NativeEndian.PutUint32(hdr[0:4], req.Header.Len)
	p = append(p, hdr...)
	flags := uint16(unix.NLM_F_CAPPED)
	if text != "" {
		var e attrEncoder
		e.String(unix.NLMSGERR_ATTR_MSG, text)
		p = append(p, e.Bytes()...)
		flags |= unix.NLM_F_ACK_TLVS
	}
	return nlmsg(unix.NLMSG_ERROR, flags, req.Header.Seq, p)
}

type fakeDev struct {
	index    uint32
	name     string
	guid     uint64
	protocol string
	ports    uint32
	// chardev; driverID 0 and abi 0 mean "no uverbs" (EOPNOTSUPP)
	abi      uint64
	driverID uint32
	uverbs   string
	netdev   string
	ifindex  uint32
}

func devPayload(d fakeDev) []byte {
	var e attrEncoder
	e.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, d.index)
	e.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, d.name)
	e.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, d.ports)
	e.put(uapi.RDMA_NLDEV_ATTR_PAD, nil) // nla_put_u64_64bit alignment pad
	e.Uint64(uapi.RDMA_NLDEV_ATTR_CAP_FLAGS, 0x1234)
	e.Uint64(uapi.RDMA_NLDEV_ATTR_NODE_GUID, d.guid)
	e.Uint64(uapi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, d.guid)
	e.Uint8(uapi.RDMA_NLDEV_ATTR_DEV_NODE_TYPE, uapi.RDMA_NODE_IB_CA)
	e.Uint8(uapi.RDMA_NLDEV_ATTR_DEV_DIM, 0) // not decoded: must be skipped
	e.String(uapi.RDMA_NLDEV_ATTR_DEV_PROTOCOL, d.protocol)
	return e.Bytes()
}

func portPayload(d fakeDev, port uint32) []byte {
	var e attrEncoder
	e.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, d.index)
	e.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, d.name)
	e.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	e.Uint8(uapi.RDMA_NLDEV_ATTR_PORT_STATE, 4)
	e.Uint8(uapi.RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 5)
	if d.netdev != "" {
		e.Uint32(uapi.RDMA_NLDEV_ATTR_NDEV_INDEX, d.ifindex)
		e.String(uapi.RDMA_NLDEV_ATTR_NDEV_NAME, d.netdev)
	}
	return e.Bytes()
}

func chardevPayload(d fakeDev) []byte {
	var e attrEncoder
	e.Uint32(uapi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, d.driverID)
	e.Uint64(uapi.RDMA_NLDEV_ATTR_CHARDEV, unix.Mkdev(231, 192+d.index))
	e.Uint64(uapi.RDMA_NLDEV_ATTR_CHARDEV_ABI, d.abi)
	e.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_NAME, d.uverbs)
	return e.Bytes()
}

// attrsOf decodes a request's attributes into a map of raw payloads.
func attrsOf(t testing.TB, m message) map[uint16][]byte {
	t.Helper()
	out := map[uint16][]byte{}
	d := newAttrDecoder(m.Data)
	for d.Next() {
		out[d.Type()] = append([]byte(nil), d.Bytes()...)
	}
	if d.Err() != nil {
		t.Fatalf("request attributes: %v", d.Err())
	}
	return out
}

func u32At(t testing.TB, attrs map[uint16][]byte, typ uint16) (uint32, bool) {
	t.Helper()
	b, ok := attrs[typ]
	if !ok {
		return 0, false
	}
	if len(b) != 4 {
		t.Fatalf("attribute %d: %d bytes, want 4", typ, len(b))
	}
	return binary.NativeEndian.Uint32(b), true
}

// fakeKernel answers nldev requests about devs, like nldev.c does.
func fakeKernel(t testing.TB, devs []fakeDev) func(req message) [][]byte {
	return func(req message) [][]byte {
		seq := req.Header.Seq
		attrs := attrsOf(t, req)
		find := func() (fakeDev, bool) {
			idx, ok := u32At(t, attrs, uapi.RDMA_NLDEV_ATTR_DEV_INDEX)
			for _, d := range devs {
				if ok && d.index == idx {
					return d, true
				}
			}
			return fakeDev{}, false
		}
		switch req.Header.Type {
		case nldevType(uapi.RDMA_NLDEV_CMD_GET):
			var out [][]byte
			for _, d := range devs {
				out = append(out, nlmsg(req.Header.Type, unix.NLM_F_MULTI, seq, devPayload(d)))
			}
			return append(out, doneMsg(seq, 0))
		case nldevType(uapi.RDMA_NLDEV_CMD_PORT_GET):
			d, ok := find()
			if !ok {
				return [][]byte{errMsg(req, unix.EINVAL, "")}
			}
			var msgs [][]byte
			for p := uint32(1); p <= d.ports; p++ {
				msgs = append(msgs, nlmsg(req.Header.Type, unix.NLM_F_MULTI, seq, portPayload(d, p)))
			}
			return [][]byte{concat(append(msgs, doneMsg(seq, 0))...)}
		case nldevType(uapi.RDMA_NLDEV_CMD_GET_CHARDEV):
			d, ok := find()
			if !ok {
				return [][]byte{errMsg(req, unix.EINVAL, "")}
			}
			if d.uverbs == "" {
				return [][]byte{errMsg(req, unix.EOPNOTSUPP, "")}
			}
			return [][]byte{concat(nlmsg(req.Header.Type, 0, seq, chardevPayload(d)), errMsg(req, 0, ""))}
		case nldevType(uapi.RDMA_NLDEV_CMD_DELLINK):
			if _, ok := find(); !ok {
				return [][]byte{errMsg(req, unix.EINVAL, "")}
			}
			return [][]byte{errMsg(req, 0, "")}
		}
		return [][]byte{errMsg(req, unix.EOPNOTSUPP, "")}
	}
}

var testDevs = []fakeDev{
	{index: 3, name: "rxe0", guid: 0x505400fffe123456, protocol: "roce", ports: 1,
		abi: 2, driverID: 11, uverbs: "uverbs0", netdev: "vethA", ifindex: 7},
	{index: 5, name: "usb4_rdma0", guid: 0x0200544200000001, protocol: "ib", ports: 2},
}
