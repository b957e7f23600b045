#!/usr/bin/env bash
# bench/run.sh — the performance report (issue 10): measures the whole tool
# beside its anchors in one run and writes docs/performance.md and the
# plots docs/perf-*.png. Run by `make bench`; not part of CI's pass/fail.
#
#   bench/run.sh                    # ≈ 15 minutes on 2 cores, 1 GiB runs included
#   BENCH_LARGE=0 bench/run.sh      # without the 1 GiB lifecycles (≈ 5 min less)
#   BENCH_ONLY="1 4" bench/run.sh   # only some sections (a partial report)
#
# Sections (each figure: the command, median and spread over repeated runs,
# the ratio to the anchor measured in the same run):
#   1. `sandbox-resume manifest` vs `devcontainer read-configuration`
#      (@devcontainers/cli 0.89.0 in .tools/, --docker-path a stub that
#      prints nothing) over the corpus variants the ingester accepts
#      (bench/corpusvariants): wall time and peak RSS; a hello-world Go
#      binary as the process-start floor.
#   2. Go benchmarks with -cpu 1 -count 5, summarized with benchstat:
#      envmanifest BenchmarkIngest (per stage), BenchmarkSign/Verify, resume
#      BenchmarkVerifyRefBulk and BenchmarkDecideFake; decision latency
#      warm (BenchmarkDecideWarmDaemon) and cold (BenchmarkResumeCheckProcess,
#      a new `resume --check` process each time).
#   3. test/integration BenchmarkMoveLifecycle: suspend (and its pause
#      window), export, import, materialize and time to a running
#      incarnation vs tar/zstd/sha256sum/ctr baselines on the same bytes
#      (1, 4, 16, 64 MiB × 3, 256 MiB × 5, 1 GiB × 3 unless BENCH_LARGE=0).
#   4. Growth: ingest vs features (1→100) and env entries (1→10,000)
#      (bench/growth); the lifecycle steps vs MiB of changes; gnuplot PNGs.
# Sections 3 and the containerd part of 2 need root (the harness starts its
# own containerd daemons); without root they are reported as skipped.
# Installs what is missing: gnuplot-nox, time (apt), @devcontainers/cli
# (npm, into .tools/devcontainers), benchstat (go install, into .tools/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH=/usr/local/go/bin:$root/bin:$root/.tools/bin:$PATH
export GOFLAGS=${GOFLAGS:--buildvcs=false}
shared=${SANDBOX_RESUME_SHARED:-$(cd .. && pwd)/shared}
W=$(mktemp -d /tmp/sr-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
t_start=$(date +%s)
log() { printf '[bench %4ds] %s\n' $(($(date +%s) - t_start)) "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
is_root() { [[ $(id -u) == 0 ]]; }

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
if [[ ! -x $dc ]] || ! "$dc" --version 2>/dev/null | grep -qx 0.89.0; then
  log "installing @devcontainers/cli@0.89.0 into .tools/devcontainers (npm)"
  mkdir -p .tools/devcontainers
  npm install --no-audit --no-fund --silent --prefix "$root/.tools/devcontainers" @devcontainers/cli@0.89.0 >&2
fi
if ! command -v benchstat >/dev/null; then
  log "installing benchstat into .tools/bin"
  GOBIN=$root/.tools/bin go install golang.org/x/perf/cmd/benchstat@latest
fi
log "building"
go build -o "$W/sandbox-resume" ./cmd/sandbox-resume
go build -o bin/sandbox-resume ./cmd/sandbox-resume
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
  awk -v m="$x" 'BEGIN{exit !(m >= 12)}' && verdict_x=met
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
    echo "Goals: ≤ 10 ms wall — $verdict_wall; ≤ 25 MB RSS — $verdict_rss (largest $(fmt_ms "$hro") MB); ≥ 12× faster — $verdict_x."
  } >"$W/s1.md"
  printf '%s\t%s\t%s\t%s\t%s\n' "$mo" "$hro" "$mt" "$x" "$nv" >"$W/s1.summary"
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
  local bt=${GO_BENCHTIME:-0.5s}
  go test -run '^$' -bench 'BenchmarkIngest|BenchmarkSign|BenchmarkVerify' -benchmem -benchtime "$bt" -cpu 1 -count 5 ./envmanifest >"$W/go-envmanifest.txt"
  log "   resume (load $(load))"
  go test -run '^$' -bench 'BenchmarkDecideFake' -benchmem -benchtime "$bt" -cpu 1 -count 5 ./resume >"$W/go-resume.txt"
  go test -run '^$' -bench 'BenchmarkVerifyRefBulk' -benchmem -benchtime 1x -cpu 1 -count 5 ./resume >>"$W/go-resume.txt"
  goagg "$W/go-envmanifest.txt" >"$W/agg-env.tsv"
  goagg "$W/go-resume.txt" >"$W/agg-resume.tsv"
  if is_root; then
    log "   decision latency against a daemon (load $(load))"
    go test -run '^$' -bench 'BenchmarkDecideWarmDaemon|BenchmarkResumeCheckProcess' -benchtime 100x -count 5 ./test/integration 2>&1 |
      grep -E '^(Benchmark|goos|goarch|pkg|cpu|PASS|ok|FAIL)' >"$W/go-integration.txt"
    goagg "$W/go-integration.txt" >"$W/agg-int.tsv"
  fi
  {
    echo "Commands (each -count 5; the medians below are over the 5 runs, the spread is their min – max):"
    echo
    echo '    go test -run '"'"'^$'"'"' -bench '"'"'BenchmarkIngest|BenchmarkSign|BenchmarkVerify'"'"' -benchmem -benchtime '"$bt"' -cpu 1 -count 5 ./envmanifest'
    echo '    go test -run '"'"'^$'"'"' -bench BenchmarkDecideFake -benchmem -benchtime '"$bt"' -cpu 1 -count 5 ./resume'
    echo '    go test -run '"'"'^$'"'"' -bench BenchmarkVerifyRefBulk -benchmem -benchtime 1x -cpu 1 -count 5 ./resume'
    echo '    go test -run '"'"'^$'"'"' -bench '"'"'BenchmarkDecideWarmDaemon|BenchmarkResumeCheckProcess'"'"' -benchtime 100x -count 5 ./test/integration   # root'
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
      local hm; hm=$(stats <"$W/s1hello" 2>/dev/null | awk '{print $2}')
      echo "Resume decision latency against a warm containerd daemon (the harness's; 100 decisions per run, p50 and p90 per run; median and min – max of the 5 runs' p50):"
      echo
      echo "| figure | p50 median (min – max) | p90 median | goal | ratio to goal | anchor |"
      echo "|---|---|---|---|---|---|"
      echo "| warm: \`resume.Decide\` in process (\`BenchmarkDecideWarmDaemon\`) | **$(fmt_ms "$wm") ms** ($(fmt_ms "$wl") – $(fmt_ms "$wh")) | $(fmt_ms "$w9") ms | p50 ≤ 2 ms | $(ratio "$wm" 2)× — $(verdict "$wm" le 2) | — |"
      echo "| cold: a new \`sandbox-resume resume --check\` process (\`BenchmarkResumeCheckProcess\`) | **$(fmt_ms "$cm") ms** ($(fmt_ms "$cl") – $(fmt_ms "$ch")) | $(fmt_ms "$c9") ms | ≤ 15 ms | $(ratio "$cm" 15)× — $(verdict "$cm" le 15) | hello-world Go process $(fmt_ms "${hm:-nan}") ms: $(ratio "$cm" "${hm:-0}")× |"
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
  SR_BENCH_OUT=$W/life.tsv SR_BENCH_SIZES=$sizes go test -run '^$' -bench BenchmarkMoveLifecycle -benchtime 1x -timeout 60m ./test/integration 2>&1 |
    grep -E '^(Benchmark|PASS|ok|FAIL|---)|_test.go' >"$W/go-life.txt" || { cat "$W/go-life.txt" >&2; return 1; }
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
  } >"$W/s3.md"
}

# ---- 4. growth and plots -----------------------------------------------------
section4() {
  log "4. growth (load $(load))"
  go run ./bench/growth >"$W/growth.tsv"
  awk -F'\t' '$1=="features"{print $2, $4, $5, $6}' "$W/growth.tsv" >"$W/g-features.dat"
  awk -F'\t' '$1=="env"{print $2, $4, $5, $6}' "$W/growth.tsv" >"$W/g-env.dat"
  local common='set terminal pngcairo noenhanced size 1100,620 font "DejaVu Sans,11"; set grid; set key top left'
  gnuplot -e "$common; set output 'docs/perf-features.png';
    set title 'ingest → address vs number of features (1 env entry), in process, one core';
    set xlabel 'features'; set ylabel 'µs per document (median of 7 batches; bars: min–max)';
    plot '$W/g-features.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'envmanifest.Ingest'"
  gnuplot -e "$common; set output 'docs/perf-env.png'; set logscale xy;
    set title 'ingest → address vs number of containerEnv entries (1 feature), in process, one core';
    set xlabel 'containerEnv entries (log)'; set ylabel 'µs per document (log; bars: min–max)';
    plot '$W/g-env.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'envmanifest.Ingest'"
  if [[ -s $W/life-agg.tsv ]]; then
    local op
    for op in suspend export import materialize; do
      awk -F'\t' -v o="$op" '$2==o {split($3, a, " "); print $1, a[2], a[3], a[4]}' "$W/life-agg.tsv" | sort -n >"$W/l-$op.dat"
      awk -F'\t' -v o="$op-base" '$2==o {split($3, a, " "); print $1, a[2], a[3], a[4]}' "$W/life-agg.tsv" | sort -n >"$W/l-$op-base.dat"
    done
    gnuplot -e "$common; set output 'docs/perf-changes.png'; set logscale xy; set xrange [0.8:1300]; set key outside right top box;
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
      echo "| MiB | suspend / baseline ms | export / baseline ms | import / baseline ms | materialize / baseline ms |"
      echo "|---|---|---|---|---|"
      local mib
      for mib in $(awk -F'\t' '{print $1}' "$W/life-agg.tsv" | sort -nu); do
        printf '| %s ' "$mib"
        for op in suspend export import materialize; do
          read -r _ m _ _ < <(life "$mib" "$op")
          read -r _ mb _ _ < <(life "$mib" "$op-base")
          printf '| %s / %s (%s×) ' "$(fmt_ms "$m")" "$(fmt_ms "$mb")" "$(ratio "$m" "$mb")"
        done
        echo "|"
      done
      echo
      echo "![lifecycle steps vs changed MiB](perf-changes.png)"
    fi
  } >"$W/s4.md"
}

for s in ${BENCH_ONLY:-1 2 3 4}; do "section$s"; done
load_end=$(load)
elapsed=$(($(date +%s) - t_start))

out=docs/performance.md
tmp=$(mktemp docs/.performance.md.XXXXXX)
{
  echo "# Performance"
  echo
  echo "Written by \`bench/run.sh\` (\`make bench\`) in one run; do not edit by hand. Goals: docs/design.md \"Performance goals\". A missed goal is stated as missed; README.md's Performance section has the profiles."
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
  echo "The machine is shared: other engineers' tests run at the same time (see the load average), so wall times carry their noise; ratios are taken between runs interleaved in the same minutes."
  echo
  echo "## 1. \`sandbox-resume manifest\` vs \`devcontainer read-configuration\`"
  echo
  cat "$W/s1.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  echo "## 2. Ingest, verify and the resume decision"
  echo
  cat "$W/s2.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  echo "## 3. Suspend, materialize, export, import against tar, zstd and sha256sum"
  echo
  cat "$W/s3.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
  echo
  echo "## 4. Growth"
  echo
  cat "$W/s4.md" 2>/dev/null || echo "(not run: BENCH_ONLY=${BENCH_ONLY:-})"
} >"$tmp"
sync "$tmp"
mv "$tmp" "$out"
log "wrote $out and docs/perf-*.png in ${elapsed}s"
