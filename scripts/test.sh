#!/usr/bin/env bash
# The project's one test command: installs what the tests need (Debian's Rust for the wasm
# rebuild check, Azurite via npm), then vets and runs every test with the race detector.
# Usage: bash scripts/test.sh        (README's test command; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchains"
go version
if [ -x scripts/install-rust.sh ] || [ -f scripts/install-rust.sh ]; then
	bash scripts/install-rust.sh
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

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:" >&2
	echo "$unformatted" >&2
	exit 1
fi

step "go vet"
go vet ./...

if [ -f scripts/build-wasm.sh ]; then
	step "committed .wasm rebuild from source"
	bash scripts/build-wasm.sh --check
fi

step "go test -race"
go test -race -count=1 -timeout 20m ./...
