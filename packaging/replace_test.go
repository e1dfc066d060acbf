package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The thunderbolt_ibverbs module's own provider package, which ours replaces
// (packaging/testdata/module-provider-pkg.sh cites its packaging).
const modulePkg = "usb4-rdma-provider"

// modulePackage builds the module's provider package in FORMAT with the stand-in script.
func modulePackage(t *testing.T, format string) string {
	t.Helper()
	out, err := run(t, repoRoot(t), []string{"NFPM=" + findNfpm(t)},
		"packaging/testdata/module-provider-pkg.sh", format, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// Each format declares the replacement the way its package manager acts on it.
func TestReplacesModuleProviderMetadata(t *testing.T) {
	b := buildPackages(t)
	t.Run("deb", func(t *testing.T) {
		deb := onlyFile(t, b.out, "usb4verbs_*.deb")
		for _, f := range []string{"Provides", "Conflicts", "Replaces"} {
			out, err := run(t, "", nil, "dpkg-deb", "-f", deb, f)
			if err != nil || !splitDepsHas(out, ",", modulePkg) {
				t.Errorf("%s: %q (%v), want %s", f, out, err, modulePkg)
			}
		}
	})
	t.Run("rpm", func(t *testing.T) {
		needTools(t, "rpm")
		rpm := onlyFile(t, b.out, "usb4verbs-*.rpm")
		for _, q := range []string{"--provides", "--obsoletes"} {
			out, err := run(t, "", nil, "rpm", "-qp", q, rpm)
			if err != nil || !splitDepsHas(out, "\n", modulePkg) {
				t.Errorf("rpm %s: %q (%v), want %s", q, out, err, modulePkg)
			}
		}
	})
	t.Run("arch", func(t *testing.T) {
		needTools(t, "zstd")
		pkg := onlyFile(t, b.out, "usb4verbs-*.pkg.tar.zst")
		info, err := run(t, "", nil, "tar", "--zstd", "-xOf", pkg, ".PKGINFO")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"provides", "conflict", "replaces"} {
			if !strings.Contains(info, "\n"+k+" = "+modulePkg+"\n") {
				t.Errorf(".PKGINFO lacks %q", k+" = "+modulePkg)
			}
		}
	})
}

func splitDepsHas(s, sep, name string) bool {
	_, ok := splitDeps(s, sep)[name]
	return ok
}

// dpkgRoot is an empty dpkg database under a temporary root.
func dpkgRoot(t *testing.T) (root string, dpkg func(args ...string) (string, error)) {
	t.Helper()
	needTools(t, "dpkg", "dpkg-deb")
	root = t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, func(args ...string) (string, error) {
		// The root holds no libc6 or libibverbs1 for our Depends to find.
		return run(t, "", nil, "dpkg", append([]string{"--root=" + root, "--force-depends", "--force-not-root"}, args...)...)
	}
}

// usb4Files lists what of either provider is left under root.
func usb4Files(t *testing.T, root string) []string {
	t.Helper()
	var left []string
	for _, g := range []string{"etc/libibverbs.d/usb4_rdma*", "usr/lib*/libibverbs/libusb4_rdma*",
		"usr/lib/*/libibverbs/libusb4_rdma*", "usr/bin/usb4verbs-container", "usr/bin/ibvinfo"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		left = append(left, m...)
	}
	return left
}

// Installing ours over the module's package replaces it in one dpkg -i; theirs over
// ours is refused; removing ours (not purging) leaves no provider or .driver file.
func TestDebReplacesModuleProvider(t *testing.T) {
	b := buildPackages(t)
	theirs := modulePackage(t, "deb")
	ours := onlyFile(t, b.out, "usb4verbs_*.deb")
	root, dpkg := dpkgRoot(t)
	if _, err := dpkg("-i", theirs); err != nil {
		t.Fatal(err)
	}
	out, err := dpkg("-i", ours)
	if err != nil {
		t.Fatalf("ours over %s: %v", modulePkg, err)
	}
	if !strings.Contains(out, "will remove "+modulePkg+" in favour of usb4verbs") {
		t.Errorf("dpkg did not say it removes %s:\n%s", modulePkg, out)
	}
	if st, _ := dpkg("-s", modulePkg); strings.Contains(st, "Status: install ok installed") {
		t.Errorf("%s still installed:\n%s", modulePkg, st)
	}
	checkTree(t, filepath.Join(root, "usr/lib/x86_64-linux-gnu/libibverbs"),
		providerTree("/", 0o644), b)
	if out, err := dpkg("-i", theirs); err == nil || !strings.Contains(out, "conflicting packages - not installing "+modulePkg) {
		t.Errorf("theirs over ours: want dpkg's refusal, got err=%v:\n%s", err, out)
	}
	if _, err := dpkg("-r", "usb4verbs"); err != nil {
		t.Fatal(err)
	}
	if left := usb4Files(t, root); len(left) != 0 {
		t.Errorf("dpkg -r usb4verbs left %v", left)
	}
}

// The same in an rpm database root: Obsoletes removes theirs, and theirs cannot go
// back over ours.
func TestRPMObsoletesModuleProvider(t *testing.T) {
	b := buildPackages(t)
	needTools(t, "rpm")
	theirs := modulePackage(t, "rpm")
	ours := onlyFile(t, b.out, "usb4verbs-*.rpm")
	root := t.TempDir()
	rpm := func(args ...string) (string, error) {
		return run(t, "", nil, "rpm", append([]string{"--root", root, "--nodeps"}, args...)...)
	}
	if _, err := run(t, "", nil, "rpm", "--root", root, "--initdb"); err != nil {
		t.Fatal(err)
	}
	if _, err := rpm("-i", theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := rpm("-U", ours); err != nil {
		t.Fatalf("ours over %s: %v", modulePkg, err)
	}
	if out, _ := run(t, "", nil, "rpm", "--root", root, "-qa", "--qf", "%{NAME}\n"); strings.TrimSpace(out) != "usb4verbs" {
		t.Errorf("installed after the upgrade: %q, want usb4verbs alone", out)
	}
	checkTree(t, filepath.Join(root, "usr/lib64/libibverbs"), providerTree("/", 0o755), b)
	if out, err := rpm("-i", theirs); err == nil || !strings.Contains(out, "conflicts with file from package usb4verbs") {
		t.Errorf("theirs over ours: want rpm's refusal, got err=%v:\n%s", err, out)
	}
	if _, err := rpm("-e", "usb4verbs"); err != nil {
		t.Fatal(err)
	}
	if left := usb4Files(t, root); len(left) != 0 {
		t.Errorf("rpm -e usb4verbs left %v", left)
	}
}

// install.sh stops at provider files a package owns, naming the command that removes
// the package; --replace runs it. A stand-in dpkg-query claims the files (a path under
// DESTDIR is in no real database) and a stand-in dpkg records the removal.
func TestTarballInstallStopsAtPackageOwnedFiles(t *testing.T) {
	b := buildPackages(t)
	top := unpackTarball(t, b)
	dest := t.TempDir()
	provDir := "/usr/lib/x86_64-linux-gnu/libibverbs"
	for p, body := range map[string]string{
		"/etc/libibverbs.d/usb4_rdma.driver":                "driver usb4_rdma\n",
		provDir + "/libusb4_rdma-rdmav34.so":                "their provider",
		"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0": "",
	} {
		full := filepath.Join(dest, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("libibverbs.so.1.14.44.0", filepath.Join(dest, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1")); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	removed := filepath.Join(bin, "removed")
	stub := map[string]string{
		// Owns both files as the module's package does, until "dpkg --remove" ran.
		"dpkg-query": "#!/bin/sh\n[ -e " + removed + " ] && exit 1\ncase $2 in */usb4_rdma.driver|*/libusb4_rdma-rdmav34.so) echo \"" + modulePkg + ": $2\"; exit 0;; esac\nexit 1\n",
		"dpkg": "#!/bin/sh\necho \"$@\" > " + removed + "\nrm -f " + filepath.Join(dest, "/etc/libibverbs.d/usb4_rdma.driver") +
			" " + filepath.Join(dest, provDir, "libusb4_rdma-rdmav34.so") + "\n",
		"rpm": "#!/bin/sh\nexit 1\n", "pacman": "#!/bin/sh\nexit 1\n",
	}
	for n, body := range stub {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"DESTDIR=" + dest, "PATH=" + bin + ":" + os.Getenv("PATH")}
	out, err := run(t, top, env, "./install.sh")
	if err == nil || !strings.Contains(out, "belongs to package "+modulePkg+"; remove it first (dpkg --remove "+modulePkg+"), or pass --replace") {
		t.Fatalf("want a refusal naming the package and its removal, got err=%v:\n%s", err, out)
	}
	if body, _ := os.ReadFile(filepath.Join(dest, provDir, "libusb4_rdma-rdmav34.so")); string(body) != "their provider" {
		t.Error("the refused install changed the package's file")
	}
	if _, err := run(t, top, env, "./install.sh", "--replace"); err != nil {
		t.Fatalf("--replace: %v", err)
	}
	if got, _ := os.ReadFile(removed); strings.TrimSpace(string(got)) != "--remove "+modulePkg {
		t.Errorf("--replace ran dpkg %q, want --remove %s", got, modulePkg)
	}
	checkTree(t, filepath.Join(dest, provDir), providerTree("/", 0o755), b)
}
