#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time (FUZZTIME, default 10s each),
# printing one go-test-style result line per target for the summary. Seed corpora live in
# each package's testdata/fuzz/<Target>/ (committed); new finds stay in the Go cache.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
rc=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    name="fuzz/${pkg#usb4verbs/}/$t"
    if out=$(go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then
      echo "--- PASS: $name"
    else
      printf '%s\n' "$out" | tail -30
      echo "--- FAIL: $name"
      rc=1
    fi
  done
done
exit $rc
