package cname

import (
	"strings"
	"unicode"
)

// Snake converts a CamelCase Go identifier to lower_snake_case, splitting
// before each upper-case letter: "Log2ElemSize" -> "log2_elem_size".
func Snake(goName string) string {
	var b strings.Builder
	for i, r := range goName {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Candidates returns the C spellings a Go field or type name may stand
// for, most likely first: the plain snake form, then the form with an
// underscore before a trailing number ("pad1" -> "pad_1").
func Candidates(goName string) []string {
	s := Snake(goName)
	out := []string{s}
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i > 0 && i < len(s) && s[i-1] != '_' {
		out = append(out, s[:i]+"_"+s[i:])
	}
	return out
}
