package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	testVersion = "0.1.0"
	realName    = "libusb4_rdma.so." + testVersion
	goPartName  = "libusb4_rdma-go.so" // the Go part, beside the front library
	glibcFloor  = "2.35"
)

// pabis are the private-ABI names libibverbs may ask for (rdma-core-private-abi.md §1).
var pabis = []string{"34", "57", "59", "64", "65"}

// entry is what the tests expect at one path of an installed tree.
type entry struct {
	kind   byte   // 'f' regular file, 'l' symlink, 'p' a copy of the front library
	target string // symlink target, as stored
	mode   os.FileMode
	body   string // exact content, when not empty
}

// built is one run of build.sh, shared by the tests (building twice costs a minute).
type built struct {
	out, so, goSo, ibvinfo string
	err                    error
}

var shared *built

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// findNfpm returns the nfpm build.sh would use, or skips: the tests never install it.
func findNfpm(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NFPM"); p != "" {
		return p
	}
	cache := os.Getenv("CACHE")
	if cache == "" {
		cache = filepath.Join(repoRoot(t), ".cache")
	}
	if p := filepath.Join(cache, "bin", "nfpm"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("nfpm"); err == nil {
		return p
	}
	t.Skip("nfpm is not installed: `make package` installs it into .cache/bin " +
		"(go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2)")
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), err
}

// buildPackages compiles the provider and ibvinfo from this checkout and runs build.sh
// once per test binary.
func buildPackages(t *testing.T) *built {
	t.Helper()
	nfpm := findNfpm(t)
	needTools(t, "objdump", "gcc", "tar", "sha256sum")
	if runtime.GOARCH != "amd64" {
		t.Skipf("packages are built for amd64 here, not %s", runtime.GOARCH)
	}
	if shared != nil {
		if shared.err != nil {
			t.Fatal(shared.err)
		}
		return shared
	}
	root := repoRoot(t)
	dir, err := os.MkdirTemp("", "usb4verbs-pkgtest-")
	if err != nil {
		t.Fatal(err)
	}
	b := &built{out: filepath.Join(dir, "out"), so: filepath.Join(dir, "libusb4_rdma.so"),
		goSo: filepath.Join(dir, goPartName), ibvinfo: filepath.Join(dir, "ibvinfo")}
	shared = b
	if _, b.err = run(t, root, nil, "scripts/build-provider.sh", dir); b.err != nil {
		t.Fatal(b.err)
	}
	if _, b.err = run(t, root, nil, "go", "build", "-o", b.ibvinfo, "./cmd/ibvinfo"); b.err != nil {
		t.Fatal(b.err)
	}
	env := []string{"NFPM=" + nfpm, "VERSION=" + testVersion, "PKG_OUT=" + b.out,
		"PKG_SO=" + b.so, "PKG_GO_SO=" + b.goSo, "PKG_IBVINFO=" + b.ibvinfo}
	if _, b.err = run(t, root, env, "packaging/build.sh"); b.err != nil {
		t.Fatal(b.err)
	}
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		os.RemoveAll(filepath.Dir(shared.out))
	}
	os.Exit(code)
}

// providerTree is what every format must install in its provider dir: the front
// library as a file under every PABI name (a container engine's cp of one name must
// copy the front, not a dangling symlink), and the Go part beside it.
func providerTree(dir string, soMode os.FileMode) map[string]entry {
	want := map[string]entry{filepath.Join(dir, goPartName): {kind: 'f', mode: soMode}}
	for _, p := range pabis {
		want[filepath.Join(dir, "libusb4_rdma-rdmav"+p+".so")] = entry{kind: 'p', mode: soMode}
	}
	return want
}

func commonTree(driverLine string) map[string]entry {
	return map[string]entry{
		"/etc/libibverbs.d/usb4_rdma.driver":    {kind: 'f', mode: 0o644, body: driverLine + "\n"},
		"/usr/bin/ibvinfo":                      {kind: 'f', mode: 0o755},
		"/usr/bin/usb4verbs-container":          {kind: 'f', mode: 0o755},
		"/usr/share/doc/usb4verbs/README.md":    {kind: 'f', mode: 0o644},
		"/usr/share/doc/usb4verbs/PACKAGING.md": {kind: 'f', mode: 0o644},
		"/usr/share/doc/usb4verbs/PROVIDER.md":  {kind: 'f', mode: 0o644},
	}
}

func merge(ms ...map[string]entry) map[string]entry {
	out := map[string]entry{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// checkTree compares the non-directory entries under root with want, exactly: a file
// the package should not ship is an error too. The real provider file and the Go part
// must be the files that were packaged, byte for byte.
func checkTree(t *testing.T, root string, want map[string]entry, b *built) {
	t.Helper()
	got := map[string]bool{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel := "/" + strings.TrimPrefix(p, root+"/")
		got[rel] = true
		w, ok := want[rel]
		if !ok {
			t.Errorf("unexpected %s", rel)
			return nil
		}
		switch {
		case w.kind == 'l':
			tgt, err := os.Readlink(p)
			if fi.Mode()&os.ModeSymlink == 0 || err != nil || tgt != w.target {
				t.Errorf("%s: want a symlink to %s, got mode %v target %q", rel, w.target, fi.Mode(), tgt)
			}
		case !fi.Mode().IsRegular():
			t.Errorf("%s: want a regular file, got mode %v", rel, fi.Mode())
		case fi.Mode().Perm() != w.mode:
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode().Perm(), w.mode)
		}
		if w.body != "" {
			if b, err := os.ReadFile(p); err != nil || string(b) != w.body {
				t.Errorf("%s: content %q, want %q", rel, b, w.body)
			}
		}
		if (w.kind == 'p' || strings.HasSuffix(rel, "/"+realName)) && !sameFile(t, p, b.so) {
			t.Errorf("%s is not the packaged libusb4_rdma.so", rel)
		}
		if strings.HasSuffix(rel, "/"+goPartName) && !sameFile(t, p, b.goSo) {
			t.Errorf("%s is not the packaged %s", rel, goPartName)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("missing %s", p)
		}
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func onlyFile(t *testing.T, dir, glob string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil || len(m) != 1 {
		t.Fatalf("want exactly one %s in %s, got %v (%v)", glob, dir, m, err)
	}
	return m[0]
}

// extractTarStream unpacks a tar stream into dir (files, dirs, symlinks only).
func extractTarStream(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.Symlink(h.Linkname, dst)
			}
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600); err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Chmod(dst, os.FileMode(h.Mode).Perm())
			}
		default:
			err = fmt.Errorf("%s: unexpected tar entry type %q", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// arMembers reads a Debian package's ar archive (the format is ar(5): a global magic,
// then 60-byte headers, members padded to even length).
func arMembers(data []byte) (map[string][]byte, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(data, []byte(magic)) {
		return nil, errors.New("not an ar archive")
	}
	out := map[string][]byte{}
	for off := len(magic); off < len(data); {
		if off+60 > len(data) {
			return nil, errors.New("truncated ar header")
		}
		h := data[off : off+60]
		name := strings.TrimSuffix(strings.TrimSpace(string(h[0:16])), "/")
		size, err := strconv.Atoi(strings.TrimSpace(string(h[48:58])))
		if err != nil || size < 0 || off+60+size > len(data) {
			return nil, fmt.Errorf("ar member %q: bad size", name)
		}
		out[name] = data[off+60 : off+60+size]
		off += 60 + size + size%2
	}
	return out, nil
}

func untarGz(t *testing.T, data []byte, dir string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := extractTarStream(zr, dir); err != nil {
		t.Fatal(err)
	}
}

// controlFields parses a deb control file into fields (continuation lines dropped).
func controlFields(s string) map[string]string {
	f := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
			f[k] = strings.TrimSpace(v)
		}
	}
	return f
}

func TestDeb(t *testing.T) {
	b := buildPackages(t)
	deb := onlyFile(t, b.out, "usb4verbs_"+testVersion+"-1_amd64.deb")
	data, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	members, err := arMembers(data)
	if err != nil {
		t.Fatal(err)
	}
	if members["data.tar.gz"] == nil || members["control.tar.gz"] == nil {
		t.Fatalf("deb members: want data.tar.gz and control.tar.gz, got %v", keys(members))
	}
	root := t.TempDir()
	untarGz(t, members["data.tar.gz"], root)
	checkTree(t, root, merge(providerTree("/usr/lib/x86_64-linux-gnu/libibverbs", 0o644),
		commonTree("driver usb4_rdma")), b)

	ctl := t.TempDir()
	untarGz(t, members["control.tar.gz"], ctl)
	control, err := os.ReadFile(filepath.Join(ctl, "control"))
	if err != nil {
		t.Fatal(err)
	}
	fields := controlFields(string(control))
	if fields["Package"] != "usb4verbs" || fields["Architecture"] != "amd64" || fields["Version"] != testVersion+"-1" {
		t.Errorf("control: Package/Architecture/Version = %q/%q/%q", fields["Package"], fields["Architecture"], fields["Version"])
	}
	deps := splitDeps(fields["Depends"], ",")
	if deps["libibverbs1"] != "" {
		t.Errorf("Depends pins libibverbs1 %q; want no version", deps["libibverbs1"])
	}
	if _, ok := deps["libibverbs1"]; !ok {
		t.Errorf("Depends %q lacks libibverbs1", fields["Depends"])
	}
	checkLibcDep(t, b, deps["libc6"], "(>= ")
	// dpkg keeps conffiles after a remove: the .driver file must go with the package.
	if conffiles, err := os.ReadFile(filepath.Join(ctl, "conffiles")); err == nil && len(bytes.TrimSpace(conffiles)) != 0 {
		t.Errorf("conffiles = %q, want none (a remove would leave the .driver file)", conffiles)
	}
	if _, err := os.Stat(filepath.Join(ctl, "postinst")); err == nil {
		t.Error("postinst present: nothing needs one (no ldconfig: no SONAME, dir not in the linker path)")
	}
	if out, err := run(t, "", nil, "dpkg-deb", "--info", deb); err == nil {
		t.Logf("dpkg-deb --info:\n%s", out)
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// splitDeps maps each dependency name to its version constraint ("" when none).
func splitDeps(s, sep string) map[string]string {
	out := map[string]string{}
	for _, d := range strings.Split(s, sep) {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		i := strings.IndexAny(d, " (<>=")
		if i < 0 {
			out[d] = ""
			continue
		}
		out[d[:i]] = strings.TrimSpace(d[i:])
	}
	return out
}

// checkLibcDep: the libc dependency carries exactly the version check-glibc.sh
// measured on the packaged files, which must not exceed the floor.
func checkLibcDep(t *testing.T, b *built, got, op string) {
	t.Helper()
	out, err := run(t, "", nil, "./check-glibc.sh", "--floor", glibcFloor, b.so, b.goSo, b.ibvinfo)
	if err != nil {
		t.Fatal(err)
	}
	need := strings.TrimSpace(out)
	want := op + need
	if op == "(>= " {
		want += ")"
	}
	if got != want {
		t.Errorf("libc dependency %q, want %q", got, want)
	}
}

func TestRPM(t *testing.T) {
	b := buildPackages(t)
	needTools(t, "rpm", "rpm2cpio", "cpio")
	rpm := onlyFile(t, b.out, "usb4verbs-"+testVersion+"-1.x86_64.rpm")
	root := t.TempDir()
	cmd := fmt.Sprintf("rpm2cpio %q | cpio -idm --quiet --no-absolute-filenames", rpm)
	if _, err := run(t, root, nil, "sh", "-c", cmd); err != nil {
		t.Fatal(err)
	}
	checkTree(t, root, merge(providerTree("/usr/lib64/libibverbs", 0o755),
		commonTree("driver usb4_rdma")), b)
	out, err := run(t, "", nil, "rpm", "-qp", "--requires", rpm)
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for k, v := range splitDeps(line, ",") {
			deps[k] = v
		}
	}
	if v, ok := deps["libibverbs"]; !ok || v != "" {
		t.Errorf("requires %q: want libibverbs without a version", out)
	}
	checkLibcDep(t, b, deps["glibc"], ">= ")
	if out, err := run(t, "", nil, "rpm", "-qp", "--configfiles", rpm); err != nil ||
		strings.TrimSpace(out) != "/etc/libibverbs.d/usb4_rdma.driver" {
		t.Errorf("rpm config files %q (%v), want the .driver file", out, err)
	}
}

func TestArch(t *testing.T) {
	b := buildPackages(t)
	needTools(t, "zstd")
	pkg := onlyFile(t, b.out, "usb4verbs-"+testVersion+"-1-x86_64.pkg.tar.zst")
	root := t.TempDir()
	if _, err := run(t, root, nil, "tar", "--zstd", "-xf", pkg); err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(filepath.Join(root, ".PKGINFO"))
	if err != nil {
		t.Fatal(err)
	}
	for _, meta := range []string{".PKGINFO", ".MTREE"} {
		if err := os.Remove(filepath.Join(root, meta)); err != nil {
			t.Errorf("%s: %v", meta, err)
		}
	}
	checkTree(t, root, merge(providerTree("/usr/lib/libibverbs", 0o755),
		commonTree("driver usb4_rdma")), b)
	deps := map[string]string{}
	for _, line := range strings.Split(string(info), "\n") {
		if d, ok := strings.CutPrefix(line, "depend = "); ok {
			for k, v := range splitDeps(d, ",") {
				deps[k] = v
			}
		}
	}
	if v, ok := deps["rdma-core"]; !ok || v != "" {
		t.Errorf(".PKGINFO depends %v: want rdma-core without a version", deps)
	}
	checkLibcDep(t, b, deps["glibc"], ">=")
	if !strings.Contains(string(info), "backup = etc/libibverbs.d/usb4_rdma.driver") {
		t.Error(".PKGINFO: the .driver file is not a backup (config) file")
	}
}

// unpackTarball extracts the tarball and returns its top directory.
func unpackTarball(t *testing.T, b *built) string {
	t.Helper()
	tgz := onlyFile(t, b.out, "usb4verbs-"+testVersion+"-linux-amd64.tar.gz")
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	untarGz(t, data, dir)
	top := filepath.Join(dir, "usb4verbs-"+testVersion+"-linux-amd64")
	checkTree(t, top, map[string]entry{
		"/install.sh":                       {kind: 'f', mode: 0o755},
		"/bin/ibvinfo":                      {kind: 'f', mode: 0o755},
		"/bin/usb4verbs-container":          {kind: 'f', mode: 0o755},
		"/lib/" + realName:                  {kind: 'f', mode: 0o755},
		"/lib/" + goPartName:                {kind: 'f', mode: 0o755},
		"/share/doc/usb4verbs/README.md":    {kind: 'f', mode: 0o644},
		"/share/doc/usb4verbs/PACKAGING.md": {kind: 'f', mode: 0o644},
		"/share/doc/usb4verbs/PROVIDER.md":  {kind: 'f', mode: 0o644},
	}, b)
	return top
}

const manifest = "/usr/local/share/usb4verbs/installed-files"

func TestTarballInstallPrefix(t *testing.T) {
	b := buildPackages(t)
	top := unpackTarball(t, b)
	dest := t.TempDir()
	env := []string{"DESTDIR=" + dest}
	if _, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4"); err != nil {
		t.Fatal(err)
	}
	checkTree(t, dest, merge(providerTree("/opt/u4/lib", 0o755), map[string]entry{
		"/etc/libibverbs.d/usb4_rdma.driver":       {kind: 'f', mode: 0o644, body: "driver /opt/u4/lib/libusb4_rdma\n"},
		"/opt/u4/bin/ibvinfo":                      {kind: 'f', mode: 0o755},
		"/opt/u4/bin/usb4verbs-container":          {kind: 'f', mode: 0o755},
		"/opt/u4/share/doc/usb4verbs/README.md":    {kind: 'f', mode: 0o644},
		"/opt/u4/share/doc/usb4verbs/PACKAGING.md": {kind: 'f', mode: 0o644},
		"/opt/u4/share/doc/usb4verbs/PROVIDER.md":  {kind: 'f', mode: 0o644},
		"/opt/u4/share/usb4verbs/installed-files":  {kind: 'f', mode: 0o644},
	}), b)

	// A second install over the first is allowed (it recorded the .driver file).
	if _, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4"); err != nil {
		t.Fatalf("reinstall: %v", err)
	}
	if _, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4", "--uninstall"); err != nil {
		t.Fatal(err)
	}
	checkTree(t, dest, map[string]entry{}, b)
	if _, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4", "--uninstall"); err == nil {
		t.Error("a second --uninstall succeeded; want an error naming the missing record")
	}
}

func TestTarballInstallFindsProviderDir(t *testing.T) {
	b := buildPackages(t)
	top := unpackTarball(t, b)
	cases := []struct {
		name    string
		setup   map[string]string // path -> symlink target ("" = empty file)
		provDir string            // "" = install.sh must refuse
	}{
		{"libibverbs in lib64 (Fedora)", map[string]string{
			"/usr/lib64/libibverbs.so.1.14.51.0": "", "/usr/lib64/libibverbs.so.1": "libibverbs.so.1.14.51.0"},
			"/usr/lib64/libibverbs"},
		{"libibverbs in the multiarch dir (Debian)", map[string]string{
			"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0": "",
			"/usr/lib/x86_64-linux-gnu/libibverbs.so.1":         "libibverbs.so.1.14.44.0"},
			"/usr/lib/x86_64-linux-gnu/libibverbs"},
		{"no libibverbs, Ubuntu os-release", map[string]string{
			"/etc/os-release": "ID=ubuntu\nID_LIKE=debian\n"}, "/usr/lib/x86_64-linux-gnu/libibverbs"},
		{"no libibverbs, Arch os-release", map[string]string{
			"/etc/os-release": "ID=arch\n"}, "/usr/lib/libibverbs"},
		{"nothing to go by", map[string]string{"/etc/os-release": "ID=plan9\n"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := t.TempDir()
			for p, v := range c.setup {
				full := filepath.Join(dest, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if strings.HasPrefix(p, "/etc/") || v == "" {
					err = os.WriteFile(full, []byte(v), 0o644)
				} else {
					err = os.Symlink(v, full)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			out, err := run(t, top, []string{"DESTDIR=" + dest}, "./install.sh")
			if c.provDir == "" {
				if err == nil || !strings.Contains(out, "--provider-dir") {
					t.Fatalf("want a refusal that names --provider-dir, got err=%v out=%q", err, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pabis {
				l := filepath.Join(dest, c.provDir, "libusb4_rdma-rdmav"+p+".so")
				if fi, err := os.Lstat(l); err != nil || !fi.Mode().IsRegular() || !sameFile(t, l, b.so) {
					t.Errorf("%s: want a copy of the front library (%v)", l, err)
				}
			}
			driver, err := os.ReadFile(filepath.Join(dest, "/etc/libibverbs.d/usb4_rdma.driver"))
			if want := "driver " + c.provDir + "/libusb4_rdma\n"; err != nil || string(driver) != want {
				t.Errorf(".driver = %q (%v), want %q", driver, err, want)
			}
			if !isExecutable(filepath.Join(dest, "/usr/local/bin/ibvinfo")) {
				t.Error("ibvinfo not installed in /usr/local/bin")
			}
			if _, err := os.Stat(filepath.Join(dest, manifest)); err != nil {
				t.Errorf("no install record: %v", err)
			}
			if _, err := run(t, top, []string{"DESTDIR=" + dest}, "./install.sh", "--uninstall"); err != nil {
				t.Fatal(err)
			}
			if m, _ := filepath.Glob(filepath.Join(dest, c.provDir, "libusb4_rdma*")); len(m) != 0 {
				t.Errorf("--uninstall left %v", m)
			}
		})
	}
}

// A .driver file that install.sh did not record (the deb's, say) is not overwritten.
func TestTarballInstallRefusesForeignDriverFile(t *testing.T) {
	b := buildPackages(t)
	top := unpackTarball(t, b)
	dest := t.TempDir()
	driver := filepath.Join(dest, "etc/libibverbs.d/usb4_rdma.driver")
	if err := os.MkdirAll(filepath.Dir(driver), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(driver, []byte("driver usb4_rdma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"DESTDIR=" + dest}
	out, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4")
	if err == nil || !strings.Contains(out, "--force") {
		t.Fatalf("want a refusal that names --force, got err=%v out=%q", err, out)
	}
	if body, _ := os.ReadFile(driver); string(body) != "driver usb4_rdma\n" {
		t.Errorf("the foreign .driver file was changed to %q", body)
	}
	if _, err := run(t, top, env, "./install.sh", "--prefix", "/opt/u4", "--force"); err != nil {
		t.Fatal(err)
	}
}

func TestCheckGlibc(t *testing.T) {
	b := buildPackages(t)
	out, err := run(t, "", nil, "./check-glibc.sh", "--floor", glibcFloor, b.so, b.ibvinfo)
	if err != nil {
		t.Fatalf("the provider or ibvinfo exceeds the glibc floor %s: %v", glibcFloor, err)
	}
	t.Logf("libusb4_rdma.so, %s and ibvinfo need GLIBC_%s (floor %s)", goPartName, strings.TrimSpace(out), glibcFloor)
	// The same files against a floor below what they need must fail and name symbols.
	out, err = run(t, "", nil, "./check-glibc.sh", "--floor", "2.17", b.so)
	if err == nil || !strings.Contains(out, "@GLIBC_2.3") {
		t.Errorf("--floor 2.17: want a failure naming GLIBC_2.3x symbols, got err=%v out=%q", err, out)
	}
}

// build.sh must refuse a provider that needs a newer glibc than the floor. The stand-in
// calls arc4random, which glibc added in 2.36; skipped on hosts with an older glibc.
func TestBuildRefusesNewGlibc(t *testing.T) {
	b := buildPackages(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "new.c")
	so := filepath.Join(dir, "new.so")
	if err := os.WriteFile(src, []byte("#include <stdlib.h>\nunsigned int f(void) { return arc4random(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, dir, nil, "gcc", "-std=gnu11", "-shared", "-fPIC", "-o", so, src); err != nil {
		t.Skipf("host glibc has no arc4random (older than 2.36): %v", err)
	}
	env := []string{"NFPM=" + findNfpm(t), "PKG_OUT=" + filepath.Join(dir, "out"), "PKG_SO=" + so, "PKG_GO_SO=" + b.goSo, "PKG_IBVINFO=" + b.ibvinfo}
	out, err := run(t, repoRoot(t), env, "packaging/build.sh")
	if err == nil {
		t.Fatal("build.sh packaged a provider that needs GLIBC_2.36")
	}
	if !strings.Contains(out, "arc4random@GLIBC_2.36") || !strings.Contains(out, "floor 2.35 exceeded") {
		t.Errorf("the failure does not name the symbol and the floor:\n%s", out)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "out", "*")); len(m) != 0 {
		t.Errorf("build.sh left packages behind: %v", m)
	}
}
