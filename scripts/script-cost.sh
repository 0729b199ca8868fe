#!/usr/bin/env bash
# script-cost.sh: the Redis time of one decision script call, measured
# inside Redis (INFO commandstats, EVALSHA usec_per_call after CONFIG
# RESETSTAT), for slidelog's common.lua, the design article's script and
# redis_rate v10's, with one client (redis-benchmark -c 1) on random keys
# of the standalone Redis. Nothing of a Go client is in the figure: it is
# the script's own cost, commands and Lua, on a warm server.
#
#   eval "$(scripts/redis-rig.sh env)"
#   scripts/script-cost.sh [rounds] [rev...]
#
# Each rev (a git revision) adds its core/redisstore/common.lua, as the
# store of that revision sends it (see sent), as a row, to compare a
# change with what it replaced. The contenders take turns in every round; the table
# shows each one's median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
shift || true
addr=${SLIDELOG_REDIS_ADDR:?set SLIDELOG_REDIS_ADDR (eval "\$(scripts/redis-rig.sh env)")}
host=${addr%:*}
port=${addr##*:}
n=${SCRIPT_COST_CALLS:-40000}
keys=10000
for tool in redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "script-cost: $tool missing (scripts/redis-rig.sh installs redis-tools)" >&2; exit 1; }
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# sent TREE OUT: common.lua's text as the store of the checkout TREE sends
# it (the functions of lib.lua it calls joined in), written by its
# TestScriptTexts (SLIDELOG_SCRIPT_DUMP); at revisions before that, the
# file with all of lib.lua joined in after its first line, as scripts.go
# joined them then (no lib.lua before the library).
sent() {
  local tree=$1 out=$2 dump
  dump=$(mktemp -d)
  (cd "$tree/core" && SLIDELOG_SCRIPT_DUMP=$dump go test -count=1 -run '^TestScriptTexts$' ./redisstore >/dev/null 2>&1) || true
  if [ -s "$dump/common.lua" ]; then
    cp "$dump/common.lua" "$out"
  else
    local file=$tree/core/redisstore/common.lua lib=$tree/core/redisstore/lib.lua
    { head -n 1 "$file"; [ -f "$lib" ] && cat "$lib"; tail -n +2 "$file"; } >"$out"
  fi
  rm -rf "$dump"
}
sent . "$dir/common"
names=(common)
for rev in "$@"; do
  git worktree add -q --detach "$dir/tree" "$rev"
  sent "$dir/tree" "$dir/common@$rev"
  git worktree remove --force "$dir/tree"
  names+=("common@$rev")
done
cp bench/contender/article.lua "$dir/article"
names+=(article)
rr=$(cd bench && go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
# redis_rate's allowN script, as its lua.go holds it.
awk '/allowN = redis.NewScript\(`/ {on = 1; next} on && /^`\)/ {exit} on' "$rr/lua.go" >"$dir/redis_rate"
[ -s "$dir/redis_rate" ] || { echo "script-cost: redis_rate's script not found in $rr/lua.go" >&2; exit 1; }
names+=(redis_rate)

cli() { redis-cli -h "$host" -p "$port" "$@"; }

# run name round: one contender's turn, on keys of its own; prints usec_per_call.
run() {
  local name=$1 round=$2 sha args
  sha=$(cli script load "$(cat "$dir/$name")")
  case $name in
  common*) args=(1 "sc:$round:$name:__rand_int__" "m__rand_int__" 0 100 60000000) ;;
  article) args=(1 "sc:$round:$name:__rand_int__" "$(($(date +%s) * 1000))" 60000 100 "m__rand_int__") ;;
  redis_rate) args=(1 "sc:$round:$name:__rand_int__" 100 100 60 1) ;;
  esac
  cli config resetstat >/dev/null
  redis-benchmark -h "$host" -p "$port" -n "$n" -r "$keys" -c 1 -q evalsha "$sha" "${args[@]}" >/dev/null
  cli info commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $6}'
}

for r in $(seq 1 "$rounds"); do
  k=$((r % ${#names[@]}))
  for i in "${!names[@]}"; do
    name=${names[$(((i + k) % ${#names[@]}))]}
    echo "$(run "$name" "$r") $name" >>"$dir/results"
  done
done
cli --scan --pattern 'sc:*' | xargs -r -n 500 redis-cli -h "$host" -p "$port" unlink >/dev/null

printf '%-24s %s\n' script "EVALSHA µs per call (median of $rounds rounds; each round)"
for name in "${names[@]}"; do
  vals=$(awk -v n="$name" '$2 == n {print $1}' "$dir/results" | sort -g)
  median=$(echo "$vals" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  printf '%-24s %6.2f   (%s)\n' "$name" "$median" "$(awk -v n="$name" '$2 == n {printf "%s ", $1}' "$dir/results")"
done
