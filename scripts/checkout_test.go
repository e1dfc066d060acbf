// Package scripts holds no Go code: these are host tests of the shell scripts
// next to them and of what they leave in a checkout.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func hostOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") == "1" {
		t.Skip("needs the checkout; runs on the host")
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tempRepo is a git repository holding copies of files (repository path ->
// source path relative to the checkout, or "=content"), committed.
func tempRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for dst, src := range files {
		var b []byte
		if c, ok := strings.CutPrefix(src, "="); ok {
			b = []byte(c)
		} else {
			var err error
			if b, err = os.ReadFile(filepath.Join("..", src)); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(dst, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
	}
	git := []string{"-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"}
	run(t, dir, nil, "git", "init", "-q")
	run(t, dir, nil, "git", "add", "-A")
	run(t, dir, nil, "git", append(git, "commit", "-q", "-m", "fixture")...)
	return dir
}

func TestCheckoutState(t *testing.T) {
	hostOnly(t)
	dir := tempRepo(t, map[string]string{
		"scripts/checkout-state.sh": "scripts/checkout-state.sh",
		".gitignore":                "=/build/\n",
		"a.txt":                     "=a\n", "b.txt": "=b\n", "c.txt": "=c\n", "d e.txt": "=d\n",
	})
	state := func(name string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(run(t, dir, nil, "scripts/checkout-state.sh")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(name, body string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s := run(t, dir, nil, "scripts/checkout-state.sh"); s != "" {
		t.Fatalf("clean checkout: state %q", s)
	}
	write("a.txt", "the user's change\n") // before the run: not the run's doing
	write("b.txt", "the user's change\n")
	before := state("before")
	write("b.txt", "the user's change, then the run's\n")
	write("c.txt", "the run's\n")
	write("d e.txt", "the run's\n")
	write("new/untracked.md", "the run's\n")
	write("build/ignored.log", "run output\n")
	if err := os.Remove(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	after := state("after")
	got := run(t, dir, nil, "scripts/checkout-state.sh", "changed", before, after)
	want := "a.txt\nb.txt\nc.txt\nd e.txt\nnew/untracked.md\n"
	if got != want {
		t.Fatalf("changed:\n%s\nwant:\n%s", got, want)
	}
	if got := run(t, dir, nil, "scripts/checkout-state.sh", "changed", after, after); got != "" {
		t.Fatalf("no change, yet: %q", got)
	}
}

// The report-only modes of the stock-tool and reliability suites write their
// docs under build/, never over the committed ones (make docs does that), so
// a test run leaves `git status` empty.
func TestReportsLeaveCheckoutClean(t *testing.T) {
	hostOnly(t)
	dir := tempRepo(t, map[string]string{
		".gitignore":                           "=/build/\n",
		"tests/stock/run.sh":                   "tests/stock/run.sh",
		"tests/stock/lib.sh":                   "tests/stock/lib.sh",
		"tests/reliability/run.sh":             "tests/reliability/run.sh",
		"tests/reliability/control-librxe.out": "tests/reliability/control-librxe.out",
		"docs/stock-tools.md":                  "docs/stock-tools.md",
		"docs/reliability.md":                  "docs/reliability.md",
	})
	out := filepath.Join(dir, "build", "stock", "ours", "bookworm.out")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("# stock: userland=bookworm rdma-core=44.0 kernel=6.1 iters=1 timeout=1\n"+
		"--- PASS: stock/bookworm/ibv_devices (0.1s)\n    cmd: ibv_devices\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, []string{"STOCK_REPORT_ONLY=1"}, "tests/stock/run.sh", "bookworm")
	run(t, dir, []string{"REL_REPORT_ONLY=1"}, "tests/reliability/run.sh")
	if s := run(t, dir, nil, "git", "status", "--porcelain"); s != "" {
		t.Fatalf("the reports changed the checkout:\n%s", s)
	}
	for _, f := range []string{"build/stock/ours/stock-tools.md", "build/reliability/reliability.md"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "| ") {
			t.Errorf("%s has no table:\n%s", f, b)
		}
	}
	// The sections of userlands not run come from the committed doc.
	if b, _ := os.ReadFile(filepath.Join(dir, "build/stock/ours/stock-tools.md")); !strings.Contains(string(b), "<!-- stock:begin sid -->") {
		t.Errorf("build/stock/ours/stock-tools.md lacks the committed sid section")
	}
}
