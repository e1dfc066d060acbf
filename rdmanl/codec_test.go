package rdmanl

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

func skipUnlessLittleEndian(t testing.TB) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("byte fixtures are little-endian")
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deviceFixture is one RDMA_NLDEV_CMD_GET dump datagram as nldev.c
// fill_dev_info lays it out (x86-64): index 1 "rxe0", one port, a PAD before
// the u64 cap flags, node GUID 5054:00ff:fe12:3456, node type CA, protocol
// roce, then NLMSG_DONE.
const deviceFixture = `
	5c000000 0114 0200 07000000 92100000
	08000100 01000000
	09000200 72786530 00000000
	08000300 01000000
	04000000
	0c000400 00000000 00000000
	0c000600 563412fe ff005450
	05000e00 01000000
	09004300 726f6365 00000000
	14000000 0300 0200 07000000 92100000 00000000`

func TestDecodeDeviceFixture(t *testing.T) {
	skipUnlessLittleEndian(t)
	msgs, err := parseMessages(mustHex(t, deviceFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Header.Type != nldevType(uapi.RDMA_NLDEV_CMD_GET) || msgs[1].Header.Type != unix.NLMSG_DONE {
		t.Fatalf("messages %+v", msgs)
	}
	d, err := decodeDevice(msgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	want := Device{Index: 1, Name: "rxe0", NumPorts: 1, NodeGUID: 0x505400fffe123456, NodeType: 1, Protocol: "roce"}
	if d != want {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	if errno, _, _, err := parseErrorPayload(msgs[1]); err != nil || errno != 0 {
		t.Fatalf("DONE: errno %v err %v", errno, err)
	}
}

func TestAttrEncoderBytes(t *testing.T) {
	skipUnlessLittleEndian(t)
	var e attrEncoder
	e.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, 1)
	e.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	e.Uint8(uapi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1)
	e.Uint64(uapi.RDMA_NLDEV_ATTR_CHARDEV_ABI, 6)
	want := mustHex(t, `
		08000100 01000000
		0b004500 75766572 627300 00
		05004200 01000000
		0c004700 06000000 00000000`)
	if !bytes.Equal(e.Bytes(), want) {
		t.Fatalf("got  %x\nwant %x", e.Bytes(), want)
	}
}

func TestAttrDecoderRoundTrip(t *testing.T) {
	var e attrEncoder
	e.Uint8(10, 0xab)
	e.Uint32(11, 0xdeadbeef)
	e.Uint64(12, 0x0102030405060708)
	e.String(13, "hello")
	e.String(14, "")
	d := newAttrDecoder(e.Bytes())
	var got []string
	for d.Next() {
		switch d.Type() {
		case 10:
			got = append(got, hex.EncodeToString([]byte{d.Uint8()}))
		case 11:
			got = append(got, hex.EncodeToString(binary.BigEndian.AppendUint32(nil, d.Uint32())))
		case 12:
			got = append(got, hex.EncodeToString(binary.BigEndian.AppendUint64(nil, d.Uint64())))
		case 13, 14:
			got = append(got, "s:"+d.String())
		}
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	want := "ab deadbeef 0102030405060708 s:hello s:"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q want %q", strings.Join(got, " "), want)
	}
}

func TestAttrDecoderRejects(t *testing.T) {
	skipUnlessLittleEndian(t)
	for _, tc := range []struct {
		name string
		in   string
		read func(*attrDecoder)
	}{
		{"short header", "0800", nil},
		{"length below header", "02000100 01000000", nil},
		{"length past end", "0c000100 01000000", nil},
		{"u32 of 3 bytes", "07000100 010000 00", func(d *attrDecoder) { d.Uint32() }},
		{"u64 of 4 bytes", "08000600 01000000", func(d *attrDecoder) { d.Uint64() }},
		{"u8 of 4 bytes", "08000e00 01000000", func(d *attrDecoder) { d.Uint8() }},
		{"string without NUL", "08000200 72786530", func(d *attrDecoder) { _ = d.String() }},
		{"u32or64 of 2 bytes", "06004900 0b00 0000", func(d *attrDecoder) { d.Uint32Or64() }},
		{"u32or64 too big", "0c004900 00000000 01000000", func(d *attrDecoder) { d.Uint32Or64() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A valid attribute follows: the decoder must stop at the
			// first error and not report it.
			in := append(mustHex(t, tc.in), mustHex(t, "08000100 05000000")...)
			d := newAttrDecoder(in)
			n := 0
			for d.Next() {
				n++
				if tc.read != nil {
					tc.read(d)
				}
			}
			if !errors.Is(d.Err(), unix.EBADMSG) {
				t.Fatalf("err %v, want EBADMSG", d.Err())
			}
			if n > 1 {
				t.Fatalf("decoder went on after an error (%d attributes)", n)
			}
		})
	}
}

func TestAttrDecoderLastUnpadded(t *testing.T) {
	skipUnlessLittleEndian(t)
	d := newAttrDecoder(mustHex(t, "05000e00 01")) // no padding after the last attribute
	if !d.Next() || d.Uint8() != 1 || d.Next() || d.Err() != nil {
		t.Fatalf("err %v", d.Err())
	}
}

func TestAttrDecoderUint32Or64(t *testing.T) {
	skipUnlessLittleEndian(t)
	for in, want := range map[string]uint32{"08004900 0b000000": 11, "0c004900 0b000000 00000000": 11} {
		d := newAttrDecoder(mustHex(t, in))
		d.Next()
		if got := d.Uint32Or64(); got != want || d.Err() != nil {
			t.Fatalf("%s: got %d err %v", in, got, d.Err())
		}
	}
}

func TestParseMessagesRejects(t *testing.T) {
	skipUnlessLittleEndian(t)
	for name, in := range map[string]string{
		"short":          "10000000 0114",
		"len below hdr":  "08000000 0114 0000 01000000 00000000",
		"len past end":   "20000000 0114 0000 01000000 00000000",
		"trailing bytes": "10000000 0114 0000 01000000 00000000 0102",
	} {
		msgs, err := parseMessages(mustHex(t, in))
		if !errors.Is(err, unix.EBADMSG) {
			t.Errorf("%s: err %v (msgs %d), want EBADMSG", name, err, len(msgs))
		}
	}
}

func TestMarshalMessage(t *testing.T) {
	skipUnlessLittleEndian(t)
	got := marshalMessage(0x1401, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, 9, mustHex(t, "08000100 01000000"))
	want := mustHex(t, "18000000 0114 0103 09000000 00000000 08000100 01000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

// errorFixture is the kernel's NLMSG_ERROR for a rejected NEWLINK with
// NETLINK_CAP_ACK and NETLINK_EXT_ACK on: -ENODEV, the echoed request header,
// an extended-ACK message and offset.
const errorFixture = `
	44000000 0200 0003 05000000 92100000
	edffffff
	30000000 0314 0500 05000000 00000000
	15000100 6e657464 6576206e 6f742066 6f756e64 00000000
	08000200 24000000`

func TestParseErrorFixture(t *testing.T) {
	skipUnlessLittleEndian(t)
	msgs, err := parseMessages(mustHex(t, errorFixture))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("%v %d", err, len(msgs))
	}
	errno, text, off, err := parseErrorPayload(msgs[0])
	if err != nil || errno != unix.ENODEV || text != "netdev not found" || off != 0x24 {
		t.Fatalf("errno %v text %q off %d err %v", errno, text, off, err)
	}
}

func TestParseErrorUncapped(t *testing.T) {
	skipUnlessLittleEndian(t)
	// Without NLM_F_CAPPED the whole request (8-byte payload) is echoed
	// before the TLVs.
	in := mustHex(t, `
		34000000 0200 0002 05000000 92100000
		f3ffffff
		18000000 0414 0500 05000000 00000000 08000100 09000000
		08000100 626164 00`)
	msgs, err := parseMessages(in)
	if err != nil {
		t.Fatal(err)
	}
	errno, text, _, err := parseErrorPayload(msgs[0])
	if err != nil || errno != unix.EACCES || text != "bad" {
		t.Fatalf("errno %v text %q err %v", errno, text, err)
	}
}

func TestParseErrorRejects(t *testing.T) {
	skipUnlessLittleEndian(t)
	for name, in := range map[string]string{
		"short":                "12000000 0200 0000 05000000 00000000 0000",
		"positive code":        "14000000 0200 0000 05000000 00000000 01000000",
		"tlvs without request": "18000000 0200 0002 05000000 00000000 edffffff 00000000",
		"echo too long":        "24000000 0200 0002 05000000 00000000 edffffff ff000000 0314 0500 05000000 00000000",
		"bad tlv":              "28000000 0200 0003 05000000 00000000 edffffff 30000000 0314 0500 05000000 00000000 ff000100",
	} {
		msgs, err := parseMessages(mustHex(t, in))
		if err != nil {
			t.Fatalf("%s: framing: %v", name, err)
		}
		if _, _, _, err := parseErrorPayload(msgs[0]); !errors.Is(err, unix.EBADMSG) {
			t.Errorf("%s: err %v, want EBADMSG", name, err)
		}
	}
}

func TestDecodeRequiredAttributes(t *testing.T) {
	var e attrEncoder
	e.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	if _, err := decodeDevice(e.Bytes()); !errors.Is(err, unix.EBADMSG) {
		t.Errorf("device without index: %v", err)
	}
	if _, err := decodePort(e.Bytes()); !errors.Is(err, unix.EBADMSG) {
		t.Errorf("port without indexes: %v", err)
	}
	if _, err := decodeChardev(e.Bytes()); !errors.Is(err, unix.EBADMSG) {
		t.Errorf("chardev without name: %v", err)
	}
	if _, err := decodeNetnsMode(e.Bytes()); !errors.Is(err, unix.EBADMSG) {
		t.Errorf("sys without mode: %v", err)
	}
	for _, bad := range []string{"", "..", "a/b", strings.Repeat("x", 64)} {
		var e attrEncoder
		e.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, 1)
		e.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, bad)
		if _, err := decodeDevice(e.Bytes()); !errors.Is(err, unix.EBADMSG) {
			t.Errorf("device name %q: %v", bad, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../uverbs0", strings.Repeat("x", 256)} {
		c := chardevPayload(fakeDev{uverbs: bad, abi: 1})
		if _, err := decodeChardev(c); !errors.Is(err, unix.EBADMSG) {
			t.Errorf("chardev name %q: %v", bad, err)
		}
	}
}

func TestDecodeChardev(t *testing.T) {
	c, err := decodeChardev(chardevPayload(testDevs[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := Chardev{Path: "/dev/infiniband/uverbs0", Name: "uverbs0", ABIVersion: 2, DriverID: 11, Dev: unix.Mkdev(231, 195)}
	if c != want {
		t.Fatalf("got %+v want %+v", c, want)
	}
}
