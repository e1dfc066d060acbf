package main

import (
	"math"
	"sort"
)

// Stat summarises the repetitions of one case on one side.
type Stat struct {
	N                int
	Median, Min, Max float64
	Q1, Q3           float64
	RelSpread        float64 // (Max-Min)/Median; 0 with one sample
}

// Summarize returns the order statistics of vs (linear interpolation between
// closest ranks for the quartiles). Empty input gives a Stat with N == 0.
func Summarize(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	st := Stat{N: len(s), Min: s[0], Max: s[len(s)-1]}
	st.Median = quantile(s, 0.5)
	st.Q1 = quantile(s, 0.25)
	st.Q3 = quantile(s, 0.75)
	if st.Median != 0 {
		st.RelSpread = (st.Max - st.Min) / math.Abs(st.Median)
	}
	return st
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Row compares one case across the two sides.
type Row struct {
	Key
	Ours, Base Stat
	// Ratio is Ours.Median / Base.Median, NaN when either side lacks data or
	// the baseline median is 0.
	Ratio float64
	// BestRatio compares the best run of each side: the minimums for a cost,
	// the maximums for a throughput. Noise under emulation only ever makes a
	// run slower, so the best runs are the steadier comparison; NaN like Ratio.
	BestRatio float64
}

// LowerBetter says whether a smaller value of metric is better (times,
// memory, threads) rather than larger (bandwidth, message rate).
func LowerBetter(metric string) bool {
	return metric != "bw_avg_mbps" && metric != "msgrate_mpps"
}

// Both says whether both sides have data.
func (r Row) Both() bool { return r.Ours.N > 0 && r.Base.N > 0 }

// Compare groups a run's samples by case and side, ours against librxe. Rows
// are sorted by tool, QPs, post list, metric, then size, so tables read from
// small to large.
func Compare(run *Run) []Row { return CompareSides(run, SideOurs, SideLibrxe) }

// CompareSides is Compare with side cand in Row.Ours and side base in
// Row.Base; cases measured on neither of them are left out.
func CompareSides(run *Run, cand, base string) []Row {
	type sideKey struct {
		Key
		side string
	}
	vals := map[sideKey][]float64{}
	keys := map[Key]bool{}
	for _, s := range run.Samples {
		if s.Side != cand && s.Side != base {
			continue
		}
		sk := sideKey{s.Key, s.Side}
		vals[sk] = append(vals[sk], s.Value)
		keys[s.Key] = true
	}
	rows := make([]Row, 0, len(keys))
	for k := range keys {
		r := Row{Key: k, Ours: Summarize(vals[sideKey{k, cand}]), Base: Summarize(vals[sideKey{k, base}])}
		r.Ratio, r.BestRatio = math.NaN(), math.NaN()
		if r.Both() && r.Base.Median != 0 {
			r.Ratio = r.Ours.Median / r.Base.Median
		}
		if r.Both() {
			if LowerBetter(k.Metric) && r.Base.Min != 0 {
				r.BestRatio = r.Ours.Min / r.Base.Min
			} else if !LowerBetter(k.Metric) && r.Base.Max != 0 {
				r.BestRatio = r.Ours.Max / r.Base.Max
			}
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i].Key, rows[j].Key
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		if a.QPs != b.QPs {
			return a.QPs < b.QPs
		}
		if a.PL != b.PL {
			return a.PL < b.PL
		}
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		return a.Size < b.Size
	})
	return rows
}

// Select returns the rows for which keep is true.
func Select(rows []Row, keep func(Key) bool) []Row {
	var out []Row
	for _, r := range rows {
		if keep(r.Key) {
			out = append(out, r)
		}
	}
	return out
}

// MedianRatio selects Row.Ratio for GeoMeanRatio and NoiseBand.
func MedianRatio(r Row) float64 { return r.Ratio }

// BestRunRatio selects Row.BestRatio.
func BestRunRatio(r Row) float64 { return r.BestRatio }

// GeoMeanRatio is the geometric mean of the finite ratios of rows, and how
// many there were; NaN when there are none.
func GeoMeanRatio(rows []Row, ratio func(Row) float64) (float64, int) {
	sum, n := 0.0, 0
	for _, r := range rows {
		if v := ratio(r); v > 0 && !math.IsInf(v, 0) {
			sum += math.Log(v)
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return math.Exp(sum / float64(n)), n
}

// NoiseBand is the largest |ratio - 1| among rows: in an A/A run, how far
// from 1.00 noise alone moved a ratio.
func NoiseBand(rows []Row, ratio func(Row) float64) float64 {
	band := math.NaN()
	for _, r := range rows {
		if math.IsNaN(ratio(r)) {
			continue
		}
		d := math.Abs(ratio(r) - 1)
		if math.IsNaN(band) || d > band {
			band = d
		}
	}
	return band
}
