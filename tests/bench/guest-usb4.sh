#!/bin/sh
# tests/bench/guest-usb4.sh: the guest half of `make bench` with BENCH_PLAN=usb4
# (scripts/bench.sh runs it through tests/vm/run.sh in the usb4 bed: the real
# thunderbolt_ibverbs module of USB4_TREE on tbloop). Compares our provider with the
# module's own C provider (tests/bench/upstream-provider.sh) on the same usb4_rdma
# devices, interleaved per repetition, and prints the lines of tests/bench/guest.sh:
#   @@BENCH mode=usb4 side=S loaded=L tool=T size=B qps=Q pl=P rep=R metric=K value=V
# Sides (BENCH_USB4_SIDES): up and up2 are both the upstream provider (their ratio is
# the plan's A/A noise band, measured in the same repetitions), ours is ours with its
# defaults (kernel commands: the provider leaves DV queues to applications), oursdv ours
# with its own DV send queues on (USB4VERBS_DV_SEND=1), ourskc ours forced to kernel
# commands (USB4VERBS_FORCE_KERNEL_COMMANDS=1, cshim/README.md). Both providers register the
# driver name usb4_rdma, so each process loads exactly one by its own RDMAV_DRIVERS
# (libibverbs 44 loads those before /etc/libibverbs.d, and the bed's driver file is
# moved away while this runs); loaded= is what /proc/<server>/maps shows: up (the
# upstream file), ours (libusb4_rdma-go.so), both or none, plus +mmapN when the process
# maps N pieces of /dev/infiniband/uverbs* (a DV queue or a CQ ring; kernel commands map
# none).
# Settings: /opt/usb4verbs/bench.conf (scripts/bench.sh).
# shellcheck disable=SC3043 # busybox ash has local
set -u
CONF=${BENCH_CONF:-/opt/usb4verbs/bench.conf}
# shellcheck source=/dev/null
[ -f "$CONF" ] && . "$CONF"
MODE=usb4
REPS=${BENCH_REPS:-5}
SIDES=${BENCH_USB4_SIDES:-up ours up2}
DEADLINE_S=${BENCH_DEADLINE_S:-1500}
LAT_TOOLS=${BENCH_LAT_TOOLS-ib_write_lat ib_send_lat ib_read_lat}
BW_TOOLS=${BENCH_BW_TOOLS-ib_write_bw ib_send_bw ib_read_bw}
RATE_TOOLS=${BENCH_RATE_TOOLS-ib_write_bw ib_send_bw ib_read_bw}
SYS_TOOLS=${BENCH_SYS_TOOLS-ib_write_lat ib_send_lat}
LAT_SIZES=${BENCH_LAT_SIZES:-2 512 8192 65536}
BW_SIZES=${BENCH_BW_SIZES:-64 4096 1048576}
BW_QPS=${BENCH_BW_QPS:-1 4}
BW_MULTI_QP_SIZES=${BENCH_BW_MULTI_QP_SIZES:-64 1048576}
POST_LIST=${BENCH_POST_LIST:-16}
RATE_ITERS=${BENCH_RATE_ITERS:-2000}
MICRO_ITERS=${BENCH_MICRO_ITERS:-1000}
# Two iteration counts per syscall case: the difference is the per-message cost
# without the setup's system calls.
SYS_N1=${BENCH_SYS_N1:-100} SYS_N2=${BENCH_SYS_N2:-500}
PAIR_N1=${BENCH_PAIR_N1:-50} PAIR_N2=${BENCH_PAIR_N2:-250}
# Streams: STREAM_BURST WRITEs per settled iteration, at two iteration counts.
STREAM_BURST=${BENCH_STREAM_BURST:-16}
STREAM_N1=${BENCH_STREAM_N1:-10} STREAM_N2=${BENCH_STREAM_N2:-50}
# perftest's QP ACK timeout: 20 (4.3 s) as tests/stock/guest.sh MODE=usb4 uses it;
# the default 14 ends in RETRY_EXC under TCG.
PERF_EXTRA=${BENCH_PERF_EXTRA:--u 20}
DEV0=${USB4VERBS_DEV0:?not in the usb4 bed} DEV1=${USB4VERBS_DEV1:?}
GID0=${USB4VERBS_GID0:?} GID1=${USB4VERBS_GID1:?}
IP0=${USB4VERBS_IP0:?}
TREE=${USB4VERBS_BACKEND_TREE:-?}
BIN=/opt/usb4verbs
UPSTREAM=$BIN/upstream/libusb4_rdma
OURS=$BIN/libusb4_rdma
WORK=/tmp/bench
mkdir -p "$WORK"
PORT=18600
DBG=/sys/kernel/debug/thunderbolt_ibverbs

now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
elapsed() { awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }

# side_env SIDE: the environment words of SIDE's processes.
side_env() {
  case $1 in
    up | up2) echo "RDMAV_DRIVERS=$UPSTREAM" ;;
    ours) echo "RDMAV_DRIVERS=$OURS" ;;
    ourskc) echo "RDMAV_DRIVERS=$OURS USB4VERBS_FORCE_KERNEL_COMMANDS=1" ;;
    oursdv) echo "RDMAV_DRIVERS=$OURS USB4VERBS_DV_SEND=1" ;;
    *) echo "RDMAV_DRIVERS=/nonexistent/$1" ;;
  esac
}

# The bed installs ours as /etc/libibverbs.d/usb4_rdma.driver: away with it, so that a
# process maps only the provider its RDMAV_DRIVERS names.
DRIVER_FILE=/etc/libibverbs.d/usb4_rdma.driver
[ -f "$DRIVER_FILE" ] && mv "$DRIVER_FILE" "$WORK/usb4_rdma.driver.saved"

lat_iters() {
  if [ "$1" -le 2048 ]; then echo 200; elif [ "$1" -le 8192 ]; then echo 100; else echo 30; fi
}
# About 4 MiB per run, 8..500 messages; perftest's -n is per QP.
bw_iters() {
  local n=$((4194304 / $1))
  [ "$n" -gt 500 ] && n=500
  n=$((n / $2))
  [ "$n" -lt 8 ] && n=8
  echo "$n"
}

wait_listen() {
  local hex i=0
  hex=$(printf '%04X' "$1")
  while [ $i -lt 600 ]; do
    grep -q ":$hex 00000000:0000 0A" /proc/net/tcp 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
    i=$((i + 1))
  done
  return 1
}

# loaded_by PID: which provider PID has mapped, and how many uverbs mappings.
loaded_by() {
  local l="" m
  grep -q "$BIN/upstream/libusb4_rdma" "/proc/$1/maps" 2>/dev/null && l=up
  grep -q 'libusb4_rdma-go\.so' "/proc/$1/maps" 2>/dev/null && l="${l:+both}${l:-ours}"
  m=$(grep -c '/dev/infiniband/uverbs' "/proc/$1/maps" 2>/dev/null)
  [ "${m:-0}" -gt 0 ] && l="${l:-none}+mmap$m"
  echo "${l:-none}"
}

stop() {
  local i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 80 ]; do sleep 0.1; i=$((i + 1)); done
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

show_errors() {
  if grep -qiE 'err|fail|couldn|unable|unsupported|invalid' "$2"; then
    grep -iE 'err|fail|couldn|unable|unsupported|invalid' "$2" | tail -n 4 | sed "s/^/# $1: /"
  else
    tail -n 3 "$2" | sed "s/^/# $1: /"
  fi
}

FAILS=""
fail_count() { echo "$FAILS" | tr ' ' '\n' | grep -cx "$1"; }
note_fail() { FAILS="$FAILS $1"; }
skipped() { [ "$(fail_count "$1")" -ge 3 ]; }

# sides_for REP: the order of the sides in repetition REP, rotated so that no side
# keeps one place (ABBA over the rotation).
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

# step NAME: whether this boot runs step NAME (BENCH_USB4_ONLY: a list of micro footprint
# ctrl gloo sys pair proc ucx rate event lat bw; empty or unset: every step; ucx only where
# scripts/bench.sh put guest-ucx.sh into the image, BENCH_PLAN=ucx).
step() {
  [ -z "${BENCH_USB4_ONLY:-}" ] && return 0
  case " $BENCH_USB4_ONLY " in *" $1 "*) return 0 ;; esac
  return 1
}

over_time() {
  [ "$(elapsed)" -lt "$DEADLINE_S" ] && return 1
  echo "@@BENCHINFO truncated=1 at=\"$*\" elapsed_s=$(elapsed)"
  return 0
}

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
    rate) n=$RATE_ITERS; extra="-q $qps --post_list=$pl" ;;
  esac
  # TOOL-e: the tool in its event mode (-e: ibv_get_cq_event on a completion channel).
  case $tool in *-e) tool=${tool%-e}; extra="$extra -e" ;; esac
  PORT=$((PORT + 1)); [ $PORT -gt 19500 ] && PORT=18601
  # shellcheck disable=SC2086 # env and extra are word lists
  env $env taskset 1 "$tool" -d "$DEV0" -x "$GID0" -s "$size" -n "$n" -F -p $PORT $extra $PERF_EXTRA \
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
  timeout 90 env $env taskset 2 "$tool" -d "$DEV1" -x "$GID1" -s "$size" -n "$n" -F -p $PORT \
    $extra $PERF_EXTRA "$IP0" > "$WORK/cli.log" 2>&1
  rc=$?
  stop $spid
  if [ $rc -ne 0 ]; then
    echo "@@BENCHFAIL mode=$MODE $tag loaded=$loaded rc=$rc why=client-exit"
    show_errors cli "$WORK/cli.log"
    show_errors srv "$WORK/srv.log"
    note_fail "$side/$tool"
    return
  fi
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
  # perftest divides by the CPU clock it calibrated at start; a calibration whose
  # samples were disturbed (preempted) gives 0 MHz, which it prints as an inf latency
  # (linux-rdma/perftest:src/get_clock.c sample_get_cpu_mhz, r^2 < 0.9).
  grep -h 'Correlation coefficient' "$WORK/cli.log" "$WORK/srv.log" 2>/dev/null | head -n 1 |
    tr -d '"' | sed "s/^/@@BENCHINFO calibration=failed mode=$MODE $tag text=\"/; s/\$/\"/"
}

case_reps() {
  local rep=1 s
  while [ $rep -le "$REPS" ]; do
    for s in $(sides_for $rep); do perf "$s" "$1" "$2" "$3" "$4" $rep "$5"; done
    rep=$((rep + 1))
  done
}

# dbg_counters: every number of the module's debugfs files, "file.key value" a line,
# summed over the lines that repeat a key ("key: N" lines and "key=N" words; the
# peers file has one line per peer and path).
dbg_counters() {
  local f
  for f in "$DBG"/*; do
    [ -f "$f" ] || continue
    awk -v file="${f##*/}" '
      /^[A-Za-z0-9_]+: -?[0-9]+$/ { k = $1; sub(/:$/, "", k); sum[file "." k] += $2; next }
      {
        for (i = 1; i <= NF; i++)
          if ($i ~ /^[A-Za-z0-9_]+=-?[0-9]+$/) { split($i, kv, "="); sum[file "." kv[1]] += kv[2] }
      }
      END { for (k in sum) print k, sum[k] }' "$f" 2>/dev/null
  done | sort
}

# sc_lines PRE END FILE: strace -c's table FILE (% time, seconds, usecs/call, calls,
# [errors,] syscall) as metric=sc_END_<syscall> lines; for END "pair" the poll(2)
# calls of microbench's settle are left out of the total (no provider calls poll).
sc_lines() {
  awk -v pre="$1" -v end="$3" '
    $1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ {
      if ($NF == "total") { total = $4; next }
      if (end == "pair" && ($NF == "poll" || $NF == "ppoll")) { settle += $4; next }
      printf "%s metric=sc_%s_%s value=%s\n", pre, end, $NF, $4
    }
    END {
      if (end == "pair") { printf "%s metric=sc_%s_settle value=%d\n", pre, end, settle; total -= settle }
      printf "%s metric=sc_%s_total value=%d\n", pre, end, total
    }' "$2"
}

# dbg_lines PRE: the debugfs counters that moved between dbg.before and dbg.after.
dbg_lines() {
  awk -v pre="$1" '
    NR == FNR { a[$1] = $2; next }
    ($1 in a) && $2 != a[$1] { printf "%s metric=dbg_%s value=%d\n", pre, $1, $2 - a[$1] }' \
    "$WORK/dbg.before" "$WORK/dbg.after"
}

# sysc_pair SIDE N REP [BURST]: microbench's settled pairs (MICROBENCH_SETTLE_US) under
# strace -f -c: the system calls of one post + completion, without empty polls. With
# BURST > 1 (tool sys_stream) each settled iteration posts BURST WRITEs back to back
# and then takes their completions (MICROBENCH_BURST): a stream's calls, n counting
# messages (N × BURST).
sysc_pair() {
  local side="$1" n="$2" rep="$3" burst="${4:-1}" env rc pre tool=sys_pair msgs
  [ "$burst" -gt 1 ] && tool=sys_stream
  msgs=$((n * burst))
  env=$(side_env "$side")
  pre="mode=$MODE side=$side tool=$tool size=8 qps=1 pl=1 rep=$rep"
  dbg_counters > "$WORK/dbg.before"
  # shellcheck disable=SC2086
  env $env MICROBENCH_SETTLE_US=${BENCH_SETTLE_US:-5000} MICROBENCH_BURST=$burst taskset 2 strace -f -c -o "$WORK/sc.pair" \
    "$BIN/microbench" "$DEV0" "$GID0" "$DEV1" "$GID1" "$n" "$pre" n=$msgs > "$WORK/micro.log" 2>&1
  rc=$?
  dbg_counters > "$WORK/dbg.after"
  if [ $rc -ne 0 ]; then
    echo "@@BENCHFAIL $pre n=$msgs rc=$rc why=microbench-exit"
    grep -v '^@@BENCH' "$WORK/micro.log" | sed 's/^/# micro: /' | tail -n 5
    return
  fi
  grep '^@@BENCH ' "$WORK/micro.log" | sed "s/ tool=micro / /; s/^@@BENCH /@@BENCH loaded=$(grep -q upstream "$WORK/micro.log" && echo up || echo ours) /"
  sc_lines "@@BENCH $pre n=$msgs" "$WORK/sc.pair" pair
  dbg_lines "@@BENCH $pre n=$msgs"
}

# sysc SIDE TOOL N REP: one run under strace -f -c on both ends, N iterations of 8 B;
# prints each end's system calls by name and in total, and the module's debugfs
# counters that moved.
sysc() {
  local side="$1" tool="$2" n="$3" rep="$4" env spid rc loaded pre
  env=$(side_env "$side")
  PORT=$((PORT + 1))
  dbg_counters > "$WORK/dbg.before"
  # shellcheck disable=SC2086
  env $env taskset 1 strace -f -c -o "$WORK/sc.srv" "$tool" -d "$DEV0" -x "$GID0" -s 8 -n "$n" -F \
    -p $PORT $PERF_EXTRA > "$WORK/srv.log" 2>&1 &
  spid=$!
  pre="mode=$MODE side=$side tool=sys_$tool size=8 qps=1 pl=1 rep=$rep"
  if ! wait_listen $PORT $spid; then
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    echo "@@BENCHFAIL $pre n=$n rc=server why=server-did-not-listen"
    show_errors srv "$WORK/srv.log"
    return
  fi
  # strace is the process wait_listen saw; the tool is its child.
  loaded=$(loaded_by "$(cat /proc/$spid/task/*/children 2>/dev/null | awk '{print $1; exit}')")
  # shellcheck disable=SC2086
  timeout 120 env $env taskset 2 strace -f -c -o "$WORK/sc.cli" "$tool" -d "$DEV1" -x "$GID1" -s 8 \
    -n "$n" -F -p $PORT $PERF_EXTRA "$IP0" > "$WORK/cli.log" 2>&1
  rc=$?
  stop $spid
  dbg_counters > "$WORK/dbg.after"
  if [ $rc -ne 0 ]; then
    echo "@@BENCHFAIL $pre n=$n loaded=$loaded rc=$rc why=client-exit"
    show_errors cli "$WORK/cli.log"
    show_errors srv "$WORK/srv.log"
    return
  fi
  for end in srv cli; do sc_lines "@@BENCH $pre loaded=$loaded n=$n" "$WORK/sc.$end" $end; done
  dbg_lines "@@BENCH $pre loaded=$loaded n=$n"
}

# procstat SIDE REP: peak RSS and threads of an ib_write_bw server and client.
procstat() {
  local side="$1" rep="$2" env spid cpid i=0 rss thr hwm p pid
  env=$(side_env "$side")
  PORT=$((PORT + 1))
  # shellcheck disable=SC2086
  env $env taskset 1 ib_write_bw -d "$DEV0" -x "$GID0" -s 65536 -n 300 -F -p $PORT $PERF_EXTRA \
    > "$WORK/srv.log" 2>&1 &
  spid=$!
  if ! wait_listen $PORT $spid; then
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    echo "@@BENCHFAIL mode=$MODE side=$side tool=proc rep=$rep rc=server why=server-did-not-listen"
    return
  fi
  # shellcheck disable=SC2086
  env $env taskset 2 ib_write_bw -d "$DEV1" -x "$GID1" -s 65536 -n 300 -F -p $PORT $PERF_EXTRA "$IP0" \
    > "$WORK/cli.log" 2>&1 &
  cpid=$!
  local crss=0 cthr=0 srss=0 sthr=0 chwm=0 shwm=0 loaded
  loaded=$(loaded_by $spid)
  while kill -0 $cpid 2>/dev/null && [ $i -lt 400 ]; do
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
  echo "$pre metric=client_rss_kb value=$crss"
  [ -n "$chwm" ] && [ "$chwm" != 0 ] && echo "$pre metric=client_hwm_kb value=$chwm"
  echo "$pre metric=client_threads value=$cthr"
  echo "$pre metric=server_rss_kb value=$srss"
  [ -n "$shwm" ] && [ "$shwm" != 0 ] && echo "$pre metric=server_hwm_kb value=$shwm"
  echo "$pre metric=server_threads value=$sthr"
}

echo "@@BENCHINFO mode=$MODE reps=$REPS tree=$TREE kernel=$(uname -r) userland=${USB4VERBS_USERLAND:-?} nproc=$(nproc) sides=\"$SIDES\""
echo "@@BENCHINFO dev0=$DEV0 dev1=$DEV1 gid0=$GID0 gid1=$GID1 rails=${USB4VERBS_USB4_RAILS:-?} perf_extra=\"$PERF_EXTRA\""
echo "@@BENCHINFO perftest=$(ib_write_bw --version 2>&1 | head -n1 | tr ' ' '_') strace=$(strace -V 2>/dev/null | head -n1 | awk '{print $NF}') lat_sizes=\"$LAT_SIZES\" bw_sizes=\"$BW_SIZES\" bw_multi_qp_sizes=\"$BW_MULTI_QP_SIZES\" post_list=$POST_LIST sys_n=\"$SYS_N1 $SYS_N2\" stream_burst=$STREAM_BURST"
for f in "$BIN"/*.so "$BIN"/upstream/*.so; do [ -e "$f" ] && echo "@@BENCHINFO file=${f#"$BIN"/} sha256=$(sha256sum "$f" | cut -c1-16)"; done
[ -f "$BIN/upstream/patches.log" ] && sed 's/^/# upstream: /' "$BIN/upstream/patches.log"
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
[ -d "$DBG" ] || echo "@@BENCHINFO debugfs=absent dir=$DBG"
# The DV trees' kernel poller scans every dv_poll_interval_us while any DV queue lives
# (pleite-gda-8099446:kernel/ibdev.c tbv_dv_poll_sleep); BENCH_DV_POLL_US sets it for
# this boot (an A/B of the poller's share of the guest's two vCPUs), and the line says
# which value ran.
for p in /sys/module/thunderbolt_ibverbs/parameters/dv_poll_interval_us; do
  [ -f "$p" ] || continue
  [ -n "${BENCH_DV_POLL_US:-}" ] && echo "$BENCH_DV_POLL_US" > "$p"
  echo "@@BENCHINFO dv_poll_interval_us=$(cat "$p")"
done

# 1. Which provider serves the device, per-call costs, first open.
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

# 1b. The module's own cost of a DV completion (issue 23), where ours runs its DV send
# queues: tests/usb4/dvconsumer.c times back-to-back post + completion pairs on
# kernel commands and then on an application's own DV queue, through the module's C
# provider (which never touches DV), in the same process: sides appkc and appdv,
# beside microbench's pair_ns of up and oursdv above.
case " $SIDES " in
*" oursdv "*)
  if [ -x "$BIN/dvconsumer" ] && [ -f "$UPSTREAM-rdmav34.so" ]; then
    rep=1
    while [ $rep -le "$REPS" ]; do
      env RDMAV_DRIVERS="$UPSTREAM" DVCONSUMER_PAIRS="$MICRO_ITERS" taskset 2 "$BIN/dvconsumer" \
        "$DEV0" "$GID0" "$DEV1" "$GID1" "$UPSTREAM" > "$WORK/dvpair.log" 2>&1
      rc=$?
      awk -v rep=$rep '$1 == "@@PAIR" {
        printf "@@BENCH tool=micro size=8 qps=1 mode=usb4 side=app%s pl=1 rep=%s served=usb4_rdma metric=pair_ns value=%s\n", $2, rep, $3 }' \
        "$WORK/dvpair.log"
      if [ $rc -ne 0 ] || [ "$(grep -c '^@@PAIR' "$WORK/dvpair.log")" -ne 2 ]; then
        echo "@@BENCHFAIL mode=$MODE side=appdv tool=micro rep=$rep rc=$rc why=dvconsumer-pairs"
        grep -v '^@@PAIR' "$WORK/dvpair.log" | sed 's/^/# dvpair: /' | tail -n 5
      fi
      rep=$((rep + 1))
    done
  else
    echo "@@BENCHINFO dvpair=absent why=no-dvconsumer-or-upstream"
  fi ;;
esac

# 2. Footprint after ibv_get_device_list and after opening DEV0 and a PD.
rep=1
step footprint || rep=$((REPS + 1))
while [ $rep -le "$REPS" ]; do
  for s in $(sides_for $rep); do
    # shellcheck disable=SC2046,SC2086
    env $(side_env "$s") taskset 2 "$BIN/footprint" "$DEV0" "mode=$MODE" "side=$s" "rep=$rep" \
      > "$WORK/footprint.log" 2>&1
    rc=$?
    grep '^@@BENCH' "$WORK/footprint.log"
    if [ $rc -ne 0 ]; then
      echo "@@BENCHFAIL mode=$MODE side=$s tool=footprint rep=$rep rc=$rc why=footprint-exit"
      grep -v '^@@BENCH' "$WORK/footprint.log" | sed 's/^/# footprint: /' | tail -n 5
    fi
  done
  rep=$((rep + 1))
done

# 2b. The control path (issue 34): tests/bench/guest-ctrl.sh, ctrlbench through the
# module's C provider and ours, interleaved, and the system calls of each verb.
if step ctrl && [ -f "$BIN/guest-ctrl.sh" ] && [ -x "$BIN/ctrlbench" ]; then
  BENCH_CONF=$CONF sh "$BIN/guest-ctrl.sh"
fi

# 2c. Event-driven completions (issue 34 part 1): gloo's pattern (tests/usb4/guest-gloo.sh,
# tests/usb4/gloopattern.c), BENCH_GLOO_RUNS runs per provider and mode, alternating, as
# tool=gloo_<mode> samples: run_s, the whole program (two processes, their opens and set-up),
# coll_s, rank 0's 10 iterations of allreduce ring, broadcast and barrier over 16384
# elements, and retransmits, the module's 'native retransmit' lines during the run; a failed
# run is a @@BENCHFAIL with its placement.
if step gloo && [ -x "$BIN/gloopattern" ] && [ -f "$BIN/guest-gloo.sh" ] && [ "${BENCH_GLOO_RUNS:-10}" -gt 0 ]; then
  GLOO_RUNS=${BENCH_GLOO_RUNS:-10} GLOO_MODES=${BENCH_GLOO_MODES:-event poll} GLOO_CPROVIDER=1 \
    sh "$BIN/guest-gloo.sh" > "$WORK/gloo.log" 2>&1
  awk -v elems="${GLOO_ELEMS:-16384}" '
    /^@@GLOO / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      side = f["provider"] == "cprovider" ? "up" : "ours"
      n = f["label"]; sub(/.*\//, "", n); if (n !~ /^[0-9]+$/) n = 1
      tag = "mode=usb4 side=" side " tool=gloo_" f["mode"] " size=" elems " qps=1 pl=1 rep=" n
      # the resends the module logged during the run, passed or not (from the placement note)
      printf "@@BENCH %s loaded=%s metric=retransmits value=%d\n", tag, side, rt + 0
      rt = 0
      if (f["rc"] == 0) {
        printf "@@BENCH %s loaded=%s metric=run_s value=%s\n", tag, side, f["s"]
        printf "@@BENCH %s loaded=%s metric=coll_s value=%s\n", tag, side, f["coll"]
      }
      else printf "@@BENCHFAIL %s rc=%s why=gloo-run-failed\n%s", tag, f["rc"], notes
      notes = ""
      next
    }
    /note: placement: [0-9]+ / { rt = $0; sub(/.*placement: /, "", rt); sub(/ .*/, "", rt) }
    /note: (rank|placement|dmesg)/ { sub(/^cprovider\| +/, ""); sub(/^ +note: /, ""); notes = notes "# " $0 "\n" }
    /^# gloo summary/ { printf "@@BENCHINFO what=gloo_summary text=\"%s\"\n", substr($0, 17) }' "$WORK/gloo.log"
fi

# 3. System calls per message, two iteration counts per side and tool.
step sys || SYS_TOOLS=""
for t in $SYS_TOOLS; do
  rep=1
  while [ $rep -le 2 ]; do
    for s in $(sides_for $rep); do
      [ "$s" = up2 ] && continue
      for n in $SYS_N1 $SYS_N2; do sysc "$s" "$t" "$n" $rep; done
    done
    rep=$((rep + 1))
  done
done

# 3b. System calls per settled post + completion pair (microbench), same sides.
rep=1
step pair || rep=3
while [ $rep -le 2 ]; do
  for s in $(sides_for $rep); do
    [ "$s" = up2 ] && continue
    for n in $PAIR_N1 $PAIR_N2; do sysc_pair "$s" "$n" $rep; done
    # A stream of STREAM_BURST messages per settled iteration (0: none).
    if [ "$STREAM_BURST" -gt 1 ]; then
      for n in $STREAM_N1 $STREAM_N2; do sysc_pair "$s" "$n" $rep "$STREAM_BURST"; done
    fi
  done
  rep=$((rep + 1))
done

# 4. Memory and threads.
rep=1
step proc || rep=4
while [ $rep -le 3 ]; do
  for s in $(sides_for $rep); do procstat "$s" $rep; done
  rep=$((rep + 1))
done

# 5. Message rate at 8 B with a post list, latency, bandwidth.
step rate || RATE_TOOLS=""
step lat || LAT_TOOLS=""
step bw || BW_TOOLS=""
EVENT_TOOLS=${BENCH_EVENT_TOOLS-ib_send_lat ib_read_lat ib_send_bw ib_read_bw}
step event || EVENT_TOOLS=""
for t in $RATE_TOOLS; do
  over_time "$t rate" && break
  case_reps "$t" 8 1 "$POST_LIST" rate
done
# Event mode (-e) of perftest (issue 34 part 1), one size each: BENCH_EVENT_TOOLS. Not
# ib_write_*: perftest refuses -e for WRITE ("Events feature not available on WRITE verb",
# linux-rdma/perftest src/perftest_parameters.c, case 'e').
for t in $EVENT_TOOLS; do
  over_time "$t -e" && break
  case $t in *_lat) case_reps "$t-e" 2 1 1 lat ;; *) case_reps "$t-e" 65536 1 1 bw ;; esac
done
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
# 6. ucx_perftest over rc_verbs through each side (tests/bench/guest-ucx.sh, BENCH_PLAN=ucx,
# on a userland with UCX 1.16+), beside the perftest rows of step 5, which that plan narrows
# to the matching ones; last, because its runs take many times perftest's.
if step ucx && [ -f "$BIN/guest-ucx.sh" ]; then
  # shellcheck source=tests/bench/guest-ucx.sh
  . "$BIN/guest-ucx.sh"
  ucx_step
fi
[ -f "$WORK/usb4_rdma.driver.saved" ] && mv "$WORK/usb4_rdma.driver.saved" "$DRIVER_FILE"
echo "@@BENCHINFO what=done elapsed_s=$(elapsed) loadavg=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
exit 0
