#!/usr/bin/env bash
# The fast loop (make check): formatting, go vet, staticcheck, the 600-line cap and the unit
# tests in -short mode without the race detector, with no toolchain install. Tests that need
# a tool that is not there (Azurite, TinyGo, chromium, podman) skip and say so; the slow ones
# skip in -short. scripts/test.sh stays the full check (race, fault suite, benchmarks, fuzz,
# the .wasm rebuild, deadcode) and is what CI runs.
# Usage: bash scripts/check.sh   (make check)
set -euo pipefail
cd "$(dirname "$0")/.."

WQHOST_TEST_CACHE_DIR=$(mktemp -d)
export WQHOST_TEST_CACHE_DIR
trap 'rm -rf "$WQHOST_TEST_CACHE_DIR"' EXIT

# step, check, gofmt_check, file_length_check and MAX_GO_LINES, as scripts/test.sh has them.
source scripts/checks.sh

check "gofmt" gofmt_check
check "go vet" go vet ./...
staticcheck=$(go env GOPATH)/bin/staticcheck
if [ -x "$staticcheck" ]; then
	check "staticcheck" "$staticcheck" ./...
else
	step "staticcheck: not installed, skipped (scripts/test.sh installs it)"
fi
check "Go files at most $MAX_GO_LINES lines" file_length_check
# The slowest tests in -short, which scripts/test.sh still runs: wazero's spec suite, the
# fuel rewriter over every committed module, the Extism plugin corpus, `wqhost new` building
# each template, and the conformance suite run again over sharded, real-clock and wrapping
# variants of a backend whose own TestConformance runs here (about a quarter of the time).
SLOW='^(TestSpecSuite|TestInstrumentCommittedModules|TestExtismCorpus|TestNewProjectsBuildAnywhere|TestConformanceSharded|TestConformanceShardedOne|TestConformanceRealClock|TestCountingBackend)$'
check "go test -short (all packages but the fault suite; not the slowest: scripts/check.sh)" \
	go test -short -count=1 -timeout 10m -skip "$SLOW" $(go list ./... | grep -v '/faulttest$')

elapsed=$(($(date +%s) - start))
if [ ${#failed[@]} -gt 0 ]; then
	printf 'make check: FAILED in %dm%02ds:\n' $((elapsed / 60)) $((elapsed % 60)) >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
printf 'make check: ok in %dm%02ds\n' $((elapsed / 60)) $((elapsed % 60))
