package selftest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The usb4 bed's own entry points (tests/usb4/run.sh and kbuild.sh) take the
// Debian mirror from the apt sources as tests/vm/run.sh does, so they must
// source lib/mirror.sh themselves: run.sh without MIRROR, with a fixture apt
// directory, reads it without an error.
func TestUSB4ScriptsReadTheAptMirror(t *testing.T) {
	hostOnly(t)
	apt := aptDir(t, map[string]string{"sources.list": "deb http://mirror.example.org/debian bookworm main\n"})
	usb4, err := filepath.Abs(filepath.Join("..", "..", "usb4"))
	if err != nil {
		t.Fatal(err)
	}
	env := func(extra ...string) []string {
		var e []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "MIRROR=") && !strings.HasPrefix(kv, "USB4_MODULE_SRC=") {
				e = append(e, kv)
			}
		}
		return append(e, append([]string{"APT_DIR=" + apt, "CACHE=" + t.TempDir()}, extra...)...)
	}

	// run.sh reads the mirror first; with a module source that does not exist
	// it then prints SKIP lines and exits 0. host_mirror runs in a command
	// substitution there, so a missing apt_mirror shows only on stderr.
	cmd := exec.Command(filepath.Join(usb4, "run.sh"), "hellas-main")
	cmd.Env = env("USB4_MODULE_SRC=" + filepath.Join(t.TempDir(), "absent"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- SKIP: usb4/hellas-main") ||
		strings.Contains(string(out), "command not found") || strings.Contains(string(out), "no Debian mirror") {
		t.Fatalf("tests/usb4/run.sh without MIRROR: %v\n%s", err, out)
	}
}
