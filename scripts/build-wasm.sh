#!/usr/bin/env bash
# Rebuilds every example handler's committed .wasm deterministically.
#   scripts/build-wasm.sh           rebuild into examples/handlers/<name>/<name>.wasm
#   scripts/build-wasm.sh --check   rebuild into a temp dir and compare bytes with the
#                                   committed files; exits 1 naming every file that differs
# Output depends on the Go and rustc versions (the committed files were built with the ones
# the script prints), not on the checkout path, user, time or VCS state.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

check=0
case "${1:-}" in
--check) check=1 ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# Debian's toolchain by full path: a rustup toolchain earlier on PATH may lack wasm32 targets.
RUSTC_BIN=${RUSTC_BIN:-/usr/bin/rustc}
CARGO_BIN=${CARGO_BIN:-/usr/bin/cargo}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$check" = 1 ]; then out=$tmp/out; else out=$root/examples/handlers; fi

echo "go: $(go version)"
echo "rustc: $("$RUSTC_BIN" --version)"
TINYGO_BIN=${TINYGO_BIN:-$(bash scripts/install-tinygo.sh --path 2>/dev/null || command -v tinygo || true)}
if [ -z "$TINYGO_BIN" ]; then
	echo "tinygo not found: run scripts/install-tinygo.sh (the *-tinygo handlers are built with it)" >&2
	exit 1
fi
echo "tinygo: $("$TINYGO_BIN" version)"

go_reactor=(echo-go billing-go noop-go count-vowels-go count-vowels-perchar-go webhook-delivery-go bulk-sink-go)
go_command=(upper-stdio)
rust_reactor=(echo-rust count-vowels-rust webhook-delivery-rust bulk-sink-rust)
# The Go reactors again, built by TinyGo into <name>-tinygo (same source, no copy).
tinygo_reactor=(echo-go billing-go noop-go count-vowels-go count-vowels-perchar-go webhook-delivery-go bulk-sink-go)

dest() { # dest NAME -> path of the built file
	mkdir -p "$out/$1"
	echo "$out/$1/$1.wasm"
}

gobuild() { # gobuild NAME [extra go build flags...]
	local name=$1
	shift
	# go build skips writing when the existing file's build ID matches, even if the bytes were
	# altered after it: remove it so the file is always the build's output.
	rm -f "$(dest "$name")"
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOFLAGS= go build -trimpath -buildvcs=false \
		"$@" -o "$(dest "$name")" "./examples/handlers/$name"
	echo "built $name"
}

for n in "${go_reactor[@]}"; do gobuild "$n" -buildmode=c-shared; done
for n in "${go_command[@]}"; do gobuild "$n"; done

# TinyGo flags, measured with runtime's BenchmarkDispatch (docs/benchmarks.md):
#   -scheduler=none  the default scheduler (asyncify) makes every call ~1000x slower (0.7 ms
#                    instead of 0.3 µs for echo); handlers start no goroutines.
#   -no-debug        drops DWARF: echo 257 KB -> 36 KB, so compiling and instantiating is faster;
#                    a trap still names the function (the name section stays).
# Panics keep the default (-panic=print) so the message reaches the host's log and reason.
# -opt stays at its default (z): -opt=2 measured no faster within noise and 15% larger.
tinygo_flags=(-target=wasip1 -buildmode=c-shared -scheduler=none -no-debug)
for n in "${tinygo_reactor[@]}"; do
	t=${n%-go}-tinygo
	rm -f "$(dest "$t")"
	# LLVM 19 does not know two wasm features TinyGo 0.41's target names; it says so on every
	# build and ignores them, so that line is filtered out.
	if ! log=$(cd "examples/handlers/$n" && "$TINYGO_BIN" build "${tinygo_flags[@]}" -o "$(dest "$t")" . 2>&1); then
		echo "$log" >&2
		echo "tinygo build of $n failed" >&2
		exit 1
	fi
	grep -v "is not a recognized feature for this target" <<<"$log" || true
	echo "built $t"
done
# Extism plugins written against the Extism ABI (extism:host/env), built by TinyGo from their
# own directory with the same flags.
tinygo_extism=(extism-vowels-tinygo)
for n in "${tinygo_extism[@]}"; do
	rm -f "$(dest "$n")"
	if ! log=$(cd "examples/handlers/$n" && "$TINYGO_BIN" build "${tinygo_flags[@]}" -o "$(dest "$n")" . 2>&1); then
		echo "$log" >&2
		echo "tinygo build of $n failed" >&2
		exit 1
	fi
	grep -v "is not a recognized feature for this target" <<<"$log" || true
	echo "built $n"
done

# Cargo hashes RUSTFLAGS and the crates' paths into symbol names, and those hashes can change
# the module's layout: a build in another checkout directory gave different bytes. So the Rust
# handlers are built from copies at one fixed path, with flags that never mention the checkout.
# The lock keeps two builds on one machine from sharing the staging directory.
stage=/tmp/wqhost-build-wasm-rust
exec 9>"$stage.lock"
flock 9
rm -rf "$stage"
mkdir -p "$stage/sdk" "$stage/examples/handlers"
cp -r sdk/rust "$stage/sdk/rust"
rm -rf "$stage/sdk/rust/target"
for n in "${rust_reactor[@]}"; do
	cp -r "examples/handlers/$n" "$stage/examples/handlers/$n"
	rm -rf "$stage/examples/handlers/$n/target"
	# wasm32-unknown-unknown: rustc 1.63's wasm32-wasi cdylib exports no _initialize and pulls
	# WASI imports the handler never uses; the bare target gives a 16 KB module importing
	# only wqhost functions.
	RUSTC=$RUSTC_BIN CARGO_HOME=$stage/cargo-home CARGO_TARGET_DIR=$stage/target/$n \
		RUSTFLAGS="--remap-path-prefix=$stage=/wqhost" \
		"$CARGO_BIN" build --offline --quiet --release --target wasm32-unknown-unknown \
		--manifest-path "$stage/examples/handlers/$n/Cargo.toml"
	crate=${n//-/_}
	cp "$stage/target/$n/wasm32-unknown-unknown/release/$crate.wasm" "$(dest "$n")"
	echo "built $n"
done
rm -rf "$stage"

if [ "$check" = 1 ]; then
	status=0
	for f in "$out"/*/*.wasm; do
		rel=examples/handlers/${f#"$out"/}
		if ! cmp -s "$f" "$rel"; then
			echo "differs from a fresh build: $rel" >&2
			status=1
		fi
	done
	[ "$status" = 0 ] && echo "all committed .wasm files match a fresh build"
	exit "$status"
fi
