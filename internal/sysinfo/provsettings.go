package sysinfo

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// ProviderDV is whether our provider attaches DV send queues of its own on
// usb4 devices, as the shipped front library decides it (cshim/settings.c):
// the dv_send setting, off by default, and force_kernel_commands, which
// wins over it.
type ProviderDV struct {
	On bool `json:"on"`
	// Source names what decided: "default", the variable, or the file.
	Source string `json:"source"`
}

// providerConf is the front library's default config file.
const providerConf = "/etc/usb4verbs/usb4_rdma.conf"

// ReadProviderDV reads the dv_send and force_kernel_commands settings the
// way the provider does: the environment first (only when live; a captured
// tree has none), else the config file under root (USB4VERBS_CONF when
// live and set). Unparsable values are ignored, as there.
func ReadProviderDV(root string, live bool) ProviderDV {
	if root == "" {
		root = "/"
	}
	getenv := func(string) (string, bool) { return "", false }
	if live {
		getenv = func(k string) (string, bool) {
			v, ok := os.LookupEnv(k)
			return v, ok && v != ""
		}
	}
	conf := providerConf
	if p, ok := getenv("USB4VERBS_CONF"); ok {
		conf = p
	}
	file := readProviderConf(filepath.Join(root, conf))
	dv := ProviderDV{Source: "default"}
	if b, ok := file["dv_send"]; ok {
		dv = ProviderDV{On: b, Source: conf}
	}
	if v, ok := getenv("USB4VERBS_DV_SEND"); ok {
		if b, ok := parseSettingBool(v); ok {
			dv = ProviderDV{On: b, Source: "USB4VERBS_DV_SEND"}
		}
	}
	force, forceSrc := file["force_kernel_commands"], conf
	if _, ok := getenv("TBV_CQ_FORCE_IOCTL"); ok {
		force, forceSrc = true, "TBV_CQ_FORCE_IOCTL"
	}
	if v, ok := getenv("USB4VERBS_FORCE_KERNEL_COMMANDS"); ok {
		if b, ok := parseSettingBool(v); ok {
			force, forceSrc = b, "USB4VERBS_FORCE_KERNEL_COMMANDS"
		}
	}
	if force && dv.On {
		dv = ProviderDV{On: false, Source: forceSrc + " (force_kernel_commands)"}
	}
	return dv
}

// readProviderConf parses the provider's config file: "key value" or
// "key = value" lines, # comments; only yes/no-style values are kept.
func readProviderConf(path string) map[string]bool {
	out := map[string]bool{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.FieldsFunc(sc.Text(), func(r rune) bool { return r == ' ' || r == '\t' || r == '=' || r == '\r' })
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, ok := parseSettingBool(f[1]); ok {
			out[f[0]] = v
		}
	}
	return out
}

// parseSettingBool accepts what cshim/settings.c parse_bool accepts.
func parseSettingBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "on":
		return true, true
	case "0", "no", "false", "off":
		return false, true
	}
	return false, false
}
