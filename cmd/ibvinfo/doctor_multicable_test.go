package main

import (
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

// twoCables: host B reached over two cables (XDomains 0-1 and 0-3, one UUID), the
// module's devices on the first one, its summary saying mode.
func twoCables(mode string) *sysinfo.System {
	s := &sysinfo.System{
		Modules: []sysinfo.Module{{Name: "thunderbolt_ibverbs", Loaded: true}},
		Thunderbolt: []sysinfo.TBDevice{
			{Name: "0-1", DeviceName: "hostB", UniqueID: "uuid-b"},
			{Name: "0-3", DeviceName: "hostB", UniqueID: "uuid-b"},
		},
		Devices: []sysinfo.Device{
			{Name: "usb4_rdma0", Domain: 0, USB4: &sysinfo.USB4Identity{Backend: "native", Peer: 1},
				Peer: &sysinfo.USB4Peer{XDomain: "0-1", UUID: "uuid-b", Name: "hostB", By: "route"}},
		},
	}
	if mode != "" {
		s.Debugfs = sysinfo.Debugfs{Present: true, Summary: []sysinfo.KV{{Key: "native_same_peer_multicable", Value: mode}}}
	}
	return s
}

func TestDoctorMultiCable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		verdict string
		says    []string
	}{
		{"limited", twoCables("limited"), verdictWarn, []string{"2 cables to host hostB", "XDomains 0-1, 0-3", "usb4_rdma0 (XDomain 0-1)", "only one cable per host carries RDMA", "peer.c:153-166"}},
		{"enabled", twoCables("enabled"), verdictOK, []string{"every cable carries rails"}},
		{"no debugfs", twoCables(""), verdictWarn, []string{"does not say", "on a stock kernel it takes one"}},
	} {
		c := checkMultiCable(doctorEnv{sys: tc.sys})
		if c.Verdict != tc.verdict {
			t.Errorf("%s: verdict %s, want %s (%s)", tc.name, c.Verdict, tc.verdict, c.Message)
		}
		for _, w := range tc.says {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, c.Message, w)
			}
		}
	}
	one := twoCables("limited")
	one.Thunderbolt = one.Thunderbolt[:1]
	if c := checkMultiCable(doctorEnv{sys: one}); c.Verdict != verdictOK {
		t.Errorf("one cable: verdict %s (%s), want ok", c.Verdict, c.Message)
	}
	if c := checkMultiCable(doctorEnv{sys: &sysinfo.System{}}); c.Verdict != verdictSkip {
		t.Errorf("no usb4: verdict %s, want skip", c.Verdict)
	}
}
