package main

/*
#include <stdint.h>
*/
import "C"

import (
	"os"
	"sort"
	"sync"

	"usb4verbs/provider"
)

// handleTable maps the integers C holds to Go objects. Handles are never
// reused, so a handle C kept after destroying its object (an application's
// use after free) finds nothing and the op returns EBADF instead of
// panicking, as runtime/cgo.Handle.Value would.
type handleTable struct {
	mu   sync.Mutex
	last uintptr
	objs map[uintptr]handleEntry
}

type handleEntry struct {
	v     any
	owner *provider.Context // the context whose Close sweeps the object
}

// Handles start at the process id times 2^32, so a handle this image gave
// out never equals one a fork() parent's image gave out: a parent's object
// used in a child (whose Go part is a new image, issue 24) finds nothing
// here and its op returns EBADF, never another object's.
var handles = handleTable{objs: map[uintptr]handleEntry{}, last: uintptr(os.Getpid()) << 32}

// add stores v, owned by owner (nil for a context itself), and returns its
// handle.
func (t *handleTable) add(owner *provider.Context, v any) uintptr {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	t.objs[t.last] = handleEntry{v: v, owner: owner}
	return t.last
}

func (t *handleTable) get(h uintptr) (any, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.objs[h]
	return e.v, ok
}

func (t *handleTable) remove(h uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.objs, h)
}

// takeOwnedBy removes and returns every object owned by ctx, newest first.
func (t *handleTable) takeOwnedBy(ctx *provider.Context) []any {
	t.mu.Lock()
	defer t.mu.Unlock()
	var hs []uintptr
	for h, e := range t.objs {
		if e.owner == ctx {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] > hs[j] })
	vs := make([]any, len(hs))
	for i, h := range hs {
		vs[i] = t.objs[h].v
		delete(t.objs, h)
	}
	return vs
}

// lookup resolves a handle C got from us; a stale, zero or wrongly typed
// handle reports false (the caller returns EBADF).
func lookup[T any](h C.uintptr_t) (T, bool) {
	var zero T
	v, ok := handles.get(uintptr(h))
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}
