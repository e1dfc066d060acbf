# shellcheck shell=bash
# The module trees the usb4 bed builds, by the name USB4_TREE takes, and where their
# source is. Needs USB4_MODULE_SRC and USB4CACHE set.

# Every tree the bed knows, by name (USB4_TREE=<tree>, tests/usb4/run.sh TREE...), in the
# order the bed builds them. donnerkeule-cq is the graft below. pleite-gda is eca80ec,
# pleite-gda-8099446 the DV line's head.
USB4_TREES="hellas-main pleite-main pleite-gda-8099446 pleite-gda hellas-gda-v2 donnerkeule-cq"

# The trees tests/usb4/run.sh takes without arguments (the `make test` stage), unless
# USB4_TEST_TREES says otherwise; tests/usb4/README.md ("Which trees make test boots")
# says why these.
# pleite-main is left to TEST_FULL=1: it is only built (usb4_tree_no_boot), a snapshot
# whose build changes only with tbloop's symbols, and its module build is minutes of an
# empty-cache CI run that the four-host ring's boot needed (issue 32). donnerkeule-cq too:
# a partial snapshot that cannot build (tests/usb4/README.md), whose failed build only
# re-printed its SKIP in every CI run.
USB4_TEST_TREES_DEFAULT="hellas-main pleite-gda-8099446"
# TEST_FULL=1 (make test's full tier): every tree the bed knows.
USB4_TEST_TREES_FULL="hellas-main pleite-main pleite-gda-8099446 pleite-gda hellas-gda-v2 donnerkeule-cq"

# usb4_module_src REPO: USB4_MODULE_SRC, else ../shared/usb4-module beside the repo when
# it exists; prints nothing when neither is there.
usb4_module_src() {
  if [[ -n ${USB4_MODULE_SRC:-} ]]; then
    printf '%s\n' "$USB4_MODULE_SRC"
  elif [[ -d $1/../shared/usb4-module ]]; then
    (cd "$1/../shared/usb4-module" && pwd)
  fi
}

# usb4_tree_kernel TREE: the Debian kernel package the tree is built and booted with: the
# newest in the archive it builds against (tests/usb4/README.md lists the kernels tried
# and the compiler's errors on the newer ones). KSUITE first, then KPKG.
usb4_tree_kernel() {
  case $1 in
    hellas-main | donnerkeule-cq) printf 'trixie-backports linux-image-7.2.12+deb13-amd64\n' ;;
    hellas-gda-v2 | pleite-gda | pleite-gda-8099446 | pleite-main) printf 'trixie linux-image-6.12.118+deb13-amd64\n' ;;
    *) return 1 ;;
  esac
}

# usb4_tree_dir TREE: prints the directory to build (its Kbuild dir is kernel/). The
# donnerkeule snapshot has only kernel/ibdev.c and proto/tbv_cq_shm.h of its tree (its
# SNAPSHOT file), so the CQ-ring backend is built as those two files laid over a copy of
# hellas-main, the released tree donnerkeule forked from; the copy lives in the cache
# and is never committed.
usb4_tree_dir() {
  local tree=$1 src=$USB4_MODULE_SRC
  case $tree in
    hellas-main | pleite-main | pleite-gda-8099446 | pleite-gda | hellas-gda-v2)
      [[ -d $src/$tree/kernel ]] || { log "usb4: no $src/$tree/kernel"; return 1; }
      printf '%s\n' "$src/$tree" ;;
    donnerkeule-cq)
      local dk="$src/donnerkeule-partial/370cd95" g="$USB4CACHE/graft/donnerkeule-370cd95-on-hellas-main"
      [[ -f $dk/kernel/ibdev.c && -f $dk/proto/tbv_cq_shm.h && -d $src/hellas-main/kernel ]] \
        || { log "usb4: the graft needs $dk/kernel/ibdev.c, $dk/proto/tbv_cq_shm.h and $src/hellas-main"; return 1; }
      rm -rf "$g.tmp"; mkdir -p "$g.tmp"
      cp -a "$src/hellas-main/." "$g.tmp/"
      cp "$dk/kernel/ibdev.c" "$g.tmp/kernel/ibdev.c"
      cp "$dk/proto/tbv_cq_shm.h" "$g.tmp/proto/tbv_cq_shm.h"
      rm -rf "$g"; mv "$g.tmp" "$g"
      printf '%s\n' "$g" ;;
    *) log "usb4: unknown tree $tree (one of: $USB4_TREES)"; return 1 ;;
  esac
}

# usb4_tree_glue TREE: glue of ours (tests/usb4/glue/) the tree is built with, as
# kbuild_module's KBUILD_GLUE (OBJ=HEADER: the header forced in front of that object);
# none for most trees. pleite-gda and pleite-gda-8099446 write MODULE_IMPORT_NS("DMA_BUF")
# (pleite-gda:kernel/main.c:264, pleite-gda-8099446:kernel/main.c:264), the string form
# of 6.13+, and are built for 6.12 here: the glue adds the import in the .modinfo form
# 6.12's modpost reads, to main.o, the object that states it. The tree is not touched.
# Needs REPO.
usb4_tree_glue() {
  case $1 in
    pleite-gda | pleite-gda-8099446) printf '%s\n' "main.o=$REPO/tests/usb4/glue/import-ns-dma-buf.h" ;;
  esac
}

# usb4_tree_tbv_params TREE: module parameters the tree needs on the bed besides the
# usual ones (bed.sh USB4_TBV_PARAMS_DEFAULT). pleite-gda refuses the stock
# tb_protocol_handler, which carries no XDomain, when native negotiation or tunnels are
# on (pleite-gda:kernel/service.c:639, "rebuild against a kernel exposing
# tb_protocol_handler.callback_xd or set allow_source_blind_native=1"); no kernel has
# callback_xd, so it takes its own parameter. tbloop gives each end of a cable its own
# route, which is what the source-blind handler relies on (tbloop/README.md, Routes).
# pleite-gda-8099446 refuses it the same way (pleite-gda-8099446:kernel/service.c:641).
# pleite-main has no such refusal (and no such parameter); it is built with its
# dma-buf MR op (usb4_tree_make_vars) and loaded with it on: gpu_direct=on
# (pleite-main:kernel/main.c, "auto, on, off"; ibdev_mr.c refuses every dma-buf
# registration while it is off). It also rejects every native peer without a PSK
# entry ("native peer authentication requires peer_auth_acl entries",
# pleite-main:kernel/main.c; "peer rejected by auth ACL", pleite-main:kernel/peer.c,
# -EACCES at the service's probe): peer_auth_acl=<uuid>=<32 hex PSK>,... names both of
# tbloop's hosts (their fixed UUIDs, tbloop/main.c tbl_host_uuid) with one test PSK,
# as the tree's packaging/modprobe.d example does for two cabled hosts.
USB4_TBLOOP_UUID0=74626c6f-6f70-4000-8000-74626c6f6f70
USB4_TBLOOP_UUID1=74626c6f-6f70-4001-8000-74626c6f6f71
USB4_TEST_PSK=7573623476657262732d62656421a5a5
usb4_tree_tbv_params() {
  case $1 in
    pleite-gda | pleite-gda-8099446) printf '%s\n' "allow_source_blind_native=1" ;;
    pleite-main) printf '%s\n' "gpu_direct=on peer_auth_acl=$(usb4_topology_acl "${USB4_TBLOOP_TOPOLOGY:-}")" ;;
  esac
}

# usb4_topology_acl TOPOLOGY: peer_auth_acl's value for every host of the topology in one
# kernel (one module serves them all, so its one parameter holds what each machine's
# own would). Two hosts: both UUIDs with the test PSK. ring4: the entries
# MULTI-PORT-TOPOLOGY.md gives per machine (pleite-main:docs/MULTI-PORT-TOPOLOGY.md:212-281
# at 30028ef, "Step 2" and "Step 3": each machine lists its two
# neighbours, one PSK per pair: PSK_AB, PSK_BC, PSK_CD, PSK_DA), where a neighbour's UUID
# is that of the port facing it (tbloop: a domain per port; tbl_host_uuid: host h, port p
# is 74626c6f-6f70-400h-80pp-74626c6f6f7h).
usb4_topology_acl() {
  case $1 in
    ring4)
      local u='74626c6f-6f70-400%d-80%02x-74626c6f6f7%d' psk=${USB4_TEST_PSK%??} out="" c a pa b pb
      # cable c (its PSK ends in 0c): host a, its port; host b, its port (tbloop's port
      # order: a host's cables in the list's order)
      for c in "0 0 0 1 0" "1 1 1 2 0" "2 2 1 3 0" "3 3 1 0 1"; do
        read -r c a pa b pb <<<"$c"
        # shellcheck disable=SC2059 # the format is the UUID's
        out+="$(printf "$u" "$a" "$pa" "$a")=${psk}0$c,$(printf "$u" "$b" "$pb" "$b")=${psk}0$c,"
      done
      printf '%s\n' "${out%,}" ;;
    *) printf '%s\n' "$USB4_TBLOOP_UUID0=$USB4_TEST_PSK,$USB4_TBLOOP_UUID1=$USB4_TEST_PSK" ;;
  esac
}

# usb4_tree_make_vars TREE: make variables of the tree's own kernel/Makefile the bed
# builds it with, as kbuild_module's KBUILD_MAKEVARS. pleite-main compiles its
# reg_user_mr_dmabuf op only with tbv_gpu_direct=1 (pleite-main:kernel/Makefile:
# `tbv_gpu_direct ?= 0`, `-DCONFIG_TBV_GPU_DIRECT`; pleite-main:kernel/ibdev.c sets the
# op under that define).
usb4_tree_make_vars() {
  case $1 in
    pleite-main) printf '%s\n' "tbv_gpu_direct=1" ;;
  esac
}

# usb4_tree_no_boot TREE: prints why `make test` (tests/usb4/run.sh without tree names)
# builds TREE but does not boot it; fails for a tree it boots. Named on the command line
# (run.sh TREE, USB4_TREE=TREE), the tree still boots. pleite-main (60089da): its devices
# never come up between two hosts. Its native HELLO fails -EACCES on the initiator: the
# auth digest hashes the computing side's xd->local_uuid and xd->remote_uuid in that
# order (pleite-main:kernel/native_control.c tbv_native_control_auth_digest), so the
# responder's session id and tag (local = B, remote = A) never match what the initiator
# computes (local = A, remote = B); tests/usb4/README.md has the log.
usb4_tree_no_boot() {
  case $1 in
    pleite-main) echo "boot left out: pleite-main's native peer authentication cannot complete between two hosts (native_control.c tbv_native_control_auth_digest hashes local/remote UUIDs in each side's own order; native HELLO fails -13), so it registers no device; USB4_TREE=pleite-main boots it" ;;
    *) return 1 ;;
  esac
}

# usb4_tree_expected_to_fail TREE: the tree is recorded (tests/usb4/README.md) as not
# building against any kernel the archive carries; the bed says SKIP with the compiler's
# first error instead of FAIL, and boots it the day it builds.
usb4_tree_expected_to_fail() {
  case $1 in donnerkeule-cq) return 0 ;; *) return 1 ;; esac
}
