package sysinfo

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// IOMMU describes DMA translation for devices.
type IOMMU struct {
	Cmdline []string `json:"cmdline_params,omitempty"` // iommu=, amd_iommu=, intel_iommu=, iommu.passthrough=
	Units   []string `json:"units,omitempty"`          // /sys/class/iommu entries
	// GroupTypes counts /sys/kernel/iommu_groups/*/type values ("DMA-FQ": 12).
	GroupTypes map[string]int `json:"group_types,omitempty"`
	// Mode is "off", "passthrough", "translated" or "" (unknown).
	Mode string `json:"mode"`
}

func (t *tree) iommu() IOMMU {
	var io IOMMU
	cmdline, cmdOK := t.attr("proc/cmdline", false)
	for _, f := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(f, "=")
		switch k {
		case "iommu", "amd_iommu", "intel_iommu", "iommu.passthrough", "iommu.strict":
			io.Cmdline = append(io.Cmdline, f)
		}
	}
	io.Units = t.list("sys/class/iommu")
	for _, g := range t.list("sys/kernel/iommu_groups") {
		s, ok := t.attr("sys/kernel/iommu_groups/"+g+"/type", true)
		if !ok || s == "" {
			continue
		}
		if io.GroupTypes == nil {
			io.GroupTypes = map[string]int{}
		}
		io.GroupTypes[s]++
	}
	io.Mode = iommuMode(io, cmdOK)
	return io
}

// iommuMode decides the mode: group types are the kernel's own answer;
// without them the command line and the presence of IOMMU units decide.
func iommuMode(io IOMMU, cmdOK bool) string {
	for _, p := range io.Cmdline {
		switch p {
		case "iommu=off", "amd_iommu=off", "intel_iommu=off":
			return "off"
		}
	}
	if len(io.GroupTypes) > 0 {
		for ty := range io.GroupTypes {
			if strings.HasPrefix(ty, "DMA") {
				return "translated"
			}
		}
		return "passthrough"
	}
	for _, p := range io.Cmdline {
		switch p {
		case "iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on":
			return "passthrough"
		}
	}
	if len(io.Units) == 0 {
		if !cmdOK {
			return ""
		}
		return "off"
	}
	return "translated"
}

// Memlock is RLIMIT_MEMLOCK of the process (live) or of the captured
// /proc/self/limits.
type Memlock struct {
	Known bool `json:"known"`
	// Soft and Hard in bytes; Unlimited* say RLIM_INFINITY.
	Soft          uint64 `json:"soft,omitempty"`
	Hard          uint64 `json:"hard,omitempty"`
	SoftUnlimited bool   `json:"soft_unlimited"`
	HardUnlimited bool   `json:"hard_unlimited"`
	// IPCLock is true when the process holds CAP_IPC_LOCK, which lets it
	// pin memory regardless of the limit (kernel ib_umem_get).
	IPCLock bool   `json:"cap_ipc_lock"`
	Source  string `json:"source,omitempty"`
}

// capIPCLock is CAP_IPC_LOCK's bit in CapEff (include/uapi/linux/capability.h).
const capIPCLock = 14

func (t *tree) memlock(live bool) Memlock {
	var m Memlock
	if live {
		var rl unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil {
			m.Known, m.Source = true, "getrlimit"
			m.Soft, m.SoftUnlimited = rl.Cur, rl.Cur == unix.RLIM_INFINITY
			m.Hard, m.HardUnlimited = rl.Max, rl.Max == unix.RLIM_INFINITY
		}
	}
	if !m.Known {
		if s, ok := t.read("proc/self/limits", false); ok {
			if err := parseLimits(s, &m); err != nil {
				t.problem("proc/self/limits", err)
			} else {
				m.Known, m.Source = true, "/proc/self/limits"
			}
		}
	}
	if m.SoftUnlimited {
		m.Soft = 0
	}
	if m.HardUnlimited {
		m.Hard = 0
	}
	if s, ok := t.read("proc/self/status", true); ok {
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
				if caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil {
					m.IPCLock = caps&(1<<capIPCLock) != 0
				}
			}
		}
	}
	return m
}

// parseLimits reads the "Max locked memory" line of /proc/<pid>/limits.
func parseLimits(s string, m *Memlock) error {
	for _, l := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(l, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return fmt.Errorf("malformed line %q", l)
		}
		var err error
		if m.Soft, m.SoftUnlimited, err = parseLimit(f[0]); err != nil {
			return err
		}
		if m.Hard, m.HardUnlimited, err = parseLimit(f[1]); err != nil {
			return err
		}
		return nil
	}
	return fmt.Errorf(`no "Max locked memory" line`)
}

func parseLimit(s string) (uint64, bool, error) {
	if s == "unlimited" {
		return 0, true, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("malformed limit %q", s)
	}
	return v, false, nil
}

// UdevRename describes rdma-core's persistent-naming rule.
type UdevRename struct {
	// File is the effective rules file (an /etc or /run copy overrides
	// the one in /usr/lib or /lib), "" when none is installed.
	File string `json:"file,omitempty"`
	// Active is true when that file renames RDMA devices (an rdma_rename
	// call with a policy other than NAME_KERNEL).
	Active bool `json:"active"`
	// ExcludesUSB4 is true when the file skips usb4_rdma devices.
	ExcludesUSB4 bool   `json:"excludes_usb4"`
	Policy       string `json:"policy,omitempty"`
}

const udevRuleName = "60-rdma-persistent-naming.rules"

// udevRuleDirs in udev's precedence order (udev(7): /etc, /run, then the
// vendor directories).
var udevRuleDirs = []string{"etc/udev/rules.d", "run/udev/rules.d", "usr/lib/udev/rules.d", "lib/udev/rules.d"}

func (t *tree) udev() UdevRename {
	var u UdevRename
	for _, dir := range udevRuleDirs {
		rel := dir + "/" + udevRuleName
		if !t.exists(rel) {
			continue
		}
		u.File = "/" + rel
		// A symlink to /dev/null masks the rule.
		if t.linkBase(rel) == "null" {
			return u
		}
		s, ok := t.read(rel, false)
		if !ok {
			return u
		}
		parseUdevRule(s, &u)
		return u
	}
	return u
}

func parseUdevRule(s string, u *UdevRename) {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.Contains(l, "usb4_rdma") {
			u.ExcludesUSB4 = true
		}
		_, after, ok := strings.Cut(l, "rdma_rename")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(after) {
			if p := strings.Trim(f, `",`); strings.HasPrefix(p, "NAME_") {
				u.Policy = p
				if p != "NAME_KERNEL" {
					u.Active = true
				}
				break
			}
		}
	}
}
