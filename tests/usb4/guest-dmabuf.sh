#!/bin/sh
# dma-buf memory regions in the guest (tests/usb4/dmabuf.c, built on the host into
# /opt/usb4verbs/dmabuf), through our provider and, in the same boot, through the
# module's own C provider (/opt/usb4verbs/upstream/libusb4_rdma-rdmav34.so, from
# tests/bench/upstream-provider.sh) when it is there. guest-smoke.sh runs it on the usb4
# bed; cshim/vmtest.sh on rxe (then the baseline is librxe). Lines:
#   --- PASS|FAIL|SKIP: <prefix>/dmabuf/<case>        ours, dmabuf.c's verdict
#   --- PASS|FAIL|SKIP: <prefix>/dmabuf/same/<case>   ours' outcome (ok or the errno) is the baseline's
#   @@DMABUFROW <prefix> <case> <ours> <baseline>    for docs/dmabuf.md (tests/usb4/dmabuf-doc.sh)
# <prefix>: DMABUF_PREFIX, default usb4/<tree>. Each provider runs with the other's
# driver file out of the way and RDMAV_DRIVERS naming it, so a process maps only one.
# shellcheck disable=SC3045 # busybox

tree=${USB4VERBS_BACKEND_TREE:-rxe}
prefix=${DMABUF_PREFIX:-usb4/$tree}
BIN=${DMABUF_BIN:-/opt/usb4verbs}
OURS=${DMABUF_OURS:-/usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma}
# The baseline: the module's C provider on usb4; on rxe (DMABUF_BASELINE=rxe) librxe.
BASE=${DMABUF_BASELINE:-$BIN/upstream/libusb4_rdma}
base_name=${DMABUF_BASELINE_NAME:-cprovider}
DRIVER_FILE=/etc/libibverbs.d/usb4_rdma.driver
failed=0

if [ ! -x "$BIN/dmabuf" ]; then
  echo "--- SKIP: $prefix/dmabuf (no $BIN/dmabuf in the image)"
  exit 0
fi

# What the tree is expected to do with a dma-buf: register it where the module has
# reg_user_mr_dmabuf and gives ib_core a DMA device to attach the dma-buf to
# (hellas-gda-v2:kernel/ibdev.c ib_register_device(..., dma_device)). The pleite trees
# register their devices without one (ib_register_device(&dev->base, name, NULL):
# pleite-gda:kernel/ibdev.c:11030, pleite-gda-8099446:kernel/ibdev.c:13205,
# pleite-main:kernel/ibdev.c:8291), so ib_umem_dmabuf_get*() reaches
# dma_buf_dynamic_attach(dmabuf, NULL), which warns and answers EINVAL
# (linux:drivers/dma-buf/dma-buf.c WARN_ON(!dmabuf || !dev)) whatever the exporter:
# their op exists (NCCL's probe says "supported") but every registration is refused.
# hellas-main has no op (EOPNOTSUPP).
#
# known ($known_file, "CASE OUTCOME CITATION" lines): the module's own answers on the data
# path, seen through its C provider in the same boot as through ours; ours' line is then a
# SKIP naming them with the citation (the same/<case> line still compares the providers). hellas-gda-v2 registers vgem
# buffers, but its send path copies the source through ib_umem_copy_from
# (hellas-gda-v2:kernel/ibdev.c:4095), which walks the umem's orig_nents, and a dma-buf
# umem has only nents set (linux:drivers/infiniband/core/umem_dmabuf.c
# ib_umem_dmabuf_map_pages): nothing is copied and the post fails with EINVAL; an RDMA
# READ from a dma-buf MR fails the same way on the responder, so the reader retries until
# RETRY_EXC.
param=/sys/module/thunderbolt_ibverbs/parameters/gpu_direct
#
# With native_p2p_zcopy=1 zcopy_min_bytes=4096 (hellas-gda-v2:kernel/ibdev.c:104-111, both
# writable at run time) its WRITE and WRITE_WITH_IMM from a dma-buf MR stream the source
# from the exporter's DMA addresses (:4623-4672, :6856-6900): dmabuf --zcopy runs with
# them set (below). What stays refused then, each in `known` with its citation:
#   zcopy_dmabuf_target  the receive side copies into the target with sg_pcopy_from_buffer
#                        over orig_nents (tbv_umem_copy_to, hellas-gda-v2:kernel/ibdev.c:6739)
#   zcopy_send           only WRITEs go zero-copy (:4529-4533, :4623); SEND's CPU copy
#                        (ib_umem_copy_from, :4095) fails the post (:4766)
#   zcopy_read           the responder copies the source with ib_umem_copy_from
#                        (tbv_umem_copy_from_iova, :6789-6801, called at :8593)
known_file=/tmp/dmabuf.known
: > $known_file
case $tree in
  hellas-gda-v2)
    expect=reg
    {
      echo "write EINVAL hellas-gda-v2:kernel/ibdev.c:4095 ib_umem_copy_from walks orig_nents, 0 in a dma-buf umem: the CPU copy of the source fails the post"
      echo "read fail hellas-gda-v2:kernel/ibdev.c:8593 the responder copies the dma-buf source with ib_umem_copy_from (orig_nents): the reader retries until RETRY_EXC"
      echo "send_recv EINVAL hellas-gda-v2:kernel/ibdev.c:4095 ib_umem_copy_from walks orig_nents, 0 in a dma-buf umem: the CPU copy of the source fails the post"
      echo "write_with_imm EINVAL hellas-gda-v2:kernel/ibdev.c:4095 ib_umem_copy_from walks orig_nents, 0 in a dma-buf umem: the CPU copy of the source fails the post"
      echo "zcopy_dmabuf_target fail hellas-gda-v2:kernel/ibdev.c:6739 the receive side copies into a dma-buf target with sg_pcopy_from_buffer over orig_nents, 0 in a dma-buf umem"
      echo "zcopy_send EINVAL hellas-gda-v2:kernel/ibdev.c:4623 only RDMA WRITEs go zero-copy; SEND's CPU copy of the source (ib_umem_copy_from, :4095) fails the post"
      echo "zcopy_read fail hellas-gda-v2:kernel/ibdev.c:8593 the responder copies the dma-buf source with ib_umem_copy_from (orig_nents), zero-copy or not"
    } > $known_file ;;
  hellas-main | pleite-gda | pleite-gda-8099446 | pleite-main) expect=refuse ;;
  *) expect=${DMABUF_EXPECT:-} ;;
esac
if [ -r $param ]; then
  echo "# gpu_direct=$(cat $param)"
  [ "$(cat $param)" = off ] && expect=refuse
fi
[ -e /sys/module/vgem ] && echo "# vgem loaded; /dev/dri: $(ls /dev/dri 2>/dev/null | tr '\n' ' ')"

saved=""
if [ -f $DRIVER_FILE ]; then mv $DRIVER_FILE /tmp/usb4_rdma.driver.saved && saved=1; fi
# run NAME LIB [ENV...]: dmabuf.c through the provider LIB; its output in /tmp/dmabuf.NAME.
# Where the module has native_p2p_zcopy (hellas-gda-v2), a second pass, dmabuf --zcopy,
# runs with native_p2p_zcopy=1 zcopy_min_bytes=4096 set for it and the values before
# put back after it.
MP=/sys/module/thunderbolt_ibverbs/parameters
run() {
  n=$1 drv=$2; shift 2
  env DMABUF_EXPECT="$expect" RDMAV_DRIVERS="$drv" "$@" timeout 180 "$BIN/dmabuf" > "/tmp/dmabuf.$n" 2>&1
  echo "rc=$?" >> "/tmp/dmabuf.$n"
  if [ -w $MP/native_p2p_zcopy ] && [ -w $MP/zcopy_min_bytes ] && [ "${DMABUF_ZCOPY:-1}" != 0 ]; then
    p2p=$(cat $MP/native_p2p_zcopy) zmin=$(cat $MP/zcopy_min_bytes)
    echo 1 > $MP/native_p2p_zcopy && echo 4096 > $MP/zcopy_min_bytes
    {
      echo "# zcopy pass ($n): native_p2p_zcopy=$(cat $MP/native_p2p_zcopy) zcopy_min_bytes=$(cat $MP/zcopy_min_bytes)"
      env DMABUF_EXPECT="$expect" RDMAV_DRIVERS="$drv" "$@" timeout 180 "$BIN/dmabuf" --zcopy 2>&1
      echo "rc=$?"
    } >> "/tmp/dmabuf.$n"
    echo "$p2p" > $MP/native_p2p_zcopy; echo "$zmin" > $MP/zcopy_min_bytes
  fi
}
have_base=0
if [ "$BASE" = rxe ] || [ -f "$BASE-rdmav34.so" ]; then
  # Our claim of rxe off, so that librxe serves rxe (cshim/README.md).
  run base "$BASE" USB4VERBS_CLAIM_RXE=0; have_base=1
fi
run ours "$OURS"
[ -n "$saved" ] && mv /tmp/usb4_rdma.driver.saved $DRIVER_FILE

if [ $have_base = 1 ]; then
  echo "# $base_name ($BASE):"
  sed 's/^/#   /' /tmp/dmabuf.base
fi
# Ours: dmabuf.c's result lines under the prefix; a FAIL whose outcome is one of the
# module's known answers becomes a SKIP that names it.
awk -v prefix="$prefix" -v kf="$known_file" '
  BEGIN { while ((getline k < kf) > 0) { split(k, f, " "); c = f[1] " " f[2]; sub(/^[^ ]+ [^ ]+ /, "", k); known[c] = k } }
  /^@@DMABUF / { out[$2] = $3 }
  { line[NR] = $0 }
  END {
    for (i = 1; i <= NR; i++) {
      l = line[i]
      if (l ~ /^--- [A-Z]+: rel\/dmabuf\//) {
        split(l, f, " "); st = f[2]; sub(":", "", st); c = f[3]; sub("rel/dmabuf/", "", c)
        if (st == "FAIL" && (c " " out[c]) in known)
          l = "--- SKIP: " prefix "/dmabuf/" c " (the module'"'"'s known answer " out[c] ": " known[c " " out[c]] ", docs/dmabuf.md)"
        else
          sub("rel/dmabuf/", prefix "/dmabuf/", l)
        print l
        if (l ~ /^--- FAIL/) bad = 1
      } else if (l ~ /^    / || l ~ /^@@DMABUF / || l ~ /^rc=/ || l ~ /^# z/) print l
    }
    exit bad
  }' /tmp/dmabuf.ours || failed=1
grep -q "^--- [A-Z]*: rel/dmabuf/" /tmp/dmabuf.ours || { echo "--- FAIL: $prefix/dmabuf (no result lines)"; cat /tmp/dmabuf.ours; failed=1; }

# Same outcome as the baseline, case by case.
for c in $(sed -n 's/^@@DMABUF \([^ ]*\) .*/\1/p' /tmp/dmabuf.ours); do
  o=$(sed -n "s/^@@DMABUF $c //p" /tmp/dmabuf.ours | head -n 1)
  if [ $have_base = 0 ]; then
    echo "@@DMABUFROW $prefix $c $o -"
    echo "--- SKIP: $prefix/dmabuf/same/$c (no $base_name in the image)"
    continue
  fi
  b=$(sed -n "s/^@@DMABUF $c //p" /tmp/dmabuf.base | head -n 1)
  echo "@@DMABUFROW $prefix $c $o ${b:--}"
  # Ours answers NCCL's probe EOPNOTSUPP where its one real registration of a
  # udmabuf was refused (a module without a DMA device); the C provider passes
  # the kernel's EINVAL on (docs/dmabuf.md, issue 33 item 2).
  if [ "$o" != "$b" ] && { [ "$c/$o/$b" = nccl_probe/EOPNOTSUPP/EINVAL ] || [ "$c/$o/$b" = nccl_predicts/yes/no ] ||
      [ "$c/$o/$b" = reg_mr_ex_probe/EOPNOTSUPP/EINVAL ]; }; then
    echo "--- PASS: $prefix/dmabuf/same/$c (ours $o, $base_name $b: ours established that the device cannot import, docs/dmabuf.md)"
  elif [ "$o" = "$b" ]; then
    echo "--- PASS: $prefix/dmabuf/same/$c (ours $o, $base_name $b)"
  else
    echo "--- FAIL: $prefix/dmabuf/same/$c (ours $o, $base_name ${b:-no line})"
    failed=1
  fi
done
dmesg | grep -i -E 'dma-?buf|gpu_direct' | tail -n 20 | sed 's/^/# dmesg: /'
exit $failed
