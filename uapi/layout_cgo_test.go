//go:build cgo

package uapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"usb4verbs/uapi/internal/cabi"
	"usb4verbs/uapi/internal/cname"
	"usb4verbs/uapi/internal/gosrc"
)

func loadSource(t *testing.T) *gosrc.Package {
	t.Helper()
	pkg, err := gosrc.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// TestConstantsMatchC compares every C-named constant of the package with
// the value the C compiler gives the same name in /usr/include/rdma. Names
// the Debian 12 headers lack (newer kernels, ib_verbs.h enums, vendor ABIs)
// are skipped; none may differ.
func TestConstantsMatchC(t *testing.T) {
	pkg := loadSource(t)
	checked, skipped := 0, 0
	for _, c := range pkg.Consts {
		goVal, ok := c.Int64()
		if !ok {
			t.Errorf("%s = %s: not an int64 constant", c.Name, c.Value)
			continue
		}
		cVal, ok := cabi.Value("const:" + c.Name)
		switch {
		case ok:
			checked++
			if goVal != cVal {
				t.Errorf("%s = %#x, C says %#x", c.Name, goVal, cVal)
			}
		case cabi.Absent(c.Name):
			skipped++
		default:
			t.Errorf("%s: not in the cabi tables; run go generate ./uapi", c.Name)
		}
	}
	t.Logf("%d constants checked against C, %d absent from the system headers", checked, skipped)
	if checked < 500 {
		t.Errorf("only %d constants checked; the cabi tables look truncated", checked)
	}
}

// TestStructLayoutsMatchC checks, for every exported struct, that Go's size
// equals its Sizeof constant and, where the system headers define the C
// struct, that size, every field offset and every field size equal C's.
func TestStructLayoutsMatchC(t *testing.T) {
	pkg := loadSource(t)
	checkedStructs := 0
	for _, s := range pkg.Structs {
		rt, ok := structTypes[s.Name]
		if !ok {
			t.Errorf("%s: missing from structTypes; run go generate ./uapi", s.Name)
			continue
		}
		want, ok := pkg.Sizeofs[s.Name]
		if !ok {
			t.Errorf("%s: no Sizeof%s constant", s.Name, s.Name)
		} else if int64(rt.Size()) != want {
			t.Errorf("unsafe.Sizeof(%s) = %d, Sizeof%s = %d", s.Name, rt.Size(), s.Name, want)
		}
		csize, ok := cabi.Value("sizeof:" + s.Name)
		if !ok {
			if !cabi.Absent(s.Name) {
				t.Errorf("%s: not in the cabi tables; run go generate ./uapi", s.Name)
			} else if _, ok := writtenLayouts[s.Name]; !ok {
				t.Errorf("%s: absent from the system headers and from writtenLayouts; write its header layout down", s.Name)
			}
			continue
		}
		checkedStructs++
		cn, _ := cabi.CName(s.Name)
		if int64(rt.Size()) != csize {
			t.Errorf("%s: Go size %d, sizeof(%s) = %d", s.Name, rt.Size(), cn, csize)
		}
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Name == "_" {
				continue
			}
			key := s.Name + "." + f.Name
			off, ok1 := cabi.Value("offsetof:" + key)
			size, ok2 := cabi.Value("fieldsize:" + key)
			if !ok1 || !ok2 {
				t.Errorf("%s: no C member recorded; run go generate ./uapi", key)
				continue
			}
			cf, _ := cabi.CName(key)
			if int64(f.Offset) != off {
				t.Errorf("%s: Go offset %d, offsetof(%s, %s) = %d", key, f.Offset, cn, cf, off)
			}
			if int64(f.Type.Size()) != size {
				t.Errorf("%s: Go size %d, C member %s.%s size %d", key, f.Type.Size(), cn, cf, size)
			}
		}
	}
	if checkedStructs < 100 {
		t.Errorf("only %d structs checked against C; the cabi tables look truncated", checkedStructs)
	}
}

// TestGeneratedTablesUpToDate regenerates the cabi tables and the struct
// type map and requires them to equal the committed files.
func TestGeneratedTablesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	if d := headerDigest(t); d != cabi.HeaderDigest {
		t.Skipf("/usr/include/rdma differs from the headers the tables were generated from (sha256 %s, not %s); the committed tables follow Debian 12's linux-libc-dev", d, cabi.HeaderDigest)
	}
	dir := t.TempDir()
	cabiOut, typesOut := filepath.Join(dir, "zcabi.go"), filepath.Join(dir, "ztypes.go")
	cmd := exec.Command("go", "run", "./internal/cmd/gencabi", "-cabi", cabiOut, "-types", typesOut)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gencabi: %v\n%s", err, out)
	}
	for gen, committed := range map[string]string{
		cabiOut:  "internal/cabi/zcabi.go",
		typesOut: "zlayout_types_test.go",
	} {
		a, err := os.ReadFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(committed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s is stale: run go generate ./uapi", committed)
		}
	}
}

// headerDigest hashes the system headers the way gencabi does.
func headerDigest(t *testing.T) string {
	t.Helper()
	sum := sha256.New()
	for _, h := range cabi.Headers {
		b, err := os.ReadFile(filepath.Join("/usr/include/rdma", h))
		if err != nil {
			t.Fatal(err)
		}
		sum.Write(b)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// TestCHeaderAgainstSystemHeaders compiles one C file that includes both
// the generated header and the kernel's, asserting in C that every USB4V_
// constant equals the kernel constant of the same name and that every
// usb4v_ struct has the kernel struct's size and member offsets.
func TestCHeaderAgainstSystemHeaders(t *testing.T) {
	hdr, err := os.ReadFile(cHeader)
	if err != nil {
		t.Fatal(err)
	}
	var src bytes.Buffer
	src.WriteString("#include <stddef.h>\n#include <linux/netlink.h>\n")
	for _, h := range []string{"rdma_user_ioctl_cmds.h", "ib_user_verbs.h", "ib_user_ioctl_cmds.h", "ib_user_ioctl_verbs.h", "rdma_user_rxe.h"} {
		fmt.Fprintf(&src, "#include <rdma/%s>\n", h)
	}
	src.WriteString("#include \"usb4verbs_uapi.h\"\n")
	consts := 0
	for _, line := range strings.Split(string(hdr), "\n") {
		name, ok := strings.CutPrefix(line, "#define USB4V_")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if _, ok := cabi.Value("const:" + name); !ok {
			continue
		}
		consts++
		fmt.Fprintf(&src, "_Static_assert((long long)USB4V_%s == (long long)(%s), \"%s\");\n", name, name, name)
	}
	structs := 0
	for goName, rt := range structTypes {
		cn, ok := cabi.CName(goName)
		if !ok || strings.Contains(cn, ".") || !strings.Contains(string(hdr), "struct usb4v_"+cn+" {") {
			continue // union views and structs the header does not carry
		}
		structs++
		fmt.Fprintf(&src, "_Static_assert(sizeof(struct usb4v_%s) == sizeof(struct %s), \"%s size\");\n", cn, cn, cn)
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			cf, ok := cabi.CName(goName + "." + f.Name)
			if f.Name == "_" || !ok {
				continue
			}
			fmt.Fprintf(&src, "_Static_assert(offsetof(struct usb4v_%s, %s) == offsetof(struct %s, %s), \"%s.%s\");\n",
				cn, cname.Snake(f.Name), cn, cf, cn, cf)
		}
	}
	if consts < 80 || structs < 25 {
		t.Fatalf("only %d constants and %d structs cross-checked", consts, structs)
	}
	if out, err := compileC(t, src.String()); err != nil {
		t.Fatalf("generated header disagrees with /usr/include/rdma: %v\n%s", err, out)
	}
	t.Logf("C header cross-checked in C: %d constants, %d structs", consts, structs)
}
