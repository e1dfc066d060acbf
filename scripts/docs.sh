#!/usr/bin/env bash
# scripts/docs.sh (make docs): rewrites the committed result docs from the outputs the
# last runs left under build/ — docs/stock-tools.md and docs/stock-tools-librxe.md
# from build/stock/{ours,librxe}/<userland>.out, docs/stock-tools-usb4.md from
# build/usb4/stock/<tree>.out (tests/usb4/run.sh), and the generated table of
# docs/reliability.md from build/reliability/ours.out (plus the committed control run),
# the CQ/SRQ/device table of docs/extended-verbs.md and the fork() table of
# docs/reliability.md from build/cqex/vm.out (cshim/lazyvm.sh),
# and its QP/MW tables of docs/extended-verbs.md from the qpex runs (build/qpex,
# build/usb4/stock; scripts/extended-verbs-doc.sh), and docs/signals.md's table from
# build/sig/vm.out (cshim/sigvm.sh).
# A doc with no run output to take from is left as it is. `make test` never writes
# these; the benchmarks have their own target (make bench-docs).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[docs] %s\n' "$*" >&2; }

for p in ours librxe; do
  doc=docs/stock-tools.md
  [[ $p == librxe ]] && doc=docs/stock-tools-librxe.md
  if compgen -G "build/stock/$p/*.out" >/dev/null; then
    PROVIDER=$p STOCK_REPORT_ONLY=1 STOCK_DOC=$PWD/$doc tests/stock/run.sh
  else
    log "no stock-tool run of $p under build/stock/$p: $doc kept"
  fi
done
if compgen -G "build/usb4/stock/*.out" >/dev/null; then
  tests/usb4/stock-doc.sh "$PWD/docs/stock-tools-usb4.md"
else
  log "no usb4 bed run under build/usb4/stock: docs/stock-tools-usb4.md kept"
fi
if [[ -s build/reliability/ours.out ]]; then
  REL_REPORT_ONLY=1 REL_DOC=$PWD/docs/reliability.md tests/reliability/run.sh
else
  log "no reliability run under build/reliability: docs/reliability.md kept"
fi
if [[ -s build/cqex/vm.out ]]; then
  tests/reliability/forkdoc.sh "$PWD/build/cqex/vm.out" "$PWD/docs/reliability.md"
  cshim/cqexdoc.sh "$PWD/build/cqex/vm.out" "$PWD/docs/extended-verbs.md"
else
  log "no cshim/lazyvm.sh run under build/cqex: the CQ tables of docs/extended-verbs.md kept"
fi
if [[ -s build/sig/vm.out ]]; then
  cshim/sigdoc.sh "$PWD/build/sig/vm.out" "$PWD/docs/signals.md"
else
  log "no cshim/sigvm.sh run under build/sig: docs/signals.md kept"
fi
scripts/extended-verbs-doc.sh docs/extended-verbs.md
git status --short -- docs >&2
