#!/usr/bin/env bash
# Starts a local 3-node NATS JetStream cluster on loopback for trying the nats backend (README:
# "Outgrowing one machine"): nats-server is built from the Go module proxy at the version
# go.mod pins (or taken from PATH, e.g. Debian's nats-server package, with NATS_SERVER=...).
#
#   bash scripts/nats-cluster.sh start         # nodes n1..n3 on 4222..4224, stores in $WQHOST_NATS_DIR (/tmp/wqhost-nats)
#   bash scripts/nats-cluster.sh kill N        # SIGKILL node N (1..3)
#   bash scripts/nats-cluster.sh restart N     # start node N again on its store
#   bash scripts/nats-cluster.sh leader STREAM # print the node leading STREAM (n1..n3)
#   bash scripts/nats-cluster.sh stop          # stop every node
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${WQHOST_NATS_DIR:-/tmp/wqhost-nats}
BIN=${NATS_SERVER:-$DIR/nats-server}
ROUTES=nats-route://127.0.0.1:6222,nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224

node() { # node N: start node N in the background
	local n=$1
	mkdir -p "$DIR/n$n"
	"$BIN" -n "n$n" -a 127.0.0.1 -p $((4221 + n)) -m $((8221 + n)) -js -sd "$DIR/n$n" \
		--cluster_name wqhost --cluster "nats://127.0.0.1:$((6221 + n))" --routes "$ROUTES" \
		-l "$DIR/n$n.log" </dev/null >/dev/null 2>&1 &
	echo $! >"$DIR/n$n.pid"
	echo "node n$n: nats://127.0.0.1:$((4221 + n)) (pid $(cat "$DIR/n$n.pid"), log $DIR/n$n.log)"
}

case "${1:-}" in
start)
	mkdir -p "$DIR"
	if [ -z "${NATS_SERVER:-}" ] && [ ! -x "$BIN" ]; then
		echo "building nats-server $(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2) into $BIN"
		go build -o "$BIN" github.com/nats-io/nats-server/v2
	fi
	for n in 1 2 3; do node "$n"; done
	echo "urls: [nats://127.0.0.1:4222, nats://127.0.0.1:4223, nats://127.0.0.1:4224]"
	;;
kill) kill -9 "$(cat "$DIR/n$2.pid")" && echo "node n$2 killed" ;;
restart) node "$2" ;;
leader) # the monitoring endpoints (8222..8224) name each stream's leader
	for n in 1 2 3; do
		l=$(curl -s "http://127.0.0.1:$((8221 + n))/jsz?streams=true" 2>/dev/null | tr -d ' \n' |
			grep -o "\"name\":\"$2\"[^}]*\"leader\":\"n[0-9]*\"" | grep -o 'n[0-9]*"$' | tr -d '"') || true
		if [ -n "$l" ]; then
			echo "$l"
			exit 0
		fi
	done
	echo "no node names a leader for stream $2" >&2
	exit 1
	;;
stop)
	for n in 1 2 3; do
		[ -f "$DIR/n$n.pid" ] && kill "$(cat "$DIR/n$n.pid")" 2>/dev/null || true
		rm -f "$DIR/n$n.pid"
	done
	;;
*)
	sed -n '2,11p' "$0" >&2
	exit 2
	;;
esac
