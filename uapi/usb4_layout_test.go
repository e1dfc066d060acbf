package uapi

import (
	"reflect"
	"testing"
)

// writtenLayouts are the sizes and field offsets of the usb4 vendor structs,
// written down from their headers (the system has no copy to compile
// against):
//   - tbv_*: neuhaus/donnerkeule:proto/tbv_cq_shm.h
//   - usb4_rdma_dv_*: pleite/thunderbolt-ibverbs@eca80ec:
//     userspace/usb4_rdma/usb4_rdma_dv.h (the packed, aligned(64) structs
//     have only naturally aligned members, so packing adds no holes).
var writtenLayouts = map[string]struct {
	size    uintptr
	offsets map[string]uintptr
}{
	"TbvCqShm": {192, map[string]uintptr{
		"Magic": 0, "Abi": 4, "Cqe": 8, "EntrySize": 12, "RingOffset": 16,
		"Produced": 20, "Consumed": 24, "OvfSeq": 28, "MapLen": 32, "Reserved": 36,
	}},
	"TbvUrespCreateCq": {32, map[string]uintptr{
		"CqMmapOffset": 0, "Cqe": 8, "ShmAbi": 12, "Reserved": 16, "Pad": 20, "MapLen": 24,
	}},
	"Usb4RdmaDvWqe": {64, map[string]uintptr{
		"Opcode": 0, "Flags": 2, "Length": 4, "WrId": 8, "LocalAddr": 16, "Lkey": 24,
		"Rkey": 28, "RemoteAddr": 32, "ImmData": 40, "Generation": 44, "Reserved1": 48,
	}},
	"Usb4RdmaDvCqe": {64, map[string]uintptr{
		"WrId": 0, "Status": 8, "Opcode": 12, "ByteLen": 16, "ImmData": 20,
		"VendorErr": 24, "QpState": 28, "Reserved": 32,
	}},
	"Usb4RdmaDvDoorbellProducerLine": {64, map[string]uintptr{
		"SqTail": 0, "CqHead": 4, "Generation": 8, "Reserved0": 12, "Reserved1": 16,
	}},
	"Usb4RdmaDvDoorbellConsumerLine": {64, map[string]uintptr{
		"SqHead": 0, "CqTail": 4, "QpState": 8, "Generation": 12, "Reserved1": 16,
	}},
	"Usb4RdmaDvDoorbell": {128, map[string]uintptr{"Producer": 0, "Consumer": 64}},
	"Usb4RdmaDvQueryCapsResp": {64, map[string]uintptr{
		"AbiVersion": 0, "Caps": 4, "MaxSqEntries": 8, "MaxCqEntries": 12,
		"DefaultSqEntries": 16, "DefaultCqEntries": 20, "WqeSize": 24, "CqeSize": 28,
		"DoorbellRecordSize": 32, "DoorbellPageSize": 36, "TailIndexBits": 40,
		"TailGenerationBits": 44, "Reserved": 48,
	}},
	"Usb4RdmaDvQueueCreate": {64, map[string]uintptr{
		"AbiVersion": 0, "Flags": 4, "SqAddr": 8, "CqAddr": 16, "DoorbellAddr": 24,
		"SqEntries": 32, "CqEntries": 36, "SqStride": 40, "CqStride": 44, "Reserved": 48,
	}},
	"Usb4RdmaDvQueueResp": {16, map[string]uintptr{"QpNum": 0, "Generation": 4, "Flags": 8, "Reserved0": 12}},
	"Usb4RdmaDvKick":      {16, map[string]uintptr{"SqTail": 0, "Flags": 4, "Reserved": 8}},
	"RxeSendWrFlush": {24, map[string]uintptr{
		"RemoteAddr": 0, "Length": 8, "Rkey": 12, "Type": 16, "Level": 17,
	}},
}

func TestWrittenLayouts(t *testing.T) {
	for name, want := range writtenLayouts {
		rt, ok := structTypes[name]
		if !ok {
			t.Errorf("%s: no such struct", name)
			continue
		}
		if rt.Size() != want.size {
			t.Errorf("%s: size %d, header says %d", name, rt.Size(), want.size)
		}
		seen := 0
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Name == "_" {
				continue
			}
			off, ok := want.offsets[f.Name]
			if !ok {
				t.Errorf("%s.%s: not in the header table", name, f.Name)
				continue
			}
			seen++
			if f.Offset != off {
				t.Errorf("%s.%s: offset %d, header says %d", name, f.Name, f.Offset, off)
			}
		}
		if seen != len(want.offsets) {
			t.Errorf("%s: %d fields, header table has %d", name, seen, len(want.offsets))
		}
	}
	// Every usb4 struct must be in the table.
	for name := range structTypes {
		if (len(name) > 3 && name[:3] == "Tbv") || (len(name) > 8 && name[:8] == "Usb4Rdma") {
			if _, ok := writtenLayouts[name]; !ok {
				t.Errorf("%s: add its header layout to writtenLayouts", name)
			}
		}
	}
}

func TestUsb4DvConstants(t *testing.T) {
	// Values as printed in usb4_rdma_dv.h / tbv_cq_shm.h (see writtenLayouts).
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"TBV_CQ_SHM_MAGIC", TBV_CQ_SHM_MAGIC, 0x54425643},
		{"TBV_CQ_SHM_ABI", TBV_CQ_SHM_ABI, 2},
		{"USB4_RDMA_DV_OBJECT_DEVICE", USB4_RDMA_DV_OBJECT_DEVICE, 0x1000},
		{"USB4_RDMA_DV_METHOD_QUERY_CAPS", USB4_RDMA_DV_METHOD_QUERY_CAPS, 0x1000},
		{"USB4_RDMA_DV_METHOD_CREATE_QUEUE", USB4_RDMA_DV_METHOD_CREATE_QUEUE, 0x1001},
		{"USB4_RDMA_DV_METHOD_DESTROY_QUEUE", USB4_RDMA_DV_METHOD_DESTROY_QUEUE, 0x1002},
		{"USB4_RDMA_DV_METHOD_KICK", USB4_RDMA_DV_METHOD_KICK, 0x1003},
		{"USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP", USB4_RDMA_DV_ATTR_CREATE_QUEUE_RESP, 0x1002},
		{"USB4_RDMA_DV_ATTR_KICK_REQ", USB4_RDMA_DV_ATTR_KICK_REQ, 0x1001},
		{"USB4_RDMA_DV_CAPS_V1", USB4_RDMA_DV_CAPS_V1, 0x1f},
		{"USB4_RDMA_DV_CAPS_V2", USB4_RDMA_DV_CAPS_V2, 0x1ff},
		{"USB4_RDMA_DV_TAIL_INDEX_MASK", USB4_RDMA_DV_TAIL_INDEX_MASK, 0xffffff},
		{"USB4_RDMA_DV_CQE_STALE_GEN", USB4_RDMA_DV_CQE_STALE_GEN, 6},
		{"USB4_RDMA_DV_CQE_GENERAL_ERR", USB4_RDMA_DV_CQE_GENERAL_ERR, 255},
		{"USB4_RDMA_DV_DOORBELL_RECORD_SIZE", USB4_RDMA_DV_DOORBELL_RECORD_SIZE, 128},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, header says %#x", c.name, c.got, c.want)
		}
	}
	if got := reflect.TypeFor[Usb4RdmaDvWqe]().Size(); got != USB4_RDMA_DV_WQE_SIZE {
		t.Errorf("WQE size %d != USB4_RDMA_DV_WQE_SIZE", got)
	}
	if got := reflect.TypeFor[Usb4RdmaDvCqe]().Size(); got != USB4_RDMA_DV_CQE_SIZE {
		t.Errorf("CQE size %d != USB4_RDMA_DV_CQE_SIZE", got)
	}
}
