#!/usr/bin/env bash
# scaling.sh - decisions/s against the number of Redis Cluster masters
# (make bench-scaling). `slidebench scaling` starts, on loopback, Clusters
# of 1, 2, 3 and 6 masters (ports 7800.., 7810.., 7820.., 7830.. and +10000
# for the cluster bus; SLIDEBENCH_SCALING_BASE moves them), runs slidelog
# and redis_rate on each, measures full keys' memory, stops the servers
# (also on failure or ^C) and writes its tables into docs/scaling.md
# between the scaling-run, scaling-memory and scaling-sizing markers.
#
#   scripts/scaling.sh           measure, write bench/results/scaling.json and docs/scaling.md
#   scripts/scaling.sh render    rewrite docs/scaling.md from bench/results/scaling.json only
#
# Environment:
#   SLIDEBENCH_SCALING_DURATION  measured time per contender per cluster (default 8s)
#   SLIDEBENCH_SCALING_BASE      first port (default 7800)
#   SLIDEBENCH_SCALING_ARGS      more flags for `slidebench scaling` (e.g. "-masters 1,2")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$ROOT/bench"
RESULTS="$BENCH/results"
MODE="${1:-run}"
case "$MODE" in
  run|render) ;;
  *) echo "usage: scripts/scaling.sh [render]" >&2; exit 2 ;;
esac

"$ROOT/scripts/redis-rig.sh" install
mkdir -p "$RESULTS"
cd "$BENCH"
go build -o "$RESULTS/slidebench" ./cmd/slidebench

if [[ "$MODE" == render ]]; then
  exec "$RESULTS/slidebench" scaling -in "$RESULTS/scaling.json" -doc "$ROOT/docs/scaling.md"
fi

args=(-d "${SLIDEBENCH_SCALING_DURATION:-8s}" -base "${SLIDEBENCH_SCALING_BASE:-7800}" -out "$RESULTS/scaling.json")
# shellcheck disable=SC2206 # word splitting of extra flags is intended
[[ -n "${SLIDEBENCH_SCALING_ARGS:-}" ]] && args+=(${SLIDEBENCH_SCALING_ARGS})
export SLIDEBENCH_COMMAND="make bench-scaling (scripts/scaling.sh): slidebench scaling ${args[*]/#$RESULTS/bench/results}"
"$RESULTS/slidebench" scaling "${args[@]}" -doc "$ROOT/docs/scaling.md"
