#!/usr/bin/env bash
# bench/run.sh — the performance report (issues 10 and 21): measures the
# whole tool beside its anchors in one run and writes docs/performance.md
# and the plots docs/perf-*.png. Run by `make bench`; not part of CI's
# pass/fail.
#
#   bench/run.sh                    # ≈ 20 minutes on 2 cores, 1 GiB runs included
#   BENCH_LARGE=0 bench/run.sh      # without the 1 GiB lifecycles (≈ 5 min less)
#   BENCH_ONLY="2 5" bench/run.sh   # only some sections: a partial report,
#                                   # written to $BENCH_OUT_DIR (default
#                                   # /tmp/sr-bench-partial), never over docs/
#
# The report opens with a summary: one row per docs/design.md "Performance
# goals" row, its figure beside its anchor or baseline, the ratio, the goal,
# met or missed (a missed row links its profile in docs/dev/), and the
# section it comes from. Sections (each figure: the command, median and
# spread over repeated runs, the ratio to the anchor measured in the same run):
#   1. `sandbox-resume manifest` vs `devcontainer read-configuration`
#      (@devcontainers/cli 0.89.0 in .tools/, --docker-path a stub that
#      prints nothing) over the corpus variants the ingester accepts
#      (bench/corpusvariants): wall time and peak RSS; a hello-world Go
#      binary as the process-start floor.
#   2. Go benchmarks with -cpu 1 -count 6, summarized with benchstat:
#      envmanifest BenchmarkIngest (per stage), BenchmarkSign/Verify, resume
#      BenchmarkVerifyRefBulk and BenchmarkDecideFake; decision latency
#      warm (BenchmarkDecideWarmDaemon) and cold (BenchmarkResumeCheckProcess,
#      a new `resume --check` process each time).
#   3. test/integration BenchmarkMoveLifecycle: suspend (and its pause
#      window), export, import, materialize and time to a running
#      incarnation vs tar/zstd/sha256sum/ctr baselines on the same bytes
#      (1, 4, 16, 64 MiB × 3, 256 MiB × 5, 1 GiB × 3 unless BENCH_LARGE=0);
#      BenchmarkSuspendGeneration2 (8 MiB changed in a 256 MiB run).
#   4. Growth, with gnuplot PNGs: ingest vs features (1→100) and env entries
#      (1→10,000) (bench/growth); the lifecycle steps vs MiB of changes
#      (section 3's rows); suspend vs generation count and materialize vs
#      layer count (BenchmarkGenerationChain: one run through 16 generations,
#      8 MiB changed before each).
#   5. The run ledger: bolt and etcd Claim → Live, resumes/s of distinct runs
#      through one 3-member etcd cluster, each beside its floor.
# Sections 3, 4's generation chain and the containerd part of 2 need root
# (the harness starts its own containerd daemons); without root they are
# reported as skipped. A failing step stops the run with its log and leaves
# docs/ as it was: the report and the plots are written to a temp directory
# and renamed into place only when every section has run.
# Installs what is missing: gnuplot-nox, time (apt), @devcontainers/cli
# (npm, into .tools/devcontainers), benchstat (go install, into .tools/bin).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH=/usr/local/go/bin:$root/bin:$root/.tools/bin:$PATH
export GOFLAGS=${GOFLAGS:--buildvcs=false}
shared=${SANDBOX_RESUME_SHARED:-$(cd .. && pwd)/shared}
sections="1 2 3 4 5"
if [[ -n ${BENCH_ONLY:-} ]]; then
  for s in $BENCH_ONLY; do
    [[ " $sections " == *" $s "* ]] || { echo "bench/run.sh: BENCH_ONLY=\"$BENCH_ONLY\": sections are $sections" >&2; exit 2; }
  done
  sections=$BENCH_ONLY
  outdir=${BENCH_OUT_DIR:-/tmp/sr-bench-partial}
else
  outdir=${BENCH_OUT_DIR:-$root/docs}
fi
mkdir -p "$outdir"
W=$(mktemp -d /tmp/sr-bench.XXXXXX)
P=$W/plots # the PNGs, moved beside the report at the end
mkdir -p "$P"
tmp=
trap 'rm -rf "$W"; [[ -z $tmp ]] || rm -f "$tmp"' EXIT
trap 'echo "bench/run.sh: failed (line $LINENO, exit $?): $outdir/performance.md and its plots are left as they were" >&2' ERR
t_start=$(date +%s)
log() { printf '[bench %4ds] %s\n' $(($(date +%s) - t_start)) "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
is_root() { [[ $(id -u) == 0 ]]; }
# gobench LOG ARGS...: go test ARGS... with its whole output in LOG; on a
# failure, the end of LOG and a clear message, and the run stops.
gobench() {
  local out=$1
  shift
  if ! go test "$@" >"$out" 2>&1; then
    tail -40 "$out" >&2
    echo "bench/run.sh: go test $* failed (the last 40 lines of its log above)" >&2
    return 1
  fi
}
# sumrow ORDER MEASURE FIGURE ANCHOR RATIO GOAL VERDICT SECTION: one row of
# the summary table (ORDER: the goal's place in the fixed list below).
sumrow() {
  local IFS=$'\t'
  echo "$*" >>"$W/sum.tsv"
}
# profile ROW-KIND: the docs/dev file (relative to docs/) with the profile of
# a missed goal: the first of its candidates that exists, so that journals
# added by later work are linked.
profile() {
  local c
  for c in "$@"; do
    [[ -f docs/dev/${c%%#*} ]] && { echo "dev/$c"; return; }
  done
  echo "dev/perf-journal.md#earlier-measurements-with-their-profiles"
}
# missed VERDICT LINK: a missed verdict with its profile's link.
missed() { if [[ $1 == met ]]; then echo met; else echo "**missed** — [profile]($2)"; fi; }

# ---- tools -----------------------------------------------------------------
if ! command -v gnuplot >/dev/null || [[ ! -x /usr/bin/time ]]; then
  if is_root; then
    log "installing gnuplot-nox and time (apt)"
    apt-get update -qq && apt-get install -y -qq gnuplot-nox time >/dev/null
  else
    echo "bench/run.sh: gnuplot and GNU time are needed (apt-get install gnuplot-nox time)" >&2
    exit 1
  fi
fi
dc=$root/.tools/devcontainers/node_modules/.bin/devcontainer
if [[ " $sections " == *" 1 "* ]] && { [[ ! -x $dc ]] || ! "$dc" --version 2>/dev/null | grep -qx 0.89.0; }; then
  log "installing @devcontainers/cli@0.89.0 into .tools/devcontainers (npm)"
  mkdir -p .tools/devcontainers
  npm install --no-audit --no-fund --silent --prefix "$root/.tools/devcontainers" @devcontainers/cli@0.89.0 >&2
fi
if ! command -v benchstat >/dev/null; then
  log "installing benchstat into .tools/bin"
  GOBIN=$root/.tools/bin go install golang.org/x/perf/cmd/benchstat@latest
fi
log "building"
# static, as `make build` builds it
CGO_ENABLED=0 go build -o "$W/sandbox-resume" ./cmd/sandbox-resume
CGO_ENABLED=0 go build -o bin/sandbox-resume ./cmd/sandbox-resume
cat >"$W/hello.go" <<'GO'
package main

import "fmt"

func main() { fmt.Println("hello, world") }
GO
(cd "$W" && GOFLAGS= go build -o hello hello.go)

# ---- the machine -----------------------------------------------------------
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
load_start=$(load)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)
ctrd=$(bin/containerd --version 2>/dev/null | awk '{print $3}' || true)

# stats: numbers on stdin → "n median min max" (median of an even count:
# the mean of the middle two).
stats() {
  sort -g | awk '{v[NR]=$1} END {
    if (NR == 0) { print "0 nan nan nan"; exit }
    m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
    printf "%d %.6g %.6g %.6g\n", NR, m, v[1], v[NR] }'
}
fmt_ms() { awk -v x="$1" 'BEGIN{ if (x < 10) printf "%.2f", x; else if (x < 100) printf "%.1f", x; else printf "%.0f", x }'; }
# verdict X le|ge GOAL → met / missed
verdict() { if awk -v x="$1" -v g="$3" -v op="$2" 'BEGIN{exit !(op == "le" ? x <= g : x >= g)}'; then echo met; else echo "**missed**"; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }

# ---- 1. manifest vs devcontainer read-configuration -------------------------
section1() {
  log "1. manifest vs devcontainer read-configuration (load $(load))"
  local vdir=$W/variants n_ours=${RUNS_OURS:-10} n_theirs=${RUNS_THEIRS:-3}
  if [[ ! -d $shared/corpus/devcontainer ]]; then
    echo "skipped: no corpus at $shared/corpus/devcontainer" >"$W/s1.md"
    return
  fi
  go run ./bench/corpusvariants "$shared/corpus/devcontainer" "$vdir" >"$W/variants.log"
  printf '#!/bin/sh\nexit 0\n' >"$W/docker-stub"
  chmod +x "$W/docker-stub"
  : >"$W/s1.tsv" # variant tool wall-ms
  : >"$W/s1rss.tsv" # variant tool rss-kB
  local f name ws i t0 t1 rc failed=0
  for f in "$vdir"/*.json; do
    name=$(basename "$f" .json)
    ws=$W/ws/$name
    mkdir -p "$ws/.devcontainer"
    cp "$f" "$ws/.devcontainer/devcontainer.json"
    local ours=("$W/sandbox-resume" manifest "$ws/.devcontainer/devcontainer.json")
    local theirs=("$dc" read-configuration --docker-path "$W/docker-stub" --workspace-folder "$ws" --config "$ws/.devcontainer/devcontainer.json")
    if ! "${theirs[@]}" >/dev/null 2>&1; then
      failed=$((failed + 1))
      echo "$name" >>"$W/s1-theirs-failed"
      continue
    fi
    for ((i = 0; i < 3; i++)); do "${ours[@]}" >/dev/null; done
    for ((i = 0; i < n_ours; i++)); do
      t0=$EPOCHREALTIME; "${ours[@]}" >/dev/null; t1=$EPOCHREALTIME
      awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN{printf "%s\tours\t%.3f\n", n, (b-a)*1000}' >>"$W/s1.tsv"
    done
    for ((i = 0; i < n_theirs; i++)); do
      t0=$EPOCHREALTIME; "${theirs[@]}" >/dev/null 2>&1; t1=$EPOCHREALTIME
      awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN{printf "%s\ttheirs\t%.3f\n", n, (b-a)*1000}' >>"$W/s1.tsv"
    done
    printf '%s\tours\t%s\n' "$name" "$(/usr/bin/time -f %M "${ours[@]}" 2>&1 >/dev/null | tail -1)" >>"$W/s1rss.tsv"
    printf '%s\ttheirs\t%s\n' "$name" "$(/usr/bin/time -f %M "${theirs[@]}" 2>&1 >/dev/null | tail -1)" >>"$W/s1rss.tsv"
  done
  for ((i = 0; i < 3; i++)); do "$W/hello" >/dev/null; done
  : >"$W/s1hello"
  for ((i = 0; i < 30; i++)); do
    t0=$EPOCHREALTIME; "$W/hello" >/dev/null; t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", (b-a)*1000}' >>"$W/s1hello"
  done
  local hello_rss; hello_rss=$(/usr/bin/time -f %M "$W/hello" 2>&1 >/dev/null | tail -1)
  local nv; nv=$(grep -c '^wrote' "$W/variants.log")
  read -r no mo lo ho < <(awk -F'\t' '$2=="ours"{print $3}' "$W/s1.tsv" | stats)
  read -r nt mt lt ht < <(awk -F'\t' '$2=="theirs"{print $3}' "$W/s1.tsv" | stats)
  read -r nh mh lh hh < <(stats <"$W/s1hello")
  read -r _ mro lro hro < <(awk -F'\t' '$2=="ours"{print $3/1024}' "$W/s1rss.tsv" | stats)
  read -r _ mrt lrt hrt < <(awk -F'\t' '$2=="theirs"{print $3/1024}' "$W/s1rss.tsv" | stats)
  # Per-variant ratio of medians (theirs / ours).
  read -r nr mr lr hr < <(awk -F'\t' '{k=$1 SUBSEP $2; v[k]=v[k] " " $3; names[$1]=1}
    function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
    END { for (n in names) if ((n SUBSEP "theirs") in v) print med(v[n SUBSEP "theirs"]) / med(v[n SUBSEP "ours"]) }' "$W/s1.tsv" | stats)
  local x; x=$(ratio "$mt" "$mo")
  local verdict_wall="**missed**" verdict_rss="**missed**" verdict_x="**missed**"
  awk -v m="$mo" 'BEGIN{exit !(m <= 10)}' && verdict_wall=met
  awk -v m="$hro" 'BEGIN{exit !(m <= 25)}' && verdict_rss=met
  awk -v m="$x" 'BEGIN{exit !(m >= 25)}' && verdict_x=met
  {
    echo "Over the $nv corpus variants the ingester accepts (of $(ls "$shared"/corpus/devcontainer/*.json | wc -l) corpus files; \`go run ./bench/corpusvariants\`: each file as is when accepted, else with the members of its executes-or-widens, changes-what-runs and unknown-property refusals removed, an image put in where build or dockerFile went)$( ((failed > 0)) && echo ", $failed variants left out because \`devcontainer read-configuration\` failed on them: $(paste -sd' ' "$W/s1-theirs-failed")")."
    echo "Each variant sits in a temp workspace as \`.devcontainer/devcontainer.json\`; ours runs $n_ours times per variant (after 3 warm-ups), the Dev Containers CLI $n_theirs times (after 1), wall time by bash \`\$EPOCHREALTIME\` around the process, peak RSS by \`/usr/bin/time -f %M\` (one run per variant each)."
    echo
    echo "| process | runs | wall median | wall min – max | peak RSS median (max) |"
    echo "|---|---|---|---|---|"
    echo "| \`sandbox-resume manifest FILE\` | $no | **$(fmt_ms "$mo") ms** | $(fmt_ms "$lo") – $(fmt_ms "$ho") ms | $(fmt_ms "$mro") MB ($(fmt_ms "$hro") MB) |"
    echo "| \`devcontainer read-configuration --docker-path STUB --workspace-folder WS --config FILE\` (anchor) | $nt | **$(fmt_ms "$mt") ms** | $(fmt_ms "$lt") – $(fmt_ms "$ht") ms | $(fmt_ms "$mrt") MB ($(fmt_ms "$hrt") MB) |"
    echo "| hello-world Go binary (process-start floor) | $nh | $(fmt_ms "$mh") ms | $(fmt_ms "$lh") – $(fmt_ms "$hh") ms | $(fmt_ms "$(awk -v k="$hello_rss" 'BEGIN{print k/1024}')") MB |"
    echo
    echo "Ratio (anchor / ours, medians of all runs): **${x}× faster**; per variant (median of the anchor's runs / median of ours, $nr variants): median $(fmt_ms "$mr")×, min $(fmt_ms "$lr")×, max $(fmt_ms "$hr")×."
    echo "Goals: ≤ 10 ms wall — $verdict_wall; ≤ 25 MB RSS — $verdict_rss (largest $(fmt_ms "$hro") MB); ≥ 25× faster — $verdict_x."
  } >"$W/s1.md"
  local pf; pf=$(profile perf-cpu.md perf-ingest.md perf-journal.md#earlier-measurements-with-their-profiles)
  sumrow 20 "\`manifest\` process, wall (median over $nv corpus variants)" "$(fmt_ms "$mo") ms" "hello-world Go process $(fmt_ms "$mh") ms (floor)" "$(ratio "$mo" 10) × goal" "≤ 10 ms" "$(missed "${verdict_wall}" "$pf")" s1
  sumrow 21 "\`manifest\` process, peak RSS (largest variant)" "$(fmt_ms "$hro") MB" "hello-world Go process $(fmt_ms "$(awk -v k="$hello_rss" 'BEGIN{print k/1024}')") MB (floor)" "$(ratio "$hro" 25) × goal" "≤ 25 MB" "$(missed "${verdict_rss}" "$pf")" s1
  sumrow 22 "\`manifest\` vs \`devcontainer read-configuration\` (same run)" "$(fmt_ms "$mo") ms" "anchor $(fmt_ms "$mt") ms" "**${x}× faster**" "≥ 25× faster" "$(missed "${verdict_x}" "$pf")" s1
}

# ---- 2. Go benchmarks --------------------------------------------------------
# goagg FILE: per benchmark and unit, "name unit median min max n" over the
# -count runs of a go test -bench output.
goagg() {
  awk '/^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name)
         for (i = 3; i + 1 <= NF; i += 2) print name "\t" $(i+1) "\t" $i }' "$1" |
    sort -t$'\t' -k1,1 -k2,2 -k3,3g |
    awk -F'\t' '{ k = $1 "\t" $2; v[k] = v[k] " " $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
      END { for (i = 1; i <= n; i++) { c = split(substr(v[order[i]], 2), a, " ")
              m = (c % 2) ? a[(c+1)/2] : (a[c/2] + a[c/2+1]) / 2
              printf "%s\t%.6g\t%.6g\t%.6g\t%d\n", order[i], m, a[1], a[c], c } }'
}
# pick AGG NAME UNIT → "median min max"
pick() { awk -F'\t' -v n="$2" -v u="$3" '$1==n && $2==u {print $3, $4, $5; f=1} END{if(!f) print "nan nan nan"}' "$1"; }

section2() {
  log "2. Go benchmarks (load $(load))"
  local bt=${GO_BENCHTIME:-0.5s} cnt=${GO_COUNT:-6}
  gobench "$W/go-envmanifest.log" -run '^$' -bench 'BenchmarkIngest|BenchmarkSign|BenchmarkVerify' -benchmem -benchtime "$bt" -cpu 1 -count "$cnt" ./envmanifest
  grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$W/go-envmanifest.log" >"$W/go-envmanifest.txt"
  log "   resume (load $(load))"
  gobench "$W/go-resume1.log" -run '^$' -bench 'BenchmarkDecideFake' -benchmem -benchtime "$bt" -cpu 1 -count "$cnt" ./resume
  gobench "$W/go-resume2.log" -run '^$' -bench 'BenchmarkVerifyRefBulk' -benchmem -benchtime 1x -cpu 1 -count "$cnt" ./resume
  cat "$W/go-resume1.log" "$W/go-resume2.log" | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >"$W/go-resume.txt"
  goagg "$W/go-envmanifest.txt" >"$W/agg-env.tsv"
  goagg "$W/go-resume.txt" >"$W/agg-resume.tsv"
  if is_root; then
    log "   decision latency against a daemon (load $(load))"
    gobench "$W/go-integration.log" -run '^$' -bench 'BenchmarkDecideWarmDaemon|BenchmarkResumeCheckProcess' -benchtime 100x -count "$cnt" ./test/integration
    grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$W/go-integration.log" >"$W/go-integration.txt"
    goagg "$W/go-integration.txt" >"$W/agg-int.tsv"
  fi
  {
    echo "Commands (each -count $cnt; the medians below are over the $cnt runs, the spread is their min – max):"
    echo
    echo '    go test -run '"'"'^$'"'"' -bench '"'"'BenchmarkIngest|BenchmarkSign|BenchmarkVerify'"'"' -benchmem -benchtime '"$bt"' -cpu 1 -count '"$cnt"' ./envmanifest'
    echo '    go test -run '"'"'^$'"'"' -bench BenchmarkDecideFake -benchmem -benchtime '"$bt"' -cpu 1 -count '"$cnt"' ./resume'
    echo '    go test -run '"'"'^$'"'"' -bench BenchmarkVerifyRefBulk -benchmem -benchtime 1x -cpu 1 -count '"$cnt"' ./resume'
    echo '    go test -run '"'"'^$'"'"' -bench '"'"'BenchmarkDecideWarmDaemon|BenchmarkResumeCheckProcess'"'"' -benchtime 100x -count '"$cnt"' ./test/integration   # root'
    echo
    echo "CPU time per operation (\`cpu-ns/op\`, getrusage) is the one-core figure on a shared machine; wall \`ns/op\` counts time spent waiting for a core. The anchor of a throughput figure is its goal in docs/design.md \"Performance goals\" (no other tool does this work); the ratio is figure / goal for times (≤ 1 meets it) and goal / figure for rates."
    echo
    echo "| figure | CPU µs/op median (min – max) | wall µs/op median | rate per CPU-second | goal | ratio to goal |"
    echo "|---|---|---|---|---|---|"
    local b g
    for b in 1KB 3KB; do
      g=50; [[ $b == 3KB ]] && g=125
      for st in total strip decode normalize canonicalize hash; do
        read -r cm cl ch < <(pick "$W/agg-env.tsv" "BenchmarkIngest/$b/$st" cpu-ns/op)
        read -r wm _ _ < <(pick "$W/agg-env.tsv" "BenchmarkIngest/$b/$st" ns/op)
        if [[ $st == total ]]; then
          echo "| ingest → address, $b, **total** | **$(fmt_ms "$(awk -v x="$cm" 'BEGIN{print x/1000}')")** ($(fmt_ms "$(awk -v x="$cl" 'BEGIN{print x/1000}')") – $(fmt_ms "$(awk -v x="$ch" 'BEGIN{print x/1000}')")) | $(fmt_ms "$(awk -v x="$wm" 'BEGIN{print x/1000}')") | $(awk -v x="$cm" 'BEGIN{printf "%.0f docs/s", 1e9/x}') | ≥ $(awk -v g="$g" 'BEGIN{printf "%d", 1e6/g}') docs/s (≤ $g µs) | $(ratio "$(awk -v x="$cm" 'BEGIN{print x/1000}')" "$g")× the goal's time — $(verdict "$(awk -v x="$cm" 'BEGIN{print x/1000}')" le "$g") |"
        else
          echo "| ingest $b, stage $st | $(fmt_ms "$(awk -v x="$cm" 'BEGIN{print x/1000}')") ($(fmt_ms "$(awk -v x="$cl" 'BEGIN{print x/1000}')") – $(fmt_ms "$(awk -v x="$ch" 'BEGIN{print x/1000}')")) | $(fmt_ms "$(awk -v x="$wm" 'BEGIN{print x/1000}')") | | | |"
        fi
      done
    done
    for b in BenchmarkSign BenchmarkVerify/end-to-end BenchmarkVerify/parse BenchmarkVerify/signature BenchmarkVerify/core; do
      read -r cm cl ch < <(pick "$W/agg-env.tsv" "$b" cpu-ns/op)
      read -r wm _ _ < <(pick "$W/agg-env.tsv" "$b" ns/op)
      echo "| \`$b\` (signed manifest ≈ 1 KB) | $(fmt_ms "$(awk -v x="$cm" 'BEGIN{print x/1000}')") ($(fmt_ms "$(awk -v x="$cl" 'BEGIN{print x/1000}')") – $(fmt_ms "$(awk -v x="$ch" 'BEGIN{print x/1000}')")) | $(fmt_ms "$(awk -v x="$wm" 'BEGIN{print x/1000}')") | $(awk -v x="$cm" 'BEGIN{printf "%.0f/s", 1e9/x}') | — | — |"
    done
    read -r rm rl rh < <(pick "$W/agg-resume.tsv" BenchmarkVerifyRefBulk refs/cpu-s)
    read -r wm _ _ < <(pick "$W/agg-resume.tsv" BenchmarkVerifyRefBulk refs/s)
    echo "| SnapshotRef bulk verification (\`snapshot.OpenRef\`, 10,000 refs per op) | $(fmt_ms "$(awk -v x="$rm" 'BEGIN{print 1e6/x}')") | $(fmt_ms "$(awk -v x="$wm" 'BEGIN{print 1e6/x}')") | **$(printf '%.0f' "$rm") refs/s** ($(printf '%.0f' "$rl") – $(printf '%.0f' "$rh")) | ≥ 10,000 refs/s | $(ratio "$rm" 10000)× the goal's rate — $(verdict "$rm" ge 10000) |"
    read -r dm dl dh < <(pick "$W/agg-resume.tsv" BenchmarkDecideFake ns/op)
    echo "| resume decision, in process, in-memory fake facts (\`BenchmarkDecideFake\`) | — | $(fmt_ms "$(awk -v x="$dm" 'BEGIN{print x/1000}')") ($(fmt_ms "$(awk -v x="$dl" 'BEGIN{print x/1000}')") – $(fmt_ms "$(awk -v x="$dh" 'BEGIN{print x/1000}')")) | | — | — |"
    echo
    if [[ -s $W/agg-int.tsv ]]; then
      read -r wm wl wh < <(pick "$W/agg-int.tsv" BenchmarkDecideWarmDaemon p50-ms)
      read -r w9 _ _ < <(pick "$W/agg-int.tsv" BenchmarkDecideWarmDaemon p90-ms)
      read -r cm cl ch < <(pick "$W/agg-int.tsv" BenchmarkResumeCheckProcess p50-ms)
      read -r c9 _ _ < <(pick "$W/agg-int.tsv" BenchmarkResumeCheckProcess p90-ms)
      local hm; hm=$(if [[ -s $W/s1hello ]]; then stats <"$W/s1hello" | awk '{print $2}'; fi)
      echo "Resume decision latency against a warm containerd daemon (the harness's; 100 decisions per run, p50 and p90 per run; median and min – max of the $cnt runs' p50):"
      echo
      echo "| figure | p50 median (min – max) | p90 median | goal | ratio to goal | anchor |"
      echo "|---|---|---|---|---|---|"
      echo "| warm: \`resume.Decide\` in process (\`BenchmarkDecideWarmDaemon\`) | **$(fmt_ms "$wm") ms** ($(fmt_ms "$wl") – $(fmt_ms "$wh")) | $(fmt_ms "$w9") ms | p50 ≤ 2 ms | $(ratio "$wm" 2)× — $(verdict "$wm" le 2) | — |"
      echo "| cold: a new \`sandbox-resume resume --check\` process (\`BenchmarkResumeCheckProcess\`) | **$(fmt_ms "$cm") ms** ($(fmt_ms "$cl") – $(fmt_ms "$ch")) | $(fmt_ms "$c9") ms | ≤ 12 ms | $(ratio "$cm" 12)× — $(verdict "$cm" le 12) | $(if [[ -n ${hm:-} ]]; then echo "hello-world Go process $(fmt_ms "$hm") ms: $(ratio "$cm" "$hm")×"; else echo "— (section 1, which times the hello-world floor, did not run)"; fi) |"
      echo
    else
      echo "Decision latency against a daemon: **skipped** (needs root)."
      echo
    fi
    echo "<details><summary>benchstat of the raw runs</summary>"
    echo
    echo '```'
    benchstat "$W/go-envmanifest.txt" 2>&1 || true
    echo
    benchstat "$W/go-resume.txt" 2>&1 || true
    if [[ -s $W/go-integration.txt ]]; then
      echo
      benchstat "$W/go-integration.txt" 2>&1 || true
    fi
    echo '```'
    echo
    echo "</details>"
  } >"$W/s2.md"
  # The summary's rows.
  local pc kb g c x
  pc=$(profile perf-cpu.md perf-ingest.md perf-journal.md#earlier-measurements-with-their-profiles)
  for kb in 1 3; do
    g=50; [[ $kb == 3 ]] && g=125
    read -r c _ _ < <(pick "$W/agg-env.tsv" "BenchmarkIngest/${kb}KB/total" cpu-ns/op)
    x=$(awk -v x="$c" 'BEGIN{print x/1000}')
    sumrow $((kb == 1 ? 10 : 11)) "ingest → address, ${kb} KB, one core" "$(fmt_ms "$x") µs CPU/doc = $(awk -v x="$c" 'BEGIN{printf "%.0f", 1e9/x}') docs/s" "the goal (no other tool does this work)" "$(ratio "$x" "$g") × goal's time" "≥ $(awk -v g="$g" 'BEGIN{printf "%d", 1e6/g}') docs/s (≤ $g µs)" "$(missed "$(verdict "$x" le "$g")" "$pc")" s2
  done
  read -r c _ _ < <(pick "$W/agg-resume.tsv" BenchmarkVerifyRefBulk refs/cpu-s)
  sumrow 30 "SnapshotRef verification in bulk (parse, signature, integrity), one core" "$(printf '%.0f' "$c") refs/s" "the goal" "$(ratio 10000 "$c") × goal's time" "≥ 10,000 refs/s" "$(missed "$(verdict "$c" ge 10000)" "$pc")" s2
  if [[ -s $W/agg-int.tsv ]]; then
    read -r c _ _ < <(pick "$W/agg-int.tsv" BenchmarkDecideWarmDaemon p50-ms)
    sumrow 40 "resume decision in process, warm daemon, p50" "$(fmt_ms "$c") ms" "the goal" "$(ratio "$c" 2) × goal" "p50 ≤ 2 ms" "$(missed "$(verdict "$c" le 2)" "$pc")" s2
    read -r c _ _ < <(pick "$W/agg-int.tsv" BenchmarkResumeCheckProcess p50-ms)
    local hm; hm=$(if [[ -s $W/s1hello ]]; then stats <"$W/s1hello" | awk '{print $2}'; fi)
    sumrow 41 "\`resume --check\` process, warm daemon, p50" "$(fmt_ms "$c") ms" "$( [[ -n ${hm:-} ]] && echo "hello-world Go process $(fmt_ms "$hm") ms (floor)" || echo "the goal")" "$(ratio "$c" 12) × goal" "≤ 12 ms" "$(missed "$(verdict "$c" le 12)" "$pc")" s2
  fi
}

# ---- 3. suspend, export, import, materialize --------------------------------
section3() {
  local sizes=${BENCH_SIZES:-1:3,4:3,16:3,64:3,256:5}
  [[ ${BENCH_LARGE:-1} == 1 ]] && sizes+=",1024:3"
  if ! is_root; then
    echo "**Skipped**: the containerd daemons of the harness need root." >"$W/s3.md"
    return
  fi
  log "3. lifecycle $sizes (load $(load))"
  : >"$W/life.tsv"
  SR_BENCH_OUT=$W/life.tsv SR_BENCH_SIZES=$sizes gobench "$W/go-life.log" -run '^$' -bench BenchmarkMoveLifecycle -benchtime 1x -timeout 60m ./test/integration
  log "   generation 2 (load $(load))"
  gobench "$W/go-gen2.log" -run '^$' -bench BenchmarkSuspendGeneration2 -benchtime "${GEN2_RUNS:-9}x" -timeout 30m ./test/integration
  grep -E '^Benchmark' "$W/go-gen2.log" >"$W/go-gen2.txt"
  goagg "$W/go-gen2.txt" >"$W/agg-gen2.tsv"
  # per size and op: median min max n
  awk -F'\t' '{ k = $1 "\t" $2; v[k] = v[k] " " $4 } END { for (k in v) print k "\t" substr(v[k], 2) }' "$W/life.tsv" |
    while IFS=$'\t' read -r mib op vals; do
      printf '%s\t%s\t%s\n' "$mib" "$op" "$(tr ' ' '\n' <<<"$vals" | stats)"
    done | sort -t$'\t' -k1,1n -k2,2 >"$W/life-agg.tsv"
  life() { awk -F'\t' -v m="$1" -v o="$2" '$1==m && $2==o {print $3}' "$W/life-agg.tsv"; } # → "n median min max"
  {
    echo "Command (as root; the harness starts two containerd daemons, A and B, and a busybox container on A whose overlayfs upper directory gets the changed files: half pseudo-random, half text, ¾ in 1 MiB files, ¼ in 16 KiB files):"
    echo
    echo "    SR_BENCH_OUT=rows.tsv SR_BENCH_SIZES=$sizes go test -run '^\$' -bench BenchmarkMoveLifecycle -benchtime 1x ./test/integration"
    echo
    echo "Each lifecycle: \`suspend\` of the running task on A, \`export\` on A, \`import\` on B, \`resume\` (no --check: claim, verify the diff, create the container) on A, and \`resume --start\` of the imported ref on B (time to a running incarnation; both daemons warm: the base image unpacked on each); each step timed as its CLI process beside its baseline on the same bytes, in rotating order, with \`sync\` before every timed step; cleanup (\`discard\` with synchronous GC on both hosts, containers deleted) untimed. The pause window of each suspend (the task's /tasks/paused event to its /tasks/resumed, /tasks/exit or /tasks/delete event, daemon timestamps) is reported on its own."
    echo
    local mib
    for mib in 256 1024; do
      if ! grep -q "^$mib	" "$W/life-agg.tsv"; then
        [[ $mib == 1024 ]] && echo "1 GiB: **not run** (this run had \`BENCH_LARGE=0\`)." && echo
        continue
      fi
      echo "$( ((mib == 1024)) && echo "1 GiB" || echo "$mib MiB") of changed files:"
      echo
      echo "| step (ours) | ours median (min – max) | baseline on the same bytes | baseline median (min – max) | ratio | goal |"
      echo "|---|---|---|---|---|---|"
      local op base goal
      for op in suspend materialize export import running; do
        case $op in
          suspend) base='`tar -c UPPER \| zstd -1 \| sha256sum`'; goal="≤ 1.25×" ;;
          materialize) base='`zstd -d < DIFF \| tar -x`'; goal="≤ 1.25×" ;;
          export) base='`tar -cf files.tar -C UPPER . && sync files.tar`'; goal="≤ 1.25×" ;;
          import) base='`tar -xf files.tar && sha256sum files.tar && sync`'; goal="≤ 2×" ;;
          running) base='`zstd -d < DIFF \| tar -x` then `ctr run -d BASE` (host B)'; goal="≤ 1.5×" ;;
        esac
        read -r n m l h < <(life "$mib" "$op")
        read -r nb mb lb hb < <(life "$mib" "$op-base")
        local cmdline
        case $op in
          suspend) cmdline='`sandbox-resume suspend --container C --config F --key K --run R --out ref.json`' ;;
          materialize) cmdline='`sandbox-resume resume --ref ref.json --config F --trust PUB --container M`' ;;
          export) cmdline='`sandbox-resume export --ref ref.json --out run.tar`' ;;
          import) cmdline='`sandbox-resume import run.tar --trust PUB --out ref.json` (host B)' ;;
          running) cmdline='`sandbox-resume resume --ref imported.json --config F --trust PUB --container M --start` (host B)' ;;
        esac
        local x; x=$(ratio "$m" "$mb")
        local ok="**missed**"
        awk -v x="$x" -v g="${goal#≤ }" 'BEGIN{sub(/×/, "", g); exit !(x <= g)}' && ok=met
        echo "| $op: $cmdline | **$(fmt_ms "$m") ms** ($(fmt_ms "$l") – $(fmt_ms "$h")), n=$n | $base | $(fmt_ms "$mb") ms ($(fmt_ms "$lb") – $(fmt_ms "$hb")), n=$nb | **${x}×** | $goal — $ok |"
      done
      echo
      n= m= l= h=
      read -r n m l h < <(life "$mib" pause) || true
      if [[ -n ${m:-} ]]; then
        echo "Pause window of the suspends above (task paused → stopped): **$(fmt_ms "$m") ms** ($(fmt_ms "$l") – $(fmt_ms "$h")), n=$n."
        echo
      fi
    done
    echo "### Generation 2: suspend cost follows the change"
    echo
    echo "    go test -run '^\$' -bench BenchmarkSuspendGeneration2 -benchtime ${GEN2_RUNS:-9}x ./test/integration"
    echo
    echo "A 256 MiB run of 16,384 files of 16 KiB (generation 1); each iteration resumes its latest generation twice: one incarnation is suspended with nothing changed (the fixed part: process start, ledger, pause, stop, deleting the incarnation), the other after 8 MiB changed (256 files rewritten, 256 new); the baseline is \`tar -c | zstd -1 | sha256sum\` of the incarnation's upper directory (the 8 MiB), timed in alternating order with the suspend. Medians over the iterations:"
    echo
    local gc gu gn gp gx gl
    read -r gc _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 changed-ms)
    read -r gu _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 unchanged-ms)
    read -r gn _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 net-ms)
    read -r gp _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 pipeline-ms)
    read -r gx _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 x-pipeline)
    read -r gl _ _ < <(pick "$W/agg-gen2.tsv" BenchmarkSuspendGeneration2 layer-MiB)
    echo "| suspend after 8 MiB changed | suspend with nothing changed (fixed part) | difference (net) | \`tar -c \| zstd -1 \| sha256sum\` of the 8 MiB | net / pipeline | goal | layer |"
    echo "|---|---|---|---|---|---|---|"
    echo "| $(fmt_ms "$gc") ms | $(fmt_ms "$gu") ms | **$(fmt_ms "$gn") ms** | $(fmt_ms "$gp") ms | **$(fmt_ms "$gx")×** | ≤ 1.5× — $(if awk -v n="$gn" 'BEGIN{exit !(n <= 0)}'; then echo "inconclusive (net ≤ 0)"; else verdict "$gx" le 1.5; fi) | $(fmt_ms "$gl") MiB |"
    echo
    echo "<details><summary>its log</summary>"
    echo
    echo '```'
    grep -E '^(Benchmark|\s+generations_bench_test)' "$W/go-gen2.log" || true
    echo '```'
    echo
    echo "</details>"
  } >"$W/s3.md"
  # The summary's rows.
  local ps pm pr op g base cmd o pf x
  ps=$(profile perf-suspend.md perf-bulk.md#1-suspend)
  pm=$(profile perf-apply.md perf-materialize.md perf-bulk.md#3-time-to-a-running-incarnation-and-materialize-missed)
  pr=$(profile perf-bulk.md#2-export)
  if grep -q "^256	" "$W/life-agg.tsv"; then
    local n m l h nb mb lb hb
    for op in suspend materialize export import running; do
      case $op in
        suspend) g=1.25; base='`tar -c \| zstd -1 \| sha256sum`'; cmd="suspend of 256 MiB of changes (generation 1)"; o=50; pf=$ps ;;
        materialize) g=1.25; base='`zstd -d \| tar -x`'; cmd="materialize (\`resume\`), 256 MiB"; o=60; pf=$pm ;;
        export) g=1.25; base='`tar -cf F && sync F`'; cmd="export, 256 MiB"; o=61; pf=$pr ;;
        import) g=2; base='`tar -x && sha256sum && sync`'; cmd="import, 256 MiB"; o=62; pf=$pr ;;
        running) g=1.5; base='`zstd -d \| tar -x` + `ctr run -d` of the base image'; cmd="time to a running incarnation (\`resume --start\`, 256 MiB, warm daemon)"; o=63; pf=$pm ;;
      esac
      read -r n m l h < <(life 256 "$op")
      read -r nb mb lb hb < <(life 256 "$op-base")
      x=$(ratio "$m" "$mb")
      sumrow "$o" "$cmd" "$(fmt_ms "$m") ms" "$base $(fmt_ms "$mb") ms" "**${x}×**" "≤ ${g}×" "$(missed "$(verdict "$x" le "$g")" "$pf")" s3
    done
    n= m= l= h=
    read -r n m l h < <(life 256 pause) || true
    [[ -n ${m:-} ]] && sumrow 51 "the pause window of those suspends (task paused → stopped)" "$(fmt_ms "$m") ms" "— (reported on its own)" "$(ratio "$m" "$(life 256 suspend | awk '{print $2}')") of the suspend" "reported on its own" "reported" s3
  fi
  local gv
  if awk -v n="$gn" 'BEGIN{exit !(n <= 0)}'; then
    gv="inconclusive: the unchanged suspend took longer (noise larger than the change's cost)"
  else
    gv=$(missed "$(verdict "$gx" le 1.5)" "$ps")
  fi
  sumrow 52 "generation-2 suspend after 8 MiB changed in a 256 MiB run, minus the unchanged suspend" "$(fmt_ms "$gn") ms" "\`tar -c \| zstd -1 \| sha256sum\` of the 8 MiB $(fmt_ms "$gp") ms" "**$(fmt_ms "$gx")×**" "≤ 1.5×" "$gv" s3
  sumrow 53 "its fixed part: the same suspend with nothing changed" "$(fmt_ms "$gu") ms" "—" "—" "reported on its own" "reported" s3
}

# ---- 4. growth and plots -----------------------------------------------------
section4() {
  log "4. growth (load $(load))"
  local common='set terminal pngcairo noenhanced size 1100,620 font "DejaVu Sans,11"; set grid; set key top left'
  go run ./bench/growth >"$W/growth.tsv"
  if is_root; then
    log "   generation chain (load $(load))"
    : >"$W/chain.tsv"
    SR_BENCH_OUT=$W/chain.tsv SR_BENCH_CHAINS=${CHAIN_RUNS:-2} gobench "$W/go-chain.log" -run '^$' -bench BenchmarkGenerationChain -benchtime 1x -timeout 30m ./test/integration
    awk -F'\t' '{ k = $1 "\t" $2; v[k] = v[k] " " $4 } END { for (k in v) print k "\t" substr(v[k], 2) }' "$W/chain.tsv" |
      while IFS=$'\t' read -r g op vals; do
        printf '%s\t%s\t%s\n' "$g" "$op" "$(tr ' ' '\n' <<<"$vals" | stats)"
      done | sort -t$'\t' -k1,1n -k2,2 >"$W/chain-agg.tsv"
    chain() { awk -F'\t' -v g="$1" -v o="$2" '$1==g && $2==o {print $3}' "$W/chain-agg.tsv"; } # → "n median min max"
    local op
    for op in suspend suspend-base materialize materialize-base; do
      awk -F'\t' -v o="$op" '$2==o {split($3, a, " "); print $1, a[2], a[3], a[4]}' "$W/chain-agg.tsv" | sort -n >"$W/c-$op.dat"
    done
    local gmax; gmax=$(awk -F'\t' '{print $1}' "$W/chain-agg.tsv" | sort -n | tail -1)
    gnuplot -e "$common; set output '$P/perf-generations.png'; set key top left box; set yrange [0:*]; set xrange [0.5:$gmax.5]; set xtics 1;
      set title 'suspend vs generation count: the same 8 MiB changed before each suspend (median; bars: min–max)';
      set xlabel 'generation (1: the runtime container; later: an incarnation resumed from the previous one)'; set ylabel 'ms';
      plot '$W/c-suspend.dat' u 1:2:3:4 w yerrorlines lw 2 lc 1 pt 7 t 'suspend',
           '$W/c-suspend-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 1 dt 2 pt 6 t 'tar -c | zstd -1 | sha256sum of the 8 MiB'"
    gnuplot -e "$common; set output '$P/perf-layers.png'; set key top left box; set yrange [0:*]; set xrange [0.5:$gmax.5]; set xtics 1;
      set title 'materialize (resume, no --start) vs layer count: 8 MiB of changes per layer (median; bars: min–max)';
      set xlabel 'layers of the ref (one per generation)'; set ylabel 'ms';
      plot '$W/c-materialize.dat' u 1:2:3:4 w yerrorlines lw 2 lc 4 pt 13 t 'resume (materialize)',
           '$W/c-materialize-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 4 dt 2 pt 12 t 'zstd -d | tar -x of the same layers'"
  fi
  awk -F'\t' '$1=="features"{print $2, $4, $5, $6}' "$W/growth.tsv" >"$W/g-features.dat"
  awk -F'\t' '$1=="env"{print $2, $4, $5, $6}' "$W/growth.tsv" >"$W/g-env.dat"
  gnuplot -e "$common; set output '$P/perf-features.png';
    set title 'ingest → address vs number of features (1 env entry), in process, one core';
    set xlabel 'features'; set ylabel 'µs per document (median of 7 batches; bars: min–max)';
    plot '$W/g-features.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'envmanifest.Ingest'"
  gnuplot -e "$common; set output '$P/perf-env.png'; set logscale xy;
    set title 'ingest → address vs number of containerEnv entries (1 feature), in process, one core';
    set xlabel 'containerEnv entries (log)'; set ylabel 'µs per document (log; bars: min–max)';
    plot '$W/g-env.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'envmanifest.Ingest'"
  if [[ -s $W/life-agg.tsv ]]; then
    local op
    for op in suspend export import materialize; do
      awk -F'\t' -v o="$op" '$2==o {split($3, a, " "); print $1, a[2], a[3], a[4]}' "$W/life-agg.tsv" | sort -n >"$W/l-$op.dat"
      awk -F'\t' -v o="$op-base" '$2==o {split($3, a, " "); print $1, a[2], a[3], a[4]}' "$W/life-agg.tsv" | sort -n >"$W/l-$op-base.dat"
    done
    gnuplot -e "$common; set output '$P/perf-changes.png'; set logscale xy; set xrange [0.8:1300]; set key outside right top box;
      set title 'run lifecycle steps vs MiB of changed files (median; bars: min–max)';
      set xlabel 'changed files, MiB (log)'; set ylabel 'ms (log)';
      plot '$W/l-suspend.dat' u 1:2:3:4 w yerrorlines lw 2 lc 1 pt 7 t 'suspend',
           '$W/l-suspend-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 1 dt 2 pt 6 t 'tar -c | zstd -1 | sha256sum',
           '$W/l-export.dat' u 1:2:3:4 w yerrorlines lw 2 lc 2 pt 5 t 'export',
           '$W/l-export-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 2 dt 2 pt 4 t 'tar -cf && sync',
           '$W/l-import.dat' u 1:2:3:4 w yerrorlines lw 2 lc 3 pt 9 t 'import',
           '$W/l-import-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 3 dt 2 pt 8 t 'tar -x && sha256sum && sync',
           '$W/l-materialize.dat' u 1:2:3:4 w yerrorlines lw 2 lc 4 pt 13 t 'materialize (resume)',
           '$W/l-materialize-base.dat' u 1:2:3:4 w yerrorlines lw 1 lc 4 dt 2 pt 12 t 'zstd -d | tar -x'"
  fi
  {
    echo "In process (\`go run ./bench/growth\`): \`envmanifest.Ingest\` of one document, µs per document, median of 7 batches of ≥ 20 ms (min – max); the document is fixed apart from the counted members."
    echo
    echo "| members | document bytes | µs/doc median (min – max) |"
    echo "|---|---|---|"
    awk -F'\t' '{printf "| %s: %d | %d | %.1f (%.1f – %.1f) |\n", ($1=="env" ? "containerEnv entries" : "features"), $2, $3, $4, $5, $6}' "$W/growth.tsv"
    echo
    echo "![ingest vs features](perf-features.png)"
    echo
    echo "![ingest vs containerEnv entries](perf-env.png)"
    echo
    if [[ -s $W/life-agg.tsv ]]; then
      echo "The lifecycle steps of section 3 against the MiB of changed files ($(awk -F'\t' '{print $1}' "$W/life-agg.tsv" | sort -nu | paste -sd, -) MiB):"
      echo
      echo "| MiB | suspend / baseline ms | export / baseline ms | import / baseline ms | materialize / baseline ms | running / baseline ms |"
      echo "|---|---|---|---|---|---|"
      local mib
      for mib in $(awk -F'\t' '{print $1}' "$W/life-agg.tsv" | sort -nu); do
        printf '| %s ' "$mib"
        for op in suspend export import materialize running; do
          read -r _ m _ _ < <(life "$mib" "$op")
          read -r _ mb _ _ < <(life "$mib" "$op-base")
          printf '| %s / %s (%s×) ' "$(fmt_ms "$m")" "$(fmt_ms "$mb")" "$(ratio "$m" "$mb")"
        done
        echo "|"
      done
      echo
      echo "![lifecycle steps vs changed MiB](perf-changes.png)"
      echo
    fi
    if [[ -s ${W}/chain-agg.tsv ]]; then
      local gmax g
      gmax=$(awk -F'\t' '{print $1}' "$W/chain-agg.tsv" | sort -n | tail -1)
      echo "### Suspend vs generation count, materialize vs layer count"
      echo
      echo "    SR_BENCH_OUT=rows.tsv SR_BENCH_CHAINS=${CHAIN_RUNS:-2} go test -run '^\$' -bench BenchmarkGenerationChain -benchtime 1x ./test/integration"
      echo
      echo "$(awk -F'\t' '$2=="suspend" && $1==1 {split($3, a, " "); print a[1]}' "$W/chain-agg.tsv") chain(s) of one run each through $gmax generations$( ((gmax == 16)) && echo " (\`snapshot.MaxLayers\`: the last one not flattened)"), all through the CLI: before every suspend the same 8 MiB changes (256 files of 16 KiB rewritten, 256 new); generation 1 suspends the runtime's container, every later one an incarnation \`resume\`d from the previous ref, so the ref of generation g has g layers. Each suspend is timed after its baseline (\`tar -c | zstd -1 | sha256sum\` of the upper directory: the 8 MiB; the suspend deletes an incarnation's upper directory), each resume (no --start: claim, verify the diffs, create the container) beside \`zstd -d | tar -x\` of the same g layers into one directory, in alternating order; sync before every timing. Medians (min – max) over the chains:"
      echo
      echo "| generation = layers | suspend ms | its baseline ms | ratio | resume (materialize) ms | its baseline ms | ratio |"
      echo "|---|---|---|---|---|---|---|"
      for ((g = 1; g <= gmax; g++)); do
        local s sb r rb
        s=$(chain "$g" suspend | awk '{print $2}'); sb=$(chain "$g" suspend-base | awk '{print $2}')
        r=$(chain "$g" materialize | awk '{print $2}'); rb=$(chain "$g" materialize-base | awk '{print $2}')
        echo "| $g | $(fmt_ms "$s") ($(chain "$g" suspend | awk '{printf "%.0f – %.0f", $3, $4}')) | $(fmt_ms "$sb") | $(ratio "$s" "$sb")× | $(fmt_ms "$r") ($(chain "$g" materialize | awk '{printf "%.0f – %.0f", $3, $4}')) | $(fmt_ms "$rb") | $(ratio "$r" "$rb")× |"
      done
      echo
      local s2 sl
      s2=$(chain 2 suspend | awk '{print $2}'); sl=$(chain "$gmax" suspend | awk '{print $2}')
      [[ -n $s2 && $gmax -gt 2 ]] && echo "Suspend of generation $gmax / generation 2 (both incarnations): **$(ratio "$sl" "$s2")×** (flat when the cost follows the change, not the generation count)." && echo
      echo "![suspend vs generation count](perf-generations.png)"
      echo
      echo "![materialize vs layer count](perf-layers.png)"
    fi
  } >"$W/s4.md"
}

# ---- 5. the run ledger ---------------------------------------------------------
section5() {
  log "5. ledger: bolt (load $(load))"
  local cnt=${GO_COUNT:-6}
  gobench "$W/go-bolt.log" -run '^$' -bench 'BenchmarkClaimLive|BenchmarkUpdateFloor|BenchmarkFsyncFloor' -benchtime 300x -count "$cnt" ./ledger/bolt
  log "   etcd (load $(load))"
  gobench "$W/go-etcd.log" -run '^$' -bench 'BenchmarkClaimLive$|BenchmarkPut$|BenchmarkPutParallel|BenchmarkResumeDistinctRuns/faked' -benchtime 400x -count "${ETCD_COUNT:-3}" ./test/integration/etcdledger
  grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$W/go-bolt.log" >"$W/go-bolt.txt"
  grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$W/go-etcd.log" >"$W/go-etcd.txt"
  goagg "$W/go-bolt.txt" >"$W/agg-bolt.tsv"
  goagg "$W/go-etcd.txt" >"$W/agg-etcd.tsv"
  local bc bl bh b9 uf ff ec el eh e9 pf rs rl rh rp pp cc ce cap
  read -r bc bl bh < <(pick "$W/agg-bolt.tsv" BenchmarkClaimLive p50-ms)
  read -r b9 _ _ < <(pick "$W/agg-bolt.tsv" BenchmarkClaimLive p90-ms)
  read -r uf _ _ < <(pick "$W/agg-bolt.tsv" BenchmarkUpdateFloor p50-ms)
  read -r ff _ _ < <(pick "$W/agg-bolt.tsv" BenchmarkFsyncFloor p50-ms)
  read -r ec el eh < <(pick "$W/agg-etcd.tsv" BenchmarkClaimLive p50-ms)
  read -r e9 _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkClaimLive p90-ms)
  read -r pf _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkPut p50-ms)
  read -r rs rl rh < <(pick "$W/agg-etcd.tsv" BenchmarkResumeDistinctRuns/faked resumes/s)
  read -r rp _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkResumeDistinctRuns/faked p50-ms)
  read -r cc _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkResumeDistinctRuns/faked client-cpu-ms/op)
  read -r ce _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkResumeDistinctRuns/faked etcd-cpu-ms/op)
  read -r pp _ _ < <(pick "$W/agg-etcd.tsv" BenchmarkPutParallel writes/s)
  # The CPU cap of this machine: its cores over the CPU one resume costs in
  # the resumer and the three members together.
  cap=$(awk -v n="$(nproc)" -v a="$cc" -v b="$ce" 'BEGIN{ if (a + b > 0) printf "%.0f", n * 1000 / (a + b); else print "nan" }')
  {
    echo "Commands (fsync on: bbolt's default, etcd's WAL; the test's temporary directory on the VM's disk; the etcd cluster: three members on 127.0.0.1 sharing the two cores with the client, test/integration/etcdharness):"
    echo
    echo "    go test -run '^\$' -bench 'BenchmarkClaimLive|BenchmarkUpdateFloor|BenchmarkFsyncFloor' -benchtime 300x -count $cnt ./ledger/bolt"
    echo "    go test -run '^\$' -bench 'BenchmarkClaimLive\$|BenchmarkPut\$|BenchmarkPutParallel|BenchmarkResumeDistinctRuns/faked' -benchtime 400x -count ${ETCD_COUNT:-3} ./test/integration/etcdledger"
    echo
    echo "Each run reports the p50 and p90 of its operations; below, the median (min – max) of the runs' figures. [docs/dev/perf-ledger.md](dev/perf-ledger.md) has where a resume's time goes."
    echo
    echo "| figure | measured | floor beside it | goal |"
    echo "|---|---|---|---|"
    echo "| bolt \`Claim\` → \`Live\` (distinct runs; two transitions, each opens the file, one transaction, closes) | p50 **$(fmt_ms "$bc") ms** ($(fmt_ms "$bl") – $(fmt_ms "$bh")), p90 $(fmt_ms "$b9") ms | two bolt transitions (open, one fsynced read-write transaction, close): 2 × $(fmt_ms "$uf") ms; one 4 KiB write + fsync: $(fmt_ms "$ff") ms | p50 ≤ 5 ms — $(verdict "$bc" le 5) |"
    echo "| etcd \`Claim\` → \`Live\`, 3-member loopback cluster (lease grant, read, claim transaction, keep-alive, \`Live\` transaction) | p50 **$(fmt_ms "$ec") ms** ($(fmt_ms "$el") – $(fmt_ms "$eh")), p90 $(fmt_ms "$e9") ms | one quorum write (\`Put\`): p50 $(fmt_ms "$pf") ms; the claim makes three (lease grant, \`Claim\`, \`Live\`): $(fmt_ms "$(awk -v x="$pf" 'BEGIN{print 3*x}')") ms | p50 ≤ 10 ms — $(verdict "$ec" le 10) |"
    echo "| resumes of distinct runs through one cluster, 16 resumers (\`resume.Resume\`: the checks, the claim check's read, \`Claim\`, faked materialization, \`Live\`) | **$(printf '%.0f' "$rs") resumes/s** ($(printf '%.0f' "$rl") – $(printf '%.0f' "$rh")), p50 $(fmt_ms "$rp") ms with 16 in flight; CPU per resume: $(fmt_ms "$cc") ms in the resumer, $(fmt_ms "$ce") ms in the members | quorum writes, 16 concurrent: $(printf '%.0f' "$pp")/s ÷ 4 writes per resume = $(awk -v x="$pp" 'BEGIN{printf "%.0f", x/4}') resumes/s; CPU: $(nproc) cores ÷ $(fmt_ms "$(awk -v a="$cc" -v b="$ce" 'BEGIN{print a+b}')") ms per resume = $cap resumes/s | ≥ 200 resumes/s — $(verdict "$rs" ge 200) |"
    echo
    echo "<details><summary>benchstat of the raw runs</summary>"
    echo
    echo '```'
    benchstat "$W/go-bolt.txt" 2>&1 || true
    echo
    benchstat "$W/go-etcd.txt" 2>&1 || true
    echo '```'
    echo
    echo "</details>"
  } >"$W/s5.md"
  local pl; pl=$(profile perf-ledger.md)
  sumrow 70 "ledger: bolt \`Claim\` → \`Live\`, p50, fsync on" "$(fmt_ms "$bc") ms" "floor: 2 bolt transitions 2 × $(fmt_ms "$uf") ms; fsync $(fmt_ms "$ff") ms" "$(ratio "$bc" 5) × goal" "p50 ≤ 5 ms" "$(missed "$(verdict "$bc" le 5)" "$pl")" s5
  sumrow 71 "ledger: etcd \`Claim\` → \`Live\`, p50, 3-member loopback cluster" "$(fmt_ms "$ec") ms" "floor: one quorum write $(fmt_ms "$pf") ms (the claim makes 3)" "$(ratio "$ec" 10) × goal" "p50 ≤ 10 ms" "$(missed "$(verdict "$ec" le 10)" "$pl")" s5
  sumrow 72 "resumes/s of distinct runs through one etcd cluster (decision + claim, containerd faked)" "$(printf '%.0f' "$rs") resumes/s" "floor: quorum writes $(awk -v x="$pp" 'BEGIN{printf "%.0f", x/4}') resumes/s; CPU cap $cap resumes/s (cluster and resumers on the same $(nproc) cores)" "$(ratio 200 "$rs") × goal's time" "≥ 200 resumes/s" "$(missed "$(verdict "$rs" ge 200)" "$pl")" s5
}

for s in $sections; do "section$s"; done
load_end=$(load)
elapsed=$(($(date +%s) - t_start))

# The summary: every row of docs/design.md "Performance goals", in its
# order; a row no section measured says so.
summary() {
  local o name sec
  echo "| docs/design.md goal | figure | anchor or baseline (same run) | ratio | goal | verdict | from |"
  echo "|---|---|---|---|---|---|---|"
  while IFS='|' read -r o sec name; do
    if [[ -s $W/sum.tsv ]] && awk -F'\t' -v o="$o" '$1==o {f=1} END{exit !f}' "$W/sum.tsv"; then
      awk -F'\t' -v o="$o" '$1==o {printf "| %s | %s | %s | %s | %s | %s | [§%s](#%s) |\n", $2, $3, $4, $5, $6, $7, substr($8, 2), $8}' "$W/sum.tsv"
    else
      echo "| $name | not measured in this run (section ${sec#s} $([[ " $sections " == *" ${sec#s} "* ]] && echo "ran without it: see there" || echo "not run")) | | | | | [§${sec#s}](#$sec) |"
    fi
  done <<'ROWS'
10|s2|ingest → address, 1 KB, one core
11|s2|ingest → address, 3 KB, one core
20|s1|`manifest` process, wall
21|s1|`manifest` process, peak RSS
22|s1|`manifest` vs `devcontainer read-configuration`
30|s2|SnapshotRef verification in bulk
40|s2|resume decision in process, warm daemon, p50
41|s2|`resume --check` process, warm daemon
50|s3|suspend of 256 MiB of changes (generation 1)
51|s3|its pause window
52|s3|generation-2 suspend minus the unchanged suspend vs the pipeline over 8 MiB
53|s3|its fixed part
60|s3|materialize, 256 MiB
61|s3|export, 256 MiB
62|s3|import, 256 MiB
63|s3|time to a running incarnation, 256 MiB
70|s5|ledger: bolt `Claim` → `Live`, p50
71|s5|ledger: etcd `Claim` → `Live`, p50
72|s5|resumes/s through one etcd cluster
ROWS
}

out=$outdir/performance.md
tmp=$(mktemp "$outdir/.performance.md.XXXXXX")
{
  echo "# Performance"
  echo
  echo "Written by \`bench/run.sh\` (\`make bench\`) in one run$([[ -n ${BENCH_ONLY:-} ]] && echo " of sections $BENCH_ONLY only (a partial report)"); do not edit by hand. Goals: [docs/design.md \"Performance goals\"](design.md#performance-goals). A missed goal is stated as missed and links its profile in [docs/dev/](dev/)."
  echo
  echo "| machine | |"
  echo "|---|---|"
  echo "| CPU | $cpu_model, $(nproc) cores (\`nproc\`) |"
  echo "| memory | $mem |"
  echo "| load average at start (1, 5, 15 min) | $load_start |"
  echo "| load average at the end | $load_end |"
  echo "| kernel | $(uname -r) |"
  echo "| Go | $(go env GOVERSION) |"
  echo "| containerd (harness) | ${ctrd:-not found} |"
  echo "| commit | $commit$( ((dirty > 0)) && echo " (+$dirty changed files)") |"
  echo "| date | $(date -u '+%Y-%m-%d %H:%M UTC') |"
  echo "| duration of the run | $((elapsed / 60)) min $((elapsed % 60)) s |"
  echo
  echo "The machine is shared: other engineers' tests run at the same time (see the load average), so wall times carry their noise; ratios are taken between runs interleaved in the same minutes, CPU figures (one core) from getrusage."
  echo
  echo "## Summary"
  echo
  echo "One row per goal; \"× goal\" is the figure over the goal (times; ≤ 1 meets it) or the goal over the figure (rates); \"×\" alone is the figure over its baseline on the same bytes."
  echo
  summary
  echo
  local_title() { echo "<a id=\"s$1\"></a>"; echo; echo "## $1. $2"; echo; }
  local_title 1 "\`sandbox-resume manifest\` vs \`devcontainer read-configuration\`"
  cat "$W/s1.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  local_title 2 "Ingest, verify and the resume decision"
  cat "$W/s2.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  local_title 3 "Suspend, materialize, export, import, time to running against tar, zstd, sha256sum and ctr"
  cat "$W/s3.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  local_title 4 "Growth"
  cat "$W/s4.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  local_title 5 "The run ledger"
  cat "$W/s5.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
} >"$tmp"
chmod 644 "$tmp"
sync "$tmp"
# The plots first, then the report that names them: each by rename.
for f in "$P"/*.png; do
  [[ -e $f ]] || continue
  cp "$f" "$outdir/.$(basename "$f").tmp"
  sync "$outdir/.$(basename "$f").tmp"
  mv "$outdir/.$(basename "$f").tmp" "$outdir/$(basename "$f")"
done
mv "$tmp" "$out"
tmp=
log "wrote $out and its plots ($(cd "$P" && ls | paste -sd' ' -)) in ${elapsed}s"
