#!/bin/bash
# Goal 4's soak: one process (no Slack) at RATE messages a second for DURATION seconds, the
# edge's WAL, search.db, RSS, CPU a message and the search index's pass time (wall, from
# /metrics) sampled every 30 s (the CPU figure assumes the stair holds RATE: check "acked/s"
# in the report at the end).
#
#   bench/soak.sh [RATE] [DURATION_S] [EDGE_BIN]     e.g. bench/soak.sh 10000 300 bin/edge
set -e
cd "$(dirname "$0")/.."
RATE=${1:-10000}; DUR=${2:-300}; EDGE=${3:-bin/edge}
dir=${TMPDIR:-/tmp}/spookat-soak; rm -rf "$dir"; mkdir -p "$dir"
bin/loadgen compare -edge-bin "$EDGE" -setups one-process -stairs "$RATE" -step "${DUR}s" -warmup 3s -drain 10s \
  -dir "$dir" -out "$dir/report.json" -md "$dir/report.md" -svg "$dir/p99.svg" > "$dir/loadgen.log" 2>&1 &
lg=$!
data=$dir/one-process/data
pid=""
for _ in $(seq 1 100); do
  pid=$(pgrep -n -f -- "-data[= ]$data" || true)
  [ -n "$pid" ] && [ -e "$data/spookat.db-wal" ] && break
  sleep 0.2
done
[ -n "$pid" ] || { echo "no edge for $data"; cat "$dir/loadgen.log"; exit 1; }
ticks=$(getconf CLK_TCK)
maddr=""
for _ in $(seq 1 100); do # the store opens (and makes the WAL) before the edge logs its addresses
  maddr=$(grep -o 'metrics=[0-9.:]*' "$dir/one-process/edge.log" 2>/dev/null | head -1 | cut -d= -f2)
  [ -n "$maddr" ] && break
  sleep 0.2
done
# Other edges run on the same data (the seeding, admin commands): the serving one is the one
# given a listen address.
pid=$(pgrep -n -f -- "edge -addr .*-data[= ]$data" || true)
[ -n "$pid" ] && [ -n "$maddr" ] || { echo "no serving edge for $data"; cat "$dir/loadgen.log"; exit 1; }
idx() { curl -s "http://$maddr/metrics" | awk '/^spookat_search_index_seconds_total/ {print $2}'; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
mb() { [ -e "$1" ] && awk -v b="$(stat -c %s "$1")" 'BEGIN {printf "%.1f", b / 1e6}' || echo -; }
sleep 5 # the stair's start: sockets open, warmup
prev=$(cpu); iprev=$(idx)
printf '%6s %9s %10s %10s %8s %10s %10s\n' t wal_MB search_MB searchwal rss_MB cpu_us/msg index_ms/s
for t in $(seq 30 30 "$DUR"); do
  sleep 30
  kill -0 "$pid" 2>/dev/null || break
  now=$(cpu)
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
  us=$(awk -v d=$((now - prev)) -v hz="$ticks" -v r="$RATE" 'BEGIN {printf "%.1f", d / hz * 1e6 / (30 * r)}')
  inow=$(idx)
  ims=$(awk -v a="$iprev" -v b="$inow" 'BEGIN {printf "%.1f", (b - a) * 1000 / 30}')
  printf '%6s %9s %10s %10s %8s %10s %10s\n' "$t" "$(mb "$data/spookat.db-wal")" "$(mb "$data/search.db")" "$(mb "$data/search.db-wal")" "$rss" "$us" "$ims"
  prev=$now; iprev=$inow
done
wait $lg
grep -E '^\| one-process' "$dir/report.md"
