# cqexcmp.awk LIBRXE_OUT OURS_OUT (cshim/lazyvm.sh, in the guest): one
# go-test-style line per case of cshim/testdata/cqex.c, PASS when our
# provider's outcome line equals librxe's. Cases where librxe's behaviour is
# not the contract (below, with the reason) pass on a difference and say so.
BEGIN {
  known["end_poll_without_start"] = "librxe advances its consumer index on an end_poll without start_poll, so its CQ is no longer empty"
  known["comp_mask_unknown_bit"] = "librxe returns NULL without setting errno: rxe_create_cq_ex drops the EOPNOTSUPP of ibv_cmd_create_cq_ex"
  known["create_srq_ex"] = "librxe leaves ibv_srq.srq_context (on rdma-core 44 pd too) unset on create_srq_ex (ibv_create_srq sets them; we set them on both)"
  known["next_poll_end_poll"] = "after next_poll's ENOENT and end_poll, librxe of rdma-core 44 (not 65) hands out a phantom completion (wr_id 0) at the next start_poll though all 4 were read"
}
/^outcome / {
  prov = $2; name = $3; sub(/:$/, "", name)
  s = $0; sub(/^outcome [^ ]+ [^ ]+: /, "", s)
  if (!(name in seen)) { seen[name] = 1; order[++n] = name }
  got[prov, name] = s
}
END {
  fails = 0
  for (i = 1; i <= n; i++) {
    c = order[i]
    if (!(("librxe", c) in got) || !(("ours", c) in got)) {
      printf "--- FAIL: cqex/same/%s\n    missing from a run (librxe %s, ours %s)\n", c, (("librxe", c) in got) ? "ran" : "missing", (("ours", c) in got) ? "ran" : "missing"
      fails++
      continue
    }
    if (got["librxe", c] == got["ours", c]) { printf "--- PASS: cqex/same/%s\n", c; continue }
    if (c in known) { printf "--- PASS: cqex/same/%s\n    differs as expected: %s\n", c, known[c]; continue }
    printf "--- FAIL: cqex/same/%s\n    librxe: %s\n    ours:   %s\n", c, got["librxe", c], got["ours", c]
    fails++
  }
  exit fails ? 1 : 0
}
