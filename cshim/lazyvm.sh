#!/usr/bin/env bash
# cshim/lazyvm.sh [USERLAND]: issue 13 on a real kernel, one VM boot (tests/vm; kernel
# 6.1, Soft-RoCE; default userland bookworm = rdma-core 44). Our package is installed as
# packaging lays it out (front, Go part, .driver file) beside the stock librxe, with no
# rxe opt-in in the config file. cshim/testdata/lazyvm.c then checks:
#   * a process that uses only librxe (rxe0 served by librxe, a PD allocated) has our
#     front mapped, but no Go part and one thread;
#   * a prefork server (USB4VERBS_CLAIM_RXE=1, RDMAV_DRIVERS naming us): the parent
#     lists without loading the Go part, 4 fork() children each open rxe0 and rxe1
#     through us and move 64 checked RDMA writes over an RC pair;
#   * issue 14's extended CQ verbs (cshim/testdata/cqex.c), run through librxe and then
#     through us on rxe0: our run's verdicts (cqex/CASE), and each case's outcome
#     compared between the two (cqex/same/CASE). The outcome lines go to
#     build/cqex/vm.out, from which cshim/cqexdoc.sh writes docs/extended-verbs.md's table;
#   * issue 24, fork() children of a process that opened the device: the reliability
#     suite's fork program (tests/reliability/fork.c: children and grandchildren open
#     rxe0/rxe1, RC traffic, every verb, rdma_cm between children) and Python
#     multiprocessing with the fork start method over ctypes (testdata/mpfork.py), each
#     through us and through librxe in this boot (fork-ours/*, fork-librxe/*,
#     mpfork-ours/*, mpfork-rxe/*); tests/reliability/forkdoc.sh writes the comparison
#     table in docs/reliability.md from build/cqex/vm.out (make docs).
# Prints go-test-style lines; exit status non-zero if a check failed.
set -euo pipefail

log() { printf '[cshim-lazyvm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

# shellcheck source=cshim/vmlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vmlib.sh"

main() {
  local userland=${1:-bookworm}
  vm_prepare cshim-lazyvm lazyvm
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/lazyvm" "$repo/cshim/testdata/lazyvm.c" -libverbs
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -o "$work/files/cqex" "$repo/cshim/testdata/cqex.c" -libverbs
  install -m644 "$repo/cshim/testdata/cqexcmp.awk" "$work/files/cqexcmp.awk"
  [[ -e /usr/include/rdma/rdma_cma.h ]] || { log "librdmacm-dev is needed to build tests/reliability/fork.c"; exit 1; }
  gcc -std=c11 -Wall -Wextra -Werror -O2 -g -pthread -o "$work/files/fork" "$repo/tests/reliability/fork.c" \
    -libverbs -lrdmacm
  gcc -std=c11 -Wall -Wextra -Werror -o "$work/mplayout" "$repo/cshim/testdata/mplayout.c"
  "$work/mplayout" > "$work/files/mplayout.json"
  install -m644 "$repo/cshim/testdata/mpfork.py" "$work/files/mpfork.py"

  cat > "$work/lazyvm.sh" <<GUEST
#!/bin/sh
rc=0
env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS /opt/usb4verbs/lazyvm librxe-only || rc=1
USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma /opt/usb4verbs/lazyvm prefork || rc=1
echo "# cqex: kernel=\$USB4VERBS_KERNEL userland=\$USB4VERBS_USERLAND"
env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS /opt/usb4verbs/cqex "\$USB4VERBS_DEV0" "\$USB4VERBS_GID0" librxe > cqex-librxe.out 2>&1
cat cqex-librxe.out
USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma /opt/usb4verbs/cqex "\$USB4VERBS_DEV0" "\$USB4VERBS_GID0" ours > cqex-ours.out 2>&1 || rc=1
cat cqex-ours.out
awk -f /opt/usb4verbs/cqexcmp.awk cqex-librxe.out cqex-ours.out || rc=1
echo "# fork: kernel=\$USB4VERBS_KERNEL userland=\$USB4VERBS_USERLAND"
USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma REL_PROVIDER=ours REL_PROG=fork-ours \
  timeout 900 /opt/usb4verbs/fork || rc=1
env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS REL_PROVIDER=librxe REL_PROG=fork-librxe \
  timeout 900 /opt/usb4verbs/fork || rc=1
USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma \
  timeout 600 python3 /opt/usb4verbs/mpfork.py /opt/usb4verbs/mplayout.json usb4_rdma || rc=1
env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS \
  timeout 600 python3 /opt/usb4verbs/mpfork.py /opt/usb4verbs/mplayout.json rxe || rc=1
exit \$rc
GUEST

  mkdir -p "$repo/build/cqex"
  printf '# cqex-host: commit=%s date=%s\n' "$(git -C "$repo" describe --always --dirty)" "$(date -u +%Y-%m-%d_%H:%M_UTC)" \
    > "$repo/build/cqex/vm.out.tmp"
  VM_EXTRA_DEBS="python3${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" vm_boot "$userland" "$work/lazyvm.sh" \
    | tee -a "$repo/build/cqex/vm.out.tmp"
  mv "$repo/build/cqex/vm.out.tmp" "$repo/build/cqex/vm.out"
}

main "$@"
