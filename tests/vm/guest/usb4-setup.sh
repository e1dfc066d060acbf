# shellcheck shell=sh
# shellcheck disable=SC2034,SC2154 # sets what /init exports; reads /etc/vmtest.conf
# The usb4 bed's setup, sourced by /init when MODE=usb4 (tests/usb4/README.md): loads
# tbloop (two hosts joined by loopback cables, standing in for thunderbolt.ko), a dummy
# netdev for roce_netdev, the real thunderbolt_ibverbs with a user's usual parameters,
# and waits until both hosts' usb4_rdma devices are ACTIVE with a RoCE v2 GID. Sets DEV0
# and DEV1 (one device of each host), GID0/GID1, NETDEV0/1, IP0/IP1, and exports
# USB4VERBS_BACKEND_TREE and USB4VERBS_USB4_DEVS0/1 (every device of each host).

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
# module parents a device on the host's NHI (tbloop's platform device tbloop-nhi.N),
# else the Thunderbolt domain (".../domainN/..." or a service "N-route.id"), else "?".
usb4_host() {
  p=$(readlink -f "/sys/class/infiniband/$1/device" 2>/dev/null)
  h=$(echo "$p" | sed -n 's#.*/tbloop-nhi\.\([0-9][0-9]*\)$#\1#p')
  [ -n "$h" ] || h=$(echo "$p" | sed -n 's#.*/domain\([0-9][0-9]*\)\(/.*\)\{0,1\}$#\1#p')
  [ -n "$h" ] || h=$(echo "$p" | sed -n 's#.*/\([0-9][0-9]*\)-[0-9][0-9.]*$#\1#p')
  echo "${h:-?}"
}

mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
$IP link set lo up || setup_fail "ip link set lo up"
for m in $USB4_KO_NAMES; do
  [ "$m" = thunderbolt_ibverbs ] && continue
  # shellcheck disable=SC2086 # the parameters are words
  modprobe "$m" $USB4_TBLOOP_PARAMS || usb4_fail "modprobe $m $USB4_TBLOOP_PARAMS"
done
lsmod | grep -qw '^thunderbolt' && usb4_fail "the real thunderbolt.ko got loaded"
$IP link add "$USB4_NETDEV" type dummy && $IP addr add "$USB4_IP/24" dev "$USB4_NETDEV" \
  && $IP link set "$USB4_NETDEV" up || usb4_fail "dummy netdev $USB4_NETDEV"
echo "@@VM STEP usb4 stand-in uptime=$(uptime_s)"
# shellcheck disable=SC2086
modprobe thunderbolt_ibverbs $USB4_TBV_PARAMS "roce_netdev=$USB4_NETDEV" \
  || usb4_fail "modprobe thunderbolt_ibverbs $USB4_TBV_PARAMS roce_netdev=$USB4_NETDEV"
echo "@@VM STEP usb4 module uptime=$(uptime_s)"

# Negotiation, ring start and registration run in the module's work items: wait, bounded.
# The bound is in time (uptime), not in rounds: one round reads sysfs for every device
# and may take long on a loaded TCG guest.
deadline=$(awk -v w="$USB4_SETUP_WAIT_S" '{print int($1) + w}' /proc/uptime)
while :; do
  devs0="" devs1="" ok=1 why=""
  for d in /sys/class/infiniband/usb4_rdma*; do
    [ -e "$d" ] || continue
    d=${d##*/}
    case $(usb4_host "$d") in
      0 | 1) h=$(usb4_host "$d") ;;
      *) h=x ;;
    esac
    if ! port_active "$d"; then ok=0; why="$d not ACTIVE"; fi
    if [ -z "$(gid_index "$d" "$USB4_IP")" ]; then ok=0; why="$d has no RoCE v2 GID for $USB4_IP"; fi
    case $h in
      0) devs0="$devs0 $d" ;;
      1) devs1="$devs1 $d" ;;
      *) ok=0; why="cannot tell the host of $d ($(readlink -f "/sys/class/infiniband/$d/device" 2>/dev/null))" ;;
    esac
  done
  [ -z "$devs0" ] && { ok=0; why="no usb4_rdma device of host 0"; }
  [ -z "$devs1" ] && { ok=0; why="no usb4_rdma device of host 1"; }
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
  USB4VERBS_USB4_DEVS1="${devs1# }"
echo "@@VM STEP usb4 devices uptime=$(uptime_s) host0=${devs0# } host1=${devs1# }"
