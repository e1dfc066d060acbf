package selftest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Host tests of the harness's mirror reading (tests/vm/lib/mirror.sh):
// apt_mirror on fixture apt directories, and host_mirror's stop when there is
// no mirror to take. Hosts in the fixtures are example.org/example.com.

func hostOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") == "1" {
		t.Skip("reads tests/vm/lib from the checkout; runs on the host")
	}
}

// aptDir writes files (path relative to the apt directory -> content).
func aptDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shell runs script with tests/vm/lib's common.sh and mirror.sh sourced.
func shell(t *testing.T, script string, env ...string) (stdout, stderr string, err error) {
	t.Helper()
	lib, err := filepath.Abs(filepath.Join("..", "lib"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . "$LIB/common.sh"; . "$LIB/mirror.sh"; `+script)
	cmd.Env = append(os.Environ(), append([]string{"LIB=" + lib}, env...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func TestAptMirror(t *testing.T) {
	hostOnly(t)
	const sec822 = "Types: deb\nURIs: http://security.example.org/debian-security\nSuites: bookworm-security\nComponents: main\n"
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" : no mirror (exit 1, no output)
	}{
		{"debian 12 one-line sources.list", map[string]string{
			"sources.list": "# comment\ndeb http://security.example.org/debian-security bookworm-security main\n" +
				"deb-src http://src.example.org/debian bookworm main\n" +
				"deb http://mirror.example.org/debian/ bookworm main contrib\n" +
				"deb http://mirror.example.org/debian bookworm-updates main\n"}, "http://mirror.example.org/debian"},
		{"debian 13 deb822, security first, a disabled stanza", map[string]string{
			"sources.list.d/debian.sources": sec822 + "\n" +
				"Types: deb\nURIs: http://old.example.org/debian\nSuites: trixie\nComponents: main\nEnabled: no\n\n" +
				"# the mirror\nTypes: deb deb-src\nURIs: https://mirror.example.org/debian\nSuites: trixie trixie-updates\n" +
				"Components: main\n non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"},
			"https://mirror.example.org/debian"},
		{"deb822 with CRLF, field names in other case, URIs continued", map[string]string{
			"sources.list.d/debian.sources": "types: deb\r\nuris:\r\n  https://cache.example.org:3142/debian\r\nsuites: bookworm\r\ncomponents: main\r\n"},
			"https://cache.example.org:3142/debian"},
		{"options in brackets, a third-party repository first", map[string]string{
			"sources.list": "deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://packages.example.com/repo bookworm main\n" +
				"deb [ arch=amd64 ] http://mirror.example.org/debian bookworm main # trailing comment\n"},
			"http://mirror.example.org/debian"},
		{"only a third-party repository with main", map[string]string{
			"sources.list.d/vendor.list": "deb https://packages.example.com/repo bookworm main\n"}, "https://packages.example.com/repo"},
		{"sources.list before sources.list.d, .list and .sources by name", map[string]string{
			"sources.list":                   "deb http://first.example.org/debian bookworm main\n",
			"sources.list.d/a.sources":       "Types: deb\nURIs: http://second.example.org/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/b.list.disabled": "deb http://ignored.example.org/debian bookworm main\n"},
			"http://first.example.org/debian"},
		{"mirror+file list (cloud images)", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\nURIs: mirror+file:///etc/apt/mirrors/debian.list\nSuites: bookworm\nComponents: main\n",
			"mirrors/debian.list":           "# priority list\nhttps://cdn.example.org/debian priority:1\nhttp://mirror.example.org/debian\n"},
			"https://cdn.example.org/debian"},
		{"only security, source and cdrom entries", map[string]string{
			"sources.list": "deb cdrom:[Debian 12]/ bookworm main\ndeb-src http://mirror.example.org/debian bookworm main\n" +
				"deb http://security.example.org/debian-security/ bookworm-security main\n",
			"sources.list.d/debian.sources": sec822}, ""},
		{"no component main", map[string]string{
			"sources.list": "deb http://mirror.example.org/debian bookworm contrib\n"}, ""},
		{"no sources at all", map[string]string{"apt.conf.d/00x": "APT::Get::Assume-Yes \"true\";\n"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := aptDir(t, c.files)
			out, errs, err := shell(t, `apt_mirror "`+dir+`"`)
			if c.want == "" {
				if err == nil || out != "" {
					t.Fatalf("want no mirror (exit 1, no output); got %q, %v, stderr %q", out, err, errs)
				}
				return
			}
			if err != nil || out != c.want+"\n" {
				t.Fatalf("got %q, %v (stderr %q), want %q", out, err, errs, c.want)
			}
		})
	}
}

// With no mirror in the apt sources the harness stops and says how to name
// one, instead of falling back to some mirror of its choosing.
func TestHostMirrorStopsWithoutSources(t *testing.T) {
	hostOnly(t)
	dir := aptDir(t, map[string]string{"sources.list": "# nothing\n"})
	out, errs, err := shell(t, `m=$(host_mirror); echo "mirror=$m"`, "APT_DIR="+dir)
	if err == nil || strings.Contains(out, "mirror=") {
		t.Fatalf("host_mirror without sources: out %q, err %v", out, err)
	}
	if !strings.Contains(errs, "no Debian mirror in the apt sources under "+dir) || !strings.Contains(errs, "set MIRROR=") {
		t.Fatalf("stop message %q", errs)
	}
	out, _, err = shell(t, `host_mirror`, "APT_DIR="+aptDir(t, map[string]string{
		"sources.list": "deb http://mirror.example.org/debian bookworm main\n"}))
	if err != nil || out != "http://mirror.example.org/debian\n" {
		t.Fatalf("host_mirror: %q %v", out, err)
	}
}

// The harness names no mirror host of its own: the mirror comes from the
// machine's apt configuration or from MIRROR.
func TestHarnessNamesNoDebianMirrorHost(t *testing.T) {
	hostOnly(t)
	files, err := filepath.Glob(filepath.Join("..", "lib", "*.sh"))
	if err != nil || len(files) == 0 {
		t.Fatalf("tests/vm/lib: %v", err)
	}
	files = append(files, filepath.Join("..", "run.sh"), filepath.Join("..", "README.md"))
	host := regexp.MustCompile(`(?i)https?://[a-z0-9.-]*debian\.(org|net)\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := host.Find(b); m != nil {
			t.Errorf("%s names a Debian mirror host: %s", f, m)
		}
	}
}

// Scripts outside tests/vm (tests/usb4/run.sh, kbuild.sh) source only
// common.sh and call host_mirror: it must work without mirror.sh sourced by
// hand.
func TestHostMirrorFromCommonAlone(t *testing.T) {
	hostOnly(t)
	lib, err := filepath.Abs(filepath.Join("..", "lib"))
	if err != nil {
		t.Fatal(err)
	}
	dir := aptDir(t, map[string]string{"sources.list": "deb http://mirror.example.org/debian bookworm main\n"})
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . "$LIB/common.sh"; host_mirror`)
	cmd.Env = append(os.Environ(), "LIB="+lib, "APT_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "http://mirror.example.org/debian\n" {
		t.Fatalf("host_mirror with only common.sh sourced: %q, %v", out, err)
	}
}
