#!/bin/sh
# tests/usb4/ucx-rank.sh CMD...: what guest-ucx.sh's mpirun starts for each rank: rank r
# gets UCX on the r-th device of UCX_RANK_DEVS (its port 1) plus the netdev UCX_RANK_IFC for
# the TCP wire-up, and its stdout and stderr go to UCX_RANK_LOG.rank<r>.{out,err}.
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:?not started by Open MPI}}
# shellcheck disable=SC2086 # the device list
set -- $UCX_RANK_DEVS -- "$@"
i=0 dev=
while [ "$1" != -- ]; do
  [ $i = "$r" ] && dev=$1
  i=$((i + 1))
  shift
done
shift
[ -n "$dev" ] || { echo "ucx-rank.sh: no device for rank $r in '$UCX_RANK_DEVS'" >&2; exit 2; }
export UCX_NET_DEVICES="$dev:1${UCX_RANK_IFC:+,$UCX_RANK_IFC}"
exec "$@" > "$UCX_RANK_LOG.rank$r.out" 2> "$UCX_RANK_LOG.rank$r.err"
