package cshim

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoPartUnderThreadSanitizer: the runtime's threads of a Go part loaded into a
// ThreadSanitizer process are created through the sanitizer's pthread_create (the
// reliability suite's concurrency_tsan case crashed at address 0x418 when the fork
// guard's wrapper bound libc's directly).
func TestGoPartUnderThreadSanitizer(t *testing.T) {
	h := setupHost(t)
	bin := filepath.Join(t.TempDir(), "tsanload")
	if out, err := exec.Command("gcc", "-fsanitize=thread", "-g", "-o", bin, "testdata/tsanload.c", "-ldl").CombinedOutput(); err != nil {
		t.Skipf("no ThreadSanitizer toolchain: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, filepath.Join(h.build, "libusb4_rdma-go.so")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the Go part under ThreadSanitizer: %v\n%s", err, out)
	}
}
