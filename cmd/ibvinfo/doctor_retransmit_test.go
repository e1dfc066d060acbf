package main

import (
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

func TestCheckRetransmits(t *testing.T) {
	sys := func(summary []sysinfo.KV, env map[string]string) *sysinfo.System {
		return &sysinfo.System{Modules: []sysinfo.Module{{Name: "thunderbolt_ibverbs", Loaded: true}}, Env: env,
			Debugfs: sysinfo.Debugfs{Present: summary != nil, Summary: summary}, Devices: []sysinfo.Device{retransmitDev}}
	}
	kv := func(re, ex string) []sysinfo.KV {
		return []sysinfo.KV{{Key: "data_wr_retransmit", Value: re}, {Key: "data_wr_retry_exhausted", Value: ex}}
	}
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		verdict string
		has     string
	}{
		{"no usb4", &sysinfo.System{}, verdictSkip, noUSB4},
		{"no debugfs", sys(nil, nil), verdictSkip, "gloo (PyTorch's Gloo backend) fixes the ACK timeout at 14"},
		{"none resent", sys(kv("0", "0"), nil), verdictOK, "resent no work request"},
		{"resent", sys(kv("180", "0"), nil), verdictWarn, "since the module loaded the module resent 180 work requests"},
		{"exhausted", sys(kv("40", "2"), nil), verdictWarn, "2 ran out of retries"},
		{"NCCL timeout 14", sys(kv("0", "0"), map[string]string{"NCCL_IB_TIMEOUT": "14"}), verdictWarn, "NCCL_IB_TIMEOUT=14: a send whose ACK comes later than 4.096 us x 2^14 (67 ms)"},
		{"NCCL timeout 20", sys(kv("0", "0"), map[string]string{"NCCL_IB_TIMEOUT": "20"}), verdictOK, "resent no work request"},
	} {
		c := checkRetransmits(doctorEnv{sys: tc.sys})
		if c.Verdict != tc.verdict || !strings.Contains(c.Message, tc.has) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, c.Verdict, c.Message, tc.verdict, tc.has)
		}
		if c.Verdict == verdictWarn && c.Fix == "" {
			t.Errorf("%s: a warning without a fix", tc.name)
		}
	}
}

var retransmitDev = sysinfo.Device{Name: "usb4_rdma0", USB4: &sysinfo.USB4Identity{}}
