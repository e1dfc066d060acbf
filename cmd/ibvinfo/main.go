package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Exit codes; documented in usage and README.md.
const (
	exitOK          = 0 // nothing wrong (doctor: no error-severity finding)
	exitFindings    = 1 // doctor found at least one error-severity problem
	exitUsage       = 2 // bad command line
	exitSystem      = 3 // the tree or an output could not be read or written
	exitUnavailable = 4 // the feature is not available in this build (perf without a data path)
	exitPerfFailed  = 5 // perf ran but the transfer or the peer failed
)

const usage = `Usage: ibvinfo [flags] [command] [args]

Commands:
  (none)                     show RDMA devices, ports, GIDs, usb4 identity, Thunderbolt
                             links, modules, provider installation and debugfs counters
  doctor [--watch[=5s]] [DEV...]
                             check the setup; each finding has a verdict and a fix.
                             DEV names devices you are about to use.
                             --watch samples the debugfs counters twice to see whether
                             the RDMA data path carries traffic
  perf DEV [DEV2]            move data between two local devices (one device: a loop
                             back onto itself) and report SEND/RECV latency and RDMA
                             WRITE bandwidth
  perf --serve DEV           wait for one peer (ibvinfo perf --peer HOST[:PORT] DEV)
  perf --peer HOST[:PORT] DEV
                             run against a peer that runs perf --serve
                             (--connect is the same flag)
  nccl [PEER]                the NCCL/RCCL, UCX and gloo environment (export lines) that
                             picks the usb4 rails and GID to each peer host; PEER is a
                             peer number or a device that reaches it (default: every peer)
  perf flags: --size BYTES (65536), --iters N (1000), --port N (18515),
              --timeout D (10s: each wait for the peer), --gid-index N (auto)

Flags (before or after the command):
  --json          machine-readable output
  --root DIR      read sysfs, debugfs, /proc and /etc from a captured tree (default /)
  --no-color      never colour (colour is used only on a terminal and without NO_COLOR)
  -h, --help      this text

Exit codes:
  0  ok (doctor: no error-severity finding)
  1  doctor found at least one error-severity finding
  2  usage error
  3  cannot read the tree or write the output
  4  not available in this build (perf in a build without cgo, which has no data path)
  5  perf failed (transfer error, peer unreachable or device missing)
`

// options are the flags every command shares.
type options struct {
	json    bool
	root    string
	noColor bool
	color   bool // resolved: colour on
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run is the whole program; tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	var opts options
	var watch durationFlag
	var perf perfOptions
	fs := flag.NewFlagSet("ibvinfo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&opts.json, "json", false, "")
	fs.StringVar(&opts.root, "root", "/", "")
	fs.BoolVar(&opts.noColor, "no-color", false, "")
	fs.Var(&watch, "watch", "")
	fs.BoolVar(&perf.serve, "serve", false, "")
	fs.StringVar(&perf.connect, "peer", "", "")
	fs.StringVar(&perf.connect, "connect", "", "") // the name perf had first
	fs.DurationVar(&perf.timeout, "timeout", defaultPerfTimeout, "")
	fs.IntVar(&perf.gidIndex, "gid-index", -1, "")
	fs.IntVar(&perf.port, "port", defaultPerfPort, "")
	fs.IntVar(&perf.size, "size", 65536, "")
	fs.IntVar(&perf.iters, "iters", 1000, "")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")

	// Flags may come before and after the command: parse, take one
	// positional, parse the rest again.
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			fmt.Fprintf(stderr, "ibvinfo: %v\n\n%s", err, usage)
			return exitUsage
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		rest = rest[1:]
	}
	if *help {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	opts.color = !opts.json && !opts.noColor && os.Getenv("NO_COLOR") == "" && isTerminal(stdout)
	if fi, err := os.Stat(opts.root); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "ibvinfo: --root %s: not a readable directory\n", opts.root)
		return exitSystem
	}

	cmd := ""
	if len(positional) > 0 {
		cmd, positional = positional[0], positional[1:]
	}
	var err error
	switch cmd {
	case "", "show":
		if watch.set || perf.set(fs) {
			return usageFail(stderr, "--watch belongs to doctor; --serve, --peer, --port, --size, --iters, --timeout and --gid-index to perf")
		}
		err = runShow(stdout, opts, positional)
	case "doctor":
		if perf.set(fs) {
			return usageFail(stderr, "--serve, --peer, --port, --size, --iters, --timeout and --gid-index belong to perf")
		}
		var code int
		code, err = runDoctor(stdout, opts, watch, positional)
		if err == nil {
			return code
		}
	case "nccl":
		if watch.set || perf.set(fs) {
			return usageFail(stderr, "nccl takes --json, --root and --no-color only")
		}
		err = runNCCL(stdout, opts, positional)
	case "perf":
		if watch.set {
			return usageFail(stderr, "--watch belongs to doctor")
		}
		err = runPerf(stdout, stderr, opts, perf, positional)
	default:
		return usageFail(stderr, fmt.Sprintf("unknown command %q", cmd))
	}
	return report(stderr, err)
}

func usageFail(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "ibvinfo: %s\n\n%s", msg, usage)
	return exitUsage
}

// report prints err and maps it to an exit code.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "ibvinfo: %v\n", err)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprint(stderr, "\n"+usage)
		return exitUsage
	case errors.Is(err, errNotAvailable):
		return exitUnavailable
	case errors.Is(err, errPerf):
		return exitPerfFailed
	}
	return exitSystem
}

// durationFlag is --watch or --watch=DURATION.
type durationFlag struct {
	set bool
	d   time.Duration
}

const defaultWatch = 5 * time.Second

func (f *durationFlag) String() string   { return f.d.String() }
func (f *durationFlag) IsBoolFlag() bool { return true }
func (f *durationFlag) Set(s string) error {
	f.set = true
	switch s {
	case "true":
		f.d = defaultWatch
		return nil
	case "false":
		f.set = false
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("--watch wants a duration like 5s, not %q", s)
	}
	f.d = d
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// live reports whether the tree is the running system, where netlink and
// the provider's queries may add to what the tree shows.
func (o options) live() bool {
	return strings.TrimRight(o.root, "/") == ""
}
