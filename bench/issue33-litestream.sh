#!/bin/bash
# usage: run.sh with|without N
set -e
mode=$1; n=$2
B=/work/main/bin
D=/tmp/lsb/data-$mode-$n; R=/tmp/lsb/replica-$mode-$n
rm -rf $D $R; mkdir -p $D
taskset -c 0 $B/edge -data $D -addr 127.0.0.1:18080 -metrics-addr 127.0.0.1:19102 -nats-listen 127.0.0.1:14222 -nats-monitor "" -log-level warn \
  -conn-msg-rate 0 -ip-socket-rate 0 -ip-conv-rate 0 -site-msg-rate 0 -flood-threshold 0 > /tmp/lsb/edge-$mode-$n.log 2>&1 &
EP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.1; done
if [ $mode != without ]; then
cat > /tmp/lsb/ls.yml <<EOC
dbs:
  - path: $D/spookat.db
    replica:
      type: file
      path: $R
      sync-interval: 1s
${LSX}
EOC
taskset -c ${LSCPU:-1} $B/litestream replicate -config /tmp/lsb/ls.yml > /tmp/lsb/ls-$n.log 2>&1 &
LP=$!
sleep 2
fi
cd /tmp/lsb && taskset -c 1 $B/loadgen run -edge http://127.0.0.1:18080 -edge-metrics http://127.0.0.1:19102/metrics -edge-pid $EP -data $D -edge-bin $B/edge \
  -sites 200 -sockets 500 -stairs 2000,5000,10000 -step 8s -warmup 2s -drain 10s -out /tmp/lsb/r-$mode-$n.json -md /tmp/lsb/r-$mode-$n.md > /tmp/lsb/lg-$mode-$n.log 2>&1 || true
curl -s http://127.0.0.1:19102/metrics | grep -E "^spookat_wal" > /tmp/lsb/wal-$mode-$n.txt
[ -n "$LP" ] && kill $LP
kill $EP; wait $EP 2>/dev/null || true
