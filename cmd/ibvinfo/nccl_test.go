package main

import (
	"encoding/json"
	"strings"
	"testing"

	"usb4verbs/internal/sysinfo"
)

// bedHealthy is the tree captured on the usb4 bed (testdata/bed/README.md): host A's
// usb4_rdma0/1 reach peer 1, host B's usb4_rdma5/6 reach peer 2, every GID table with
// the RoCE v2 IPv4 entry at index 1 on tbv0 (a dummy).
const bedHealthy = "testdata/bed/healthy/root"

func TestNCCLSettingsOnTheBed(t *testing.T) {
	hostOnly(t)
	out, stderr, code := runCmd(t, "--root", bedHealthy, "nccl", "usb4_rdma5")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"# peer 2 (host tbloop-hostA 74626c6f-6f70-4000-8000-74626c6f6f70, XDomain 1-5): usb4_rdma5, usb4_rdma6, GID index 1 (0000:0000:0000:0000:0000:ffff:0a4d:0001)\n",
		"export NCCL_IB_HCA==usb4_rdma5:1,usb4_rdma6:1\n",
		"export NCCL_IB_GID_INDEX=1\n",
		"export UCX_NET_DEVICES=usb4_rdma5:1,usb4_rdma6:1\n",
		// rc_verbs wired up over TCP: the module has no UD (docs/srq.md).
		"export UCX_TLS=rc_verbs,sm,self,tcp:aux\n",
		"export UCX_RC_VERBS_TX_MIN_SGE=4\n",
		// Open MPI 5's pml ucx declines devices not named mlx* by default.
		"export OMPI_MCA_pml_ucx_devices=any\n",
		"# the GIDs' netdev tbv0 is a virtual one",
		"add it to UCX_NET_DEVICES",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "usb4_rdma0") || strings.Contains(out, "usb4_rdma9") || strings.Contains(out, "NCCL_SOCKET_IFNAME=") {
		t.Errorf("another peer's device, the Apple slot or a dummy netdev as NCCL_SOCKET_IFNAME:\n%s", out)
	}
	// The peer by number, and every peer in JSON.
	if byNum, _, _ := runCmd(t, "--root", bedHealthy, "nccl", "2"); byNum != out {
		t.Errorf("nccl 2 differs from nccl usb4_rdma5:\n%s", byNum)
	}
	// ... and by the host the devices reach: its name or its UUID.
	for _, host := range []string{"tbloop-hostA", "74626c6f-6f70-4000-8000-74626c6f6f70"} {
		if byHost, _, _ := runCmd(t, "--root", bedHealthy, "nccl", host); byHost != out {
			t.Errorf("nccl %s differs from nccl usb4_rdma5:\n%s", host, byHost)
		}
	}
	js, stderr, code := runCmd(t, "--root", bedHealthy, "--json", "nccl")
	var rep ncclReport
	if code != exitOK || json.Unmarshal([]byte(js), &rep) != nil {
		t.Fatalf("--json: exit %d, %s\n%s", code, stderr, js)
	}
	if len(rep.Peers) != 2 || rep.Peers[0].Peer != 1 || strings.Join(rep.Peers[0].Devices, ",") != "usb4_rdma0,usb4_rdma1" ||
		rep.Peers[1].GIDIndex != 1 || rep.Peers[1].Netdev != "tbv0" {
		t.Errorf("--json peers: %+v", rep.Peers)
	}
	for _, bad := range []string{"7", "rxe0", "usb4_rdma0 usb4_rdma5"} {
		if _, _, code := runCmd(t, append([]string{"--root", bedHealthy, "nccl"}, strings.Fields(bad)...)...); code == exitOK {
			t.Errorf("nccl %s: exit 0, want an error", bad)
		}
	}
}

func TestCheckNCCLEnv(t *testing.T) {
	hostOnly(t)
	base := sysinfo.Collect(bedHealthy, sysinfo.Options{})
	with := func(env map[string]string) doctorEnv {
		s := *base
		s.Env = env
		return doctorEnv{sys: &s}
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		verdict string
		has     string
	}{
		{"unset", nil, verdictSkip, "unset"},
		{"ibvinfo nccl's lines", map[string]string{"NCCL_IB_HCA": "=usb4_rdma5:1,usb4_rdma6:1", "NCCL_IB_GID_INDEX": "1",
			"UCX_NET_DEVICES": "usb4_rdma5:1,usb4_rdma6:1"}, verdictOK, "point at existing"},
		{"a device that is not there", map[string]string{"NCCL_IB_HCA": "mlx5_0"}, verdictError, "NCCL_IB_HCA=mlx5_0 matches no RDMA device"},
		{"a renamed device's old name", map[string]string{"NCCL_IB_HCA": "=usb4_rdma2"}, verdictError, "matches no RDMA device"},
		{"prefix picks more", map[string]string{"NCCL_IB_HCA": "usb4_rdma"}, verdictWarn, "matches names as prefixes"},
		{"GID index past the table", map[string]string{"NCCL_IB_HCA": "=usb4_rdma5", "NCCL_IB_GID_INDEX": "7"}, verdictError, "no GID at that index"},
		{"the link-local GID", map[string]string{"NCCL_IB_HCA": "=usb4_rdma5", "NCCL_IB_GID_INDEX": "0"}, verdictWarn, "not the RoCE v2 IPv4 GID (index 1)"},
		{"UCX names a missing device", map[string]string{"UCX_NET_DEVICES": "usb4_rdma3:1"}, verdictError, "UCX_NET_DEVICES names usb4_rdma3"},
	} {
		c := checkNCCLEnv(with(tc.env))
		if c.Verdict != tc.verdict || !strings.Contains(c.Message, tc.has) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, c.Verdict, c.Message, tc.verdict, tc.has)
		}
		if (c.Verdict == verdictError || c.Verdict == verdictWarn) && c.Fix == "" {
			t.Errorf("%s: no fix", tc.name)
		}
	}
}
