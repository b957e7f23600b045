#!/usr/bin/env bash
# Installs what `make test` needs and is missing (DESIGN "Build and test
# environment", "Memory": installing the runtimes).
#
# usage: hack/deps.sh CONTAINERD_VERSION [APT_PACKAGE...]
#   The CRIU pins (CRIU_VERSION, CRIU_SHA256, CRIU_URL) are the Makefile's,
#   read from it unless set in the environment (the harness calls this
#   script with the containerd version only).
#
# Every tool is built once per machine into a cache keyed by version,
# $SANDBOX_RESUME_CACHE (default /var/cache/sandbox-resume), one directory
# per tool and version (containerd-v2.4.2/, etcd-v3.6.16/, criu-4.1.1/,
# gvisor-v0.0.0-…/), written into a temporary directory and renamed into place
# when complete (a killed build leaves nothing that looks finished), each under
# its own flock. bin/ of every clone holds symlinks into it, so a fresh clone
# with a warm cache links and is done:
#   - containerd, containerd-shim-runc-v2, ctr: `go install` at the version
#     in go.mod (never Debian's containerd: its 1.6 shim would shadow the v2
#     shim on PATH);
#   - etcd, etcdctl: v3.6 from the tools module hack/tools/etcd;
#   - criu: the system's when `criu --version` is ≥ 4.1 (Debian 12's 3.17
#     fails `criu check` on kernel ≥ 6.13), else the pinned release built from
#     Debian's source package (its sha256 verified before it is unpacked)
#     with Debian 12's build dependencies installed by name;
#   - runsc, containerd-shim-runsc-v1: gVisor from the tools module
#     hack/tools/gvisor (CGO_ENABLED=0, version stamped; the shim patched at
#     build time to start without CAP_SYS_RESOURCE, see build_gvisor).
# Builds and apt installs happen only as root; as another user it links what
# the cache has and reports what is missing. Every step prints one line
# saying what it did, from where and how long it took; a step longer than
# 15 s prints a progress line every 15 s.
set -euo pipefail
version=$1; shift
cd "$(dirname "$0")/.."
root=$(pwd)
cache=$(realpath -m "${SANDBOX_RESUME_CACHE:-/var/cache/sandbox-resume}") # bin/'s links are absolute
makevar() { awk -v k="$1" '$1==k && $2==":=" {print $3; exit}' Makefile; }
criu_version=${CRIU_VERSION:-$(makevar CRIU_VERSION)}
criu_sha256=${CRIU_SHA256:-$(makevar CRIU_SHA256)}
criu_url=${CRIU_URL:-$(makevar CRIU_URL)}
criu_url=${criu_url//\$(CRIU_VERSION)/$criu_version}
[[ -n $criu_version && -n $criu_sha256 && -n $criu_url ]] || { echo "deps: no CRIU_VERSION, CRIU_SHA256 or CRIU_URL in the Makefile" >&2; exit 1; }
# Debian 12's names for CRIU's build dependencies (`make criu`: protobuf-c,
# libnl-3, libnet, libcap, libbsd, gnutls, nftables, uuid; protobuf's
# descriptor.proto; python3 for the generated headers).
criu_build_deps=(build-essential pkg-config python3 libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev
  libnl-3-dev libnet1-dev libcap-dev libbsd-dev libgnutls28-dev libnftables-dev uuid-dev)
is_root=0
[[ $(id -u) == 0 ]] && is_root=1
missing_report=()
mkdir -p bin
# Temporary files and directories, and step's progress tickers: removed
# and stopped however the script ends.
tmpdirs=() tickers=()
cleanup() {
  local rc=$?
  set +e
  ((${#tickers[@]})) && kill "${tickers[@]}" 2>/dev/null
  ((${#tmpdirs[@]})) && rm -rf "${tmpdirs[@]}"
  exit "$rc"
}
trap cleanup EXIT

say() { echo "deps: $*"; }

# step LABEL WHAT CMD...: prints "LABEL: WHAT", runs CMD in the foreground
# (Ctrl-C stops it) with its output in a log while a ticker prints "still at
# LABEL (N s)" every 15 s, and prints "LABEL: done in N s" at the end (or
# the log's tail, and exits 1, when CMD failed).
step() {
  local label=$1 what=$2; shift 2
  local log start rc=0 ticker
  log=$(mktemp "${TMPDIR:-/tmp}/sandbox-resume-deps.XXXXXX")
  tmpdirs+=("$log")
  start=$SECONDS
  say "$label: $what"
  # The ticker's sleep holds no copy of stdout: a pipe reader (demo.sh's
  # tee) sees the end as soon as this script ends.
  (n=0; while sleep 15 </dev/null >/dev/null 2>&1; do n=$((n + 15)); say "  still at $label ($n s)"; done) &
  ticker=$!
  tickers+=("$ticker")
  "$@" >"$log" 2>&1 || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((rc != 0)); then
    say "$label: FAILED after $((SECONDS - start)) s (exit $rc): $what; last lines of its output:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  say "$label: done in $((SECONDS - start)) s"
}

apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  if ((!is_root)); then
    missing_report+=("apt packages (install as root): ${missing[*]}")
    return 0
  fi
  step "apt" "apt-get update and install ${missing[*]} (the system's apt sources)" \
    env DEBIAN_FRONTEND=noninteractive bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"' _ "${missing[@]}"
}

# ensure_cached TOOL-VERSION BUILD_FN FILE...: makes $cache/TOOL-VERSION
# hold FILE... (running BUILD_FN DIR to fill a temporary DIR, under the
# key's lock, when it does not) and sets how ("cached" or "built now") and
# have (0, noting what is missing, when it must be built and this is not
# root). Always returns 0: it must not run in a condition, where set -e
# would not stop a failing build.
ensure_cached() {
  local key=$1 build=$2; shift 2
  local dir=$cache/$key f ok=1
  how=cached have=1
  for f in "$@"; do [[ -e $dir/$f ]] || ok=0; done
  ((ok)) && return 0
  if ((!is_root)); then
    missing_report+=("$key (run \`make deps\` as root to build it into $dir)")
    have=0
    return 0
  fi
  mkdir -p "$cache"
  chmod 0755 "$cache"
  exec {lockfd}>"$cache/.lock-$key"
  if ! flock -n "$lockfd"; then
    say "$key: waiting for another make deps that is building it (lock $cache/.lock-$key)"
    flock "$lockfd"
  fi
  ok=1
  for f in "$@"; do [[ -e $dir/$f ]] || ok=0; done
  if ((!ok)); then
    local tmp
    # What a killed build left (only the lock holder builds this key).
    rm -rf "$cache/.tmp-$key".*
    tmp=$(mktemp -d "$cache/.tmp-$key.XXXXXX")
    tmpdirs+=("$tmp")
    chmod 0755 "$tmp"
    "$build" "$tmp"
    how="built now"
    for f in "$@"; do
      [[ -e $tmp/$f ]] || { say "$key: the build made no $f" >&2; exit 1; }
    done
    rm -rf "$dir"
    mv "$tmp" "$dir"
  fi
  exec {lockfd}>&-
}

# link_cached TOOL-VERSION LINKDIR FILE...: links LINKDIR/FILE to each
# $cache/TOOL-VERSION/FILE and prints one line.
link_cached() {
  local key=$1 linkdir=$2; shift 2
  local dir=$cache/$key f linked=1 names=$1
  for f in "$@"; do [[ $(readlink "$linkdir/$f" 2>/dev/null) == "$dir/$f" ]] || linked=0; done
  if ((linked)) && [[ $how == cached ]]; then
    say "$key: $linkdir/ already links $dir (cached)"
    return 0
  fi
  mkdir -p "$linkdir"
  for f in "$@"; do
    [[ -d $linkdir/$f && ! -L $linkdir/$f ]] && rm -rf "${linkdir:?}/$f"
    ln -sfn "$dir/$f" "$linkdir/$f"
  done
  (($# > 1)) && names="{$(IFS=,; echo "$*")}"
  say "$key: linked $linkdir/$names to $dir ($how)"
}

# cached TOOL-VERSION BUILD_FN FILE...: ensure_cached, then bin/FILE links.
cached() {
  local key=$1
  ensure_cached "$@"
  shift 2
  if ((have)); then link_cached "$key" bin "$@"; fi
  return 0
}

# legacy_ok STAMP FILE...: a clone whose bin/ was filled before the cache
# (a stamp file bin/.TOOL-VERSION beside the binaries) is left alone.
legacy_ok() {
  local stamp=$1 f; shift
  [[ -e bin/$stamp ]] || return 1
  for f in "$@"; do [[ -x bin/$f ]] || return 1; done
  say "${stamp#.}: bin/ has it (stamp bin/$stamp, built before the cache)"
}

# --- apt packages ------------------------------------------------------------
if (($#)); then
  apt_install "$@"
fi

# --- containerd --------------------------------------------------------------
build_containerd() {
  step "containerd $version" "go install github.com/containerd/containerd/v2/cmd/{containerd,containerd-shim-runc-v2,ctr}@$version (Go module proxy) into $1" \
    env GOBIN="$1" go install \
    "github.com/containerd/containerd/v2/cmd/containerd@$version" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$version" \
    "github.com/containerd/containerd/v2/cmd/ctr@$version"
}
if ! legacy_ok ".containerd-$version" containerd containerd-shim-runc-v2 ctr; then
  cached "containerd-$version" build_containerd containerd containerd-shim-runc-v2 ctr
fi

# --- ajv ---------------------------------------------------------------------
# The stock JSON Schema validator the schemas/ tests run (issue 9): ajv with
# its Draft 2020-12 dialect and ajv-formats, installed with npm into the
# repo-local .tools/ (gitignored), only when missing. Works as non-root too.
ajv_versions=(ajv@8.20.0 ajv-cli@5.0.0 ajv-formats@3.0.1)
ajv_key=npm-$(IFS=-; echo "${ajv_versions[*]//@/-}")
ajv_ok() { [[ -f $1/ajv/dist/2020.js && -f $1/ajv-formats/dist/index.js && -x $1/.bin/ajv ]]; }
build_ajv() {
  step "ajv" "npm install ${ajv_versions[*]} (npm registry) into $1" \
    npm install --prefix "$1" --no-audit --no-fund --silent "${ajv_versions[@]}"
  rm -f "$1/package.json" "$1/package-lock.json"
}
if ajv_ok .tools/node_modules && [[ ! -L .tools/node_modules ]]; then
  say "ajv: .tools/node_modules has ${ajv_versions[*]}"
else
  if ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
  fi
  if ! command -v npm >/dev/null 2>&1 && [[ ! -d $cache/$ajv_key ]]; then
    missing_report+=("npm (node and npm run the schema validator test)")
  elif ((is_root)) || [[ -d $cache/$ajv_key ]]; then
    # Into the machine-wide cache like the binaries; .tools/node_modules
    # links to it.
    ensure_cached "$ajv_key" build_ajv node_modules/ajv/dist/2020.js node_modules/ajv-formats/dist/index.js node_modules/.bin/ajv
    if ((have)); then link_cached "$ajv_key" .tools node_modules; fi
  else
    # Not root and not cached: into this clone, as before the cache.
    step "ajv" "npm install ${ajv_versions[*]} (npm registry) into .tools/" \
      npm install --prefix .tools --no-audit --no-fund --silent "${ajv_versions[@]}"
  fi
fi

# --- etcd --------------------------------------------------------------------
# The etcd server (and etcdctl) for the fleet-ledger tests (issue 17): v3.6
# built from the tools module hack/tools/etcd, whose go.mod pins the version
# (`go install MODULE@VERSION` refuses etcd's server module: its go.mod has
# replace directives). Never Debian's etcd-server package: it is 3.4.
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' hack/tools/etcd/go.mod)
[[ -n $etcd_version ]] || { say "no go.etcd.io/etcd/server/v3 version in hack/tools/etcd/go.mod" >&2; exit 1; }
build_etcd() {
  step "etcd $etcd_version" "go build go.etcd.io/etcd/{server,etcdctl}/v3 from hack/tools/etcd (Go module proxy) into $1" \
    bash -c 'cd hack/tools/etcd && go build -trimpath -o "$1/etcd" go.etcd.io/etcd/server/v3 && go build -trimpath -o "$1/etcdctl" go.etcd.io/etcd/etcdctl/v3' _ "$1"
}
if ! legacy_ok ".etcd-$etcd_version" etcd etcdctl; then
  cached "etcd-$etcd_version" build_etcd etcd etcdctl
fi

# --- CRIU --------------------------------------------------------------------
# criu_ok BINARY: its `criu --version` says 4.1 or newer.
criu_ok() {
  local v
  v=$("$1" --version 2>/dev/null | awk '/^Version:/ {print $2; exit}') || return 1
  [[ -n $v ]] && printf '4.1\n%s\n' "$v" | sort -C -V
}
build_criu() {
  local dir=$1 src
  apt_install "${criu_build_deps[@]}"
  src=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-resume-criu.XXXXXX")
  tmpdirs+=("$src")
  step "criu $criu_version" "download $criu_url (Debian's source package)" curl -fsSL -o "$src/criu.tar.xz" "$criu_url"
  echo "$criu_sha256  $src/criu.tar.xz" | sha256sum -c --quiet - ||
    { say "criu $criu_version: $criu_url does not have the sha256 pinned in the Makefile ($criu_sha256)" >&2; exit 1; }
  tar -C "$src" -xJf "$src/criu.tar.xz"
  step "criu $criu_version" "sha256 ${criu_sha256:0:12}… verified; make -j$(nproc) criu, into $dir" \
    make -C "$src/criu-$criu_version" -j"$(nproc)" criu
  install -m 0755 "$src/criu-$criu_version/criu/criu" "$dir/criu"
  rm -rf "$src"
}
# The system's criu: the first on PATH outside this clone's bin/.
system_criu=
IFS=: read -ra path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
  [[ $d == "$root/bin" || $d == bin || -z $d ]] && continue
  if [[ -x $d/criu && ! -d $d/criu ]]; then system_criu=$d/criu; break; fi
done
if [[ -n $system_criu ]] && criu_ok "$system_criu"; then
  [[ -L bin/criu ]] && rm -f bin/criu
  say "criu: the system's $system_criu is $("$system_criu" --version | awk '/^Version:/ {print $2}') (≥ 4.1), used from PATH"
else
  if [[ -x $cache/criu-$criu_version/criu ]] && ldd "$cache/criu-$criu_version/criu" | grep -q 'not found'; then
    # The cached binary lost a shared library: its build dependencies bring
    # the libraries back.
    apt_install "${criu_build_deps[@]}"
  fi
  cached "criu-$criu_version" build_criu criu
fi

# --- gVisor ------------------------------------------------------------------
gvisor_version=$(awk '$1=="gvisor.dev/gvisor" && $2 ~ /^v/ {print $2; exit}' hack/tools/gvisor/go.mod)
[[ -n $gvisor_version ]] || { say "no gvisor.dev/gvisor version in hack/tools/gvisor/go.mod" >&2; exit 1; }
# build_gvisor DIR: runsc and its shim, static (a cgo runsc cannot start a
# sandbox: it re-execs /proc/self/exe in an empty chroot) and stamped with the
# pseudo-version (unstamped builds all say VERSION_MISSING, which defeats
# runsc's own restore version check). The shim is gVisor's
# gvisor.dev/gvisor/shim, renamed containerd-shim-runsc-v1.
#
# Build-time change: the stock shim's `start` sets its own oom_score_adj to
# -999 and fails when that is refused ("failed to set OOM Score on shim:
# permission denied"), which it is wherever the host lacks CAP_SYS_RESOURCE
# (this project's CI VM). The module is vendored into a temporary copy of
# hack/tools/gvisor and pkg/shim/v1/manager.go is patched there to ignore a
# permission error of that one call (containerd's own runc shim ignores it
# the same way when unprivileged); the build fails if the line to patch is
# not found. Nothing of gVisor is committed.
build_gvisor() {
  local dir=$1 work mgr
  work=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-resume-gvisor.XXXXXX")
  tmpdirs+=("$work")
  cp hack/tools/gvisor/go.mod hack/tools/gvisor/go.sum "$work/"
  step "gvisor $gvisor_version" "go mod vendor gvisor.dev/gvisor@$gvisor_version (Go module proxy; hashes in hack/tools/gvisor/go.sum) into $work" \
    bash -c 'cd "$1" && go mod vendor' _ "$work"
  mgr=$work/vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go
  grep -q 'if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {' "$mgr" ||
    { say "gvisor $gvisor_version: $mgr no longer has the SetOOMScore line to patch" >&2; exit 1; }
  sed -i 's/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {/' "$mgr"
  step "gvisor $gvisor_version" "patch the shim's SetOOMScore (ignore EPERM); CGO_ENABLED=0 go build gvisor.dev/gvisor/{runsc,shim} stamped version.version=$gvisor_version, into $dir" \
    bash -c 'cd "$1" && CGO_ENABLED=0 go build -mod=vendor -trimpath -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$2" -o "$3/" gvisor.dev/gvisor/runsc gvisor.dev/gvisor/shim' \
    _ "$work" "$gvisor_version" "$dir"
  mv "$dir/shim" "$dir/containerd-shim-runsc-v1"
  rm -rf "$work"
}
cached "gvisor-$gvisor_version" build_gvisor runsc containerd-shim-runsc-v1

if ((${#missing_report[@]})); then
  for m in "${missing_report[@]}"; do say "missing: $m"; done
  ((is_root)) && exit 1
  say "done in $SECONDS s with ${#missing_report[@]} missing (as root, \`make deps\` installs them)"
  exit 0
fi
say "all steps done in $SECONDS s (tools in $cache, linked from bin/)"
exit 0
