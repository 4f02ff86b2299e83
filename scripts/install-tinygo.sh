#!/usr/bin/env bash
# Installs TinyGo for the TinyGo example handlers (scripts/build-wasm.sh) and handler projects
# made by `wqhost new tinygo`. Idempotent and fast when already installed.
#
# TinyGo's release archives are not reachable from every build machine, so it is built from the
# Go module proxy (github.com/tinygo-org/tinygo@v0.41.0, the last release whose dependencies the
# proxy has; it supports Go up to 1.26) against Debian's LLVM 19:
#   - Debian packages: llvm-19-dev libclang-19-dev liblld-19-dev clang-19 lld-19 wasi-libc
#     libclang-rt-19-dev-wasm32 binaryen
#   - go build -tags llvm19 in a copy of the module (the module cache is read-only)
#   - the module zip lacks TinyGo's git submodules, so the two wasm libraries they would build
#     are seeded into TinyGo's cache from Debian's builds (wasi-libc's libc.a and headers,
#     compiler-rt's builtins), and src/net (a submodule too) is an empty directory: packages
#     importing net do not build with this TinyGo.
#
# Installs into $WQHOST_TINYGO_DIR (default /opt/wqhost-tinygo-0.41.0, or
# ~/.cache/wqhost/tinygo-0.41.0 when /opt is not writable), outside any checkout so every clone
# reuses it, and links a `tinygo` wrapper (which sets TINYGOROOT and LLVM's PATH) into
# /usr/local/bin when writable, else ~/.local/bin.
# Usage: bash scripts/install-tinygo.sh          install if needed, print the version
#        bash scripts/install-tinygo.sh --path   print the wrapper's path if installed (exit 1 if not)
set -euo pipefail

TINYGO_VERSION=0.41.0
LLVM=19
pkgs=(llvm-19-dev libclang-19-dev liblld-19-dev clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 binaryen)

if [ -z "${WQHOST_TINYGO_DIR:-}" ]; then
	if [ -w /opt ] || { [ -d "/opt/wqhost-tinygo-$TINYGO_VERSION" ] && [ -w "/opt/wqhost-tinygo-$TINYGO_VERSION" ]; }; then
		WQHOST_TINYGO_DIR=/opt/wqhost-tinygo-$TINYGO_VERSION
	else
		WQHOST_TINYGO_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/wqhost/tinygo-$TINYGO_VERSION
	fi
fi
dir=$WQHOST_TINYGO_DIR
wrapper=$dir/bin/tinygo

built() {
	[ -x "$wrapper" ] && [ -f "$dir/.complete" ] && "$wrapper" version >/dev/null 2>&1
}

# seeded: the libraries are still in TinyGo's cache (a cleared ~/.cache would otherwise leave a
# tinygo that cannot link).
seeded() {
	local cache
	cache=$("$wrapper" env GOCACHE 2>/dev/null) || return 1
	[ -f "$cache/wasi-libc-wasm32-unknown-wasi-generic/lib.a" ] &&
		[ -f "$cache/compiler-rt-wasm32-unknown-wasi-generic/lib.a" ]
}

installed() { built && seeded; }

# seed copies Debian's builds of the libraries TinyGo would build from its submodules into
# TinyGo's cache.
seed() {
	local libc include builtins cache
	libc=$(dpkg -L wasi-libc | grep '/wasm32-wasi/libc\.a$' | head -1)
	include=$(dpkg -L wasi-libc | grep '/include/wasm32-wasi$' | head -1)
	builtins=$(dpkg -L libclang-rt-19-dev-wasm32 | grep '/libclang_rt\.builtins-wasm32\.a$' | head -1)
	for f in "$libc" "$include" "$builtins"; do
		[ -e "$f" ] || { echo "install-tinygo: a file from the Debian packages is missing ($f)" >&2; exit 1; }
	done
	cache=$("$wrapper" env GOCACHE)
	mkdir -p "$cache/wasi-libc-wasm32-unknown-wasi-generic" "$cache/compiler-rt-wasm32-unknown-wasi-generic"
	cp "$libc" "$cache/wasi-libc-wasm32-unknown-wasi-generic/lib.a"
	rm -rf "$cache/wasi-libc-wasm32-unknown-wasi-generic/include"
	cp -r "$include" "$cache/wasi-libc-wasm32-unknown-wasi-generic/include"
	cp "$builtins" "$cache/compiler-rt-wasm32-unknown-wasi-generic/lib.a"
}

if [ "${1:-}" = "--path" ]; then
	installed && { echo "$wrapper"; exit 0; }
	exit 1
fi

link_wrapper() {
	local bindir=/usr/local/bin
	if [ ! -w "$bindir" ]; then bindir=$HOME/.local/bin; mkdir -p "$bindir"; fi
	if [ "$(readlink "$bindir/tinygo" 2>/dev/null)" != "$wrapper" ]; then
		ln -sfn "$wrapper" "$bindir/tinygo"
	fi
	case ":$PATH:" in *":$bindir:"*) ;; *) echo "note: add $bindir to PATH to run tinygo" >&2 ;; esac
}

if installed; then
	link_wrapper
	echo "tinygo: $("$wrapper" version) (already installed in $dir)"
	exit 0
fi
if built && dpkg-query -W -f='${Status}' wasi-libc libclang-rt-19-dev-wasm32 2>/dev/null | grep -q 'install ok installed'; then
	seed
	link_wrapper
	echo "tinygo: $("$wrapper" version) (installed in $dir; libraries seeded again into its cache)"
	exit 0
fi

start=$(date +%s)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	sudo=
	if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update
	$sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

llvmbin=$(llvm-config-$LLVM --bindir)

# A fresh copy of the module source: TINYGOROOT must hold src/net, and the module cache is
# read-only.
moddir=$(GOFLAGS=-mod=mod go mod download -json "github.com/tinygo-org/tinygo@v$TINYGO_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$moddir" ] || { echo "install-tinygo: go mod download gave no directory" >&2; exit 1; }
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
cp -r "$moddir" "$dir.tmp/root"
chmod -R u+w "$dir.tmp/root"
mkdir -p "$dir.tmp/root/src/net" "$dir.tmp/bin"
echo "install-tinygo: building tinygo $TINYGO_VERSION with LLVM $LLVM (1-3 min)"
(cd "$dir.tmp/root" && CGO_ENABLED=1 GOFLAGS=-mod=mod go build -trimpath -tags "llvm$LLVM" -o "$dir.tmp/bin/tinygo.bin" .)

cat >"$dir.tmp/bin/tinygo" <<WRAP
#!/bin/sh
# tinygo $TINYGO_VERSION built by wqhost's scripts/install-tinygo.sh against LLVM $LLVM.
export TINYGOROOT="$dir/root"
PATH="$llvmbin:\$PATH"
export PATH
exec "$dir/bin/tinygo.bin" "\$@"
WRAP
chmod +x "$dir.tmp/bin/tinygo"
rm -rf "$dir"
mv "$dir.tmp" "$dir"

seed

# Smoke test: a wasip1 reactor builds.
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
printf 'package main\n\n//go:wasmexport ping\nfunc ping() int32 { return 1 }\n\nfunc main() {}\n' >"$smoke/main.go"
printf 'module smoke\n\ngo 1.22\n' >"$smoke/go.mod"
(cd "$smoke" && "$wrapper" build -target=wasip1 -buildmode=c-shared -scheduler=none -o "$smoke/s.wasm" .)
touch "$dir/.complete"
link_wrapper
echo "tinygo: $("$wrapper" version) installed in $dir in $(($(date +%s) - start))s"
