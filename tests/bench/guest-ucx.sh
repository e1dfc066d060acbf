# shellcheck shell=sh
# tests/bench/guest-ucx.sh: ucx_perftest through each side, sourced by tests/bench/guest.sh
# (rxe: ours and librxe) and tests/bench/guest-usb4.sh (the usb4 bed: ours and the module's
# C provider) as their step "ucx" (BENCH_PLAN=ucx in scripts/bench.sh). The caller's
# perftest steps run the matching perftest rows in the same boot, so each UCX figure has
# perftest's beside it (the report's UCX section pairs them).
#
# ucx_step SIDES: for every repetition (REPS) and side (rotated as the caller's sides_for
# does), ucx_perftest over rc_verbs:
#   tag_lat  UCP tag-matched ping-pong   sizes BENCH_UCX_LAT_SIZES (2 8192)       ↔ ib_send_lat
#   tag_bw   UCP tag-matched stream      sizes BENCH_UCX_BW_SIZES (64 65536)      ↔ ib_send_bw
#   put_bw   UCT RDMA WRITE, zcopy       sizes BENCH_UCX_BW_SIZES                 ↔ ib_write_bw
#   am_bw    UCT active message, bcopy   sizes BENCH_UCX_AM_SIZES (64 4096)       ↔ ib_send_bw
# (BENCH_UCX_TESTS picks among them). Lines as the caller's perftest ones:
#   @@BENCH mode=M side=S tool=ucx_<test> size=B qps=1 pl=1 rep=R loaded=L metric=K value=V
# with metric t_typical_us (UCX's 50th percentile), t_avg_us for the latency test and
# bw_avg_mbps, msgrate_mpps for the others: the "overall" columns of ucx_perftest's Final
# row, the whole run's (UCX's latency of a ping-pong is half the round trip, as perftest's
# t_typical; the bandwidth is its message rate × the size in MB of 2^20 bytes, as
# perftest's MB). A side that cannot run a test prints @@BENCHFAIL with
# why=ucx-<what> and the lines of its output that say why, and after two failures of a
# test that side is not run for it again (@@BENCHSKIP).
#
# The UCX settings (docs/srq.md, tests/stock/README.md):
# - rxe (UCX 1.13 on Debian 12): UCX_TLS=rc_verbs,ud_verbs:aux (rc_verbs alone has no
#   wire-up transport) and UCX_UD_ETH_DGID_CHECK=n (rxe reports sl 0).
# - the usb4 bed: UCX_TLS=rc_verbs,tcp:aux with the netdev of IP0 in UCX_NET_DEVICES (the
#   module has no UD; UCX 1.16+ takes TCP as the auxiliary), UCX_RC_VERBS_TX_MIN_SGE=4 (the
#   module grants 4 send SGEs, UCX reserves 5 by default). UCX before 1.16 cannot run there:
#   the step says so and runs nothing.
# UCT tests name device and transport (-d, -x) on both ends; UCX 1.13's server takes them
# from the client, so on rxe its UCT tests run both ends on DEV1 (still over rc_verbs and
# the provider under test, but not across the veth as perftest's do).
#
# Needs from the caller: MODE REPS DEV0 DEV1 IP0 WORK BIN PORT, and side_env SIDE,
# sides_for REP (the caller's rotation), wait_listen PORT PID, loaded_by PID, stop PID,
# over_time WHAT (the caller's deadline: no case starts after it). The callers run this
# step after their perftest rows, which take a fraction of its time.
# shellcheck disable=SC3043 # busybox ash has local

UCX_TESTS=${BENCH_UCX_TESTS:-tag_lat tag_bw put_bw am_bw}
UCX_LAT_SIZES=${BENCH_UCX_LAT_SIZES:-2 8192}
UCX_BW_SIZES=${BENCH_UCX_BW_SIZES:-64 65536}
UCX_AM_SIZES=${BENCH_UCX_AM_SIZES:-64 4096}
UCX_FAILS=""

# ucx_iters TEST SIZE: -n of one run, sized for seconds under TCG on a loaded host, where
# tag_lat takes milliseconds (rxe and the bed alike) and tag_bw of 64 KiB on the bed up to
# a second per message; a run's process start and wire-up take 10-30 s more.
ucx_iters() {
  case $1 in
    tag_lat) if [ "$2" -le 8192 ]; then echo 100; else echo 30; fi ;;
    *) if [ "$2" -le 4096 ]; then echo 500; else echo 30; fi ;;
  esac
}

# ucx_errors ROLE FILE: what a failed ucx_perftest printed about why, as "# " lines; for a
# crash, UCX's signal line and the first frames of its backtrace past its own handler.
ucx_errors() {
  if grep -q 'Caught signal' "$2"; then
    grep -m 1 'Caught signal' "$2" | sed "s/^/# $1: /"
    grep -E '^ *[0-9]+ +[^ ]+\([A-Za-z_][A-Za-z0-9_]*\+0x' "$2" |
      grep -vE 'ucs_handle_error|ucs_debug|ucs_error_signal|signal_handler|__libc|libc\.so|_start' |
      sed 's/^ *[0-9]* *//; s/ \[0x[0-9a-f]*\]$//; s|^.*/||' | head -n 4 | sed "s/^/# $1: at /"
  elif grep -qiE 'error|fail|fatal|unsupported|no such|signal|segmentation|assert|cannot|could not|unable' "$2"; then
    # rc_verbs' own complaints first (its SRQ, its interface), then the rest; not the
    # ud_verbs interface that Open MPI's pml_ucx opens at MPI_Init in an MPI-linked
    # ucx_perftest (the module has no UD: that one fails through either provider).
    {
      grep -iE 'srq|rc_verbs' "$2" | grep -iE 'error|fail|unsupported'
      grep -iE 'error|fail|fatal|unsupported|no such|signal|segmentation|assert|cannot|could not|unable' "$2" |
        grep -viE 'srq|rc_verbs|ud_verbs|UD QP|pml_ucx'
    } | grep -v '^ *[0-9]* *0x' | head -n 4 | sed "s/^/# $1: /"
  else
    tail -n 3 "$2" | sed "s/^/# $1: /"
  fi
}

# ucx_run SIDE TEST SIZE REP: one server/client pair; prints its @@BENCH lines.
ucx_run() {
  local side="$1" t="$2" size="$3" rep="$4" env n tag spid cpid rc loaded l srv cli ucp_srv ucp_cli
  tag="mode=$MODE side=$side tool=ucx_$t size=$size qps=1 pl=1 rep=$rep"
  if [ "$(echo "$UCX_FAILS" | tr ' ' '\n' | grep -cx "$side/$t")" -ge 2 ]; then
    echo "@@BENCHSKIP $tag why=failed-2-times"
    return
  fi
  env=$(side_env "$side")
  n=$(ucx_iters "$t" "$size")
  ucp_srv="$UCX_UCP_ENV UCX_NET_DEVICES=$DEV0:1$UCX_AUX_DEV"
  ucp_cli="$UCX_UCP_ENV UCX_NET_DEVICES=$DEV1:1$UCX_AUX_DEV"
  case $t in
    tag_lat) srv="env $ucp_srv ucx_perftest $UCX_MPI"; cli="env $ucp_cli ucx_perftest $UCX_MPI -t tag_lat -w 10" ;;
    tag_bw) srv="env $ucp_srv ucx_perftest $UCX_MPI"; cli="env $ucp_cli ucx_perftest $UCX_MPI -t tag_bw -w 10" ;;
    put_bw)
      srv="env $UCX_UCT_ENV ucx_perftest $UCX_MPI -d $DEV0:1 -x rc_verbs"
      cli="env $UCX_UCT_ENV ucx_perftest $UCX_MPI -d $DEV1:1 -x rc_verbs -t put_bw -D zcopy -w 10" ;;
    am_bw)
      srv="env $UCX_UCT_ENV ucx_perftest $UCX_MPI -d $DEV0:1 -x rc_verbs"
      cli="env $UCX_UCT_ENV ucx_perftest $UCX_MPI -d $DEV1:1 -x rc_verbs -t am_bw -D bcopy -w 10" ;;
    *) echo "@@BENCHFAIL $tag rc=0 why=unknown-test"; return ;;
  esac
  PORT=$((PORT + 1)); [ $PORT -gt 19500 ] && PORT=18601
  # shellcheck disable=SC2086 # word lists
  env $env taskset 1 $srv -p $PORT > "$WORK/ucxsrv.log" 2>&1 &
  spid=$!
  if ! wait_listen $PORT $spid; then
    wait $spid
    rc=$?
    echo "@@BENCHFAIL $tag rc=$rc why=ucx-server-did-not-listen"
    ucx_errors srv "$WORK/ucxsrv.log"
    UCX_FAILS="$UCX_FAILS $side/$t"
    return
  fi
  # shellcheck disable=SC2086
  timeout 150 env $env taskset 2 $cli -s "$size" -n "$n" -p $PORT "$IP0" > "$WORK/ucxcli.log" 2>&1 &
  cpid=$!
  # The server opens its device only once the client has connected: what it mapped is
  # read while the client runs.
  loaded=none
  while kill -0 $cpid 2>/dev/null; do
    l=$(loaded_by $spid)
    case $l in none) ;; *) loaded=$l ;; esac
    sleep 0.2
  done
  wait $cpid
  rc=$?
  stop $spid
  if [ $rc -ne 0 ] || ! grep -q '^Final:' "$WORK/ucxcli.log"; then
    local why=ucx-client-exit
    grep -q 'Segmentation\|signal 11\|SIGSEGV' "$WORK/ucxsrv.log" "$WORK/ucxcli.log" && why=ucx-crashed
    echo "@@BENCHFAIL $tag loaded=$loaded rc=$rc why=$why"
    ucx_errors srv "$WORK/ucxsrv.log"
    ucx_errors cli "$WORK/ucxcli.log"
    UCX_FAILS="$UCX_FAILS $side/$t"
    return
  fi
  # Final: iters, latency 50th percentile/average/overall (µs), bandwidth average/overall
  # (MB/s), message rate average/overall (msg/s); "average" is UCX's last report interval,
  # which can be empty (-nan: seen for am_bw on the bed), "overall" the whole run.
  # The bandwidth is the overall message rate times the size: UCX prints MB/s with two
  # decimals, which under TCG on the bed reads 0.00 for 64 B messages.
  awk -v kind="$t" -v size="$size" -v pre="@@BENCH $tag loaded=$loaded" '
    $1 == "Final:" { row = $0 }
    END {
      split(row, f, " ")
      if (kind == "tag_lat") {
        printf "%s metric=t_typical_us value=%s\n", pre, f[3]
        printf "%s metric=t_avg_us value=%s\n", pre, f[5]
      } else {
        printf "%s metric=bw_avg_mbps value=%.6f\n", pre, f[9] * size / 1048576
        printf "%s metric=msgrate_mpps value=%.6f\n", pre, f[9] / 1e6
      }
    }' "$WORK/ucxcli.log"
}

# ucx_step: the UCX cases through every side of the caller's rotation.
ucx_step() {
  local rep s t sz sizes ver dev_env probe errs how
  if ! command -v ucx_perftest > /dev/null; then
    echo "@@BENCHINFO what=ucx ucx=absent why=no-ucx_perftest-in-this-image"
    return
  fi
  # "# Library version: 1.18.1" (1.18), "# UCT version=1.13.1 revision ..." (1.13)
  ver=$(ucx_info -v 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n 1)
  UCX_MPI=
  grep -q 'libmpi\.so' "$(command -v ucx_perftest)" && UCX_MPI="-P 0"
  if [ -n "${USB4VERBS_BACKEND_TREE:-}" ]; then
    # The bed: TCP is the wire-up transport, over the netdev of IP0.
    local ifc maj min
    ifc=$(ip -o -4 addr show | awk -v ip="$IP0" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }')
    maj=${ver%%.*} min=${ver#*.}; min=${min%%.*}
    if [ "${maj:-0}" -lt 1 ] || { [ "${maj:-0}" -eq 1 ] && [ "${min:-0}" -lt 16 ]; }; then
      echo "@@BENCHINFO what=ucx ucx=$ver skipped=1 why=\"UCX $ver takes no TCP auxiliary transport (1.16+), and the module has no UD: UCX cannot run on this userland\""
      return
    fi
    # UCX_IB_GPU_DIRECT_RDMA=no: UCX 1.18 probes ibv_reg_dmabuf_mr when it opens the device
    # (openucx/ucx:src/uct/ib/base/ib_md.c:1306 at v1.18.1, uct_ib_md_check_dmabuf), and the
    # module's C provider as tests/bench/upstream-provider.sh builds it (for rdma-core 44)
    # calls libibverbs' ibv_cmd_reg_dmabuf_mr without the driver-buffer argument rdma-core
    # added in 4c461218d (v55; PABI still 34), so on this userland's rdma-core 56.1 it crashes
    # there (the module's patch picks the form by the version it is built for,
    # hellas-main:packaging/rdma-core-patches/0001-providers-usb4_rdma-add-USB4-soft-RDMA-provider.patch:36-38).
    # Host memory needs no GPU direct; both sides run with it off, and the step records what
    # ucx_info says with UCX's default too.
    UCX_UCP_ENV="UCX_TLS=rc_verbs,tcp:aux UCX_RC_VERBS_TX_MIN_SGE=4 UCX_IB_GPU_DIRECT_RDMA=no UCX_WARN_UNUSED_ENV_VARS=n"
    UCX_UCT_ENV="UCX_RC_VERBS_TX_MIN_SGE=4 UCX_IB_GPU_DIRECT_RDMA=no UCX_WARN_UNUSED_ENV_VARS=n"
    UCX_AUX_DEV=",$ifc"
  else
    UCX_UCP_ENV="UCX_TLS=rc_verbs,ud_verbs:aux UCX_UD_ETH_DGID_CHECK=n UCX_WARN_UNUSED_ENV_VARS=n"
    UCX_UCT_ENV="UCX_WARN_UNUSED_ENV_VARS=n"
    UCX_AUX_DEV=
  fi
  # Which sides list rc_verbs on DEV0 (ucx_info through the side's provider, with the
  # step's UCT settings; on the bed also with UCX's defaults: default_*).
  for s in $(sides_for 1); do
    dev_env=$(side_env "$s")
    set -- ""
    [ -n "${USB4VERBS_BACKEND_TREE:-}" ] && set -- "" default_
    for how in "$@"; do
      if [ -z "$how" ]; then
        # shellcheck disable=SC2086
        env $dev_env $UCX_UCT_ENV ucx_info -d > "$WORK/ucxinfo.$s" 2>&1
      else
        # shellcheck disable=SC2086
        env $dev_env ucx_info -d > "$WORK/ucxinfo.$s" 2>&1
      fi
      probe=$(grep -B1 "Device: $DEV0:1" "$WORK/ucxinfo.$s" | grep -c 'Transport: rc_verbs')
      # What ucx_info said, where rc_verbs is missing (no quotes: a field): its errors, a
      # crash's signal line and first frames.
      errs=""
      [ "$probe" = 0 ] && errs=$( { grep -iE 'srq|rc_verbs|caught signal' "$WORK/ucxinfo.$s" | grep -iE 'error|fail|unsupported|signal'
        grep -iE 'fail|unsupported|not supported' "$WORK/ucxinfo.$s" | grep -viE 'error handling|srq|rc_verbs|UD QP|ud_verbs'
        ucx_errors x "$WORK/ucxinfo.$s" | grep ': at ' | sed 's/^# x: //'; } | head -n 4 | tr -d '"' | tr -s ' \n' '  ')
      echo "@@BENCHINFO what=ucx side=$s ucx=$ver ${how}rc_verbs_on_dev0=$probe ${how}ucx_info_errors=\"$errs\" ucp_env=\"$UCX_UCP_ENV\" uct_env=\"$UCX_UCT_ENV\" aux_dev=\"${UCX_AUX_DEV#,}\" mpi=\"$UCX_MPI\""
    done
  done
  for t in $UCX_TESTS; do
    case $t in
      tag_lat) sizes=$UCX_LAT_SIZES ;;
      am_bw) sizes=$UCX_AM_SIZES ;;
      *) sizes=$UCX_BW_SIZES ;;
    esac
    for sz in $sizes; do
      over_time "ucx $t $sz" && return
      rep=1
      while [ $rep -le "$REPS" ]; do
        for s in $(sides_for $rep); do ucx_run "$s" "$t" "$sz" $rep; done
        rep=$((rep + 1))
      done
    done
  done
}
