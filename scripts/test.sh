#!/usr/bin/env bash
# The project's one test command: installs what the tests need (Debian's Rust for the wasm
# rebuild check, Azurite via npm, staticcheck, podman and runc for the image test), then
# checks formatting, vets, runs staticcheck, checks that the committed .wasm rebuild byte
# for byte, runs every test with the race
# detector, the fault suite (its one-line-per-fault summary at the end), every benchmark once
# (root and bench/ modules) and short fuzz runs.
# Usage: bash scripts/test.sh        (README's test command; .ci/run calls it)
# Environment: FUZZTIME (default 10s) per fuzz target; FUZZTIME=0 skips the fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# staticcheck release that supports the go directive of go.mod (1.26).
STATICCHECK_VERSION=v0.8.2
# golang.org/x/tools release whose cmd/deadcode reports unreachable functions.
DEADCODE_VERSION=v0.39.0
FUZZTIME=${FUZZTIME:-10s}

# One wazero compilation cache for every test package and the fault suite of this run
# (internal/testcache): each module compiles once per run, not once per package. It starts
# empty, so a stale cache cannot hide a problem, and is removed on exit.
WQHOST_TEST_CACHE_DIR=$(mktemp -d)
export WQHOST_TEST_CACHE_DIR
trap 'rm -rf "$WQHOST_TEST_CACHE_DIR"' EXIT

# step, check (checks after the toolchains all run, so one CI log shows every problem;
# failed lists them), gofmt_check, file_length_check and MAX_GO_LINES.
source scripts/checks.sh

step "toolchains"
go version
if [ -f scripts/install-rust.sh ]; then
	bash scripts/install-rust.sh
fi
if [ -f scripts/install-tinygo.sh ]; then
	step "tinygo (scripts/install-tinygo.sh)"
	bash scripts/install-tinygo.sh
fi
if [ -f tools/azurite/package-lock.json ]; then
	if command -v npm >/dev/null 2>&1; then
		step "azurite (npm ci)"
		(cd tools/azurite && npm ci --no-audit --no-fund --loglevel=error)
	elif [ "${CI:-}" = "true" ]; then
		echo "npm is required in CI for the Azurite tests" >&2
		exit 1
	fi
fi
if [ -f scripts/install-podman.sh ]; then
	step "podman (scripts/install-podman.sh)"
	if ! bash scripts/install-podman.sh; then
		# Without podman the image test skips (and says so); CI must run it.
		if [ "${CI:-}" = "true" ]; then
			echo "podman is required in CI for the image test" >&2
			exit 1
		fi
		echo "podman could not be installed: the image test will skip" >&2
	fi
fi
if [ -f scripts/install-chromium.sh ]; then
	step "chromium (scripts/install-chromium.sh)"
	if ! bash scripts/install-chromium.sh; then
		# Without chromium the console's browser test skips (and says so); CI must run it.
		if [ "${CI:-}" = "true" ]; then
			echo "chromium is required in CI for the console's browser test" >&2
			exit 1
		fi
		echo "chromium could not be installed: the console's browser test will skip" >&2
	fi
fi
if [ -f scripts/install-postgres.sh ]; then
	step "postgresql (scripts/install-postgres.sh)"
	if ! bash scripts/install-postgres.sh; then
		# Without PostgreSQL the bench drain skips River on PostgreSQL (and says so); CI must run it.
		if [ "${CI:-}" = "true" ]; then
			echo "postgresql is required in CI for the bench drain's River on PostgreSQL" >&2
			exit 1
		fi
		echo "postgresql could not be installed: the bench drain will skip River on PostgreSQL" >&2
	fi
fi
# The Extism go-sdk's plugins (runtime's TestExtismCorpus reads them from the module cache;
# the bench module requires the go-sdk): downloaded here so the corpus runs, not skips.
step "extism corpus (go mod download in bench/)"
(cd bench && go mod download github.com/extism/go-sdk)
gobin=$(go env GOPATH)/bin
if ! "$gobin/staticcheck" -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
	step "staticcheck $STATICCHECK_VERSION (go install)"
	GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
if ! go version -m "$gobin/deadcode" 2>/dev/null | grep -qE "mod[[:space:]]+golang.org/x/tools[[:space:]]+${DEADCODE_VERSION}[[:space:]]"; then
	step "deadcode $DEADCODE_VERSION (go install)"
	GOFLAGS= go install "golang.org/x/tools/cmd/deadcode@$DEADCODE_VERSION"
fi

check "gofmt" gofmt_check
check "go vet" go vet ./...
# The SDK is its own module (sdk/go/go.mod): checked with the language rules of its go
# directive, natively and for wasip1, by the local toolchain (no download of an older one).
sdk_check() {
	(cd sdk/go && GOTOOLCHAIN=local GOFLAGS= go vet ./... &&
		GOTOOLCHAIN=local GOFLAGS= GOOS=wasip1 GOARCH=wasm go vet ./... &&
		GOTOOLCHAIN=local GOFLAGS= go test -count=1 ./...)
}
check "sdk/go module (go vet, wasip1 vet, test)" sdk_check
check "staticcheck" "$gobin/staticcheck" ./...
check "staticcheck sdk/go" bash -c "cd sdk/go && '$gobin/staticcheck' ./..."
# Functions no program (cmd/wqhost, the examples, the policy plugins) reaches, tests not
# counted as callers: code only a test calls is dead too. Not reported: the packages only
# tests and benchmarks import (diskprobe: the local store's benchmark and the bench module), and
# the guest SDK (sdk/go, a library for handler authors). Library API kept
# on purpose is listed, with why, in scripts/deadcode-allow.txt.
deadcode_check() {
	local all found
	all=$("$gobin/deadcode" ./...) || return 1
	found=$(echo "$all" |
		grep -vE '^(internal/(testcache|wasmtest|clock/clocktest|goroutinetest|diskprobe)|listener/(azure/azuritetest|nats/natstest|queuetest)|sdk/go)/' |
		sed -E 's/:[0-9]+:[0-9]+: /: /' |
		grep -vxF -f <(grep -vE '^[[:space:]]*(#|$)' scripts/deadcode-allow.txt) || true)
	if [ -n "$found" ]; then
		echo "dead code (remove it, move it to test code, or list it in scripts/deadcode-allow.txt with why):" >&2
		echo "$found" >&2
		return 1
	fi
}
check "deadcode (unreachable functions)" deadcode_check
check "Go files at most $MAX_GO_LINES lines" file_length_check
if [ -f scripts/build-wasm.sh ]; then
	check "committed .wasm rebuild from source" bash scripts/build-wasm.sh --check
fi
# No test asserts a wall-clock ratio: TestNoisyNeighbour keeps only its deterministic checks
# and runs with the rest; its throughput ratio is BenchmarkNoisyNeighbour (docs/benchmarks.md).
# The per-package timeout is far above a package's time on a quiet machine (host: about 6
# minutes under the race detector): beside CPU-burning jobs the host package took 20 minutes,
# and a timeout there says nothing about the code.
check "go test -race (all packages but the fault suite)" \
	go test -race -count=1 -timeout 40m $(go list ./... | grep -v '/faulttest$')

# The console's browser test again, verbose, for its summary line and screenshots (they go to
# $WQHOST_ARTIFACTS/console, or wqhost-console-artifacts in the temp directory).
console_e2e() {
	local status=0 log
	log=$(mktemp)
	go test -count=1 -timeout 10m -run '^TestConsoleE2E$' -v ./host/admin/console 2>&1 | tee "$log" >/dev/null || status=$?
	grep -E '^console e2e|^--- (FAIL|SKIP)|_test.go:' "$log" || true
	rm -f "$log"
	return "$status"
}
check "console browser test (headless chromium)" console_e2e

faultlog=$(mktemp)
trap 'rm -f "$faultlog"; rm -rf "$WQHOST_TEST_CACHE_DIR"' EXIT
fault_suite() {
	local status=0
	go test -race -count=1 -timeout 20m -run Fault -v ./faulttest 2>&1 | tee "$faultlog" || status=$?
	echo
	echo "fault summary:"
	grep -E '^fault |^sigterm drain: |^--- (FAIL|SKIP)' "$faultlog" || true
	return "$status"
}
check "fault suite (go test -race -run Fault -v ./faulttest)" fault_suite
# Every Go benchmark runs once, so one that no longer builds or runs turns CI red; its
# figures are not checked (no test asserts a speed). -short makes the benchmarks that build
# big fixtures or wait out long windows use small ones. Root module, then the bench/ module
# (its own go.mod: Extism, River, gonum/plot stay out of wqhost's), whose tests run here too.
bench_smoke() {
	go test -short -count=1 -run '^$' -bench . -benchtime 1x -timeout 15m ./... &&
		(cd bench && GOFLAGS= go vet ./... &&
			GOFLAGS= go test -short -count=1 -bench . -benchtime 1x -timeout 15m ./...)
}
check "benchmarks once (-short -benchtime 1x; root and bench/ modules, bench/ tests)" bench_smoke
# The deploy module (deploy/go.mod: Helm, Kubernetes, KEDA and go-containerregistry stay out
# of wqhost's go.mod): the chart rendered for each mode and checked against the real schemas
# (seconds), and the OCI image built twice and run under podman (about a minute; skipped,
# saying so, without podman). Not under -race: the harness has no concurrency of its own and
# the race build of Helm's dependencies would double the time.
deploy_check() {
	local status=0 log
	log=$(mktemp)
	(cd deploy && GOFLAGS= go vet ./... && "$gobin/staticcheck" ./... &&
		GOFLAGS= go test -count=1 -timeout 15m -v ./... 2>&1 | tee "$log") || status=$?
	echo
	grep -E '^(image|container demo|helm render): |^--- (FAIL|SKIP)' "$log" || true
	rm -f "$log"
	return "$status"
}
check "deploy module (chart render, OCI image under podman)" deploy_check
check "smoke: wqhost run with no config, send from another process, /v1/status" bash scripts/smoke.sh

if [ "$FUZZTIME" != 0 ]; then
	# Each target runs for FUZZTIME on top of its committed seed corpus (testdata/fuzz).
	for target in host/config:FuzzLoad runtime:FuzzHostFunctions runtime:FuzzHTTPHostFunctions listener/azure:FuzzDecode listener/azure:FuzzEnvelopeRoundTrip; do
		pkg=${target%%:*}
		name=${target#*:}
		check "fuzz $name ($pkg, $FUZZTIME)" go test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "./$pkg"
	done
fi

# A failed fault row's own output again, last, where a CI log's tail keeps it: the verbose
# suite's output is long, and a row's log lines are what tell a flake from a finding.
fault_failures() {
	local name
	for name in $(sed -nE 's/^--- FAIL: ([A-Za-z0-9_]+) .*/\1/p' "$faultlog" | sort -u); do
		echo
		echo "==> fault row $name, its output:"
		awk -v n="$name" '$0 == "=== RUN   " n { on = 1 } on { print } on && /^--- FAIL: / { exit }' "$faultlog" | tail -n 150
	done
}
if [ ${#failed[@]} -gt 0 ]; then
	fault_failures
	step "FAILED: ${failed[*]}"
	exit 1
fi
step "all checks passed"
