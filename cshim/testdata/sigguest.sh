#!/bin/sh
# Guest side of cshim/sigvm.sh (busybox sh). SIG_CASES, a grep -E pattern, selects cases.
ours="USB4VERBS_CLAIM_RXE=1 RDMAV_DRIVERS=/@PROVDIR@/libusb4_rdma"
fatal='fatal error:|^runtime: |SIGABRT|unexpected return pc|goroutine [0-9]+ .*\[|Aborted'
rc=0
port=18600
echo "# sig: kernel=$USB4VERBS_KERNEL userland=$USB4VERBS_USERLAND qperf=$(qperf --version 2>&1 | head -n1 | tr ' ' '_')"

SIG_CASES=${SIG_CASES:-'@SIG_CASES@'}
want() { [ -z "$SIG_CASES" ] || echo "$1" | grep -Eq "$SIG_CASES"; }

# verdict PROV CASE OUTCOME SECONDS OUTFILE: prints the case's lines; ours fails on a Go
# fatal error or when the outcome differs from librxe's (kept in librxe.<case>).
verdict() {
  prov=$1 c=$2 outcome=$3 secs=$4 f=$5
  k=$(echo "$c" | tr '/' '_')
  echo "outcome $prov $c: $outcome"
  res=PASS note=
  if grep -Eq "$fatal" "$f"; then
    res=FAIL note="Go runtime fatal error: $(grep -Em1 "$fatal" "$f")"
  elif [ "$prov" = ours ] && [ "$outcome" != "$(cat "librxe.$k" 2>/dev/null)" ]; then
    res=FAIL note="librxe: $(cat "librxe.$k" 2>/dev/null)"
  fi
  [ "$prov" = librxe ] && echo "$outcome" > "librxe.$k"
  echo "--- $res: sig/$prov/$c (${secs}s)"
  [ -n "$note" ] && echo "    note: $note"
  if [ $res = FAIL ]; then
    rc=1
    tail -n 30 "$f" | sed 's/^/    | /'
  fi
  if [ "$prov" = ours ]; then
    if [ "$outcome" = "$(cat "librxe.$k" 2>/dev/null)" ]; then s=PASS; else s=FAIL; fi
    echo "--- $s: sig/same/$c (0.00s)"
  fi
}

# qperf_case PROV CASE ARGS...: server on rxe0 (vCPU 0), client on rxe1 (vCPU 1).
qperf_case() {
  prov=$1 c=$2; shift 2
  port=$((port + 1))
  penv=; [ "$prov" = ours ] && penv=$ours
  t0=$(date +%s)
  env $penv taskset 1 timeout 90 qperf -lp $port > srv.out 2>&1 &
  spid=$!
  sleep 1
  env $penv taskset 2 timeout 60 qperf "$USB4VERBS_IP0" -lp $port -li "$USB4VERBS_DEV1:1" -ri "$USB4VERBS_DEV0:1" \
    -t 2 "$@" quit > cli.out 2>&1
  crc=$?
  # The server exits on the client's quit (qperf's own server may crash at its exit,
  # with either provider: not ours to judge, its output is still checked for Go).
  # After the non-cm tests it stays in accept with either provider: 2 s, then it is
  # killed (10 s of waiting made 20 cases cost 12 s each).
  i=0; while kill -0 $spid 2>/dev/null && [ $i -lt 10 ]; do sleep 0.2; i=$((i + 1)); done
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  t1=$(date +%s)
  { echo "client (exit $crc):"; cat cli.out; echo "server:"; cat srv.out; } > case.out
  # A bw of 0 is not an outcome of its own: under TCG qperf's rc_rdma_read_bw and
  # rc_bi_bw report 0 with either provider at random (the figure is in the note).
  if [ $crc -eq 0 ] && grep -Eq '(bw|latency|msg_rate) +=' cli.out; then
    outcome=ok
  elif [ $crc -eq 124 ]; then
    outcome="timeout (hang)"
  else
    # The first line that is not blank, a test name ("ud_bw:") or a warning.
    # Whichever side failed first reports it; the client prefixes the server's
    # report with "server: ", and that report may arrive empty: then the server's
    # own output has it.
    outcome=$(grep -Ev '^ *$|^[a-z_]+: *$|^warning: ' cli.out | grep -Ev "$fatal" | head -n1 | sed 's/^server: //')
    [ -n "$outcome" ] || outcome=$(grep -Ev '^ *$|^[a-z_]+: *$|^warning: ' srv.out | grep -Ev "$fatal" | head -n1)
    [ -n "$outcome" ] || outcome="exit $crc"
    [ $crc -ge 128 ] && outcome="killed by signal $((crc - 128))"
  fi
  echo "    cmd: qperf $USB4VERBS_IP0 -lp PORT -li $USB4VERBS_DEV1:1 -ri $USB4VERBS_DEV0:1 -t 2 $* quit"
  fig=$(grep -E '(bw|latency|msg_rate) +=' cli.out | head -n1 | tr -s ' ')
  [ -n "$fig" ] && echo "    note: $prov:$fig"
  verdict "$prov" "$c" "$outcome" $((t1 - t0)) case.out
}

hazard_case() {
  prov=$1 c=$2 pin=$3 mode=$4
  penv=; [ "$prov" = ours ] && penv=$ours
  t0=$(date +%s)
  if [ "$pin" = pinned ]; then
    env $penv taskset 1 timeout 300 /opt/usb4verbs/sighazard "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$mode" > case.out 2>&1
  else
    env $penv timeout 300 /opt/usb4verbs/sighazard "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$mode" > case.out 2>&1
  fi
  hrc=$?
  t1=$(date +%s)
  outcome=$(sed -n "s/^outcome $mode: //p" case.out | head -n1)
  [ $hrc -eq 124 ] && outcome="timeout (hang)"
  [ $hrc -ge 128 ] && [ $hrc -ne 124 ] && outcome="killed by signal $((hrc - 128))"
  [ -n "$outcome" ] || outcome="exit $hrc"
  echo "    cmd: $( [ "$pin" = pinned ] && echo 'taskset 1 ')sighazard $USB4VERBS_DEV0 GID $mode"
  grep '^hazard ' case.out | sed 's/^/    note: /'
  verdict "$prov" "$c" "$outcome" $((t1 - t0)) case.out
}

# The issue's table first, then the rest of qperf's rc, uc and ud tests.
QPERF="rc_rdma_read_bw:-cm1 rc_compare_swap_mr:-cm1 ud_bw: rc_rdma_write_poll_lat:-cm1 uc_rdma_write_lat:"
for t in rc_bi_bw rc_bw rc_lat rc_rdma_read_lat rc_rdma_write_bw rc_rdma_write_lat rc_fetch_add_mr \
         ver_rc_compare_swap ver_rc_fetch_add; do
  QPERF="$QPERF $t:-cm1"
done
# rc_rdma_read_bw again with CQ polling instead of completion events, verbose.
QPERF="$QPERF rc_rdma_read_bw:-cm1_-cp1_-v"
for t in rc_bw rc_lat rc_rdma_write_poll_lat uc_bi_bw uc_bw uc_lat uc_rdma_write_bw uc_rdma_write_poll_lat \
         ud_bi_bw ud_lat; do
  QPERF="$QPERF $t:"
done

for tc in $QPERF; do
  t=${tc%%:*} a=${tc#*:}
  c=qperf/$t${a:+_$a}
  a=$(echo "$a" | tr '_' ' ')
  want "$c" || continue
  for prov in librxe ours; do qperf_case $prov "$c" $a $t; done
done

for m in alrm:pinned alrm:free int-usr1:pinned qperf:pinned alarm-loop:pinned chld-prof:pinned jump:pinned cost:free; do
  mode=${m%%:*} pin=${m#*:}
  c=hazard/$mode${pin:+_$pin}
  want "$c" || continue
  for prov in librxe ours; do hazard_case $prov "$c" $pin $mode; done
done
exit $rc
