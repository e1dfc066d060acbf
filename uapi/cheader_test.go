package uapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const cHeader = "c/usb4verbs_uapi.h"

// TestCHeaderUpToDate regenerates the C header and requires it to equal the
// committed one.
func TestCHeaderUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	out := filepath.Join(t.TempDir(), "h.h")
	if b, err := exec.Command("go", "run", "./internal/cmd/gencheader", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("gencheader: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(cHeader)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate ./uapi", cHeader)
	}
	lines := strings.SplitN(string(want), "\n", 3)
	if len(lines) < 3 || !strings.Contains(lines[0], "go run ./internal/cmd/gencheader") ||
		!strings.Contains(lines[1], "Code generated") || !strings.Contains(lines[1], "DO NOT EDIT") {
		t.Errorf("%s: line 1 must record the command and line 2 say Code generated ... DO NOT EDIT; got %q", cHeader, lines[:2])
	}
}

// compileC compiles src as C11 with warnings as errors, with uapi/c on the
// include path, and returns the compiler's error output.
func compileC(t *testing.T, src string) (string, error) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "t.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("c")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", abs,
		"-c", file, "-o", filepath.Join(dir, "t.o")).CombinedOutput()
	return string(out), err
}

// TestCHeaderCompiles compiles the header on its own (which evaluates every
// _Static_assert) and together with the kernel's uAPI headers, proving its
// usb4v_ names do not clash with theirs.
func TestCHeaderCompiles(t *testing.T) {
	if out, err := compileC(t, "#include \"usb4verbs_uapi.h\"\n"); err != nil {
		t.Fatalf("header alone: %v\n%s", err, out)
	}
	together := `#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <rdma/rdma_netlink.h>
#include "usb4verbs_uapi.h"
struct usb4v_ib_uverbs_wc ours;
struct ib_uverbs_wc theirs;
`
	if _, err := os.Stat("/usr/include/rdma/ib_user_verbs.h"); err != nil {
		t.Skip("kernel uAPI headers not installed")
	}
	if out, err := compileC(t, together); err != nil {
		t.Fatalf("with <rdma/*.h>: %v\n%s", err, out)
	}
}

// TestCHeaderAssertsBite proves the compiler evaluates the header's kind of
// assertion: a wrong size must fail to compile.
func TestCHeaderAssertsBite(t *testing.T) {
	src := "#include \"usb4verbs_uapi.h\"\n_Static_assert(sizeof(struct usb4v_ib_uverbs_wc) == 47, \"wrong on purpose\");\n"
	out, err := compileC(t, src)
	if err == nil {
		t.Fatal("a false _Static_assert compiled")
	}
	if !strings.Contains(out, "wrong on purpose") {
		t.Fatalf("compile failed for another reason:\n%s", out)
	}
}
