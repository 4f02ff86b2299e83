#!/usr/bin/env bash
# Installs Debian's Rust toolchain with the wasm32 standard library, which
# scripts/build-wasm.sh uses to build examples/handlers/echo-rust. Idempotent: does nothing
# when /usr/bin/rustc and the wasm32 std are already there.
set -euo pipefail

have_wasm_std() {
	ls /usr/lib/rustlib/wasm32-unknown-unknown/lib/libstd-*.rlib >/dev/null 2>&1
}

if [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] && have_wasm_std; then
	echo "rust: $(/usr/bin/rustc --version) with wasm32 std already installed"
	exit 0
fi

sudo=
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y rustc cargo libstd-rust-dev-wasm32
have_wasm_std || { echo "install-rust: wasm32 std still missing after apt-get install" >&2; exit 1; }
echo "rust: $(/usr/bin/rustc --version) with wasm32 std installed"
