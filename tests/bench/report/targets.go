package main

import (
	"fmt"
	"math"
	"strings"
)

// Status of one target.
type Status int

// Target outcomes.
const (
	NoData Status = iota
	Met
	Missed
)

func (s Status) String() string {
	switch s {
	case Met:
		return "met"
	case Missed:
		return "missed"
	}
	return "no data"
}

// Target is one of issue 7's targets and its check against a run.
type Target struct {
	ID    string
	Title string
	// Ratio targets compare Row.Ratio with Limit; difference targets compare
	// Ours.Median - Base.Median with Limit (in the metric's unit).
	Diff bool
	// LowerBetter: the limit is a ceiling (latency, cost) rather than a floor.
	LowerBetter bool
	Limit       float64
	Unit        string // of a difference target's limit
	Match       func(Key) bool
	// ListOnly: checked on SideInstalled against SideNoPkg (a process that
	// opens none of our devices), not on ours against librxe.
	ListOnly bool

	Status  Status
	Checked int     // rows with data on both sides
	Failing []Row   // rows beyond the limit, worst first
	Worst   Row     // the row furthest from (or closest to) the limit
	Excess  float64 // how far Worst is past the limit: a fraction for ratios, units for differences
	Missing []Key   // cases with data on one side only
}

func isLat(k Key) bool { return strings.HasSuffix(k.Tool, "_lat") && k.Metric == "t_typical_us" }
func isBW(k Key) bool {
	return strings.HasSuffix(k.Tool, "_bw") && k.PL == 1 && k.Metric == "bw_avg_mbps"
}
func isRate(k Key) bool {
	return strings.HasSuffix(k.Tool, "_bw") && k.PL > 1 && k.Metric == "msgrate_mpps"
}
func isCall(k Key) bool {
	return k.Tool == "micro" && (k.Metric == "post_ns" || k.Metric == "poll_hit_ns" ||
		k.Metric == "pair_ns" || k.Metric == "poll_empty_ns" || k.Metric == "start_poll_empty_ns")
}
func isRSS(k Key) bool {
	return (k.Tool == "proc" && strings.HasSuffix(k.Metric, "_rss_kb")) ||
		(k.Tool == "footprint" && k.Metric == "open_rss_kb")
}
func isThreads(k Key) bool {
	return (k.Tool == "proc" && strings.HasSuffix(k.Metric, "_threads")) ||
		(k.Tool == "footprint" && k.Metric == "open_threads")
}
func isFootprint(metric string) func(Key) bool {
	return func(k Key) bool { return k.Tool == "footprint" && k.Metric == metric }
}

// Targets returns issue 7's targets, unchecked.
func Targets() []*Target {
	return []*Target{
		{ID: "latency", Title: "Latency ratio ≤ 1.00 at every size (t_typical)", LowerBetter: true, Limit: 1.00, Match: isLat},
		{ID: "bandwidth", Title: "Bandwidth ratio ≥ 1.00 at every size, 1 and 4 QPs", Limit: 1.00, Match: isBW},
		{ID: "msgrate", Title: "Message-rate ratio ≥ 1.00 (8 B, post list)", Limit: 1.00, Match: isRate},
		{ID: "percall", Title: "Per-call overhead ≤ 1.10× librxe (post_send, poll_cq)", LowerBetter: true, Limit: 1.10, Match: isCall},
		{ID: "rss", Title: "Extra RSS ≤ 16 MiB per process that opens our device (ib_write_bw; footprint after open)", Diff: true, LowerBetter: true, Limit: 16 * 1024, Unit: "KiB", Match: isRSS},
		{ID: "threads", Title: "Extra threads ≤ 4 per process that opens our device (ib_write_bw; footprint after open)", Diff: true, LowerBetter: true, Limit: 4, Unit: "threads", Match: isThreads},
		{ID: "list-threads", Title: "Listing only, package installed: +0 threads", Diff: true, LowerBetter: true, Limit: 0, Unit: "threads", Match: isFootprint("list_threads"), ListOnly: true},
		{ID: "list-rss", Title: "Listing only, package installed: RSS ≤ +1 MiB", Diff: true, LowerBetter: true, Limit: 1024, Unit: "KiB", Match: isFootprint("list_rss_kb"), ListOnly: true},
		{ID: "list-time", Title: "Listing only, package installed: `ibv_get_device_list` ≤ 1.10×", LowerBetter: true, Limit: 1.10, Match: isFootprint("list_us"), ListOnly: true},
	}
}

// Check evaluates t against rows and records the outcome in t.
func (t *Target) Check(rows []Row) {
	t.Status, t.Checked, t.Failing, t.Missing, t.Excess = NoData, 0, nil, nil, 0
	first := true
	for _, r := range Select(rows, t.Match) {
		if !r.Both() || (!t.Diff && math.IsNaN(r.Ratio)) {
			t.Missing = append(t.Missing, r.Key)
			continue
		}
		t.Checked++
		ex := t.excess(r)
		if first || ex > t.Excess {
			t.Worst, t.Excess, first = r, ex, false
		}
		if ex > 0 {
			t.Failing = append(t.Failing, r)
		}
	}
	if t.Checked == 0 {
		return
	}
	t.Status = Met
	if len(t.Failing) > 0 {
		t.Status = Missed
	}
	// Worst first.
	for i := 1; i < len(t.Failing); i++ {
		for j := i; j > 0 && t.excess(t.Failing[j]) > t.excess(t.Failing[j-1]); j-- {
			t.Failing[j], t.Failing[j-1] = t.Failing[j-1], t.Failing[j]
		}
	}
}

// excess is how far r is past the limit (negative: inside it). For ratio
// targets it is relative to the limit, so 0.05 means "5 % worse than allowed".
func (t *Target) excess(r Row) float64 {
	if t.Diff {
		d := r.Ours.Median - r.Base.Median
		if t.LowerBetter {
			return d - t.Limit
		}
		return t.Limit - d
	}
	if t.LowerBetter {
		return r.Ratio/t.Limit - 1
	}
	return t.Limit/r.Ratio - 1
}

// Verdict is a one-line account of the outcome, with the worst case.
func (t *Target) Verdict() string {
	switch t.Status {
	case NoData:
		if len(t.Missing) > 0 {
			return fmt.Sprintf("no data: %d case(s) measured on one side only", len(t.Missing))
		}
		return "no data"
	case Met:
		return fmt.Sprintf("met in all %d cases; closest: %s", t.Checked, t.describe(t.Worst))
	}
	return fmt.Sprintf("missed in %d of %d cases; worst: %s, %s past the limit",
		len(t.Failing), t.Checked, t.describe(t.Worst), t.amount(t.Excess))
}

func (t *Target) amount(ex float64) string {
	if t.Diff {
		return fmt.Sprintf("%.0f %s", ex, t.Unit)
	}
	return fmt.Sprintf("%.1f %%", 100*ex)
}

func (t *Target) describe(r Row) string {
	if t.Diff {
		return fmt.Sprintf("%s %s %+.0f %s (%.0f vs %.0f)", r.Tool, r.Metric,
			r.Ours.Median-r.Base.Median, t.Unit, r.Ours.Median, r.Base.Median)
	}
	return fmt.Sprintf("%s ratio %.2f", caseName(r.Key), r.Ratio)
}

// caseName is a short human name for a case: "ib_write_bw 64 KiB q4".
func caseName(k Key) string {
	var b strings.Builder
	b.WriteString(k.Tool)
	if k.Tool == "micro" || k.Tool == "proc" || k.Tool == "footprint" {
		b.WriteString(" " + k.Metric)
		return b.String()
	}
	b.WriteString(" " + sizeName(k.Size))
	if k.QPs > 1 {
		fmt.Fprintf(&b, " q%d", k.QPs)
	}
	if k.PL > 1 {
		fmt.Fprintf(&b, " post_list %d", k.PL)
	}
	return b.String()
}

// sizeName prints a message size in B, KiB or MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
