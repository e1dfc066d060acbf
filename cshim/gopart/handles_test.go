package main

import (
	"testing"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
)

// An application that destroys an object twice, or uses one after destroying
// it, hands us a handle whose entry is gone: every export must answer EBADF
// (cgo.Handle would have panicked in the host process).
func TestStaleHandlesGiveEBADF(t *testing.T) {
	pd := &provider.PD{}
	h := handles.add(nil, pd)
	if v, ok := handles.get(h); !ok || v != pd {
		t.Fatalf("get(%d) = %v, %v", h, v, ok)
	}
	handles.remove(h)
	stale := h
	if h2 := handles.add(nil, pd); h2 == stale {
		t.Fatalf("handle %d reused", h2)
	} else {
		handles.remove(h2)
	}
	var ev _Ctype_struct_usb4_event_counts
	for name, rc := range map[string]int{
		"dealloc_pd":  int(usb4goDeallocPD(0)),
		"dealloc_pd2": int(usb4goDeallocPD(0x7fffffff)),
		"dereg_mr":    int(usb4goDeregMR(0x7fffffff)),
		"destroy_cq":  int(usb4goDestroyCQ(0x7fffffff, &ev)),
		"destroy_qp":  int(usb4goDestroyQP(0x7fffffff, &ev)),
		"destroy_srq": int(usb4goDestroySRQ(0x7fffffff, &ev)),
		"destroy_ah":  int(usb4goDestroyAH(0x7fffffff)),
		"modify_qp":   int(usb4goModifyQP(0x7fffffff, nil, 0)),
		"query_srq":   int(usb4goQuerySRQ(0x7fffffff, nil)),
	} {
		if rc != int(unix.EBADF) {
			t.Errorf("%s on a stale handle = %d, want EBADF", name, rc)
		}
	}
}

// A handle of another type is EBADF too: a PD handle is not a QP.
func TestWrongTypeHandle(t *testing.T) {
	h := handles.add(nil, &provider.PD{})
	defer handles.remove(h)
	if _, ok := handles.get(h); !ok {
		t.Fatal("handle not stored")
	}
	var ev _Ctype_struct_usb4_event_counts
	if rc := usb4goDestroyQP(_Ctype_uintptr_t(h), &ev); int(rc) != int(unix.EBADF) {
		t.Errorf("destroy_qp on a PD handle = %d, want EBADF", rc)
	}
}

func TestTakeOwnedByNewestFirst(t *testing.T) {
	a, b := &provider.Context{}, &provider.Context{}
	h1 := handles.add(a, "a1")
	h2 := handles.add(b, "b1")
	h3 := handles.add(a, "a2")
	defer handles.remove(h2)
	got := handles.takeOwnedBy(a)
	if len(got) != 2 || got[0] != "a2" || got[1] != "a1" {
		t.Errorf("takeOwnedBy = %v, want [a2 a1]", got)
	}
	for _, h := range []uintptr{h1, h3} {
		if _, ok := handles.get(h); ok {
			t.Errorf("handle %d still present", h)
		}
	}
	if _, ok := handles.get(h2); !ok {
		t.Error("another context's handle was taken")
	}
}
