#!/usr/bin/env bash
# scripts/checkout-state.sh: what a test run must leave as it found it.
#   scripts/checkout-state.sh              one line "<content hash> <path>" per tracked file
#                                          that differs from HEAD and per untracked file git
#                                          does not ignore ("-" for a deleted file), sorted
#   scripts/checkout-state.sh changed A B  the paths whose line differs between two such
#                                          listings (files changed, added or restored)
# scripts/test.sh takes the state before and after each stage and reports
# checkout/clean: run output belongs under build/ (ignored), and the committed docs
# change only through `make docs` and `make bench-docs`. Changes the user had before
# the run are in both listings, so they do not count.
set -euo pipefail

if [[ ${1:-} == changed ]]; then
  (($# == 3)) || { echo "usage: $0 changed BEFORE AFTER" >&2; exit 2; }
  LC_ALL=C comm -3 "$2" "$3" | sed 's/^\t//' | cut -d" " -f2- | LC_ALL=C sort -u
  exit 0
fi
(($# == 0)) || { echo "usage: $0 [changed BEFORE AFTER]" >&2; exit 2; }

cd "$(git rev-parse --show-toplevel)"
while IFS= read -r -d '' entry; do
  st=${entry:0:2} path=${entry:3}
  # A rename or copy is followed by its source path.
  if [[ $st == R* || $st == C* ]]; then IFS= read -r -d '' _ || true; fi
  if [[ -f $path || -L $path ]]; then
    h=$(git hash-object --no-filters -- "$path" 2>/dev/null || echo unreadable)
  elif [[ -e $path ]]; then
    h=dir
  else
    h=-
  fi
  printf '%s %s\n' "$h" "$path"
done < <(git status --porcelain=v1 -z --untracked-files=all) | LC_ALL=C sort
