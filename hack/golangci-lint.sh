#!/usr/bin/env bash
# Installs golangci-lint at the version `make lint` pins (its first
# argument) into bin/, with `go install`, unless bin/ has it already
# (cached by version: bin/.golangci-lint-<version>). Works as non-root.
set -euo pipefail
version=$1
cd "$(dirname "$0")/.."
stamp=bin/.golangci-lint-$version
if [[ ! -f $stamp || ! -x bin/golangci-lint ]]; then
  echo "lint: go install golangci-lint $version into bin/ (a few minutes the first time)"
  mkdir -p bin
  rm -f bin/.golangci-lint-*
  GOBIN="$(pwd)/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
  touch "$stamp"
fi
