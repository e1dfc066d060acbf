package main

import (
	"fmt"
	"strings"
	"testing"
)

// The control plan's tables: the ratio and verdict per verb, the first open's
// split, and the system calls of the calling thread against the baseline's + 1.
func TestControlTables(t *testing.T) {
	var b strings.Builder
	for _, l := range []string{
		"@@BENCH loaded=ours tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=ours rep=1 metric=alloc_pd_ns value=120 n=30",
		"@@BENCH loaded=ours tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=ours rep=2 metric=alloc_pd_ns value=100 n=30",
		"@@BENCH loaded=rxe tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=librxe rep=1 metric=alloc_pd_ns value=100 n=30",
		"@@BENCH loaded=rxe tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=librxe rep=2 metric=alloc_pd_ns value=100 n=30",
		"@@BENCH loaded=ours tool=ctrl size=4096 qps=1 pl=1 mode=ctrl side=ours rep=1 metric=reg_mr_ns value=105 n=30",
		"@@BENCH loaded=rxe tool=ctrl size=4096 qps=1 pl=1 mode=ctrl side=librxe rep=1 metric=reg_mr_ns value=100 n=30",
		"@@BENCH loaded=ours tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=ours rep=1 metric=open_first_us value=300 n=1",
		"@@BENCH loaded=ours tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=oursP rep=1 metric=preload_us value=100 n=1",
		"@@BENCH loaded=rxe tool=ctrl size=0 qps=1 pl=1 mode=ctrl side=librxe rep=1 metric=open_first_us value=5 n=1",
		"@@BENCH mode=ctrl side=ours loaded=ours tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sc_alloc_pd value=6.00 n=10",
		"@@BENCH mode=ctrl side=ours loaded=ours tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sc_alloc_pd.ioctl value=1.00 n=10",
		"@@BENCH mode=ctrl side=ours loaded=ours tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sc_alloc_pd.rt_sigaction value=3.00 n=10",
		"@@BENCH mode=ctrl side=ours loaded=ours tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sco_alloc_pd value=9.00 n=10",
		"@@BENCH mode=ctrl side=librxe loaded=rxe tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sc_alloc_pd value=1.00 n=10",
		"@@BENCH mode=ctrl side=librxe loaded=rxe tool=ctrlsc qps=1 pl=1 rep=1 size=0 metric=sco_alloc_pd value=0.00 n=10",
		"@@BENCH mode=ctrl side=ours loaded=ours tool=ctrlsc qps=1 pl=1 rep=1 size=4096 metric=sc_reg_mr value=2.00 n=10",
		"@@BENCH mode=ctrl side=librxe loaded=rxe tool=ctrlsc qps=1 pl=1 rep=1 size=4096 metric=sc_reg_mr value=1.00 n=10",
	} {
		b.WriteString(l + "\n")
	}
	run, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	writeControl(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, []ControlRun{{Name: "rxe", Base: SideLibrxe, Run: run}}, "")
	doc := out.String()
	for _, want := range []string{
		"| `ibv_alloc_pd` | 110 (100–120) | 2 | 100 (100–100) | 2 | 1.10 | 1.00 | met |",
		"| `ibv_reg_mr` 4 KiB | 105 (105–105) | 1 | 100 (100–100) | 1 | 1.05 | 1.05 | met |",
		"| ours, the first open | 300 (300–300) |",
		"| of which, the rest (medians subtracted)",
		"| alloc_pd | 6.00 | 1.00 | **missed** by 4.00 | rt_sigaction 3.00, ioctl 1.00 | – | 9.00 | 0 |",
		"| reg_mr 4 KiB | 2.00 | 1.00 | met |",
		"met for 1 verbs, missed for 1: alloc_pd 6.00 against 1.00",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("missing %q in:\n%s", want, doc)
		}
	}
}
