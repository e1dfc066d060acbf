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
set -euo pipefail

log() { printf '[cshim-pyverbsvm] %s\n' "$*" >&2; }

work=
trap '[[ -z $work ]] || rm -rf "$work"' EXIT

# shellcheck source=cshim/vmlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vmlib.sh"

# pyverbs_deb USERLAND: prints the path of the userland's python3-pyverbs .deb, fetched
# with the harness's private apt state for that suite (tests/vm/lib/fetch.sh).
pyverbs_deb() (
  VMCACHE="$CACHE/vm"
  REPO=$repo
  for f in common fetch; do
    # shellcheck source=/dev/null
    . "$work/harness/tests/vm/lib/$f.sh"
  done
  if [[ -z ${MIRROR:-} ]]; then MIRROR=$(host_mirror) || exit 1; fi
  UBUNTU_MIRROR=${UBUNTU_MIRROR:-}
  mkdir -p "$VMCACHE"
  exec {lockfd}>"$VMCACHE/.lock"
  flock "$lockfd"
  apt_use "$1"
  apt_fetch "$VMCACHE/debs/$1" python3-pyverbs
)

main() {
  local userland=${1:-bookworm} deb t
  local tests=${PYVERBS_TESTS:-"test_rdmacm.CMTestCase.test_rdmacm_async_multicast_traffic
test_rdmacm.CMTestCase.test_rdmacm_async_ex_multicast_traffic
test_rdmacm.CMTestCase.test_rdmacm_async_ex_leave_multicast_traffic"}
  local dev=${PYVERBS_DEV:-}
  vm_prepare cshim-pyverbsvm "the pyverbs tests"
  deb=$(pyverbs_deb "$userland")
  log "tests from $(basename "$deb")"
  dpkg-deb -x "$deb" "$work/deb"
  cp -a "$work/deb/usr/share/doc/rdma-core/tests" "$work/files/tests"
  find "$work/files/tests" -name '*.py.gz' -exec gunzip {} +
  [[ -f $work/files/tests/run_tests.py ]] || { log "no run_tests.py in $deb"; exit 1; }
  install -m755 "$repo/cshim/testdata/pyverbs_run.py" "$work/files/pyverbs_run.py"

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

  VM_EXTRA_DEBS="python3 python3-pyverbs${VM_EXTRA_DEBS:+ $VM_EXTRA_DEBS}" vm_boot "$userland" "$work/pyverbs.sh"
}

main "$@"
