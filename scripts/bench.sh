#!/usr/bin/env bash
# bench.sh - slidelog against its Go peers (the bench/ module).
#
#   scripts/bench.sh           measure: Redis standalone + Cluster + in memory, go test benchmarks;
#                              results in bench/results/, tables on stdout (make bench)
#   scripts/bench.sh report    measure, then write docs/benchmarks.md, docs/img/*.png and the
#                              bucketed-sizing section of docs/scaling.md (make bench-report)
#   scripts/bench.sh render    rewrite docs/benchmarks.md and the charts without measuring: from
#                              bench/results/ when a run left it, else from bench/recorded/ (tracked)
#
# Redis: SLIDELOG_REDIS_ADDR and SLIDELOG_CLUSTER_ADDRS when set; otherwise the
# rig of scripts/redis-rig.sh (standalone :6399, Cluster :7100-7105), started
# here if it is not up and then stopped again. Keys are prefixed
# "slidebench:<run id>:" and deleted after each cell; nothing is flushed.
#
# Environment:
#   SLIDEBENCH_DURATION   measured time per Redis cell (default 3s)
#   SLIDEBENCH_ARGS       more flags for `slidebench run` (e.g. "-callers 1,64 -only cluster")
#   SLIDEBENCH_BENCHTIME  -benchtime of the go test benchmarks (default 500ms)
#   SLIDEBENCH_BENCHCOUNT -count of the go test benchmarks (default 3; the report takes the median)
#   SLIDEBENCH_CORE       "committed" to measure core as committed at HEAD instead of the
#                         working tree (useful while core/ is being edited)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$ROOT/bench"
RESULTS="$BENCH/results"
MODE="${1:-run}"
DURATION="${SLIDEBENCH_DURATION:-3s}"
BENCHTIME="${SLIDEBENCH_BENCHTIME:-500ms}"
BENCHCOUNT="${SLIDEBENCH_BENCHCOUNT:-3}"

log() { echo "bench: $*" >&2; }
die() { echo "bench: ERROR: $*" >&2; exit 1; }

case "$MODE" in
  run|report|render) ;;
  *) die "usage: scripts/bench.sh [report|render]" ;;
esac

mkdir -p "$RESULTS"
cd "$BENCH"

# Build against the working tree (go.work) or against HEAD's core.
GOFLAGS_EXTRA=()
if [[ "${SLIDEBENCH_CORE:-}" == committed ]]; then
  snap="$(mktemp -d)"
  trap 'rm -rf "$snap"' EXIT
  git -C "$ROOT" archive HEAD core | tar -x -C "$snap"
  sed "s#=> ../core#=> $snap/core#" go.mod > "$snap/go.mod"
  cp go.sum "$snap/go.sum"
  export GOWORK=off
  GOFLAGS_EXTRA=(-modfile="$snap/go.mod")
  log "measuring core at $(git -C "$ROOT" log -1 --format='%h %s' -- core)"
fi

go build "${GOFLAGS_EXTRA[@]}" -o "$RESULTS/slidebench" ./cmd/slidebench

render() {
  "$RESULTS/slidebench" report -in "$RESULTS/latest.json" -gotest "$RESULTS/gotest.txt" \
    -out "$ROOT/docs/benchmarks.md" -img "$ROOT/docs/img" -scaling-doc "$ROOT/docs/scaling.md"
}

if [[ "$MODE" == render ]]; then
  if [[ ! -f "$RESULTS/latest.json" && -f "$BENCH/recorded/benchmarks.json" ]]; then
    go run ./cmd/slidebench report -in recorded/benchmarks.json -gotest recorded/gotest.txt \
      -out "$ROOT/docs/benchmarks.md" -img "$ROOT/docs/img" -scaling-doc "$ROOT/docs/scaling.md" -record ""
    exit 0
  fi
  [[ -f "$RESULTS/latest.json" ]] || die "no $RESULTS/latest.json and no bench/recorded/benchmarks.json: run scripts/bench.sh first"
  render
  exit 0
fi

# Redis servers.
started_rig=""
if [[ -z "${SLIDELOG_REDIS_ADDR:-}" || -z "${SLIDELOG_CLUSTER_ADDRS:-}" ]]; then
  if ! "$ROOT/scripts/redis-rig.sh" check; then
    log "Redis rig not up: starting it (scripts/redis-rig.sh up), will stop it afterwards"
    "$ROOT/scripts/redis-rig.sh" up
    started_rig=1
  fi
  eval "$("$ROOT/scripts/redis-rig.sh" env)"
fi
cleanup() {
  if [[ -n "$started_rig" ]]; then "$ROOT/scripts/redis-rig.sh" down || true; fi
  if [[ -n "${snap:-}" ]]; then rm -rf "$snap"; fi
}
trap cleanup EXIT
log "standalone $SLIDELOG_REDIS_ADDR, cluster $SLIDELOG_CLUSTER_ADDRS"

# Redis at normal priority, as users run it: the rig raises the servers'
# priority for the tests, which would hide what Redis costs beside the
# client on one machine.
for addr in $SLIDELOG_REDIS_ADDR ${SLIDELOG_CLUSTER_ADDRS//,/ }; do
  pid="$(redis-cli -h "${addr%:*}" -p "${addr##*:}" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')"
  if [[ -z "$pid" ]] || ! renice -n 0 -p "$pid" >/dev/null 2>&1; then
    log "could not set Redis at $addr to normal priority (pid '${pid}'): measuring as it runs"
  fi
done

args=(-d "$DURATION" -out "$RESULTS/latest.json")
# shellcheck disable=SC2206 # word splitting of extra flags is intended
[[ -n "${SLIDEBENCH_ARGS:-}" ]] && args+=(${SLIDEBENCH_ARGS})
make_target="make bench"
[[ "$MODE" == report ]] && make_target="make bench-report"
export SLIDEBENCH_COMMAND="$make_target (scripts/bench.sh $MODE${SLIDEBENCH_CORE:+, SLIDEBENCH_CORE=$SLIDEBENCH_CORE}): slidebench run ${args[*]/#$RESULTS/bench/results}; go test -run '^\$' -bench . -benchmem -benchtime $BENCHTIME -count $BENCHCOUNT ./contender"

log "harness: slidebench run ${args[*]}"
"$RESULTS/slidebench" run "${args[@]}"

log "go test benchmarks (-benchtime $BENCHTIME)"
go test "${GOFLAGS_EXTRA[@]}" -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" -count "$BENCHCOUNT" ./contender \
  | tee "$RESULTS/gotest.txt"

if [[ "$MODE" == report ]]; then
  render
fi
