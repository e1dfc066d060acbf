package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Sides of the usb4 plan (tests/bench/guest-usb4.sh): the module's own C provider
// twice (SideUp2 against SideUp is the plan's A/A band), ours with its defaults
// (kernel commands on every tree since issue 23: DV queues are left to
// applications), ours with its own DV send queues (dv_send on), and ours forced to
// kernel commands.
const (
	SideUp     = "up"
	SideUp2    = "up2"
	SideOursKC = "ourskc"
	SideOursDV = "oursdv"
	// tests/usb4/dvconsumer.c's pairs through upstream: kernel commands and
	// the application's own DV queue (the module's DV cost, no provider's).
	SideAppKC = "appkc"
	SideAppDV = "appdv"
)

// USB4Run is one tree's boot of the usb4 plan (results/usb4-<tree>.log).
type USB4Run struct {
	Tree string
	Run  *Run
}

// loadUSB4 reads every results/usb4-*.log, hellas-main first, then by name.
func loadUSB4(results string) ([]USB4Run, error) {
	runs, err := loadNamedRuns(results, "usb4", "hellas-main")
	var out []USB4Run
	for _, nr := range runs {
		out = append(out, USB4Run{Tree: nr.name, Run: nr.run})
	}
	return out, err
}

// usb4Names labels the sides in tables and plots.
var usb4Names = map[string]string{
	SideUp: "upstream", SideUp2: "upstream (A/A twin)", SideOurs: "libusb4_rdma",
	SideOursKC: "libusb4_rdma, kernel commands forced",
	SideOursDV: "libusb4_rdma, its own DV send queues (dv_send)",
	SideAppKC:  "an application, kernel commands (upstream)",
	SideAppDV:  "an application, its own DV queue (upstream)",
}

// backendOf names what ours runs on a tree with its defaults: kernel commands
// everywhere (a tree's DV queues are the applications', DESIGN.md decision 4).
func backendOf(string) string { return "kernel commands" }

// runBackend is backendOf for a run: a run from before issue 23 (its ours side
// on a DV tree posted through DV) says so in its sides, by having ourskc.
func runBackend(u USB4Run) string {
	if has(u.Run, SideOursKC) && !has(u.Run, SideOursDV) {
		return "DV send queues (the default before issue 23)"
	}
	return backendOf(u.Tree)
}

// has says whether run has samples of side.
func has(run *Run, side string) bool {
	for _, s := range run.Samples {
		if s.Side == side {
			return true
		}
	}
	return false
}

// pairNames is the names map of table() and SeriesFor for cand against base.
func pairNames(cand, base string) map[string]string {
	return map[string]string{SideOurs: usb4Names[cand], SideLibrxe: usb4Names[base]}
}

// usb4Bands is the A/A band of a run per class: the largest |up2/up − 1|.
func usb4Bands(run *Run) map[string]band {
	if !has(run, SideUp2) {
		return nil
	}
	rows := CompareSides(run, SideUp2, SideUp)
	out := map[string]band{}
	for _, c := range classes {
		sel := Select(rows, c.match)
		out[c.name] = band{median: NoiseBand(sel, MedianRatio), best: NoiseBand(sel, BestRunRatio)}
	}
	return out
}

// USB4Plots draws latency and bandwidth of the first run that has ours and
// upstream, ours solid, upstream dashed.
func USB4Plots(runs []USB4Run) (latency, bandwidth string, ok bool) {
	for _, u := range runs {
		if !has(u.Run, SideOurs) || !has(u.Run, SideUp) {
			continue
		}
		rows := CompareSides(u.Run, SideOurs, SideUp)
		names := pairNames(SideOurs, SideUp)
		what := fmt.Sprintf("usb4 %s: libusb4_rdma (%s, solid) vs upstream C provider (dashed)", u.Tree, runBackend(u))
		return PlotSVG("Latency (t_typical) — "+what, "µs (log scale)", SeriesFor(rows, isLat, names)),
			PlotSVG("Bandwidth (BW average) — "+what, "MB/s (log scale)", SeriesFor(rows, isBW, names)), true
	}
	return "", "", false
}

// usb4Targets are issue 15's targets; they read ratios of ours (or ours forced to
// kernel commands) against upstream.
func usb4Targets(strict bool) []*Target {
	lat, bw := 1.00, 1.00
	title := "%s ratio %s 1.00 at every size"
	cmp := []string{"≤", "≥"}
	if strict {
		title = "%s ratio %s 1.00 at every size (strictly better: the backend removes system calls)"
		cmp = []string{"<", ">"}
	}
	return []*Target{
		{ID: "latency", Title: fmt.Sprintf(title, "Latency (t_typical)", cmp[0]), LowerBetter: true, Limit: lat, Match: isLat},
		{ID: "bandwidth", Title: fmt.Sprintf(title, "Bandwidth", cmp[1]), Limit: bw, Match: isBW},
		{ID: "msgrate", Title: fmt.Sprintf(title, "Message rate (8 B, post list)", cmp[1]), Limit: bw, Match: isRate},
	}
}

// sysPerMsg is one side's system calls per message of one tool and end.
type sysPerMsg struct {
	Side, Tool, End string
	Total           Stat
	ByName          map[string]float64 // median per message
	Loaded          string
}

// SysPerMessage turns the strace samples of a run (tool=sys_<tool>, metric
// sc_<end>_<syscall>, two iteration counts n per repetition) into per-message
// figures: (calls at the larger n − calls at the smaller n) / (difference of n),
// per repetition, then the median. The same for the module's debugfs counters
// (metric dbg_<file>.<key>, end "module").
func SysPerMessage(run *Run) []sysPerMsg {
	type rk struct {
		side, tool string
		rep        int
	}
	type vk struct {
		metric string
		n      int
	}
	vals := map[rk]map[vk]float64{}
	ns := map[rk]map[int]bool{}
	loaded := map[string]string{}
	for _, s := range run.Samples {
		if !strings.HasPrefix(s.Key.Tool, "sys_") || s.N <= 0 {
			continue
		}
		k := rk{s.Side, strings.TrimPrefix(s.Key.Tool, "sys_"), s.Rep}
		if vals[k] == nil {
			vals[k], ns[k] = map[vk]float64{}, map[int]bool{}
		}
		vals[k][vk{s.Key.Metric, s.N}] += s.Value
		ns[k][s.N] = true
		if s.Loaded != "" {
			loaded[s.Side+"/"+k.tool] = s.Loaded
		}
	}
	type gk struct{ side, tool, end string }
	per := map[gk]map[string][]float64{}
	for k, v := range vals {
		if len(ns[k]) != 2 {
			continue
		}
		var n []int
		for x := range ns[k] {
			n = append(n, x)
		}
		sort.Ints(n)
		metrics := map[string]bool{}
		for m := range v {
			metrics[m.metric] = true
		}
		for m := range metrics {
			end, name := "module", strings.TrimPrefix(m, "dbg_")
			switch {
			case !strings.HasPrefix(m, "dbg_") && !strings.HasPrefix(m, "sc_"):
				end, name = "note", m
			case strings.HasPrefix(m, "sc_"):
				end, name, _ = strings.Cut(strings.TrimPrefix(m, "sc_"), "_")
			}
			d := (v[vk{m, n[1]}] - v[vk{m, n[0]}]) / float64(n[1]-n[0])
			g := gk{k.side, k.tool, end}
			if per[g] == nil {
				per[g] = map[string][]float64{}
			}
			per[g][name] = append(per[g][name], d)
		}
	}
	var out []sysPerMsg
	for g, names := range per {
		r := sysPerMsg{Side: g.side, Tool: g.tool, End: g.end, ByName: map[string]float64{}, Loaded: loaded[g.side+"/"+g.tool]}
		for name, vs := range names {
			if name == "total" {
				r.Total = Summarize(vs)
				continue
			}
			r.ByName[name] = Summarize(vs).Median
		}
		out = append(out, r)
	}
	order := map[string]int{SideUp: 0, SideOurs: 1, SideOursDV: 2, SideOursKC: 3, SideUp2: 4}
	// Every end and side has its own rank (an end missing here, such as microbench's
	// "pair" and "note", tied with "cli" and made the order depend on the map's).
	endOrder := map[string]int{"cli": 0, "pair": 0, "srv": 1, "module": 2, "note": 3}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tool != b.Tool {
			return a.Tool > b.Tool // ib_write_lat first
		}
		if a.End != b.End {
			if endOrder[a.End] != endOrder[b.End] {
				return endOrder[a.End] < endOrder[b.End]
			}
			return a.End < b.End
		}
		if order[a.Side] != order[b.Side] {
			return order[a.Side] < order[b.Side]
		}
		return a.Side < b.Side
	})
	return out
}

// topNames lists the largest per-message counts of m, at most k of them, that
// reach at least min.
func topNames(m map[string]float64, k int, min float64) string {
	type nv struct {
		n string
		v float64
	}
	var all []nv
	for n, v := range m {
		if math.Abs(v) >= min {
			all = append(all, nv{n, v})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if math.Abs(all[i].v) != math.Abs(all[j].v) {
			return math.Abs(all[i].v) > math.Abs(all[j].v)
		}
		return all[i].n < all[j].n
	})
	var parts []string
	for i, x := range all {
		if i == k {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s", x.n, num(x.v)))
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// writeUSB4 writes the usb4 section: per tree the context, the provider check,
// the targets, the A/A band, the tables, system calls per message, footprint.
func writeUSB4(p func(string, ...any), runs []USB4Run, notes string) {
	p("## usb4: libusb4_rdma against the module's own C provider (real thunderbolt_ibverbs)\n\n")
	p("`BENCH_PLAN=usb4` (part of `make bench` when the module source is there): one boot of the usb4 bed per tree\n")
	p("(tests/usb4: the unmodified module of that tree on tbloop, two hosts joined by a loopback cable, under qemu TCG),\n")
	p("running `tests/bench/guest-usb4.sh`. The baseline, *upstream*, is the module's C provider as its users build it:\n")
	p("hellas-main's `packaging/rdma-core-patches` applied to Debian 12's rdma-core 44 source package\n")
	p("(`tests/bench/upstream-provider.sh`). Both providers register the driver name `usb4_rdma`; each process\n")
	p("loads exactly one through its own `RDMAV_DRIVERS` (libibverbs 44 has no per-process config directory),\n")
	p("and the perftest server's /proc/<pid>/maps says which one it mapped (*loaded*: `up`, `ours`; `+mmapN`: N\n")
	p("mappings of /dev/infiniband/uverbs*, i.e. a DV queue or CQ ring; kernel commands map none).\n")
	p("Sides run interleaved per repetition, their order rotated and reversed every other repetition.\n")
	p("*upstream (A/A twin)* is the same upstream provider as a third side in the same repetitions: its ratio\n")
	p("to upstream is the noise band of this plan. perftest runs with `-u 20` (the module's ACKs under TCG come\n")
	p("later than perftest's default timeout allows). Latency: t_typical of 200 exchanges up to 2 KiB, 100 to 8 KiB,\n")
	p("30 above; bandwidth: about 4 MiB per run (8–500 messages, `-n` per QP); message rate: 8 B, post list 16,\n")
	p("2000 messages. System calls: `strace -f -c` on both ends of ib_write_lat and ib_send_lat (8 B) at two\n")
	p("iteration counts; per message = difference of the calls / difference of the iterations, so setup and\n")
	p("teardown cancel out; the module's debugfs counters are read before and after each such run the same way.\n\n")
	if _, _, ok := USB4Plots(runs); ok {
		p("![usb4 latency, ours against upstream](benchmarks-usb4-latency.svg)\n\n")
		p("![usb4 bandwidth, ours against upstream](benchmarks-usb4-bandwidth.svg)\n\n")
	}
	if strings.TrimSpace(notes) != "" {
		p("### usb4: summary and analysis\n\n%s\n", strings.TrimSpace(notes))
	}
	for _, u := range runs {
		run := u.Run
		p("### usb4 on %s: ours = %s\n\n", u.Tree, runBackend(u))
		writeContext(p, run)
		writeUSB4Providers(p, run)
		bands := usb4Bands(run)
		if bands != nil {
			p("A/A band (upstream twin / upstream, largest |ratio − 1| over the cases of a class, medians; best runs):")
			for _, c := range classes {
				b := bands[c.name]
				if math.IsNaN(b.median) {
					continue
				}
				p(" %s %.1f %% (%.1f %%);", c.name, 100*b.median, 100*b.best)
			}
			p(" a ratio inside its class's band is not a difference.\n\n")
		}
		type cmpSide struct {
			cand   string
			strict bool
		}
		var cands []cmpSide
		if has(run, SideOursKC) {
			cands = append(cands, cmpSide{SideOursKC, false})
		}
		if has(run, SideOurs) {
			cands = append(cands, cmpSide{SideOurs, runBackend(u) != "kernel commands"})
		}
		if has(run, SideOursDV) {
			// Issue 23: latency first, so DV must match the kernel-command
			// path (≤ 1.00), not beat it.
			cands = append(cands, cmpSide{SideOursDV, false})
		}
		p("#### Targets (%s)\n\n| candidate | target | status | result | A/A band of the class |\n|---|---|---|---|---|\n", u.Tree)
		for _, c := range cands {
			rows := CompareSides(run, c.cand, SideUp)
			for _, t := range usb4Targets(c.strict) {
				t.Check(rows)
				status := t.Status.String()
				if c.strict && t.Status == Met && t.Worst.Ratio == 1 {
					status = "**missed** (equal, not better)"
				}
				if t.Status == Missed {
					status = "**missed** by " + t.amount(t.Excess)
				}
				bandText := "–"
				if bands != nil {
					cls := map[string]string{"latency": "latency", "bandwidth": "bandwidth", "msgrate": "message rate"}[t.ID]
					if b, ok := bands[cls]; ok && !math.IsNaN(b.median) {
						bandText = fmt.Sprintf("%.1f %%", 100*b.median)
						if t.Status == Missed && t.Excess <= b.median {
							bandText += " (miss within noise)"
						}
					}
				}
				p("| %s | %s | %s | %s | %s |\n", usb4Names[c.cand], t.Title, status, t.Verdict(), bandText)
			}
		}
		p("\n")
		writeSyscalls(p, run, runBackend(u))
		writeEvent(p, run)
		writeDVPremium(p, run)
		for _, c := range cands {
			rows := CompareSides(run, c.cand, SideUp)
			names := pairNames(c.cand, SideUp)
			p("#### Latency (t_typical, µs), %s / upstream\n\n", usb4Names[c.cand])
			for _, tool := range toolsOf(rows, isLat) {
				p("%s:\n\n", tool)
				table(p, Select(rows, func(k Key) bool { return isLat(k) && k.Tool == tool }), names, "size")
			}
			p("#### Bandwidth (BW average, MB/s), %s / upstream\n\n", usb4Names[c.cand])
			for _, tool := range toolsOf(rows, isBW) {
				for _, q := range qpsOf(rows, tool, isBW) {
					p("%s, %d QP:\n\n", tool, q)
					table(p, Select(rows, func(k Key) bool { return isBW(k) && k.Tool == tool && k.QPs == q }), names, "size")
				}
			}
			p("#### Message rate (8 B, post list 16, Mpps), %s / upstream\n\n", usb4Names[c.cand])
			table(p, Select(rows, isRate), names, "case")
			p("#### Per-call cost, first open, footprint, %s / upstream\n\n", usb4Names[c.cand])
			p("microbench (`post_ns`, `poll_hit_ns`, `pair_ns`, `poll_empty_ns`, `load_us`, `open_us`), footprint.c after\n")
			p("`ibv_get_device_list` (`list_*`) and after the first open and a PD (`open_*`), ib_write_bw 64 KiB peak RSS/threads (`client_*`, `server_*`):\n\n")
			table(p, Select(rows, func(k Key) bool {
				return k.Tool == "micro" || k.Tool == "footprint" || k.Tool == "proc"
			}), names, "case")
			diffs(p, Select(rows, func(k Key) bool { return k.Tool == "footprint" || k.Tool == "proc" }))
		}
		if has(run, SideUp2) {
			rows := CompareSides(run, SideUp2, SideUp)
			p("#### A/A: upstream twin / upstream (every perftest case)\n\n")
			table(p, Select(rows, func(k Key) bool { return isLat(k) || isBW(k) || isRate(k) }), pairNames(SideUp2, SideUp), "case")
		}
		writeFailures(p, run)
	}
}

// writeSyscalls prints the per-message system calls and module counters, and
// checks the targets on them: kernel commands ≤ upstream's count; DV ≤ 1 per
// ping-pong message and ≈ 0 per streamed one. backend is what the run's ours
// side posted through (runBackend).
func writeSyscalls(p func(string, ...any), run *Run, backend string) {
	rows := SysPerMessage(run)
	p("#### System calls per message (`strace -f -c`)\n\n")
	if len(rows) == 0 {
		p("No data.\n\n")
		return
	}
	p("*settled pair*: microbench with `MICROBENCH_SETTLE_US` posts one 8 B WRITE, sleeps 5 ms in poll(2) (left out of\n")
	p("the count) and then polls its completion, so the count is one post + one completion without empty polls: the\n")
	p("figure the system-call targets are read on. perftest rows: one message = one iteration of a busy-polling tool\n")
	p("(ib_write_lat: each end posts one WRITE and polls for it; ib_send_lat: each end posts one SEND and one receive\n")
	p("and polls), so they add the empty polls of the wait, whose number follows the latency and the poll loop's speed.\n")
	p("*settled stream*: the same with a burst of WRITEs per iteration, each its own `ibv_post_send`, then the settle,\n")
	p("then `ibv_poll_cq` for the ones still missing; per message = per WRITE.\n")
	p("*cli*/*srv*/*pair*: the process (all threads); *module*: the debugfs counters of thunderbolt_ibverbs that moved, per message.\n\n")
	p("| tool | end | side | loaded | calls per message, median (min–max) | largest by name, per message |\n|---|---|---|---|---|---|\n")
	upTotal := map[string]float64{}
	for _, r := range rows {
		if r.Side == SideUp && r.End != "module" {
			upTotal[r.Tool+"/"+r.End] = r.Total.Median
		}
	}
	notes := map[string]sysPerMsg{}
	for _, r := range rows {
		if r.End == "note" {
			notes[r.Side+"/"+r.Tool] = r
		}
	}
	for _, r := range rows {
		if r.End == "note" {
			continue
		}
		tot := cell(r.Total)
		if r.End == "module" {
			tot = "–"
		}
		names := map[string]float64{}
		for k, v := range r.ByName {
			if k == "settle" {
				k = "(settle's poll, not counted)"
			}
			names[k] = v
		}
		extra := ""
		if n, ok := notes[r.Side+"/"+r.Tool]; ok && r.End == "pair" {
			extra = fmt.Sprintf("; empty polls per pair %s", num(n.ByName["settled_extra_polls"]))
		}
		tool := r.Tool
		switch tool {
		case "pair":
			tool = "settled pair (microbench)"
		case "stream":
			tool = "settled stream (microbench)"
		}
		p("| %s | %s | %s | %s | %s | %s%s |\n", tool, r.End, usb4Names[r.Side], orDash(r.Loaded), tot, topNames(names, 5, 0.05), extra)
	}
	p("\n")
	var verdicts []string
	for _, r := range rows {
		if r.End != "pair" || r.Side == SideUp || r.Side == SideUp2 || r.Total.N == 0 {
			continue
		}
		up, ok := upTotal[r.Tool+"/"+r.End]
		if !ok {
			continue
		}
		kc := r.Side == SideOursKC || (r.Side == SideOurs && backend == "kernel commands")
		what := "per post + completion"
		if r.Tool == "stream" {
			what = "per streamed message"
		}
		// DV's targets (issue 23): at most one system call for a ping-pong
		// message (its KICK), about none for a streamed one.
		limit, limitText := 0.1, "≈ 0"
		if r.Tool == "pair" && backend != "DV send queues (the default before issue 23)" {
			limit, limitText = 1.0, "≤ 1"
		}
		switch {
		case kc && r.Total.Median <= up:
			verdicts = append(verdicts, fmt.Sprintf("%s: %s ≤ upstream %s %s, met", usb4Names[r.Side], num(r.Total.Median), num(up), what))
		case kc:
			verdicts = append(verdicts, fmt.Sprintf("%s: %s > upstream %s %s, **missed** by %s (%.0f %%)",
				usb4Names[r.Side], num(r.Total.Median), num(up), what, num(r.Total.Median-up), 100*(r.Total.Median/up-1)))
		case r.Total.Median <= limit:
			verdicts = append(verdicts, fmt.Sprintf("%s: %s %s %s, met", usb4Names[r.Side], num(r.Total.Median), what, limitText))
		default:
			verdicts = append(verdicts, fmt.Sprintf("%s: %s %s, not %s: **missed** (upstream %s)", usb4Names[r.Side], num(r.Total.Median), what, limitText, num(up)))
		}
	}
	if len(verdicts) > 0 {
		p("Targets, on the settled pairs and streams (kernel commands ≤ upstream's count; DV ≤ 1 per ping-pong message, ≈ 0 streaming):\n\n")
		for _, v := range verdicts {
			p("- %s\n", v)
		}
		p("\n")
	}
}

// writeUSB4Providers shows which provider each side's processes mapped, and the
// file that served the microbench's device.
func writeUSB4Providers(p func(string, ...any), run *Run) {
	loaded := map[string]map[string]int{}
	for _, s := range run.Samples {
		// footprint.c's loaded= names every provider file it finds mapped by
		// name, which on usb4 is both providers' file name: not a check here.
		if s.Loaded == "" || s.Key.Tool == "footprint" || s.Key.Tool == "micro" {
			continue
		}
		if loaded[s.Side] == nil {
			loaded[s.Side] = map[string]int{}
		}
		loaded[s.Side][s.Loaded]++
	}
	served := map[string]map[string]int{}
	for _, m := range run.Info {
		if m["what"] != "microbench" || m["side"] == "" {
			continue
		}
		if served[m["side"]] == nil {
			served[m["side"]] = map[string]int{}
		}
		served[m["side"]][m["served"]+" "+m["path"]]++
	}
	want := map[string]string{SideUp: "up", SideUp2: "up", SideOurs: "ours", SideOursKC: "ours", SideOursDV: "ours"}
	wantPath := map[string]string{SideUp: "/upstream/", SideUp2: "/upstream/", SideOurs: "/opt/usb4verbs/libusb4",
		SideOursKC: "/opt/usb4verbs/libusb4", SideOursDV: "/opt/usb4verbs/libusb4"}
	p("Provider check (samples per side; perftest and strace runs: what the server mapped; microbench: the file whose `verbs_device_ops` served):\n\n")
	p("| side | loaded | microbench served | ok |\n|---|---|---|---|\n")
	for _, side := range []string{SideUp, SideOurs, SideOursDV, SideOursKC, SideUp2} {
		if loaded[side] == nil && served[side] == nil {
			continue
		}
		ok := true
		for v := range loaded[side] {
			if v != want[side] && !strings.HasPrefix(v, want[side]+"+") {
				ok = false
			}
		}
		for v := range served[side] {
			if !strings.Contains(v, wantPath[side]) {
				ok = false
			}
		}
		mark := "yes"
		if !ok {
			mark = "**no: results of this side are not its provider's**"
		}
		p("| %s | %s | %s | %s |\n", usb4Names[side], counts(loaded[side]), counts(served[side]), mark)
	}
	p("\n")
}

// pairRow is the pair_ns row of cand against base, and whether run has one.
func pairRow(run *Run, cand, base string) (Row, bool) {
	for _, r := range CompareSides(run, cand, base) {
		if r.Tool == "micro" && r.Metric == "pair_ns" && !math.IsNaN(r.Ratio) {
			return r, true
		}
	}
	return Row{}, false
}

// writeDVPremium sets ours' DV post + completion pair against the module's
// own: the same pair from an application's DV queue through upstream, which
// never touches DV, against that application's kernel commands (issue 23).
// The module's ratio is the best a provider's DV path can reach; ours over it
// is what the provider adds.
func writeDVPremium(p func(string, ...any), run *Run) {
	app, okApp := pairRow(run, SideAppDV, SideAppKC)
	ours, okOurs := pairRow(run, SideOursDV, SideUp)
	if !okApp {
		return
	}
	p("#### A DV completion's cost in the module itself\n\n")
	p("`tests/usb4/dvconsumer.c` with `DVCONSUMER_PAIRS`: back-to-back pairs (one signaled 8 B RDMA WRITE, posted and\n")
	p("polled until its completion) in one process, first on kernel commands, then on the application's own DV queue\n")
	p("(produce, KICK, its CQ ring), through the module's C provider, which never touches DV: the module's price of a\n")
	p("DV completion, with no provider's DV code involved; microbench's `pair_ns` of ours with `dv_send` against\n")
	p("upstream is the same pair through the provider.\n\n")
	p("| pair | DV median (min–max) µs | n | kernel commands median (min–max) µs | n | ratio | best-run ratio |\n|---|---|---|---|---|---|---|\n")
	line := func(label string, r Row) {
		p("| %s | %.1f (%.1f–%.1f) | %d | %.1f (%.1f–%.1f) | %d | %.2f | %.2f |\n", label,
			r.Ours.Median/1e3, r.Ours.Min/1e3, r.Ours.Max/1e3, r.Ours.N,
			r.Base.Median/1e3, r.Base.Min/1e3, r.Base.Max/1e3, r.Base.N, r.Ratio, r.BestRatio)
	}
	line("the module (an application's DV queue / its kernel commands, upstream)", app)
	if okOurs {
		line("the provider (ours with `dv_send` / upstream's kernel commands)", ours)
		p("\nOurs' DV premium over the module's own: %.2f (medians), %.2f (best runs).\n\n",
			ours.Ratio/app.Ratio, ours.BestRatio/app.BestRatio)
	} else {
		p("\n")
	}
}
