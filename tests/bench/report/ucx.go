package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// UCXRun is one boot of the UCX plan (BENCH_PLAN=ucx, tests/bench/guest-ucx.sh):
// ucx-rxe.log (ours against librxe) or ucx-<tree>.log (ours against the module's
// C provider). The boot also ran the perftest rows its UCX cases sit beside.
type UCXRun struct {
	Name string // "rxe" or the tree
	Base string // SideLibrxe or SideUp
	Run  *Run
}

// loadUCX reads every results/ucx-*.log, rxe first, then the trees by name.
func loadUCX(results string) ([]UCXRun, error) {
	runs, err := loadNamedRuns(results, "ucx", "rxe")
	var out []UCXRun
	for _, nr := range runs {
		base := SideUp
		if nr.name == "rxe" {
			base = SideLibrxe
		}
		out = append(out, UCXRun{Name: nr.name, Base: base, Run: nr.run})
	}
	return out, err
}

// ucxPairs is each ucx_perftest test, what it does, its figure, and the perftest
// tool whose row stands beside it.
var ucxPairs = []struct {
	test, what, metric, perf string
}{
	{"ucx_tag_lat", "UCP tag-matched ping-pong (`-t tag_lat`), one-way latency, 50th percentile", "t_typical_us", "ib_send_lat"},
	{"ucx_tag_bw", "UCP tag-matched stream (`-t tag_bw`), bandwidth over the run", "bw_avg_mbps", "ib_send_bw"},
	{"ucx_put_bw", "UCT RDMA WRITE, zero-copy (`-x rc_verbs -t put_bw -D zcopy`), bandwidth over the run", "bw_avg_mbps", "ib_write_bw"},
	{"ucx_am_bw", "UCT active message, copy-out (`-x rc_verbs -t am_bw -D bcopy`), bandwidth over the run", "bw_avg_mbps", "ib_send_bw"},
}

// ucxBaseName names the baseline side of a UCX run.
func ucxBaseName(u UCXRun) string {
	if u.Base == SideLibrxe {
		return "librxe"
	}
	return "C provider"
}

// ucxLogPrefix is what UCX puts before a logged message: its time, host:pid and
// source line, "UCX ERROR"; or the host:pid of a crash line.
var ucxLogPrefix = regexp.MustCompile(`\[[0-9.]+\] +\[[^\]]*\] +\S+:[0-9]+ +UCX +[A-Z]+ +|\[\(none\):[0-9]+ :0:[0-9]+\] +`)

// ucxClean is a line UCX printed without its log prefix, at most 200 characters.
func ucxClean(line string) string {
	line = strings.Join(strings.Fields(ucxLogPrefix.ReplaceAllString(line, "")), " ")
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}

// ucxCannot is why side could not run tool in run: the first failure's reason
// and the line that says most (UCP's "no usable transports", UCT's "Failed to
// run test", else the first), or "" when it never failed.
func ucxCannot(run *Run, side, tool string) string {
	for _, e := range run.Fails {
		if e.Fields["side"] != side || e.Fields["tool"] != tool {
			continue
		}
		why := e.Fields["why"]
		if rc := e.Fields["rc"]; rc != "" {
			why += ", exit " + rc
		}
		if len(e.Detail) > 0 {
			best := e.Detail[0]
			for _, want := range []string{"Failed to run test", "no usable transports", "Caught signal"} {
				for _, d := range e.Detail {
					if strings.Contains(d, want) {
						best = d
					}
				}
			}
			why += ": `" + strings.ReplaceAll(ucxClean(best), "|", "\\|") + "`"
		}
		return why
	}
	return ""
}

// ucxStat is one side's statistic of a case, by key.
func ucxStat(run *Run, side string, k Key) Stat {
	var vs []float64
	for _, s := range run.Samples {
		if s.Side == side && s.Key == k {
			vs = append(vs, s.Value)
		}
	}
	return Summarize(vs)
}

// ucxSizes lists the sizes of tool's samples and failures in run.
func ucxSizes(run *Run, tool string) []int {
	seen := map[int]bool{}
	for _, s := range run.Samples {
		if s.Key.Tool == tool {
			seen[s.Key.Size] = true
		}
	}
	for _, e := range run.Fails {
		if e.Fields["tool"] == tool {
			seen[atoiOr(e.Fields["size"], 0)] = true
		}
	}
	var out []int
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// ratioOf is a/b of two medians, NaN when either is missing.
func ratioOf(a, b Stat) float64 {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return math.NaN()
	}
	return a.Median / b.Median
}

// writeUCX writes the UCX section: per boot, ucx_perftest through ours and the
// baseline beside the perftest rows of the same boot, with the ratios.
func writeUCX(p func(string, ...any), runs []UCXRun, notes string) {
	if len(runs) == 0 {
		return
	}
	p("## UCX: ucx_perftest beside perftest (issue 35)\n\n")
	p("`BENCH_PLAN=ucx`: one rxe boot (Debian 12, UCX 1.13: `UCX_TLS=rc_verbs,ud_verbs:aux`) and one usb4 bed boot per\n")
	p("tree of `BENCH_UCX_TREES` (default hellas-main) on the userland of `BENCH_UCX_USERLAND` (default Debian 13, UCX\n")
	p("1.18.1: `UCX_TLS=rc_verbs,tcp:aux`, `UCX_RC_VERBS_TX_MIN_SGE=4`, `UCX_NET_DEVICES=<dev>:1,<netdev of the IP>`,\n")
	p("`UCX_IB_GPU_DIRECT_RDMA=no`, without which the C provider, built for rdma-core 44, crashes in UCX's dma-buf probe on\n")
	p("rdma-core 56.1: `tests/bench/guest-ucx.sh`;\n")
	p("UCX before 1.16 takes no TCP auxiliary transport and the module has no UD, so Debian 12's UCX cannot run on\n")
	p("the module: docs/srq.md). Each boot runs `tests/bench/guest-ucx.sh`, ucx_perftest over `rc_verbs` through ours\n")
	p("and the baseline (librxe on rxe, the module's C provider on the bed), interleaved per repetition, and in the\n")
	p("same boot, same userland, the perftest rows beside them (ib_send_lat, ib_send_bw, ib_write_bw at the same\n")
	p("sizes, 1 QP; on the bed with `-u 20`). UCX's figures are those of its `Final:` row: the 50th percentile of a\n")
	p("ping-pong's one-way latency (half the round trip, as perftest's t_typical) and the bandwidth over the\n")
	p("whole run, its message rate × the size (MB = 2^20 bytes in both tools). *UCX / perftest* is UCX's figure over perftest's for the same provider and\n")
	p("size: what UCX's protocol costs (latency above 1, bandwidth below 1) over the raw verbs. Printed numbers and\n")
	p("ratios, no target. UCT tests on UCX 1.13 (rxe) run both ends on the client's device (1.13's server takes\n")
	p("`-d` from the client), so they do not cross the veth as perftest does; on UCX 1.18 each end has its own.\n")
	p("The usb4 plan's own perftest rows for a tree (Debian 12 userland, another boot) are in its usb4 section.\n\n")
	if strings.TrimSpace(notes) != "" {
		p("### UCX: summary and analysis\n\n%s\n", strings.TrimSpace(notes))
	}
	for _, u := range runs {
		run := u.Run
		base := ucxBaseName(u)
		p("### UCX on %s: ours against %s\n\n", u.Name, base)
		writeContext(p, run)
		var infos []string
		seen := map[string]bool{}
		for _, m := range run.Info {
			if m["what"] != "ucx" {
				continue
			}
			var s string
			switch {
			case m["ucx"] == "absent":
				s = "no ucx_perftest in the image"
			case m["skipped"] == "1":
				s = "UCX " + m["ucx"] + " not run: " + m["why"]
			case m["default_rc_verbs_on_dev0"] != "":
				s = fmt.Sprintf("side %s with UCX's default settings: `rc_verbs` listed by `ucx_info -d`: %s", m["side"], m["default_rc_verbs_on_dev0"])
				if e := strings.TrimSpace(m["default_ucx_info_errors"]); e != "" {
					s += " (it printed `" + ucxClean(e) + "`)"
				}
			default:
				s = fmt.Sprintf("side %s: UCX %s, `rc_verbs` on the server's device listed by `ucx_info -d`: %s", m["side"], m["ucx"], orDash(m["rc_verbs_on_dev0"]))
				if e := strings.TrimSpace(m["ucx_info_errors"]); e != "" {
					s += " (it printed `" + ucxClean(e) + "`)"
				}
				if m["ucp_env"] != "" && !seen["env"] {
					seen["env"] = true
					infos = append(infos, fmt.Sprintf("UCP settings `%s`, wire-up device %s; UCT settings `%s`",
						m["ucp_env"], orDash(m["aux_dev"]), m["uct_env"]))
				}
			}
			if !seen[s] {
				seen[s] = true
				infos = append(infos, s)
			}
		}
		if len(infos) > 0 {
			p("UCX: %s.\n\n", strings.Join(infos, "; "))
		}
		if u.Base == SideLibrxe {
			writeProviders(p, run)
		} else {
			writeUSB4Providers(p, run)
		}
		p("| ucx_perftest | size | ours, UCX | %s, UCX | ours / %s | perftest | ours, perftest | %s, perftest | ours / %s | UCX / perftest, ours | UCX / perftest, %s |\n",
			base, base, base, base, base)
		p("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, pr := range ucxPairs {
			cannot := ucxCannot(run, u.Base, pr.test)
			for _, size := range ucxSizes(run, pr.test) {
				uk := Key{Tool: pr.test, Size: size, QPs: 1, PL: 1, Metric: pr.metric}
				pk := Key{Tool: pr.perf, Size: size, QPs: 1, PL: 1, Metric: pr.metric}
				uo, ub := ucxStat(run, SideOurs, uk), ucxStat(run, u.Base, uk)
				po, pb := ucxStat(run, SideOurs, pk), ucxStat(run, u.Base, pk)
				baseCell := cell(ub)
				if ub.N == 0 && cannot != "" {
					baseCell = "cannot: " + cannot
				}
				oursCell := cell(uo)
				if c := ucxCannot(run, SideOurs, pr.test); uo.N == 0 && c != "" {
					oursCell = "failed: " + c
				}
				perfName := "–"
				if po.N > 0 || pb.N > 0 {
					perfName = pr.perf
				}
				p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(pr.test, "ucx_"), sizeName(size),
					oursCell, baseCell, ratioText(ratioOf(uo, ub)), perfName, cell(po), cell(pb), ratioText(ratioOf(po, pb)),
					ratioText(ratioOf(uo, po)), ratioText(ratioOf(ub, pb)))
			}
		}
		p("\nCells: median (min–max) of the repetitions; latency in µs (tag_lat; perftest ib_send_lat t_typical), bandwidth in MB/s.\n")
		p("Tests: ")
		for i, pr := range ucxPairs {
			if i > 0 {
				p("; ")
			}
			p("%s: %s, beside %s", strings.TrimPrefix(pr.test, "ucx_"), pr.what, pr.perf)
		}
		p(".\n\n")
		writeUCXFailures(p, run)
	}
}

// writeUCXFailures lists a UCX run's failed and skipped runs with what they printed.
func writeUCXFailures(p func(string, ...any), run *Run) {
	if len(run.Fails) == 0 && len(run.Skips) == 0 {
		p("Failures: none, every run produced its result.\n\n")
		return
	}
	p("Failures (%d) and skips (%d):\n\n", len(run.Fails), len(run.Skips))
	for _, e := range run.Fails {
		k := Key{Tool: e.Fields["tool"], Size: atoiOr(e.Fields["size"], 0), QPs: atoiOr(e.Fields["qps"], 1), PL: 1}
		var lines []string
		seen := map[string]bool{}
		for _, d := range e.Detail {
			if c := ucxClean(d); !seen[c] {
				seen[c] = true
				lines = append(lines, strings.ReplaceAll(c, "|", "\\|"))
			}
		}
		p("- side %s, %s, rep %s: %s (exit %s)%s\n", e.Fields["side"], caseName(k), e.Fields["rep"], e.Fields["why"],
			orDash(e.Fields["rc"]), detail(lines))
	}
	// Skips per side and tool: a side is not run again for a test it failed twice.
	type sk struct{ side, tool, why string }
	var order []sk
	n := map[sk]int{}
	for _, e := range run.Skips {
		k := sk{e.Fields["side"], e.Fields["tool"], e.Fields["why"]}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	for _, k := range order {
		p("- side %s, %s: %d run(s) skipped (%s)\n", k.side, k.tool, n[k], k.why)
	}
	p("\n")
}
