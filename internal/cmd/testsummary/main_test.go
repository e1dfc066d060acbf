package main

import (
	"strings"
	"testing"
)

func TestScanCountsNestedResultsAndCrashes(t *testing.T) {
	log := `=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestB
=== RUN   TestB/sub
    --- FAIL: TestB/sub (0.00s)
--- FAIL: TestB (0.00s)
FAIL
FAIL	usb4verbs/x	0.01s
--- SKIP: TestC (0.00s)
ok  	usb4verbs/y	0.01s
panic: boom
FAIL	usb4verbs/z	0.01s
FAIL	usb4verbs/w [build failed]
`
	c, err := scan(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if c.passed != 1 || c.failed != 4 || c.skipped != 1 {
		t.Fatalf("got passed=%d failed=%d skipped=%d (%v), want 1/4/1", c.passed, c.failed, c.skipped, c.failures)
	}
}
