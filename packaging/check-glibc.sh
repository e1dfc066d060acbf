#!/usr/bin/env bash
# packaging/check-glibc.sh [--floor X.Y] ELF...: prints the newest GLIBC_x.y symbol
# version the files need together (from the dynamic version references, objdump -p).
# With --floor it exits 1, naming each symbol that needs more, when that is newer than
# X.Y. Our floor is 2.35 (Ubuntu 22.04, the oldest target); packaging/README.md.
set -euo pipefail

floor=""
if [[ ${1:-} == --floor ]]; then
  floor=${2:?--floor needs a version like 2.35}
  shift 2
fi
(($#)) || { echo "usage: $0 [--floor X.Y] ELF..." >&2; exit 2; }
command -v objdump >/dev/null || { echo "check-glibc: objdump not found (apt-get install binutils)" >&2; exit 2; }

# newest VERSION...: the highest of the given dotted versions.
newest() { printf '%s\n' "$@" | sort -V | tail -n1; }

all=() bad=0
for f in "$@"; do
  [[ -f $f ]] || { echo "check-glibc: no such file: $f" >&2; exit 2; }
  objdump -p "$f" >/dev/null 2>&1 || { echo "check-glibc: not an ELF file objdump can read: $f" >&2; exit 2; }
  # "Version References:" lists, per needed library, the version nodes it must provide.
  mapfile -t vers < <(objdump -p "$f" | awk '/^Version References:/{on=1; next} on && NF==0{on=0} on' \
                      | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV)
  ((${#vers[@]})) || continue
  all+=("${vers[@]}")
  if [[ -n $floor ]]; then
    top=$(newest "${vers[@]}")
    if [[ $(newest "$top" "$floor") != "$floor" ]]; then
      echo "check-glibc: $f needs GLIBC_$top, newer than the floor GLIBC_$floor; symbols:" >&2
      for v in "${vers[@]}"; do
        [[ $(newest "$v" "$floor") == "$floor" ]] && continue
        objdump -T "$f" | awk -v v="GLIBC_$v" '$0 ~ "[( ]" v "[) ]" {print "  " $NF "@" v}' >&2
      done
      bad=1
    fi
  fi
done
((${#all[@]})) || { echo "check-glibc: no GLIBC version references in $*" >&2; exit 1; }
newest "${all[@]}"
exit "$bad"
