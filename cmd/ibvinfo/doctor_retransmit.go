package main

import (
	"fmt"
	"strconv"
	"strings"

	"usb4verbs/internal/sysinfo"
)

// checkRetransmits (issue 34): thunderbolt_ibverbs resends a send work request
// whose ACK did not come within the QP's verbs ACK timeout, 4.096 us x
// 2^timeout (hellas-main:kernel/ibdev.c:912-928 picks it, :3497-3519 resends,
// logging "native retransmit ... reason=1"), and fails the QP once retry_cnt
// resends have gone unanswered (data_wr_retry_exhausted): the application sees
// a retry error and its other WRs flushed. The module's own qp_timeout_ms
// applies only to a QP without an ACK timeout, so what a user can set is the
// timeout the application gives its QPs: NCCL_IB_TIMEOUT (NCCL's default 20,
// 4.3 s), UCX_RC_TIMEOUT, perftest's -u. gloo fixes 14 (67 ms) and has no
// setting (facebookincubator/gloo gloo/transport/ibverbs/pair.cc
// Pair::connect). The counters are the module's debugfs summary
// (hellas-main:kernel/debugfs.c:160-167).
func checkRetransmits(e doctorEnv) check {
	const id = "ack-timeout"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	const set = "NCCL: NCCL_IB_TIMEOUT (default 20, 4.3 s; keep it at 18 or more); UCX: UCX_RC_TIMEOUT; perftest: -u 20; " +
		"gloo (PyTorch's Gloo backend) fixes the ACK timeout at 14 (67 ms) and has no setting: keep CPUs free for the module's " +
		"work (no busy-polling thread on every CPU) or use NCCL"
	// An NCCL ACK timeout below 18 (1.07 s) is the hardware figure that the module's
	// work under load misses first.
	if v := strings.TrimSpace(s.Env["NCCL_IB_TIMEOUT"]); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n < 18 {
			return warn(id, fmt.Sprintf("NCCL_IB_TIMEOUT=%d: a send whose ACK comes later than 4.096 us x 2^%d (%s) is resent, and after NCCL_IB_RETRY_CNT resends the QP fails",
				n, n, ackTimeoutText(n)), "set NCCL_IB_TIMEOUT=20 (NCCL's default) or unset it")
		}
	}
	if !s.Debugfs.Present {
		return skip(id, "no /sys/kernel/debug/thunderbolt_ibverbs/summary (mount debugfs, run as root) to count the module's resends; "+
			"what a user can set for the QP ACK timeout: "+set)
	}
	if len(usb4Devices(s)) == 0 {
		// A pulled cable also leaves resends behind; usb4-devices says why.
		return skip(id, "no usb4 device registered")
	}
	re, ok1 := s.Debugfs.Counter("data_wr_retransmit")
	ex, _ := s.Debugfs.Counter("data_wr_retry_exhausted")
	if !ok1 {
		return skip(id, "this thunderbolt_ibverbs has no data_wr_retransmit counter")
	}
	when := "since the module loaded"
	if e.watch && e.secondOK {
		// During the watch: the workload's own.
		second := sysinfo.Debugfs{Summary: e.second}
		r2, _ := second.Counter("data_wr_retransmit")
		x2, _ := second.Counter("data_wr_retry_exhausted")
		re, ex, when = r2-re, x2-ex, "during the watch"
	}
	if re == 0 && ex == 0 {
		return ok(id, "the module resent no work request for a late ACK "+when+" (data_wr_retransmit)")
	}
	msg := fmt.Sprintf("%s the module resent %d work requests whose ACK came later than their QP's ACK timeout (data_wr_retransmit)", when, re)
	if ex > 0 {
		msg += fmt.Sprintf(", and %d ran out of retries (data_wr_retry_exhausted): those QPs failed with a retry error and flushed their other WRs", ex)
	}
	return warn(id, msg, "a longer ACK timeout for the application's QPs: "+set)
}

// ackTimeoutText is 4.096 us x 2^t in the unit that reads best.
func ackTimeoutText(t int) string {
	us := 4.096 * float64(uint64(1)<<uint(t))
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f us", us)
}
