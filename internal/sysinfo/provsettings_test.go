package sysinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// ReadProviderDV decides as cshim/settings.c does (TestHostForceKernelCommands
// checks the C side): off by default, the file, the variable over the file,
// force_kernel_commands over dv_send; a captured tree has no environment.
func TestReadProviderDV(t *testing.T) {
	for _, k := range []string{"USB4VERBS_CONF", "USB4VERBS_DV_SEND", "USB4VERBS_FORCE_KERNEL_COMMANDS", "TBV_CQ_FORCE_IOCTL"} {
		t.Setenv(k, "")
	}
	root := t.TempDir()
	writeConf := func(body string) {
		p := filepath.Join(root, "etc/usb4verbs/usb4_rdma.conf")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, live bool, wantOn bool, wantSrc string) {
		t.Helper()
		if got := ReadProviderDV(root, live); got.On != wantOn || got.Source != wantSrc {
			t.Errorf("%s: %+v, want on=%v source %q", name, got, wantOn, wantSrc)
		}
	}
	check("no file", true, false, "default")
	writeConf("# comment\nclaim_rxe yes\ndv_send = yes\n")
	check("file", true, true, providerConf)
	check("captured tree", false, true, providerConf)
	t.Setenv("USB4VERBS_DV_SEND", "0")
	check("variable over file", true, false, "USB4VERBS_DV_SEND")
	check("no environment in a captured tree", false, true, providerConf)
	t.Setenv("USB4VERBS_DV_SEND", "maybe")
	check("unparsable variable ignored", true, true, providerConf)
	t.Setenv("USB4VERBS_DV_SEND", "on")
	t.Setenv("TBV_CQ_FORCE_IOCTL", "x")
	check("donnerkeule's variable forces kernel commands", true, false, "TBV_CQ_FORCE_IOCTL (force_kernel_commands)")
	t.Setenv("USB4VERBS_FORCE_KERNEL_COMMANDS", "0")
	check("force off", true, true, "USB4VERBS_DV_SEND")
}
