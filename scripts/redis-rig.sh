#!/usr/bin/env bash
# redis-rig.sh - local Redis test rig for slidelog.
#
#   scripts/redis-rig.sh install   install redis-server/redis-cli/redis-sentinel (Debian, apt-get) if missing
#   scripts/redis-rig.sh up        start standalone Redis + 6-node Redis Cluster (idempotent)
#   scripts/redis-rig.sh down      stop every server this script started, remove state dir
#   scripts/redis-rig.sh status    print each node's role and cluster_state
#   scripts/redis-rig.sh env       print export lines: eval "$(scripts/redis-rig.sh env)"
#   scripts/redis-rig.sh check     exit 0 if the rig is up and healthy (quiet)
#
# Environment:
#   SLIDELOG_STANDALONE_PORT    standalone port (default 6399)
#   SLIDELOG_CLUSTER_BASE_PORT  first cluster port; nodes use BASE..BASE+5 (default 7100)
#   SLIDELOG_RIG_TIMEOUT        seconds to wait for the cluster to become healthy (default 30)
#   SLIDELOG_REDIS_SERVER       the server binary to start: a redis-server or valkey-server path
#                               (default: redis-server on PATH, installed with apt-get if missing).
#                               A path that is not there fails `up`; it is never replaced by
#                               another server. redis-cli is the one beside it if there is one.
#   SLIDELOG_RIG_DIR            state dir (default <repo>/.redis); a rig of its own per dir
#
# State (data, pid, log, nodes.conf) lives in SLIDELOG_RIG_DIR/<port>/. Only
# processes recorded there (pid file, or a redis-server or valkey-server whose
# working directory is inside that dir) are ever stopped; other Redis servers on
# the machine are never touched. A rig is reused only if its servers run the
# binary asked for.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${SLIDELOG_RIG_DIR:-$ROOT/.redis}"
LOCK_FILE="$STATE_DIR.lock"

STANDALONE_PORT="${SLIDELOG_STANDALONE_PORT:-6399}"
CLUSTER_BASE_PORT="${SLIDELOG_CLUSTER_BASE_PORT:-7100}"
TIMEOUT="${SLIDELOG_RIG_TIMEOUT:-30}"
REDIS_SERVER="${SLIDELOG_REDIS_SERVER:-${REDIS_SERVER:-redis-server}}"
if [[ -z "${REDIS_CLI:-}" ]]; then
  REDIS_CLI=redis-cli
  # The client built with the server, when there is one.
  if [[ "$REDIS_SERVER" == */* && -x "$(dirname "$REDIS_SERVER")/redis-cli" ]]; then
    REDIS_CLI="$(dirname "$REDIS_SERVER")/redis-cli"
  fi
fi

CLUSTER_PORTS=()
for i in 0 1 2 3 4 5; do CLUSTER_PORTS+=("$((CLUSTER_BASE_PORT + i))"); done
ALL_PORTS=("$STANDALONE_PORT" "${CLUSTER_PORTS[@]}")

log() { echo "redis-rig: $*" >&2; }
die() { echo "redis-rig: ERROR: $*" >&2; exit 1; }

for p in "${ALL_PORTS[@]}"; do
  [[ "$p" =~ ^[0-9]+$ ]] && ((p > 0 && p + 10000 <= 65535)) || die "invalid port '$p' (cluster bus needs port+10000 <= 65535)"
done

have_bins() { command -v "$REDIS_SERVER" >/dev/null 2>&1 && command -v "$REDIS_CLI" >/dev/null 2>&1; }

# rcli PORT ARGS... : redis-cli against 127.0.0.1:PORT, bounded in time, CRs stripped.
rcli() {
  local port="$1"; shift
  { timeout 5 "$REDIS_CLI" -h 127.0.0.1 -p "$port" "$@" 2>/dev/null || true; } | tr -d '\r'
}

# field NAME : read "NAME:value" from stdin.
field() { sed -n "s/^$1://p" | head -n1; }

lock() {
  if command -v flock >/dev/null 2>&1; then
    mkdir -p "$(dirname "$LOCK_FILE")"
    exec 9>"$LOCK_FILE"
    # fd 9 is closed for every daemon started below (9>&-) so the lock dies with us.
    flock -w 120 9 || die "another redis-rig.sh is running (lock $LOCK_FILE)"
  fi
}

# ---------------------------------------------------------------- install

cmd_install() {
  if [[ -n "${SLIDELOG_REDIS_SERVER:-}" ]]; then
    have_bins || die "SLIDELOG_REDIS_SERVER=$SLIDELOG_REDIS_SERVER or $REDIS_CLI is not an executable (scripts/servers.sh builds one)"
    return 0
  fi
  if have_bins && command -v redis-sentinel >/dev/null 2>&1; then
    log "redis already installed: $("$REDIS_SERVER" --version | head -n1)"
    return 0
  fi
  log "redis-server/redis-cli/redis-sentinel missing; installing redis-server redis-tools redis-sentinel with apt-get"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install redis-server and redis-cli (>= 5) by hand"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot apt-get install redis"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools redis-sentinel
  hash -r
  have_bins || die "redis-server/redis-cli still not on PATH after apt-get install"
  command -v redis-sentinel >/dev/null 2>&1 || die "redis-sentinel still not on PATH after apt-get install"
  log "installed: $("$REDIS_SERVER" --version | head -n1)"
}

# server_major : the major version of REDIS_SERVER (redis-server --version: v=6.2.14).
server_major() {
  "$REDIS_SERVER" --version 2>/dev/null | sed -n 's/.* v=\([0-9]*\)\..*/\1/p' | head -n1
}

# server_exe : the resolved path of REDIS_SERVER, as /proc/PID/exe shows a running one.
server_exe() { readlink -f "$(command -v "$REDIS_SERVER")"; }

# server_comm PID : the process is a redis-server or valkey-server.
server_comm() {
  case "$(cat "/proc/$1/comm" 2>/dev/null)" in redis-server | valkey-server) return 0 ;; esac
  return 1
}

# ---------------------------------------------------------------- process bookkeeping

# pid_alive PID : the process exists and is not a zombie.
pid_alive() {
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# is_ours PORT : a server of ours (per its pid file) is alive and answering on PORT.
is_ours() {
  local port="$1" pidfile="$STATE_DIR/$1/redis.pid" pid srvpid
  [[ -f "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile")"
  pid_alive "$pid" || return 1
  srvpid="$(rcli "$port" info server | field process_id)"
  [[ "$srvpid" == "$pid" ]]
}

# runs_server PORT : our server on PORT runs the binary asked for (REDIS_SERVER).
runs_server() {
  local pid
  pid="$(tr -dc '0-9' <"$STATE_DIR/$1/redis.pid")"
  [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == "$(server_exe)" ]]
}

# port_open PORT : something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# who_listens PORT : best-effort description of the process on PORT.
who_listens() {
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(\(.*\))$/\1/p' | head -n1
  fi
}

# our_stray_pids : redis-server processes whose working dir is inside STATE_DIR
# (catches half-started nodes that never wrote a pid file).
our_stray_pids() {
  local d pid cwd
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    server_comm "$pid" || continue
    cwd="$(readlink "$d/cwd" 2>/dev/null)" || continue
    case "$cwd" in "$STATE_DIR"/*) echo "$pid" ;; esac
  done
}

wait_pid_gone() {
  local pid="$1" i
  for ((i = 0; i < 50; i++)); do pid_alive "$pid" || return 0; sleep 0.1; done
  return 1
}

kill_pid() {
  local pid="$1"
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_pid_gone "$pid" && return 0
  log "pid $pid did not exit on TERM; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_pid_gone "$pid" || log "WARNING: pid $pid still alive"
}

# stop_all : stop every server recorded under STATE_DIR, then remove it.
stop_all() {
  local dir port pid stopped=0
  [[ -d "$STATE_DIR" ]] || return 0
  for dir in "$STATE_DIR"/*/; do
    [[ -d "$dir" ]] || continue
    port="$(basename "$dir")"
    [[ "$port" =~ ^[0-9]+$ ]] || continue
    [[ -f "$dir/redis.pid" ]] || continue
    pid="$(tr -dc '0-9' <"$dir/redis.pid")"
    pid_alive "$pid" || continue
    if is_ours "$port"; then
      rcli "$port" shutdown nosave >/dev/null || true
      wait_pid_gone "$pid" || kill_pid "$pid"
    elif server_comm "$pid"; then
      kill_pid "$pid"     # ours by pid file but not answering on its port
    else
      continue            # pid reused by an unrelated process: leave it alone
    fi
    stopped=$((stopped + 1))
  done
  for pid in $(our_stray_pids); do
    log "stopping stray redis-server pid $pid"
    kill_pid "$pid"
    stopped=$((stopped + 1))
  done
  rm -rf "$STATE_DIR"
  log "stopped $stopped server(s), removed $STATE_DIR"
}

# ---------------------------------------------------------------- health

standalone_healthy() { [[ "$(rcli "$STANDALONE_PORT" ping)" == PONG ]]; }

# cluster_problems : print nothing and return 0 if the cluster is healthy,
# else print the first problem found and return 1.
cluster_problems() {
  local port info repl role masters=0 replicas=0 n
  for port in "${CLUSTER_PORTS[@]}"; do
    info="$(rcli "$port" cluster info)"
    [[ -n "$info" ]] || { echo "node $port not answering"; return 1; }
    [[ "$(field cluster_state <<<"$info")" == ok ]] || { echo "node $port cluster_state=$(field cluster_state <<<"$info")"; return 1; }
    [[ "$(field cluster_slots_ok <<<"$info")" == 16384 ]] || { echo "node $port cluster_slots_ok=$(field cluster_slots_ok <<<"$info")"; return 1; }
    [[ "$(field cluster_known_nodes <<<"$info")" == 6 ]] || { echo "node $port cluster_known_nodes=$(field cluster_known_nodes <<<"$info")"; return 1; }
    repl="$(rcli "$port" info replication)"
    role="$(field role <<<"$repl")"
    case "$role" in
      master)
        n="$(grep -c '^slave[0-9]*:.*state=online' <<<"$repl" || true)"
        ((n >= 1)) || { echo "master $port has no online replica"; return 1; }
        masters=$((masters + 1)) ;;
      slave)
        [[ "$(field master_link_status <<<"$repl")" == up ]] || { echo "replica $port master_link_status=$(field master_link_status <<<"$repl")"; return 1; }
        replicas=$((replicas + 1)) ;;
      *) echo "node $port role='$role'"; return 1 ;;
    esac
  done
  ((masters == 3 && replicas == 3)) || { echo "$masters masters / $replicas replicas, want 3/3"; return 1; }
}

rig_healthy() {
  local p
  for p in "${ALL_PORTS[@]}"; do is_ours "$p" && runs_server "$p" || return 1; done
  standalone_healthy && cluster_problems >/dev/null
}

# ---------------------------------------------------------------- up

start_node() {
  local port="$1"; shift
  local dir="$STATE_DIR/$port" debug=() major
  mkdir -p "$dir"
  # Before 7.0 DEBUG is always enabled, and the option does not exist.
  major="$(server_major)"
  ((${major:-7} >= 7)) && debug=(--enable-debug-command local)
  "$REDIS_SERVER" \
    --port "$port" --bind 127.0.0.1 --protected-mode no \
    --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --save "" --appendonly no --maxmemory-policy noeviction \
    "${debug[@]}" \
    "$@" 9>&- || fail_up "redis-server on port $port failed to start; see $dir/redis.log"
  # Above the tests' CPU priority when we may (root), as a Redis on a
  # machine of its own would be: tests saturate the client machine with a
  # CPU hog, and here the client machine is the Redis machine too.
  local i
  for ((i = 0; i < 50; i++)); do [[ -s "$dir/redis.pid" ]] && break; sleep 0.05; done
  if [[ -s "$dir/redis.pid" && $(id -u) -eq 0 ]]; then
    renice -n -10 -p "$(tr -dc '0-9' <"$dir/redis.pid")" >/dev/null 2>&1 || true
  fi
}

dump_logs() {
  local f
  for f in "$STATE_DIR"/*/redis.log "$STATE_DIR"/cluster-create.log; do
    [[ -f "$f" ]] || continue
    echo "----- $f (tail)" >&2
    tail -n 15 "$f" >&2
  done
}

fail_up() {
  log "ERROR: $*"
  exit 1
}

UP_OK=0
on_up_exit() {
  if ((UP_OK == 0)); then
    log "up did not complete; stopping half-started nodes"
    dump_logs
    stop_all
  fi
}

cmd_up() {
  have_bins || cmd_install
  lock
  if rig_healthy; then
    log "rig already up and healthy; reusing (standalone :$STANDALONE_PORT, cluster :${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[5]})"
    return 0
  fi
  if [[ -d "$STATE_DIR" ]]; then
    log "previous rig state found but not healthy; cleaning up and starting fresh"
    stop_all
  fi

  local p busy=()
  for p in "${ALL_PORTS[@]}"; do
    port_open "$p" && busy+=("$p ($(who_listens "$p"))")
  done
  for p in "${CLUSTER_PORTS[@]}"; do
    port_open "$((p + 10000))" && busy+=("$((p + 10000)) [cluster bus of $p] ($(who_listens "$((p + 10000))"))")
  done
  if ((${#busy[@]})); then
    die "port(s) in use by a process not started by this script: ${busy[*]}. Stop it, or pick other ports with SLIDELOG_STANDALONE_PORT / SLIDELOG_CLUSTER_BASE_PORT."
  fi

  mkdir -p "$STATE_DIR"
  # A failure or interrupt from here on must not leave half-started nodes.
  trap on_up_exit EXIT
  trap 'fail_up "interrupted"' INT TERM
  start_node "$STANDALONE_PORT"
  for p in "${CLUSTER_PORTS[@]}"; do
    start_node "$p" --cluster-enabled yes --cluster-node-timeout 2000 \
      --cluster-config-file "$STATE_DIR/$p/nodes.conf"
  done

  local deadline=$((SECONDS + 10))
  for p in "${ALL_PORTS[@]}"; do
    until [[ "$(rcli "$p" ping)" == PONG ]]; do
      ((SECONDS < deadline)) || fail_up "node $p did not answer PING within 10s"
      sleep 0.1
    done
  done

  local addrs=()
  for p in "${CLUSTER_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
  log "creating cluster ${addrs[*]}"
  timeout 60 "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
    >"$STATE_DIR/cluster-create.log" 2>&1 9>&- || fail_up "redis-cli --cluster create failed"

  deadline=$((SECONDS + TIMEOUT))
  local problem
  until problem="$(cluster_problems)"; do
    ((SECONDS < deadline)) || fail_up "cluster not healthy after ${TIMEOUT}s: $problem"
    sleep 0.25
  done
  UP_OK=1
  trap - INT TERM EXIT
  log "$("$REDIS_SERVER" --version | head -n1)"
  log "rig up: standalone 127.0.0.1:$STANDALONE_PORT, cluster 127.0.0.1:${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[5]} (3 masters + 3 replicas, all slots ok)"
}

# ---------------------------------------------------------------- down / status / env

cmd_down() {
  lock
  if [[ ! -d "$STATE_DIR" ]]; then
    log "nothing to stop (no $STATE_DIR)"
    return 0
  fi
  stop_all
}

cmd_status() {
  local p ours info repl state role rc=0
  have_bins || die "redis-cli not installed (run: $0 install)"
  for p in "${ALL_PORTS[@]}"; do
    if is_ours "$p"; then ours=rig; elif port_open "$p"; then ours=FOREIGN; else
      printf '%-6s %-10s %s\n' "$p" "-" "not running"; rc=1; continue
    fi
    repl="$(rcli "$p" info replication)"
    role="$(field role <<<"$repl")"
    [[ "$role" == slave ]] && role="replica(of $(field master_port <<<"$repl"),link=$(field master_link_status <<<"$repl"))"
    if [[ "$p" == "$STANDALONE_PORT" ]]; then
      state="standalone"
    else
      info="$(rcli "$p" cluster info)"
      state="cluster_state:$(field cluster_state <<<"$info") slots_ok:$(field cluster_slots_ok <<<"$info") known_nodes:$(field cluster_known_nodes <<<"$info")"
    fi
    printf '%-6s %-8s %-32s %s\n' "$p" "$ours" "$role" "$state"
  done
  if ((rc == 0)); then
    local problem
    if problem="$(cluster_problems)"; then echo "rig: healthy"; else echo "rig: NOT healthy: $problem"; rc=1; fi
  else
    echo "rig: down"
  fi
  return "$rc"
}

cmd_env() {
  local addrs=() p
  for p in "${CLUSTER_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
  echo "export SLIDELOG_REDIS_ADDR=127.0.0.1:$STANDALONE_PORT"
  echo "export SLIDELOG_CLUSTER_ADDRS=$(IFS=,; echo "${addrs[*]}")"
}

cmd_check() { have_bins && rig_healthy; }

case "${1:-}" in
  install) cmd_install ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  check) cmd_check ;;
  *) echo "usage: $0 {install|up|down|status|env|check}" >&2; exit 2 ;;
esac
