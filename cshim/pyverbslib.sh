# cshim/pyverbslib.sh: sourced by cshim/pyverbsvm.sh and cshim/vmtest.sh (after
# cshim/vmlib.sh's vm_prepare): rdma-core's pyverbs tests of a userland into the VM's
# files, and the guest script of their SRQ cases (issue 35). vm_prepare sets $repo,
# $work and $provdir; the sourcing script defines log().
# shellcheck shell=bash disable=SC2154

# pyverbs_deb USERLAND: prints the path of the userland's python3-pyverbs .deb, fetched
# with the harness's private apt state for that suite (tests/vm/lib/fetch.sh).
pyverbs_deb() (
  VMCACHE="$CACHE/vm"
  # shellcheck disable=SC2034 # read by tests/vm/lib
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

# The SRQ cases of pyverbs (rdma-core 65's tests, mlx5's left out): test_srq.py's; the
# parent domain's SRQ with an extended CQ; tag matching (a TM SRQ) and XRC (an XRC SRQ),
# which rxe and the provider SRQ refuse, so they SKIP as pyverbs skips on EOPNOTSUPP.
# shellcheck disable=SC2034 # used by the sourcing scripts
PYVERBS_SRQ_TESTS="test_srq.SrqTestCase.test_rc_srq_traffic
test_srq.SrqTestCase.test_resize_srq
test_srq.SrqTestCase.test_modify_srq_limit
test_parent_domain.ParentDomainTrafficTest.test_mem_align_srq_excq_rc_traffic
test_tag_matching.TMTest.test_tm_traffic
test_tag_matching.TMTest.test_tm_unexpected_tag
test_tag_matching.TMTest.test_tm_no_tag
test_tag_matching.TMTest.test_tm_rndv
test_cqex.CqExTestCase.test_xrc_traffic_cq_ex
test_qpex.QpExTestCase.test_qp_ex_xrc_send
test_qpex.QpExTestCase.test_qp_ex_xrc_send_imm
test_relaxed_ordering.RoTestCase.test_ro_xrc_traffic
test_atomic.AtomicTest.test_xrc_atomic_fetch_and_add
test_atomic.AtomicTest.test_xrc_atomic_cmp_and_swap
test_odp.OdpTestCase.test_odp_xrc_traffic"

# pyverbs_srq_guest DEV TESTS WAYS: the guest script that runs TESTS (unittest names
# below tests.) each way of WAYS (ours, ours-provider-srq, librxe) on DEV, one python
# process a way, a go-test line a test (stdout; cshim/pyverbsvm.sh describes it).
pyverbs_srq_guest() {
  cat <<GUEST
#!/bin/sh
rc=0
dev=$1
ways="$3"
tests="$(printf '%s' "$2" | tr '\n' ' ')"
cd /tmp || exit 1
echo "# pyverbs SRQ cases: kernel=\$USB4VERBS_KERNEL userland=\$USB4VERBS_USERLAND dev=\$dev ways=\$ways"
have=
for t in \$tests; do
  if grep -q "def \${t##*.}(" "/opt/usb4verbs/tests/\${t%%.*}.py" 2>/dev/null; then have="\$have tests.\$t"
  else for p in \$ways; do echo "--- SKIP: pyverbs/\$p/\${t##*.} (not in this userland's pyverbs tests)"; done; fi
done
[ -n "\$have" ] || exit 0
for p in \$ways; do
  case \$p in
    ours) set -- env USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma USB4VERBS_SRQ=kernel ;;
    ours-provider-srq) set -- env USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/$provdir/libusb4_rdma USB4VERBS_SRQ=provider ;;
    *) set -- env -u USB4VERBS_CLAIM_RXE -u RDMAV_DRIVERS -u USB4VERBS_SRQ ;;
  esac
  s=\$(date +%s)
  "\$@" PYVERBS_RESULT_PREFIX=pyverbs/\$p timeout 900 python3 /opt/usb4verbs/pyverbs_run.py /opt/usb4verbs/tests \\
    --dev "\$dev" -v \$have > out.\$p 2>&1
  r=\$?
  awk '/^--- /{print; n=1; next} n && /^    /{print} {n=0}' out.\$p
  echo "# pyverbs/\$p: exit \$r after \$((\$(date +%s) - s)) s"
  for t in \$have; do
    grep -q "^--- [A-Z]*: pyverbs/\$p/\${t##*.} " out.\$p && continue
    echo "--- FAIL: pyverbs/\$p/\${t##*.} (no result: exit \$r)"
    [ \$p = librxe ] || rc=1
  done
  [ \$p = librxe ] || ! grep -q '^--- FAIL' out.\$p || { rc=1; tail -n 30 out.\$p | sed 's/^/    | /'; }
done
# The provider SRQ's verdict against librxe's, where both ran.
both=0
case " \$ways " in *" ours-provider-srq "*) case " \$ways " in *" librxe "*) both=1 ;; esac ;; esac
[ \$both = 1 ] && for t in \$have; do
    n=\${t##*.}
    a=\$(grep -m1 "^--- [A-Z]*: pyverbs/ours-provider-srq/\$n " out.ours-provider-srq | cut -d' ' -f2)
    b=\$(grep -m1 "^--- [A-Z]*: pyverbs/librxe/\$n " out.librxe | cut -d' ' -f2)
    wa=\$(grep -A1 "^--- [A-Z]*: pyverbs/ours-provider-srq/\$n " out.ours-provider-srq | sed -n 's/^    //p')
    wb=\$(grep -A1 "^--- [A-Z]*: pyverbs/librxe/\$n " out.librxe | sed -n 's/^    //p')
    if [ "\$a" = PASS: ] && [ "\$b" = PASS: ]; then echo "--- PASS: pyverbs/same/\$n (passes through the provider SRQ and librxe)"
    elif [ "\$a" = SKIP: ] && [ "\$b" = SKIP: ] && [ "\$wa" = "\$wb" ]; then echo "--- PASS: pyverbs/same/\$n (skipped by both: \$wa)"
    else echo "--- FAIL: pyverbs/same/\$n (provider SRQ \$a \$wa; librxe \$b \$wb)"; rc=1
    fi
  done
exit \$rc
GUEST
}

# pyverbs_files USERLAND: the userland's pyverbs tests (usr/share/doc/rdma-core/tests of
# its python3-pyverbs, which the harness's image leaves out) into $work/files/tests, and
# cshim/testdata/pyverbs_run.py beside them; the image needs python3 and python3-pyverbs.
pyverbs_files() {
  local deb
  deb=$(pyverbs_deb "$1")
  log "pyverbs tests from $(basename "$deb")"
  rm -rf "$work/deb"
  dpkg-deb -x "$deb" "$work/deb"
  cp -a "$work/deb/usr/share/doc/rdma-core/tests" "$work/files/tests"
  find "$work/files/tests" -name '*.py.gz' -exec gunzip {} +
  [[ -f $work/files/tests/run_tests.py ]] || { log "no run_tests.py in $deb"; exit 1; }
  install -m755 "$repo/cshim/testdata/pyverbs_run.py" "$work/files/pyverbs_run.py"
}
