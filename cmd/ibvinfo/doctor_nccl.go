package main

import (
	"strings"
)

// ncclByteLenSettings are the NCCL 2.30 settings under which NCCL's net_ib
// reads the byte_len of an IBV_WC_RECV_RDMA_WITH_IMM completion: its
// ID-based receive matching (NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME=1, which
// NCCL_IB_OOO_RQ=1 and NCCL_IB_RESILIENCY_PORT_FAILOVER=1 also select)
// sums byte_len into the size the receive reports (NVIDIA/nccl
// src/transport/net_ib/common.cc ncclIbBaseCommInit, p2p.cc
// ncclIbCompletionEventProcess). The default index-based matching reads the
// size from imm_data and never looks at byte_len.
var ncclByteLenSettings = []struct{ name, value string }{
	{"NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME", "1"},
	{"NCCL_IB_OOO_RQ", "1"},
	{"NCCL_IB_RESILIENCY_PORT_FAILOVER", "1"},
}

// byteLenTreeParam is a module parameter only the tree that fills byte_len
// has: pleite-gda-8099446 builds its RECV_RDMA_WITH_IMM completion with
// byte_len (pleite-gda-8099446:kernel/ibdev.c:9384 and :10455) and declares
// qp_rx_timeout_multiplier (0644, kernel/ibdev.c:159); hellas-main
// (kernel/ibdev.c:7357, :8084), hellas-gda-v2 (:7567, :8294), pleite-gda
// (:7770, :8497) and pleite-main (:6537, :7270) leave byte_len 0 and have no
// such parameter. Seen on the bed: tests/usb4/ncclpattern.c's
// write_imm_byte_len (docs/nccl-pattern.md).
const byteLenTreeParam = "qp_rx_timeout_multiplier"

// checkNCCLWriteImmByteLen names what NCCL would read wrong on a module tree
// that leaves byte_len 0 in write-with-immediate receive completions, and
// the setting that avoids it.
func checkNCCLWriteImmByteLen(e doctorEnv) check {
	const id = "nccl-write-imm-byte-len"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	m := s.Module("thunderbolt_ibverbs")
	if !m.Loaded {
		return skip(id, "thunderbolt_ibverbs is not loaded: which tree is unknown")
	}
	if _, has := m.Parameters[byteLenTreeParam]; has {
		return ok(id, "this thunderbolt_ibverbs (parameter "+byteLenTreeParam+": the pleite-gda-8099446 line) fills byte_len of write-with-immediate receive completions")
	}
	const what = "this thunderbolt_ibverbs leaves byte_len 0 in write-with-immediate receive completions (the hellas-main, hellas-gda-v2, pleite-gda and pleite-main trees do)"
	var set []string
	for _, v := range ncclByteLenSettings {
		if strings.TrimSpace(s.Env[v.name]) == v.value {
			set = append(set, v.name+"="+v.value)
		}
	}
	if len(set) > 0 {
		return fail(id, what+"; "+strings.Join(set, " and ")+" makes NCCL take a receive's size from byte_len: every receive would report 0 bytes",
			"unset "+strings.Join(names(set), " and ")+" (NCCL's default index-based matching reads the size from imm_data)")
	}
	return ok(id, what+"; NCCL's default reads the size from imm_data: keep NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME, NCCL_IB_OOO_RQ and NCCL_IB_RESILIENCY_PORT_FAILOVER unset")
}

// names strips "=value" from NAME=value words.
func names(set []string) []string {
	out := make([]string, len(set))
	for i, s := range set {
		out[i], _, _ = strings.Cut(s, "=")
	}
	return out
}

// checkNCCLFlushLoopback names NCCL's GPU Direct flush, which needs a QP
// connected to itself: NCCL 2.30 creates one per receive device when GPU
// Direct RDMA or dma-buf is usable and NCCL_GDR_FLUSH_DISABLE is not 1
// (NVIDIA/nccl src/transport/net_ib/connect.cc ncclIbAccept, flushEnabled)
// and posts an RDMA READ on it after each receive. thunderbolt_ibverbs has no
// local loopback: every QP's traffic leaves over its rail, and the other
// host's module looks the destination QP number up in its own table
// (hellas-main:kernel/ibdev.c:8911), where the flush QP does not exist, so
// the READ is dropped (data_rx_no_qp) and the flush ends in a retry error.
// (The usb4 bed cannot show it: both of its hosts share one module instance
// and one QP table, hellas-main:kernel/main.c:115.)
func checkNCCLFlushLoopback(e doctorEnv) check {
	const id = "nccl-gdr-flush-loopback"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	if strings.TrimSpace(s.Env["NCCL_GDR_FLUSH_DISABLE"]) == "1" {
		return ok(id, "NCCL_GDR_FLUSH_DISABLE=1: NCCL connects no QP to itself")
	}
	return ok(id, "thunderbolt_ibverbs has no local loopback, so NCCL's GPU Direct flush (a QP connected to itself, used with GPU Direct RDMA or dma-buf) cannot complete across two hosts: set NCCL_GDR_FLUSH_DISABLE=1 when NCCL uses GPU buffers")
}

// writeImmQueuedCounter is a debugfs summary counter only a module that
// queues every RDMA_WRITE_WITH_IMM for in-order delivery has: pleite-gda-8099446
// hands each one to its reorder list (kernel/ibdev.c:10712-10717) and counts it
// (data_rx_write_imm_reorder_buffered, kernel/debugfs.c:608). Delivered from
// there, a WRITE_WITH_IMM has its rkey looked up even when it carries no
// bytes (tbv_rx_deliver_reorder_write_locked, kernel/ibdev.c:9340-9344), so the
// 0-byte one NCCL posts with rkey 0 under NCCL_IB_ADAPTIVE_ROUTING=1 ends in a
// LOC_PROT_ERR receive completion. hellas-main, hellas-gda-v2, pleite-gda and
// pleite-main take an in-order WRITE_WITH_IMM directly and look an rkey up
// only for bytes (hellas-main:kernel/ibdev.c:8295-8305), and have no such
// counter. Seen on the bed: tests/usb4/ncclpattern.c --ar (docs/nccl-pattern.md).
const writeImmQueuedCounter = "data_rx_write_imm_reorder_buffered"

// checkNCCLAdaptiveRouting names NCCL_IB_ADAPTIVE_ROUTING=1 on a module that
// refuses the 0-byte RDMA_WRITE_WITH_IMM NCCL then posts after the data of
// every message above NCCL_IB_AR_THRESHOLD (NVIDIA/nccl
// src/transport/net_ib: the extra WR is zeroed, so its rkey and remote
// address are 0). NCCL turns adaptive routing on by default only on
// InfiniBand links; usb4 devices are RoCE, where it is off unless set.
func checkNCCLAdaptiveRouting(e doctorEnv) check {
	const id = "nccl-adaptive-routing"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	if !s.Module("thunderbolt_ibverbs").Loaded {
		return skip(id, "thunderbolt_ibverbs is not loaded: what it does with write-with-immediate is unknown")
	}
	ar := strings.TrimSpace(s.Env["NCCL_IB_ADAPTIVE_ROUTING"])
	on := ar != "" && ar != "0"
	const form = "the 0-byte RDMA_WRITE_WITH_IMM with rkey 0 that NCCL_IB_ADAPTIVE_ROUTING=1 posts after each large message"
	const fix = "unset NCCL_IB_ADAPTIVE_ROUTING or set NCCL_IB_ADAPTIVE_ROUTING=0 (NCCL's default on RoCE devices is off)"
	if !s.Debugfs.Present {
		if on {
			return warn(id, "NCCL_IB_ADAPTIVE_ROUTING="+ar+", and the thunderbolt_ibverbs debugfs summary is unreadable, so whether this module refuses "+form+" cannot be told (pleite-gda-8099446 does: LOC_PROT_ERR on the receive side)",
				fix+"; or run ibvinfo doctor as root with debugfs mounted")
		}
		return skip(id, "the thunderbolt_ibverbs debugfs summary is unreadable; NCCL_IB_ADAPTIVE_ROUTING is not set (off on RoCE)")
	}
	if _, queued := s.Debugfs.Counter(writeImmQueuedCounter); !queued {
		return ok(id, "this thunderbolt_ibverbs delivers write-with-immediate without an rkey lookup for a 0-byte one (no "+writeImmQueuedCounter+" counter): NCCL's adaptive-routing form is taken")
	}
	what := "this thunderbolt_ibverbs queues every write-with-immediate for in-order delivery (" + writeImmQueuedCounter + ", the pleite-gda-8099446 line) and refuses " + form
	if on {
		return fail(id, what+": NCCL_IB_ADAPTIVE_ROUTING="+ar+" stops the job with a local protection error at the first such message", fix)
	}
	return ok(id, what+"; NCCL_IB_ADAPTIVE_ROUTING is "+map[bool]string{true: "0", false: "unset (off on RoCE)"}[ar == "0"]+": keep it so")
}
