# shellcheck shell=sh
# shellcheck disable=SC2034,SC2154 # sets what /init exports; reads /etc/vmtest.conf
# The usb4 bed's setup, sourced by /init when MODE=usb4 (tests/usb4/README.md): loads
# tbloop (two hosts joined by loopback cables, standing in for thunderbolt.ko; or 2-4
# hosts in a topology, USB4_TBLOOP_TOPOLOGY on the host side), a dummy
# netdev for roce_netdev, the real thunderbolt_ibverbs with a user's usual parameters,
# and waits until both hosts' usb4_rdma devices are ACTIVE with a RoCE v2 GID. Sets DEV0
# and DEV1 (one device of each host), GID0/GID1, NETDEV0/1, IP0/IP1, and exports
# USB4VERBS_BACKEND_TREE, USB4VERBS_USB4_DEVS0/1 (every device of each host) and
# USB4VERBS_USB4_RAILS (devices per host: rails per cable times cables). With a topology
# also USB4VERBS_USB4_HOSTS (tbloop's hosts), USB4VERBS_USB4_DEVS2/3 and
# USB4VERBS_USB4_PEERS ("DEV:HOST:PEER_HOST" for every device: the host it is on, the
# host it reaches).

DIAG_RE='tbv|tbloop|thunderbolt|usb4|xdomain|rdma|infiniband|uverbs|warn|error|fail|bug|call trace'

# usb4_dump: what the module and the stand-in report, into the serial log.
usb4_dump() {
  echo "@@VM DIAG usb4: dmesg"
  dmesg | tail -n 150
  echo "@@VM DIAG usb4: devices"
  for d in /sys/class/infiniband/*; do
    [ -e "$d" ] || continue
    echo "${d##*/} guid=$(cat "$d/node_guid" 2>/dev/null) state=$(cat "$d/ports/1/state" 2>/dev/null) device=$(readlink -f "$d/device" 2>/dev/null)"
  done
  ls -l /sys/bus/thunderbolt/devices/ 2>/dev/null
  echo "@@VM DIAG usb4: parameters"
  grep -H . /sys/module/thunderbolt_ibverbs/parameters/* 2>/dev/null
  echo "@@VM DIAG usb4: debugfs"
  for f in $(find /sys/kernel/debug -path '*thunderbolt_ibverbs*' -type f 2>/dev/null | head -n 40); do
    echo "== $f"; head -c 4000 "$f" 2>/dev/null; echo
  done
}
usb4_fail() { usb4_dump; setup_fail "usb4 $*"; }

# usb4_host DEV: which of tbloop's hosts DEV belongs to, from its device path: the
# module parents a device on the host's NHI (tbloop's platform device tbloop-nhi.N on
# 7.x; on 6.12 a borrowed PCI function, which is then the parent of the host's
# domainN), else the Thunderbolt domain (".../domainN/..." or a service
# "N-route.id"), else "?".
usb4_host() {
  p=$(readlink -f "/sys/class/infiniband/$1/device" 2>/dev/null)
  h=$(echo "$p" | sed -n 's#.*/tbloop-nhi\.\([0-9][0-9]*\)$#\1#p')
  if [ -z "$h" ] && [ -n "$p" ]; then
    for dom in "$p"/domain[0-9]*; do
      [ -d "$dom" ] && { h=${dom##*/domain}; break; }
    done
  fi
  [ -n "$h" ] || h=$(echo "$p" | sed -n 's#.*/domain\([0-9][0-9]*\)\(/.*\)\{0,1\}$#\1#p')
  [ -n "$h" ] || h=$(echo "$p" | sed -n 's#.*/\([0-9][0-9]*\)-[0-9][0-9.]*$#\1#p')
  # With a topology every port is a domain of its own: tbloop's debugfs says whose.
  if [ -n "$h" ] && [ "$USB4_TOPO" = 1 ]; then
    h=$(sed -n "s/^domain$h host=\([0-9]*\) .*/\1/p" /sys/kernel/debug/tbloop/topology)
  fi
  echo "${h:-?}"
}

# usb4_domain DEV: the tbloop domain (NHI) DEV is on, as usb4_host reads it without the
# topology's mapping.
usb4_domain() { USB4_TOPO=0 usb4_host "$1"; }

# usb4_peer_host DEV: the host DEV reaches: the other end of its domain's cable.
usb4_peer_host() {
  d=$(usb4_domain "$1")
  o=$(sed -n "s/^cable[0-9]* domain$d route=[0-9a-f]* <-> domain\([0-9]*\) .*/\1/p; s/^cable[0-9]* domain\([0-9]*\) route=[0-9a-f]* <-> domain$d .*/\1/p" \
    /sys/kernel/debug/tbloop/topology | head -n1)
  [ -n "$o" ] && sed -n "s/^domain$o host=\([0-9]*\) .*/\1/p" /sys/kernel/debug/tbloop/topology
}

mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
USB4_TOPO=0
$IP link set lo up || setup_fail "ip link set lo up"
for m in $USB4_KO_NAMES; do
  [ "$m" = thunderbolt_ibverbs ] && continue
  # shellcheck disable=SC2086 # the parameters are words
  modprobe "$m" $USB4_TBLOOP_PARAMS || usb4_fail "modprobe $m $USB4_TBLOOP_PARAMS"
done
lsmod | grep -qw '^thunderbolt' && usb4_fail "the real thunderbolt.ko got loaded"
USB4_HOSTS=2
if [ -n "$(cat /sys/module/tbloop/parameters/topology 2>/dev/null | grep -v '^(null)$')" ]; then
  USB4_TOPO=1
  USB4_HOSTS=$(cat /sys/module/tbloop/parameters/hosts)
  echo "@@VM STEP usb4 topology hosts=$USB4_HOSTS $(cat /sys/module/tbloop/parameters/topology)"
  cat /sys/kernel/debug/tbloop/topology
fi
$IP link add "$USB4_NETDEV" type dummy && $IP addr add "$USB4_IP/24" dev "$USB4_NETDEV" \
  && $IP link set "$USB4_NETDEV" up || usb4_fail "dummy netdev $USB4_NETDEV"
echo "@@VM STEP usb4 stand-in uptime=$(uptime_s)"
# shellcheck disable=SC2086
modprobe thunderbolt_ibverbs $USB4_TBV_PARAMS "roce_netdev=$USB4_NETDEV" \
  || usb4_fail "modprobe thunderbolt_ibverbs $USB4_TBV_PARAMS roce_netdev=$USB4_NETDEV"
echo "@@VM STEP usb4 module uptime=$(uptime_s)"

# usb4_rails_per_host: how many usb4_rdma devices each host gets: one per rail, the
# module's lanes= rails (a number, MIN-MAX: MAX, auto: 2, hellas-main:kernel/main.c
# "Lane request") on each of tbloop's cables (its cables= parameter, 1 or 2) that the
# module takes. On a kernel whose tb_protocol_handler has no XDomain (all of them) the
# module's native control is source-blind and it keeps one cable per remote host,
# refusing the other's services with -EBUSY (hellas-main:kernel/peer.c, "limiting remote
# host to peer"); its debugfs summary then says "native_same_peer_multicable: limited"
# (hellas-main:kernel/debugfs.c). USB4_RAILS_PER_CABLE (host env) overrides the rails
# per cable.
usb4_rails_per_host() {
  c=$(cat /sys/module/tbloop/parameters/cables 2>/dev/null)
  case $c in 1 | 2) ;; *) c=1 ;; esac
  # With a topology: host 0's ports (the ring's hosts all have two; a host with
  # fewer is waited for by usb4_want_host below).
  [ "$USB4_TOPO" = 1 ] && c=$(grep -c '^domain[0-9]* host=0 ' /sys/kernel/debug/tbloop/topology)
  # (In a topology each port reaches another host: the limit does not bite.)
  if [ "$USB4_TOPO" != 1 ] && grep -qs '^native_same_peer_multicable: limited' /sys/kernel/debug/thunderbolt_ibverbs/summary; then
    [ "$c" -gt 1 ] && echo "@@VM STEP usb4 $c cables, the module takes one per host (native_same_peer_multicable: limited)" >&2
    c=1
  fi
  r=${USB4_RAILS_PER_CABLE:-}
  if [ -z "$r" ]; then
    l=$(cat /sys/module/thunderbolt_ibverbs/parameters/lanes 2>/dev/null)
    case $l in
      *[!0-9-]* | "" | -* | *-) r=2 ;;
      *-*) r=${l#*-} ;;
      *) r=$l ;;
    esac
  fi
  echo $((c * r))
}
want=$(usb4_rails_per_host)
# usb4_want_host H: the devices host H must get: one per rail of each of its ports.
usb4_want_host() {
  if [ "$USB4_TOPO" = 1 ]; then
    echo $((want / $(grep -c '^domain[0-9]* host=0 ' /sys/kernel/debug/tbloop/topology) \
      * $(grep -c "^domain[0-9]* host=$1 " /sys/kernel/debug/tbloop/topology)))
  else
    echo "$want"
  fi
}

# Negotiation, ring start and registration run in the module's work items: wait, bounded,
# until every rail of both hosts has its device.
# The bound is in time (uptime), not in rounds: one round reads sysfs for every device
# and may take long on a loaded TCG guest.
deadline=$(awk -v w="$USB4_SETUP_WAIT_S" '{print int($1) + w}' /proc/uptime)
while :; do
  ok=1 why=""
  h=0
  while [ "$h" -lt "$USB4_HOSTS" ]; do eval "devs$h='' n$h=0"; h=$((h + 1)); done
  for d in /sys/class/infiniband/usb4_rdma*; do
    [ -e "$d" ] || continue
    d=${d##*/}
    h=$(usb4_host "$d")
    case $h in
      [0-9]) [ "$h" -lt "$USB4_HOSTS" ] || h=x ;;
      *) h=x ;;
    esac
    if ! port_active "$d"; then ok=0; why="$d not ACTIVE"; fi
    if [ -z "$(gid_index "$d" "$USB4_IP")" ]; then ok=0; why="$d has no RoCE v2 GID for $USB4_IP"; fi
    if [ "$h" = x ]; then
      ok=0; why="cannot tell the host of $d ($(readlink -f "/sys/class/infiniband/$d/device" 2>/dev/null))"
    else
      eval "devs$h=\"\$devs$h \$d\" n$h=\$((n$h + 1))"
    fi
  done
  h=0
  while [ "$h" -lt "$USB4_HOSTS" ]; do
    eval "n=\$n$h devs=\$devs$h"
    w=$(usb4_want_host "$h")
    [ "$n" -lt "$w" ] && { ok=0; why="host $h has $n of $w usb4_rdma devices (${devs# })"; }
    h=$((h + 1))
  done
  [ $ok = 1 ] && break
  [ "$(cut -d. -f1 /proc/uptime)" -ge "$deadline" ] && usb4_fail "devices not up after ${USB4_SETUP_WAIT_S} s: $why"
  sleep 0.2
done
set -- $devs0; DEV0=$1
set -- $devs1; DEV1=$1
GID0=$(gid_index "$DEV0" "$USB4_IP"); GID1=$(gid_index "$DEV1" "$USB4_IP")
n=$(ls /sys/class/infiniband | wc -l)
[ "$(ls /dev/infiniband/ 2>/dev/null | grep -c '^uverbs')" -ge "$n" ] \
  || usb4_fail "fewer /dev/infiniband/uverbs* than devices ($n)"
# One roce_netdev serves every device of both hosts (the module's parameter is global).
NETDEV0=$USB4_NETDEV NETDEV1=$USB4_NETDEV IP0=$USB4_IP IP1=$USB4_IP
export USB4VERBS_BACKEND_TREE="$USB4_TREE" USB4VERBS_USB4_DEVS0="${devs0# }" \
  USB4VERBS_USB4_DEVS1="${devs1# }" USB4VERBS_USB4_RAILS="$want"
echo "@@VM STEP usb4 devices uptime=$(uptime_s) rails_per_host=$want host0=${devs0# } host1=${devs1# }"
if [ "$USB4_TOPO" = 1 ]; then
  # Every host's devices, and per device the host it reaches.
  peers=""
  for d in /sys/class/infiniband/usb4_rdma*; do
    d=${d##*/}
    peers="$peers $d:$(usb4_host "$d"):$(usb4_peer_host "$d")"
  done
  export USB4VERBS_USB4_HOSTS="$USB4_HOSTS" USB4VERBS_USB4_DEVS2="${devs2# }" \
    USB4VERBS_USB4_DEVS3="${devs3# }" USB4VERBS_USB4_PEERS="${peers# }"
  echo "@@VM STEP usb4 topology devices host2=${devs2# } host3=${devs3# } peers=${peers# }"
fi
