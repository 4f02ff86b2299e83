#!/usr/bin/env bash
# Rebuilds the hot-reload fixture's two versions, v1.wasm and v2.wasm, from src/lib.rs (same
# toolchain and flags as scripts/build-wasm.sh uses for the Rust example handlers).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../../.. && pwd)
RUSTC_BIN=${RUSTC_BIN:-/usr/bin/rustc}
CARGO_BIN=${CARGO_BIN:-/usr/bin/cargo}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in v1 v2; do
	WQHOST_FIXTURE_VERSION=$v RUSTC=$RUSTC_BIN CARGO_HOME=$tmp/cargo-home CARGO_TARGET_DIR=$tmp/target/$v \
		RUSTFLAGS="--remap-path-prefix=$root=/wqhost --remap-path-prefix=$tmp=/build" \
		"$CARGO_BIN" build --offline --quiet --release --target wasm32-unknown-unknown --manifest-path Cargo.toml
	cp "$tmp/target/$v/wasm32-unknown-unknown/release/versioned.wasm" "$v.wasm"
	echo "built $v.wasm"
done
