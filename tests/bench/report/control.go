package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The control plan's sides beside ours (tests/bench/guest-ctrl.sh): another build
// of ours (the one before a change) and ours with its Go part dlopened before the
// first open.
const (
	SideBase    = "base"
	SideOursPre = "oursP"
)

// ControlRun is one boot of the control plan: control-rxe.log (ours against
// librxe), control-<tree>.log (ours against the module's C provider), or the
// control part of a usb4 plan boot (usb4-<tree>.log) when the tree has no
// control-<tree>.log.
type ControlRun struct {
	Name string // "rxe" or the tree
	Base string // SideLibrxe or SideUp
	Run  *Run
	// Own: the run is a control-*.log (its event-driven part is written
	// here; a usb4-*.log's is in the usb4 section).
	Own bool
}

func hasTool(run *Run, tool string) bool {
	for _, s := range run.Samples {
		if s.Key.Tool == tool {
			return true
		}
	}
	return false
}

func loadControl(results string, usb4 []USB4Run) ([]ControlRun, error) {
	var out []ControlRun
	paths, err := filepath.Glob(filepath.Join(results, "control-*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	seen := map[string]bool{}
	for _, path := range paths {
		r, err := loadRun(path)
		if err != nil {
			return nil, err
		}
		if r == nil || !hasTool(r, "ctrl") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "control-"), ".log")
		base := SideUp
		if name == "rxe" {
			base = SideLibrxe
		}
		seen[name] = true
		out = append(out, ControlRun{Name: name, Base: base, Run: r, Own: true})
	}
	for _, u := range usb4 {
		if !seen[u.Tree] && hasTool(u.Run, "ctrl") {
			out = append(out, ControlRun{Name: u.Tree, Base: SideUp, Run: u.Run})
		}
	}
	// rxe first, then the trees.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name == "rxe" && out[j].Name != "rxe" })
	return out, nil
}

// ctrlVerbs is the order of the timing table: metric, and what it is.
var ctrlVerbs = []struct{ metric, what string }{
	{"open_first_us", "first `ibv_open_device` of the process (µs)"},
	{"open_ns", "later `ibv_open_device`"},
	{"close_ns", "`ibv_close_device`"},
	{"alloc_pd_ns", "`ibv_alloc_pd`"},
	{"dealloc_pd_ns", "`ibv_dealloc_pd`"},
	{"reg_mr_ns", "`ibv_reg_mr`"},
	{"dereg_mr_ns", "`ibv_dereg_mr`"},
	{"create_cq_ns", "`ibv_create_cq` (512)"},
	{"destroy_cq_ns", "`ibv_destroy_cq`"},
	{"create_qp_ns", "`ibv_create_qp` (NCCL's caps)"},
	{"modify_init_ns", "`ibv_modify_qp` → INIT"},
	{"modify_rtr_ns", "`ibv_modify_qp` → RTR"},
	{"modify_rts_ns", "`ibv_modify_qp` → RTS"},
	{"query_qp_ns", "`ibv_query_qp`"},
	{"destroy_qp_ns", "`ibv_destroy_qp`"},
	{"nccl_connect_ns", "NCCL's connection set-up (create → query)"},
}

func sizeText(n int) string {
	switch {
	case n == 0:
		return ""
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf(" %d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf(" %d KiB", n>>10)
	}
	return fmt.Sprintf(" %d B", n)
}

// ctrlStat is the repetitions' summary of one verb on one side.
func ctrlStat(run *Run, side, tool, metric string, size int) Stat {
	var vs []float64
	for _, s := range run.Samples {
		if s.Side == side && s.Key.Tool == tool && s.Key.Metric == metric && s.Key.Size == size {
			vs = append(vs, s.Value)
		}
	}
	return Summarize(vs)
}

func ctrlSizes(run *Run, metric string) []int {
	m := map[int]bool{}
	for _, s := range run.Samples {
		if s.Key.Tool == "ctrl" && s.Key.Metric == metric {
			m[s.Key.Size] = true
		}
	}
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// ControlTarget is the time target of one verb: ours ≤ 1.10× the baseline's
// median; the A/A band (up2/up) says which misses are noise.
const ControlTarget = 1.10

// writeControl writes the control path's section (issue 34 part 2).
func writeControl(p func(string, ...any), runs []ControlRun, notes string) {
	if len(runs) == 0 {
		return
	}
	p("## The control path: libusb4_rdma against librxe and the module's C provider\n\n")
	p("`BENCH_PLAN=control` (and a part of `BENCH_PLAN=usb4`): `tests/bench/ctrlbench.c` through each side, one process\n")
	p("per side and repetition, interleaved with the order rotated (`tests/bench/guest-ctrl.sh`). Each figure is the\n")
	p("median of one process's iterations (30, or 6 for opens and 64 MiB registrations); the table gives the median\n")
	p("(min–max) over the repetitions. NCCL's connection set-up is `tests/usb4/ncclpattern.c`'s receiver QP (512/256\n")
	p("WRs, 1 SGE, no inline) on DEV0 walked INIT → RTR → RTS towards a QP on DEV1, then `ibv_query_qp`. System calls:\n")
	p("one run per side under `strace -f` with ctrlbench's markers around every timed call, counted on every thread\n")
	p("of the process between a verb's markers, per call. Targets: every verb ≤ %.2f× the baseline's time; system\n", ControlTarget)
	p("calls per verb ≤ the baseline's + 1.\n\n")
	if strings.TrimSpace(notes) != "" {
		p("### Control path: summary and analysis\n\n%s\n", strings.TrimSpace(notes))
	}
	for _, c := range runs {
		run := c.Run
		baseName := map[string]string{SideLibrxe: "librxe", SideUp: "the C provider"}[c.Base]
		where := "rxe (tests/vm)"
		if c.Name != "rxe" {
			where = "the usb4 bed, " + c.Name
		}
		p("### Control path on %s: libusb4_rdma / %s\n\n", where, baseName)
		writeContext(p, run)
		hasUp2, hasBase := has(run, SideUp2), has(run, SideBase)
		p("| verb | libusb4_rdma median (min–max) | n | %s median (min–max) | n | ratio | best-run ratio | ≤ %.2f |", baseName, ControlTarget)
		sep := "|---|---|---|---|---|---|---|---|"
		if hasUp2 {
			p(" A/A (C provider twin / C provider) |")
			sep += "---|"
		}
		if hasBase {
			p(" before the change (base) median (min–max) | after / before |")
			sep += "---|---|"
		}
		p("\n%s\n", sep)
		met, missed := 0, 0
		var misses []string
		for _, v := range ctrlVerbs {
			for _, size := range ctrlSizes(run, v.metric) {
				ours := ctrlStat(run, SideOurs, "ctrl", v.metric, size)
				base := ctrlStat(run, c.Base, "ctrl", v.metric, size)
				if ours.N == 0 && base.N == 0 {
					continue
				}
				ratio, best := math.NaN(), math.NaN()
				if ours.N > 0 && base.N > 0 && base.Median > 0 {
					ratio = ours.Median / base.Median
					best = ours.Min / base.Min
				}
				verdict := "–"
				if !math.IsNaN(ratio) {
					if ratio <= ControlTarget {
						verdict = "met"
						met++
					} else {
						verdict = "**missed**"
						missed++
						misses = append(misses, fmt.Sprintf("%s%s %.2f×", strings.TrimSuffix(strings.TrimSuffix(v.metric, "_ns"), "_us"), sizeText(size), ratio))
					}
				}
				p("| %s%s | %s | %d | %s | %d | %s | %s | %s |", v.what, sizeText(size), cell(ours), ours.N, cell(base), base.N,
					ratioText(ratio), ratioText(best), verdict)
				if hasUp2 {
					up2 := ctrlStat(run, SideUp2, "ctrl", v.metric, size)
					aa := math.NaN()
					if up2.N > 0 && base.N > 0 && base.Median > 0 {
						aa = up2.Median / base.Median
					}
					p(" %s |", ratioText(aa))
				}
				if hasBase {
					b := ctrlStat(run, SideBase, "ctrl", v.metric, size)
					ab := math.NaN()
					if b.N > 0 && ours.N > 0 && b.Median > 0 {
						ab = ours.Median / b.Median
					}
					p(" %s | %s |", cell(b), ratioText(ab))
				}
				p("\n")
			}
		}
		p("\nTime target (≤ %.2f× %s, medians): met for %d verbs, missed for %d", ControlTarget, baseName, met, missed)
		if len(misses) > 0 {
			p(": %s", strings.Join(misses, ", "))
		}
		p(".\n\n")
		writeFirstOpen(p, run, c.Base, baseName)
		writeCtrlSyscalls(p, run, c.Base, baseName, hasBase)
		writeFailuresOf(p, run, "ctrl", "ctrlsc")
		if c.Own && c.Name != "rxe" {
			writeEvent(p, run)
		}
	}
}

// writeFirstOpen: where the first open's time goes. Side oursP dlopens the Go
// part by itself before its first open: that dlopen is the runtime's start
// (the rest of oursP's process differs from ours: its runtime started under the
// application's signal mask, not the gate's, so only the dlopen is used).
func writeFirstOpen(p func(string, ...any), run *Run, base, baseName string) {
	ours := ctrlStat(run, SideOurs, "ctrl", "open_first_us", 0)
	pre := ctrlStat(run, SideOursPre, "ctrl", "preload_us", 0)
	b := ctrlStat(run, base, "ctrl", "open_first_us", 0)
	later := ctrlStat(run, SideOurs, "ctrl", "open_ns", 0)
	if ours.N == 0 {
		return
	}
	p("First `ibv_open_device` of a process, µs (median (min–max) over the repetitions):\n\n")
	p("| part | µs |\n|---|---|\n")
	p("| %s, the first open | %s |\n", baseName, cell(b))
	p("| ours, the first open | %s |\n", cell(ours))
	if pre.N > 0 {
		p("| of which: dlopen of the Go part, i.e. its runtime's start (side oursP: a process that dlopens `libusb4_rdma-go.so` by itself) | %s |\n", cell(pre))
		p("| of which, the rest (medians subtracted): the front's load checks, the first calls into Go of the opening thread and the 2 pre-warm threads, `usb4goStart`, the device's probes and its ucontext | %s |\n", num(ours.Median-pre.Median))
	}
	if later.N > 0 {
		p("| ours, a later open of the same device | %s |\n", cell(Stat{N: later.N, Median: later.Median / 1e3, Min: later.Min / 1e3, Max: later.Max / 1e3}))
	}
	p("\n")
}

// ctrlSC is one verb's system calls per call on one side, prefix "sc" (the
// calling thread) or "sco" (the process's other threads): the total and by name
// (medians over the strace runs).
func ctrlSC(run *Run, side, prefix, verb string, size int) (float64, map[string]float64, bool) {
	tot := ctrlStat(run, side, "ctrlsc", prefix+"_"+verb, size)
	if tot.N == 0 {
		return math.NaN(), nil, false
	}
	by := map[string][]float64{}
	for _, s := range run.Samples {
		if s.Side == side && s.Key.Tool == "ctrlsc" && s.Key.Size == size && strings.HasPrefix(s.Key.Metric, prefix+"_"+verb+".") {
			n := strings.TrimPrefix(s.Key.Metric, prefix+"_"+verb+".")
			by[n] = append(by[n], s.Value)
		}
	}
	out := map[string]float64{}
	for n, vs := range by {
		// A name missing from a run counts 0 there.
		for len(vs) < tot.N {
			vs = append(vs, 0)
		}
		out[n] = Summarize(vs).Median
	}
	return tot.Median, out, true
}

func writeCtrlSyscalls(p func(string, ...any), run *Run, base, baseName string, hasBase bool) {
	type vs struct {
		verb string
		size int
	}
	var rows []vs
	seen := map[vs]bool{}
	for _, v := range ctrlVerbs {
		verb := strings.TrimSuffix(strings.TrimSuffix(v.metric, "_ns"), "_us")
		for _, size := range []int{0, 4096, 1 << 20, 64 << 20} {
			for _, s := range run.Samples {
				if s.Key.Tool == "ctrlsc" && s.Key.Metric == "sc_"+verb && s.Key.Size == size && !seen[vs{verb, size}] {
					seen[vs{verb, size}] = true
					rows = append(rows, vs{verb, size})
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	p("System calls per call of the verb (`strace -f`, medians of the runs): on the thread that called it, and on the\n")
	p("process's other threads meanwhile (for ours: the Go runtime's, woken by the call or on their own timers; strace\n")
	p("slows the call many times over, so these are an upper bound):\n\n")
	p("| verb | libusb4_rdma, calling thread | %s, calling thread | ≤ %s + 1 | libusb4_rdma by name | %s by name | libusb4_rdma, other threads | %s, other threads |", baseName, baseName, baseName, baseName)
	sep := "|---|---|---|---|---|---|---|---|"
	if hasBase {
		p(" before the change (base), calling thread | base by name | base, other threads |")
		sep += "---|---|---|"
	}
	p("\n%s\n", sep)
	met, missed := 0, 0
	var misses []string
	for _, r := range rows {
		o, ob, ok1 := ctrlSC(run, SideOurs, "sc", r.verb, r.size)
		b, bb, ok2 := ctrlSC(run, base, "sc", r.verb, r.size)
		oo, _, _ := ctrlSC(run, SideOurs, "sco", r.verb, r.size)
		bo, _, _ := ctrlSC(run, base, "sco", r.verb, r.size)
		verdict := "–"
		if ok1 && ok2 && r.verb != "open_first" {
			if o <= b+1 {
				verdict = "met"
				met++
			} else {
				verdict = fmt.Sprintf("**missed** by %s", num(o-b-1))
				missed++
				misses = append(misses, fmt.Sprintf("%s%s %s against %s", r.verb, sizeText(r.size), num(o), num(b)))
			}
		}
		p("| %s%s | %s | %s | %s | %s | %s | %s | %s |", r.verb, sizeText(r.size), numOrDash(o), numOrDash(b), verdict,
			topNames(ob, 8, 0.05), topNames(bb, 8, 0.05), numOrDash(oo), numOrDash(bo))
		if hasBase {
			x, xb, _ := ctrlSC(run, SideBase, "sc", r.verb, r.size)
			xo, _, _ := ctrlSC(run, SideBase, "sco", r.verb, r.size)
			p(" %s | %s | %s |", numOrDash(x), topNames(xb, 8, 0.05), numOrDash(xo))
		}
		p("\n")
	}
	p("\nSystem-call target (calling thread ≤ %s's + 1; the first open is not held to it): met for %d verbs, missed for %d", baseName, met, missed)
	if len(misses) > 0 {
		p(": %s", strings.Join(misses, "; "))
	}
	p(".\n\n")
}

func numOrDash(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return num(v)
}

// writeFailuresOf lists the failures of the given tools.
func writeFailuresOf(p func(string, ...any), run *Run, tools ...string) {
	var lines []string
	for _, e := range run.Fails {
		for _, t := range tools {
			if e.Fields["tool"] == t {
				lines = append(lines, fmt.Sprintf("- side %s, %s, rep %s: %s (exit %s)%s", e.Fields["side"], t, e.Fields["rep"],
					e.Fields["why"], e.Fields["rc"], detail(e.Detail)))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	p("Failures:\n\n%s\n\n", strings.Join(lines, "\n"))
}

func detail(d []string) string {
	if len(d) == 0 {
		return ""
	}
	return ": `" + strings.Join(d, "` `") + "`"
}

// readControlNotes reads results/notes-control.md.
func readControlNotes(results string) (string, error) {
	b, err := os.ReadFile(filepath.Join(results, "notes-control.md"))
	if os.IsNotExist(err) {
		return "", nil
	}
	return strings.TrimSpace(string(b)) + "\n", err
}

// writeEvent writes the event-driven section of a usb4 run (issue 34 part 1):
// gloo's pattern per provider and mode (tool gloo_<mode>: the seconds of a
// run, and the failed runs), and perftest's event mode (tools <tool>-e).
func writeEvent(p func(string, ...any), run *Run) {
	type tc struct{ tool, metric string }
	var gloo, perf []tc
	seen := map[tc]bool{}
	for _, s := range append(append([]Sample(nil), run.Samples...), failSamples(run)...) {
		k := tc{s.Key.Tool, s.Key.Metric}
		if seen[k] {
			continue
		}
		switch {
		case strings.HasPrefix(s.Key.Tool, "gloo_"):
			k.metric = "" // one row per mode
			if !seen[k] {
				seen[k] = true
				gloo = append(gloo, k)
			}
		case strings.HasSuffix(s.Key.Tool, "-e") && (s.Key.Metric == "t_typical_us" || s.Key.Metric == "bw_avg_mbps"):
			seen[k] = true
			perf = append(perf, k)
		}
	}
	if len(gloo) == 0 && len(perf) == 0 {
		return
	}
	sort.Slice(gloo, func(i, j int) bool { return gloo[i].tool < gloo[j].tool })
	sort.Slice(perf, func(i, j int) bool { return perf[i].tool < perf[j].tool })
	p("#### Event-driven completions (issue 34): ours / the C provider, same boot\n\n")
	fails := func(side, tool string) int {
		n := 0
		for _, e := range run.Fails {
			if e.Fields["side"] == side && e.Fields["tool"] == tool {
				n++
			}
		}
		return n
	}
	if len(gloo) > 0 {
		p("gloo's pattern (`tests/usb4/gloopattern.c`: two ranks, one completion channel, RDMA_WRITE_WITH_IMM; 10 iterations of\n")
		p("allreduce ring, broadcast and barrier over 16384 elements, every element checked): rank 0's seconds for the collectives of\n")
		p("a passed run (the whole program's, with both processes' opens, in brackets); *poll* is the same exchange with the CQ busy-polled:\n\n")
		p("| mode | ours passed | ours s median (min–max) | C provider passed | C provider s median (min–max) | ratio | best-run ratio | ≤ %.2f | whole runs, ours / C provider | the module's resends per run, ours / C provider (median, max) |\n|---|---|---|---|---|---|---|---|---|---|\n", ControlTarget)
		for _, k := range gloo {
			o := ctrlStat(run, SideOurs, k.tool, "coll_s", 16384)
			u := ctrlStat(run, SideUp, k.tool, "coll_s", 16384)
			ow := ctrlStat(run, SideOurs, k.tool, "run_s", 16384)
			uw := ctrlStat(run, SideUp, k.tool, "run_s", 16384)
			of, uf := fails(SideOurs, k.tool), fails(SideUp, k.tool)
			ratio, best, verdict := math.NaN(), math.NaN(), "–"
			if o.N > 0 && u.N > 0 {
				ratio, best = o.Median/u.Median, o.Min/u.Min
				verdict = "met"
				if ratio > ControlTarget {
					verdict = "**missed**"
				}
			}
			ore := ctrlStat(run, SideOurs, k.tool, "retransmits", 16384)
			ure := ctrlStat(run, SideUp, k.tool, "retransmits", 16384)
			resends := "–"
			if ore.N > 0 || ure.N > 0 {
				resends = fmt.Sprintf("%s, %s / %s, %s", num(ore.Median), num(ore.Max), num(ure.Median), num(ure.Max))
			}
			p("| %s | %d of %d | %s | %d of %d | %s | %s | %s | %s | %s / %s | %s |\n", strings.TrimPrefix(k.tool, "gloo_"), o.N, o.N+of, cell(o),
				u.N, u.N+uf, cell(u), ratioText(ratio), ratioText(best), verdict, num(ow.Median), num(uw.Median), resends)
		}
		p("\n")
		for _, in := range run.Info {
			if in["what"] == "gloo_summary" {
				p("- %s\n", in["text"])
			}
		}
		var lines []string
		for _, e := range run.Fails {
			if strings.HasPrefix(e.Fields["tool"], "gloo_") {
				lines = append(lines, fmt.Sprintf("- %s, %s, run %s failed%s", e.Fields["side"], e.Fields["tool"], e.Fields["rep"], detail(e.Detail)))
			}
		}
		if len(lines) > 0 {
			p("\nFailed runs, placed:\n\n%s\n", strings.Join(lines, "\n"))
		}
		p("\n")
	}
	if len(perf) > 0 {
		invalid := func(side, tool string) int {
			n := 0
			for _, s := range run.Invalid {
				if s.Side == side && s.Key.Tool == tool && (s.Key.Metric == "t_typical_us" || s.Key.Metric == "bw_avg_mbps") {
					n++
				}
			}
			return n
		}
		p("perftest in event mode (`-e`), latency t_typical µs (2 B) and bandwidth MB/s (64 KiB); *failed*: the run ended in an\n")
		p("error; *no figure*: it passed but perftest printed inf or 0 (its clock calibration failed under TCG):\n\n")
		p("| tool | ours median (min–max) | n | failed | no figure | C provider median (min–max) | n | failed | no figure | ratio | A/A |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, k := range perf {
			size := 2
			if k.metric == "bw_avg_mbps" {
				size = 65536
			}
			o := ctrlStat(run, SideOurs, k.tool, k.metric, size)
			u := ctrlStat(run, SideUp, k.tool, k.metric, size)
			u2 := ctrlStat(run, SideUp2, k.tool, k.metric, size)
			ratio, aa := math.NaN(), math.NaN()
			if o.N > 0 && u.N > 0 && u.Median > 0 {
				ratio = o.Median / u.Median
			}
			if u2.N > 0 && u.N > 0 && u.Median > 0 {
				aa = u2.Median / u.Median
			}
			p("| %s | %s | %d | %d | %d | %s | %d | %d | %d | %s | %s |\n", k.tool, cell(o), o.N, fails(SideOurs, k.tool), invalid(SideOurs, k.tool),
				cell(u), u.N, fails(SideUp, k.tool), invalid(SideUp, k.tool), ratioText(ratio), ratioText(aa))
		}
		p("\n")
	}
}

// failSamples gives each failed run's tool a placeholder, so that a tool whose
// every run failed still gets its row.
func failSamples(run *Run) []Sample {
	var out []Sample
	for _, e := range run.Fails {
		t := e.Fields["tool"]
		m := "run_s"
		switch {
		case strings.HasSuffix(t, "_lat-e"):
			m = "t_typical_us"
		case strings.HasSuffix(t, "_bw-e"):
			m = "bw_avg_mbps"
		}
		out = append(out, Sample{Side: e.Fields["side"], Key: Key{Tool: t, Metric: m}})
	}
	return out
}
