#!/usr/bin/env bash
# cshim/vmtest.sh [USERLAND]: runs cshim/testdata/vmcheck.c in the VM (tests/vm; kernel
# 6.1, Soft-RoCE) through the stock libibverbs of USERLAND (jammy = rdma-core 39,
# bookworm = 44, noble = 50, trixie = 56.1, resolute = 61, sid = 65; default bookworm)
# with our provider as the only one libibverbs loads by default for rxe: ECE and
# query_port_speed errnos, the dmabuf/create_cq_ex dummies, a real completion event with
# destroy_cq waiting for its ack while the event holder polls and re-arms, async port
# events, and failing ops' return values and errno against stock librxe in the same
# boot (librxe stays in the image without its .driver file; vmcheck runs it in a child
# with RDMAV_DRIVERS=rxe and our claim of rxe off); then cshim/testdata/srqresize.c
# (ibv_modify_srq growing an SRQ under traffic), and cshim/testdata/qpex.c
# (create_qp_ex with ibv_wr_*, memory windows: every case through our provider and
# through librxe in the same boot, rows compared; the output's table rows are what
# scripts/extended-verbs-doc.sh turns into docs/extended-verbs.md); then dma-buf MRs
# (tests/usb4/dmabuf.c through tests/usb4/guest-dmabuf.sh: the kernel's answer for rxe,
# through us and through librxe). On sid (rdma-core 65, whose pyverbs tests have
# test_srq.py) also pyverbs' test_srq.py through the provider's SRQ over rxe's kernel QPs
# (USB4VERBS_SRQ=provider; cshim/pyverbslib.sh, pyverbs/ours-provider-srq/*; issue 35's
# rxe check, ~40 s of this boot: VMTEST_PYVERBS_SRQ=0 leaves it out; every SRQ case of
# pyverbs, three ways, is `PYVERBS_SET=srq cshim/pyverbsvm.sh`).
# Prints go-test-style lines; exit status non-zero if a check failed.
set -euo pipefail

log() { printf '[cshim-vm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

# shellcheck source=cshim/vmlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vmlib.sh"
# shellcheck source=cshim/pyverbslib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pyverbslib.sh"

main() {
  local userland=${1:-bookworm}
  vm_prepare cshim-vm vmcheck
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$work/files/vmcheck" "$repo/cshim/testdata/vmcheck.c" -libverbs
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/srqresize" "$repo/cshim/testdata/srqresize.c" -libverbs
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/qpex" "$repo/cshim/testdata/qpex.c" -libverbs
  # dma-buf MRs (issue 21): rxe's answer through us and through librxe, same boot.
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$work/files/dmabuf" "$repo/tests/usb4/dmabuf.c" -libverbs
  install -m755 "$repo/tests/usb4/guest-dmabuf.sh" "$work/files/guest-dmabuf.sh"
  # The rxe opt-in (cshim/README.md).
  mkdir -p "$work/overlay/etc/usb4verbs"
  printf 'claim_rxe yes\n' > "$work/overlay/etc/usb4verbs/usb4_rdma.conf"

  cat > "$work/vmcheck.sh" <<'GUEST'
#!/bin/sh
rc=0
/opt/usb4verbs/vmcheck "$USB4VERBS_DEV0" "$USB4VERBS_DEV1" "$USB4VERBS_NETDEV1" || rc=1
/opt/usb4verbs/srqresize "$USB4VERBS_DEV0" "$USB4VERBS_GID0" || rc=1
/opt/usb4verbs/qpex "$USB4VERBS_DEV0" "$USB4VERBS_GID0" || rc=1
# The kernel's own rxe dma-buf op, if it has one (a static function shows in kallsyms).
echo "# kallsyms rxe_reg_user_mr_dmabuf: $(grep -c ' rxe_reg_user_mr_dmabuf' /proc/kallsyms)"
DMABUF_PREFIX="cshim/rxe-$(uname -r)" DMABUF_BASELINE=rxe DMABUF_BASELINE_NAME=librxe \
  sh /opt/usb4verbs/guest-dmabuf.sh || rc=1
# pyverbs' test_srq.py through the provider SRQ (sid only: below).
if [ -f /opt/usb4verbs/pyverbs-srq.sh ]; then sh /opt/usb4verbs/pyverbs-srq.sh || rc=1; fi
exit $rc
GUEST

  local debs=${VM_EXTRA_DEBS:-}
  if [[ $userland == sid && ${VMTEST_PYVERBS_SRQ:-1} == 1 ]]; then
    pyverbs_files "$userland"
    pyverbs_srq_guest "\$USB4VERBS_DEV0" "$(grep '^test_srq\.' <<< "$PYVERBS_SRQ_TESTS")" ours-provider-srq \
      > "$work/files/pyverbs-srq.sh"
    debs="python3 python3-pyverbs${debs:+ $debs}"
  fi

  # The boot's output is kept for the doc: scripts/extended-verbs-doc.sh reads qpex's rows.
  mkdir -p "$repo/build/qpex"
  VM_EXTRA_DEBS=$debs VM_EXCLUDE_GLOB="etc/libibverbs.d/rxe.driver" vm_boot "$userland" "$work/vmcheck.sh" |
    tee "$repo/build/qpex/rxe-$userland.out"
}

main "$@"
