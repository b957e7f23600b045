#!/usr/bin/env bash
# Installs what `make test` needs and is missing (DESIGN "Build and test
# environment"). As root: apt packages and the containerd binaries at the
# version in go.mod, built with `go install` into bin/ (cached by version);
# etcd v3.6 from hack/tools/etcd into bin/ (cached by version).
# As non-root it only reports what is missing. Never installs Debian's
# containerd package: its 1.6 shim would shadow the v2 shim on PATH.
set -euo pipefail
version=$1; shift
cd "$(dirname "$0")/.."
root=$(pwd)

missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]]; then
    echo "deps: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "deps: missing apt packages (install as root): ${missing[*]}"
  fi
fi

stamp=bin/.containerd-$version
if [[ ! -f $stamp || ! -x bin/containerd || ! -x bin/containerd-shim-runc-v2 || ! -x bin/ctr ]]; then
  echo "deps: go install containerd $version (containerd, containerd-shim-runc-v2, ctr) into bin/"
  mkdir -p bin
  rm -f bin/.containerd-*
  GOBIN="$root/bin" go install \
    "github.com/containerd/containerd/v2/cmd/containerd@$version" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$version" \
    "github.com/containerd/containerd/v2/cmd/ctr@$version"
  touch "$stamp"
fi

# The stock JSON Schema validator the schemas/ tests run (issue 9): ajv with
# its Draft 2020-12 dialect and ajv-formats, installed with npm into the
# repo-local .tools/ (gitignored), only when missing. Works as non-root too.
ajv_versions=(ajv@8.20.0 ajv-cli@5.0.0 ajv-formats@3.0.1)
if [[ ! -f .tools/node_modules/ajv/dist/2020.js || ! -f .tools/node_modules/ajv-formats/dist/index.js || ! -x .tools/node_modules/.bin/ajv ]]; then
  if ! command -v npm >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    echo "deps: apt-get install nodejs npm (for the schema validator)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  if command -v npm >/dev/null 2>&1; then
    echo "deps: npm install ${ajv_versions[*]} into .tools/"
    npm install --prefix .tools --no-audit --no-fund --silent "${ajv_versions[@]}"
  else
    echo "deps: missing npm (node and npm run the schema validator test)"
  fi
fi

# The etcd server (and etcdctl) for the fleet-ledger tests (issue 17): v3.6
# built from the tools module hack/tools/etcd, whose go.mod pins the version
# (`go install MODULE@VERSION` refuses etcd's server module: its go.mod has
# replace directives). Cached by version like containerd. Never Debian's
# etcd-server package: it is 3.4.
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' hack/tools/etcd/go.mod)
[[ -n $etcd_version ]] || { echo "deps: no go.etcd.io/etcd/server/v3 version in hack/tools/etcd/go.mod" >&2; exit 1; }
stamp=bin/.etcd-$etcd_version
if [[ ! -f $stamp || ! -x bin/etcd || ! -x bin/etcdctl ]]; then
  echo "deps: go build etcd $etcd_version (etcd, etcdctl) from hack/tools/etcd into bin/"
  mkdir -p bin
  rm -f bin/.etcd-*
  (cd hack/tools/etcd &&
    go build -trimpath -o "$root/bin/etcd" go.etcd.io/etcd/server/v3 &&
    go build -trimpath -o "$root/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3)
  touch "$stamp"
fi
