#!/usr/bin/env bash
# tests/usb4/capture-ibvinfo-tree.sh [VM_OUTPUT]: the ibvinfo fixture trees captured on
# the usb4 bed, unpacked into cmd/ibvinfo/testdata/bed/<name>/ (root/: the tree for
# `ibvinfo --root`; live.*: what ibvinfo printed on the live system there;
# tbloop.stats). VM_OUTPUT is the stdout of a diag boot (tests/usb4/run.sh keeps it as
# build/usb4/<tree>.diag.out); without it, this script boots one itself
# (USB4_TREE, default hellas-main). The libibverbs part of a tree (etc/libibverbs.d,
# usr/lib) is not the module's and the bed's libraries are megabytes, so each tree
# gets that part from the hand-made healthy tree (fake ELF files).
# Afterwards: go test ./cmd/ibvinfo -run TestBed -update (rewrites the goldens).
set -euo pipefail

USB4DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$USB4DIR/../.." && pwd)
DEST=$REPO/cmd/ibvinfo/testdata/bed
HANDMADE=$REPO/cmd/ibvinfo/testdata/trees/healthy
out=${1:-}

if [[ -z $out ]]; then
  tree=${USB4_TREE:-hellas-main}
  out="$REPO/build/usb4/$tree.diag.out"
  mkdir -p "${out%/*}"
  USB4_DIAG_TREES=$tree "$USB4DIR/run.sh" --diag-only "$tree" > /dev/null || true
fi
[[ -s $out ]] || { echo "capture-ibvinfo-tree: no VM output in $out" >&2; exit 1; }

names=$(sed -n 's/^=== ibvinfo-capture \(.*\) begin ===$/\1/p' "$out")
[[ -n $names ]] || { echo "capture-ibvinfo-tree: no capture in $out" >&2; exit 1; }
for name in $names; do
  dir=$DEST/$name
  rm -rf "$dir"; mkdir -p "$dir"
  sed -n "/^=== ibvinfo-capture $name begin ===\$/,/^=== ibvinfo-capture $name end ===\$/p" "$out" |
    sed '1d;$d' | base64 -d | tar xzf - -C "$dir"
  rm -rf "$dir/root/etc/libibverbs.d" "$dir/root/usr/lib/x86_64-linux-gnu"
  mkdir -p "$dir/root/etc" "$dir/root/usr/lib"
  cp -a "$HANDMADE/etc/libibverbs.d" "$dir/root/etc/"
  cp -a "$HANDMADE/usr/lib/x86_64-linux-gnu" "$dir/root/usr/lib/"
  # git keeps no empty directory (no IOMMU units, no bound driver): ibvinfo reads a
  # missing one as empty, which is what it was.
  echo "captured $name -> ${dir#"$REPO"/}"
done
