package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/internal/sysinfo/fakeelf"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// hostOnly skips tests that read testdata: the VM harness runs test
// binaries in an empty directory.
func hostOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") == "1" {
		t.Skip("fixture-tree test; runs on the host")
	}
}

func treeDir(name string) string { return filepath.Join("testdata", "trees", name) }

// runCmd runs ibvinfo with args and returns stdout, stderr and the exit code.
func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/ibvinfo -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./cmd/ibvinfo -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	hostOnly(t)
	for _, ft := range fixtureTrees {
		t.Run(ft.name, func(t *testing.T) {
			root := treeDir(ft.name)
			if _, err := os.Stat(root); err != nil {
				t.Fatalf("%v (go test ./cmd/ibvinfo -run TestGenerateTrees -gentrees writes the trees)", err)
			}
			wantCode := exitOK
			for _, f := range ft.findings {
				if severityOf(t, ft.name, f) == verdictError {
					wantCode = exitFindings
				}
			}
			for _, c := range []struct {
				golden string
				args   []string
				code   int
			}{
				{ft.name + ".show.txt", []string{"--root", root}, exitOK},
				{ft.name + ".show.json", []string{"--json", "--root", root}, exitOK},
				{ft.name + ".doctor.txt", []string{"--root", root, "doctor", "--watch=0s"}, wantCode},
				{ft.name + ".doctor.json", []string{"doctor", "--watch=0s", "--json", "--root", root}, wantCode},
			} {
				out, stderr, code := runCmd(t, c.args...)
				if code != c.code {
					t.Errorf("ibvinfo %s: exit %d, want %d; stderr %s", strings.Join(c.args, " "), code, c.code, stderr)
				}
				if strings.HasSuffix(c.golden, ".json") && !json.Valid([]byte(out)) {
					t.Errorf("ibvinfo %s: output is not JSON", strings.Join(c.args, " "))
				}
				checkGolden(t, c.golden, out)
			}
		})
	}
}

// severityOf reads the verdict of finding id from the tree's doctor run.
func severityOf(t *testing.T, tree, id string) string {
	for _, c := range doctorChecks(t, tree) {
		if c.ID == id {
			return c.Verdict
		}
	}
	t.Fatalf("%s: no check %s", tree, id)
	return ""
}

func doctorChecks(t *testing.T, tree string) []check {
	t.Helper()
	out, stderr, _ := runCmd(t, "doctor", "--watch=0s", "--json", "--root", treeDir(tree))
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%s: doctor --json: %v; stderr %s", tree, err, stderr)
	}
	return rep.Checks
}

// TestFindingsPerTree checks that each tree produces exactly its findings,
// that the healthy tree produces none, and that every finding the issue
// names is produced by some tree.
func TestFindingsPerTree(t *testing.T) {
	hostOnly(t)
	hitBy := map[string][]string{}
	for _, ft := range fixtureTrees {
		var got []string
		for _, c := range doctorChecks(t, ft.name) {
			if c.Verdict == verdictWarn || c.Verdict == verdictError {
				got = append(got, c.ID)
				hitBy[c.ID] = append(hitBy[c.ID], ft.name)
				if c.Fix == "" {
					t.Errorf("%s: finding %s has no fix line", ft.name, c.ID)
				}
			}
		}
		want := slices.Clone(ft.findings)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("tree %s: findings %v, want %v", ft.name, got, want)
		}
	}
	required := []string{
		"link-trained-down", "thunderbolt-net-loaded", "thunderbolt-net-bound", "roce-netdev-unset",
		"udev-rename-active", "uverbs-device-missing", "memlock-low", "iommu-on", "provider-loadable",
		"device-claimed-by-another-provider", "apple-slot-device", "counters-not-moving", "gpu-memory",
	}
	for _, id := range required {
		if len(hitBy[id]) == 0 {
			t.Errorf("no fixture tree produces finding %s", id)
		}
	}
	if len(hitBy["provider-loadable"]) != 2 {
		t.Errorf("provider-loadable hit by %v, want provider-not-installed and provider-wrong-pabi", hitBy["provider-loadable"])
	}
}

// TestDoctorWithoutWatchSkipsCounters: the counters check needs --watch.
func TestDoctorWithoutWatchSkipsCounters(t *testing.T) {
	hostOnly(t)
	out, _, code := runCmd(t, "--json", "--root", treeDir("counters-not-moving"), "doctor")
	if code != exitOK {
		t.Errorf("exit %d", code)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.ID == "counters-not-moving" && c.Verdict != verdictSkip {
			t.Errorf("without --watch: %+v", c)
		}
	}
}

// TestDoctorNamedAppleDevice: naming the Apple slot on the command line is
// "about to use it", even in the healthy tree.
func TestDoctorNamedAppleDevice(t *testing.T) {
	hostOnly(t)
	out, _, code := runCmd(t, "--root", treeDir("healthy"), "doctor", "usb4_rdma9")
	if code != exitFindings || !strings.Contains(out, "usb4_rdma9 (named on the command line)") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	_, _, code = runCmd(t, "--root", treeDir("healthy"), "doctor", "usb4_rdma5")
	if code != exitOK {
		t.Errorf("native device named: exit %d", code)
	}
}

func TestNCCLSelects(t *testing.T) {
	for _, c := range []struct {
		spec, dev string
		want      bool
	}{
		{"usb4_rdma4", "usb4_rdma4", true},
		{"usb4_rdma", "usb4_rdma4", true},
		{"=usb4_rdma", "usb4_rdma4", false},
		{"usb4_rdma0:1,usb4_rdma5:1", "usb4_rdma4", false},
		{"^usb4_rdma4,usb4_rdma9", "usb4_rdma4", false},
		{"^usb4_rdma4", "usb4_rdma9", true},
	} {
		if got := ncclSelects(c.spec, c.dev); got != c.want {
			t.Errorf("ncclSelects(%q, %q) = %v", c.spec, c.dev, got)
		}
	}
}

func TestUsage(t *testing.T) {
	hostOnly(t)
	for _, args := range [][]string{
		{"frobnicate"},
		{"--bogus"},
		{"--root", treeDir("healthy"), "show", "extra"},
		{"--root", treeDir("healthy"), "--watch"},
		{"--root", treeDir("healthy"), "doctor", "--watch=soon"},
		{"--root", treeDir("healthy"), "perf", "a", "b", "c"},
		{"--root", treeDir("healthy"), "perf", "--serve", "--connect", "h", "a"},
		{"--root", treeDir("healthy"), "perf", "--serve", "--peer", "h", "a"},
		{"perf", "--timeout", "0s", "a"},
		{"perf", "--size", "0", "a"},
		{"--root", treeDir("healthy"), "--gid-index", "1"},
		{"--root", treeDir("healthy"), "doctor", "--timeout", "1s"},
	} {
		_, stderr, code := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "Usage:") {
			t.Errorf("ibvinfo %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	out, _, code := runCmd(t, "--help")
	if code != exitOK || !strings.Contains(out, "Exit codes:") {
		t.Errorf("--help: exit %d", code)
	}
	_, stderr, code := runCmd(t, "--root", filepath.Join(t.TempDir(), "missing"))
	if code != exitSystem || !strings.Contains(stderr, "not a readable directory") {
		t.Errorf("missing root: exit %d, %q", code, stderr)
	}
}

// TestNoColorWhenNotTerminal: output to a buffer is never coloured.
func TestNoColorWhenNotTerminal(t *testing.T) {
	hostOnly(t)
	out, _, _ := runCmd(t, "--root", treeDir("memlock-low"), "doctor")
	if strings.Contains(out, "\x1b[") {
		t.Error("colour codes in non-terminal output")
	}
	p := &printer{color: true}
	if got := p.paint(red, "ERROR"); got != "\x1b[31mERROR\x1b[0m" {
		t.Errorf("paint = %q", got)
	}
}

// Every command a doctor fix tells the user to run must exist: a `make X`
// names a target of the top-level Makefile (users of the packages have no
// checkout at all, so the provider-loadable fix must name the package
// installs and the tarball's install.sh, never a make target).
func TestDoctorFixesNameRealCommands(t *testing.T) {
	hostOnly(t)
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, line := range strings.Split(string(mk), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && name != "" && !strings.ContainsAny(name, " \t=$#.") {
			targets[name] = true
		}
	}
	makeRef := regexp.MustCompile(`\bmake ([a-z][a-z0-9-]*)`)
	for _, ft := range fixtureTrees {
		out, _, _ := runCmd(t, "doctor", "--json", "--root", treeDir(ft.name))
		var rep struct {
			Checks []struct {
				ID, Fix string
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v", ft.name, err)
		}
		for _, c := range rep.Checks {
			for _, m := range makeRef.FindAllStringSubmatch(c.Fix, -1) {
				if !targets[m[1]] {
					t.Errorf("%s: %s fix names `make %s`, which the Makefile does not have: %q", ft.name, c.ID, m[1], c.Fix)
				}
			}
			if c.ID == "provider-loadable" && c.Fix != "" && strings.Contains(c.Fix, "install the usb4verbs package") {
				for _, want := range []string{"apt install ./usb4verbs_", "dnf install ./usb4verbs-", "pacman -U usb4verbs-", "install.sh"} {
					if !strings.Contains(c.Fix, want) {
						t.Errorf("%s: provider-loadable fix lacks %q: %q", ft.name, want, c.Fix)
					}
				}
			}
		}
	}
}

// TestDoctorChecksGoPart: our C front library is recognised by its marker,
// and provider-loadable fails, naming the file, when the Go part it loads at
// the first open is not beside it (issue 13).
func TestDoctorChecksGoPart(t *testing.T) {
	hostOnly(t)
	dir := libdir + "/libibverbs"
	for _, c := range []struct {
		name    string
		gopart  bool
		verdict string
	}{{"front with its Go part", true, verdictOK}, {"front without its Go part", false, verdictError}} {
		t.Run(c.name, func(t *testing.T) {
			spec := healthyTree()
			spec.removePrefix(dir + "/libusb4_rdma")
			spec.file(dir+"/libusb4_rdma.so.0.1.0", string(fakeelf.FrontLibrary("libusb4_rdma.so")))
			for _, p := range sysinfo.SupportedPABIs {
				spec.link(fmt.Sprintf("%s/libusb4_rdma-rdmav%d.so", dir, p), "libusb4_rdma.so.0.1.0")
			}
			if c.gopart {
				spec.file(dir+"/"+sysinfo.GoPartName, string(fakeelf.SharedObject("libusb4_rdma-go.so", nil, sysinfo.OurModule)))
			}
			root := t.TempDir()
			writeTree(t, root, spec)
			out, _, _ := runCmd(t, "--json", "--root", root, "doctor")
			var rep doctorReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, ch := range rep.Checks {
				switch ch.ID {
				case "provider-loadable":
					if ch.Verdict != c.verdict {
						t.Errorf("provider-loadable %s, want %s: %+v", ch.Verdict, c.verdict, ch)
					}
					if !c.gopart && !strings.Contains(ch.Message, "/"+dir+"/"+sysinfo.GoPartName+" is missing") {
						t.Errorf("the finding does not name the missing Go part: %+v", ch)
					}
				case "device-claimed-by-another-provider":
					if ch.Verdict != verdictOK {
						t.Errorf("our front library taken for another provider: %+v", ch)
					}
				}
			}
		})
	}
}
