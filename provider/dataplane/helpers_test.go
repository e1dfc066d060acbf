package dataplane

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access flags (enum ibv_access_flags).
const (
	accLocalWrite   = 1
	accRemoteWrite  = 2
	accRemoteRead   = 4
	accRemoteAtomic = 8
	accAll          = accLocalWrite | accRemoteWrite | accRemoteRead | accRemoteAtomic
)

// pinned returns memory that never moves: the engine and the doubles see
// it by address.
func pinned(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// pollN polls until n completions arrived or the CQ stays empty for many
// rounds (the doubles complete synchronously, so this never waits long).
func pollN(t testing.TB, cq *CQ, n int) []WC {
	t.Helper()
	var out []WC
	wc := make([]WC, 16)
	for idle := 0; len(out) < n && idle < 1000; {
		got, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if got == 0 {
			idle++
			continue
		}
		out = append(out, wc[:got]...)
	}
	if len(out) != n {
		t.Fatalf("got %d completions, want %d: %+v", len(out), n, out)
	}
	return out
}

func expectEmpty(t testing.TB, cq *CQ) {
	t.Helper()
	wc := make([]WC, 4)
	if n, err := cq.Poll(wc); err != nil || n != 0 {
		t.Fatalf("poll on a CQ that should be empty: n=%d err=%v %+v", n, err, wc[:n])
	}
}

func be32(v uint32) uint32 { return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24 }

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// removalRecord is a context's removal record (Dev) holding what join puts
// in it, as the provider's contexts hold their objects: Remove marks them
// gone and releases their rings, as the removal does (usb4v_dev_remove).
func removalRecord(t testing.TB, join ...func(*Dev)) *Dev {
	t.Helper()
	d, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	for _, j := range join {
		j(d)
	}
	return d
}
