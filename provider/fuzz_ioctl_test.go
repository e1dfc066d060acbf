package provider

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// Attribute kinds FuzzIoctlAttributes builds.
const (
	fzIn = iota
	fzInU32
	fzConst
	fzOut
	fzIDR
	fzNewObj
	fzFD
	fzKinds
)

type fzAttr struct {
	kind     int
	id       uint16
	optional bool
	payload  []byte // in: what was sent; out: the buffer
	value    uint64 // const, idr, fd
}

// FuzzIoctlAttributes builds arbitrary attribute lists with the builder of
// ioctl.go, runs them through cmdFD.ioctl against the fake kernel, and
// checks both directions: the kernel sees exactly the header and attributes
// the builder was asked for (inline PTR_IN up to 8 bytes, pointers beyond,
// optional flags, dropped negative fds), and the answer (bytes written into
// PTR_OUT buffers, VALID_OUTPUT, new handles, the errno with its
// unsupported-method caching) comes back as the kernel gave it.
func FuzzIoctlAttributes(f *testing.F) {
	f.Add([]byte{0, 4, 1, 2, 3, 4, 3, 16, 5, 0}, uint8(0), []byte{9, 9, 9})
	f.Add([]byte{1, 0, 2, 0, 6, 0, 4, 7, 5, 0}, uint8(2), []byte{})
	f.Add(bytes.Repeat([]byte{0, 200, 3, 40}, 30), uint8(1), []byte{1})
	f.Fuzz(fuzzIoctlAttributes)
}

func fuzzIoctlAttributes(t *testing.T, spec []byte, errSel uint8, resp []byte) {
	{
		k := newFakeKernel()
		const obj, method = 0x7f00, 0x42
		fb := &specReader{b: spec}
		c := newIoctl(obj, method)
		var attrs []fzAttr
		for i := 0; len(fb.b) > 0 && i < 64; i++ {
			a := fzAttr{kind: int(fb.u8()) % fzKinds, id: uint16(i) + 1}
			n := int(fb.u8())
			switch a.kind {
			case fzIn:
				a.payload = fb.take(n)
				c.in(a.id, a.payload)
			case fzInU32:
				v := binary.LittleEndian.Uint32(fb.take(4))
				a.payload = binary.LittleEndian.AppendUint32(nil, v)
				c.inU32(a.id, v)
			case fzConst:
				a.value = binary.LittleEndian.Uint64(fb.take(8))
				c.constIn(a.id, a.value)
			case fzOut:
				a.payload = make([]byte, n)
				c.out(a.id, a.payload)
			case fzIDR:
				a.value = uint64(binary.LittleEndian.Uint32(fb.take(4)))
				c.idr(a.id, uint32(a.value))
			case fzNewObj:
				c.newObj(a.id)
			case fzFD:
				fd := int(int8(fb.u8()))
				a.value = uint64(fd)
				c.fd(a.id, fd)
				if fd < 0 {
					continue // dropped, as rdma-core's fill_attr_in_fd does
				}
			}
			if fb.u8()&1 == 1 {
				a.optional = true
				c.optional()
			}
			attrs = append(attrs, a)
		}
		kernelErr := []unix.Errno{0, unix.ENOTTY, unix.EPROTONOSUPPORT, unix.EINVAL, unix.ENOSPC}[errSel%5]
		outs := 0
		k.methods[methodKey(obj, method)] = func(call *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
			for _, a := range attrs {
				switch a.kind {
				case fzOut:
					if b := out(a.id); b != nil {
						copy(b, resp)
						outs++
					}
				case fzNewObj:
					set(a.id, uint64(a.id)*1000)
				}
			}
			if kernelErr != 0 {
				return kernelErr
			}
			return nil
		}
		if kernelErr == unix.ENOTTY {
			k.ioctlErr = unix.ENOTTY // no ioctl framework at all
		}
		fd := &cmdFD{sys: k, fd: 3, driverID: 14}
		err := fd.ioctl(c)

		if len(k.calls) != 1 {
			t.Fatalf("%d ioctls for one command", len(k.calls))
		}
		call := k.calls[0]
		if call.hdr.ObjectId != obj || call.hdr.MethodId != method || call.hdr.DriverId != 14 ||
			int(call.hdr.NumAttrs) != len(attrs) || len(call.attrs) != len(attrs) {
			t.Fatalf("header %+v for %d attributes", call.hdr, len(attrs))
		}
		for i, a := range attrs {
			got := call.attrs[i]
			mandatory := got.Flags&uapi.UVERBS_ATTR_F_MANDATORY != 0
			if got.AttrId != a.id || mandatory == a.optional {
				t.Fatalf("attribute %d: %v, want id %d optional %v", i, &got, a.id, a.optional)
			}
			switch a.kind {
			case fzIn, fzInU32:
				if int(got.Len) != len(a.payload) || !bytes.Equal(got.in, a.payload) {
					t.Fatalf("PTR_IN %d: kernel read %x (len %d), sent %x", i, got.in, got.Len, a.payload)
				}
			case fzConst, fzIDR, fzFD:
				if got.Data != a.value {
					t.Fatalf("attribute %d: data %#x, want %#x", i, got.Data, a.value)
				}
			case fzOut:
				if int(got.Len) != len(a.payload) {
					t.Fatalf("PTR_OUT %d: len %d, buffer %d", i, got.Len, len(a.payload))
				}
			}
		}
		if kernelErr == unix.ENOTTY {
			if !errors.Is(err, errIoctlUnsupported) || fd.known(0, 0) {
				t.Fatalf("ENOTTY: %v, framework still considered present", err)
			}
			return
		}
		for _, a := range attrs {
			switch a.kind {
			case fzOut:
				if len(a.payload) > 0 {
					want := make([]byte, len(a.payload))
					copy(want, resp)
					if !bytes.Equal(a.payload, want) || !c.validOutput(a.id) {
						t.Fatalf("PTR_OUT %d: got %x valid %v, kernel wrote %x", a.id, a.payload, c.validOutput(a.id), want)
					}
				}
			case fzNewObj:
				if v, ok := c.result(a.id); !ok || v != uint64(a.id)*1000 {
					t.Fatalf("new object %d: %d %v", a.id, v, ok)
				}
			}
		}
		switch kernelErr {
		case 0:
			if err != nil {
				t.Fatal(err)
			}
		case unix.EPROTONOSUPPORT:
			if !errors.Is(err, errIoctlUnsupported) || fd.known(obj, method) || !fd.known(obj, method+1) {
				t.Fatalf("EPROTONOSUPPORT: %v; cached for this method only?", err)
			}
		default:
			if !errors.Is(err, kernelErr) || errors.Is(err, errIoctlUnsupported) || !fd.known(obj, method) {
				t.Fatalf("%v: got %v", kernelErr, err)
			}
		}
	}
}

type specReader struct{ b []byte }

func (r *specReader) take(n int) []byte {
	out := make([]byte, n)
	k := copy(out, r.b)
	r.b = r.b[k:]
	return out
}

func (r *specReader) u8() uint8 { return r.take(1)[0] }

// FuzzQueryQPResponse decodes any ib_uverbs_query_qp_resp the kernel could
// write (linux:include/uapi/rdma/ib_user_verbs.h, 128 bytes) through
// (*QP).Query and checks every field lands where the layout says, from raw
// offsets rather than the uapi struct.
func FuzzQueryQPResponse(f *testing.F) {
	f.Add(make([]byte, 128), uint32(0))
	f.Add(bytes.Repeat([]byte{0xff, 1, 0x80}, 43), uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, raw []byte, mask uint32) {
		k := newFakeKernel()
		qp := fakeQP(t, k, QPTypeUD, QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
		r := make([]byte, 128)
		copy(r, raw)
		var req []byte
		k.writeCmd[uapi.IB_USER_VERBS_CMD_QUERY_QP] = func(in, out []byte) error {
			req = append([]byte(nil), in...)
			copy(out, r)
			return nil
		}
		a, init, err := qp.Query(mask)
		if err != nil {
			t.Fatal(err)
		}
		le := binary.LittleEndian
		if len(req) < 16 || le.Uint32(req[8:]) != qp.Handle() || le.Uint32(req[12:]) != mask {
			t.Fatalf("query request %x", req)
		}
		u32 := func(o int) uint32 { return le.Uint32(r[o:]) }
		u16 := func(o int) uint16 { return le.Uint16(r[o:]) }
		checkAH := func(name string, got AHAttr, o int) {
			var dgid GID
			copy(dgid[:], r[o:o+16])
			want := AHAttr{GRH: GlobalRoute{DGID: dgid, FlowLabel: u32(o + 16), SGIDIndex: r[o+24], HopLimit: r[o+25],
				TrafficClass: r[o+26]}, DLID: u16(o + 20), SL: r[o+27], SrcPathBits: r[o+28], StaticRate: r[o+29],
				IsGlobal: r[o+30] != 0, Port: r[o+31]}
			if got != want {
				t.Fatalf("%s: %+v, want %+v", name, got, want)
			}
		}
		checkAH("dest", a.AH, 0)
		checkAH("alt_dest", a.AltAH, 32)
		wantCap := QPCap{MaxSendWR: u32(64), MaxRecvWR: u32(68), MaxSendSGE: u32(72), MaxRecvSGE: u32(76), MaxInlineData: u32(80)}
		if a.Cap != wantCap || init.Cap != wantCap {
			t.Fatalf("caps %+v / %+v, want %+v", a.Cap, init.Cap, wantCap)
		}
		type pair struct{ got, want uint64 }
		for name, p := range map[string]pair{
			"qkey": {uint64(a.QKey), uint64(u32(84))}, "rq_psn": {uint64(a.RQPSN), uint64(u32(88))},
			"sq_psn": {uint64(a.SQPSN), uint64(u32(92))}, "dest_qp_num": {uint64(a.DestQPN), uint64(u32(96))},
			"access": {uint64(a.AccessFlags), uint64(u32(100))}, "pkey_index": {uint64(a.PKeyIndex), uint64(u16(104))},
			"alt_pkey_index": {uint64(a.AltPKeyIndex), uint64(u16(106))}, "qp_state": {uint64(a.State), uint64(r[108])},
			"cur_qp_state": {uint64(a.CurState), uint64(r[109])}, "path_mtu": {uint64(a.PathMTU), uint64(r[110])},
			"path_mig_state": {uint64(a.PathMigState), uint64(r[111])}, "sq_draining": {uint64(a.SQDraining), uint64(r[112])},
			"max_rd_atomic": {uint64(a.MaxRdAtomic), uint64(r[113])}, "max_dest_rd_atomic": {uint64(a.MaxDestRdAtomic), uint64(r[114])},
			"min_rnr_timer": {uint64(a.MinRNRTimer), uint64(r[115])}, "port_num": {uint64(a.Port), uint64(r[116])},
			"timeout": {uint64(a.Timeout), uint64(r[117])}, "retry_cnt": {uint64(a.RetryCnt), uint64(r[118])},
			"rnr_retry": {uint64(a.RNRRetry), uint64(r[119])}, "alt_port_num": {uint64(a.AltPort), uint64(r[120])},
			"alt_timeout": {uint64(a.AltTimeout), uint64(r[121])},
		} {
			if p.got != p.want {
				t.Fatalf("%s: %d, want %d", name, p.got, p.want)
			}
		}
		if init.SigAll != (r[122] != 0) || init.Type != QPTypeUD {
			t.Fatalf("init attr %+v from sq_sig_all %d", init, r[122])
		}
	})
}
