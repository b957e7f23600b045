#!/usr/bin/env bash
# bench/manifest.sh — wall time and peak RSS of the `sandbox-resume manifest`
# process on a real file, beside a hello-world Go binary built with the same
# toolchain (DESIGN "Performance goals": ≤ 10 ms wall, ≤ 25 MB RSS).
#
#   bench/manifest.sh [FILE]     (default examples/devcontainer.json)
#   RUNS=200 bench/manifest.sh   (runs per binary, default 100)
#
# Each binary runs RUNS times after 5 warm-up runs; wall time is taken with
# bash's $EPOCHREALTIME around each run (no extra fork in the measured
# span), peak RSS with GNU time's %M. Prints min / median / p90 wall and the
# largest max-RSS, plus the load average, since the machine may be shared.
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-examples/devcontainer.json}
runs=${RUNS:-100}
export PATH=/usr/local/go/bin:$PATH

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/sandbox-resume" ./cmd/sandbox-resume
cat >"$tmp/hello.go" <<'GO'
package main

import "fmt"

func main() { fmt.Println("hello, world") }
GO
(cd "$tmp" && GOFLAGS= go build -o hello hello.go)

if [[ ! -x /usr/bin/time ]]; then
  echo "bench/manifest.sh: GNU time is needed for the RSS figure (apt-get install time)" >&2
  exit 1
fi

# measure NAME CMD...: RUNS timed runs; prints one summary line.
measure() {
  local name=$1
  shift
  local i t0 t1 rss maxrss=0
  local -a walls=()
  for ((i = 0; i < 5; i++)); do "$@" >/dev/null; done
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null
    t1=$EPOCHREALTIME
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)*1000}')")
  done
  for ((i = 0; i < 10; i++)); do
    rss=$(/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1)
    ((rss > maxrss)) && maxrss=$rss
  done
  printf '%s\n' "${walls[@]}" | sort -n | awk -v name="$name" -v rss="$maxrss" -v n="$runs" '
    { w[NR] = $1 }
    END {
      printf "%-28s runs %d  wall min %.2f ms  median %.2f ms  p90 %.2f ms  max RSS %.1f MB\n",
        name, n, w[1], w[int((n + 1) / 2)], w[int(n * 0.9)], rss / 1024
    }'
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)  file: $file ($(wc -c <"$file") bytes)"
measure "hello-world (Go)" "$tmp/hello"
measure "sandbox-resume manifest" "$tmp/sandbox-resume" manifest "$file"
measure "sandbox-resume manifest -o json" "$tmp/sandbox-resume" --output json manifest "$file"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
