#!/bin/bash
# A 4-second Go execution trace of the edge 12 s into a one-process stair (bench/path.md,
# fourth session); read it with bench/trace-tail.py.
#   bench/trace-tail.sh RATE EDGE_BIN OUT.trace    (EXTRA="-sync full" adds edge arguments)
cd "$(dirname "$0")/.."
RATE=${1:-10000}; BIN=${2:-bin/edge}; OUT=${3:-/tmp/edge.trace}
( sleep 12; curl -s -o "$OUT" "http://127.0.0.1:6060/debug/pprof/trace?seconds=4" ) &
bin/loadgen compare -edge-bin "$BIN" -setups one-process -stairs "$RATE" -step 25s -warmup 3s -drain 10s \
  -edge-args "-pprof 127.0.0.1:6060 $EXTRA" -svg /tmp/trace-tail.svg -peer-dir "" -dir /tmp/trace-tail \
  -md /tmp/trace-tail.md -out /tmp/trace-tail.json > /tmp/trace-tail.log 2>&1
wait
grep -E '^\| one' /tmp/trace-tail.md
