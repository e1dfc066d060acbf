#!/bin/sh
# tests/bench/guest.sh: the guest half of `make bench` (scripts/bench.sh runs it in
# the VM through tests/vm/run.sh as VM_GUEST_SCRIPT). Runs perftest and the micro
# benchmark through two providers on the same rxe0/rxe1, interleaved per repetition,
# and prints one machine-readable line per figure:
#   @@BENCH mode=M side=S loaded=L tool=T size=B qps=Q pl=P rep=R metric=K value=V
#   @@BENCHFAIL / @@BENCHSKIP / @@BENCHINFO lines for failures, skips and context.
# side=ours is the candidate (its environment is CAND_ENV), side=librxe the baseline
# (no environment: libibverbs' default choice, Debian's librxe). In an A/A run
# (mode=aa) CAND_ENV is empty, so both sides are librxe and every ratio should be
# 1.00 +- noise. loaded= is what /proc/<server>/maps shows: usb4_rdma when
# libusb4_rdma is mapped (libibverbs also maps librxe then: it loads every provider),
# rxe when only librxe is.
# Settings: /opt/usb4verbs/bench.conf (written by scripts/bench.sh); the harness's
# USB4VERBS_DEV0/1, GID0/1 and IP0 name the devices.
# shellcheck disable=SC3043 # busybox ash has local
set -u
CONF=${BENCH_CONF:-/opt/usb4verbs/bench.conf}
# shellcheck source=/dev/null
[ -f "$CONF" ] && . "$CONF"
MODE=${BENCH_MODE:-aa}
REPS=${BENCH_REPS:-5}
CAND_ENV=${CAND_ENV:-}
# Stop starting new cases after this many seconds, so the boot ends inside the
# harness's timeout with the results so far (the report flags a truncated run).
DEADLINE_S=${BENCH_DEADLINE_S:-1440}
# An empty tool list (set but empty) runs none of that kind.
LAT_TOOLS=${BENCH_LAT_TOOLS-ib_write_lat ib_send_lat ib_read_lat}
BW_TOOLS=${BENCH_BW_TOOLS-ib_write_bw ib_send_bw ib_read_bw}
RATE_TOOLS=${BENCH_RATE_TOOLS-ib_write_bw ib_send_bw ib_read_bw}
LAT_SIZES=${BENCH_LAT_SIZES:-2 32 512 8192 65536}
BW_SIZES=${BENCH_BW_SIZES:-64 1024 16384 1048576}
BW_QPS=${BENCH_BW_QPS:-1 4}
# With 4 QPs, 1 MiB messages ran into rxe retry storms on 6.1 under TCG with a loaded
# host (ib_read_bw 0.67 MB/s, a minute per run; librxe's ib_send_bw hung): several
# QPs stop at 256 KiB so that the boot stays within its budget.
BW_MULTI_QP_SIZES=${BENCH_BW_MULTI_QP_SIZES:-64 1024 16384 262144}
POST_LIST=${BENCH_POST_LIST:-16}
MICRO_ITERS=${BENCH_MICRO_ITERS:-2000}
DEV0=${USB4VERBS_DEV0:-rxe0} DEV1=${USB4VERBS_DEV1:-rxe1}
GID0=${USB4VERBS_GID0:-1} GID1=${USB4VERBS_GID1:-1}
IP0=${USB4VERBS_IP0:-10.11.0.1}
BIN=/opt/usb4verbs
WORK=/tmp/bench
mkdir -p "$WORK"
PORT=18600

now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
elapsed() { awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }

# side_env SIDE: the environment words for SIDE's processes.
side_env() { [ "$1" = ours ] && echo "$CAND_ENV"; return 0; }

# Iteration counts: each perftest run costs ~2 s of process start and connection
# setup under TCG whatever its size, so the measured part is kept to about a second.
# Latency: t_typical is perftest's median, a few hundred exchanges suffice (64 KiB
# takes ~8 ms per exchange, so 30 there). Bandwidth: about 8 MiB per run, 8..1000 messages; with
# -q 4 perftest's -n is per QP, so it is divided by 4.
lat_iters() {
  if [ "$1" -le 2048 ]; then echo 300; elif [ "$1" -le 8192 ]; then echo 100; else echo 30; fi
}
bw_iters() {
  local n=$((8388608 / $1))
  [ "$n" -gt 1000 ] && n=1000
  n=$((n / $2))
  [ "$n" -lt 8 ] && n=8
  echo "$n"
}

# wait_listen PORT PID: until PID listens on TCP PORT (perftest's server opens the
# device first, then listens; its client does not retry connecting).
wait_listen() {
  local hex i=0
  hex=$(printf '%04X' "$1")
  while [ $i -lt 400 ]; do
    grep -q ":$hex 00000000:0000 0A" /proc/net/tcp 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
    i=$((i + 1))
  done
  return 1
}

# loaded_by PID: which providers PID has mapped.
loaded_by() {
  local l=""
  grep -q libusb4_rdma "/proc/$1/maps" 2>/dev/null && l=usb4_rdma
  grep -q librxe "/proc/$1/maps" 2>/dev/null && l="${l:+$l+}rxe"
  echo "${l:-none}"
}

# stop PID: let a server finish on its own for up to 5 s, then kill it.
stop() {
  local i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# show_errors ROLE FILE: the lines of a failed run's output that say what went wrong
# (perftest prints its errors between its tables), else its last lines.
show_errors() {
  if grep -qiE 'err|fail|couldn|unable|unsupported|invalid' "$2"; then
    grep -iE 'err|fail|couldn|unable|unsupported|invalid' "$2" | tail -n 4 | sed "s/^/# $1: /"
  else
    tail -n 3 "$2" | sed "s/^/# $1: /"
  fi
}

FAILS=""
# A side that failed a tool three times is not run for that tool again: a broken
# data path must not eat the whole boot in timeouts. (librxe itself fails now and
# then at 1 MiB with 4 QPs when the host is overloaded: rxe retries time out.)
fail_count() { echo "$FAILS" | tr ' ' '\n' | grep -cx "$1"; }
note_fail() { FAILS="$FAILS $1"; }
skipped() { [ "$(fail_count "$1")" -ge 3 ]; }

# perf SIDE TOOL SIZE QPS PL REP KIND: one server/client run; prints @@BENCH lines.
perf() {
  local side="$1" tool="$2" size="$3" qps="$4" pl="$5" rep="$6" kind="$7" env n extra spid rc loaded
  local tag="side=$side tool=$tool size=$size qps=$qps pl=$pl rep=$rep"
  if skipped "$side/$tool"; then
    echo "@@BENCHSKIP mode=$MODE $tag why=failed-3-times"
    return
  fi
  env=$(side_env "$side")
  case $kind in
    lat) n=$(lat_iters "$size"); extra="" ;;
    bw) n=$(bw_iters "$size" "$qps"); extra="-q $qps" ;;
    rate) n=8000; extra="-q $qps --post_list=$pl" ;;
  esac
  PORT=$((PORT + 1)); [ $PORT -gt 19500 ] && PORT=18601
  # shellcheck disable=SC2086 # env and extra are word lists
  env $env taskset 1 "$tool" -d "$DEV0" -x "$GID0" -s "$size" -n "$n" -F -p $PORT $extra \
    > "$WORK/srv.log" 2>&1 &
  spid=$!
  if ! wait_listen $PORT $spid; then
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    echo "@@BENCHFAIL mode=$MODE $tag rc=server why=server-did-not-listen"
    show_errors srv "$WORK/srv.log"
    note_fail "$side/$tool"
    return
  fi
  loaded=$(loaded_by $spid)
  # shellcheck disable=SC2086
  timeout 40 env $env taskset 2 "$tool" -d "$DEV1" -x "$GID1" -s "$size" -n "$n" -F -p $PORT \
    $extra "$IP0" > "$WORK/cli.log" 2>&1
  rc=$?
  stop $spid
  if [ $rc -ne 0 ]; then
    echo "@@BENCHFAIL mode=$MODE $tag loaded=$loaded rc=$rc why=client-exit"
    show_errors cli "$WORK/cli.log"
    show_errors srv "$WORK/srv.log"
    note_fail "$side/$tool"
    return
  fi
  # perftest's result row starts with the message size: latency rows are
  # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9; bandwidth rows
  # bytes iters bw_peak bw_avg[MB/s] msgrate[Mpps].
  awk -v size="$size" -v kind="$kind" -v pre="@@BENCH mode=$MODE $tag loaded=$loaded" '
    $1 == size && $2 ~ /^[0-9]+$/ { row = $0 }
    END {
      if (row == "") { exit 1 }
      split(row, f, " ")
      if (kind == "lat") {
        printf "%s metric=t_typical_us value=%s\n", pre, f[5]
        printf "%s metric=t_avg_us value=%s\n", pre, f[6]
        printf "%s metric=t_p99_us value=%s\n", pre, f[8]
      } else {
        printf "%s metric=bw_avg_mbps value=%s\n", pre, f[4]
        printf "%s metric=msgrate_mpps value=%s\n", pre, f[5]
      }
    }' "$WORK/cli.log" || {
    echo "@@BENCHFAIL mode=$MODE $tag loaded=$loaded rc=0 why=no-result-row"
    show_errors cli "$WORK/cli.log"
    note_fail "$side/$tool"
  }
}

# Alternate which side goes first per repetition (ABBA), so a drift in machine
# load over the run hits both sides alike.
sides_for() { if [ $(($1 % 2)) -eq 1 ]; then echo "ours librxe"; else echo "librxe ours"; fi; }

# step NAME: whether this boot runs step NAME (BENCH_RXE_ONLY: a list of micro footprint
# proc ucx rate lat bw; unset or empty: every step; ucx only where scripts/bench.sh put
# guest-ucx.sh into the image, BENCH_PLAN=ucx).
step() {
  [ -z "${BENCH_RXE_ONLY:-}" ] && return 0
  case " $BENCH_RXE_ONLY " in *" $1 "*) return 0 ;; esac
  return 1
}

over_time() {
  [ "$(elapsed)" -lt "$DEADLINE_S" ] && return 1
  echo "@@BENCHINFO truncated=1 at=\"$*\" elapsed_s=$(elapsed)"
  return 0
}

# case_reps TOOL SIZE QPS PL KIND: REPS interleaved repetitions of one case.
case_reps() {
  local rep=1 s
  while [ $rep -le "$REPS" ]; do
    for s in $(sides_for $rep); do perf "$s" "$1" "$2" "$3" "$4" $rep "$5"; done
    rep=$((rep + 1))
  done
}

# procstat SIDE REP: peak RSS and thread count of an ib_write_bw server and client
# (64 KiB, 1 QP, a few seconds) from /proc/<pid>/status, sampled every 0.2 s.
procstat() {
  local side="$1" rep="$2" env spid cpid i=0 rss thr
  env=$(side_env "$side")
  PORT=$((PORT + 1))
  # shellcheck disable=SC2086
  env $env taskset 1 ib_write_bw -d "$DEV0" -x "$GID0" -s 65536 -n 600 -F -p $PORT \
    > "$WORK/srv.log" 2>&1 &
  spid=$!
  if ! wait_listen $PORT $spid; then
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    echo "@@BENCHFAIL mode=$MODE side=$side tool=proc rep=$rep rc=server why=server-did-not-listen"
    return
  fi
  # env and taskset exec, so $! is ib_write_bw itself.
  # shellcheck disable=SC2086
  env $env taskset 2 ib_write_bw -d "$DEV1" -x "$GID1" -s 65536 -n 600 -F -p $PORT "$IP0" \
    > "$WORK/cli.log" 2>&1 &
  cpid=$!
  local crss=0 cthr=0 srss=0 sthr=0 chwm=0 shwm=0 loaded
  loaded=$(loaded_by $spid)
  while kill -0 $cpid 2>/dev/null && [ $i -lt 300 ]; do
    for p in c s; do
      if [ $p = c ]; then pid=$cpid; else pid=$spid; fi
      rss=$(awk '/^VmRSS:/ { print $2 }' /proc/$pid/status 2>/dev/null)
      thr=$(awk '/^Threads:/ { print $2 }' /proc/$pid/status 2>/dev/null)
      hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/$pid/status 2>/dev/null)
      [ -n "$rss" ] || continue
      if [ $p = c ]; then
        [ "$rss" -gt "$crss" ] && crss=$rss; [ "$thr" -gt "$cthr" ] && cthr=$thr; chwm=$hwm
      else
        [ "$rss" -gt "$srss" ] && srss=$rss; [ "$thr" -gt "$sthr" ] && sthr=$thr; shwm=$hwm
      fi
    done
    sleep 0.2
    i=$((i + 1))
  done
  wait $cpid; rc=$?
  stop $spid
  local pre="@@BENCH mode=$MODE side=$side loaded=$loaded tool=proc size=65536 qps=1 pl=1 rep=$rep"
  if [ $rc -ne 0 ] || [ "$crss" -eq 0 ]; then
    echo "@@BENCHFAIL mode=$MODE side=$side tool=proc rep=$rep loaded=$loaded rc=$rc why=ib_write_bw-failed"
    show_errors cli "$WORK/cli.log"
    return
  fi
  # VmHWM is the kernel's own peak; it is missing when the last sample raced the exit.
  echo "$pre metric=client_rss_kb value=$crss"
  [ -n "$chwm" ] && [ "$chwm" != 0 ] && echo "$pre metric=client_hwm_kb value=$chwm"
  echo "$pre metric=client_threads value=$cthr"
  echo "$pre metric=server_rss_kb value=$srss"
  [ -n "$shwm" ] && [ "$shwm" != 0 ] && echo "$pre metric=server_hwm_kb value=$shwm"
  echo "$pre metric=server_threads value=$sthr"
}

echo "@@BENCHINFO mode=$MODE reps=$REPS kernel=$(uname -r) userland=${USB4VERBS_USERLAND:-?} nproc=$(nproc)"
echo "@@BENCHINFO cand_env=\"$CAND_ENV\" dev0=$DEV0 dev1=$DEV1 gid0=$GID0 gid1=$GID1 netdev_mtu=$(cat /sys/class/net/"${USB4VERBS_NETDEV0:-vethA}"/mtu 2>/dev/null)"
echo "@@BENCHINFO perftest=$(ib_write_bw --version 2>&1 | head -n1 | tr ' ' '_') lat_sizes=\"$LAT_SIZES\" bw_sizes=\"$BW_SIZES\" bw_multi_qp_sizes=\"$BW_MULTI_QP_SIZES\" post_list=$POST_LIST"
for f in "$BIN"/*.so; do [ -e "$f" ] && echo "@@BENCHINFO file=${f##*/} sha256=$(sha256sum "$f" | cut -c1-16)"; done

# 1. Which provider serves the device, micro costs, first open (cheap; first so it
# always runs).
rep=1
step micro || rep=$((REPS + 1))
while [ $rep -le "$REPS" ]; do
  for s in $(sides_for $rep); do
    # shellcheck disable=SC2046,SC2086
    env $(side_env "$s") taskset 2 "$BIN/microbench" "$DEV0" "$GID0" "$DEV1" "$GID1" "$MICRO_ITERS" \
      "mode=$MODE" "side=$s" "pl=1" "rep=$rep" > "$WORK/micro.log" 2>&1
    rc=$?
    grep '^@@BENCH' "$WORK/micro.log"
    if [ $rc -ne 0 ]; then
      echo "@@BENCHFAIL mode=$MODE side=$s tool=micro rep=$rep rc=$rc why=microbench-exit"
      grep -v '^@@BENCH' "$WORK/micro.log" | sed 's/^/# micro: /' | tail -n 5
    fi
  done
  rep=$((rep + 1))
done

# 1b. Load and open footprint (tests/bench/footprint.c): Threads and VmRSS after
# ibv_get_device_list and its time in a process that opens nothing, without our
# package (side=nopkg) and with it installed the way packaging does (a .driver file
# in /etc/libibverbs.d, no rxe opt-in: librxe keeps rxe; side=installed); then the
# same after opening DEV0 and a PD, through ours (CAND_ENV) and librxe.
DRIVER_FILE=/etc/libibverbs.d/usb4_rdma.driver
footprint() {
  local side="$1" rep="$2" dev="" rc
  case $side in
    installed) printf 'driver %s/libusb4_rdma\n' "$BIN" > "$DRIVER_FILE" ;;
    ours | librxe) dev=$DEV0 ;;
  esac
  # shellcheck disable=SC2046,SC2086
  env $(side_env "$side") taskset 2 "$BIN/footprint" $dev "mode=$MODE" "side=$side" "rep=$rep" \
    > "$WORK/footprint.log" 2>&1
  rc=$?
  rm -f "$DRIVER_FILE"
  grep '^@@BENCH' "$WORK/footprint.log"
  if [ $rc -ne 0 ]; then
    echo "@@BENCHFAIL mode=$MODE side=$side tool=footprint rep=$rep rc=$rc why=footprint-exit"
    grep -v '^@@BENCH' "$WORK/footprint.log" | sed 's/^/# footprint: /' | tail -n 5
  fi
}
rm -f "$DRIVER_FILE"
rep=1
step footprint || rep=$((REPS + 1))
while [ $rep -le "$REPS" ]; do
  if [ $((rep % 2)) -eq 1 ]; then order="nopkg installed librxe ours"; else order="ours librxe installed nopkg"; fi
  for s in $order; do footprint "$s" $rep; done
  rep=$((rep + 1))
done

# 2. Memory and threads.
rep=1
step proc || rep=4
while [ $rep -le 3 ]; do
  for s in $(sides_for $rep); do procstat "$s" $rep; done
  rep=$((rep + 1))
done

# 3. Message rate at 8 B with a post list.
step rate || RATE_TOOLS=""
step lat || LAT_TOOLS=""
step bw || BW_TOOLS=""
for t in $RATE_TOOLS; do
  over_time "$t rate" && break
  case_reps "$t" 8 1 "$POST_LIST" rate
done

# 4. Latency, then bandwidth, smallest sizes first.
for t in $LAT_TOOLS; do
  for sz in $LAT_SIZES; do
    over_time "$t $sz" && break 2
    case_reps "$t" "$sz" 1 1 lat
  done
done
for t in $BW_TOOLS; do
  for q in $BW_QPS; do
    sizes=$BW_SIZES
    [ "$q" -gt 1 ] && sizes=$BW_MULTI_QP_SIZES
    for sz in $sizes; do
      over_time "$t q$q $sz" && break 3
      case_reps "$t" "$sz" "$q" 1 bw
    done
  done
done
# 5. ucx_perftest over rc_verbs through both sides (tests/bench/guest-ucx.sh), beside
# the perftest rows of steps 3 and 4 (BENCH_PLAN=ucx narrows those to the matching ones);
# last, because its runs take many times perftest's.
if step ucx && [ -f "$BIN/guest-ucx.sh" ]; then
  # shellcheck source=tests/bench/guest-ucx.sh
  . "$BIN/guest-ucx.sh"
  ucx_step
fi
echo "@@BENCHINFO what=done elapsed_s=$(elapsed) loadavg=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
exit 0
