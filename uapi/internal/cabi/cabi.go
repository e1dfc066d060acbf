//go:build cgo

package cabi

import "sync"

var values = sync.OnceValue(load)

// Value returns the C value recorded under key: "const:NAME",
// "sizeof:GoType", "offsetof:GoType.GoField" or "fieldsize:GoType.GoField".
func Value(key string) (int64, bool) {
	v, ok := values()[key]
	return v, ok
}

// Keys returns the number of recorded C values.
func Keys() int { return len(values()) }

// Absent reports whether the uapi name (constant or struct type) was
// found by the generator to have no counterpart in the headers.
func Absent(name string) bool {
	for _, a := range absent {
		if a == name {
			return true
		}
	}
	return false
}

// CName returns the C name recorded for a uapi struct ("GoType") or field
// ("GoType.GoField").
func CName(goName string) (string, bool) {
	c, ok := cNames[goName]
	return c, ok
}
