package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"usb4verbs/uapi/internal/cname"
	"usb4verbs/uapi/internal/gosrc"
)

// headers are the uAPI headers the uapi package mirrors.
var headers = []string{
	"rdma_user_ioctl_cmds.h",
	"ib_user_verbs.h",
	"ib_user_ioctl_cmds.h",
	"ib_user_ioctl_verbs.h",
	"rdma_user_rxe.h",
	"rdma_netlink.h",
}

// constExpr overrides the C expression for constants whose C type does not
// convert to the Go value directly.
var constExpr = map[string]string{
	// C: an int complement of 16-bit flags; only the low 16 bits are a mask.
	"RDMA_NLA_TYPE_MASK": "(unsigned short)(RDMA_NLA_TYPE_MASK)",
}

// unionViews are Go structs that mirror one member of a C union; C
// struct and member path of the union member.
var unionViews = map[string][2]string{
	"IbUverbsSendWrRdma":   {"ib_uverbs_send_wr", "wr.rdma"},
	"IbUverbsSendWrAtomic": {"ib_uverbs_send_wr", "wr.atomic"},
	"IbUverbsSendWrUd":     {"ib_uverbs_send_wr", "wr.ud"},
	"RxeSendWrRdma":        {"rxe_send_wr", "wr.rdma"},
	"RxeSendWrAtomic":      {"rxe_send_wr", "wr.atomic"},
	"RxeSendWrUd":          {"rxe_send_wr", "wr.ud"},
	"RxeSendWrMw":          {"rxe_send_wr", "wr.mw"},
	"RxeSendWrFlush":       {"rxe_send_wr", "wr.flush"},
}

var (
	commentRE = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	identRE   = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	structRE  = regexp.MustCompile(`(?s)\bstruct\s+([a-z_0-9]+)\s*\{`)
)

type cheader struct {
	digest  string // sha256 of the headers, in order
	idents  map[string]bool
	structs map[string]string // struct name -> body text (approximate: to the matching brace)
}

func readHeaders(dir string) (*cheader, error) {
	h := &cheader{idents: map[string]bool{}, structs: map[string]string{}}
	sum := sha256.New()
	for _, name := range headers {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		sum.Write(b)
		src := commentRE.ReplaceAllString(string(b), " ")
		for _, id := range identRE.FindAllString(src, -1) {
			h.idents[id] = true
		}
		for _, m := range structRE.FindAllStringSubmatchIndex(src, -1) {
			depth, end := 0, m[1]-1
			for i := m[1] - 1; i < len(src); i++ {
				if src[i] == '{' {
					depth++
				} else if src[i] == '}' {
					depth--
					if depth == 0 {
						end = i
						break
					}
				}
			}
			h.structs[src[m[2]:m[3]]] = src[m[1]:end]
		}
	}
	h.digest = hex.EncodeToString(sum.Sum(nil))
	return h, nil
}

func (h *cheader) structName(goName string) (string, bool) {
	for _, c := range cname.Candidates(goName) {
		if _, ok := h.structs[c]; ok {
			return c, true
		}
	}
	return "", false
}

func fieldName(body map[string]bool, goName string) (string, bool) {
	for _, c := range cname.Candidates(goName) {
		if body[c] {
			return c, true
		}
	}
	return "", false
}

type entry struct{ key, expr string }

func main() {
	log.SetFlags(0)
	log.SetPrefix("gencabi: ")
	uapiDir := flag.String("uapi", ".", "directory of package uapi")
	incDir := flag.String("include", "/usr/include/rdma", "directory of the rdma uAPI headers")
	outCabi := flag.String("cabi", "internal/cabi/zcabi.go", "output: cgo tables")
	outTypes := flag.String("types", "zlayout_types_test.go", "output: struct name to reflect.Type map")
	flag.Parse()

	pkg, err := gosrc.Load(*uapiDir)
	if err != nil {
		log.Fatal(err)
	}
	h, err := readHeaders(*incDir)
	if err != nil {
		log.Fatal(err)
	}

	var entries []entry
	var absent []string
	cnames := map[string]string{}
	for _, c := range pkg.Consts {
		if !h.idents[c.Name] {
			absent = append(absent, c.Name)
			continue
		}
		expr := "(" + c.Name + ")"
		if e, ok := constExpr[c.Name]; ok {
			expr = e
		}
		entries = append(entries, entry{"const:" + c.Name, expr})
	}
	for _, s := range pkg.Structs {
		if v, ok := unionViews[s.Name]; ok {
			ctype, path := "struct "+v[0], v[1]
			members := map[string]bool{}
			for _, id := range identRE.FindAllString(h.structs[v[0]], -1) {
				members[id] = true
			}
			if last := path[strings.LastIndex(path, ".")+1:]; !members[last] {
				absent = append(absent, s.Name) // union member newer than the headers
				continue
			}
			entries = append(entries, entry{"sizeof:" + s.Name, fmt.Sprintf("sizeof(((%s *)0)->%s)", ctype, path)})
			cnames[s.Name] = v[0] + "." + path
			for _, f := range s.Fields {
				if f.Name == "_" {
					continue
				}
				fn, ok := fieldName(members, f.Name)
				if !ok {
					log.Fatalf("%s.%s: no C member of %s.%s", s.Name, f.Name, v[0], path)
				}
				key := s.Name + "." + f.Name
				cnames[key] = fn
				entries = append(entries,
					entry{"offsetof:" + key, fmt.Sprintf("offsetof(%s, %s.%s) - offsetof(%s, %s)", ctype, path, fn, ctype, path)},
					entry{"fieldsize:" + key, fmt.Sprintf("sizeof(((%s *)0)->%s.%s)", ctype, path, fn)})
			}
			continue
		}
		cs, ok := h.structName(s.Name)
		if !ok {
			absent = append(absent, s.Name)
			continue
		}
		cnames[s.Name] = cs
		ctype := "struct " + cs
		entries = append(entries, entry{"sizeof:" + s.Name, "sizeof(" + ctype + ")"})
		members := map[string]bool{}
		for _, id := range identRE.FindAllString(h.structs[cs], -1) {
			members[id] = true
		}
		for _, f := range s.Fields {
			if f.Name == "_" {
				continue
			}
			fn, ok := fieldName(members, f.Name)
			if !ok {
				log.Fatalf("%s.%s: no member of struct %s matches", s.Name, f.Name, cs)
			}
			key := s.Name + "." + f.Name
			cnames[key] = fn
			entries = append(entries,
				entry{"offsetof:" + key, fmt.Sprintf("offsetof(%s, %s)", ctype, fn)},
				entry{"fieldsize:" + key, fmt.Sprintf("sizeof(((%s *)0)->%s)", ctype, fn)})
		}
	}

	cmd := "go run ./internal/cmd/gencabi"
	if err := write(*outCabi, cabiFile(cmd, h.digest, entries, absent, cnames)); err != nil {
		log.Fatal(err)
	}
	if err := write(*outTypes, typesFile(cmd, pkg)); err != nil {
		log.Fatal(err)
	}
}

func cabiFile(cmd, digest string, entries []entry, absent []string, cnames map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n// Code generated by the command above; DO NOT EDIT.\n\n", cmd)
	b.WriteString("//go:build cgo\n\npackage cabi\n\n/*\n#include <stddef.h>\n#include <linux/netlink.h>\n")
	for _, h := range headers {
		fmt.Fprintf(&b, "#include <rdma/%s>\n", h)
	}
	b.WriteString("\nstruct cabi_entry {\n\tconst char *key;\n\tlong long value;\n};\n\n")
	b.WriteString("static const struct cabi_entry cabi_entries[] = {\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "\t{\"%s\", (long long)(%s)},\n", e.key, e.expr)
	}
	b.WriteString("};\n\nstatic size_t cabi_count(void) { return sizeof(cabi_entries) / sizeof(cabi_entries[0]); }\n")
	b.WriteString("static const char *cabi_key(size_t i) { return cabi_entries[i].key; }\n")
	b.WriteString("static long long cabi_value(size_t i) { return cabi_entries[i].value; }\n*/\nimport \"C\"\n\n")
	b.WriteString("func load() map[string]int64 {\n\tn := int(C.cabi_count())\n\tm := make(map[string]int64, n)\n")
	b.WriteString("\tfor i := 0; i < n; i++ {\n\t\tm[C.GoString(C.cabi_key(C.size_t(i)))] = int64(C.cabi_value(C.size_t(i)))\n\t}\n\treturn m\n}\n\n")
	fmt.Fprintf(&b, "// HeaderDigest is the sha256 of Headers, in order, as generated from.\nconst HeaderDigest = %q\n\n", digest)
	b.WriteString("// Headers are the files of /usr/include/rdma the tables describe.\nvar Headers = []string{\n")
	for _, h := range headers {
		fmt.Fprintf(&b, "\t%q,\n", h)
	}
	b.WriteString("}\n\n")
	b.WriteString("// absent lists the uapi names that have no counterpart in the headers.\nvar absent = []string{\n")
	for _, a := range absent {
		fmt.Fprintf(&b, "\t%q,\n", a)
	}
	b.WriteString("}\n\n// cNames maps uapi struct and Struct.Field names to their C names.\nvar cNames = map[string]string{\n")
	keys := make([]string, 0, len(cnames))
	for k := range cnames {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q: %q,\n", k, cnames[k])
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func typesFile(cmd string, pkg *gosrc.Package) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n// Code generated by the command above; DO NOT EDIT.\n\n", cmd)
	b.WriteString("package uapi\n\nimport \"reflect\"\n\n// structTypes maps every exported struct type of the package to its reflect.Type.\nvar structTypes = map[string]reflect.Type{\n")
	for _, s := range pkg.Structs {
		fmt.Fprintf(&b, "\t%q: reflect.TypeFor[%s](),\n", s.Name, s.Name)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func write(path string, src []byte) error {
	out, err := format.Source(src)
	if err != nil {
		return fmt.Errorf("format %s: %w\n%s", path, err, src)
	}
	if strings.TrimSpace(path) == "" {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
