#!/usr/bin/env bash
# test-servers.sh - run the store's suites on the other servers the README
# names, each built from source (scripts/servers.sh): Redis 6.2.14 and
# Valkey 8.0.1. `make test` stays on the distribution's Redis.
#
# For each server: build it (once; later runs reuse the build), start a rig
# of it (scripts/redis-rig.sh with SLIDELOG_REDIS_SERVER, in a state dir of
# its own, so a rig of `make cluster-up` is left alone), put its bin dir
# first on PATH (the tests that start a redis-server of their own start
# it), and run with -race, SLIDELOG_REQUIRE_REDIS=1:
#
#   core/redisstore                     go test -parallel 4 ./redisstore/ (as scripts/test.sh)
#   core                                go test . (without the load-making tests)
#   core, the load-making tests alone   go test -run "$ISOLATED" . (as scripts/test.sh)
#
# The servers are built without TLS (scripts/servers.sh), so the test of
# dials over TLS (TestTLSDialToAStoppedNode) starts the distribution's
# redis-server instead, named by SLIDELOG_TLS_REDIS_SERVER.
#
# then stop the rig, and print a summary per step: its time and its
# top-level tests passed, failed and skipped (the whole -v output is kept
# in .redis-servers/logs/). Exits non-zero if
# anything failed, or if a server could not be built or started: a
# missing server fails, it is never skipped.
#
# Environment:
#   SLIDELOG_SERVERS            servers to run (default: redis-6.2.14 valkey-8.0.1)
#   SLIDELOG_STANDALONE_PORT    rig ports (default 6499 and 7400-7405,
#   SLIDELOG_CLUSTER_BASE_PORT  beside make test's 6399 and 7100-7105)
#   SLIDELOG_TEST_TIMEOUT       per test binary (default 10m)
#   and scripts/servers.sh's SLIDELOG_SERVERS_GIT, SLIDELOG_SERVERS_DIR.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SERVERS="${SLIDELOG_SERVERS:-redis-6.2.14 valkey-8.0.1}"
TEST_TIMEOUT="${SLIDELOG_TEST_TIMEOUT:-10m}"
export SLIDELOG_STANDALONE_PORT="${SLIDELOG_STANDALONE_PORT:-6499}"
export SLIDELOG_CLUSTER_BASE_PORT="${SLIDELOG_CLUSTER_BASE_PORT:-7400}"
export SLIDELOG_REQUIRE_REDIS=1
# The distribution's redis-server, built with TLS, before the loop puts a
# built server first on PATH.
if tls_server="$(command -v redis-server)"; then
  export SLIDELOG_TLS_REDIS_SERVER="$tls_server"
else
  echo "test-servers.sh: no redis-server on PATH for the TLS test (apt-get install redis-server)" >&2
  exit 1
fi
# As scripts/test.sh: the tests that make their own load run on their own.
ISOLATED='^(TestExactWhenBusy|TestStoppedNodeBoundWithCPUHog|TestClusterExactUnderLoadWithDefaults|TestClusterExactnessUnderConcurrency|TestClusterExactnessAcrossProcesses|TestNewInBusyProcess)$'
start=$SECONDS

rig_dir=""
cleanup() {
  local rc=$?
  if [[ -n "$rig_dir" ]]; then
    SLIDELOG_RIG_DIR="$rig_dir" "$ROOT/scripts/redis-rig.sh" down || echo "test-servers.sh: WARNING: rig down failed" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "test-servers.sh: interrupted" >&2; exit 130' INT
trap 'echo "test-servers.sh: terminated" >&2; exit 143' TERM HUP

passed=()
failed=()
logs="$ROOT/.redis-servers/logs"
mkdir -p "$logs"
# step NAME LOG CMD... : run CMD (a go test -v) in core, its output in
# LOG, and record NAME with its time and its top-level tests' outcomes.
step() {
  local name="$1" log="$logs/$2" t0=$SECONDS ok=1 counts
  shift 2
  echo
  echo "=== $name: $* (log: $log)"
  (cd "$ROOT/core" && "$@") >"$log" 2>&1 || ok=0
  grep -E '^(--- FAIL|FAIL|ok|panic:)' "$log" || true
  counts="$(grep -c '^--- PASS' "$log") passed, $(grep -c '^--- FAIL' "$log") failed, $(grep -c '^--- SKIP' "$log") skipped"
  if ((ok)); then
    passed+=("$name: $counts, $((SECONDS - t0))s")
  else
    failed+=("$name: $counts, $((SECONDS - t0))s")
  fi
}

for server in $SERVERS; do
  echo
  echo "=== $server: scripts/servers.sh build $server"
  if ! bin="$("$ROOT/scripts/servers.sh" build "$server")"; then
    failed+=("$server (build)")
    continue
  fi
  rig_dir="$ROOT/.redis-servers/$server"
  export SLIDELOG_RIG_DIR="$rig_dir" SLIDELOG_REDIS_SERVER="$bin/redis-server"
  if ! "$ROOT/scripts/redis-rig.sh" up; then
    failed+=("$server (rig)")
    rig_dir=""
    continue
  fi
  eval "$("$ROOT/scripts/redis-rig.sh" env)"
  version="$("$bin/redis-server" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
  PATH="$bin:$PATH" step "$server v=$version core/redisstore" "$server-redisstore.log" \
    go test -v -race -count=1 -timeout="$TEST_TIMEOUT" -parallel 4 ./redisstore/
  PATH="$bin:$PATH" step "$server v=$version core" "$server-core.log" \
    go test -v -race -count=1 -timeout="$TEST_TIMEOUT" -skip "$ISOLATED" .
  PATH="$bin:$PATH" step "$server v=$version core (on its own)" "$server-core-isolated.log" \
    go test -v -race -count=1 -timeout="$TEST_TIMEOUT" -run "$ISOLATED" .
  "$ROOT/scripts/redis-rig.sh" down || echo "test-servers.sh: WARNING: rig down failed" >&2
  rig_dir=""
  unset SLIDELOG_RIG_DIR SLIDELOG_REDIS_SERVER
done

echo
echo "=== test-servers.sh summary ($((SECONDS - start))s)"
for s in "${passed[@]}"; do echo "ok    $s"; done
for s in "${failed[@]}"; do echo "FAIL  $s"; done
if ((${#failed[@]})); then
  echo "test-servers.sh: FAILED"
  exit 1
fi
echo "test-servers.sh: all servers ok"
