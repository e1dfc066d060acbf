package main

import (
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

// TestNetnsExclusive: exclusive mode with no device in this namespace is an
// error whose fix names --network=host; with devices, or shared, it is not.
func TestNetnsExclusive(t *testing.T) {
	none := &sysinfo.System{}
	some := &sysinfo.System{Devices: []sysinfo.Device{{Name: "rxe0"}}}
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		mode    netnsMode
		verdict string
	}{
		{"exclusive, none here", none, netnsMode{known: true, exclusive: true}, verdictError},
		{"exclusive, one here", some, netnsMode{known: true, exclusive: true}, verdictOK},
		{"shared, none here", none, netnsMode{known: true}, verdictOK},
		{"unknown", none, netnsMode{err: "netlink: operation not permitted"}, verdictSkip},
		{"captured tree", none, netnsMode{}, verdictSkip},
	} {
		c := checkNetnsExclusive(doctorEnv{sys: tc.sys, netns: tc.mode})
		if c.Verdict != tc.verdict {
			t.Errorf("%s: verdict %s (%s), want %s", tc.name, c.Verdict, c.Message, tc.verdict)
		}
		if c.Verdict == verdictError && !strings.Contains(c.Fix, "--network=host") {
			t.Errorf("%s: fix %q does not name --network=host", tc.name, c.Fix)
		}
	}
}

// TestDevNodesNamesDeviceFlag: the fix for a container without its device
// nodes names exactly the --device flags to add; one node passed in is fine,
// unless the device the user named is not the one passed in.
func TestDevNodesNamesDeviceFlag(t *testing.T) {
	devs := func(states ...string) *sysinfo.System {
		s := &sysinfo.System{}
		for i, st := range states {
			s.Devices = append(s.Devices, sysinfo.Device{Name: "rxe" + string(rune('0'+i)), Uverbs: "uverbs" + string(rune('0'+i)), DevNode: st})
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		use     []string
		verdict string
		fix     string
	}{
		{"none passed", devs("missing", "missing"), nil, verdictError, "--device=/dev/infiniband/uverbs0 --device=/dev/infiniband/uverbs1"},
		{"device cgroup refuses", devs("no access: operation not permitted"), nil, verdictError, "--device=/dev/infiniband/uverbs0"},
		{"one passed", devs("ok", "missing"), nil, verdictOK, ""},
		{"named one not passed", devs("ok", "missing"), []string{"rxe1"}, verdictError, "--device=/dev/infiniband/uverbs1"},
		{"named one passed", devs("ok", "missing"), []string{"rxe0"}, verdictOK, ""},
		{"unknown", devs("", ""), nil, verdictSkip, ""},
	} {
		c := checkDevNodes(doctorEnv{sys: tc.sys, use: tc.use})
		if c.Verdict != tc.verdict || !strings.Contains(c.Fix, tc.fix) {
			t.Errorf("%s: %s %q fix %q, want %s with %q", tc.name, c.Verdict, c.Message, c.Fix, tc.verdict, tc.fix)
		}
	}
}
