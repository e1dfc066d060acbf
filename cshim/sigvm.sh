#!/usr/bin/env bash
# cshim/sigvm.sh [USERLAND]: issue 22 on a real kernel, one VM boot (tests/vm; kernel
# 6.1, Soft-RoCE; default userland bookworm = rdma-core 44, qperf 0.4.11 from Debian).
# Our package is installed as packaging lays it out beside the stock librxe; each case
# runs once through librxe and once through ours (USB4VERBS_CLAIM_RXE=1, RDMAV_DRIVERS
# naming us) in the same boot:
#   * qperf: server `qperf -lp PORT` pinned to vCPU 0 on rxe0, client pinned to vCPU 1
#     on rxe1 (`-li rxe1:1 -ri rxe0:1 -t 2 TEST quit`), every rc/uc/ud test of qperf's
#     list, the rc ones also over rdma_cm (`-cm1`);
#   * cshim/testdata/sighazard.c: application signal handlers without SA_ONSTACK,
#     alarm()-timed loops and siglongjmp-ing threads while threads run control verbs
#     and RC writes (each mode pinned to one CPU, and `alrm` also unpinned).
# Each case prints `--- PASS|FAIL: sig/<provider>/<case>` (ours fails on any Go
# runtime fatal error in its output, on a hang, or when its outcome differs from
# librxe's) and `--- PASS|FAIL: sig/same/<case>`. The lines go to build/sig/vm.out,
# from which cshim/sigdoc.sh writes docs/signals.md's table. SIG_CASES (a grep -E
# pattern on the case names, e.g. 'qperf/rc_rdma_read_bw') runs a subset.
set -euo pipefail

log() { printf '[cshim-sigvm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

# shellcheck source=cshim/vmlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vmlib.sh"

main() {
  local userland=${1:-bookworm}
  vm_prepare cshim-sigvm sighazard
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/sighazard" "$repo/cshim/testdata/sighazard.c" -libverbs -lpthread
  install -m755 "$repo/cshim/testdata/sigguest.sh" "$work/sigguest.sh"
  sed -i "s|@PROVDIR@|$provdir|; s~@SIG_CASES@~${SIG_CASES:-}~" "$work/sigguest.sh"

  mkdir -p "$repo/build/sig"
  printf '# sig-host: commit=%s date=%s\n' "$(git -C "$repo" describe --always --dirty)" "$(date -u +%Y-%m-%d_%H:%M_UTC)" \
    > "$repo/build/sig/vm.out.tmp"
  local rc=0
  VM_EXTRA_DEBS="qperf${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" VM_TIMEOUT=${VM_TIMEOUT:-2400} \
    vm_boot "$userland" "$work/sigguest.sh" | tee -a "$repo/build/sig/vm.out.tmp" || rc=$?
  # Kept with failures too: the doc shows them.
  mv "$repo/build/sig/vm.out.tmp" "$repo/build/sig/vm.out"
  return "$rc"
}

main "$@"
