package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Sides of a comparison: the candidate and the baseline. The footprint of a
// process that opens nothing compares SideInstalled (our package installed,
// rxe left to librxe) with SideNoPkg (the same userland without our package).
const (
	SideOurs      = "ours"
	SideLibrxe    = "librxe"
	SideInstalled = "installed"
	SideNoPkg     = "nopkg"
)

// Sample is one measured figure of one repetition.
type Sample struct {
	Side   string // SideOurs, SideLibrxe, SideInstalled or SideNoPkg
	Loaded string // providers mapped by the perftest server (usb4_rdma, rxe, usb4_rdma+rxe)
	Served string // provider that served the device (microbench only)
	Key    Key
	Rep    int
	N      int // iterations of the run (n=), for per-message differences; 0 when absent
	Value  float64
}

// Key names one case: the same tool, size, QPs, post list and metric on both sides.
type Key struct {
	Tool   string
	Size   int
	QPs    int
	PL     int // send post list length; 1 without --post_list
	Metric string
}

// Event is a @@BENCHFAIL or @@BENCHSKIP line, with the "# ..." lines after it.
type Event struct {
	Fields map[string]string
	Detail []string
}

// Run is everything one results file says.
type Run struct {
	Mode      string // "aa" or "ab"
	Samples   []Sample
	Fails     []Event
	Skips     []Event
	Info      []map[string]string // @@BENCHINFO lines
	Truncated bool                // the guest hit its deadline before the last case
	HostLoad1 []float64           // host load average samples taken during the boot
	Harness   []string            // the VM harness's own "--- FAIL" lines
	Malformed []string            // @@BENCH lines that could not be read
	Invalid   []Sample            // samples whose value was inf, nan or a zero throughput
	// Micro is the BENCH_PLAN=micro run whose micro, proc and footprint
	// figures replaced this run's (MergeMicro); nil if none did.
	Micro *Run
}

// microTool says which figures a BENCH_PLAN=micro run measures.
func microTool(tool string) bool { return tool == "micro" || tool == "proc" || tool == "footprint" }

// MergeMicro combines a full run with a BENCH_PLAN=micro run of the same mode:
// when the micro run is the newer (by its date info), its micro, proc and
// footprint figures and failures replace the full run's; the perftest figures
// stay. Either may be nil.
func MergeMicro(full, micro *Run) *Run {
	switch {
	case micro == nil:
		return full
	case full == nil:
		return micro
	case micro.InfoValue("date") < full.InfoValue("date"):
		return full
	}
	m := *full
	m.Micro = micro
	m.Samples, m.Fails, m.Invalid = nil, nil, nil
	for _, s := range full.Samples {
		if !microTool(s.Key.Tool) {
			m.Samples = append(m.Samples, s)
		}
	}
	for _, s := range full.Invalid {
		if !microTool(s.Key.Tool) {
			m.Invalid = append(m.Invalid, s)
		}
	}
	for _, e := range full.Fails {
		if !microTool(e.Fields["tool"]) {
			m.Fails = append(m.Fails, e)
		}
	}
	for _, s := range micro.Samples {
		if microTool(s.Key.Tool) {
			m.Samples = append(m.Samples, s)
		}
	}
	m.Invalid = append(m.Invalid, micro.Invalid...)
	m.Fails = append(m.Fails, micro.Fails...)
	m.Malformed = append(append([]string(nil), full.Malformed...), micro.Malformed...)
	m.Harness = append(append([]string(nil), full.Harness...), micro.Harness...)
	return &m
}

// Parse reads one results file. Lines it cannot read are collected in
// Run.Malformed, never fatal: a partial run still makes a report. It fails only
// on a read error or when the file holds no benchmark line at all.
func Parse(r io.Reader) (*Run, error) {
	run := &Run{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var last *Event
	seen := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "--- FAIL") {
			run.Harness = append(run.Harness, line)
			continue
		}
		if strings.HasPrefix(line, "# ") && last != nil {
			last.Detail = append(last.Detail, strings.TrimPrefix(line, "# "))
			continue
		}
		i := strings.Index(line, "@@BENCH")
		if i < 0 {
			continue
		}
		last = nil
		tag, rest, _ := strings.Cut(line[i:], " ")
		if w := firstWord(rest); tag == "@@BENCHINFO" && w != "" && !strings.Contains(w, "=") {
			// An info line may lead with a bare word naming what it is about.
			rest = "what=" + rest
		}
		fields, err := splitFields(rest)
		if err != nil {
			run.Malformed = append(run.Malformed, line)
			continue
		}
		seen = true
		if m := fields["mode"]; m != "" && run.Mode == "" {
			run.Mode = m
		}
		switch tag {
		case "@@BENCH":
			s, err := sampleOf(fields)
			if errors.Is(err, errInvalidValue) {
				run.Invalid = append(run.Invalid, s)
				continue
			}
			if err != nil {
				run.Malformed = append(run.Malformed, line)
				continue
			}
			run.Samples = append(run.Samples, s)
		case "@@BENCHFAIL":
			run.Fails = append(run.Fails, Event{Fields: fields})
			last = &run.Fails[len(run.Fails)-1]
		case "@@BENCHSKIP":
			run.Skips = append(run.Skips, Event{Fields: fields})
		case "@@BENCHINFO":
			run.Info = append(run.Info, fields)
			if fields["truncated"] == "1" {
				run.Truncated = true
			}
			if v, ok := fields["load1"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					run.HostLoad1 = append(run.HostLoad1, f)
				}
			}
		default:
			run.Malformed = append(run.Malformed, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	if !seen {
		return nil, fmt.Errorf("read results: no @@BENCH lines")
	}
	return run, nil
}

// splitFields parses `k=v k2="v with spaces"` words. A word without '=' or an
// unterminated quote is an error.
func splitFields(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\"") {
			return nil, fmt.Errorf("field %q: want key=value", firstWord(s))
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("field %q: unterminated quote", k)
			}
			v, s = rest[1:1+end], rest[2+end:]
		} else {
			v, s, _ = strings.Cut(rest, " ")
		}
		out[k] = v
	}
	return out, nil
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

func sampleOf(f map[string]string) (Sample, error) {
	s := Sample{Side: f["side"], Loaded: f["loaded"], Served: f["served"]}
	switch s.Side {
	case SideOurs, SideLibrxe, SideInstalled, SideNoPkg, SideUp, SideUp2, SideOursKC, SideOursDV, SideAppKC, SideAppDV, SideBase, SideOursPre:
	default:
		return s, fmt.Errorf("side %q", s.Side)
	}
	s.Key.Tool, s.Key.Metric = f["tool"], f["metric"]
	if s.Key.Tool == "" || s.Key.Metric == "" {
		return s, fmt.Errorf("tool or metric missing")
	}
	ints := []struct {
		name string
		dst  *int
		def  int
	}{{"size", &s.Key.Size, -1}, {"qps", &s.Key.QPs, 1}, {"pl", &s.Key.PL, 1}, {"rep", &s.Rep, -1}, {"n", &s.N, 0}}
	for _, it := range ints {
		v, ok := f[it.name]
		if !ok {
			if it.def < 0 {
				return s, fmt.Errorf("%s missing", it.name)
			}
			*it.dst = it.def
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s %q", it.name, v)
		}
		*it.dst = n
	}
	v, err := strconv.ParseFloat(f["value"], 64)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0) || (v == 0 && !LowerBetter(s.Key.Metric))) {
		return s, errInvalidValue
	}
	if err != nil {
		return s, fmt.Errorf("value %q", f["value"])
	}
	s.Value = v
	return s, nil
}

// errInvalidValue marks a sample whose tool printed inf, nan or a throughput
// of 0: perftest does when its cycle-counter clock goes wrong (the guest's TSC
// is unreliable under TCG). Such a run measured nothing.
var errInvalidValue = errors.New("tool printed inf, nan or zero throughput")

// InfoValue is the value of key in the first @@BENCHINFO line that has it.
func (r *Run) InfoValue(key string) string {
	for _, m := range r.Info {
		if v, ok := m[key]; ok {
			return v
		}
	}
	return ""
}
