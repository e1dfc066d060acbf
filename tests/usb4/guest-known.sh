# shellcheck shell=sh
# tests/usb4/guest-known.sh: known module behaviour the NCCL pattern meets, sourced by
# guest-nccl.sh and guest-ring.sh from /opt/usb4verbs (tests/usb4/run.sh installs it).

# nccl_torn_known TREE: the citation ncclpattern's --cts-torn-known takes on TREE, or
# nothing. Every tree lands an RDMA WRITE with a CPU copy of the payload, not in address
# order as a NIC's DMA does: a CTS entry's last word (idx) can be seen before the rest (seen
# through both providers, docs/nccl-pattern.md). Such a case SKIPs with this citation; NCCL
# would stop there.
nccl_torn_known() {
  case $1 in
    hellas-main) t="hellas-main:kernel/ibdev.c:6581" ;;
    hellas-gda-v2) t="hellas-gda-v2:kernel/ibdev.c:6744" ;;
    pleite-gda) t="pleite-gda:kernel/ibdev.c:6808" ;;
    pleite-gda-8099446) t="pleite-gda-8099446:kernel/ibdev.c:8091" ;;
    pleite-main) t="pleite-main:kernel/ibdev.c:5742" ;;
    *) return 0 ;;
  esac
  echo "$t tbv_umem_copy_to_iova copies the write into the target with the CPU, so the CTS entry's last word arrived before the rest"
}
