package dataplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEngineUnderThreadSanitizer builds the engine's C files with
// -fsanitize=thread together with testdata/tsan_removal.c, which runs
// start_poll holders, pollers, posters, a resize loop, CQs joining and
// leaving the removal record, and the device removal through that record,
// against one rxe QP and two CQs and a usb4 kernel-command QP and CQ at once
// (docs/DESIGN.md "Lock order"; cgo builds the engine without
// instrumentation, so -race never sees its locks). A data race or a
// lock-order inversion in the engine is a ThreadSanitizer report and exit
// status 66. A sabotaged copy (a plain store of the CQ's producer index)
// made it report the race, so the harness can fail.
func TestEngineUnderThreadSanitizer(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	srcs, err := filepath.Glob("*.c")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tsan_removal")
	args := []string{"-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-fsanitize=thread",
		"-I.", "-I../../uapi/c", "-o", bin, "testdata/tsan_removal.c"}
	for _, f := range srcs {
		if f != "bench.c" && f != "front.c" { // the engine, as scripts/build-provider.sh builds it
			args = append(args, f)
		}
	}
	if out, err := exec.Command("gcc", append(args, "-lpthread")...).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "tsan") || strings.Contains(string(out), "sanitize") {
			t.Skipf("gcc cannot build with ThreadSanitizer here: %s", out)
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("tsan_removal: %v (a ThreadSanitizer report exits 66)", err)
	}
}
