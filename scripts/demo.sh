#!/usr/bin/env bash
# demo.sh - run one example and show the limiter at work (make demo).
#
#   scripts/demo.sh [FRAMEWORK]    FRAMEWORK: gin, echo, echov5, chi (default), fiber,
#                                  grpc or connect (these two: scripts/demo-rpc.sh)
#
# Builds examples/FRAMEWORK and the demo client (examples/cmd/demo) with
# the Go toolchain, starts the example on a free loopback port with
# -limit DEMO_LIMIT (default 10), sends DEMO_REQUESTS (default 14)
# requests to /hello, printing each status and the RateLimit-Policy,
# RateLimit and Retry-After fields, shows one 429 body, checks /healthz and
# /readyz, prints how many decisions came from the store (Redis) and how
# many from the failure mode (read from the example's /metrics on its
# -metrics-addr), and stops the server. Needs only Go (no curl).
#
# Store: memory, unless SLIDELOG_REDIS_ADDRS is set: host:port or
# redis:// URLs, comma-separated; one address is enough for a standalone
# Redis or a Redis Cluster; redis+sentinel://host:port[,host:port…]/MASTERNAME
# for a master that Sentinels monitor. With Redis, each run uses its own key prefix
# unless SLIDELOG_KEY_PREFIX is set. When the example cannot use that Redis
# (it does not answer, or the addresses do not fit the server), the example
# exits with the error and so does the demo, non-zero.
set -euo pipefail

FRAMEWORK="${1:-chi}"
LIMIT="${DEMO_LIMIT:-10}"
REQUESTS="${DEMO_REQUESTS:-14}"

case "$FRAMEWORK" in
  gin | echo | echov5 | chi | fiber) ;;
  grpc | connect) exec bash "$(dirname "${BASH_SOURCE[0]}")/demo-rpc.sh" "$FRAMEWORK" ;;
  *) echo "demo: unknown framework \"$FRAMEWORK\"; want one of gin, echo, echov5, chi, fiber, grpc, connect" >&2; exit 2 ;;
esac
command -v go >/dev/null 2>&1 || { echo "demo: the Go toolchain (go) is not on PATH" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="$(mktemp -d)"
PID=""

cleanup() {
  if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$ROOT/examples"
echo "==> building examples/$FRAMEWORK and examples/cmd/demo"
go build -o "$TMP/server" "./$FRAMEWORK"
go build -o "$TMP/demo" ./cmd/demo

if [[ -n "${SLIDELOG_REDIS_ADDRS:-}" ]]; then
  export SLIDELOG_KEY_PREFIX="${SLIDELOG_KEY_PREFIX:-slidelog-demo:$$:$(date +%s):}"
  export SLIDELOG_KEY_SECRET="${SLIDELOG_KEY_SECRET:-slidelog-demo-$$}"
  echo "==> store: Redis from SLIDELOG_REDIS_ADDRS=$SLIDELOG_REDIS_ADDRS (key prefix $SLIDELOG_KEY_PREFIX); the example checks it at start"
else
  echo "==> store: memory (set SLIDELOG_REDIS_ADDRS for Redis, a Redis Cluster or redis+sentinel://)"
fi

"$TMP/server" -addr 127.0.0.1:0 -metrics-addr 127.0.0.1:0 -limit "$LIMIT" -window 1m 2>"$TMP/server.log" &
PID=$!

# The example logs the address it listens on: msg=listening ... addr=HOST:PORT
ADDR=""
for _ in $(seq 1 300); do
  ADDR="$(sed -n 's/.*msg=listening.* addr=\([^ ]*\).*/\1/p' "$TMP/server.log" | head -n1)"
  [[ -n "$ADDR" ]] && break
  if ! kill -0 "$PID" 2>/dev/null; then
    status=0
    wait "$PID" || status=$?
    PID=""
    echo "demo: the $FRAMEWORK example exited with status $status:" >&2
    cat "$TMP/server.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$ADDR" ]]; then
  echo "demo: the $FRAMEWORK example did not start listening within 30 s:" >&2
  cat "$TMP/server.log" >&2
  exit 1
fi

# ... and its metrics address: msg=metrics addr=HOST:PORT
METRICS="$(sed -n 's/.*msg=metrics.* addr=\([^ ]*\).*/\1/p' "$TMP/server.log" | head -n1)"

echo "==> examples/$FRAMEWORK on http://$ADDR (metrics on http://$METRICS) with -limit $LIMIT -window 1m; $REQUESTS requests to /hello"
echo
"$TMP/demo" -url "http://$ADDR" -metrics "${METRICS:+http://$METRICS}" -n "$REQUESTS"

echo
echo "==> stopping the server (SIGTERM)"
kill -TERM "$PID"
status=0
wait "$PID" || status=$?
PID=""
echo "==> server log:"
sed 's/^/    /' "$TMP/server.log"
exit "$status"
