package gosrc

import "testing"

func TestLoadUapi(t *testing.T) {
	pkg, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	var wc *Struct
	for i := range pkg.Structs {
		if pkg.Structs[i].Name == "IbUverbsWc" {
			wc = &pkg.Structs[i]
		}
	}
	if wc == nil {
		t.Fatal("IbUverbsWc not found")
	}
	if wc.Size != 48 || len(wc.Fields) != 15 || wc.Fields[14].Name != "Reserved" || wc.Fields[14].Offset != 47 {
		t.Errorf("IbUverbsWc = %+v", *wc)
	}
	if pkg.Sizeofs["IbUverbsWc"] != 48 {
		t.Errorf("SizeofIbUverbsWc = %d", pkg.Sizeofs["IbUverbsWc"])
	}
	found := false
	for _, c := range pkg.Consts {
		if c.Name == "RDMA_VERBS_IOCTL" {
			found = true
			if v, ok := c.Int64(); !ok || v != 0xc0181b01 {
				t.Errorf("RDMA_VERBS_IOCTL = %v", c.Value)
			}
		}
		if c.Name[:6] == "Sizeof" {
			t.Errorf("%s listed as a C-named constant", c.Name)
		}
	}
	if !found {
		t.Error("RDMA_VERBS_IOCTL not found")
	}
}

func TestLoadEmptyDir(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of a directory without Go files succeeded")
	}
}
