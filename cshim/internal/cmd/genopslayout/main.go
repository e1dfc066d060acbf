package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// layoutArg is one NAME=REV command-line argument.
type layoutArg struct {
	name string // layout name, e.g. L36
	rev  string // git revision, e.g. v36.0
}

// layout is one parsed verbs_context_ops member list.
type layout struct {
	layoutArg
	commit  string   // rev resolved to a full commit id
	members []string // in declaration order
}

func main() {
	gitDir := flag.String("git", "", "rdma-core git directory (bare or .git)")
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	if err := run(*gitDir, *out, flag.Args(), os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "genopslayout:", err)
		os.Exit(1)
	}
}

func run(gitDir, out string, args, argv []string) error {
	if gitDir == "" || len(args) == 0 {
		return errors.New("usage: genopslayout -git DIR [-o FILE] NAME=REV [NAME=REV]")
	}
	var layouts []layout
	for _, a := range args {
		name, rev, ok := strings.Cut(a, "=")
		if !ok || name == "" || rev == "" {
			return fmt.Errorf("argument %q: want NAME=REV", a)
		}
		src, err := gitOutput(gitDir, "show", rev+":libibverbs/driver.h")
		if err != nil {
			return fmt.Errorf("layout %s: %w", name, err)
		}
		commit, err := gitOutput(gitDir, "rev-parse", rev+"^{commit}")
		if err != nil {
			return fmt.Errorf("layout %s: %w", name, err)
		}
		members, err := parseOpsMembers(string(src))
		if err != nil {
			return fmt.Errorf("layout %s (%s): %w", name, rev, err)
		}
		layouts = append(layouts, layout{layoutArg{name, rev}, strings.TrimSpace(string(commit)), members})
	}
	var buf bytes.Buffer
	if err := emit(&buf, commandLine(argv), layouts); err != nil {
		return err
	}
	if out == "" {
		_, err := os.Stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// commandLine reconstructs the invocation for line 1 of the output.
func commandLine(argv []string) string {
	if len(argv) == 0 {
		return "genopslayout"
	}
	return "go run ./cshim/internal/cmd/genopslayout " + strings.Join(argv[1:], " ")
}

func gitOutput(gitDir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", gitDir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return b, nil
}

var (
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	memberName   = regexp.MustCompile(`\(\s*\*\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)`)
)

// parseOpsMembers returns the member names of struct verbs_context_ops in
// declaration order. Every member is a function pointer; the name is the
// first "(*name)" of each top-level declaration, so function-pointer
// parameters inside a prototype cannot be mistaken for members.
func parseOpsMembers(src string) ([]string, error) {
	const open = "struct verbs_context_ops {"
	start := strings.Index(src, open)
	if start < 0 {
		return nil, errors.New("struct verbs_context_ops not found")
	}
	body := src[start+len(open):]
	end := strings.Index(body, "\n};")
	if end < 0 {
		return nil, errors.New("end of struct verbs_context_ops not found")
	}
	body = lineComment.ReplaceAllString(blockComment.ReplaceAllString(body[:end], " "), " ")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			return nil, fmt.Errorf("preprocessor line inside the struct: %q", strings.TrimSpace(line))
		}
	}
	var members []string
	depth, declStart := 0, 0
	for i, c := range body {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ';':
			if depth != 0 {
				return nil, fmt.Errorf("unbalanced parentheses before offset %d", i)
			}
			decl := body[declStart:i]
			declStart = i + 1
			m := memberName.FindStringSubmatch(decl)
			if m == nil {
				return nil, fmt.Errorf("member is not a function pointer: %q", strings.Join(strings.Fields(decl), " "))
			}
			members = append(members, m[1])
		}
	}
	if rest := strings.TrimSpace(body[declStart:]); rest != "" {
		return nil, fmt.Errorf("trailing text in struct: %q", rest)
	}
	if len(members) == 0 {
		return nil, errors.New("struct verbs_context_ops has no members")
	}
	// verbs_set_ops and our slot arithmetic rely on strcmp order ("Keep
	// sorted" in driver.h); refuse a header that breaks it.
	for i := 1; i < len(members); i++ {
		if members[i-1] >= members[i] {
			return nil, fmt.Errorf("members not strictly sorted: %q before %q", members[i-1], members[i])
		}
	}
	return members, nil
}

func emit(w io.Writer, command string, layouts []layout) error {
	all := map[string]bool{}
	for _, l := range layouts {
		for _, m := range l.members {
			all[m] = true
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)

	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("// %s\n", command)
	p("// Code generated by the command above; DO NOT EDIT.\n\n")
	p("// Slot index of every member of libibverbs' private struct verbs_context_ops\n")
	p("// per layout, read from rdma-core:libibverbs/driver.h at these commits:\n")
	for _, l := range layouts {
		p("//   %-4s %-8s %s  %d slots\n", l.name, l.rev, l.commit, len(l.members))
	}
	p("\n#ifndef USB4_ZOPSLAYOUT_H\n#define USB4_ZOPSLAYOUT_H\n\n#include <stdint.h>\n\n")
	p("// Every op name known to any layout, in strcmp order.\nenum usb4_op {\n")
	for _, n := range names {
		p("\tUSB4_OP_%s,\n", n)
	}
	p("\tUSB4_OP__COUNT\n};\n\n")
	p("// The tables are definitions: exactly one translation unit defines\n")
	p("// USB4_ZOPSLAYOUT_TABLES before including this header.\n")
	p("#ifdef USB4_ZOPSLAYOUT_TABLES\n\n")
	for _, l := range layouts {
		idx := map[string]int{}
		for i, m := range l.members {
			idx[m] = i
		}
		p("// %s: %d slots (%s). -1: the op does not exist in this layout.\n", l.name, len(l.members), l.rev)
		p("static const int16_t usb4_slots_%s[USB4_OP__COUNT] = {\n", l.name)
		for _, n := range names {
			i, ok := idx[n]
			if !ok {
				i = -1
			}
			p("\t[USB4_OP_%s] = %d,\n", n, i)
		}
		p("};\n\n")
	}
	p("#define USB4_OPS_LAYOUTS(X) \\\n")
	for i, l := range layouts {
		sep := " \\"
		if i == len(layouts)-1 {
			sep = ""
		}
		p("\tX(%s, %d)%s\n", l.name, len(l.members), sep)
	}
	p("\n#endif // USB4_ZOPSLAYOUT_TABLES\n")
	p("\n#endif // USB4_ZOPSLAYOUT_H\n")
	return nil
}
