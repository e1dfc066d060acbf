#!/bin/sh
# Guest half of tests/containers/run.sh (busybox sh, as root in tests/vm's VM): sets up
# rootful podman, imports each base rootfs from /opt/usb4verbs/rootfs/<base>, builds
# examples/containers/Containerfile.<base> on it, and runs the stock tools in containers
# the way examples/containers/README.md tells users to. One go-test-style line per case:
# "--- PASS|FAIL|SKIP: ctr/<base>/<case>". Environment from the harness's /init:
# USB4VERBS_DEV0/1, _GID0/1, _IP0/1 (rxe: 10.11.0.1/.2 on vethA/vethB; usb4 mode: the
# usb4 devices of host 0 and host 1, one shared address).
# shellcheck disable=SC2086 # flag lists are split on purpose
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
. /etc/vmtest.conf
DEV0=${USB4VERBS_DEV0:?} DEV1=${USB4VERBS_DEV1:?}
GID0=${USB4VERBS_GID0:?} GID1=${USB4VERBS_GID1:?}
IP0=${USB4VERBS_IP0:?} IP1=${USB4VERBS_IP1:?}
F=/opt/usb4verbs
BASES=$(cat $F/bases)
TIMEOUT=60
FAILED=0
WORK=/tmp/ctr
mkdir -p $WORK

pass() { echo "--- PASS: ctr/$1"; }
fail() { echo "--- FAIL: ctr/$1 ($2)"; FAILED=$((FAILED + 1)); }
skip() { echo "--- SKIP: ctr/$1 ($2)"; }
# show FILE: a case's output, indented, for the log (head and tail of a long one).
show() {
  if [ "$(wc -l < "$1")" -le 80 ]; then sed 's/^/    | /' "$1"
  else sed -n '1,45s/^/    | /p' "$1"; echo "    | ..."; tail -n 25 "$1" | sed 's/^/    | /'; fi
}

# --- the engine: rootful podman, as a Debian host runs it, minus systemd (no journald,
# no systemd cgroup manager). The initramfs root cannot be pivot_root'ed away from, so
# crun chroots (no_pivot_root), and RUN steps of a build use buildah's chroot isolation.
setup_engine() {
  grep -q " /sys/fs/cgroup cgroup2 " /proc/mounts || mount -t cgroup2 cgroup2 /sys/fs/cgroup || return 1
  modprobe overlay || return 1
  mkdir -p /var/tmp /var/lib/containers /etc/containers
  mount -t tmpfs tmpfs /var/lib/containers || return 1
  printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nno_pivot_root = true\n' \
    > /etc/containers/containers.conf
  printf '[storage]\ndriver = "overlay"\nrunroot = "/run/containers/storage"\ngraphroot = "/var/lib/containers/storage"\n' \
    > /etc/containers/storage.conf
  podman info > $WORK/podman-info.txt 2>&1 || { cat $WORK/podman-info.txt; return 1; }
  grep -E 'version:|graphDriverName|cgroupVersion|ociRuntime' -A0 $WORK/podman-info.txt | head -n 8
}

# uverbs DEV: the uverbs node of an RDMA device.
uverbs() {
  for u in /sys/class/infiniband/$1/device/infiniband_verbs/* /sys/class/infiniband_verbs/uverbs*; do
    [ "$(cat "$u/ibdev" 2>/dev/null)" = "$1" ] && { echo "/dev/infiniband/${u##*/}"; return 0; }
  done
  return 1
}

# --- the two networks of case (a): each container in its own netns (ctrA, ctrB), joined
# by a veth pair of their own for the tools' TCP exchange. The RDMA devices are visible
# in every netns ("rdma system" shared mode, the default); their GIDs' netdevs
# (vethA/vethB for rxe on 6.1, which only lives in the initial netns) are not.
CIP0=10.12.0.1 CIP1=10.12.0.2
setup_netns() {
  for n in ctrA ctrB; do $IP netns add $n || return 1; done
  $IP link add cA type veth peer name cB || return 1
  $IP link set cA netns ctrA && $IP link set cB netns ctrB || return 1
  $IP -n ctrA addr add $CIP0/24 dev cA && $IP -n ctrB addr add $CIP1/24 dev cB || return 1
  for n in ctrA:cA ctrB:cB; do
    $IP -n ${n%:*} link set lo up && $IP -n ${n%:*} link set ${n#*:} up || return 1
  done
}

# The documented run line (examples/containers/README.md), per device. rxe needs the
# opt-in and RDMAV_DRIVERS so that our provider, not the image's librxe, serves it.
USER_FLAGS="--user 1000:1000"
LIMIT_FLAGS="--cap-add=IPC_LOCK --ulimit memlock=-1"
RXE_ENV=""
case $DEV0 in rxe*) RXE_ENV="-e USB4VERBS_CLAIM_RXE=1 -e RDMAV_DRIVERS=usb4_rdma" ;; esac
# usb4 bed: perftest's default ACK timeout (14: 67 ms x 7 retries) is a hardware figure;
# the module's ACKs under TCG come later (tests/stock/guest.sh does the same).
PERF_EXTRA=""
[ "${MODE:-rxe}" = usb4 ] && PERF_EXTRA="-u 20"
devflags() { echo "--device=$(uverbs "$1") --device=/dev/infiniband/rdma_cm"; }

# served NAME: the container NAME's process has our provider mapped (the Go part is
# loaded at the first open of a device we serve), checked within 20 s of its start.
served() {
  i=0
  while [ $i -lt 40 ]; do
    pid=$(podman inspect -f '{{.State.Pid}}' "$1" 2>/dev/null)
    [ -n "$pid" ] && [ "$pid" != 0 ] && grep -q 'libusb4_rdma-go.so' /proc/$pid/maps 2>/dev/null && return 0
    i=$((i + 1)); sleep 0.5
  done
  return 1
}

# pair CASE IMG NETS [lazy] -- SERVER... -- CLIENT...: the server in a detached container
# (dev0, cpu 0), the client in the foreground (dev1, cpu 1; perftest's cycle counter
# misreads when both share one vCPU). NETS: "netns" (ctrA/ctrB) or "host". Passes when
# both exit 0 and the server process had our provider mapped. persistent: a server that
# opens its device only when the client comes and does not exit by itself (rping -P):
# its maps are read after the client is done, and it is then stopped.
# alldev: both containers get every node (--device=/dev/infiniband) instead of one each.
pair() {
  c=$1 img=$2 nets=$3 persistent=0 alldev=0; shift 3
  while [ "$1" != -- ]; do
    case $1 in persistent) persistent=1 ;; alldev) alldev=1 ;; esac
    shift
  done
  shift
  srv="" cli=""
  while [ "$1" != -- ]; do srv="$srv $1"; shift; done; shift
  cli="$*"
  if [ $nets = netns ]; then n0="--network=ns:/run/netns/ctrA" n1="--network=ns:/run/netns/ctrB"
  else n0="--network=host" n1="--network=host"; fi
  name=srv-$$-$(echo "$c" | tr '/' '-')
  d0=$(devflags "$DEV0") d1=$(devflags "$DEV1")
  [ $alldev = 1 ] && d0=--device=/dev/infiniband d1=--device=/dev/infiniband
  podman run -d --name "$name" $n0 --cpuset-cpus=0 $d0 $LIMIT_FLAGS $USER_FLAGS $RXE_ENV \
    "$img" $srv > $WORK/srv.id 2>&1 || { fail "$c" "server container did not start: $(tail -n1 $WORK/srv.id)"; return; }
  ok=1; why=""
  rm -f $WORK/served
  if [ $persistent = 1 ]; then sleep 2; else served "$name" && touch $WORK/served; sleep 1; fi
  timeout $TIMEOUT podman run --rm $n1 --cpuset-cpus=1 $d1 $LIMIT_FLAGS $USER_FLAGS $RXE_ENV \
    "$img" $cli > $WORK/cli.log 2>&1
  crc=$?
  if [ $persistent = 1 ]; then
    served "$name" && touch $WORK/served
    podman stop -t 2 "$name" > /dev/null 2>&1
    src=0
  else
    src=$(timeout 20 podman wait "$name" 2>/dev/null)
  fi
  [ -e $WORK/served ] || { ok=0; why="libusb4_rdma-go.so not in the server's /proc/PID/maps"; }
  podman logs "$name" > $WORK/srv.log 2>&1
  podman rm -f "$name" > /dev/null 2>&1
  echo "    server ($n0 $d0):$srv"; show $WORK/srv.log
  echo "    client ($n1 $d1): $cli"; show $WORK/cli.log
  [ $crc = 0 ] || { ok=0; why="${why:+$why; }client exit $crc"; }
  [ "$src" = 0 ] || { ok=0; why="${why:+$why; }server exit ${src:-none}"; }
  if [ $ok = 1 ]; then pass "$c"; else fail "$c" "$why"; fi
}

# single CASE IMG WANTRC GREP FLAGS... -- CMD...: one container; passes when it exits
# WANTRC ("fails": any non-zero status) and its output matches the ERE GREP (several
# EREs: separated by " ;; ", each must match a line).
single() {
  c=$1 img=$2 want=$3 re=$4; shift 4
  fl=""
  while [ "$1" != -- ]; do fl="$fl $1"; shift; done; shift
  timeout $TIMEOUT podman run --rm $fl "$img" "$@" > $WORK/out.log 2>&1
  rc=$?
  echo "    podman run$fl $img $*"; show $WORK/out.log
  if [ "$want" = fails ] && [ $rc = 0 ]; then fail "$c" "exit 0, want a failure"
  elif [ "$want" != fails ] && [ $rc != "$want" ]; then fail "$c" "exit $rc, want $want"
  else
    miss="" rest=$re
    while [ -n "$rest" ]; do
      r=${rest%% ;; *}
      if [ "$r" = "$rest" ]; then rest=""; else rest=${rest#* ;; }; fi
      grep -Eq -- "$r" $WORK/out.log || miss="$miss /$r/"
    done
    if [ -n "$miss" ]; then fail "$c" "output does not match$miss"; else pass "$c"; fi
  fi
}

image_cases() {
  b=$1 img=localhost/usb4verbs-$1
  std="$(devflags "$DEV0") $LIMIT_FLAGS $USER_FLAGS $RXE_ENV"
  single $b/ibv_devices $img 0 "^libusb4_rdma: .*$DEV0|$DEV0" $std -e USB4VERBS_DEBUG=1 --network=host -- ibv_devices
  single $b/ibv_devinfo_-v $img 0 "PORT_ACTIVE" $std --network=ns:/run/netns/ctrA -- ibv_devinfo -v -d "$DEV0"
  single $b/doctor $img 0 "provider-loadable" $std --network=ns:/run/netns/ctrA -- ibvinfo doctor --no-color
  # ibvinfo's live view from a non-initial netns: RDMA netlink, sysfs, and the provider's
  # query and data-path probe on the one device passed in.
  single $b/ibvinfo $img 0 "$DEV0" $std --network=ns:/run/netns/ctrA -- ibvinfo --no-color
  for nets in netns host; do
    if [ $nets = netns ]; then sip=$CIP0; else sip=$IP0; fi
    pair $b/$nets/ibv_rc_pingpong $img $nets -- ibv_rc_pingpong -d "$DEV0" -g "$GID0" -p 18515 \
      -- ibv_rc_pingpong -d "$DEV1" -g "$GID1" -p 18515 "$sip"
    pair $b/$nets/ib_write_bw $img $nets -- ib_write_bw -d "$DEV0" -x "$GID0" -F -n 200 -p 18516 --report_gbits $PERF_EXTRA \
      -- ib_write_bw -d "$DEV1" -x "$GID1" -F -n 200 -p 18516 --report_gbits $PERF_EXTRA "$sip"
  done
  # rdma_cm picks the device from the address. On the usb4 bed every device carries the
  # GIDs of the one roce_netdev, so the device it picks need not be the one a container
  # was given (rping: RDMA_CM_EVENT_ADDR_ERROR): there both get all of /dev/infiniband.
  rping_devs=""
  [ "${MODE:-rxe}" = usb4 ] && rping_devs=alldev
  pair $b/host/rping $img host persistent $rping_devs -- rping -s -P -v -a 0.0.0.0 -p 7174 \
    -- rping -c -v -V -C 10 -a "$IP0" -I "$IP1" -p 7174
  # rdma_cm resolves addresses and routes in the caller's network namespace, and binds
  # to a device through the netdev of that route: in ctrA/ctrB that is the cA/cB veth,
  # which carries no RDMA device (the devices' netdevs stay in the initial namespace).
  timeout $TIMEOUT podman run --rm --network=ns:/run/netns/ctrB $(devflags "$DEV1") $LIMIT_FLAGS $USER_FLAGS \
    $RXE_ENV "$img" rping -c -v -C 1 -a $CIP0 -p 7175 > $WORK/out.log 2>&1
  skip $b/netns/rping "rdma_cm needs --network=host: in its own netns the route to the peer is a netdev without an RDMA device (rping: $(grep -m1 -iE 'error|fail|unreach|No such' $WORK/out.log | cut -c1-120))"

  # --- the user's setup at fault: each gets the tool's error and doctor's fix.
  # No --device: sysfs still lists the devices, libibverbs opens none.
  single $b/no-device/ibv_devinfo $img fails "No IB devices found|[Nn]o .*device" \
    $LIMIT_FLAGS $USER_FLAGS $RXE_ENV --network=host -- ibv_devinfo
  single $b/no-device/doctor $img 1 "^ERROR +uverbs-device-missing ;; fix: .*--device=/dev/infiniband/uverbs" \
    $LIMIT_FLAGS $USER_FLAGS $RXE_ENV --network=host -- ibvinfo doctor --no-color
  # memlock 64 KiB (the engines' old default) without CAP_IPC_LOCK: a 1 MiB buffer does
  # not register.
  lim="--ulimit memlock=65536:65536"
  single $b/memlock-64k/ibv_rc_pingpong $img fails "[Cc]ouldn.t register MR ;; ^libusb4_rdma: reg_mr of 1048576 bytes: ENOMEM: the memlock limit is 64 KiB.*--ulimit memlock=-1" \
    $(devflags "$DEV0") $lim $USER_FLAGS $RXE_ENV --network=host -- ibv_rc_pingpong -d "$DEV0" -g "$GID0" -s 1048576
  single $b/memlock-64k/doctor $img 1 "^ERROR +memlock-low +memlock limit 64 KiB ;; fix: .*--ulimit memlock=-1" \
    $(devflags "$DEV0") $lim $USER_FLAGS $RXE_ENV --network=host -- ibvinfo doctor --no-color
}

# --- switching from the module's own provider (issue 30), in stock images: the base
# rootfs alone (stock libibverbs1, ibverbs-utils; nothing of ours), as users' images are.
# ctr_exec_pingpong CTR_SRV CTR_CLI PORT: ibv_rc_pingpong, server in CTR_SRV on DEV0,
# client in CTR_CLI on DEV1; prints "served" when the server process had our Go part
# mapped, then both exit statuses.
ctr_exec_pingpong() {
  podman exec "$1" sh -c "ibv_rc_pingpong -n 200 -d $DEV0 -g $GID0 -p $3 > /tmp/srv.log 2>&1 & s=\$!; i=0
    until grep -q libusb4_rdma-go.so /proc/\$s/maps 2>/dev/null || [ \$i -ge 40 ]; do sleep 0.5; i=\$((i + 1)); done
    grep -q libusb4_rdma-go.so /proc/\$s/maps 2>/dev/null && echo served > /tmp/served
    wait \$s; echo \$? > /tmp/srv.rc" > /dev/null 2>&1 &
  sleep 3
  timeout $TIMEOUT podman exec "$2" ibv_rc_pingpong -n 200 -d "$DEV1" -g "$GID1" -p "$3" "$IP0" > $WORK/cli.log 2>&1
  echo "client=$?"
  wait
  podman exec "$1" sh -c 'cat /tmp/srv.log; echo "server=$(cat /tmp/srv.rc)"; cat /tmp/served 2>/dev/null; rm -f /tmp/served /tmp/srv.rc'
}
# pingpong_verdict CASE OUT: passes when both exited 0 and the server was ours.
pingpong_verdict() {
  echo "    client:"; show $WORK/cli.log
  echo "$2" | sed 's/^/    | /'
  why=""
  echo "$2" | grep -q '^client=0$' || why="client $(echo "$2" | grep '^client=')"
  echo "$2" | grep -q '^server=0$' || why="${why:+$why; }server $(echo "$2" | grep '^server=')"
  echo "$2" | grep -q '^served$' || why="${why:+$why; }libusb4_rdma-go.so not in the server's /proc/PID/maps"
  if [ -z "$why" ]; then pass "$1"; else fail "$1" "$why"; fi
}
# stock_run NAME IMG DEVICE...: a long-running container of IMG as the documented run line.
stock_run() {
  n=$1 img=$2; shift 2
  fl=""
  for d in "$@"; do fl="$fl --device=$(uverbs "$d")"; done
  podman rm -f "$n" > /dev/null 2>&1
  podman run -d --name "$n" --network=host $fl --device=/dev/infiniband/rdma_cm $LIMIT_FLAGS $RXE_ENV \
    "$img" sleep 3600 > $WORK/run.log 2>&1 || { show $WORK/run.log; return 1; }
}
# ours_left CTR: what of a usb4_rdma provider is in the container.
ours_left() {
  podman exec "$1" sh -c 'ls -d /usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma* /etc/libibverbs.d/usb4_rdma.driver /usr/bin/usb4verbs-container 2>/dev/null' | tr '\n' ' '
}

stock_cases() {
  b=$1 img=localhost/stock-$1 t0=$(cut -d. -f1 /proc/uptime)
  echo "=== stock-$b: import"
  if ! (tar -C $F/stock/$b -cf - . | podman import - $img) > $WORK/import.log 2>&1; then
    show $WORK/import.log; fail stock-$b/import "podman import failed"; return
  fi
  rm -rf "${F:?}/stock/$b"

  # Which of (1) and (2) this base runs: every one, or (CI's tier, $F/stock/split) the
  # switch on the first stock base and the command on the others.
  want="switch command"
  if [ -e $F/stock/split ]; then
    if [ "$b" = "$FIRST_STOCK" ]; then want=switch; else want=command; fi
  fi
  # (1) The package switch, as a user does it on a host that has the module's package:
  # apt installs ours over usb4-rdma-provider; the tools run through ours; theirs is
  # refused over ours; apt remove leaves nothing.
  c=switch-$b
  case " $want " in *" switch "*) ;; *) c="" ;; esac
  if [ -z "$c" ]; then
    :
  elif stock_run $c $img "$DEV0" "$DEV1"; then
    podman cp $F/pkg/usb4-rdma-provider_*.deb $c:/tmp/theirs.deb && podman cp $F/pkg/usb4verbs_*_amd64.deb $c:/tmp/ours.deb
    podman exec $c dpkg -i /tmp/theirs.deb > $WORK/out.log 2>&1
    if podman exec $c dpkg-query -W -f '${Status}' usb4-rdma-provider 2>/dev/null | grep -q 'install ok installed'; then
      pass "stock-$b/switch/module-package ($(cat $F/stock/module-so))"
    else show $WORK/out.log; fail stock-$b/switch/module-package "dpkg -i usb4-rdma-provider did not install"; fi
    podman exec -e DEBIAN_FRONTEND=noninteractive $c apt-get install -y --no-install-recommends /tmp/ours.deb > $WORK/out.log 2>&1
    r=$?; show $WORK/out.log
    st=$(podman exec $c dpkg-query -W -f '${Status}' usb4-rdma-provider 2>/dev/null)
    if [ $r = 0 ] && ! echo "$st" | grep -q 'install ok installed'; then pass stock-$b/switch/apt-install
    else fail stock-$b/switch/apt-install "apt-get install exit $r; usb4-rdma-provider: ${st:-gone}"; fi
    podman exec -e USB4VERBS_DEBUG=1 $c ibv_devices > $WORK/out.log 2>&1
    r=$?; show $WORK/out.log
    if [ $r = 0 ] && grep -q '^libusb4_rdma: libibverbs PABI' $WORK/out.log && grep -q "$DEV0" $WORK/out.log; then
      pass stock-$b/switch/ibv_devices
    else fail stock-$b/switch/ibv_devices "exit $r, or no probe line of ours or no $DEV0"; fi
    pingpong_verdict stock-$b/switch/ibv_rc_pingpong "$(ctr_exec_pingpong $c $c 18530)"
    podman exec $c dpkg -i /tmp/theirs.deb > $WORK/out.log 2>&1
    r=$?; show $WORK/out.log
    if [ $r != 0 ] && grep -q 'conflicting packages' $WORK/out.log; then pass stock-$b/switch/theirs-over-ours-refused
    else fail stock-$b/switch/theirs-over-ours-refused "dpkg -i exit $r without dpkg's conflict"; fi
    podman exec -e DEBIAN_FRONTEND=noninteractive $c apt-get remove -y usb4verbs > $WORK/out.log 2>&1
    r=$?; left=$(ours_left $c)
    if [ $r = 0 ] && [ -z "$left" ]; then pass stock-$b/switch/apt-remove
    else show $WORK/out.log; fail stock-$b/switch/apt-remove "apt-get remove exit $r; left: $left"; fi
  else
    fail stock-$b/switch "the container did not start"
  fi
  [ -n "$c" ] && podman rm -f $c > /dev/null 2>&1

  # (2) usb4verbs-container from the host into two running stock containers, then the
  # stock tools in them and a pingpong between them.
  ok=1
  case " $want " in *" command "*) ;; *) ok=0 ;; esac
  for c in cmdA-$b:$DEV0 cmdB-$b:$DEV1; do
    [ $ok = 1 ] || break
    stock_run ${c%%:*} $img ${c#*:} || { ok=0; fail stock-$b/command "container ${c%%:*} did not start"; }
  done
  if [ $ok = 1 ]; then
    for c in cmdA-$b cmdB-$b; do
      usb4verbs-container $c > $WORK/out.log 2>&1
      r=$?; show $WORK/out.log
      if [ $r = 0 ] && grep -q 'ibv_devices in' $WORK/out.log; then pass stock-$b/command/$c
      else fail stock-$b/command/$c "usb4verbs-container exit $r"; fi
    done
    single_exec() {
      podman exec cmdA-$b "$@" > $WORK/out.log 2>&1; r=$?; echo "    podman exec cmdA-$b $*"; show $WORK/out.log
    }
    single_exec ibv_devices
    if [ $r = 0 ] && grep -q "$DEV0" $WORK/out.log; then pass stock-$b/command/ibv_devices
    else fail stock-$b/command/ibv_devices "exit $r or no $DEV0"; fi
    single_exec ibv_devinfo -v -d "$DEV0"
    if [ $r = 0 ] && grep -q PORT_ACTIVE $WORK/out.log; then pass stock-$b/command/ibv_devinfo_-v
    else fail stock-$b/command/ibv_devinfo_-v "exit $r or no active port"; fi
    pingpong_verdict stock-$b/command/ibv_rc_pingpong "$(ctr_exec_pingpong cmdA-$b cmdB-$b 18531)"
    usb4verbs-container --remove cmdA-$b > $WORK/out.log 2>&1
    r=$?; left=$(ours_left cmdA-$b)
    if [ $r = 0 ] && [ -z "$left" ]; then pass stock-$b/command/remove
    else show $WORK/out.log; fail stock-$b/command/remove "exit $r; left: $left"; fi
  fi
  podman rm -f cmdA-$b cmdB-$b > /dev/null 2>&1

  # (3) The module's way: its copy script's cp of one -rdmavNN.so name and the .driver
  # file (pleite-main:tools/ci/install-provider-into-container.sh). Ours then fails the
  # first open with one line that names usb4verbs-container.
  c=copy-$b
  if stock_run $c $img "$DEV0"; then
    podman cp "$HOST_PROVDIR/libusb4_rdma-rdmav34.so" $c:/usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma-rdmav34.so
    podman cp /etc/libibverbs.d/usb4_rdma.driver $c:/etc/libibverbs.d/usb4_rdma.driver
    podman exec $c ibv_devinfo -d "$DEV0" > $WORK/out.log 2>&1
    r=$?; show $WORK/out.log
    n=$(grep -c '^libusb4_rdma: .*cannot open' $WORK/out.log)
    if [ $r != 0 ] && [ "$n" = 1 ] && grep -q "^libusb4_rdma: .*usb4verbs-container <container>" $WORK/out.log; then
      pass stock-$b/single-file-copy
    else fail stock-$b/single-file-copy "exit $r, $n 'cannot open' lines; want one naming usb4verbs-container"; fi
  else
    fail stock-$b/single-file-copy "the container did not start"
  fi
  podman rm -f $c > /dev/null 2>&1
  podman rmi -f $img > /dev/null 2>&1
  echo "# stock-$b: $(($(cut -d. -f1 /proc/uptime) - t0)) s"
}

# The container host gets usb4verbs from the tarball (POSIX install.sh, as on a host
# without a package of ours); its usb4verbs-container serves the stock cases.
host_install() {
  rm -rf /tmp/u4tgz; mkdir -p /tmp/u4tgz
  # The usb4 bed has put our provider's .driver file there for its own tools: --force.
  force=""
  [ -e /etc/libibverbs.d/usb4_rdma.driver ] && force=--force
  tar -xzf $F/pkg/usb4verbs-*-linux-amd64.tar.gz -C /tmp/u4tgz && sh /tmp/u4tgz/usb4verbs-*/install.sh $force > $WORK/out.log 2>&1
  r=$?; show $WORK/out.log
  HOST_PROVDIR=$(sed -n 's#^driver \(/.*\)/libusb4_rdma$#\1#p' /etc/libibverbs.d/usb4_rdma.driver 2>/dev/null)
  if [ $r = 0 ] && [ -n "$HOST_PROVDIR" ] && command -v usb4verbs-container > /dev/null; then pass host/install; return 0; fi
  fail host/install "install.sh exit $r"; return 1
}

echo "=== engine"
if ! setup_engine; then fail engine "podman does not run"; exit 1; fi
pass engine
setup_netns || { fail netns "could not set up the ctrA/ctrB network namespaces"; exit 1; }
for b in $BASES; do
  echo "=== $b: import, build"
  t0=$(cut -d. -f1 /proc/uptime)
  if ! (tar -C $F/rootfs/$b -cf - . | podman import - localhost/base-$b) > $WORK/import.log 2>&1; then
    show $WORK/import.log; fail $b/build "podman import failed"; continue
  fi
  rm -rf "${F:?}/rootfs/$b"
  if podman build --isolation=chroot --network=host --build-arg BASE_IMAGE=localhost/base-$b \
       --build-arg APT_UPDATE=0 -f $F/containers/Containerfile.$b -t localhost/usb4verbs-$b $F/pkg \
       > $WORK/build.log 2>&1; then
    show $WORK/build.log
    pass "$b/build ($(($(cut -d. -f1 /proc/uptime) - t0)) s)"
  else
    show $WORK/build.log; fail $b/build "podman build failed"; continue
  fi
  image_cases $b
done
STOCK=$(cd $F/stock && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' ')
FIRST_STOCK=${STOCK%% *}
if [ -n "$STOCK" ]; then
  export PATH=/usr/local/sbin:/usr/local/bin:$PATH
  if host_install; then
    for b in $STOCK; do stock_cases $b; done
  fi
fi

# --- rdma netns mode exclusive: a container with its own network sees no device (doctor
# says so and names --network=host); with the host's network it works. The mode can be
# changed only while no other network namespace exists.
exclusive_cases() {
  for n in ctrA ctrB; do $IP netns del $n; done
  # A deleted namespace is freed asynchronously (the kernel's netns cleanup work), and
  # until then the mode change is refused with EBUSY.
  i=0
  until $RDMA system set netns exclusive > $WORK/excl.log 2>&1; do
    i=$((i + 1))
    if [ $i -ge 60 ]; then
      show $WORK/excl.log; fail netns-exclusive/setup "rdma system set netns exclusive still refused after 30 s"; return
    fi
    sleep 0.5
  done
  echo "    rdma system set netns exclusive: after $i retries"
  $IP netns add ctrX
  # One image is enough: what is visible is decided by the kernel, not the userland.
  for b in $BASES; do
    img=localhost/usb4verbs-$b
    podman image exists $img || continue
    single $b/netns-exclusive/ibv_devinfo $img fails "No IB devices found|[Nn]o .*device" \
      $(devflags "$DEV0") $LIMIT_FLAGS $USER_FLAGS $RXE_ENV --network=ns:/run/netns/ctrX -- ibv_devinfo
    single $b/netns-exclusive/doctor $img 1 "^ERROR +rdma-netns-exclusive ;; fix: .*--network=host" \
      $(devflags "$DEV0") $LIMIT_FLAGS $USER_FLAGS $RXE_ENV --network=ns:/run/netns/ctrX -- ibvinfo doctor --no-color
    single $b/netns-exclusive/host-network $img 0 "PORT_ACTIVE" \
      $(devflags "$DEV0") $LIMIT_FLAGS $USER_FLAGS $RXE_ENV --network=host -- ibv_devinfo -d "$DEV0"
    break
  done
  $IP netns del ctrX
  $RDMA system set netns shared || fail netns-exclusive/restore "rdma system set netns shared failed"
}
exclusive_cases
[ $FAILED = 0 ]
