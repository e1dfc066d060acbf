# shellcheck shell=bash
# The module trees the usb4 bed builds, by the name USB4_TREE takes, and where their
# source is. Needs USB4_MODULE_SRC and USB4CACHE set.

# Trees in the order the bed builds them. donnerkeule-cq is the graft below.
USB4_TREES="hellas-main pleite-gda hellas-gda-v2 donnerkeule-cq"

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
    hellas-gda-v2 | pleite-gda) printf 'trixie linux-image-6.12.118+deb13-amd64\n' ;;
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
    hellas-main | pleite-gda | hellas-gda-v2)
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
# none for most trees. pleite-gda writes MODULE_IMPORT_NS("DMA_BUF")
# (pleite-gda:kernel/main.c:264), the string form of 6.13+, and is built for 6.12 here:
# the glue adds the import in the .modinfo form 6.12's modpost reads, to main.o, the
# object that states it. The tree is not touched. Needs REPO.
usb4_tree_glue() {
  case $1 in
    pleite-gda) printf '%s\n' "main.o=$REPO/tests/usb4/glue/import-ns-dma-buf.h" ;;
  esac
}

# usb4_tree_tbv_params TREE: module parameters the tree needs on the bed besides the
# usual ones (bed.sh USB4_TBV_PARAMS_DEFAULT). pleite-gda refuses the stock
# tb_protocol_handler, which carries no XDomain, when native negotiation or tunnels are
# on (pleite-gda:kernel/service.c:639, "rebuild against a kernel exposing
# tb_protocol_handler.callback_xd or set allow_source_blind_native=1"); no kernel has
# callback_xd, so it takes its own parameter. tbloop gives each end of a cable its own
# route, which is what the source-blind handler relies on (tbloop/README.md, Routes).
usb4_tree_tbv_params() {
  case $1 in
    pleite-gda) printf '%s\n' "allow_source_blind_native=1" ;;
  esac
}

# usb4_tree_expected_to_fail TREE: the tree is recorded (tests/usb4/README.md) as not
# building against any kernel the archive carries; the bed says SKIP with the compiler's
# first error instead of FAIL, and boots it the day it builds.
usb4_tree_expected_to_fail() {
  case $1 in donnerkeule-cq) return 0 ;; *) return 1 ;; esac
}
