#!/usr/bin/env bash
# Smoke check of the wqhost binary (issue 5's "checked by"): build ./cmd/wqhost, start
# `wqhost run` with no config on a temporary data dir, send messages with `wqhost send` from
# another process, and read their processing back from the admin API's /v1/status (through
# `wqhost status`). Needs only Go and bash. Exits non-zero on any failure; always stops the host.
# Usage: bash scripts/smoke.sh [N]     (N messages, default 200)
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-200}
tmp=$(mktemp -d)
host_pid=""
cleanup() {
	if [ -n "$host_pid" ] && kill -0 "$host_pid" 2>/dev/null; then
		kill -TERM "$host_pid" 2>/dev/null || true
		wait "$host_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "smoke: FAIL: $*" >&2
	if [ -f "$tmp/host.log" ]; then
		echo "--- host log" >&2
		tail -n 40 "$tmp/host.log" >&2
	fi
	exit 1
}

echo "==> go build ./cmd/wqhost"
go build -o "$tmp/wqhost" ./cmd/wqhost

# Port 0: the kernel picks a free one; the host logs the address it bound.
echo "==> wqhost run --data-dir $tmp/data --admin 127.0.0.1:0 (no config)"
(cd "$tmp" && exec ./wqhost run --data-dir "$tmp/data" --admin 127.0.0.1:0) >"$tmp/host.log" 2>&1 &
host_pid=$!

admin=""
for _ in $(seq 1 600); do
	kill -0 "$host_pid" 2>/dev/null || fail "wqhost run exited early"
	admin=$(sed -n 's/.*msg="admin API listening" addr=\([^ ]*\).*/\1/p' "$tmp/host.log" | head -n 1)
	if [ -n "$admin" ] && "$tmp/wqhost" status --admin "$admin" 2>/dev/null | grep '^host ready' >/dev/null; then
		break
	fi
	sleep 0.1
done
[ -n "$admin" ] || fail "the host never logged its admin address"
"$tmp/wqhost" status --admin "$admin" | grep '^host ready' >/dev/null || fail "host not ready after 60 s"
echo "==> host ready, admin API on $admin"

echo "==> wqhost send --data-dir $tmp/data --queue transactions --count $n"
"$tmp/wqhost" send --data-dir "$tmp/data" --queue transactions --count "$n" \
	'{"id":"tx-{n}","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5}]}'
echo "==> wqhost send (one malformed transaction, for the poison queue)"
"$tmp/wqhost" send --data-dir "$tmp/data" --queue transactions '{"id":"tx-bad","account":"acme"}'

# Counters of the default billing binding from /v1/status, via `wqhost status`'s table:
# TENANT BINDING QUEUE DEPTH WORKERS IN-FLIGHT PROCESSED FAILED RETRIED POISONED ...
counters() {
	"$tmp/wqhost" status --admin "$admin" | awk '$1 == "default" && $2 == "billing" { print $7, $10 }'
}

processed=0
poisoned=0
for _ in $(seq 1 600); do
	read -r processed poisoned < <(counters) || fail "GET /v1/status"
	if [ "$processed" -ge "$n" ] && [ "$poisoned" -ge 1 ]; then
		break
	fi
	sleep 0.1
done
echo "==> /v1/status: processed=$processed poisoned=$poisoned"
[ "$processed" -eq "$n" ] || fail "processed $processed, want $n"
[ "$poisoned" -eq 1 ] || fail "poisoned $poisoned, want 1"
"$tmp/wqhost" status --admin "$admin"

echo "==> SIGTERM"
kill -TERM "$host_pid"
wait "$host_pid" || fail "wqhost run exited with $? after SIGTERM"
host_pid=""
echo "smoke: ok ($n processed, 1 dead-lettered)"
