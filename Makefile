# sandbox-resume — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
export PATH := $(CURDIR)/bin:/usr/local/go/bin:$(PATH)
CONTAINERD_VERSION := $(shell awk '$$1=="github.com/containerd/containerd/v2"{print $$2; exit}' go.mod)
APT_PACKAGES := gcc runc busybox-static b3sum openssl zstd docker-registry skopeo apache2-utils
FUZZTIME ?= 10m
GOLANGCI_LINT_VERSION := v2.15.0

.PHONY: help deps build test unit integration bench fuzz lint clean demo docs

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# make deps builds every tool once per machine into a cache keyed by version,
# $(SANDBOX_RESUME_CACHE)/<tool>-<version>/ (as root; another user only links
# what is there and reports what is missing), and links bin/ to it; each step
# prints what it does, from where, and how long it took (hack/deps.sh).
SANDBOX_RESUME_CACHE ?= /var/cache/sandbox-resume
export SANDBOX_RESUME_CACHE
# CRIU ≥ 4.1 for checkpoints of runc tasks (issue 30; Debian 12's 3.17 fails
# `criu check` on kernel ≥ 6.13): the system's criu when it is new enough, else
# this release built from Debian's source package (trixie's criu 4.1.1; the
# orig tarball's sha256 is checked before it is unpacked) with Debian 12's
# build dependencies.
CRIU_VERSION := 4.1.1
CRIU_SHA256 := f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
CRIU_URL := https://deb.debian.org/debian/pool/main/c/criu/criu_$(CRIU_VERSION).orig.tar.xz
# gVisor (issue 32): runsc and containerd-shim-runsc-v1 from the tools module
# hack/tools/gvisor (its go.mod pins gvisor.dev/gvisor, go.sum the hashes),
# CGO_ENABLED=0, stamped -X gvisor.dev/gvisor/runsc/version.version=<that
# pseudo-version>. Build-time change: the shim is built from a vendored
# temporary copy whose pkg/shim/v1/manager.go ignores a permission error when
# the shim sets its oom_score_adj to -999, so that it starts on hosts without
# CAP_SYS_RESOURCE (this CI VM; the stock shim fails "failed to set OOM Score
# on shim"). No gVisor code is committed.

deps: ## install what is missing: apt packages (as root); containerd (go.mod's version), etcd v3.6 (hack/tools/etcd), CRIU ≥ 4.1 and gVisor's runsc (hack/tools/gvisor) built once into the machine-wide cache (SANDBOX_RESUME_CACHE) and linked into bin/; ajv likewise, linked as .tools/node_modules
	@CRIU_VERSION=$(CRIU_VERSION) CRIU_SHA256=$(CRIU_SHA256) CRIU_URL=$(CRIU_URL) ./hack/deps.sh "$(CONTAINERD_VERSION)" $(APT_PACKAGES)

# The release --version names: the nearest tag, else the commit (and -dirty).
TAGS ?=
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

# The binary is static (CGO_ENABLED=0: Go's own DNS resolver and user
# lookups; ≈ 0.7 ms and 2.5 MB less per process than a cgo build) unless TAGS
# names libzstd, which needs cgo.
BUILD_CGO = $(if $(findstring libzstd,$(TAGS)),1,0)

build: ## build bin/sandbox-resume (stamped with VERSION; static unless TAGS=libzstd)
	CGO_ENABLED=$(BUILD_CGO) $(GO) build -tags "$(TAGS)" -ldflags "-X main.version=$(VERSION)" -o bin/sandbox-resume ./cmd/sandbox-resume

test: deps build ## all tests, with -race: unit and integration (integration needs root; under CI=true nothing skips)
	$(GO) vet ./...
	$(GO) test -race -count=1 -tags faultpoint ./internal/faultpoint
	$(GO) test -count=1 -tags libzstd -run 'TestLayerEncoder|TestChunkWriter' ./runtime/containerd
	$(GO) test -race -count=1 -timeout 30m ./...

unit: build ## unit tests only (no daemon), with -race
	$(GO) test -race -count=1 -short ./...

integration: deps build ## integration tests against real containerd daemons started by the harness (they build the CLI with -tags faultpoint)
	$(GO) test -race -count=1 -timeout 30m -v ./test/integration/...

bench: build ## performance report in one run: bench/run.sh writes docs/performance.md (a summary row per design goal) and docs/perf-*.png (≈ 20 min, root for the containerd parts; BENCH_LARGE=0 skips the 1 GiB runs; not part of CI's pass/fail)
	./bench/run.sh

fuzz: ## run every fuzz target for FUZZTIME (default 10m) each
	./hack/fuzz.sh $(FUZZTIME)

lint: ## gofmt, go vet, golangci-lint (.golangci.yml; the pinned GOLANGCI_LINT_VERSION, installed into bin/ on first use)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faultpoint ./internal/faultpoint ./suspend ./resume ./migrate ./runtime/containerd
	@./hack/golangci-lint.sh $(GOLANGCI_LINT_VERSION)
	bin/golangci-lint run ./...
	bin/golangci-lint run --build-tags faultpoint ./internal/faultpoint/...
	bin/golangci-lint run --build-tags libzstd ./runtime/containerd/...

clean: ## remove build output (keeps the tools in bin/ and their cache)
	rm -f bin/sandbox-resume

demo: ## the life of a run, as root: suspend, resume, work, suspend, resume, inspect, runs, a superseded refusal (examples/demo.sh)
	@./examples/demo.sh

docs: ## regenerate schemas/*.schema.json and docs/ from the code (tests fail when they are stale)
	$(GO) test -count=1 ./schemas -run '^TestSchemasGolden$$' -update
	$(GO) test -count=1 ./cmd/sandbox-resume -run '^TestDocs$$' -update
