#!/usr/bin/env bash
# cshim/pyverbsvm.sh [USERLAND]: rdma-core's own pyverbs tests on a real kernel, one VM
# boot (tests/vm; kernel 6.1, Soft-RoCE; default userland bookworm = rdma-core 44), each
# selected test run through our provider (USB4VERBS_CLAIM_RXE=1, RDMAV_DRIVERS naming
# us) and then through the stock librxe in the same boot. The tests are the ones the
# userland's python3-pyverbs package ships (usr/share/doc/rdma-core/tests, which the
# harness's image leaves out, so they are copied in from the .deb), run by
# testdata/pyverbs_run.py, which tells them each rxe device's veth.
#   PYVERBS_TESTS  the unittest names to run (default: issue 31 item 13's three
#                  RDMA-CM multicast tests), e.g. 'test_rdmacm.CMTestCase.test_rdmacm_sync_traffic'
#   PYVERBS_DEV    the device (default rxe0, the harness's USB4VERBS_DEV0)
# Prints go-test-style lines pyverbs/<ours|librxe>/<test>; exit status non-zero when a
# test failed through ours (librxe's verdicts are the control and never fail the run).
#
# PYVERBS_SET=srq: every SRQ case of the userland's pyverbs tests (issue 35; SRQ_TESTS
# below, default userland sid: rdma-core 44 ships no test_srq.py), each run three ways in
# the same boot: through ours with rxe's kernel SRQ (pyverbs/ours/...), through ours with
# the provider's SRQ over rxe's kernel QPs (USB4VERBS_SRQ=provider: pyverbs/ours-provider-srq/...)
# and through librxe (pyverbs/librxe/...), one python process each, a line per test
# (pyverbs_run.py's PYVERBS_RESULT_PREFIX); then pyverbs/same/<test> says whether the
# provider SRQ's verdict is librxe's (PASS, or the same SKIP). PYVERBS_SRQ_WAYS narrows the
# ways (e.g. "ours-provider-srq"; CI's tier runs test_srq.py that way only, inside
# cshim/vmtest.sh's sid boot). Exit status non-zero when a test failed through ours or a
# verdict differs from librxe's.
set -euo pipefail

log() { printf '[cshim-pyverbsvm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

# shellcheck source=cshim/vmlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vmlib.sh"

# shellcheck source=cshim/pyverbslib.sh
. "$(dirname "${BASH_SOURCE[0]}")/pyverbslib.sh"

main() {
  local userland=${1:-} deb t
  [[ -n $userland ]] || { userland=bookworm; [[ ${PYVERBS_SET:-} == srq ]] && userland=sid; }
  local tests=${PYVERBS_TESTS:-"test_rdmacm.CMTestCase.test_rdmacm_async_multicast_traffic
test_rdmacm.CMTestCase.test_rdmacm_async_ex_multicast_traffic
test_rdmacm.CMTestCase.test_rdmacm_async_ex_leave_multicast_traffic"}
  local dev=${PYVERBS_DEV:-}
  vm_prepare cshim-pyverbsvm "the pyverbs tests"
  pyverbs_files "$userland"

  if [[ ${PYVERBS_SET:-} == srq ]]; then
    pyverbs_srq_guest "${dev:-\$USB4VERBS_DEV0}" "$PYVERBS_SRQ_TESTS" "${PYVERBS_SRQ_WAYS:-ours ours-provider-srq librxe}" \
      > "$work/pyverbs.sh"
  else
  {
    printf '#!/bin/sh\nrc=0\ndev=%s\n' "${dev:-\$USB4VERBS_DEV0}"
    printf 'echo "# pyverbs: kernel=$USB4VERBS_KERNEL userland=$USB4VERBS_USERLAND dev=$dev"\n'
    for t in $tests; do
      [[ $t =~ ^[A-Za-z0-9_.]+$ ]] || { log "not a test name: $t"; exit 2; }
      cat <<GUEST
for p in ours librxe; do
  if [ \$p = ours ]; then
    set -- env USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma
  else
    set -- env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS
  fi
  s=\$(date +%s)
  "\$@" timeout 300 python3 /opt/usb4verbs/pyverbs_run.py /opt/usb4verbs/tests --dev "\$dev" -v tests.$t > out.txt 2>&1
  r=\$?
  e=\$((\$(date +%s) - s))
  sed "s/^/    /" out.txt
  name=pyverbs/\$p/${t##*.}
  if [ \$r -eq 0 ] && grep -q "skipped" out.txt; then
    echo "--- SKIP: \$name (\${e}s)"
    [ \$p = ours ] && rc=1
  elif [ \$r -eq 0 ]; then
    echo "--- PASS: \$name (\${e}s)"
  else
    echo "--- FAIL: \$name (\${e}s)"
    [ \$p = ours ] && rc=1
  fi
done
GUEST
    done
    printf 'exit $rc\n'
  } > "$work/pyverbs.sh"
  fi

  VM_EXTRA_DEBS="python3 python3-pyverbs${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" vm_boot "$userland" "$work/pyverbs.sh"
}

main "$@"
