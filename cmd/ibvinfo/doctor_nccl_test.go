package main

import (
	"slices"
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

func TestCheckNCCLAdaptiveRouting(t *testing.T) {
	sys := func(summary []sysinfo.KV, present bool, env map[string]string) *sysinfo.System {
		return &sysinfo.System{Modules: []sysinfo.Module{{Name: "thunderbolt_ibverbs", Loaded: true}},
			Debugfs: sysinfo.Debugfs{Present: present, Summary: summary}, Env: env}
	}
	queued := []sysinfo.KV{{Key: "data_wr_send", Value: "3"}, {Key: writeImmQueuedCounter, Value: "0"}}
	plain := []sysinfo.KV{{Key: "data_wr_send", Value: "3"}}
	for _, tc := range []struct {
		name    string
		sys     *sysinfo.System
		verdict string
		has     string
	}{
		{"no usb4", &sysinfo.System{}, verdictSkip, noUSB4},
		{"queued, AR unset", sys(queued, true, nil), verdictOK, "unset (off on RoCE): keep it so"},
		{"queued, AR=0", sys(queued, true, map[string]string{"NCCL_IB_ADAPTIVE_ROUTING": "0"}), verdictOK, "is 0: keep it so"},
		{"queued, AR=1", sys(queued, true, map[string]string{"NCCL_IB_ADAPTIVE_ROUTING": "1"}), verdictError, "local protection error"},
		{"not queued, AR=1", sys(plain, true, map[string]string{"NCCL_IB_ADAPTIVE_ROUTING": "1"}), verdictOK, "form is taken"},
		{"no debugfs, AR=1", sys(nil, false, map[string]string{"NCCL_IB_ADAPTIVE_ROUTING": "1"}), verdictWarn, "cannot be told"},
		{"no debugfs, AR unset", sys(nil, false, nil), verdictSkip, "unreadable"},
	} {
		c := checkNCCLAdaptiveRouting(doctorEnv{sys: tc.sys})
		if c.Verdict != tc.verdict || !strings.Contains(c.Message, tc.has) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, c.Verdict, c.Message, tc.verdict, tc.has)
		}
		if (c.Verdict == verdictError || c.Verdict == verdictWarn) && !strings.Contains(c.Fix, "NCCL_IB_ADAPTIVE_ROUTING=0") {
			t.Errorf("%s: fix %q", tc.name, c.Fix)
		}
	}
}

// TestNCCLCheckEnvIsRecorded: every variable the nccl-* checks read is one
// sysinfo records from the environment (else the check never sees it set).
// Saw it fail on the bed: NCCL_IB_ADAPTIVE_ROUTING=1 ibvinfo doctor said OK
// on pleite-gda-8099446, the variable was not in sysinfo.EnvVars.
func TestNCCLCheckEnvIsRecorded(t *testing.T) {
	names := []string{"NCCL_IB_ADAPTIVE_ROUTING", "NCCL_GDR_FLUSH_DISABLE"}
	for _, v := range ncclByteLenSettings {
		names = append(names, v.name)
	}
	for _, n := range names {
		if !slices.Contains(sysinfo.EnvVars, n) {
			t.Errorf("%s is not in sysinfo.EnvVars", n)
		}
	}
}
