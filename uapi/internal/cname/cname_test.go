package cname

import (
	"slices"
	"testing"
)

func TestSnake(t *testing.T) {
	for goName, want := range map[string]string{
		"IbUverbsWc":            "ib_uverbs_wc",
		"WrId":                  "wr_id",
		"Log2ElemSize":          "log2_elem_size",
		"Usb4RdmaDvWqe":         "usb4_rdma_dv_wqe",
		"Mminfo":                "mminfo",
		"Reserved1":             "reserved1",
		"RdmaNlaLsGid":          "rdma_nla_ls_gid",
		"RdmaLsIpResolveHeader": "rdma_ls_ip_resolve_header",
	} {
		if got := Snake(goName); got != want {
			t.Errorf("Snake(%q) = %q, want %q", goName, got, want)
		}
	}
}

func TestCandidates(t *testing.T) {
	if got, want := Candidates("Pad1"), []string{"pad1", "pad_1"}; !slices.Equal(got, want) {
		t.Errorf("Candidates(Pad1) = %q, want %q", got, want)
	}
	if got, want := Candidates("WrId"), []string{"wr_id"}; !slices.Equal(got, want) {
		t.Errorf("Candidates(WrId) = %q, want %q", got, want)
	}
}
