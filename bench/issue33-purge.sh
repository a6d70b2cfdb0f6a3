#!/bin/bash
# usage: run.sh purge|keep N   (a fresh copy of the seeded data each run)
set -e
mode=$1; n=$2
B=/work/main/bin; E=${EDGE:-$B/edge}
D=/tmp/pg/data-$mode-$n
rm -rf $D; cp -a /tmp/pg/seeded-$mode $D
taskset -c 0 $E -data $D -addr 127.0.0.1:18080 -metrics-addr 127.0.0.1:19102 -nats-listen 127.0.0.1:14222 -nats-monitor "" -log-level info \
  -retention-every 15s -conn-msg-rate 0 -ip-socket-rate 0 -ip-conv-rate 0 -site-msg-rate 0 -flood-threshold 0 > /tmp/pg/edge-$mode-$n.log 2>&1 &
EP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.1; done
( while kill -0 $EP 2>/dev/null; do curl -s http://127.0.0.1:19102/metrics | grep -E "^spookat_wal_bytes|^spookat_retention_purged_total\{what=\"messages" | tr '\n' ' '; echo; sleep 2; done ) > /tmp/pg/wal-$mode-$n.txt &
cd /tmp/pg && taskset -c 1 $B/loadgen run -edge http://127.0.0.1:18080 -edge-metrics http://127.0.0.1:19102/metrics -edge-pid $EP -data $D -edge-bin $B/edge \
  -sites 200 -sockets 500 -stairs 5000,5000,5000,5000,5000,5000 -step 20s -warmup 2s -drain 5s -out /tmp/pg/r-$mode-$n.json -md /tmp/pg/r-$mode-$n.md > /tmp/pg/lg-$mode-$n.log 2>&1 || true
kill $EP; wait $EP 2>/dev/null || true
grep "retention" /tmp/pg/edge-$mode-$n.log || true
