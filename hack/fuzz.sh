#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 10m),
# one after another, and prints one summary line per target. New crashers are
# written by `go test` under the package's testdata/fuzz/<Target>/ and become
# regression tests on the next `go test`.
set -euo pipefail
fuzztime=${1:-10m}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    log=$(mktemp)
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
      status=ok
    else
      status=FAIL
    fi
    summary=$(grep -E '^fuzz: elapsed' "$log" | tail -1 || true)
    echo "$status $pkg $target: ${summary:-no summary}"
    [[ $status == ok ]] || tail -20 "$log"
    rm -f "$log"
  done
done
