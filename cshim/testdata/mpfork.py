#!/usr/bin/env python3
"""mpfork: Python multiprocessing with the fork start method over libibverbs
(issue 24), the shape of rdma-core's own pyverbs tests and of Python worker
pools. Driven through ctypes on the userland's libibverbs.so.1, so whatever
provider libibverbs picks serves it (cshim/lazyvm.sh runs it through ours and
through librxe in the same boot).

    mpfork.py LAYOUT.json PROVIDER

The parent opens rxe0 (USB4VERBS_DEV0) and allocates a PD, so its provider is
loaded and running; then a Pool(4) of fork()ed workers runs 8 tasks: each
opens rxe0 and rxe1 itself, connects an RC pair and moves 16 RDMA writes of
4 KiB, checking every byte. The parent allocates a PD again afterwards.
Prints go-test-style lines: --- PASS|FAIL: rel/mpfork-PROVIDER/<case>.
LAYOUT.json holds the offsets of the public structs (testdata/mplayout.c,
built against the same rdma-core release).
"""
import ctypes
import json
import multiprocessing
import os
import sys
import time

L = {}
V = None
c_vp = ctypes.c_void_p


def lib():
    v = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    for name, res, args in [
        ("ibv_get_device_list", ctypes.POINTER(c_vp), [ctypes.POINTER(ctypes.c_int)]),
        ("ibv_get_device_name", ctypes.c_char_p, [c_vp]),
        ("ibv_open_device", c_vp, [c_vp]),
        ("ibv_close_device", ctypes.c_int, [c_vp]),
        ("ibv_alloc_pd", c_vp, [c_vp]),
        ("ibv_dealloc_pd", ctypes.c_int, [c_vp]),
        ("ibv_reg_mr", c_vp, [c_vp, c_vp, ctypes.c_size_t, ctypes.c_int]),
        ("ibv_dereg_mr", ctypes.c_int, [c_vp]),
        ("ibv_create_cq", c_vp, [c_vp, ctypes.c_int, c_vp, c_vp, ctypes.c_int]),
        ("ibv_destroy_cq", ctypes.c_int, [c_vp]),
        ("ibv_create_qp", c_vp, [c_vp, c_vp]),
        ("ibv_modify_qp", ctypes.c_int, [c_vp, c_vp, ctypes.c_int]),
        ("ibv_destroy_qp", ctypes.c_int, [c_vp]),
        ("ibv_query_gid", ctypes.c_int, [c_vp, ctypes.c_uint8, ctypes.c_int, c_vp]),
        ("ibv_query_port", ctypes.c_int, [c_vp, ctypes.c_uint8, c_vp]),
    ]:
        f = getattr(v, name)
        f.restype, f.argtypes = res, args
    return v


def err(what):
    e = ctypes.get_errno()
    return "%s: %s" % (what, os.strerror(e) if e else "failed")


def put(buf, key, value, size):
    off = L[key]
    ctypes.memmove(ctypes.addressof(buf) + off, value.to_bytes(size, "little"), size)


def get(addr, key, size):
    return int.from_bytes(ctypes.string_at(addr + L[key], size), "little")


def provider(ctx):
    # struct verbs_device: ibv_device (664 bytes), then its ops, whose first
    # member is the provider's name.
    dev = ctypes.c_void_p.from_address(ctx).value
    ops = ctypes.c_void_p.from_address(dev + 664).value
    return ctypes.string_at(ctypes.c_void_p.from_address(ops).value).decode()


def open_dev(name):
    n = ctypes.c_int()
    lst = V.ibv_get_device_list(ctypes.byref(n))
    for i in range(n.value):
        if V.ibv_get_device_name(lst[i]).decode() == name:
            ctx = V.ibv_open_device(lst[i])
            if not ctx:
                raise RuntimeError(err("open " + name))
            return ctx
    raise RuntimeError("no device " + name)


class End:
    LEN = 4096

    def __init__(self, i):
        self.name = os.environ.get("USB4VERBS_DEV%d" % i, "rxe%d" % i)
        self.gid_index = int(os.environ.get("USB4VERBS_GID%d" % i, "1"))
        self.ctx = open_dev(self.name)
        port = ctypes.create_string_buffer(max(L["sizeof.ibv_port_attr"], 256))
        if V.ibv_query_port(self.ctx, 1, port):
            raise RuntimeError(err("query_port"))
        self.mtu = get(ctypes.addressof(port), "ibv_port_attr.active_mtu", 4)
        self.gid = ctypes.create_string_buffer(16)
        if V.ibv_query_gid(self.ctx, 1, self.gid_index, self.gid):
            raise RuntimeError(err("query_gid"))
        self.pd = V.ibv_alloc_pd(self.ctx) or self.fail("alloc_pd")
        self.buf = ctypes.create_string_buffer(self.LEN)
        self.mr = V.ibv_reg_mr(self.pd, ctypes.addressof(self.buf), self.LEN, L["ACCESS_RW"]) or self.fail("reg_mr")
        self.cq = V.ibv_create_cq(self.ctx, 32, None, None, 0) or self.fail("create_cq")
        ia = ctypes.create_string_buffer(L["sizeof.ibv_qp_init_attr"])
        put(ia, "ibv_qp_init_attr.send_cq", self.cq, 8)
        put(ia, "ibv_qp_init_attr.recv_cq", self.cq, 8)
        for f, v in [("max_send_wr", 16), ("max_recv_wr", 16), ("max_send_sge", 1), ("max_recv_sge", 1)]:
            put(ia, "ibv_qp_init_attr.cap." + f, v, 4)
        put(ia, "ibv_qp_init_attr.qp_type", L["IBV_QPT_RC"], 4)
        self.qp = V.ibv_create_qp(self.pd, ia) or self.fail("create_qp")
        self.qpn = get(self.qp, "ibv_qp.qp_num", 4)
        self.lkey = get(self.mr, "ibv_mr.lkey", 4)
        self.rkey = get(self.mr, "ibv_mr.rkey", 4)

    def fail(self, what):
        raise RuntimeError(err(what))

    def modify(self, fields, mask, what):
        a = ctypes.create_string_buffer(L["sizeof.ibv_qp_attr"])
        for key, (value, size) in fields.items():
            put(a, "ibv_qp_attr." + key, value, size)
        rc = V.ibv_modify_qp(self.qp, a, mask)
        if rc:
            raise RuntimeError("modify_qp %s: %s" % (what, os.strerror(rc)))

    def connect(self, peer, mtu):
        self.modify({"qp_state": (L["IBV_QPS_INIT"], 4), "port_num": (1, 1), "qp_access_flags": (L["ACCESS_RW"], 4)},
                    L["MASK_INIT"], "INIT")
        rtr = {"qp_state": (L["IBV_QPS_RTR"], 4), "path_mtu": (mtu, 4), "dest_qp_num": (peer.qpn, 4),
               "max_dest_rd_atomic": (1, 1), "min_rnr_timer": (12, 1), "ah_attr.is_global": (1, 1),
               "ah_attr.grh.dgid": (int.from_bytes(peer.gid.raw, "little"), 16),
               "ah_attr.grh.sgid_index": (self.gid_index, 1), "ah_attr.grh.hop_limit": (64, 1),
               "ah_attr.port_num": (1, 1)}
        self.modify(rtr, L["MASK_RTR"], "RTR")
        self.modify({"qp_state": (L["IBV_QPS_RTS"], 4), "timeout": (14, 1), "retry_cnt": (7, 1),
                     "rnr_retry": (7, 1), "max_rd_atomic": (1, 1)}, L["MASK_RTS"], "RTS")

    def op(self, key, proto):
        return proto(c_vp.from_address(self.ctx + L["ibv_context.ops." + key]).value)

    def close(self):
        V.ibv_destroy_qp(self.qp)
        V.ibv_destroy_cq(self.cq)
        V.ibv_dereg_mr(self.mr)
        V.ibv_dealloc_pd(self.pd)
        V.ibv_close_device(self.ctx)


POST = ctypes.CFUNCTYPE(ctypes.c_int, c_vp, c_vp, ctypes.POINTER(c_vp))
POLL = ctypes.CFUNCTYPE(ctypes.c_int, c_vp, ctypes.c_int, c_vp)


def task(k):
    """One pool task in a fork()ed worker: own contexts, RC pair, checked writes."""
    try:
        a, b = End(0), End(1)
        a.connect(b, min(a.mtu, b.mtu))
        b.connect(a, min(a.mtu, b.mtu))
        post, poll = a.op("post_send", POST), a.op("poll_cq", POLL)
        sge = ctypes.create_string_buffer(16)
        wr = ctypes.create_string_buffer(L["sizeof.ibv_send_wr"])
        wc = ctypes.create_string_buffer(L["sizeof.ibv_wc"])
        for w in range(16):
            v = (k * 37 + w * 11 + 1) & 0xFF
            ctypes.memset(a.buf, v, End.LEN)
            ctypes.memmove(sge, (ctypes.addressof(a.buf)).to_bytes(8, "little") + End.LEN.to_bytes(4, "little")
                           + a.lkey.to_bytes(4, "little"), 16)
            ctypes.memset(wr, 0, len(wr))
            put(wr, "ibv_send_wr.wr_id", w, 8)
            put(wr, "ibv_send_wr.sg_list", ctypes.addressof(sge), 8)
            put(wr, "ibv_send_wr.num_sge", 1, 4)
            put(wr, "ibv_send_wr.opcode", L["IBV_WR_RDMA_WRITE"], 4)
            put(wr, "ibv_send_wr.send_flags", L["IBV_SEND_SIGNALED"], 4)
            put(wr, "ibv_send_wr.wr.rdma.remote_addr", ctypes.addressof(b.buf), 8)
            put(wr, "ibv_send_wr.wr.rdma.rkey", b.rkey, 4)
            bad = c_vp()
            rc = post(a.qp, wr, ctypes.byref(bad))
            if rc:
                return "bad task %d: post_send %s" % (k, os.strerror(rc))
            end, n = time.time() + 10, 0
            while n == 0 and time.time() < end:
                n = poll(a.cq, 1, wc)
            if n != 1 or get(ctypes.addressof(wc), "ibv_wc.status", 4) != 0:
                return "bad task %d: write %d: poll %d status %d" % (k, w, n, get(ctypes.addressof(wc), "ibv_wc.status", 4))
            if b.buf.raw != bytes([v]) * End.LEN:
                return "bad task %d: write %d: data differs" % (k, w)
        prov = provider(a.ctx)
        a.close()
        b.close()
        return "ok pid %d provider %s" % (os.getpid(), prov)
    except Exception as e:  # noqa: BLE001 - reported as the task's verdict
        return "bad task %d: %s" % (k, e)


def result(prog, name, ok, note):
    print("--- %s: rel/%s/%s (0.00s)" % ("PASS" if ok else "FAIL", prog, name))
    print("    " + note)
    sys.stdout.flush()
    return ok


def main():
    global V, L
    L = json.load(open(sys.argv[1]))
    want = sys.argv[2]
    prog = "mpfork-" + ("ours" if want == "usb4_rdma" else want)
    V = lib()
    ok = True
    ctx = open_dev(os.environ.get("USB4VERBS_DEV0", "rxe0"))
    pd = V.ibv_alloc_pd(ctx)
    ok &= result(prog, "parent_open", pd is not None and provider(ctx) == want,
                 "parent: %s opened by %s, alloc_pd %s" % (os.environ.get("USB4VERBS_DEV0", "rxe0"), provider(ctx),
                                                          "ok" if pd else err("alloc_pd")))
    mp = multiprocessing.get_context("fork")
    with mp.Pool(4) as pool:
        res = pool.map_async(task, range(8)).get(300)
    good = [r for r in res if r.startswith("ok") and r.endswith("provider " + want)]
    pids = {r.split()[2] for r in good}
    ok &= result(prog, "pool_workers", len(good) == 8,
                 "%d of 8 tasks in %d fork()ed workers: own rxe0+rxe1, RC pair, 16 x 4 KiB writes checked%s"
                 % (len(good), len(pids), "" if len(good) == 8 else "; " + [r for r in res if r not in good][0]))
    pd2 = V.ibv_alloc_pd(ctx)
    ok &= result(prog, "parent_after_pool", pd2 is not None, "parent alloc_pd after the pool: %s"
                 % ("ok" if pd2 else err("alloc_pd")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
