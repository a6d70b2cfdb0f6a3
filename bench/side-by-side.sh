#!/bin/bash
# Side-by-side A/B of two edge binaries: both on CPU 0 at the same time, each fed RATE/2 by its
# own `loadgen compare` (one-process, no Slack) on CPU 1, so both live through the same minute
# of this VM. Back-to-back runs of one binary differ by up to ±15 % here from minute to minute;
# side by side, the same binary twice gives B/A within ±1 % (bench/path.md, third session).
# Which edge starts first alternates run to run.
#
#   bench/side-by-side.sh RATE BIN_A BIN_B [RUNS] [STEP]
#   e.g. bench/side-by-side.sh 10000 /tmp/old/edge bin/edge 4
#
# Each binary must be named `edge` (loadgen finds it by name); copy them into two directories.
# Build both with `make build` (or the Makefile's GOFLAGS): a plain `go build` keeps the
# translated SQLite's bounds checks, ~5 % of the edge (README "Building").
# A side's worker (two-process setups) is the `worker` beside its edge, or bin/worker.
# A_ARGS and B_ARGS (environment) are extra edge arguments of each side, e.g. to A/B a flag
# with one binary: A_ARGS="-wal-max-pages 4096" B_ARGS="-wal-max-pages 16384". A_ENV and
# B_ENV are extra environment of each side's edge, e.g. B_ENV="GOGC=100". SETUP is the
# compare setup (one-process by default; two-process+slack runs a worker and a Slack mock a
# side, on CPU 1 with the generators: the edge's figure is still its own). A_SETUP and B_SETUP
# give each side its own setup: B_SETUP=peer+group runs the Bun peer of ../shared/peers (or
# PEER_DIR) as side B, so that B/A is the peer against the edge in the same minutes (its
# binary argument is then unused).
set -e
cd "$(dirname "$0")/.."
RATE=$1; A=$2; B=$3; RUNS=${4:-4}; STEP=${5:-30s}
[ -n "$RATE" ] && [ -x "$A" ] && [ -x "$B" ] || { sed -n 2,12p "$0"; exit 2; }
half=$((RATE / 2)); out=${TMPDIR:-/tmp}/side-by-side
mkdir -p "$out"
SETUP=${SETUP:-one-process}
A_SETUP=${A_SETUP:-$SETUP}; B_SETUP=${B_SETUP:-$SETUP}
PEER_DIR=${PEER_DIR:-../shared/peers/bun-sqlite}
row() { awk -F'|' -v s="$3" -v f="$2" '{n=$2; gsub(/ /, "", n); t=$3; gsub(/ /, "", t)} n == s && t ~ /^[0-9]+$/ {v=$f; gsub(/ /, "", v); print v}' "$1"; }
for r in $(seq 1 "$RUNS"); do
  order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
  pids=""
  for v in $order; do
    bin=$A; args=$A_ARGS; envs=$A_ENV; setup=$A_SETUP
    [ "$v" = B ] && bin=$B && args=$B_ARGS && envs=$B_ENV && setup=$B_SETUP
    peer=""; case $setup in peer*) peer=$PEER_DIR ;; esac
    wport=9111; [ "$v" = B ] && wport=9112 # each side's worker its own /metrics
    wbin=$(dirname "$bin")/worker; [ -x "$wbin" ] || wbin=bin/worker
    env $envs bin/loadgen compare -edge-bin "$bin" -worker-bin "$wbin" -setups "$setup" -stairs "$half" -step "$STEP" -warmup 3s -drain 10s \
      -worker-args "-nats-url {nats} -metrics-addr 127.0.0.1:$wport" \
      -edge-args "$args" -peer-dir "$peer" -dir "$out/$v" -md "$out/$v-$r.md" -out "$out/$v-$r.json" -svg "$out/$v-$r.svg" > "$out/$v-$r.log" 2>&1 &
    pids="$pids $!"
  done
  wait $pids
  a=$(row "$out/A-$r.md" 9 "$A_SETUP"); b=$(row "$out/B-$r.md" 9 "$B_SETUP")
  echo "run $r: A $a µs/msg, p99 $(row "$out/A-$r.md" 6 "$A_SETUP") ms | B $b µs/msg, p99 $(row "$out/B-$r.md" 6 "$B_SETUP") ms | B/A $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b/a}')"
  case $A_SETUP$B_SETUP in *two-process*) # the workers' CPU a post (column 12)
    echo "       worker µs/post: A $(row "$out/A-$r.md" 12 "$A_SETUP") | B $(row "$out/B-$r.md" 12 "$B_SETUP")" ;;
  esac
done
