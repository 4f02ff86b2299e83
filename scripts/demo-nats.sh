#!/usr/bin/env bash
# "Outgrowing one machine", end to end on loopback: a 3-node NATS JetStream cluster
# (scripts/nats-cluster.sh), N messages sent to the R3 stream of queue jobs, three wqhost hosts
# draining it together (examples/nats-cluster.yaml), the node leading the stream SIGKILLed
# mid-drain and restarted on its store. It prints a summary line:
#
#   demo nats: sent=N processed=P (h1+h2+h3) outputs=O distinct=D lost=L duplicated=U left=0 dead=0
#
#   bash scripts/demo-nats.sh              # N=20000; WQHOST_DEMO_DIR (/tmp/wqhost-demo-nats) holds binaries, stores, logs
#   N=5000 bash scripts/demo-nats.sh
#
# Needs go, curl and free loopback ports 4222-4224, 6222-6224, 8222-8224 (nats) and 9181-9183
# (the hosts' admin APIs). Exit code 0 when nothing was lost and the queue drained.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
DIR=${WQHOST_DEMO_DIR:-/tmp/wqhost-demo-nats}
CFG=examples/nats-cluster.yaml
export WQHOST_NATS_DIR=$DIR/nats
WQ=$DIR/wqhost
mkdir -p "$DIR"
rm -rf "$WQHOST_NATS_DIR"/n[123] "$DIR"/h[123]

say() { printf '%s  %s\n' "$(date +%T)" "$*"; }

say "building wqhost into $WQ"
go build -o "$WQ" ./cmd/wqhost

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	bash scripts/nats-cluster.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

bash scripts/nats-cluster.sh start
for n in 1 2 3; do # each node reports healthy once JetStream has a leader
	for t in $(seq 300); do
		curl -sf "http://127.0.0.1:$((8221 + n))/healthz" >/dev/null && break
		if [ "$t" = 300 ] || ! kill -0 "$(cat "$WQHOST_NATS_DIR/n$n.pid")" 2>/dev/null; then
			say "node n$n is not healthy (a port in use?); its log: $WQHOST_NATS_DIR/n$n.log"
			tail -3 "$WQHOST_NATS_DIR/n$n.log"
			exit 1
		fi
		sleep 0.1
	done
done

say "sending $N messages to jobs"
"$WQ" send --config "$CFG" --queue jobs --count "$N" 'job-{n}'

for i in 1 2 3; do
	"$WQ" run --config "$CFG" --data-dir "$DIR/h$i" --admin "127.0.0.1:918$i" >"$DIR/h$i.log" 2>&1 &
	pids+=($!)
done
say "three hosts started (admin 127.0.0.1:9181..9183, logs $DIR/h1.log..h3.log)"

# processed HOST: the echo binding's processed count on host 918HOST (its only binding; 0
# while it starts).
processed() {
	curl -sf "http://127.0.0.1:918$1/v1/status" 2>/dev/null | tr -d ' \n' |
		grep -o '"processed":[0-9]*' | head -1 | grep -o '[0-9]*$' || echo 0
}
total() { echo $(($(processed 1) + $(processed 2) + $(processed 3))); }
wait_total() { # wait_total MIN LIMIT_SECONDS
	local end=$((SECONDS + $2))
	until [ "$(total)" -ge "$1" ]; do
		if [ $SECONDS -ge $end ]; then
			say "timed out waiting for $1 processed (have $(total)); see $DIR/h*.log"
			exit 1
		fi
		sleep 0.2
	done
}

wait_total $((N / 3)) 300
leader=$(bash scripts/nats-cluster.sh leader WQ_jobs)
say "$(total) processed: SIGKILL node $leader, the leader of stream WQ_jobs"
bash scripts/nats-cluster.sh kill "${leader#n}"
wait_total $((2 * N / 3)) 300
say "$(total) processed without it: restart node $leader on its store"
bash scripts/nats-cluster.sh restart "${leader#n}"
wait_total "$N" 300
sleep 2 # the last deletes land
p1=$(processed 1) p2=$(processed 2) p3=$(processed 3)
for p in "${pids[@]}"; do kill -TERM "$p"; done
wait "${pids[@]}" 2>/dev/null || true
pids=()

outs=$("$WQ" peek --config "$CFG" --queue done --limit 0 --json)
outputs=$(printf '%s\n' "$outs" | grep -c '"body"' || true)
distinct=$(printf '%s\n' "$outs" | grep -o '"body":"[^"]*"' | sort -u | wc -l)
left=$("$WQ" peek --config "$CFG" --queue jobs --limit 0 --json | grep -c '"body"' || true)
dead=$("$WQ" peek --config "$CFG" --queue jobs-poison --limit 0 --json | grep -c '"body"' || true)
lost=$((N - distinct))
echo "demo nats: sent=$N processed=$((p1 + p2 + p3)) ($p1+$p2+$p3) outputs=$outputs distinct=$distinct lost=$lost duplicated=$((outputs - distinct)) left=$left dead=$dead"
[ "$lost" -eq 0 ] && [ "$left" -eq 0 ]
