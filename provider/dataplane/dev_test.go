package dataplane

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// newTestDev is a record that the test's end closes.
func newTestDev(t *testing.T) *Dev {
	t.Helper()
	dev, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	return dev
}

// The removal record finds every object that joined it, and only those:
// Remove makes the context's CQ and QP answer EIO and leaves another
// context's alone, with no handle table involved.
func TestDevRemoveStopsEveryJoinedObject(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	other := newRxeEnv(t, QPTypeRC, false)
	dev := newTestDev(t)
	e.cq.Join(dev)
	e.qp.Join(dev)
	if busy := dev.Remove(); busy != 0 {
		t.Fatalf("Remove: %d objects busy with nothing held", busy)
	}
	if _, err := e.cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EIO) {
		t.Fatalf("poll after Remove: %v, want EIO", err)
	}
	if err := e.qp.PostSend([]SendWR{{WrID: 1, Opcode: WRSend, SGEs: []SGE{{Addr: 1, Length: 1}}}}); !errors.Is(err, unix.EIO) {
		t.Fatalf("post_send after Remove: %v, want EIO", err)
	}
	if e.cq.c.maps_released == 0 || e.qp.c.maps_released == 0 {
		t.Fatal("Remove left the rings mapped")
	}
	if _, err := other.cq.Poll(make([]WC, 1)); err != nil {
		t.Fatalf("another context's CQ after Remove: %v", err)
	}
	if other.cq.c.maps_released != 0 {
		t.Fatal("Remove released another context's ring")
	}
}

// A CQ held by a start_poll holder is reported busy and released on a
// later call, once end_poll let go; Remove waited for nobody meanwhile.
func TestDevRemoveBusyWhileHeld(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	dev := newTestDev(t)
	e.cq.Join(dev)
	produceRxeCQE(t, e.f, 1)
	k := e.cq.NewCursor()
	defer k.Free()
	if _, err := k.Start(); err != nil {
		t.Fatal(err)
	}
	busy := dev.Remove()
	k.End()
	if busy != 1 {
		t.Fatalf("Remove with start_poll holding the CQ: %d busy, want 1", busy)
	}
	if busy := dev.Remove(); busy != 0 {
		t.Fatalf("Remove after end_poll: %d busy, want 0", busy)
	}
}

// An object made while the removal ran joins a record that is gone: it is
// marked at once, so the removal cannot miss it.
func TestDevJoinAfterRemove(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	dev := newTestDev(t)
	dev.Remove()
	e.cq.Join(dev)
	if _, err := e.cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EIO) {
		t.Fatalf("poll of a CQ that joined after the removal: %v, want EIO", err)
	}
	if e.cq.c.maps_released == 0 {
		t.Fatal("a CQ that joined after the removal kept its ring mapped")
	}
}

// Objects outlive the context's reference (cshim's objects.c frees a
// destroyed CQ once its events are acknowledged, possibly after the close):
// their free leaves the record, and the last one frees it. Joined objects
// freed first leave it too, so Remove never sees them.
func TestDevOutlivedByItsObjects(t *testing.T) {
	dev, err := NewDev()
	if err != nil {
		t.Fatal(err)
	}
	first := newRxeEnv(t, QPTypeRC, false)
	first.qp.Join(dev)
	first.cq.Join(dev)
	first.qp.Close()
	first.cq.Close()
	if busy := dev.Remove(); busy != 0 {
		t.Fatalf("Remove after the objects were freed: %d busy", busy)
	}
	e := newRxeEnv(t, QPTypeRC, false)
	e.cq.Join(dev)
	dev.Close()
	if dev.Remove() != 0 {
		t.Fatal("Remove after Close did something")
	}
	e.qp.Close()
	e.cq.Close() // the last reference: frees the record
}
