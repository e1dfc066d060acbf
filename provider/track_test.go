package provider

import "testing"

// trackedDummy is an object that only takes part in tracking.
type trackedDummy struct{ rank int }

func (d *trackedDummy) destroyRank() int     { return d.rank }
func (d *trackedDummy) destroyLocked() error { return nil }

// BenchmarkUntrack100k tracks 100,000 objects (an application's MRs) and
// untracks them oldest first, the worst order for a slice that closes the
// gap (issue 12 item 10: that was quadratic, seconds per teardown).
func BenchmarkUntrack100k(b *testing.B) {
	objs := make([]*trackedDummy, 100_000)
	for i := range objs {
		objs[i] = &trackedDummy{rank: rankMR}
	}
	for b.Loop() {
		c := &Context{}
		for _, o := range objs {
			c.track(o)
		}
		for _, o := range objs {
			c.untrack(o)
		}
	}
}

// TestUntrackKeepsCreationOrder: after untracks and compactions the tracked
// objects are the live ones, in creation order (Close tears down newest
// first within a rank).
func TestUntrackKeepsCreationOrder(t *testing.T) {
	c := &Context{}
	objs := make([]*trackedDummy, 1000)
	for i := range objs {
		objs[i] = &trackedDummy{rank: rankMR}
		c.track(objs[i])
	}
	for i := range objs {
		if i%3 != 0 {
			c.untrack(objs[i])
		}
	}
	c.untrack(objs[1]) // twice: no effect
	var got []object
	for _, o := range c.objects {
		if o != nil {
			got = append(got, o)
		}
	}
	if c.objLive != len(got) || len(got) != 334 {
		t.Fatalf("%d live (%d counted), want 334", len(got), c.objLive)
	}
	for k, o := range got {
		if o != objs[3*k] || c.objIndex[o] >= len(c.objects) || c.objects[c.objIndex[o]] != o {
			t.Fatalf("entry %d is not object %d, or its index is stale", k, 3*k)
		}
	}
}
