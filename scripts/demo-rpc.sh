#!/usr/bin/env bash
# demo-rpc.sh - run the gRPC or connect example and show the limiter at
# work with real RPC clients (make demo FRAMEWORK=grpc|connect; demo.sh
# hands these two to this script).
#
#   scripts/demo-rpc.sh grpc|connect
#
# Builds examples/FRAMEWORK/server and /client with the Go toolchain,
# starts the server on a free loopback port with -limit DEMO_LIMIT
# (default 3) and -window DEMO_WINDOW (default 5s), and sends a burst of
# DEMO_LIMIT+2 calls: OK, then RESOURCE_EXHAUSTED with its RetryInfo delay,
# retry-after and grpc-retry-pushback-ms.
#   grpc:    then one call from a grpc-go client with gRPC's standard retry
#            policy, which waits the server's pushback and succeeds.
#   connect: the burst over the Connect protocol, then calls over gRPC and
#            gRPC-Web against the same handler.
# Store: memory, unless SLIDELOG_REDIS_ADDRS is set (as scripts/demo.sh).
set -euo pipefail

FRAMEWORK="${1:-}"
LIMIT="${DEMO_LIMIT:-3}"
WINDOW="${DEMO_WINDOW:-5s}"
case "$FRAMEWORK" in
  grpc | connect) ;;
  *) echo "usage: $0 grpc|connect" >&2; exit 2 ;;
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
echo "==> building examples/$FRAMEWORK/server and examples/$FRAMEWORK/client"
go build -o "$TMP/server" "./$FRAMEWORK/server"
go build -o "$TMP/client" "./$FRAMEWORK/client"

if [[ -n "${SLIDELOG_REDIS_ADDRS:-}" ]]; then
  export SLIDELOG_KEY_PREFIX="${SLIDELOG_KEY_PREFIX:-slidelog-demo:$$:$(date +%s):}"
  export SLIDELOG_KEY_SECRET="${SLIDELOG_KEY_SECRET:-slidelog-demo-$$}"
  echo "==> store: Redis at $SLIDELOG_REDIS_ADDRS (key prefix $SLIDELOG_KEY_PREFIX)"
else
  echo "==> store: memory (set SLIDELOG_REDIS_ADDRS for Redis or a Redis Cluster)"
fi

"$TMP/server" -addr 127.0.0.1:0 -limit "$LIMIT" -window "$WINDOW" 2>"$TMP/server.log" &
PID=$!
ADDR=""
for _ in $(seq 1 300); do
  ADDR="$(sed -n 's/.*msg=listening.* addr=\([^ ]*\).*/\1/p' "$TMP/server.log" | head -n1)"
  [[ -n "$ADDR" ]] && break
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "demo: the $FRAMEWORK example exited:" >&2
    cat "$TMP/server.log" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n "$ADDR" ]] || { echo "demo: the $FRAMEWORK example did not start listening within 30 s:" >&2; cat "$TMP/server.log" >&2; exit 1; }

N=$((LIMIT + 2))
case "$FRAMEWORK" in
  grpc)
    echo "==> examples/grpc on $ADDR with -limit $LIMIT -window $WINDOW; a burst of $N calls (grpc-go, no retry policy)"
    echo
    "$TMP/client" -addr "$ADDR" -n "$N"
    echo
    echo "==> one more call from a grpc-go client with the standard retry policy for RESOURCE_EXHAUSTED:"
    echo "    its first attempt is denied, grpc-go waits the grpc-retry-pushback-ms, and the retry succeeds"
    "$TMP/client" -addr "$ADDR" -n 1 -retry
    ;;
  connect)
    echo "==> examples/connect on http://$ADDR with -limit $LIMIT -window $WINDOW; a burst of $N calls (connect-go client, Connect protocol)"
    echo
    "$TMP/client" -url "http://$ADDR" -n "$N"
    echo
    echo "==> the same handler over gRPC and gRPC-Web (connect-go client), same budget"
    "$TMP/client" -url "http://$ADDR" -n 1 -protocol grpc
    "$TMP/client" -url "http://$ADDR" -n 1 -protocol grpcweb
    ;;
esac

echo
echo "==> stopping the server (SIGTERM)"
kill -TERM "$PID"
status=0
wait "$PID" || status=$?
PID=""
echo "==> server log:"
sed 's/^/    /' "$TMP/server.log"
exit "$status"
