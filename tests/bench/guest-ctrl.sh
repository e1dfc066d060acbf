#!/bin/sh
# tests/bench/guest-ctrl.sh: the control path's plan (issue 34 part 2; BENCH_PLAN=control,
# and a part of BENCH_PLAN=usb4, which runs it from guest-usb4.sh). Runs
# /opt/usb4verbs/ctrlbench (tests/bench/ctrlbench.c) through each side, interleaved per
# repetition with the order rotated, and prints
#   @@BENCH mode=M side=S tool=ctrl size=B qps=1 pl=1 rep=R metric=<verb>_ns value=V
# (the median of one process's iterations), and, from a run per side under strace -f
# with ctrlbench's markers (CTRLBENCH_MARK=1), the system calls of each verb on every
# thread of the process:
#   @@BENCH ... tool=ctrlsc size=B metric=sc_<verb> value=<calls per call, calling thread>
#   @@BENCH ... tool=ctrlsc size=B metric=sc_<verb>.<syscall> value=<the same, by name>
#   sco_<verb>, sco_<verb>.<syscall>: the same on the process's other threads
# Sides: on rxe (tests/vm) ours (opted in for rxe) and librxe; on the usb4 bed up
# (the module's C provider, tests/bench/upstream-provider.sh), ours, and up2 (the C
# provider again: the A/A band). base, where /opt/usb4verbs/base holds another build of
# ours (scripts/bench.sh BENCH_BASE_PROVIDER: the build before a change), is the
# before side of a before/after. oursP is ours with its Go part dlopened by ctrlbench
# before the first open (CTRLBENCH_PRELOAD): where the first open's time goes.
# Settings (bench.conf): BENCH_REPS, BENCH_CTRL_ITERS (30), BENCH_CTRL_SC_ITERS (10),
# BENCH_CTRL_SIDES.
# shellcheck disable=SC3043 # busybox ash has local
set -u
CONF=${BENCH_CONF:-/opt/usb4verbs/bench.conf}
# shellcheck source=/dev/null
[ -f "$CONF" ] && . "$CONF"
BIN=/opt/usb4verbs
REPS=${BENCH_REPS:-5}
ITERS=${BENCH_CTRL_ITERS:-30}
SC_ITERS=${BENCH_CTRL_SC_ITERS:-10}
WORK=/tmp/bench-ctrl
mkdir -p "$WORK"
if [ -n "${USB4VERBS_BACKEND_TREE:-}" ]; then
  MODE=usb4
  DEV0=$USB4VERBS_DEV0 DEV1=$USB4VERBS_DEV1 GID0=$USB4VERBS_GID0 GID1=$USB4VERBS_GID1
  SIDES=${BENCH_CTRL_SIDES:-up ours up2}
  CLAIM=""
else
  MODE=ctrl
  DEV0=${USB4VERBS_DEV0:-rxe0} DEV1=${USB4VERBS_DEV1:-rxe1}
  GID0=${USB4VERBS_GID0:-1} GID1=${USB4VERBS_GID1:-1}
  SIDES=${BENCH_CTRL_SIDES:-librxe ours}
  CLAIM="USB4VERBS_CLAIM_RXE=1"
fi
[ -f "$BIN/base/libusb4_rdma-rdmav34.so" ] && SIDES="$SIDES base"
SIDES="$SIDES oursP"

side_env() {
  case $1 in
    up | up2) echo "RDMAV_DRIVERS=$BIN/upstream/libusb4_rdma" ;;
    ours) echo "RDMAV_DRIVERS=$BIN/libusb4_rdma $CLAIM" ;;
    oursP) echo "RDMAV_DRIVERS=$BIN/libusb4_rdma $CLAIM CTRLBENCH_PRELOAD=$BIN/libusb4_rdma-go.so" ;;
    base) echo "RDMAV_DRIVERS=$BIN/base/libusb4_rdma $CLAIM" ;;
    librxe) echo "" ;;
    *) echo "RDMAV_DRIVERS=/nonexistent/$1" ;;
  esac
}

# On the bed both providers register the driver name usb4_rdma: the bed's driver
# file goes away while this runs (guest-usb4.sh), so RDMAV_DRIVERS alone picks one.
DRIVER_FILE=/etc/libibverbs.d/usb4_rdma.driver
moved=0
if [ "$MODE" = usb4 ] && [ -f "$DRIVER_FILE" ]; then mv "$DRIVER_FILE" "$WORK/driver.saved" && moved=1; fi

# sides_for REP: the sides rotated by REP, reversed on even REPs (guest-usb4.sh).
sides_for() {
  local n=0 s i out="" rest="" rev=""
  for s in $SIDES; do n=$((n + 1)); done
  i=$(( ($1 - 1) % n ))
  for s in $SIDES; do
    if [ "$i" -gt 0 ]; then rest="$rest $s"; i=$((i - 1)); else out="$out $s"; fi
  done
  out="$out $rest"
  [ $(($1 % 2)) -eq 1 ] && { echo $out; return; }
  for s in $out; do rev="$s $rev"; done
  echo $rev
}

# loaded_of LOG: which provider served, from ctrlbench's path= (both are named
# usb4_rdma on the bed).
loaded_of() {
  case $(sed -n 's/^@@BENCHINFO what=ctrlbench .*path=\([^ ]*\).*/\1/p' "$1") in
    */upstream/*) echo up ;;
    */base/*) echo base ;;
    *libusb4_rdma*) echo ours ;;
    *rxe*) echo rxe ;;
    *) echo none ;;
  esac
}

# sc_table TRACE PRE: strace -f's trace cut at ctrlbench's markers into the calls of
# each verb, in the order strace saw them (a call under way at a marker counts where
# it started), per call of the verb: on the thread that called it (sc_<verb>, and
# sc_<verb>.<syscall>) and on the process's other threads (sco_<verb>, sco_<verb>.<syscall>:
# the Go runtime's threads, woken by the call or running on their own).
sc_table() {
  awk -v pre="$2" '
    function name(line,   s) { s = line; sub(/^[0-9]+ +/, "", s); sub(/\(.*/, "", s); return s }
    /^[0-9]+ +<\.\.\. / { next }
    /^[0-9]+ +[a-z_0-9]+\(/ {
      if (index($0, "\"/@ctrl/-\"")) { cur = ""; next }
      if (match($0, /"\/@ctrl\/[a-z_]+\/[0-9]+"/)) {
        cur = substr($0, RSTART + 8, RLENGTH - 9); tid = $1; calls[cur]++; next
      }
      if (cur == "") next
      w = ($1 == tid) ? "sc" : "sco"
      tot[w SUBSEP cur]++; by[w SUBSEP cur SUBSEP name($0)]++
    }
    function out(w, k, n, extra,   kv, verb) {
      split(k, kv, "/"); verb = kv[1]; sub(/_(ns|us)$/, "", verb)
      printf "%s size=%s metric=%s_%s%s value=%.2f n=%d\n", pre, kv[2], w, verb, extra, n / calls[k], calls[k]
    }
    END {
      for (k in calls) { out("sc", k, tot["sc" SUBSEP k], ""); out("sco", k, tot["sco" SUBSEP k], "") }
      for (x in by) { split(x, ks, SUBSEP); out(ks[1], ks[2], by[x], "." ks[3]) }
    }' "$1"
}

echo "@@BENCHINFO mode=$MODE plan=control reps=$REPS iters=$ITERS sc_iters=$SC_ITERS dev0=$DEV0 dev1=$DEV1 sides=\"$SIDES\" kernel=$(uname -r) tree=${USB4VERBS_BACKEND_TREE:-rxe}"
for f in "$BIN"/*.so "$BIN"/upstream/*.so "$BIN"/base/*.so; do
  [ -e "$f" ] && echo "@@BENCHINFO file=${f#"$BIN"/} sha256=$(sha256sum "$f" | cut -c1-16)"
done

rep=1
while [ "$rep" -le "$REPS" ]; do
  for s in $(sides_for "$rep"); do
    # shellcheck disable=SC2046 # side_env is a word list
    env $(side_env "$s") taskset 2 "$BIN/ctrlbench" "$DEV0" "$GID0" "$DEV1" "$GID1" "$ITERS" \
      "mode=$MODE" "side=$s" "rep=$rep" > "$WORK/ctrl.log" 2>&1
    rc=$?
    ld=$(loaded_of "$WORK/ctrl.log")
    grep '^@@BENCH ' "$WORK/ctrl.log" | sed "s/^@@BENCH /@@BENCH loaded=$ld /"
    if [ $rc -ne 0 ]; then
      echo "@@BENCHFAIL mode=$MODE side=$s tool=ctrl rep=$rep rc=$rc why=ctrlbench-exit"
      grep -v '^@@BENCH' "$WORK/ctrl.log" | sed 's/^/# ctrl: /' | tail -n 5
    fi
  done
  rep=$((rep + 1))
done

if command -v strace > /dev/null; then
  rep=1
  while [ "$rep" -le 2 ]; do
    for s in $(sides_for "$rep"); do
      case $s in up2 | oursP) continue ;; esac
      # shellcheck disable=SC2046
      env $(side_env "$s") CTRLBENCH_MARK=1 taskset 2 strace -f -qq -o "$WORK/trace" "$BIN/ctrlbench" \
        "$DEV0" "$GID0" "$DEV1" "$GID1" "$SC_ITERS" "mode=$MODE" "side=$s" "rep=$rep" > "$WORK/ctrl.log" 2>&1
      rc=$?
      ld=$(loaded_of "$WORK/ctrl.log")
      if [ $rc -ne 0 ]; then
        echo "@@BENCHFAIL mode=$MODE side=$s tool=ctrlsc rep=$rep rc=$rc why=ctrlbench-exit-under-strace"
        grep -v '^@@BENCH' "$WORK/ctrl.log" | sed 's/^/# ctrlsc: /' | tail -n 5
        continue
      fi
      sc_table "$WORK/trace" "@@BENCH mode=$MODE side=$s loaded=$ld tool=ctrlsc qps=1 pl=1 rep=$rep"
    done
    rep=$((rep + 1))
  done
else
  echo "@@BENCHINFO ctrlsc=absent why=no-strace"
fi
[ "$moved" = 1 ] && mv "$WORK/driver.saved" "$DRIVER_FILE"
echo "@@BENCHINFO what=ctrl-done"
exit 0
