#!/bin/sh
# tbloop's fault knobs against the real module, run in the guest as VM_GUEST_SCRIPT after
# the usb4 setup (wip/bed's tests/vm usb4 mode: tbloop and thunderbolt_ibverbs loaded,
# both hosts' devices ACTIVE, ibverbs-utils in the image). Prints go-test-style lines
# tbloop/<check>. Every check reads what tbloop and the kernel report; none times itself.
# shellcheck disable=SC3045 # busybox

D=/sys/kernel/debug/tbloop
P=/sys/module/tbloop/parameters
failed=0
pass() { echo "--- PASS: tbloop/$1"; }
fail() { echo "--- FAIL: tbloop/$1 ($2)"; failed=1; }
stat() { sed -n "s/^$1: //p" "$D/stats"; }
ndevs() { ls /sys/class/infiniband 2>/dev/null | grep -c '^usb4_rdma'; }

mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
[ -d "$D" ] || { fail setup "no $D"; exit 1; }
dev0=${USB4VERBS_DEV0:?} dev1=${USB4VERBS_DEV1:?} gid0=${USB4VERBS_GID0:?} gid1=${USB4VERBS_GID1:?}
xd=/sys/bus/thunderbolt/devices/0-1

# wait_devs N SECONDS: until N usb4_rdma devices are ACTIVE.
wait_devs() {
  i=0
  while [ $i -lt $(($2 * 10)) ]; do
    n=0
    for d in /sys/class/infiniband/usb4_rdma*; do
      [ -e "$d/ports/1/state" ] && grep -q ACTIVE "$d/ports/1/state" && n=$((n + 1))
    done
    [ $n -ge "$1" ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# pingpong ITERS: ibv_rc_pingpong dev1 -> dev0; prints the client's output, returns its status.
pingpong() {
  taskset 1 timeout 60 ibv_rc_pingpong -d "$dev0" -g "$gid0" -n "$1" > /tmp/pp.server 2>&1 &
  sp=$!
  sleep 1
  taskset 2 timeout 50 ibv_rc_pingpong -d "$dev1" -g "$gid1" -n "$1" 127.0.0.1 > /tmp/pp.client 2>&1
  rc=$?
  i=0
  while kill -0 $sp 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
  cat /tmp/pp.client
  return $rc
}

# Every rail of both hosts: the module's lanes (2 by default) per cable per host. The
# setup returns once one device per host is up; the others follow.
all=$((${TBLOOP_RAILS_PER_CABLE:-2} * 2 * $(cat "$P/cables")))
wait_devs "$all" 30 || { fail setup "$(ndevs) of $all devices ACTIVE"; exit 1; }
echo "devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
head -n 17 "$D/stats"

# 1. A trained-down link: sysfs shows it at once on both ends.
echo 1 > "$D/cable0/link_lanes"; echo 10 > "$D/cable0/link_speed"
got="$(cat "$xd/rx_speed") $(cat "$xd/tx_lanes") $(cat /sys/bus/thunderbolt/devices/1-5/rx_lanes)"
echo 2 > "$D/cable0/link_lanes"; echo 20 > "$D/cable0/link_speed"
back="$(cat "$xd/rx_speed") $(cat "$xd/rx_lanes")"
if [ "$got" = "10.0 Gb/s 1 1" ] && [ "$back" = "20.0 Gb/s 2" ]; then pass trained_down_link
else fail trained_down_link "read '$got', after restoring '$back'"; fi

# 2. Dropped frames: the module sees them lost, tbloop counts exactly what it dropped.
before=$(stat frames_dropped_fault)
echo 3 > "$P/drop_count"
out=$(pingpong 20); rc=$?
echo "$out"
dropped=$(($(stat frames_dropped_fault) - before))
echo "ibv_rc_pingpong with 3 frames dropped: exit $rc"
grep -hE 'retransmit|timeout|rnr' /sys/kernel/debug/thunderbolt_ibverbs/summary 2>/dev/null | grep -v ': 0$' | head
if [ "$dropped" = 3 ] && [ "$(cat $P/drop_count)" = 0 ]; then pass drop_count
else fail drop_count "dropped $dropped, knob left at $(cat $P/drop_count)"; fi

# 3. A cable pulled under traffic: the application gets an error, nothing hangs, the
#    devices go; plugged back, they return and move data again.
taskset 1 timeout 60 ibv_rc_pingpong -d "$dev0" -g "$gid0" -n 100000 > /tmp/pull.server 2>&1 &
sp=$!
sleep 1
taskset 2 timeout 60 ibv_rc_pingpong -d "$dev1" -g "$gid1" -n 100000 127.0.0.1 > /tmp/pull.client 2>&1 &
cp=$!
sleep 3
echo 0 > "$D/cable0/plugged"
i=0
while { kill -0 $cp 2>/dev/null || kill -0 $sp 2>/dev/null; } && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
hung=""
kill -0 $cp 2>/dev/null && hung="client"
kill -0 $sp 2>/dev/null && hung="$hung server"
kill $cp $sp 2>/dev/null; wait $cp; crc=$?; wait $sp; src=$?
echo "client after the pull (exit $crc): $(tail -n 3 /tmp/pull.client | tr '\n' ' ')"
echo "server after the pull (exit $src): $(tail -n 3 /tmp/pull.server | tr '\n' ' ')"
left=$(ndevs)
plugged=$(cat "$D/cable0/plugged")
xds=$(ls /sys/bus/thunderbolt/devices | grep -c -- '-[0-9a-f]*$')
if [ -z "$hung" ] && [ "$crc" != 0 ] && [ "$left" = 0 ] && [ "$plugged" = 0 ] && [ "$xds" = 0 ]; then
  pass cable_pull_under_traffic
else
  fail cable_pull_under_traffic "hung: '${hung}', client exit $crc, devices left $left, xdomains left $xds"
fi
echo "requests_failed_unplug: $(stat requests_failed_unplug), frames_canceled: $(stat frames_canceled)"

echo 1 > "$D/cable0/plugged"
if wait_devs "$all" 30; then
  out=$(pingpong 50); rc=$?
  echo "$out" | tail -n 2
  if [ $rc = 0 ]; then pass cable_replug; else fail cable_replug "rc_pingpong after the replug: exit $rc"; fi
else
  fail cable_replug "$(ndevs) of $all devices ACTIVE 30 s after the replug"
fi

# 4. A rejected ring allocation: the module binds one rail fewer; the next plug heals it.
echo 0 > "$D/cable0/plugged"
rej=$(stat ring_alloc_rejected)
echo 1 > "$P/reject_ring_alloc"
echo 1 > "$D/cable0/plugged"
sleep 5
got=$(ndevs)
rejected=$(($(stat ring_alloc_rejected) - rej))
dmesg | grep -E 'rejecting .* ring allocation|thunderbolt_ibverbs.*(fail|error|-12)' | tail -n 5
echo 0 > "$D/cable0/plugged"; echo 1 > "$D/cable0/plugged"
healed=0
wait_devs "$all" 30 && healed=1
if [ "$rejected" = 1 ] && [ "$got" -lt "$all" ] && [ $healed = 1 ]; then
  pass reject_ring_alloc
else
  fail reject_ring_alloc "rejected $rejected, devices with the fault $got of $all, after the replug $(ndevs)"
fi

# Nothing of the above may have oopsed or warned.
bad=$(dmesg | grep -E 'BUG:|Oops|WARNING:|Call Trace|list_(add|del) corruption|refcount_t' | head -n 5)
if [ -z "$bad" ]; then pass no_kernel_warnings; else echo "$bad"; fail no_kernel_warnings "$(echo "$bad" | head -n 1)"; fi
cat "$D/stats"
exit $failed
