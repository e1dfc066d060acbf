//go:build !usb4front

package dataplane

/*
#include <stdlib.h>
#include "engine.h"
int usb4v_bench_post_poll(struct usb4v_qp *qp, struct usb4v_cq *cq, struct usb4v_ibv_send_wr *wr, long n);
int usb4v_bench_poll_empty(struct usb4v_cq *cq, long n, int fast);
int usb4v_bench_start_poll_empty(struct usb4v_cq *cq, struct usb4v_cq_cursor *c, long n);
int usb4v_rxe_poll_cq_fast_for_test(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
int usb4v_stress_post_threads(struct usb4v_qp *qp, struct usb4v_cq *cq, const struct usb4v_ibv_send_wr *tmpl,
			      int threads, long per);
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// postPollLoopC runs n post_send+poll_cq pairs of one signaled WR inside a
// single C call: the engine's cost without cgo crossings (the benchmarks'
// baseline).
func (qp *QP) postPollLoopC(cq *CQ, w SendWR, n int) error {
	qp.send.mu.Lock()
	defer qp.send.mu.Unlock()
	first := qp.send.grow(C.sizeof_struct_usb4v_ibv_send_wr, len(w.SGEs))
	c := (*C.struct_usb4v_ibv_send_wr)(first)
	*c = C.struct_usb4v_ibv_send_wr{wr_id: C.uint64_t(w.WrID), opcode: C.uint32_t(w.Opcode),
		send_flags: C.uint32_t(w.Flags | SendSignaled), num_sge: C.int(len(w.SGEs))}
	if len(w.SGEs) > 0 {
		s := unsafe.Slice((*C.struct_usb4v_ibv_sge)(qp.send.sges), len(w.SGEs))
		for i, g := range w.SGEs {
			s[i] = C.struct_usb4v_ibv_sge{addr: C.uint64_t(g.Addr), length: C.uint32_t(g.Length), lkey: C.uint32_t(g.LKey)}
		}
		c.sg_list = &s[0]
	}
	u := unsafe.Pointer(&c.wr)
	*(*uint64)(u) = w.RemoteAddr
	*(*uint32)(unsafe.Add(u, 8)) = w.RKey
	if rc := C.usb4v_bench_post_poll(qp.c, cq.c, c, C.long(n)); rc != 0 {
		return fmt.Errorf("post+poll loop: %w", unix.Errno(rc))
	}
	return nil
}

// pollEmptyLoopC polls the (empty) CQ n times inside one C call, through the
// rxe fast path (fast) or the generic usb4v_poll_cq.
func (cq *CQ) pollEmptyLoopC(n int, fast bool) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	f := C.int(0)
	if fast {
		f = 1
	}
	if rc := C.usb4v_bench_poll_empty(cq.c, C.long(n), f); rc != 0 {
		return fmt.Errorf("empty poll loop: %w", unix.Errno(rc))
	}
	return nil
}

// startPollEmptyLoopC runs n ibv_start_poll misses on the (empty) CQ inside
// one C call.
func (cq *CQ) startPollEmptyLoopC(n int) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k := cq.NewCursor()
	defer k.Free()
	if rc := C.usb4v_bench_start_poll_empty(cq.c, k.c, C.long(n)); rc != 0 {
		return fmt.Errorf("empty start_poll loop: %w", unix.Errno(rc))
	}
	return nil
}

// pollFast polls through the rxe fast path that cshim installs on rxe
// contexts, for the tests: it must behave as Poll on every backend.
func (cq *CQ) pollFast(wc []WC) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	n := C.usb4v_rxe_poll_cq_fast_for_test(cq.c, C.int(len(wc)), (*C.struct_usb4v_ibv_wc)(unsafe.Pointer(&wc[0])))
	if n < 0 {
		return 0, errnoErr("poll cq (fast path)", n)
	}
	return int(n), nil
}

// postThreadsC has threads C threads post per signaled copies of w on qp
// through usb4v_post_send, as application threads reach ibv_post_send
// (without PostSend's Go lock), polling cq when the queue is full, then
// polls every completion. The caller must not use qp meanwhile.
func (qp *QP) postThreadsC(cq *CQ, w SendWR, threads, per int) error {
	if len(w.SGEs) > 1 {
		return fmt.Errorf("post threads: %w", unix.EINVAL)
	}
	wr := (*C.struct_usb4v_ibv_send_wr)(C.calloc(1, C.sizeof_struct_usb4v_ibv_send_wr))
	sge := (*C.struct_usb4v_ibv_sge)(C.calloc(1, C.sizeof_struct_usb4v_ibv_sge))
	defer C.free(unsafe.Pointer(wr))
	defer C.free(unsafe.Pointer(sge))
	wr.opcode = C.uint32_t(w.Opcode)
	wr.send_flags = C.uint32_t(w.Flags)
	if len(w.SGEs) == 1 {
		*sge = C.struct_usb4v_ibv_sge{addr: C.uint64_t(w.SGEs[0].Addr), length: C.uint32_t(w.SGEs[0].Length), lkey: C.uint32_t(w.SGEs[0].LKey)}
		wr.sg_list = sge
		wr.num_sge = 1
	}
	u := unsafe.Pointer(&wr.wr)
	*(*uint64)(u) = w.RemoteAddr
	*(*uint32)(unsafe.Add(u, 8)) = w.RKey
	if rc := C.usb4v_stress_post_threads(qp.c, cq.c, wr, C.int(threads), C.long(per)); rc != 0 {
		return fmt.Errorf("post threads: %w", unix.Errno(rc))
	}
	return nil
}
