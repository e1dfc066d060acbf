#!/bin/sh
# tests/reliability/faults.sh: faults in the test VM (busybox sh), run by guest.sh last
# because it deletes rxe0. Prints go-test-style result lines rel/faults/<case>.
#  1. `faults enomem`: the kernel refusing memory (faults.c).
#  2. While ib_write_bw runs rxe1 -> rxe0 and `faults watch` holds rxe0: vethA goes down
#     and up (PORT_ERR, PORT_ACTIVE), then `rdma link delete rxe0`. The watcher checks
#     the async events and later verbs; three `faults waiter` processes wait on rxe0 the
#     way NCCL, UCX and gloo do (blocked ibv_get_async_event, epoll on the async fd,
#     blocked ibv_get_cq_event); this script checks that every process ends by itself,
#     none by a signal, and that the link is gone afterwards.
# Environment from the harness: USB4VERBS_DEV0/1, _GID0/1, _IP0, _NETDEV0. BIN is
# where the programs are (default /opt/usb4verbs/bin).
BIN=${BIN:-/opt/usb4verbs/bin}
DEV0=${USB4VERBS_DEV0:-rxe0} DEV1=${USB4VERBS_DEV1:-rxe1}
GID0=${USB4VERBS_GID0:-1} GID1=${USB4VERBS_GID1:-1}
IP0=${USB4VERBS_IP0:-10.11.0.1} NET0=${USB4VERBS_NETDEV0:-vethA}
IP=/usr/sbin/ip; [ -x $IP ] || IP=ip
RDMA=/usr/sbin/rdma; [ -x $RDMA ] || RDMA=rdma
W=/tmp/rel/faults
mkdir -p $W
FAILED=0

result() { # STATUS NAME NOTE
  echo "--- $1: rel/faults/$2 (0.00s)"
  [ -n "$3" ] && echo "    $3"
  [ "$1" = FAIL ] && FAILED=1
  return 0
}
# verdict NAME RC WHAT: a process's exit code, from `timeout`: 124+ is a hang or a signal.
verdict() {
  if [ "$2" -ge 124 ]; then result FAIL "$1" "$3 exit $2 (timeout kills give 124/143, signals 128+N)"
  else result PASS "$1" "$3 ended by itself, exit $2"; fi
}

# 1. ENOMEM and refused mmaps.
timeout 120 "$BIN/faults" enomem > $W/enomem.log 2>&1
rc=$?
cat $W/enomem.log
grep -q '^--- ' $W/enomem.log || result FAIL enomem_process "no result lines, exit $rc"
[ $rc -ge 124 ] && result FAIL enomem_process "exit $rc (hang or signal)"

# 2. Port down/up and link delete under load.
command -v ib_write_bw > /dev/null || { result SKIP link_delete "ib_write_bw not in the image"; exit $FAILED; }
# The waiters first, each ready before the perftest pair starts: six programs starting
# at once on the VM's two CPUs made the client miss its start before vethA went down.
for k in async epoll cqevent; do
  ( timeout 120 "$BIN/faults" waiter $k > $W/waiter-$k.log 2>&1; echo $? > $W/waiter-$k.rc ) &
  n=0
  until grep -q "waiter $k ready" $W/waiter-$k.log 2> /dev/null || [ -s $W/waiter-$k.rc ]; do
    n=$((n + 1)); [ $n -ge 300 ] && break; sleep 0.1
  done
done
( timeout 90 taskset 1 ib_write_bw -d "$DEV0" -x "$GID0" -F -D 20 > $W/srv.log 2>&1; echo $? > $W/srv.rc ) &
n=0
# perftest's port 18515 = 0x4853 in LISTEN (0A).
until grep -q ':4853 [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2> /dev/null; do
  n=$((n + 1)); [ $n -ge 150 ] && break; sleep 0.1
done
( timeout 90 taskset 2 ib_write_bw -d "$DEV1" -x "$GID1" -F -D 20 "$IP0" > $W/cli.log 2>&1; echo $? > $W/cli.rc ) &
( FAULT_SECS=25 timeout 90 "$BIN/faults" watch > $W/watch.log 2>&1; echo $? > $W/watch.rc ) &
sleep 5
echo "# faults: $NET0 down"
$IP link set "$NET0" down
sleep 3
echo "# faults: $NET0 up"
$IP link set "$NET0" up
sleep 4
echo "# faults: rdma link delete $DEV0 (uptime $(cut -d' ' -f1 /proc/uptime))"
( timeout 120 $RDMA link delete "$DEV0"; echo $? > $W/del.rc ) &
n=0
while [ ! -s $W/watch.rc ] || [ ! -s $W/srv.rc ] || [ ! -s $W/cli.rc ] || [ ! -s $W/del.rc ] \
  || [ ! -s $W/waiter-async.rc ] || [ ! -s $W/waiter-epoll.rc ] || [ ! -s $W/waiter-cqevent.rc ]; do
  n=$((n + 1)); [ $n -ge 1500 ] && break; sleep 0.1
done
echo "# faults: link delete returned at uptime $(cut -d' ' -f1 /proc/uptime)"
cat $W/watch.log
grep -q '^--- ' $W/watch.log || result FAIL watch_process "no result lines"
verdict watch_process "$(cat $W/watch.rc 2> /dev/null || echo 999)" "faults watch"
for k in async epoll cqevent; do
  cat $W/waiter-$k.log
  grep -q '^--- ' $W/waiter-$k.log || result FAIL waiter_${k}_process "no result lines"
  verdict waiter_${k}_process "$(cat $W/waiter-$k.rc 2> /dev/null || echo 999)" "faults waiter $k"
done
verdict perftest_server "$(cat $W/srv.rc 2> /dev/null || echo 999)" "ib_write_bw server on $DEV0"
verdict perftest_client "$(cat $W/cli.rc 2> /dev/null || echo 999)" "ib_write_bw client on $DEV1"
tail -n 3 $W/srv.log | sed 's/^/    server| /'
tail -n 3 $W/cli.log | sed 's/^/    client| /'
drc=$(cat $W/del.rc 2> /dev/null || echo 999)
if [ "$drc" = 0 ] && ! $RDMA link show 2> /dev/null | grep -q "link $DEV0/"; then
  result PASS link_deleted "rdma link delete $DEV0 returned 0 and the link is gone"
else
  result FAIL link_deleted "rdma link delete $DEV0 exit $drc; links: $($RDMA link show 2>&1 | tr '\n' ';')"
fi
exit $FAILED
