package cshim

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestGeneratedLayouts checks zopslayout.h against the member counts and a
// sample of indexes in rdma-core-private-abi.md Appendix A, and checks that
// every layout's indexes are 0..N-1 in op-name order, as verbs_set_ops needs.
func TestGeneratedLayouts(t *testing.T) {
	src, err := os.ReadFile("zopslayout.h")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]map[string]int{}
	var order []string
	seen := map[string]bool{}
	tableRe := regexp.MustCompile(`(?s)static const int16_t usb4_slots_(L\d+)\[USB4_OP__COUNT\] = \{(.*?)\n\};`)
	entryRe := regexp.MustCompile(`\[USB4_OP_(\w+)\] = (-?\d+),`)
	for _, m := range tableRe.FindAllStringSubmatch(string(src), -1) {
		tab := map[string]int{}
		for _, e := range entryRe.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.Atoi(e[2])
			tab[e[1]] = n
			if !seen[e[1]] {
				seen[e[1]] = true
				order = append(order, e[1])
			}
		}
		tables[m[1]] = tab
	}
	wantSlots := map[string]int{"L34": 73, "L35": 75, "L36": 76, "L59": 79, "L62": 81, "L64": 83, "L65": 93}
	for name, want := range wantSlots {
		tab, ok := tables[name]
		if !ok {
			t.Errorf("layout %s missing", name)
			continue
		}
		next := 0
		for _, op := range order {
			i := tab[op]
			if i == -1 {
				continue
			}
			if i != next {
				t.Errorf("%s: %s at %d, want %d (indexes must follow strcmp order)", name, op, i, next)
			}
			next++
		}
		if next != want {
			t.Errorf("%s has %d slots, want %d", name, next, want)
		}
	}
	for _, s := range []struct {
		layout, op string
		index      int
	}{
		{"L34", "reg_dmabuf_mr", 65}, {"L34", "import_dm", -1}, {"L35", "import_dm", 42},
		{"L36", "query_port", 60}, {"L36", "post_send", 55}, {"L36", "query_qp_data_in_order", 62},
		{"L59", "reg_mr_ex", 71}, {"L65", "reg_mr_ex", 83}, {"L62", "query_port_speed", 64}, {"L64", "free_context", 44},
		{"L64", "alloc_buf", 1}, {"L65", "query_port", 71}, {"L65", "create_comp_cntr", 16},
		{"L36", "free_context", 39}, {"L59", "free_context", 41},
	} {
		if got, ok := tables[s.layout][s.op]; !ok || got != s.index {
			t.Errorf("%s.%s = %d (present %v), want %d", s.layout, s.op, got, ok, s.index)
		}
	}
	// Ops the front installs whatever the layout (objects.c sets them by
	// name; a layout without one would silently leave libibverbs' dummy).
	for name := range wantSlots {
		for _, op := range []string{"attach_mcast", "detach_mcast", "create_qp", "modify_qp"} {
			if i, ok := tables[name][op]; !ok || i < 0 {
				t.Errorf("%s has no slot for %s", name, op)
			}
		}
	}
}
