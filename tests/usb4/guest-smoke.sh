#!/bin/sh
# The usb4 bed's smoke test, run in the guest as VM_GUEST_SCRIPT after the usb4 setup
# (tests/vm/guest/usb4-setup.sh): the stock tools of rdma-core's ibverbs-utils on the
# devices the real module registered, through our provider (the only one in the image
# that serves usb4_rdma devices). Prints go-test-style lines usb4/<tree>/<check>.
# shellcheck disable=SC3045 # busybox

tree=${USB4VERBS_BACKEND_TREE:?not in the usb4 mode}
devs="$USB4VERBS_USB4_DEVS0 $USB4VERBS_USB4_DEVS1"
failed=0
pass() { echo "--- PASS: usb4/$tree/$1"; }
fail() { echo "--- FAIL: usb4/$tree/$1 ($2)"; failed=1; }

# listening PORT, wait_listen PID PORT
. /opt/usb4verbs/guest-listen.sh

# sysfs_guid DEV: the node GUID as ibv_devices prints it (hex digits, no colons).
sysfs_guid() { tr -d ':\n' < "/sys/class/infiniband/$1/node_guid"; }

# ibv_devices lists every device of both hosts with the GUID the module gave it.
out=$(ibv_devices 2>&1); rc=$?
echo "$out"
why=""
[ $rc = 0 ] || why="exit $rc"
for d in $devs; do
  echo "$out" | grep -Eq "^[[:space:]]*$d[[:space:]]+$(sysfs_guid "$d")\$" || why="${why:+$why; }$d with GUID $(sysfs_guid "$d") not listed"
done
if [ -z "$why" ]; then pass ibv_devices; else fail ibv_devices "$why"; fi

# ibv_devinfo -v opens each device (only a provider can) and shows its port ACTIVE.
why=""
for d in $devs; do
  out=$(ibv_devinfo -v -d "$d" 2>&1); rc=$?
  echo "$out" | head -n 40
  [ $rc = 0 ] || { why="${why:+$why; }$d: exit $rc"; continue; }
  echo "$out" | grep -q "node_guid:[[:space:]]*$(sed 's/:/:/g' "/sys/class/infiniband/$d/node_guid")" \
    || why="${why:+$why; }$d: node_guid differs from sysfs"
  echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE' || why="${why:+$why; }$d: port not PORT_ACTIVE"
done
if [ -z "$why" ]; then pass ibv_devinfo_v; else fail ibv_devinfo_v "$why"; fi

# ibv_rc_pingpong between one device of each host: server on DEV0 pinned to vCPU 0,
# client on DEV1 pinned to vCPU 1, connection data over TCP on lo.
iters=${USB4_PINGPONG_ITERS:-200}
log=/tmp/rc_pingpong.server
taskset 1 timeout 120 ibv_rc_pingpong -d "$USB4VERBS_DEV0" -g "$USB4VERBS_GID0" -n "$iters" > "$log" 2>&1 &
spid=$!
wait_listen "$spid" 18515  # ibv_rc_pingpong's default port
cout=$(taskset 2 timeout 100 ibv_rc_pingpong -d "$USB4VERBS_DEV1" -g "$USB4VERBS_GID1" -n "$iters" 127.0.0.1 2>&1); crc=$?
i=0
while kill -0 "$spid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill "$spid" 2>/dev/null
wait "$spid"; src=$?
echo "client ($USB4VERBS_DEV1): $cout"
echo "server ($USB4VERBS_DEV0): $(cat "$log")"
if [ $crc = 0 ] && [ $src = 0 ] && echo "$cout" | grep -q 'usec/iter'; then
  pass "ibv_rc_pingpong_$USB4VERBS_DEV1-$USB4VERBS_DEV0"
else
  fail "ibv_rc_pingpong_$USB4VERBS_DEV1-$USB4VERBS_DEV0" "client exit $crc, server exit $src"
fi
# A udev rename (rdma-core's persistent naming gives such devices rocep* names) keeps
# the device ours: the provider matches it by node GUID, not by name. Rename one
# device of host A, open it and move data with it, then rename it back.
new=rocep0s0f0
RDMA=${RDMA:-rdma}
if $RDMA dev set "$USB4VERBS_DEV0" name "$new" 2>/tmp/rename.err; then
  why=""
  out=$(ibv_devinfo -d "$new" 2>&1) || why="ibv_devinfo -d $new: $(echo "$out" | tail -n 2)"
  [ -z "$why" ] && ! echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE' && why="$new: port not PORT_ACTIVE"
  if [ -z "$why" ]; then
    taskset 1 timeout 60 ibv_rc_pingpong -d "$new" -g "$USB4VERBS_GID0" -n 20 > /tmp/rename.server 2>&1 &
    spid=$!
    wait_listen "$spid" 18515
    cout=$(taskset 2 timeout 50 ibv_rc_pingpong -d "$USB4VERBS_DEV1" -g "$USB4VERBS_GID1" -n 20 127.0.0.1 2>&1); crc=$?
    wait "$spid"; src=$?
    [ $crc = 0 ] && [ $src = 0 ] || why="ibv_rc_pingpong on $new: client exit $crc, server exit $src: $(echo "$cout" | tail -n 2)"
  fi
  $RDMA dev set "$new" name "$USB4VERBS_DEV0" || why="${why:+$why; }could not rename $new back"
  if [ -z "$why" ]; then pass renamed_device_still_claimed; else fail renamed_device_still_claimed "$why"; fi
else
  fail renamed_device_still_claimed "rdma dev set $USB4VERBS_DEV0 name $new: $(cat /tmp/rename.err)"
fi

# Shared receive queues (issue 35): the provider's SRQ on a kernel without SRQs
# (tests/usb4/srq.c, ibv_srq_pingpong) through ours, and the module's C provider's
# refusal, same boot (guest-srq.sh): usb4/<tree>/srq/<case>.
if [ -x /opt/usb4verbs/srq ] && [ -r /opt/usb4verbs/guest-srq.sh ]; then
  sh /opt/usb4verbs/guest-srq.sh || failed=1
fi

# The extended CQ verbs of issue 14 through libibverbs and our provider
# (cshim/testdata/cqex.c): sender on a device of host A, receiver on one of host B,
# every case judged against rdma-core's contract, what the module lacks (resize_cq,
# SRQs) refused with its errno. Its result lines become usb4/<tree>/cqex/<case>.
if [ -x /opt/usb4verbs/cqex ]; then
  timeout 300 /opt/usb4verbs/cqex "$USB4VERBS_DEV0" "$USB4VERBS_GID0" usb4 "$USB4VERBS_DEV1" "$USB4VERBS_GID1" > /tmp/cqex.out 2>&1 || failed=1
  sed "s|^--- \([A-Z]*\): cqex/|--- \1: usb4/$tree/cqex/|" /tmp/cqex.out
fi

# create_qp_ex with ibv_wr_* between the two hosts (cshim/testdata/qpex.c --usb4):
# every opcode the module executes, the batch rules, the bad flows, and the
# refusal of the others at create time; one usb4/<tree>/qpex/<case> line each.
if [ -x /opt/usb4verbs/qpex ]; then
  /opt/usb4verbs/qpex --usb4 "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$USB4VERBS_DEV1" "$USB4VERBS_GID1" || failed=1
fi

# NCCL net_ib's pattern between host 0's and host 1's devices (tests/usb4/ncclpattern.c,
# guest-nccl.sh): one usb4/<tree>/nccl/<case> line each through our provider; the module's
# C provider's lines, when the boot carries it, as the uncounted "cprovider|" baseline.
if [ -x /opt/usb4verbs/ncclpattern ] && [ -r /opt/usb4verbs/guest-nccl.sh ]; then
  sh /opt/usb4verbs/guest-nccl.sh || failed=1
fi

# dma-buf MRs on vgem buffers (tests/usb4/dmabuf.c) through ours and, same boot, the
# module's C provider: usb4/<tree>/dmabuf/<case> and usb4/<tree>/dmabuf/same/<case>.
if [ -x /opt/usb4verbs/dmabuf ] && [ -r /opt/usb4verbs/guest-dmabuf.sh ]; then
  sh /opt/usb4verbs/guest-dmabuf.sh || failed=1
fi

# gloo's ibverbs pattern (tests/usb4/gloopattern.c, guest-gloo.sh; issue 34): two ranks, one
# completion channel, RDMA_WRITE_WITH_IMM; usb4/<tree>/gloo/<mode> through ours, the module's
# C provider's runs as the uncounted "cprovider|" baseline, a failure placed.
if [ -x /opt/usb4verbs/gloopattern ] && [ -r /opt/usb4verbs/guest-gloo.sh ]; then
  sh /opt/usb4verbs/guest-gloo.sh || failed=1
fi

# The DV ABI as a GPU producer uses it (tests/usb4/dvconsumer.c, issue 23): QP created
# through libibverbs, then its own DV queue on ctx->cmd_fd and qp->handle, WQEs produced
# by the CPU. Through our provider with its defaults, with its own DV use on (dv_send:
# attached only at a first post, which this application never makes while its queue
# lives), and through the module's C provider, in this one boot; each must get the same
# answers. Lines usb4/<tree>/dv_consumer/<provider>/<case>; trees without DV say SKIP.
dvc() {
  side=$1 match=$2
  shift 2
  env "$@" /opt/usb4verbs/dvconsumer "$USB4VERBS_DEV0" "$USB4VERBS_GID0" "$USB4VERBS_DEV1" "$USB4VERBS_GID1" \
    "$match" > "/tmp/dvc.$side" 2>&1 || failed=1
  sed "s|^--- \([A-Z]*\): dv_consumer/|--- \1: usb4/$tree/dv_consumer/$side/|" "/tmp/dvc.$side"
}
if [ -x /opt/usb4verbs/dvconsumer ]; then
  dvc ours libusb4_rdma-go.so
  dvc ours_dv_send libusb4_rdma-go.so USB4VERBS_DV_SEND=1 USB4VERBS_DEBUG=1
  if [ -f /opt/usb4verbs/upstream/libusb4_rdma-rdmav34.so ]; then
    # Both providers register the driver name usb4_rdma: ours' driver file goes
    # away while the C provider runs (as tests/bench/guest-usb4.sh does).
    drv=/etc/libibverbs.d/usb4_rdma.driver
    [ -f $drv ] && mv $drv /tmp/usb4_rdma.driver.saved
    dvc upstream /opt/usb4verbs/upstream/libusb4_rdma RDMAV_DRIVERS=/opt/usb4verbs/upstream/libusb4_rdma
    [ -f /tmp/usb4_rdma.driver.saved ] && mv /tmp/usb4_rdma.driver.saved $drv
  else
    echo "--- SKIP: usb4/$tree/dv_consumer/upstream ($(cat /opt/usb4verbs/upstream/skip 2>/dev/null || echo 'the module'"'"'s C provider is not in the image'))"
  fi
fi

# The stock-tool cases, when tests/usb4/run.sh put tests/stock/guest.sh in the image.
if [ -r /opt/usb4verbs/stock.conf ] && [ -r /opt/usb4verbs/guest.sh ]; then
  sh /opt/usb4verbs/guest.sh || failed=1
fi
exit $failed
