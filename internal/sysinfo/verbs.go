package sysinfo

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// Libibverbs is the system's libibverbs and the providers it would load.
type Libibverbs struct {
	// Path is the tree path of libibverbs.so.1 ("" when not installed),
	// RealPath the file it resolves to.
	Path     string `json:"path,omitempty"`
	RealPath string `json:"real_path,omitempty"`
	// Version is rdma-core's version from the file name
	// (libibverbs.so.1.<N>.<version>), "" when the name does not carry it.
	Version string `json:"rdma_core_version,omitempty"`
	// PABI is the private ABI from the IBVERBS_PRIVATE_<N> version node;
	// 0 when unknown.
	PABI int `json:"pabi"`
	// PublicNode is the newest IBVERBS_1.<N> node ("IBVERBS_1.14").
	PublicNode string `json:"public_node,omitempty"`
	// ProviderDir is where it dlopens lib<name>-rdmav<PABI>.so from
	// (rdma-core's VERBS_PROVIDER_DIR, <libdir>/libibverbs).
	ProviderDir string `json:"provider_dir,omitempty"`
	// Drivers are the "driver" lines of /etc/libibverbs.d/*.driver, each
	// resolved for PABI.
	Drivers []DriverEntry `json:"drivers"`
}

// DriverEntry is one "driver NAME" line of a .driver file.
type DriverEntry struct {
	File string `json:"file"` // the .driver file
	Name string `json:"name"` // "usb4_rdma" or an absolute path prefix
	// Library is the file libibverbs would dlopen for the running PABI;
	// Installed says whether it exists.
	Library   string `json:"library,omitempty"`
	Installed bool   `json:"installed"`
	// Ours is true when Library is usb4verbs' provider: the C front library
	// (its .usb4verbs section), or a single-file Go build from before the
	// split (its Go build info names the usb4verbs module). GoModule is the
	// module path from the Go build info, of the Go part for a front.
	Ours     bool   `json:"ours"`
	GoModule string `json:"go_module,omitempty"`
	// GoPart is, for a front library, the Go part it loads at the first open
	// (GoPartName in the directory of its real file); GoPartInstalled says
	// whether that file exists.
	GoPart          string `json:"go_part,omitempty"`
	GoPartInstalled bool   `json:"go_part_installed,omitempty"`
	// OtherPABIs lists the PABIs this name is installed for, besides the
	// running one.
	OtherPABIs []int `json:"other_pabis,omitempty"`
}

// OurModule is the Go module whose build info marks our provider.
const OurModule = "usb4verbs"

// GoPartName is the file name of the Go part our front library loads from
// its own directory (cshim/golib.c).
const GoPartName = "libusb4_rdma-go.so"

// frontSection is the ELF section that marks our C front library
// (cshim/register.c).
const frontSection = ".usb4verbs"

func isOurModule(bi *buildinfo.BuildInfo) bool {
	return bi.Path == OurModule || strings.HasPrefix(bi.Path, OurModule+"/") || bi.Main.Path == OurModule
}

// isFrontLibrary says whether file carries our front library's marker.
func isFrontLibrary(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(frontSection) != nil
}

// SupportedPABIs are the PABIs our provider registers under (DESIGN.md
// decision 2; reference rdma-core-private-abi.md §1).
var SupportedPABIs = []int{34, 57, 59, 64, 65}

// libDirs are searched for libibverbs.so.1, the multiarch directory of
// this machine first.
func libDirs() []string {
	arches := []string{"x86_64-linux-gnu", "aarch64-linux-gnu"}
	if runtime.GOARCH == "arm64" {
		arches[0], arches[1] = arches[1], arches[0]
	}
	var dirs []string
	for _, a := range arches {
		dirs = append(dirs, "usr/lib/"+a, "lib/"+a)
	}
	return append(dirs, "usr/lib64", "lib64", "usr/lib", "lib")
}

var libFileVersion = regexp.MustCompile(`^libibverbs\.so\.1\.(\d+)\.(\d+(?:\.\w+)?)$`)

func (t *tree) libibverbs() Libibverbs {
	var v Libibverbs
	for _, dir := range libDirs() {
		rel := dir + "/libibverbs.so.1"
		if t.exists(rel) {
			v.Path = "/" + rel
			v.ProviderDir = "/" + dir + "/libibverbs"
			break
		}
	}
	if v.Path != "" {
		real, ok := t.resolve(v.Path)
		if !ok {
			t.problem(v.Path, errors.New("broken symlink"))
		} else {
			v.RealPath = real
			if m := libFileVersion.FindStringSubmatch(path.Base(real)); m != nil {
				v.Version = m[2]
			}
			nodes, err := VersionNodes(t.abs(real))
			if err != nil {
				t.problem(real, err)
			}
			v.PABI, v.PublicNode = pabiFromNodes(nodes)
			if err == nil && v.PABI == 0 {
				t.problem(real, errors.New("no IBVERBS_PRIVATE_<N> version node"))
			}
		}
	}
	v.Drivers = t.driverEntries(v)
	return v
}

// VersionNodes returns the symbol version nodes an ELF shared object
// defines (its .gnu.version_d section), e.g. "IBVERBS_1.14" and
// "IBVERBS_PRIVATE_34". Reading the file has no side effects, unlike
// dlopen, and works on a captured tree.
func VersionNodes(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("not a readable ELF file: %w", err)
	}
	defer f.Close()
	vd := f.SectionByType(elf.SHT_GNU_VERDEF)
	if vd == nil {
		return nil, errors.New("no .gnu.version_d section")
	}
	if int(vd.Link) >= len(f.Sections) || vd.Link == 0 {
		return nil, errors.New(".gnu.version_d has no string table")
	}
	d, err := vd.Data()
	if err != nil {
		return nil, fmt.Errorf("read .gnu.version_d: %w", err)
	}
	strs, err := f.Sections[vd.Link].Data()
	if err != nil {
		return nil, fmt.Errorf("read version strings: %w", err)
	}
	return parseVerdef(d, strs, f.ByteOrder)
}

// parseVerdef walks Elf_Verdef records (vd_version u16, vd_flags u16,
// vd_ndx u16, vd_cnt u16, vd_hash u32, vd_aux u32, vd_next u32) and takes
// the name of each record's first Elf_Verdaux (vda_name u32, vda_next u32),
// per the LSB "Symbol Versioning" specification.
func parseVerdef(d, strs []byte, bo interface {
	Uint16([]byte) uint16
	Uint32([]byte) uint32
}) ([]string, error) {
	var names []string
	off := 0
	for range 4096 {
		if off < 0 || off+20 > len(d) {
			return names, errors.New("truncated version definition")
		}
		if bo.Uint16(d[off:]) != 1 {
			return names, fmt.Errorf("unknown version definition revision %d", bo.Uint16(d[off:]))
		}
		cnt := bo.Uint16(d[off+6:])
		aux := int(bo.Uint32(d[off+12:]))
		next := int(bo.Uint32(d[off+16:]))
		if cnt > 0 {
			a := off + aux
			if aux < 0 || a+8 > len(d) || a < 0 {
				return names, errors.New("truncated version name")
			}
			name, ok := cString(strs, int(bo.Uint32(d[a:])))
			if !ok {
				return names, errors.New("version name outside string table")
			}
			names = append(names, name)
		}
		if next == 0 {
			return names, nil
		}
		off += next
	}
	return names, errors.New("too many version definitions")
}

func cString(b []byte, off int) (string, bool) {
	if off < 0 || off >= len(b) {
		return "", false
	}
	end := off
	for end < len(b) && b[end] != 0 {
		end++
	}
	if end == len(b) {
		return "", false
	}
	return string(b[off:end]), true
}

// pabiFromNodes picks IBVERBS_PRIVATE_<N> and the newest IBVERBS_1.<N>.
func pabiFromNodes(nodes []string) (pabi int, public string) {
	best := -1
	for _, n := range nodes {
		if s, ok := strings.CutPrefix(n, "IBVERBS_PRIVATE_"); ok {
			if v, err := strconv.Atoi(s); err == nil {
				pabi = v
			}
		}
		if s, ok := strings.CutPrefix(n, "IBVERBS_1."); ok {
			if v, err := strconv.Atoi(s); err == nil && v > best {
				best, public = v, n
			}
		}
	}
	return pabi, public
}

const driverConfDir = "etc/libibverbs.d"

var rdmavSuffix = regexp.MustCompile(`-rdmav(\d+)\.so$`)

func (t *tree) driverEntries(v Libibverbs) []DriverEntry {
	entries := []DriverEntry{}
	for _, f := range t.list(driverConfDir) {
		rel := driverConfDir + "/" + f
		if fi, err := os.Stat(t.abs(rel)); err != nil || !fi.Mode().IsRegular() {
			continue // libibverbs reads regular files only
		}
		s, ok := t.read(rel, false)
		if !ok {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			if len(fields) != 2 || fields[0] != "driver" {
				t.problem(rel, fmt.Errorf("ignored line %q", line))
				continue
			}
			entries = append(entries, t.resolveDriver("/"+rel, fields[1], v))
		}
	}
	return entries
}

// resolveDriver finds the library libibverbs' load_driver would dlopen for
// name: "<name>-rdmav<PABI>.so" for an absolute name, else
// "<provider dir>/lib<name>-rdmav<PABI>.so" (rdma-core
// libibverbs/dynamic_driver.c; reference §6.2).
func (t *tree) resolveDriver(file, name string, v Libibverbs) DriverEntry {
	e := DriverEntry{File: file, Name: name}
	var prefix string
	switch {
	case strings.HasPrefix(name, "/"):
		prefix = path.Clean(name)
	case v.ProviderDir != "":
		prefix = v.ProviderDir + "/lib" + name
	default:
		return e
	}
	if v.PABI != 0 {
		e.Library = fmt.Sprintf("%s-rdmav%d.so", prefix, v.PABI)
		if real, ok := t.resolve(e.Library); ok {
			e.Installed = true
			if bi, err := buildinfo.ReadFile(t.abs(real)); err == nil {
				e.GoModule = bi.Path
				e.Ours = isOurModule(bi)
			} else if isFrontLibrary(t.abs(real)) {
				e.Ours = true
				e.GoPart = path.Join(path.Dir(real), GoPartName)
				if gp, ok := t.resolve(e.GoPart); ok {
					e.GoPartInstalled = true
					if bi, err := buildinfo.ReadFile(t.abs(gp)); err == nil {
						e.GoModule = bi.Path
					}
				}
			}
		}
	}
	dir, base := path.Split(prefix)
	for _, f := range t.list(dir) {
		rest, ok := strings.CutPrefix(f, base)
		if !ok {
			continue
		}
		if m := rdmavSuffix.FindStringSubmatch(rest); m != nil && m[0] == rest {
			if n, err := strconv.Atoi(m[1]); err == nil && n != v.PABI {
				e.OtherPABIs = append(e.OtherPABIs, n)
			}
		}
	}
	sort.Ints(e.OtherPABIs)
	return e
}
