package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	results := flag.String("results", "tests/bench/results", "directory with aa.log, ab.log, micro-aa.log, micro-ab.log, usb4-*.log, control-*.log, ucx-*.log, host.txt, notes*.md")
	docPath := flag.String("doc", "docs/benchmarks.md", "markdown file to write")
	svgDir := flag.String("svgdir", "docs", "directory for benchmarks-latency.svg and benchmarks-bandwidth.svg")
	flag.Parse()
	if err := run(*results, *docPath, *svgDir); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(results, docPath, svgDir string) error {
	var d Doc
	for _, mode := range []string{"aa", "ab"} {
		var parts [2]*Run
		for i, name := range []string{mode + ".log", "micro-" + mode + ".log"} {
			r, err := loadRun(filepath.Join(results, name))
			if err != nil {
				return err
			}
			if r != nil && r.Mode != "" && r.Mode != mode {
				return fmt.Errorf("%s: holds a mode=%s run", name, r.Mode)
			}
			if r != nil {
				r.Mode = mode
			}
			parts[i] = r
		}
		r := MergeMicro(parts[0], parts[1])
		if mode == "aa" {
			d.AA = r
		} else {
			d.AB = r
		}
	}
	var err error
	if d.USB4, err = loadUSB4(results); err != nil {
		return err
	}
	if d.Control, err = loadControl(results, d.USB4); err != nil {
		return err
	}
	if d.ControlNotes, err = readControlNotes(results); err != nil {
		return err
	}
	if d.UCX, err = loadUCX(results); err != nil {
		return err
	}
	if d.UCXNotes, err = readOptional(filepath.Join(results, "notes-ucx.md")); err != nil {
		return err
	}
	if d.AA == nil && d.AB == nil && len(d.USB4) == 0 && len(d.Control) == 0 && len(d.UCX) == 0 {
		return fmt.Errorf("no aa.log, ab.log, micro-*.log, usb4-*.log, control-*.log or ucx-*.log in %s: run make bench first", results)
	}
	if d.USB4Notes, err = readOptional(filepath.Join(results, "notes-usb4.md")); err != nil {
		return err
	}
	if d.Host, err = readOptional(filepath.Join(results, "host.txt")); err != nil {
		return err
	}
	if d.Notes, err = readOptional(filepath.Join(results, "notes.md")); err != nil {
		return err
	}

	var doc bytes.Buffer
	if err := WriteDoc(&doc, d); err != nil {
		return err
	}
	files := map[string]string{docPath: doc.String()}
	if d.AA != nil || d.AB != nil {
		lat, bw := Plots(d)
		files[filepath.Join(svgDir, "benchmarks-latency.svg")] = lat
		files[filepath.Join(svgDir, "benchmarks-bandwidth.svg")] = bw
	}
	if ulat, ubw, ok := USB4Plots(d.USB4); ok {
		files[filepath.Join(svgDir, "benchmarks-usb4-latency.svg")] = ulat
		files[filepath.Join(svgDir, "benchmarks-usb4-bandwidth.svg")] = ubw
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// Plots draws the latency and bandwidth figures from the A/B run, or from the
// A/A run (titled as such) when there is no A/B run.
func Plots(d Doc) (latency, bandwidth string) {
	run, what := d.AB, "libusb4_rdma (solid) vs librxe (dashed)"
	if run == nil {
		run, what = d.AA, "A/A validation: librxe (A, solid) vs librxe (B, dashed)"
	}
	rows := Compare(run)
	names := providerNames(run)
	latency = PlotSVG("Latency (t_typical) — "+what, "µs (log scale)", SeriesFor(rows, isLat, names))
	bandwidth = PlotSVG("Bandwidth (BW average) — "+what, "MB/s (log scale)", SeriesFor(rows, isBW, names))
	return latency, bandwidth
}

// loadRun parses path; a missing file is (nil, nil).
func loadRun(path string) (*Run, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// namedRun is one boot's run and the name its file gives: results/<prefix>-<name>.log.
type namedRun struct {
	name string
	run  *Run
}

// loadNamedRuns reads every results/<prefix>-*.log, first the one named first, then
// the others by name.
func loadNamedRuns(results, prefix, first string) ([]namedRun, error) {
	paths, err := filepath.Glob(filepath.Join(results, prefix+"-*.log"))
	if err != nil {
		return nil, err
	}
	var out []namedRun
	for _, path := range paths {
		r, err := loadRun(path)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		out = append(out, namedRun{strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), prefix+"-"), ".log"), r})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].name == first) != (out[j].name == first) {
			return out[i].name == first
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

func readOptional(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)) + "\n", nil
}
