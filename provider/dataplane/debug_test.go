package dataplane

import (
	"bytes"
	"log"
	"os"
	"strings"
	"testing"

	"usb4verbs/provider/dataplane/internal/usb4double"
)

// With USB4VERBS_DEBUG=1 each CQ and QP logs its backend choice once.
func TestBackendChoiceIsLogged(t *testing.T) {
	var out bytes.Buffer
	log.SetOutput(&out)
	defer log.SetOutput(os.Stderr)
	old := debug
	debug = true
	defer func() { debug = old }()
	d := usb4double.New()
	d.SetShmSpoil(usb4double.ShmBadMagic)
	e := &usb4Env{d: d}
	t.Cleanup(e.close)
	e.cqA, e.hcqA = e.newCQ(t, 8)
	e.qpA, e.hqpA, e.qpnA = e.newQP(t, e.cqA, e.hcqA)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per object, got %q", lines)
	}
	if !strings.Contains(lines[0], "cq") || !strings.Contains(lines[0], BackendKCmd) || !strings.Contains(lines[0], "bad magic") {
		t.Fatalf("cq line %q", lines[0])
	}
	if !strings.Contains(lines[1], "qp") || !strings.Contains(lines[1], BackendDV) {
		t.Fatalf("qp line %q", lines[1])
	}
}
