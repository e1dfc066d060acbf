package uapi

import (
	"testing"
	"unsafe"
)

func TestRdmaVerbsIoctl(t *testing.T) {
	// _IOWR(0x1b, 1, 24): dir RW (3) << 30 | 24 << 16 | 0x1b << 8 | 1.
	if RDMA_VERBS_IOCTL != 0xc0181b01 {
		t.Errorf("RDMA_VERBS_IOCTL = %#x, want 0xc0181b01", RDMA_VERBS_IOCTL)
	}
	if got := IOWR(RDMA_IOCTL_MAGIC, 1, SizeofIbUverbsIoctlHdr); got != RDMA_VERBS_IOCTL {
		t.Errorf("IOWR(...) = %#x, want RDMA_VERBS_IOCTL %#x", got, RDMA_VERBS_IOCTL)
	}
	// Largest size the 14-bit field holds.
	if got := IOWR('T', 0x99, 0x3fff); got != 0xffff5499 {
		t.Errorf("IOWR('T', 0x99, 0x3fff) = %#x, want 0xffff5499", got)
	}
}

func TestRdmaNlType(t *testing.T) {
	for _, c := range []struct{ client, op uint16 }{
		{RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET},
		{RDMA_NL_NLDEV, RDMA_NLDEV_CMD_MONITOR},
		{RDMA_NL_LS, RDMA_NL_LS_OP_IP_RESOLVE},
		{63, 1023},
	} {
		typ := RDMA_NL_GET_TYPE(c.client, c.op)
		if got := RDMA_NL_GET_CLIENT(typ); got != c.client {
			t.Errorf("GET_CLIENT(GET_TYPE(%d,%d)) = %d", c.client, c.op, got)
		}
		if got := RDMA_NL_GET_OP(typ); got != c.op {
			t.Errorf("GET_OP(GET_TYPE(%d,%d)) = %d", c.client, c.op, got)
		}
	}
	// Known wire value: RDMA_NLDEV_CMD_GET on the NLDEV client is 0x1401.
	if got := RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET); got != 0x1401 {
		t.Errorf("GET_TYPE(NLDEV, CMD_GET) = %#x, want 0x1401", got)
	}
	// The client field is 6 bits: high bits of the type are not the client.
	if got := RDMA_NL_GET_CLIENT(0xffff); got != 63 {
		t.Errorf("GET_CLIENT(0xffff) = %d, want 63", got)
	}
}

func TestUsb4RdmaDvTail(t *testing.T) {
	for _, c := range []struct {
		index uint32
		gen   uint8
		want  uint32
	}{
		{0, 0, 0},
		{1, 1, 0x01000001},
		{0xffffff, 0xff, 0xffffffff},
		{0x1000005, 7, 0x07000005}, // index wraps modulo 2^24
	} {
		p := Usb4RdmaDvTailPack(c.index, c.gen)
		if p != c.want {
			t.Errorf("pack(%#x, %d) = %#x, want %#x", c.index, c.gen, p, c.want)
		}
		if got := Usb4RdmaDvTailIndex(p); got != c.index&USB4_RDMA_DV_TAIL_INDEX_MASK {
			t.Errorf("index(%#x) = %#x", p, got)
		}
		if got := Usb4RdmaDvTailGeneration(p); got != c.gen {
			t.Errorf("generation(%#x) = %d, want %d", p, got, c.gen)
		}
	}
}

func TestSendWrUnionViews(t *testing.T) {
	var w IbUverbsSendWr
	w.Rdma().RemoteAddr = 0x1122334455667788
	w.Rdma().Rkey = 0xabcd
	if w.Atomic().RemoteAddr != 0x1122334455667788 {
		t.Error("wr.rdma and wr.atomic do not alias remote_addr")
	}
	w.Ud().RemoteQkey = 0x01020304
	if w.Rdma().Rkey != 0x01020304 { // both at union offset 8
		t.Errorf("wr.ud.remote_qkey does not alias wr.rdma.rkey")
	}
	if got := unsafe.Offsetof(w.Wr); got != 24 {
		t.Errorf("offsetof(wr) = %d, want 24", got)
	}
	var r RxeSendWr
	r.Ud().Av.PortNum = 1
	if r.Wr[32] != 1 { // wr.ud.av at offset 32 within the union
		t.Errorf("RxeSendWr.Ud().Av not at union offset 32")
	}
	r.Mw().Access = 7
	if r.Wr[28] != 7 {
		t.Errorf("RxeSendWr.Mw().Access not at union offset 28")
	}
}

func TestQueryPortRespExActiveSpeedEx(t *testing.T) {
	var r IbUverbsQueryPortRespEx
	// active_speed_ex sits at offset 44 in newer uAPI headers.
	if off := unsafe.Offsetof(r.Reserved) + 2; off != 44 {
		t.Fatalf("Reserved[2] at offset %d, want 44", off)
	}
	*(*uint32)(unsafe.Add(unsafe.Pointer(&r), 44)) = 0x12345678
	if got := r.ActiveSpeedEx(); got != 0x12345678 {
		t.Errorf("ActiveSpeedEx() = %#x, want 0x12345678", got)
	}
	r = IbUverbsQueryPortRespEx{}
	if got := r.ActiveSpeedEx(); got != 0 {
		t.Errorf("ActiveSpeedEx() of an old kernel's zeroed response = %#x", got)
	}
}
