package sysinfo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// System is everything Collect found under one root.
type System struct {
	// Root is the tree that was read ("/" for the running system).
	Root string `json:"root"`

	Devices     []Device     `json:"devices"`
	Thunderbolt []TBDevice   `json:"thunderbolt"`
	Modules     []Module     `json:"modules"`
	Debugfs     Debugfs      `json:"debugfs"`
	IOMMU       IOMMU        `json:"iommu"`
	Memlock     Memlock      `json:"memlock"`
	Udev        UdevRename   `json:"udev"`
	Verbs       Libibverbs   `json:"libibverbs"`
	Problems    []Problem    `json:"problems,omitempty"`
	DriverBinds []DriverBind `json:"thunderbolt_drivers,omitempty"`
	// Env holds the environment variables that choose RDMA devices or
	// providers (EnvVars), from the process (live) or a captured
	// /proc/self/environ.
	Env map[string]string `json:"env,omitempty"`
}

// EnvVars are the variables Env records: libibverbs' provider list and the
// device selectors of NCCL, UCX and llama.cpp, and the NCCL settings the
// doctor's nccl-* checks look at.
var EnvVars = []string{"RDMAV_DRIVERS", "IBV_DRIVERS", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "UCX_NET_DEVICES", "GGML_RDMA_DEV",
	"NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME", "NCCL_IB_OOO_RQ", "NCCL_IB_RESILIENCY_PORT_FAILOVER", "NCCL_GDR_FLUSH_DISABLE", "NCCL_IB_ADAPTIVE_ROUTING"}

// Problem is a file that exists (or should) but could not be read or
// understood. The facts that depend on it are left unknown.
type Problem struct {
	Path string `json:"path"` // relative to Root, with a leading "/"
	Err  string `json:"error"`
}

func (p Problem) String() string { return "could not read " + p.Path + ": " + p.Err }

// Options tune Collect.
type Options struct {
	// Live, when true, lets Collect use facts of the calling process that a
	// captured tree cannot hold (getrlimit, capabilities). It is meant for
	// Root "/".
	Live bool
}

// Collect reads everything under root. It never fails: unreadable files
// are listed in System.Problems.
func Collect(root string, opts Options) *System {
	if root == "" {
		root = "/"
	}
	t := &tree{root: root}
	s := &System{Root: root}
	s.Devices = t.devices()
	t.devNodes(s.Devices, opts.Live)
	s.Thunderbolt = t.thunderboltDevices()
	s.DriverBinds = t.thunderboltDrivers()
	s.Modules = []Module{t.module("thunderbolt_ibverbs"), t.module("thunderbolt_net")}
	s.Debugfs = t.debugfs()
	t.resolvePeers(s)
	s.IOMMU = t.iommu()
	s.Memlock = t.memlock(opts.Live)
	s.Udev = t.udev()
	s.Verbs = t.libibverbs()
	s.Env = t.env(opts.Live)
	s.Problems = t.problems
	return s
}

// Module returns the module called name, or a zero Module (not loaded).
func (s *System) Module(name string) Module {
	for _, m := range s.Modules {
		if m.Name == name {
			return m
		}
	}
	return Module{Name: name}
}

// tree reads files relative to a root and records what went wrong.
type tree struct {
	root     string
	problems []Problem
}

// abs turns a tree path ("sys/class/...") into a host path.
func (t *tree) abs(rel string) string {
	return filepath.Join(t.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
}

func (t *tree) problem(rel string, err error) {
	rel = "/" + strings.TrimPrefix(rel, "/")
	msg := err.Error()
	// Strip the host path os errors repeat, so the message is the same for
	// every root (golden files depend on it).
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	t.problems = append(t.problems, Problem{Path: rel, Err: msg})
}

// exists reports whether rel exists (following symlinks inside the tree is
// not attempted: the answer is about the entry itself or its target).
func (t *tree) exists(rel string) bool {
	_, err := os.Lstat(t.abs(rel))
	return err == nil
}

// maxAttrSize bounds what is read from one sysfs/proc/debugfs file; real
// ones are at most a few pages.
const maxAttrSize = 1 << 20

// read returns the content of rel. A missing file returns ok=false with no
// problem recorded when optional is true; every other failure is recorded.
func (t *tree) read(rel string, optional bool) (string, bool) {
	f, err := os.Open(t.abs(rel))
	if err != nil {
		if !(optional && errors.Is(err, fs.ErrNotExist)) {
			t.problem(rel, err)
		}
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAttrSize+1))
	if err != nil {
		t.problem(rel, err)
		return "", false
	}
	if len(b) > maxAttrSize {
		t.problem(rel, fmt.Errorf("larger than %d bytes", maxAttrSize))
		return "", false
	}
	return string(b), true
}

// attr reads a one-line sysfs attribute, trimmed.
func (t *tree) attr(rel string, optional bool) (string, bool) {
	s, ok := t.read(rel, optional)
	return strings.TrimSpace(s), ok
}

// list returns the sorted entry names of directory rel; a missing directory
// is an empty list.
func (t *tree) list(rel string) []string {
	ents, err := os.ReadDir(t.abs(rel))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.problem(rel, err)
		}
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// linkBase returns the last element of symlink rel's target ("" when rel is
// not a symlink). Only the name is used, so absolute targets in a captured
// tree are harmless.
func (t *tree) linkBase(rel string) string {
	target, err := os.Readlink(t.abs(rel))
	if err != nil {
		return ""
	}
	return path.Base(filepath.ToSlash(target))
}

// resolve follows symlinks of rel inside the tree (absolute targets are
// re-rooted) and returns the final tree path; ok is false when the chain is
// broken or too long.
func (t *tree) resolve(rel string) (string, bool) {
	rel = "/" + strings.TrimPrefix(rel, "/")
	for range 16 {
		fi, err := os.Lstat(t.abs(rel))
		if err != nil {
			return rel, false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return rel, true
		}
		target, err := os.Readlink(t.abs(rel))
		if err != nil {
			return rel, false
		}
		target = filepath.ToSlash(target)
		if strings.HasPrefix(target, "/") {
			rel = path.Clean(target)
		} else {
			rel = path.Join(path.Dir(rel), target)
		}
	}
	return rel, false
}

func (t *tree) env(live bool) map[string]string {
	env := map[string]string{}
	if live {
		for _, k := range EnvVars {
			if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
		return env
	}
	s, ok := t.read("proc/self/environ", true)
	if !ok {
		return env
	}
	for _, kv := range strings.Split(s, "\x00") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && slices.Contains(EnvVars, k) {
			env[k] = v
		}
	}
	return env
}
