package main

import (
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

func TestCheckNCCLWriteImmByteLen(t *testing.T) {
	loaded := func(params map[string]string, env map[string]string) *sysinfo.System {
		return &sysinfo.System{Modules: []sysinfo.Module{{Name: "thunderbolt_ibverbs", Loaded: true, Parameters: params}}, Env: env}
	}
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		verdict string
		has     string
	}{
		{"no usb4", &sysinfo.System{}, verdictSkip, noUSB4},
		{"byte_len 0, NCCL default", loaded(map[string]string{"roce_netdev": "tbv0"}, nil), verdictOK, "keep NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME"},
		{"byte_len 0, ID matching", loaded(nil, map[string]string{"NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME": "1"}), verdictError, "every receive would report 0 bytes"},
		{"byte_len 0, OOO RQ", loaded(nil, map[string]string{"NCCL_IB_OOO_RQ": "1", "NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME": "0"}), verdictError, "NCCL_IB_OOO_RQ=1 makes"},
		{"tree fills byte_len", loaded(map[string]string{byteLenTreeParam: "4"}, map[string]string{"NCCL_IB_OOO_RQ": "1"}), verdictOK, "fills byte_len"},
	} {
		c := checkNCCLWriteImmByteLen(doctorEnv{sys: tc.sys})
		if c.Verdict != tc.verdict || !strings.Contains(c.Message, tc.has) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, c.Verdict, c.Message, tc.verdict, tc.has)
		}
		if c.Verdict == verdictError && !strings.HasPrefix(c.Fix, "unset NCCL_IB_") {
			t.Errorf("%s: fix %q", tc.name, c.Fix)
		}
	}
}

func TestCheckNCCLFlushLoopback(t *testing.T) {
	sys := &sysinfo.System{Modules: []sysinfo.Module{{Name: "thunderbolt_ibverbs", Loaded: true}}}
	if c := checkNCCLFlushLoopback(doctorEnv{sys: sys}); c.Verdict != verdictOK || !strings.Contains(c.Message, "set NCCL_GDR_FLUSH_DISABLE=1") {
		t.Errorf("unset: %s %q", c.Verdict, c.Message)
	}
	sys.Env = map[string]string{"NCCL_GDR_FLUSH_DISABLE": "1"}
	if c := checkNCCLFlushLoopback(doctorEnv{sys: sys}); c.Verdict != verdictOK || !strings.Contains(c.Message, "connects no QP to itself") {
		t.Errorf("set: %s %q", c.Verdict, c.Message)
	}
	if c := checkNCCLFlushLoopback(doctorEnv{sys: &sysinfo.System{}}); c.Verdict != verdictSkip {
		t.Errorf("no usb4: %s", c.Verdict)
	}
}
