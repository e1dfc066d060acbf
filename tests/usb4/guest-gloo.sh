#!/bin/sh
# tests/usb4/guest-gloo.sh: gloo's ibverbs pattern (tests/usb4/gloopattern.c, issue 34) on the
# usb4 bed, in the guest (guest-smoke.sh runs it; tests/bench/guest-usb4.sh too): rank 0 on
# host 0's device, rank 1 on host 1's, through our provider and, when the boot carries it
# (/opt/usb4verbs/upstream/libusb4_rdma-rdmav34.so), through the module's C provider in the
# same boot, alternating run by run. Our runs print "--- PASS/FAIL: usb4/<tree>/gloo/<mode>[/<n>]";
# the C provider's are its baseline and print "cprovider| --- ...", which testsummary does
# not count. A failed run is placed, whichever provider ran it: the module's retransmits
# that it logged meanwhile (`native retransmit ... reason=1`: a send whose ACK did not come
# within the QP's ACK timeout, hellas-main:kernel/ibdev.c:3497-3519), the module's debugfs
# counters and tbloop's stats that moved (frames_no_buffer, drops, cancels).
# Settings (gloo.conf or the environment): GLOO_RUNS (1: per provider and mode), GLOO_MODES
# ("event"; "poll" is the same exchange with the CQ busy-polled), GLOO_CPROVIDER (1),
# GLOO_ITERS (10), GLOO_ELEMS (16384), GLOO_TIMEOUT_S (60), GLOO_QP_TIMEOUT (14, gloo's).
# Prints "# gloo summary: <provider> <mode> <passed>/<runs> ..." per provider and mode.
# shellcheck disable=SC3043 # busybox ash has local
tree=${USB4VERBS_BACKEND_TREE:?not in the usb4 mode}
BIN=/opt/usb4verbs
[ -x $BIN/gloopattern ] || exit 0
# shellcheck source=/dev/null
[ -r $BIN/gloo.conf ] && . $BIN/gloo.conf
runs=${GLOO_RUNS:-1}
modes=${GLOO_MODES:-event}
DBG=/sys/kernel/debug/thunderbolt_ibverbs
TBS=/sys/kernel/debug/tbloop/stats
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
UP=$BIN/upstream/libusb4_rdma
providers=ours
[ -f $UP-rdmav34.so ] && [ "${GLOO_CPROVIDER:-1}" != 0 ] && providers="ours cprovider"

# counters: "name value" lines of the module's debugfs files and tbloop's stats.
counters() {
  local f
  for f in "$DBG"/* "$TBS"; do
    [ -f "$f" ] || continue
    awk -v file="${f##*/}" '
      /^[A-Za-z0-9_]+: -?[0-9]+$/ { k = $1; sub(/:$/, "", k); sum[file "." k] += $2; next }
      { for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z0-9_]+=-?[0-9]+$/) { split($i, kv, "="); sum[file "." kv[1]] += kv[2] } }
      END { for (k in sum) print k, sum[k] }' "$f" 2>/dev/null
  done | sort
}

drv=/etc/libibverbs.d/usb4_rdma.driver
# one PROVIDER MODE N: one run; prints its lines, the placement of a failure; returns its status.
one() {
  local prov=$1 mode=$2 n=$3 name lp="" rc d0 out
  name="usb4/$tree/gloo/$mode"
  [ "$runs" -gt 1 ] && name="$name/$n"
  [ "$prov" = cprovider ] && lp="cprovider| "
  d0=$(dmesg | wc -l)
  counters > /tmp/gloo.before
  out=/tmp/gloo.$prov.$mode.$n.out
  if [ "$prov" = cprovider ]; then
    [ -f $drv ] && mv $drv /tmp/usb4_rdma.driver.saved
    set -- env RDMAV_DRIVERS=$UP
  elif [ ! -f $drv ] && [ -f $BIN/libusb4_rdma-rdmav34.so ]; then
    # tests/bench/guest-usb4.sh moved the bed's driver file away: ours by its path.
    set -- env RDMAV_DRIVERS=$BIN/libusb4_rdma
  else
    set -- env
  fi
  "$@" GLOOPATTERN_MODE="$mode" GLOOPATTERN_ITERS="${GLOO_ITERS:-10}" GLOOPATTERN_ELEMS="${GLOO_ELEMS:-16384}" \
    GLOOPATTERN_TIMEOUT_S="${GLOO_TIMEOUT_S:-60}" GLOOPATTERN_QP_TIMEOUT="${GLOO_QP_TIMEOUT:-14}" \
    timeout 400 $BIN/gloopattern "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$USB4VERBS_DEV1" "$USB4VERBS_GID1" \
    "${name#usb4/"$tree"/gloo/}" > "$out" 2>&1
  rc=$?
  [ -f /tmp/usb4_rdma.driver.saved ] && mv /tmp/usb4_rdma.driver.saved $drv
  counters > /tmp/gloo.after
  # The program names itself gloopattern/<label>: the bed's name instead.
  grep -v '^@@GLOO' "$out" | sed -e "s|gloopattern/[^ ]*|$name|" -e "s/^/$lp/"
  [ $rc -eq 124 ] && echo "$lp--- FAIL: $name (gloopattern killed after 400 s)"
  # Every run, passed or not: the module's retransmits and what moved of the counters that
  # place a stall (the module's retransmits, duplicate and late ACKs, RNR; tbloop's frames
  # without a buffer, dropped or canceled); a failed run also gets the module's log lines.
  local rt moved
  rt=$(dmesg | tail -n +$((d0 + 1)) | grep -c 'native retransmit')
  moved=$(awk 'NR == FNR { a[$1] = $2; next }
    ($1 in a) && $2 != a[$1] && $1 ~ /retransmit|retry|duplicate|late_ack|ack_miss|history_miss|rnr|no_buffer|dropped|canceled|timed_out|bad_|error|timeout/ {
      printf "%s%s %+d", sep, $1, $2 - a[$1]; sep = ", " }' /tmp/gloo.before /tmp/gloo.after)
  echo "$lp    note: placement: $rt 'native retransmit' lines in dmesg during the run; counters moved: ${moved:-none}"
  if [ $rc -ne 0 ]; then
    dmesg | tail -n +$((d0 + 1)) | grep -E 'native retransmit|retry|error|timeout' | head -n 3 | sed "s/^/$lp    note: dmesg: /"
    dmesg | tail -n +$((d0 + 1)) | grep 'native retransmit' | tail -n 2 | sed "s/^/$lp    note: dmesg: /"
  fi
  # The machine line last, after the run's notes (tests/bench/guest-usb4.sh reads them in this order).
  sed -n "s/^@@GLOO label=/@@GLOO provider=$prov tree=$tree label=/p" "$out"
  return $rc
}

failed=0
for mode in $modes; do
  for prov in $providers; do eval "pass_${prov}=0"; done
  n=1
  while [ "$n" -le "$runs" ]; do
    # Alternate which provider goes first, run by run.
    order=$providers
    [ $((n % 2)) -eq 0 ] && [ "$providers" = "ours cprovider" ] && order="cprovider ours"
    for prov in $order; do
      if one "$prov" "$mode" "$n"; then
        eval "pass_${prov}=\$((pass_${prov} + 1))"
      elif [ "$prov" = ours ]; then
        failed=1
      fi
    done
    n=$((n + 1))
  done
  for prov in $providers; do
    eval "p=\$pass_${prov}"
    # shellcheck disable=SC2154 # p is set by the eval
    echo "# gloo summary: $prov $mode $p/$runs passed (tree $tree, $(uname -r))"
  done
done
[ $failed -eq 0 ]
