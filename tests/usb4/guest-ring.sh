#!/bin/sh
# tests/usb4/guest-ring.sh: the four-host ring of pleite-main's docs/MULTI-PORT-TOPOLOGY.md
# ("Topology B": A-B, B-C, C-D, D-A, two ports a host) on the usb4 bed, in the guest, as
# VM_GUEST_SCRIPT of a boot with USB4_TBLOOP_TOPOLOGY=ring4 (tests/usb4/run.sh
# usb4_ring_boot). tbloop gives every port its own domain and UUID (tbloop/README.md,
# "Topologies"); the module then registers per host one device per peer and rail.
# Result lines usb4/<tree>/ring4/<case> through our provider; the same cases through the
# module's C provider (/opt/usb4verbs/upstream, tests/bench/upstream-provider.sh) follow
# as the uncounted baseline "cprovider| --- PASS/FAIL: usb4/<tree>/ring4/<case>", as
# guest-nccl.sh prints it. Settings (ring.conf): RING_MSGS (100), RING_BIG_MSGS (10),
# RING_CASES (an ERE over the ncclpattern cases), RING_CPROVIDER (1), RING_CAPTURE (0).
# shellcheck disable=SC3043,SC3045 # busybox ash has local, ulimit
tree=${USB4VERBS_BACKEND_TREE:?not in the usb4 mode}
BIN=/opt/usb4verbs
[ -r $BIN/ring.conf ] && . $BIN/ring.conf
P=usb4/$tree/ring4
failed=0
LP=""
pass() { echo "$LP--- PASS: $P/$1"; }
fail() { echo "$LP--- FAIL: $P/$1 ($2)"; [ -z "$LP" ] && failed=1; }
skip() { echo "$LP--- SKIP: $P/$1 ($2)"; }

IP=${USB4VERBS_IP0:-10.77.0.1}

# gidx DEV: the index of DEV's RoCE v2 GID for IP (as /init's gid_index).
gidx() {
  want=$(echo "$IP" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}')
  for g in "/sys/class/infiniband/$1/ports/1/gids/"*; do
    i=${g##*/}
    [ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
    [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return 0; }
  done
  return 1
}

# listening PORT, wait_listen PID PORT
. $BIN/guest-listen.sh

# pingpong NAME SDEV CDEV PORT: ibv_rc_pingpong server on SDEV, client on CDEV.
pingpong() {
  timeout 120 ibv_rc_pingpong -d "$2" -g "$(gidx "$2")" -p "$4" -n 100 > "/tmp/ring.pp.$4" 2>&1 &
  sp=$!
  wait_listen $sp "$4"
  cout=$(timeout 100 ibv_rc_pingpong -d "$3" -g "$(gidx "$3")" -p "$4" -n 100 127.0.0.1 2>&1); crc=$?
  wait $sp; src=$?
  if [ $crc = 0 ] && [ $src = 0 ] && echo "$cout" | grep -q 'usec/iter'; then
    pass "$1"
  else
    fail "$1" "client $3 exit $crc: $(echo "$cout" | tail -n 1); server $2 exit $src: $(tail -n 1 "/tmp/ring.pp.$4")"
  fi
}

# USB4_TBLOOP_TOPOLOGY=twocable: two hosts, two cables between them (the guide's
# "Topology A"). The module takes one cable per remote host on a stock kernel
# (native_same_peer_multicable: limited, hellas-main:kernel/peer.c:153-166): one cable's
# rails per host, and ibvinfo doctor says so (multi-cable-same-host).
if [ "${USB4VERBS_USB4_HOSTS:-2}" = 2 ] && [ "$(cat /sys/module/tbloop/parameters/cables 2>/dev/null)" = 2 ]; then
  P=usb4/$tree/twocable
  xa=$(cat /sys/bus/thunderbolt/devices/0-1/unique_id 2>/dev/null) xb=$(cat /sys/bus/thunderbolt/devices/0-3/unique_id 2>/dev/null)
  mode=$(sed -n 's/^native_same_peer_multicable: //p' /sys/kernel/debug/thunderbolt_ibverbs/summary)
  n0=$(echo $USB4VERBS_USB4_DEVS0 | wc -w) n1=$(echo $USB4VERBS_USB4_DEVS1 | wc -w)
  echo "# twocable: XDomains 0-1 $xa, 0-3 $xb; native_same_peer_multicable: $mode; host 0: $USB4VERBS_USB4_DEVS0; host 1: $USB4VERBS_USB4_DEVS1"
  ls /sys/bus/thunderbolt/devices/ | tr '\n' ' ' | sed 's/^/# twocable: bus: /'; echo
  dmesg | grep -E 'limiting remote host|probe with driver thunderbolt_ibverbs' | sed 's/^/# twocable dmesg: /'
  if [ -n "$xa" ] && [ "$xa" = "$xb" ] && [ "$mode" = limited ] && [ "$n0" = 2 ] && [ "$n1" = 2 ]; then
    pass one_cable_per_host
  else
    fail one_cable_per_host "want both cables' XDomains on host B's UUID, native_same_peer_multicable limited, 2 devices a host; have $xa/$xb, $mode, $n0 and $n1"
  fi
  if [ -x $BIN/ibvinfo ] && [ -r $BIN/guest-capture.sh ]; then
    B=$BIN TBV=/sys/kernel/debug/thunderbolt_ibverbs
    ndevs() { ls /sys/class/infiniband 2>/dev/null | grep -c '^usb4_rdma'; }
    capture_traffic() { pingpong summary2 "$USB4VERBS_DEV0" "$USB4VERBS_DEV1" 18519; }
    . $BIN/guest-capture.sh
    capture two-cables
    grep -E 'multi-cable' /tmp/capture/two-cables/live.doctor.txt
    if tr -d ' \n' < /tmp/capture/two-cables/live.doctor.json | grep -q '"id":"multi-cable-same-host","verdict":"warn"'; then
      pass ibvinfo/doctor_multi_cable
    else
      fail ibvinfo/doctor_multi_cable "doctor does not warn: $(grep multi-cable /tmp/capture/two-cables/live.doctor.txt)"
    fi
  fi
  exit $failed
fi

if [ "${USB4VERBS_USB4_HOSTS:-2}" != 4 ]; then
  skip devices "not the ring4 topology (USB4_TBLOOP_TOPOLOGY=ring4 on the host)"
  exit 0
fi

# What the guide's table says (host h's port 0 and port 1 reach these hosts), and the
# module's names: tbloop numbers the domains host by host, port by port (domain 2h+p),
# the module names a rail usb4_rdma<domain * 5 + lane>
# (hellas-main:kernel/ibdev.c:9352 tbv_ibdev_rail_name_index).
expect_peer() {
  case $1:$2 in
    0:0) echo 1 ;; 0:1) echo 3 ;; 1:0) echo 0 ;; 1:1) echo 2 ;;
    2:0) echo 1 ;; 2:1) echo 3 ;; 3:0) echo 2 ;; 3:1) echo 0 ;;
  esac
}
expected=""
for h in 0 1 2 3; do
  for p in 0 1; do
    for l in 0 1; do
      expected="$expected usb4_rdma$(((2 * h + p) * 5 + l)):$h:$(expect_peer $h $p)"
    done
  done
done

# dev_to H PEER RAIL: host H's RAIL-th device (0 or 1, by name) that reaches host PEER,
# from what the setup read (USB4VERBS_USB4_PEERS: DEV:HOST:PEER).
dev_to() {
  for e in $USB4VERBS_USB4_PEERS; do
    case $e in *:"$1":"$2") echo "${e%%:*}" ;; esac
  done | sed 's/usb4_rdma//' | sort -n | sed -n "$(($3 + 1))s/^/usb4_rdma/p"
}

echo "# ring4: devices per host: 0: $USB4VERBS_USB4_DEVS0; 1: $USB4VERBS_USB4_DEVS1; 2: $USB4VERBS_USB4_DEVS2; 3: $USB4VERBS_USB4_DEVS3"
echo "# ring4: DEV:HOST:PEER $USB4VERBS_USB4_PEERS"
cat /sys/kernel/debug/tbloop/topology 2>/dev/null | sed 's/^/# tbloop: /'

# 1. Every host has its two peers' devices, two rails each, named as the module names
# them, each reaching the host the guide's table says; nothing else.
why=""
for e in $expected; do
  d=${e%%:*}
  case " $USB4VERBS_USB4_PEERS " in
    *" $e "*) grep -q ACTIVE "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null || why="${why:+$why; }$d not ACTIVE" ;;
    *) why="${why:+$why; }want $e (device:host:peer host), have $(echo " $USB4VERBS_USB4_PEERS " | grep -o " $d:[^ ]*" || echo none)" ;;
  esac
done
n=$(ls /sys/class/infiniband | grep -c '^usb4_rdma')
[ "$n" = 16 ] || why="${why:+$why; }$n usb4_rdma devices, want 16"
if [ -z "$why" ]; then pass devices; else fail devices "$why"; fi

# 2. GUIDs as the module makes them: node_guid = 0x0200544256524253 + (backend << 56) +
# (peer << 24) + rail (hellas-main:kernel/ibdev.c:9282), with the peer and rail numbers
# and domain its "registered ... ib_device" line gave; 8 peers of 2 rails, 16 GUIDs.
why="" peers="" guids=""
for e in $expected; do
  d=${e%%:*} r=${e#*:}; h=${r%%:*}
  line=$(dmesg | grep "registered [a-z]* ib_device $d rail=" | tail -n 1)
  pr=$(echo "$line" | sed -n 's/.* rail=peer\([0-9]*\)\/\([0-9]*\) domain=\([0-9]*\) guid=\([0-9a-f]*\).*/\1 \2 \3 \4/p')
  [ -n "$pr" ] || { why="${why:+$why; }$d: no registration line in dmesg"; continue; }
  set -- $pr
  g=$(tr -d ':\n' < "/sys/class/infiniband/$d/node_guid")
  [ "$g" = "$4" ] || why="${why:+$why; }$d: sysfs node_guid $g, the module logged $4"
  dom=$(((${d#usb4_rdma}) / 5))
  [ "$3" = "$dom" ] || why="${why:+$why; }$d: domain $3, want $dom"
  off=$((0x$g - 0x0200544256524253 - ($1 << 24) - $2))
  [ $((off & ((1 << 56) - 1))) = 0 ] || why="${why:+$why; }$d: GUID $g is not base + backend<<56 + peer $1<<24 + rail $2"
  case " $guids " in *" $g "*) why="${why:+$why; }$d: GUID $g twice" ;; esac
  guids="$guids $g"
  peers="$peers $1/$2"
  echo "# ring4: $d host $h peer-number $1 rail $2 domain $3 guid $g"
done
np=$(echo "$peers" | tr ' ' '\n' | sed -n 's#/.*##p' | sort -u | grep -c .)
[ "$np" = 8 ] || why="${why:+$why; }$np peer numbers, want 8"
if [ -z "$why" ]; then pass guids; else fail guids "$why"; fi

# 3-4. Every device through libibverbs: listed by ibv_devices with its GUID, opened by
# ibv_devinfo -v with its port ACTIVE. Through ours, then the C provider.
UP=$BIN/upstream/libusb4_rdma
drv=/etc/libibverbs.d/usb4_rdma.driver
have_c=0
[ -f $UP-rdmav34.so ] && [ "${RING_CPROVIDER:-1}" != 0 ] && have_c=1
# as_c CMD...: CMD with only the module's C provider serving usb4 devices.
cprov_on() { [ -f $drv ] && mv $drv /tmp/usb4_rdma.driver.saved; export RDMAV_DRIVERS=$UP; LP="cprovider| "; }
cprov_off() { [ -f /tmp/usb4_rdma.driver.saved ] && mv /tmp/usb4_rdma.driver.saved $drv; unset RDMAV_DRIVERS; LP=""; }

list_and_open() {
  out=$(ibv_devices 2>&1); rc=$?
  why=""
  [ $rc = 0 ] || why="exit $rc"
  for e in $expected; do
    d=${e%%:*}
    echo "$out" | grep -Eq "^[[:space:]]*$d[[:space:]]+$(tr -d ':\n' < "/sys/class/infiniband/$d/node_guid")\$" \
      || why="${why:+$why; }$d not listed with its GUID"
  done
  if [ -z "$why" ]; then pass ibv_devices; else echo "$out"; fail ibv_devices "$why"; fi
  why=""
  for e in $expected; do
    d=${e%%:*}
    out=$(ibv_devinfo -v -d "$d" 2>&1) || { why="${why:+$why; }$d: $(echo "$out" | tail -n 1)"; continue; }
    echo "$out" | grep -q "node_guid:[[:space:]]*$(cat "/sys/class/infiniband/$d/node_guid")" || why="${why:+$why; }$d: node_guid differs"
    echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE' || why="${why:+$why; }$d: not PORT_ACTIVE"
  done
  if [ -z "$why" ]; then pass ibv_devinfo_v; else fail ibv_devinfo_v "$why"; fi
}

# The ring's connections: host h's device to h+1 (rail 0) sends to h+1's device to h.
ring_args() {
  for h in 0 1 2 3; do
    r=$(((h + 1) % 4))
    s=$(dev_to $h $r 0) d=$(dev_to $r $h 0)
    echo "$s $(gidx "$s") $d $(gidx "$d")"
  done
}
# The rails: host A's two devices to B send to B's two devices to A.
rails_args() {
  for l in 0 1; do
    s=$(dev_to 0 1 $l) d=$(dev_to 1 0 $l)
    echo "$s $(gidx "$s") $d $(gidx "$d")"
  done
}

# Known module behaviour the NCCL pattern meets (guest-known.sh).
. $BIN/guest-known.sh
torn=$(nccl_torn_known "$tree")

# nccl LABEL ARGS...: ncclpattern --multi LABEL; its result lines become $P/nccl/...
nccl() {
  label=$1
  shift
  # Options first: ncclpattern reads them up to the first non-option.
  [ -n "${RING_CASES:-}" ] && set -- --cases "$RING_CASES" "$@"
  [ -n "$torn" ] && set -- --cts-torn-known "$torn" "$@"
  set -- timeout "${RING_TIMEOUT:-1200}" $BIN/ncclpattern --msgs "${RING_MSGS:-100}" --big-msgs "${RING_BIG_MSGS:-10}" \
    --stall-s 30 --name-prefix "$P/nccl/" --line-prefix "$LP" --multi "$label" "$@"
  rm -f /tmp/ring.nccl.rc
  { "$@" 2>&1; echo $? > /tmp/ring.nccl.rc; } | tee /tmp/ring.nccl.out
  rc=$(cat /tmp/ring.nccl.rc 2>/dev/null || echo 99)
  if [ "$rc" != 0 ]; then
    grep -q '^.*--- FAIL' /tmp/ring.nccl.out || fail "nccl/$label/run" "ncclpattern exit $rc"
    [ -z "$LP" ] && failed=1
    dmesg | tail -n 30 | sed "s/^/# ring4 $label dmesg: /"
  fi
}

# write_bw_rails: ib_write_bw on each of A's two rails to B at once, servers on B's.
write_bw_rails() {
  why="" pids=""
  for l in 0 1; do
    s=$(dev_to 1 0 $l) c=$(dev_to 0 1 $l) port=$((18600 + l))
    timeout 120 ib_write_bw -d "$s" -x "$(gidx "$s")" -p $port -s 65536 -n 500 -F > "/tmp/ring.bw.s$l" 2>&1 &
    eval "sp$l=\$!"
    eval "wait_listen \$sp$l $port" || why="${why:+$why; }server on $s did not listen"
  done
  for l in 0 1; do
    s=$(dev_to 1 0 $l) c=$(dev_to 0 1 $l) port=$((18600 + l))
    timeout 100 ib_write_bw -d "$c" -x "$(gidx "$c")" -p $port -s 65536 -n 500 -F 127.0.0.1 > "/tmp/ring.bw.c$l" 2>&1 &
    pids="$pids $!"
  done
  l=0
  for p in $pids; do
    wait "$p" || why="${why:+$why; }client rail $l exit $?: $(tail -n 1 /tmp/ring.bw.c$l)"
    eval "wait \$sp$l" || why="${why:+$why; }server rail $l exit $?: $(tail -n 1 /tmp/ring.bw.s$l)"
    grep -E '^ *65536 +500 ' /tmp/ring.bw.c$l | sed "s/^/# ring4 ib_write_bw rail $l: /"
    grep -Eq '^ *65536 +500 ' /tmp/ring.bw.c$l || why="${why:+$why; }rail $l: no result line"
    l=$((l + 1))
  done
  if [ -z "$why" ]; then pass ib_write_bw_rails_at_once; else fail ib_write_bw_rails_at_once "$why"; fi
}

# all_cases: what runs through each provider.
all_cases() {
  list_and_open
  # One ibv_rc_pingpong per cable (rail 0), each end on its own host's device, all four
  # at once (their lines come in this order when all are done).
  pingpong ibv_rc_pingpong/A-B "$(dev_to 1 0 0)" "$(dev_to 0 1 0)" 18515 > /tmp/ring.ppr.1 &
  p1=$!
  pingpong ibv_rc_pingpong/B-C "$(dev_to 2 1 0)" "$(dev_to 1 2 0)" 18516 > /tmp/ring.ppr.2 &
  p2=$!
  pingpong ibv_rc_pingpong/C-D "$(dev_to 3 2 0)" "$(dev_to 2 3 0)" 18517 > /tmp/ring.ppr.3 &
  p3=$!
  pingpong ibv_rc_pingpong/D-A "$(dev_to 0 3 0)" "$(dev_to 3 0 0)" 18518 > /tmp/ring.ppr.4 &
  p4=$!
  wait $p1 $p2 $p3 $p4
  cat /tmp/ring.ppr.1 /tmp/ring.ppr.2 /tmp/ring.ppr.3 /tmp/ring.ppr.4
  # (failed= was set in the subshells: read it back from their lines)
  [ -z "$LP" ] && grep -q -- '--- FAIL' /tmp/ring.ppr.1 /tmp/ring.ppr.2 /tmp/ring.ppr.3 /tmp/ring.ppr.4 && failed=1
  # shellcheck disable=SC2046 # the arguments are words
  nccl ring $(ring_args)
  # shellcheck disable=SC2046
  nccl rails $(rails_args)
  write_bw_rails
}

all_cases

# ibvinfo's view of the ring. With RING_CAPTURE=1 (USB4_RING_CAPTURE on the host) also
# captured for cmd/ibvinfo/testdata/bed/ring4 and ring4-renamed
# (tests/usb4/capture-ibvinfo-tree.sh build/usb4/<tree>.ring4.out): ibvinfo runs five
# times a capture, each probing 16 devices (about 4 min under TCG on the loaded host).
if [ -x $BIN/ibvinfo ]; then
  B=$BIN TBV=/sys/kernel/debug/thunderbolt_ibverbs
  if [ "${RING_CAPTURE:-0}" = 1 ] && [ -r $BIN/guest-capture.sh ]; then
    ndevs() { ls /sys/class/infiniband 2>/dev/null | grep -c '^usb4_rdma'; }
    capture_traffic() { pingpong summary2 "$(dev_to 1 0 0)" "$(dev_to 0 1 0)" 18519; }
    . $BIN/guest-capture.sh
    capture ring4
  else
    mkdir -p /tmp/capture/ring4
    timeout 300 $BIN/ibvinfo --no-color > /tmp/capture/ring4/live.show.txt 2>&1
  fi
  sed 's/^/# ibvinfo: /' /tmp/capture/ring4/live.show.txt
  # Per device the host it reaches (ibvinfo's "usb4 peer hosts"), against tbloop's map.
  why=""
  for e in $expected; do
    d=${e%%:*} r=${e#*:}; ph=${r#*:}
    want=$(sed -n "s/^domain[0-9]* host=$ph port=[0-9]* uuid=\(.*\)/\1/p" /sys/kernel/debug/tbloop/topology | tr "\n" " ")
    got=$(sed -n '/^usb4 peer hosts/,/^$/p' /tmp/capture/ring4/live.show.txt | awk -v d="$d" '$1 == d { print $4 }')
    case " $want " in *" $got "*) [ -n "$got" ] || why="${why:+$why; }$d: no peer" ;; *) why="${why:+$why; }$d reaches $got, want one of host $ph's ($want)" ;; esac
  done
  if [ -z "$why" ]; then pass ibvinfo/peer_per_device; else fail ibvinfo/peer_per_device "$why"; fi
  # ibvinfo nccl for host B names exactly the devices of the hosts next to B that reach it.
  want=$(printf '%s\n' "$(dev_to 0 1 0)" "$(dev_to 0 1 1)" "$(dev_to 2 1 0)" "$(dev_to 2 1 1)" | sort | tr '\n' ' ')
  got=$($BIN/ibvinfo nccl tbloop-hostB 2>&1 | sed -n 's/^export NCCL_IB_HCA==//p' | tr ',' '\n' | sed 's/:1$//' | sort | tr '\n' ' ')
  if [ "$got" = "$want" ]; then pass ibvinfo/nccl_per_neighbour; else fail ibvinfo/nccl_per_neighbour "ibvinfo nccl tbloop-hostB: $got, want $want"; fi
fi

# A udev-style rename (rdma-core's persistent names) of a device of host C past
# usb4_rdma9: still ours, it moves data to its peer D, then the name goes back.
c2d=$(dev_to 2 3 0) d2c=$(dev_to 3 2 0) new=rocep0s0f2
RDMA=${RDMA:-rdma}
if $RDMA dev set "$c2d" name "$new" 2>/tmp/ring.rename.err; then
  why=""
  out=$(ibv_devinfo -d "$new" 2>&1) || why="ibv_devinfo -d $new: $(echo "$out" | tail -n 1)"
  timeout 60 ibv_rc_pingpong -d "$new" -g "$(gidx "$new")" -p 18520 -n 50 > /tmp/ring.rename.s 2>&1 &
  sp=$!
  wait_listen $sp 18520
  cout=$(timeout 50 ibv_rc_pingpong -d "$d2c" -g "$(gidx "$d2c")" -p 18520 -n 50 127.0.0.1 2>&1) || why="${why:+$why; }client: $(echo "$cout" | tail -n 1)"
  wait $sp || why="${why:+$why; }server on $new: $(tail -n 1 /tmp/ring.rename.s)"
  # ibvinfo's tree with the renamed device (cmd/ibvinfo/testdata/bed/ring4-renamed).
  [ "${RING_CAPTURE:-0}" = 1 ] && [ -x $BIN/ibvinfo ] && [ -r $BIN/guest-capture.sh ] && capture ring4-renamed
  $RDMA dev set "$new" name "$c2d" || why="${why:+$why; }could not rename $new back"
  if [ -z "$why" ]; then pass "renamed_${c2d}_still_claimed"; else fail "renamed_${c2d}_still_claimed" "$why"; fi
else
  fail "renamed_${c2d}_still_claimed" "rdma dev set $c2d name $new: $(cat /tmp/ring.rename.err)"
fi

# The same cases through the module's C provider, in this boot.
if [ $have_c = 1 ]; then
  cprov_on
  all_cases
  cprov_off
else
  echo "--- SKIP: $P/cprovider ($(cat $BIN/upstream/skip 2>/dev/null || echo "the module's C provider is not in the image"))"
fi

[ -x $BIN/ibvinfo ] && $BIN/ibvinfo nccl 2>&1 | sed 's/^/# ibvinfo nccl: /'
dmesg | grep -iE 'warn|bug|call trace|oops' | tail -n 20 | sed 's/^/# ring4 dmesg: /'
exit $failed
