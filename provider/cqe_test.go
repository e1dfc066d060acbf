package provider

import "testing"

// The thunderbolt_ibverbs trees create a CQ of exactly the requested entries
// but answer cqe 0 (they never set ib_cq.cqe; see allocatedCQE). The fake
// kernel's CQ_CREATE leaves UVERBS_ATTR_CREATE_CQ_RESP_CQE at 0 the same way.
// Saw it fail before the fix: "usb4: CQE() = 0, want 256".
func TestCreateCQReportsAllocatedEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		drv  Driver
		want uint32
	}{
		{"usb4", usb4Drv, 256}, // the module allocated 256: the truth
		{"rxe", rxe, 0},        // any other device: its answer, as it is
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKernel()
			c := openFake(t, k, tc.drv)
			defer c.Close()
			cq, err := c.CreateCQ(CQAttr{CQE: 256})
			if err != nil {
				t.Fatal(err)
			}
			if got := cq.CQE(); got != tc.want {
				t.Fatalf("%s: CQE() = %d, want %d", tc.name, got, tc.want)
			}
		})
	}
	// A tree that does set ib_cq.cqe is taken at its word.
	c := openFake(t, newFakeKernel(), usb4Drv)
	defer c.Close()
	if got := c.allocatedCQE(256, 512); got != 512 {
		t.Fatalf("allocatedCQE(256, 512) = %d, want 512", got)
	}
}
