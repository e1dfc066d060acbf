#!/bin/sh
# tests/reliability/guest.sh: the reliability suite inside the test VM (busybox sh).
# run.sh hands it to tests/vm/run.sh as VM_GUEST_SCRIPT, with the programs in
# /opt/usb4verbs/bin and the settings in /opt/usb4verbs/rel.conf (PROVIDER=ours|librxe,
# CHURN_CYCLES, REL_ONLY, TEST_FULL). Every program runs under `timeout`; a hang, a death
# by signal or a program that printed no result becomes a FAIL line of its own, and sanitizer reports
# (ThreadSanitizer, Go's race detector) become FAIL lines too. faults.sh runs last: it
# deletes rxe0.
# shellcheck disable=SC1091,SC2012
PROVIDER=ours CHURN_CYCLES=10000 TEST_FULL=0 REL_ONLY=
[ -r /opt/usb4verbs/rel.conf ] && . /opt/usb4verbs/rel.conf
export REL_PROVIDER=$PROVIDER CHURN_CYCLES
BIN=/opt/usb4verbs/bin
PROVDIR=/usr/lib/x86_64-linux-gnu/libibverbs
W=/tmp/rel
mkdir -p $W
FAILED=0

fail() { echo "--- FAIL: rel/$1 (0.00s)"; [ -n "$2" ] && echo "    $2"; FAILED=1; }
pass() { echo "--- PASS: rel/$1 (0.00s)"; [ -n "$2" ] && echo "    $2"; }

ibv=$(ls /usr/lib/x86_64-linux-gnu/libibverbs.so.1.* 2> /dev/null | head -n1)
echo "# rel: provider=$PROVIDER kernel=$(uname -r) rdma-core=$(echo "$ibv" | sed "s/.*\.so\.1\.[0-9]*\.//") userland=${USB4VERBS_USERLAND:-?} churn_cycles=$CHURN_CYCLES"

# The image must hold exactly the provider under test for rxe.
if [ "$PROVIDER" = ours ]; then
  if ls $PROVDIR/librxe-rdmav*.so > /dev/null 2>&1 || [ ! -e $PROVDIR/libusb4_rdma.so ]; then
    fail provider "want libusb4_rdma and no librxe in $PROVDIR: $(ls $PROVDIR | tr '\n' ' ')"
  else pass provider "libusb4_rdma serves rxe (librxe removed)"; fi
else
  if [ -e $PROVDIR/libusb4_rdma.so ] || ! ls $PROVDIR/librxe-rdmav*.so > /dev/null 2>&1; then
    fail provider "want librxe and no libusb4_rdma in $PROVDIR: $(ls $PROVDIR | tr '\n' ' ')"
  else pass provider "stock librxe serves rxe (control run)"; fi
fi

# prog NAME SECS CMD...: runs CMD, shows its output, and turns a hang, a signal or
# no result line into a FAIL line rel/NAME/process. Sets RC.
prog() {
  name=$1 secs=$2
  shift 2
  t0=$(cut -d' ' -f1 /proc/uptime)
  timeout "$secs" "$@" > "$W/$name.out" 2> "$W/$name.err"
  RC=$?
  cat "$W/$name.out"
  if [ $RC -ge 124 ] && [ -z "$PER_CASE" ]; then
    fail "$name/process" "exit $RC after $(awk -v a="$t0" '{ printf "%.0f", $1 - a }' /proc/uptime) s (124/143: killed by the ${secs} s timeout; 128+N: signal N)"
    tail -n 20 "$W/$name.err" | sed 's/^/    stderr| /'
  elif [ -z "$PER_CASE" ] && ! grep -q '^--- ' "$W/$name.out"; then
    fail "$name/process" "exit $RC without a result line"
    tail -n 20 "$W/$name.err" | sed 's/^/    stderr| /'
  fi
}

# sanitizer NAME: a ThreadSanitizer or Go race report in NAME's stderr is a failure.
sanitizer() {
  if grep -q -e 'WARNING: ThreadSanitizer' -e 'WARNING: DATA RACE' -e 'ThreadSanitizer: ' "$W/$1.err"; then
    fail "$1/sanitizer" "$(grep -c -e 'WARNING: ThreadSanitizer' -e 'WARNING: DATA RACE' "$W/$1.err") report(s); first:"
    grep -m1 -A 25 -e 'WARNING: ThreadSanitizer' -e 'WARNING: DATA RACE' -e 'ThreadSanitizer: ' "$W/$1.err" | sed 's/^/    | /'
  else
    pass "$1/sanitizer" "no sanitizer report"
  fi
}

# Bad input: one process per case, so a crash costs one case; a case's process that
# dies or hangs without its result line is that case's FAIL. (REL_ONLY=fork or srq skips it.)
PER_CASE=1
[ "$REL_ONLY" = fork ] || [ "$REL_ONLY" = srq ] || for c in $("$BIN/badinput" --list); do
  prog "badinput_$c" 60 "$BIN/badinput" --case "$c"
  if ! grep -q "^--- [A-Z]*: rel/badinput/$c " "$W/badinput_$c.out"; then
    fail "badinput/$c" "no result: exit $RC (124/143: hang killed by timeout; 128+N: signal N)"
    tail -n 5 "$W/badinput_$c.err" | sed 's/^/    stderr| /'
  elif [ $RC -ge 124 ]; then
    fail "badinput_$c/process" "exit $RC after the result (hang or crash in teardown)"
    tail -n 5 "$W/badinput_$c.err" | sed 's/^/    stderr| /'
  fi
done
PER_CASE=
# REL_ONLY=badinput: a focused run of the bad-input cases (one short boot).
[ "$REL_ONLY" = badinput ] && exit $FAILED

[ "$REL_ONLY" = srq ] || prog fork 900 "$BIN/fork"
# REL_ONLY=fork: the fork cases alone (one short boot).
[ "$REL_ONLY" = fork ] && exit $FAILED

# Shared receive queues (issue 35): tests/usb4/srq.c between rxe0 (the SRQ) and rxe1,
# through rxe's kernel SRQ (rel/srq/...), and for ours through the provider's SRQ as
# well (USB4VERBS_SRQ=provider: rel/srq_provider/..., and fork.c's SRQ cases as
# rel/fork_srq_provider/...), so the emulation the usb4 module needs runs over rxe's
# kernel QPs (docs/srq.md, "Provider SRQ on rxe").
# srq_run NAME ENV...: srq.c with ENV, its srq/<case> lines renamed rel/NAME/<case> (its
# step lines, "# <time> <step>", and its stderr only when a case failed or it hung or
# died); a hang, a signal or no result line is rel/NAME/process's FAIL, as prog's.
srq_run() {
  sname=$1
  shift
  timeout 300 env "$@" "$BIN/srq" "${USB4VERBS_DEV0:-rxe0}" "${USB4VERBS_GID0:-1}" \
    "${USB4VERBS_DEV1:-rxe1}" "${USB4VERBS_GID1:-1}" > "$W/$sname.raw" 2> "$W/$sname.err"
  RC=$?
  sed "s#^--- \([A-Z]*\): srq/#--- \1: rel/$sname/#" "$W/$sname.raw" > "$W/$sname.out"
  if [ $RC -ge 124 ] || ! grep -q '^--- ' "$W/$sname.out"; then
    cat "$W/$sname.out"
    fail "$sname/process" "exit $RC (124/143: killed by the 300 s timeout; 128+N: signal N; else no result line)"
    tail -n 20 "$W/$sname.err" | sed 's/^/    stderr| /'
  elif grep -q '^--- FAIL' "$W/$sname.out"; then
    cat "$W/$sname.out"
    tail -n 20 "$W/$sname.err" | sed 's/^/    stderr| /'
  else
    grep -v '^# [0-9]*\.[0-9]* ' "$W/$sname.out"
  fi
  grep -q '^--- FAIL' "$W/$sname.out" && FAILED=1
}
if [ -x "$BIN/srq" ]; then
  srq_run srq USB4VERBS_SRQ=kernel
  if [ "$PROVIDER" = ours ]; then
    srq_run srq_provider USB4VERBS_SRQ=provider
    # The provider's SRQ limits in query_device say the knob took (srq.c prints them).
    if grep -q '^# .*: max_srq 1024 max_srq_wr 16384 max_srq_sge 1$' "$W/srq_provider.out"; then
      pass srq_provider/query_device "$(grep -m1 '^# .*max_srq ' "$W/srq_provider.out" | sed 's/^# //') (the provider SRQ's limits)"
    else
      fail srq_provider/query_device "want the provider SRQ's limits: $(grep -m1 '^# .*max_srq ' "$W/srq_provider.out")"
    fi
    # ibv_create_srq_ex: a basic SRQ with a CQ (the provider's), queried, limited and used,
    # then the refusals, XRC and tag matching among them, with librxe's errnos (cqex.c).
    timeout 120 env CQEX_ONLY=create_srq_ex USB4VERBS_SRQ=provider "$BIN/cqex" "${USB4VERBS_DEV1:-rxe1}" \
      "${USB4VERBS_GID1:-1}" ours "${USB4VERBS_DEV0:-rxe0}" "${USB4VERBS_GID0:-1}" > "$W/cqex_srq.out" 2>&1
    RC=$?
    if grep -q '^--- PASS: cqex/create_srq_ex' "$W/cqex_srq.out"; then
      pass srq_provider/create_srq_ex "$(sed -n 's/^outcome ours create_srq_ex: //p' "$W/cqex_srq.out")"
    else
      fail srq_provider/create_srq_ex "exit $RC: $(grep -v '^outcome' "$W/cqex_srq.out" | tail -n 3 | tr '\n' ' ')"
    fi
    # UCX's rc_verbs, which makes an SRQ per interface, through the provider's SRQ: the
    # consumer the emulation is for (the module's UCX runs are the usb4 bed's UCX boot, not
    # in CI's tier). A short tag_bw as tests/stock/guest.sh runs it (ud_verbs for the
    # wire-up: rxe has UD), both sides with the knob.
    if command -v ucx_perftest > /dev/null; then
      ucxenv="USB4VERBS_SRQ=provider UCX_TLS=rc_verbs,ud_verbs:aux UCX_UD_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n"
      # shellcheck disable=SC2086 # word lists
      env $ucxenv UCX_NET_DEVICES="${USB4VERBS_DEV0:-rxe0}:1" timeout 120 ucx_perftest -p 13378 > "$W/ucx_srq.srv" 2>&1 &
      usp=$!
      n=0
      # 13378 = 0x3442 in LISTEN (0A).
      until grep -q ':3442 [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2> /dev/null || ! kill -0 $usp 2> /dev/null; do
        n=$((n + 1)); [ $n -ge 300 ] && break; sleep 0.1
      done
      # shellcheck disable=SC2086
      env $ucxenv UCX_NET_DEVICES="${USB4VERBS_DEV1:-rxe1}:1" timeout 120 ucx_perftest -p 13378 -t tag_bw -s 65536 \
        -n 500 "$USB4VERBS_IP0" > "$W/ucx_srq.cli" 2>&1
      ucrc=$?
      wait $usp
      usrc=$?
      if [ $ucrc = 0 ] && [ $usrc = 0 ] && grep -q 'Final:' "$W/ucx_srq.cli"; then
        pass srq_provider/ucx_perftest_tag_bw_rc_verbs "$(grep 'Final:' "$W/ucx_srq.cli" | tail -n 1 | tr -s ' ')"
      else
        fail srq_provider/ucx_perftest_tag_bw_rc_verbs "client exit $ucrc, server exit $usrc: $(tail -n 3 "$W/ucx_srq.srv" "$W/ucx_srq.cli" | tr '\n' ' ')"
      fi
    fi
    # The families (children and grandchildren with SRQs of their own, ~25 s) with TEST_FULL=1.
    prog fork_srq_provider 300 env REL_PROG=fork_srq_provider FORK_SRQ_ONLY=1 FORK_SRQ_FAMILIES="${TEST_FULL:-0}" \
      USB4VERBS_SRQ=provider "$BIN/fork"
  fi
fi
[ "$REL_ONLY" = srq ] && exit $FAILED
prog concurrency 300 "$BIN/concurrency"

# ThreadSanitizer on the test program, with the provider loaded in-process.
prog concurrency_tsan 300 env REL_PROG=concurrency_tsan \
  TSAN_OPTIONS="halt_on_error=0 exitcode=0 report_signal_unsafe=0" "$BIN/concurrency.tsan"
sanitizer concurrency_tsan
# The canary: a deliberate race, which ThreadSanitizer must report with the provider loaded.
timeout 120 env CONC_CANARY=1 TSAN_OPTIONS="halt_on_error=0 exitcode=0" "$BIN/concurrency.tsan" \
  > "$W/canary.out" 2> "$W/canary.err"
if grep -q 'WARNING: ThreadSanitizer: data race' "$W/canary.err" && grep -q 'device open ok' "$W/canary.out"; then
  pass concurrency_tsan/canary "ThreadSanitizer reported the deliberate race with the provider loaded"
else
  fail concurrency_tsan/canary "no ThreadSanitizer report for the deliberate race: $(cat "$W/canary.out") $(tail -n 3 "$W/canary.err")"
fi

# Go's race detector on the provider's Go side: the same program through a -race
# build of the Go part, libusb4_rdma-go.so (ours only), swapped in for this one run.
if [ "$PROVIDER" = ours ] && [ -f /opt/usb4verbs/race/libusb4_rdma-go.so ]; then
  cp $PROVDIR/libusb4_rdma-go.so $W/libusb4_rdma-go.so.plain
  cp /opt/usb4verbs/race/libusb4_rdma-go.so $PROVDIR/libusb4_rdma-go.so
  prog concurrency_race 400 env REL_PROG=concurrency_race GORACE="halt_on_error=0 exitcode=0" "$BIN/concurrency"
  cp $W/libusb4_rdma-go.so.plain $PROVDIR/libusb4_rdma-go.so
  sanitizer concurrency_race
fi

prog churn 900 "$BIN/churn"

BIN=$BIN sh /opt/usb4verbs/faults.sh || FAILED=1
exit $FAILED
