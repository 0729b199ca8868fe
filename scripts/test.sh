#!/usr/bin/env bash
# test.sh - run every module's tests against the local Redis rig.
#
# Installs Redis, nginx-light and haproxy if needed (the adapters' proxy
# suite runs them), brings up scripts/redis-rig.sh (standalone +
# cluster), exports SLIDELOG_REDIS_ADDR / SLIDELOG_CLUSTER_ADDRS /
# SLIDELOG_REQUIRE_REDIS=1, and runs `go test -race -count=1` on every
# module listed in go.work: first the modules that neither make load nor
# wait on faults (adapters, bench, deploy, tools) as one go test; then
# core, core's load-making exactness and stall-bound tests in a step of
# their own, examples and faulttest, one after another with nothing
# beside them (see the README's "Tests need real Redis"); last, two at a
# time, short FuzzRedisKey and FuzzClientIP runs in core, a short
# FuzzMiddleware run in each adapter and the install check
# (tools/installcheck: each adapter by version from a file proxy of the
# working tree). It prints a per-step summary and exits non-zero if
# anything failed.
#
# The rig is stopped on exit (success, failure, Ctrl-C) if this run started
# it. A rig that was already up and healthy before the run (someone's
# `make cluster-up`) is reused and left running; set SLIDELOG_RIG_DOWN=always
# to stop it anyway.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RIG="$ROOT/scripts/redis-rig.sh"
FUZZTIME="${SLIDELOG_FUZZTIME:-60000x}" # a count, not a duration: a timed run can end in "context deadline exceeded" on a loaded machine
TEST_TIMEOUT="${SLIDELOG_TEST_TIMEOUT:-10m}" # per test binary, as go test's default
export FUZZTIME TEST_TIMEOUT # read by the steps' shells
start=$SECONDS

"$RIG" install || { echo "test.sh: redis install failed" >&2; exit 1; }
# nginx-light and haproxy for the proxy suite (slidelogtest.RunProxySuite),
# which every adapter's tests run; SLIDELOG_REQUIRE_PROXIES=1 makes a
# missing proxy fail those tests instead of skipping them.
"$ROOT/scripts/proxies.sh" install || { echo "test.sh: nginx/haproxy install failed" >&2; exit 1; }
export SLIDELOG_REQUIRE_PROXIES=1

started=0
if [[ "${SLIDELOG_RIG_DOWN:-}" == always ]] || ! "$RIG" check; then
  started=1
fi
cleanup() {
  local rc=$?
  if ((started)); then
    "$RIG" down || echo "test.sh: WARNING: rig down failed" >&2
  else
    echo "test.sh: rig was already up before this run; leaving it up" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "test.sh: interrupted" >&2; exit 130' INT
trap 'echo "test.sh: terminated" >&2; exit 143' TERM HUP

"$RIG" up || { echo "test.sh: redis rig failed to start" >&2; exit 1; }
eval "$("$RIG" env)"
export SLIDELOG_REQUIRE_REDIS=1
echo "test.sh: SLIDELOG_REDIS_ADDR=$SLIDELOG_REDIS_ADDR SLIDELOG_CLUSTER_ADDRS=$SLIDELOG_CLUSTER_ADDRS SLIDELOG_REQUIRE_REDIS=1"

mapfile -t modules < <("$ROOT/scripts/modules.sh")
((${#modules[@]})) || { echo "test.sh: no modules in go.work" >&2; exit 1; }

# The tests that hold the limiter to exactness and to its stall bounds on
# a busy machine make their own load (CPU hogs, CPU-bound goroutines,
# several processes): they run after core's other tests, on their own,
# not beside the other packages' test binaries that go test ./... runs at
# once. They still run in every make test.
ISOLATED='^(TestExactWhenBusy|TestStoppedNodeBoundWithCPUHog|TestClusterExactUnderLoadWithDefaults|TestClusterExactnessUnderConcurrency|TestClusterExactnessAcrossProcesses|TestNewInBusyProcess)$'
export ISOLATED

passed=()
failed=()
# step runs "$@" and files it under name as passed or failed, with the
# seconds it took and the CPU its processes took (cputime), so the
# summary shows where the time goes: a step whose CPU is well under its
# wall time waits (on Redis, timers, failovers) rather than computes.
step() {
  local name=$1 t0=$SECONDS cpu rc
  shift
  cpu=$(cputime)
  "$@"
  rc=$?
  cpu=$(($(cputime) - cpu))
  if ((rc == 0)); then
    passed+=("$name ($((SECONDS - t0))s, cpu ${cpu}s)")
  else
    failed+=("$name ($((SECONDS - t0))s, cpu ${cpu}s)")
  fi
}
# cputime prints the CPU seconds (user and system) the finished children
# of this shell, or of the shell of PID $1, have taken so far (cutime and
# cstime in /proc/PID/stat).
cputime() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%d\n", ($14 + $15) / hz }' "/proc/${1:-$$}/stat"
}
# The modules whose tests neither make load nor wait on faults (the
# adapters, bench, deploy, tools) run as one go test over all their
# packages, two test binaries at a time as go test runs a module's own
# packages: about three fifths of their time one after another, on a
# quiet machine and beside two CPU hogs alike. core, examples and
# faulttest each run alone.
is_light() { [[ "$1" == adapters/* || "$1" == bench || "$1" == deploy || "$1" == tools/* ]]; }
light=()
for m in "${modules[@]}"; do
  is_light "$m" && light+=("./$m/...")
done
if ((${#light[@]})); then
  echo
  echo "=== modules ${light[*]}: go test -race -count=1 (one run)"
  step "adapters, bench, deploy, tools (${#light[@]} modules)" bash -c 'cd "$1" && shift && go test -race -count=1 -timeout="$TEST_TIMEOUT" "$@"' _ "$ROOT" "${light[@]}"
fi
for m in "${modules[@]}"; do
  is_light "$m" && continue
  echo
  flags=()
  pkgs=(./...)
  # redisstore's tests of servers of their own run in parallel, four at
  # a time (see core/redisstore/main_test.go). Its binary, core's longest
  # by far, is named first so that go test starts it first and runs
  # core's other packages in its second slot beside it (in path order it
  # started after most of them, and then ran alone).
  [[ "$m" == core ]] && flags=(-parallel 4 -skip "$ISOLATED") pkgs=(./redisstore ./...)
  # The fault suite's four failover rows run at once: the two Sentinel
  # rows, each with Sentinel sets of its own, beside the Cluster's two,
  # which take the one fault Cluster in turn (see faulttest's TestFaults).
  [[ "$m" == faulttest ]] && flags=(-parallel 4)
  echo "=== module $m: go test -race -count=1 -timeout=$TEST_TIMEOUT ${flags[*]} ${pkgs[*]}"
  step "$m" bash -c 'cd "$1" && shift && go test -race -count=1 -timeout="$TEST_TIMEOUT" "$@"' _ "$ROOT/$m" "${flags[@]}" "${pkgs[@]}"
  if [[ "$m" == core ]]; then
    echo
    echo "=== module core, on its own: go test -race -count=1 -run '$ISOLATED' ."
    step "core(on its own)" bash -c 'cd "$1" && go test -race -count=1 -timeout="$TEST_TIMEOUT" -run "$ISOLATED" .' _ "$ROOT/core"
  fi
done

# The short fuzz runs and the install check make no load on the rig and
# assert no timing: they run beside each other, two at a time (runtasks),
# each into a log of its own that is printed whole when it ends. On a busy
# machine two at a time take a larger share of the cores than one, and the
# links and module loads of one overlap another's fuzzing.
#
# A task is "name|title|dir|fuzz target|fuzz time"; a task without a fuzz
# target is the install check.
tasks=()
# Core fuzz targets, each in its package: a missing target fails the run
# (it was moved or renamed without this list following).
for target in "core/redisstore FuzzRedisKey" "core/httplimit FuzzClientIP"; do
  read -r dir name <<<"$target"
  tasks+=("$dir(fuzz $name)|$dir: go test -run='^\$' -fuzz='^$name\$' -fuzztime=$FUZZTIME .|$dir|$name|$FUZZTIME")
done
# FuzzMiddleware drives each adapter with crafted requests; a count, not a
# duration, for the same reason as above. An adapter without it fails the
# run, as a core target does.
HTTP_FUZZTIME="${SLIDELOG_HTTP_FUZZTIME:-5000x}"
for m in "${modules[@]}"; do
  [[ "$m" == adapters/* ]] || continue
  tasks+=("$m(fuzz FuzzMiddleware)|module $m: go test -run='^\$' -fuzz='^FuzzMiddleware\$' -fuzztime=$HTTP_FUZZTIME .|$m|FuzzMiddleware|$HTTP_FUZZTIME")
done
# install-check: every adapter installs by version, outside the workspace,
# from a file-system module proxy built from this working tree, and its
# docs page's quick start builds (tools/installcheck; make install-check).
INSTALLCHECK_VERSION="${SLIDELOG_INSTALLCHECK_VERSION:-v0.0.0-installcheck}"
tasks+=("install-check|install-check: go run ./tools/installcheck -version $INSTALLCHECK_VERSION|.||")

# runtask runs one task's command in dir: the fuzz target, which must
# exist in the package's tests, or the install check.
runtask() {
  local dir=$1 target=$2 fuzztime=$3
  cd "$ROOT/$dir" || return 1
  if [[ -z "$target" ]]; then
    go run ./tools/installcheck -root "$ROOT" -version "$INSTALLCHECK_VERSION"
    return
  fi
  grep -qs "func $target" ./*_test.go || {
    echo "test.sh: no $target in $dir" >&2
    return 1
  }
  go test -run='^$' -fuzz="^$target\$" -fuzztime="$fuzztime" .
}

# runtasks runs the tasks, at most $1 at a time, each with its output in a
# file of its own, and files each under its name as passed or failed in
# the order the tasks are listed, with its wall time and the CPU its
# processes took, as step does.
runtasks() {
  local width=$1 dir i name title tdir target fuzztime rc secs cpu
  dir=$(mktemp -d)
  for i in "${!tasks[@]}"; do
    while (($(jobs -rp | wc -l) >= width)); do wait -n; done
    IFS='|' read -r name title tdir target fuzztime <<<"${tasks[$i]}"
    (
      t0=$SECONDS me=$BASHPID
      runtask "$tdir" "$target" "$fuzztime" >"$dir/$i.log" 2>&1
      rc=$?
      echo "$rc $((SECONDS - t0)) $(cputime "$me")" >"$dir/$i.rc"
    ) &
  done
  wait
  for i in "${!tasks[@]}"; do
    IFS='|' read -r name title _ <<<"${tasks[$i]}"
    echo
    echo "=== $title"
    cat "$dir/$i.log"
    read -r rc secs cpu <"$dir/$i.rc" || { rc=1 secs=0 cpu=0; }
    if ((rc == 0)); then
      passed+=("$name (${secs}s, cpu ${cpu}s)")
    else
      failed+=("$name (${secs}s, cpu ${cpu}s)")
    fi
  done
  rm -rf "$dir"
}
runtasks 2

echo
echo "=== test.sh summary ($((SECONDS - start))s)"
for m in "${passed[@]}"; do echo "ok    $m"; done
for m in "${failed[@]}"; do echo "FAIL  $m"; done
if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all modules ok"
