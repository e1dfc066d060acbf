package provider

import (
	"encoding/binary"
	"testing"

	"usb4verbs/uapi"
)

// FuzzModifyQPEncoding feeds arbitrary attribute masks and values through
// (*QP).Modify into the fake kernel and checks that the MODIFY_QP request
// carries exactly what the caller asked for: the mask untouched (the kernel,
// not we, judges which bits are valid for a transition), every field in its
// place, and the QP's own handle. Garbage in must never panic.
func FuzzModifyQPEncoding(f *testing.F) {
	f.Add(uint32(uapi.IB_QP_STATE|uapi.IB_QP_AV|uapi.IB_QP_PATH_MTU|uapi.IB_QP_DEST_QPN|uapi.IB_QP_RQ_PSN),
		[]byte{uapi.IB_QPS_RTR, 0, uapi.IB_MTU_1024, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint32(0xffffffff), make([]byte, 64))
	f.Add(uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, mask uint32, blob []byte) {
		k := newFakeKernel()
		qp := fakeQP(t, k, QPTypeRC, QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
		var mod uapi.IbUverbsModifyQp
		k.writeCmd[uapi.IB_USER_VERBS_CMD_MODIFY_QP] = func(in, out []byte) error {
			if len(in) != uapi.SizeofIbUverbsModifyQp {
				t.Fatalf("modify request is %d bytes, want %d", len(in), uapi.SizeofIbUverbsModifyQp)
			}
			copy(bytesOf(&mod), in)
			return nil
		}

		buf := make([]byte, 80)
		copy(buf, blob)
		u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(buf[off:]) }
		var dgid GID
		copy(dgid[:], buf[40:56])
		attr := QPAttr{
			State: buf[0], CurState: buf[1], PathMTU: buf[2], PathMigState: buf[3],
			QKey: u32(4), RQPSN: u32(8), SQPSN: u32(12), DestQPN: u32(16), AccessFlags: u32(20),
			PKeyIndex: uint16(u32(24)), AltPKeyIndex: uint16(u32(26)),
			MaxRdAtomic: buf[28], MaxDestRdAtomic: buf[29], MinRNRTimer: buf[30], Port: buf[31],
			Timeout: buf[32], RetryCnt: buf[33], RNRRetry: buf[34], AltPort: buf[35], AltTimeout: buf[36],
			EnSQDAsyncNotify: buf[37],
			AH: AHAttr{IsGlobal: buf[38]&1 != 0, Port: buf[39], DLID: uint16(u32(56)), SL: buf[58],
				GRH: GlobalRoute{DGID: dgid, FlowLabel: u32(60), SGIDIndex: buf[64], HopLimit: buf[65], TrafficClass: buf[66]}},
		}
		if err := qp.Modify(&attr, mask); err != nil {
			t.Fatalf("modify with an accepting kernel: %v", err)
		}
		want := uapi.IbUverbsModifyQp{
			QpHandle: qp.Handle(), AttrMask: mask, Qkey: attr.QKey, RqPsn: attr.RQPSN, SqPsn: attr.SQPSN,
			DestQpNum: attr.DestQPN, QpAccessFlags: attr.AccessFlags, PkeyIndex: attr.PKeyIndex,
			AltPkeyIndex: attr.AltPKeyIndex, QpState: attr.State, CurQpState: attr.CurState,
			PathMtu: attr.PathMTU, PathMigState: attr.PathMigState, EnSqdAsyncNotify: attr.EnSQDAsyncNotify,
			MaxRdAtomic: attr.MaxRdAtomic, MaxDestRdAtomic: attr.MaxDestRdAtomic, MinRnrTimer: attr.MinRNRTimer,
			PortNum: attr.Port, Timeout: attr.Timeout, RetryCnt: attr.RetryCnt, RnrRetry: attr.RNRRetry,
			AltPortNum: attr.AltPort, AltTimeout: attr.AltTimeout,
		}
		want.Dest.Dgid = dgid
		want.Dest.FlowLabel = attr.AH.GRH.FlowLabel
		want.Dest.Dlid = attr.AH.DLID
		want.Dest.SgidIndex = attr.AH.GRH.SGIDIndex
		want.Dest.HopLimit = attr.AH.GRH.HopLimit
		want.Dest.TrafficClass = attr.AH.GRH.TrafficClass
		want.Dest.Sl = attr.AH.SL
		want.Dest.PortNum = attr.AH.Port
		if attr.AH.IsGlobal {
			want.Dest.IsGlobal = 1
		}
		if mod != want {
			t.Fatalf("modify request\n got %+v\nwant %+v", mod, want)
		}
	})
}
