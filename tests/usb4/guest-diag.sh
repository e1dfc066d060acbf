#!/bin/sh
# ibvinfo and faults on the real module, run in the guest as VM_GUEST_SCRIPT after the
# usb4 setup (tbloop and thunderbolt_ibverbs loaded, both hosts up) with
# VM_FILES=<dir with ibvinfo, badinput, unsupported> and ibverbs-utils + perftest in the
# image (tests/usb4/run.sh's diag boot). Prints go-test-style lines
# usb4/<tree>/ibvinfo/<check> and usb4/<tree>/faults/<case>, and each captured ibvinfo
# tree (healthy, link-trained-down, cable-pulled) as a base64 tar.gz between
# "=== ibvinfo-capture NAME begin/end ===" lines, which tests/usb4/capture-ibvinfo-tree.sh
# unpacks on the host.
# shellcheck disable=SC3045 # busybox

tree=${USB4VERBS_BACKEND_TREE:?not in the usb4 mode}
B=/opt/usb4verbs
TB=/sys/kernel/debug/tbloop
TBP=/sys/module/tbloop/parameters
TBV=/sys/kernel/debug/thunderbolt_ibverbs
failed=0
pass() { echo "--- PASS: usb4/$tree/$1"; }
fail() { echo "--- FAIL: usb4/$tree/$1 ($2)"; failed=1; }
skip() { echo "--- SKIP: usb4/$tree/$1 ($2)"; }
ndevs() { ls /sys/class/infiniband 2>/dev/null | grep -c '^usb4_rdma'; }
dev0=${USB4VERBS_DEV0:?} dev1=${USB4VERBS_DEV1:?} gid0=${USB4VERBS_GID0:?} gid1=${USB4VERBS_GID1:?}
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

# wait_active N SECONDS: until N usb4_rdma ports are ACTIVE.
wait_active() {
  i=0
  while [ $i -lt $(($2 * 10)) ]; do
    n=0
    for d in /sys/class/infiniband/usb4_rdma*; do
      grep -qs ACTIVE "$d/ports/1/state" && n=$((n + 1))
    done
    [ $n -ge "$1" ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# pingpong ITERS: ibv_rc_pingpong dev1 -> dev0 through our provider; the client's status.
pingpong() {
  taskset 1 timeout 60 ibv_rc_pingpong -d "$dev0" -g "$gid0" -n "$1" > /tmp/pp.server 2>&1 &
  pps=$!
  sleep 1
  taskset 2 timeout 50 ibv_rc_pingpong -d "$dev1" -g "$gid1" -n "$1" 127.0.0.1 2>&1
  pprc=$?
  j=0; while kill -0 $pps 2>/dev/null && [ $j -lt 100 ]; do sleep 0.1; j=$((j + 1)); done
  kill $pps 2>/dev/null; wait $pps
  return $pprc
}

# capture NAME (guest-capture.sh): the files ibvinfo reads and its live outputs, as
# base64; capture_traffic moves the messages between summary and summary.2.
capture_traffic() {
  [ "$(ndevs)" -gt 0 ] || return 125
  pingpong 20
}
. $B/guest-capture.sh

# doctor_finding NAME CHECK SEVERITY: doctor --json of capture NAME names CHECK with SEVERITY.
doctor_finding() {
  tr -d ' \n' < "/tmp/capture/$1/live.doctor.json" | grep -q "\"id\":\"$2\",\"verdict\":\"$3\""
}

all=$((2 * 2))
wait_active "$all" 30 || fail setup "$(ndevs) of $all ports ACTIVE"
echo "devices: $(ls /sys/class/infiniband | tr '\n' ' ')"

# 1. ibvinfo on the healthy bed.
capture healthy
if grep -q '^exit 0$' /tmp/capture/healthy/live.show.txt; then pass ibvinfo/show
else fail ibvinfo/show "$(tail -n 1 /tmp/capture/healthy/live.show.txt)"; fi
cat /tmp/capture/healthy/live.show.txt
cat /tmp/capture/healthy/live.doctor.txt

# 1b. GPU memory (issue 21): ibvinfo's per-device probe (NCCL's dma-buf probe through our
# provider) is in the JSON for every usb4 device, and doctor's gpu-memory check agrees
# with it: warn when a device refuses dma-buf MRs (hellas-main: EOPNOTSUPP), ok when all
# register.
show=$(tr -d ' \n' < /tmp/capture/healthy/live.show.json)
doc=$(tr -d ' \n' < /tmp/capture/healthy/live.doctor.json)
n=0
for d in $USB4VERBS_USB4_DEVS0 $USB4VERBS_USB4_DEVS1; do n=$((n + 1)); done
got=$(echo "$show" | grep -o '"gpu_memory":{"supported":[a-z]*,' | wc -l)
want=ok
echo "$show" | grep -q '"gpu_memory":{"supported":false' && want=warn
if [ "$got" -lt "$n" ]; then fail ibvinfo/gpu_memory "$got gpu_memory entries for $n usb4 devices"
elif ! echo "$doc" | grep -q "\"id\":\"gpu-memory\",\"verdict\":\"$want\""; then
  fail ibvinfo/gpu_memory "doctor gpu-memory is not $want: $(echo "$doc" | grep -o '"id":"gpu-memory"[^}]*')"
else
  pass ibvinfo/gpu_memory
  echo "    $(echo "$show" | grep -o '"gpu_memory":{[^}]*}' | sort | uniq -c | tr '\n' ' ')"
fi

# 1c. ibvinfo nccl (issue 30): the rails and GID index it prints for each host's peer carry
# ib_write_bw on every rail pair and NCCL's pattern (tests/usb4/ncclpattern.c), and doctor
# names a wrong NCCL_IB_HCA and accepts the printed lines.
# nccl_rails DEV: "<rail>,<rail>... <gid index>" from `ibvinfo nccl DEV`.
nccl_rails() {
  $B/ibvinfo nccl --no-color "$1" > /tmp/nccl.$1 2>&1 || return 1
  sed 's/^/    /' /tmp/nccl.$1 >&2
  r=$(sed -n 's/^export NCCL_IB_HCA==//p' /tmp/nccl.$1 | sed 's/:1//g')
  g=$(sed -n 's/^export NCCL_IB_GID_INDEX=//p' /tmp/nccl.$1)
  [ -n "$r" ] && [ -n "$g" ] && echo "$r $g"
}
set -- $(nccl_rails "$dev0") $(nccl_rails "$dev1")
rails0=$1 g0=$2 rails1=$3 g1=$4
want0=$(echo $USB4VERBS_USB4_DEVS0 | tr ' ' ','); want1=$(echo $USB4VERBS_USB4_DEVS1 | tr ' ' ',')
# The Apple slot (usb4_rdmaN with N%5 == 4) is never NCCL's: drop it from the expectation.
want0=$(echo "$want0" | tr ',' '\n' | grep -v '[49]$' | paste -sd,); want1=$(echo "$want1" | tr ',' '\n' | grep -v '[49]$' | paste -sd,)
if [ "$rails0" = "$want0" ] && [ "$rails1" = "$want1" ] && [ -n "$g0" ] && [ -n "$g1" ]; then
  pass "ibvinfo/nccl_settings (host 0: $rails0 gid $g0; host 1: $rails1 gid $g1)"
else
  fail ibvinfo/nccl_settings "host 0: '$rails0' gid '$g0' (want $want0); host 1: '$rails1' gid '$g1' (want $want1)"
fi
i=1
for a in $(echo "$rails0" | tr ',' ' '); do
  b=$(echo "$rails1" | cut -d, -f$i); i=$((i + 1))
  [ -n "$b" ] || continue
  p=$((18600 + i))
  taskset 1 timeout 60 ib_write_bw -d "$a" -x "$g0" -F -n 200 -p $p -u 20 --report_gbits > /tmp/wbw.server 2>&1 &
  ws=$!
  sleep 1
  taskset 2 timeout 60 ib_write_bw -d "$b" -x "$g1" -F -n 200 -p $p -u 20 --report_gbits 127.0.0.1 > /tmp/wbw.client 2>&1
  wc=$?; wait $ws; wsr=$?
  if [ $wc = 0 ] && [ $wsr = 0 ]; then pass "ibvinfo/nccl_settings/ib_write_bw_${a}_${b}"
  else sed 's/^/    | /' /tmp/wbw.server /tmp/wbw.client; fail "ibvinfo/nccl_settings/ib_write_bw_${a}_${b}" "client exit $wc, server exit $wsr"; fi
done
if [ -x $B/ncclpattern ]; then
  a=${rails0%%,*} b=${rails1%%,*}
  # Every tree but pleite-gda-8099446 leaves byte_len 0 in RECV_RDMA_WITH_IMM completions
  # (tests/usb4/guest-nccl.sh cites the lines): its summary case then SKIPs, as there.
  known=""
  [ "$tree" = pleite-gda-8099446 ] || known="$tree builds the RECV_RDMA_WITH_IMM ib_wc without byte_len (tests/usb4/guest-nccl.sh)"
  taskset 2 timeout 300 $B/ncclpattern --msgs 100 --cases '^h0-h1/qp(1|4)/(4KiB|1MiB)$' --name-prefix "usb4/$tree/ibvinfo/nccl_settings/ncclpattern/" \
    ${known:+--byte-len-zero-known "$known"} "$a" "$g0" "$b" "$g1" > /tmp/np.out 2>&1
  r=$?; cat /tmp/np.out
  grep -q '^--- ' /tmp/np.out || fail ibvinfo/nccl_settings/ncclpattern "ncclpattern exit $r without a result line"
  [ $r = 0 ] || failed=1
fi
NCCL_IB_HCA=mlx5_0 $B/ibvinfo doctor --no-color > /tmp/doc.hca 2>&1
if grep -q '^ERROR *nccl-env-devices *NCCL_IB_HCA=mlx5_0 matches no RDMA device' /tmp/doc.hca; then pass ibvinfo/doctor_wrong_nccl_ib_hca
else grep nccl-env /tmp/doc.hca; fail ibvinfo/doctor_wrong_nccl_ib_hca "no nccl-env-devices error for NCCL_IB_HCA=mlx5_0"; fi
env $(sed -n 's/^export //p' /tmp/nccl.$dev0) $B/ibvinfo doctor --no-color > /tmp/doc.hca 2>&1
if grep -q '^OK *nccl-env-devices' /tmp/doc.hca; then pass ibvinfo/doctor_nccl_settings_ok
else grep nccl-env /tmp/doc.hca; fail ibvinfo/doctor_nccl_settings_ok "doctor does not accept ibvinfo nccl's own lines"; fi

# 2. A trained-down link: doctor names it, on both ends of cable 0.
echo 1 > $TB/cable0/link_lanes
capture link-trained-down
cat /tmp/capture/link-trained-down/live.doctor.txt
if doctor_finding link-trained-down link-trained-down error; then pass ibvinfo/doctor_link_lanes_1
else fail ibvinfo/doctor_link_lanes_1 "no link-trained-down error"; fi
echo 2 > $TB/cable0/link_lanes; echo 10 > $TB/cable0/link_speed
$B/ibvinfo doctor --json > /tmp/speed10.json 2>&1
if tr -d ' \n' < /tmp/speed10.json | grep -q '"id":"link-trained-down","verdict":"error"'; then pass ibvinfo/doctor_link_speed_10
else fail ibvinfo/doctor_link_speed_10 "no link-trained-down error"; fi
echo 20 > $TB/cable0/link_speed

# 3. A cable pulled under ib_write_bw: both ends exit with an error, no hang; async
#    events seen by ibv_asyncwatch on each device; and the way NCCL, UCX and gloo wait
#    (tests/reliability/faults.c `waiter`: a thread blocked in ibv_get_async_event, an
#    epoll loop on the O_NONBLOCK async fd, a thread blocked in ibv_get_cq_event), one
#    process each on dev0: each wakes, then, still running, holds no fd or mapping of
#    the device while the module's unregistration completes (issue 25).
# Built with AddressSanitizer where run.sh could (faults.asan): the process that outlives
# its device must leak nothing (tests/reliability/faults.sh has the same, and why
# RDMAV_ALLOW_DISASSOC_DESTROY).
waiter=$B/faults waiter_env=
if [ -x $B/faults.asan ]; then
  waiter=$B/faults.asan
  waiter_env="ASAN_OPTIONS=detect_leaks=1:handle_segv=0:allow_user_segv_handler=1 RDMAV_ALLOW_DISASSOC_DESTROY=1"
fi
for k in async epoll cqevent; do
  ( timeout 80 env $waiter_env $waiter waiter $k > /tmp/waiter-$k.log 2>&1; echo $? > /tmp/waiter-$k.rc ) &
  n=0
  until grep -q "waiter $k ready" /tmp/waiter-$k.log 2> /dev/null || [ -s /tmp/waiter-$k.rc ]; do
    n=$((n + 1)); [ $n -ge 300 ] && break; sleep 0.1
  done
done
# ucx_perftest over rc_verbs (tag_bw, more messages than the run lasts) beside ib_write_bw,
# where the image's UCX lists rc_verbs on dev0 (tests/stock/guest.sh's transports; tcp
# carries the wire-up if ud_verbs cannot) and the device has an SRQ, which UCX's rc_verbs
# interface creates (without one it fails at ibv_create_srq, seen on hellas-main): no tree
# of 2026-12-02 has one, so this prints its SKIP.
ucx=0 ucx_why="no ucx_perftest with rc_verbs on $dev0 in this image"
max_srq=$(ibv_devinfo -v -d "$dev0" 2> /dev/null | sed -n 's/^[[:space:]]*max_srq:[[:space:]]*\([0-9]*\).*/\1/p' | head -n 1)
[ "${max_srq:-0}" = 0 ] && ucx_why="UCX's rc_verbs needs an SRQ and $dev0 offers none (max_srq ${max_srq:-?}: the module's)"
# Since issue 35 our provider gives an SRQ; UCX then wires rc_verbs up over TCP (tcp:aux: the
# module has no UD for ud_verbs), which UCX takes as an auxiliary transport from 1.16 on
# (docs/srq.md); the tcp netdev must be in UCX_NET_DEVICES, and UCX reserves 5 send SGEs
# where the module grants 4.
# ucx_info -v: "# Library version: 1.18.1" (1.18), "# Version 1.13.1" (1.13: openucx/ucx src/tools/info/build_info.c)
ucxver=$(ucx_info -v 2> /dev/null | sed -n 's/.*[Vv]ersion[=: ]*\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' | head -n 1)
ucxifc=$(ip -o -4 addr show | awk -v ip="${USB4VERBS_IP0:-}" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }')
if [ "${max_srq:-0}" != 0 ] && [ -n "$ucxver" ] && [ "$(echo "$ucxver" | awk '{ print ($1 > 1 || ($1 == 1 && $2 >= 16)) }')" != 1 ]; then
  ucx_why="UCX ${ucxver% *}.${ucxver#* } takes no TCP auxiliary transport (1.16+), and the module has no UD for ud_verbs: rc_verbs cannot wire up; the cable pull under ucx_perftest runs in the UCX boot instead (tests/usb4/guest-ucx.sh, Debian 13 userland, UCX 1.18: usb4/$tree/ucx/cable_pull/*)"
  max_srq=0
fi
if [ "${max_srq:-0}" != 0 ] && command -v ucx_perftest > /dev/null \
  && ucx_info -d 2> /dev/null | grep -B1 "Device: $dev0:1" | grep -q 'Transport: rc_verbs'; then
  ucx=1
  ucxenv="UCX_TLS=rc_verbs,tcp:aux UCX_RC_VERBS_TX_MIN_SGE=4 UCX_WARN_UNUSED_ENV_VARS=n"
  ( env $ucxenv UCX_NET_DEVICES="$dev0:1${ucxifc:+,$ucxifc}" timeout 90 ucx_perftest -p 13377 > /tmp/ucx.server 2>&1
    echo $? > /tmp/ucx.server.rc; cut -d' ' -f1 /proc/uptime > /tmp/ucx.server.end ) &
  i=0
  until grep -q ':3441 [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2> /dev/null; do
    i=$((i + 1)); [ $i -ge 150 ] && break; sleep 0.1
  done
  ( env $ucxenv UCX_NET_DEVICES="$dev1:1${ucxifc:+,$ucxifc}" timeout 90 ucx_perftest -p 13377 -t tag_bw -s 65536 -n 100000000 127.0.0.1 \
      > /tmp/ucx.client 2>&1; echo $? > /tmp/ucx.client.rc ) &
fi
timeout 70 $B/unsupported --async-watch "$dev0" 60 > /tmp/async0 2>&1 &
a0=$!
timeout 70 $B/unsupported --async-watch "$dev1" 60 > /tmp/async1 2>&1 &
a1=$!
taskset 1 timeout 90 ib_write_bw -d "$dev0" -x "$gid0" -n 1000000 -s 65536 > /tmp/wbw.server 2>&1 &
sp=$!
sleep 2
taskset 2 timeout 90 ib_write_bw -d "$dev1" -x "$gid1" -n 1000000 -s 65536 127.0.0.1 > /tmp/wbw.client 2>&1 &
cp=$!
sleep 6
pulled_at=$(cut -d' ' -f1 /proc/uptime)
echo 0 > $TB/cable0/plugged
i=0
while { kill -0 $cp 2>/dev/null || kill -0 $sp 2>/dev/null; } && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
hung=""
kill -0 $cp 2>/dev/null && hung="client"
kill -0 $sp 2>/dev/null && hung="$hung server"
kill $cp $sp 2>/dev/null; wait $cp; crc=$?; wait $sp; src=$?
sleep 1
kill $a0 $a1 2>/dev/null; wait $a0 $a1 2>/dev/null
echo "dmesg after the pull:"; dmesg | tail -n 15
echo "ib_write_bw client (exit $crc):"; cat /tmp/wbw.client
echo "ib_write_bw server (exit $src):"; cat /tmp/wbw.server
echo "async events $dev0:"; cat /tmp/async0
echo "async events $dev1:"; cat /tmp/async1
# 124 (timeout) or 143 (busybox timeout: the child got its SIGTERM) is a hang.
if [ -z "$hung" ] && [ $crc != 0 ] && [ $crc != 124 ] && [ $crc != 143 ] && [ $src != 124 ] && [ $src != 143 ]; then
  pass faults/cable_pull_ib_write_bw
else
  fail faults/cable_pull_ib_write_bw "hung: '$hung', client exit $crc, server exit $src"
fi
if grep -q ': event ' /tmp/async0 /tmp/async1; then pass faults/cable_pull_async_event
else fail faults/cable_pull_async_event "no async event on $dev0 or $dev1"; fi
if [ $ucx = 1 ]; then
  i=0
  while { [ ! -s /tmp/ucx.server.rc ] || [ ! -s /tmp/ucx.client.rc ]; } && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  urc=$(cat /tmp/ucx.server.rc 2> /dev/null || echo 999); ucrc=$(cat /tmp/ucx.client.rc 2> /dev/null || echo 999)
  echo "ucx_perftest server (exit $urc):"; grep -m 4 -iE 'error|fatal|failed|abort' /tmp/ucx.server; tail -n 2 /tmp/ucx.server
  echo "ucx_perftest client (exit $ucrc):"; grep -m 4 -iE 'error|fatal|failed|abort' /tmp/ucx.client; tail -n 2 /tmp/ucx.client
  # 124: timeout's kill; 129-192: a signal; UCX's own error exit is 255. UCX aborts the
  # process itself when a verb fails with the removed device's EIO: its policy, as
  # tests/reliability/faults.sh says.
  for side in server client; do
    r=$(cat /tmp/ucx.$side.rc 2> /dev/null || echo 999)
    if [ "$r" = 134 ] && grep -qE 'Fatal: .*(CQ -5|returned 5)' /tmp/ucx.$side; then
      skip faults/cable_pull_ucx_perftest_$side "UCX aborted itself on the EIO of a verb (ucs_fatal): UCX's policy"
    elif [ "$r" -lt 124 ] || [ "$r" -gt 192 ]; then
      pass faults/cable_pull_ucx_perftest_$side
    else
      fail faults/cable_pull_ucx_perftest_$side "exit $r (124: a hang, 129-192: a signal)"
    fi
  done
  # The side on the pulled device learns it from the device (DEVICE_FATAL, EIO), not from a
  # transport timeout: its log names the device's event or errno (as
  # tests/reliability/faults.sh checks it). The seconds are a note, not a bound: under TCG
  # on a loaded host the same cause took from under 1 s to over 5 s.
  end=$(cat /tmp/ucx.server.end 2> /dev/null || echo 9999)
  why=$(grep -m1 -oE 'IB Async event on [^ ]+: local catastrophic error|Fatal: .*(CQ -5|returned 5)|[A-Za-z_ ()]*(ret=5|returned 5)[^A-Za-z]*Input/output error' /tmp/ucx.server)
  r=$(cat /tmp/ucx.server.rc 2> /dev/null || echo 999)
  if [ "$r" != 999 ] && [ "$r" != 124 ] && [ -n "$why" ]; then
    pass faults/cable_pull_ucx_perftest_server_ended_from_device
    echo "    note: pulled at uptime $pulled_at s, the server ended at $end s: $why"
  else
    fail faults/cable_pull_ucx_perftest_server_ended_from_device "pulled at uptime $pulled_at s, the server's end: $end (rc $r), no device event or EIO in its log"
  fi
else
  skip faults/cable_pull_ucx_perftest "$ucx_why"
fi
i=0
while [ ! -s /tmp/waiter-async.rc ] || [ ! -s /tmp/waiter-epoll.rc ] || [ ! -s /tmp/waiter-cqevent.rc ]; do
  i=$((i + 1)); [ $i -ge 600 ] && break; sleep 0.1
done
for k in async epoll cqevent; do
  echo "faults waiter $k:"; grep -v '^--- ' /tmp/waiter-$k.log
  # rel/faults/waiter_<k>_<check> -> usb4/<tree>/faults/cable_pull_waiter_<k>_<check>
  sed -n "s#^--- \([A-Z]*\): rel/faults/#--- \1: usb4/$tree/faults/cable_pull_#p" /tmp/waiter-$k.log
  grep -q '^--- FAIL' /tmp/waiter-$k.log && failed=1
  # How long after the pull it woke (the watcher polls once a second; issue 25 aimed at
  # 2 s): a note, not a bound, since under TCG on a loaded host it measures the host
  # (2.4 s seen at load 15). That it woke is waiter_<k>_woke above.
  woke=$(sed -n 's/.*woke at uptime \([0-9.]*\) s.*/\1/p' /tmp/waiter-$k.log | head -n 1)
  [ -n "$woke" ] && echo "    note: waiter $k woke $(awk -v w="$woke" -v p="$pulled_at" 'BEGIN { printf "%.2f", w - p }') s after the pull"
  rc=$(cat /tmp/waiter-$k.rc 2> /dev/null || echo 999)
  if [ "$rc" -lt 124 ] && grep -q '^--- PASS: rel/faults/waiter_'$k'_woke' /tmp/waiter-$k.log; then
    pass faults/cable_pull_waiter_${k}_process
  else
    fail faults/cable_pull_waiter_${k}_process "faults waiter $k exit $rc (124+: a hang or a signal)"
  fi
  if [ "$waiter" = $B/faults.asan ]; then
    if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer' /tmp/waiter-$k.log; then
      fail faults/cable_pull_waiter_${k}_asan "$(grep -m1 'SUMMARY: AddressSanitizer\|ERROR: AddressSanitizer' /tmp/waiter-$k.log)"
    else
      pass faults/cable_pull_waiter_${k}_asan
    fi
  fi
done
capture cable-pulled
cat /tmp/capture/cable-pulled/live.doctor.txt

echo 1 > $TB/cable0/plugged
wait_active "$all" 30 || fail faults/cable_replug "$(ndevs) of $all ports ACTIVE 30 s after the replug"

# 4. Dropped frames under traffic through our provider: recovered, or reported as an
#    error completion the way the module reports a loss, within bounded time.
before=$(sed -n 's/^frames_dropped_fault: //p' $TB/stats)
echo 3 > $TBP/drop_count
taskset 1 timeout 60 ibv_rc_pingpong -d "$dev0" -g "$gid0" -n 50 > /tmp/drop.server 2>&1 &
sp=$!
sleep 1
taskset 2 timeout 50 ibv_rc_pingpong -d "$dev1" -g "$gid1" -n 50 127.0.0.1 > /tmp/drop.client 2>&1
crc=$?
i=0; while kill -0 $sp 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill $sp 2>/dev/null; wait $sp; src=$?
dropped=$(($(sed -n 's/^frames_dropped_fault: //p' $TB/stats) - before))
echo "drop_count=3: dropped $dropped, client exit $crc, server exit $src"
tail -n 3 /tmp/drop.client; tail -n 3 /tmp/drop.server
if [ "$dropped" -ge 1 ] && [ $crc != 124 ] && [ $src != 124 ] &&
  { [ $crc = 0 ] || grep -qiE 'failed status|error' /tmp/drop.client; }; then
  pass faults/drop_count_3
else
  fail faults/drop_count_3 "dropped $dropped, client exit $crc, server exit $src"
fi
echo 0 > $TBP/drop_count

# 5. Bad input (tests/reliability/badinput.c) and what the module does not offer.
for prog in badinput unsupported; do
  for c in $($B/$prog --list); do
    timeout 60 $B/$prog --case "$c" > /tmp/$prog.$c.out 2>/tmp/$prog.$c.err
    rc=$?
    sed "s#rel/$prog/#usb4/$tree/faults/$prog/#" /tmp/$prog.$c.out
    grep -q "^--- [A-Z]*: rel/$prog/$c " /tmp/$prog.$c.out ||
      fail "faults/$prog/$c" "no result: exit $rc (124: hang killed; 128+N: signal N): $(tail -n 2 /tmp/$prog.$c.err | tr '\n' ' ')"
  done
done

bad=$(dmesg | grep -E 'BUG:|Oops|WARNING:|Call Trace' | head -n 3)
if [ -z "$bad" ]; then pass faults/no_kernel_warnings; else echo "$bad"; fail faults/no_kernel_warnings "$(echo "$bad" | head -n 1)"; fi
exit $failed
