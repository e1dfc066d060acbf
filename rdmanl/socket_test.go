package rdmanl

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSocketOnHost runs against whatever kernel runs the tests: without
// ib_core, NETLINK_RDMA is not registered and NewHandle must say so with the
// errno; with it, a dump must succeed (possibly empty).
func TestSocketOnHost(t *testing.T) {
	h, err := NewHandle()
	if err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) || !strings.Contains(err.Error(), "open NETLINK_RDMA socket") {
			t.Fatalf("NewHandle: %v: want an errno naming the operation", err)
		}
		t.Skipf("no NETLINK_RDMA here: %v", err)
	}
	defer h.Close()
	devs, err := h.Devices()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d devices", len(devs))
	if _, err := h.DeviceByName("surely-not-a-device"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing device: %v", err)
	}
}
