#!/usr/bin/env bash
# tests/usb4/nccl-doc.sh OUT...: the table of NCCL's pattern for docs/nccl-pattern.md, from the
# output of usb4 boots that ran tests/usb4/guest-nccl.sh (tests/usb4/run.sh keeps it in
# build/usb4/stock/<tree>.out; a direct `USB4_TREE=<tree> tests/vm/run.sh` with
# VM_GUEST_SCRIPT=tests/usb4/guest-nccl.sh prints the same lines). Per tree: one row per case,
# our provider's verdict and the module's C provider's (the "cprovider| " lines of the same
# boot): PASS, SKIP with its reason, FAIL with what failed first. Markdown on stdout.
set -euo pipefail
for f in "$@"; do
  awk '
    function cell(v, n) { return v == "" ? "not run" : (n == "" ? v : v ": " n) }
    {
      side = "ours"; line = $0
      if (sub(/^cprovider\| /, "", line)) side = "cp"
      if (match(line, /^--- (PASS|FAIL|SKIP): usb4\/[^\/ ]+\/nccl\//)) {
        v = substr(line, 5, 4); sub(/:$/, "", v)
        rest = substr(line, RLENGTH + 1)
        name = rest; sub(/ .*/, "", name)
        why = rest; sub(/^[^ ]* ?/, "", why)
        if (why ~ /^\([0-9.]+s\)$/) why = ""
        gsub(/^\(|\)$/, "", why)
        tree = line; sub(/^--- [A-Z]+: usb4\//, "", tree); sub(/\/.*/, "", tree)
        if (!(name in seen)) { seen[name] = 1; order[++n] = name }
        res[side, name] = v; note[side, name] = why; last = side SUBSEP name
        next
      }
      # A FAIL keeps its first note that is not the completion count.
      if (line ~ /^    note: / && last != "" && res[last] == "FAIL" && !(last in failnote)) {
        t = line; sub(/^    note: /, "", t)
        if (t !~ /^[0-9]+ RECV_RDMA_WITH_IMM/ && t !~ /^QP states|^module counters/) { note[last] = t; failnote[last] = 1 }
      }
    }
    END {
      if (n == 0) exit
      printf "### %s\n\n| case | ours | C provider |\n|---|---|---|\n", tree
      for (i = 1; i <= n; i++) {
        k = order[i]
        a = cell(res["ours", k], note["ours", k]); b = cell(res["cp", k], note["cp", k])
        gsub(/\|/, "\\|", a); gsub(/\|/, "\\|", b)
        printf "| %s | %s | %s |\n", k, a, b
      }
      printf "\n"
    }' "$f"
done
