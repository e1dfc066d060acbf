// Command testsummary counts the results in `go test -v` style logs and prints one
// table and the closing line "N passed, N failed, N skipped" that CI reads.
//
// Every stage of `make test` (lint, host tests, VM tests, stock-tool matrices) writes
// a log whose result lines look like go test's: "--- PASS: name (0.00s)",
// "--- FAIL: name", "--- SKIP: name", indented for subtests. A package that fails
// to build, or a test binary that dies before reporting (a "FAIL<TAB>pkg" line with
// no preceding --- FAIL), counts as one failure, so a crash is never a silent pass.
//
// Usage: testsummary LOG...
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

type counts struct {
	passed, failed, skipped int
	failures                []string
}

var (
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	// "FAIL	pkg	0.01s", "FAIL	pkg [build failed]", "FAIL	pkg [setup failed]".
	pkgFailLine = regexp.MustCompile(`^FAIL\s+(\S+)(\s|$)`)
)

func scan(r io.Reader) (counts, error) {
	var c counts
	failedSincePkg := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := resultLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				c.passed++
			case "FAIL":
				c.failed++
				failedSincePkg = true
				c.failures = append(c.failures, m[2])
			case "SKIP":
				c.skipped++
			}
			continue
		}
		if m := pkgFailLine.FindStringSubmatch(line); m != nil {
			if !failedSincePkg {
				c.failed++
				c.failures = append(c.failures, m[1]+" (no test result: build failure or crash)")
			}
			failedSincePkg = false
			continue
		}
		if strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "ok \t") {
			failedSincePkg = false
		}
	}
	return c, sc.Err()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testsummary LOG...")
		os.Exit(2)
	}
	var total counts
	fmt.Printf("%-28s %7s %7s %7s\n", "stage", "passed", "failed", "skipped")
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
			total.failed++
			continue
		}
		c, err := scan(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", path, err)
			c.failed++
		}
		name := strings.TrimSuffix(filepath.Base(path), ".log")
		fmt.Printf("%-28s %7d %7d %7d\n", name, c.passed, c.failed, c.skipped)
		total.passed += c.passed
		total.failed += c.failed
		total.skipped += c.skipped
		for _, f := range c.failures {
			total.failures = append(total.failures, name+": "+f)
		}
	}
	for _, f := range total.failures {
		fmt.Println("FAILED", f)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped)
	if total.failed > 0 {
		os.Exit(1)
	}
}
