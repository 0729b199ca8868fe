#!/usr/bin/env bash
# servers.sh - build the other servers the store is tested on, from source.
#
#   scripts/servers.sh list          the servers it knows: NAME TAG COMMIT
#   scripts/servers.sh build NAME    build NAME (once; later calls reuse it) and print its bin dir
#
# NAME is redis-6.2.14 or valkey-8.0.1. Both tags are in the GitHub
# repository valkey-io/valkey (Valkey forked Redis and kept its history);
# each is pinned by its commit, so a source that does not hash to it is
# refused. The source comes from, in order:
#
#   1. SLIDELOG_SERVERS_GIT, a local git directory (a clone or a bare
#      mirror of valkey-io/valkey) that holds the commit;
#   2. otherwise `git fetch --depth 1` of the commit from
#      SLIDELOG_SERVERS_REPO (default https://github.com/valkey-io/valkey.git).
#
# It is built and installed with `make BUILD_TLS=no PREFIX=... install`
# into SLIDELOG_SERVERS_DIR/NAME (default
# ${XDG_CACHE_HOME:-~/.cache}/slidelog-servers/NAME), outside the
# repository, so that no binary is ever committed. bin/ there holds
# redis-server and redis-cli (for Valkey, links to valkey-server and
# valkey-cli). Needs git, make, a C compiler and pkg-config: on Debian,
# missing ones are installed with apt-get (build-essential pkg-config git).
# Measured on two busy cores: redis-6.2.14 273 s, valkey-8.0.1 (LTO) 18 min.
set -euo pipefail

REPO="${SLIDELOG_SERVERS_REPO:-https://github.com/valkey-io/valkey.git}"
DIR="${SLIDELOG_SERVERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slidelog-servers}"

# NAME TAG COMMIT VERSION (what `redis-server --version` says: v=VERSION).
# redis-6.2.14's commit is "Redis 6.2.14", the tip of the 6.2 branch.
SERVERS=(
  "redis-6.2.14 6.2.14 91863dd854feba7f75ae58976a920acb192a5b67 6.2.14"
  "valkey-8.0.1 8.0.1 4fbab5740bfef66918d6c2950dd2b3b4e07815a2 8.0.1"
)

log() { echo "servers: $*" >&2; }
die() { echo "servers: ERROR: $*" >&2; exit 1; }

# lookup NAME : set TAG, COMMIT, VERSION.
lookup() {
  local s n
  for s in "${SERVERS[@]}"; do
    read -r n TAG COMMIT VERSION <<<"$s"
    [[ "$n" == "$1" ]] && return 0
  done
  die "unknown server '$1' (known: $(for s in "${SERVERS[@]}"; do printf '%s ' "${s%% *}"; done))"
}

# built DIR : DIR/bin holds a server that says it is VERSION.
built() {
  [[ -x "$1/bin/redis-server" && -x "$1/bin/redis-cli" ]] &&
    "$1/bin/redis-server" --version 2>/dev/null | grep -q "v=$VERSION "
}

need_tools() {
  local missing=() t
  for t in git make cc pkg-config; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
  ((${#missing[@]} == 0)) && return 0
  log "missing ${missing[*]}; installing build-essential pkg-config git with apt-get"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${missing[*]} by hand"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install ${missing[*]}"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y build-essential pkg-config git
}

# source_into DEST : extract the pinned commit's tree into DEST.
source_into() {
  local dest="$1" git=()
  if [[ -n "${SLIDELOG_SERVERS_GIT:-}" ]]; then
    git=(git --git-dir="$SLIDELOG_SERVERS_GIT")
    "${git[@]}" cat-file -e "$COMMIT^{commit}" 2>/dev/null ||
      die "SLIDELOG_SERVERS_GIT=$SLIDELOG_SERVERS_GIT does not hold commit $COMMIT ($TAG)"
    log "source: $TAG ($COMMIT) from $SLIDELOG_SERVERS_GIT"
  else
    local repo="$DIR/.git-objects"
    git init -q --bare "$repo"
    git=(git --git-dir="$repo")
    if ! "${git[@]}" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
      log "source: fetching $TAG ($COMMIT) from $REPO"
      "${git[@]}" fetch -q --depth 1 "$REPO" "$COMMIT" ||
        die "could not fetch $COMMIT from $REPO (set SLIDELOG_SERVERS_GIT to a local clone)"
    fi
  fi
  # The commit ID is the hash of the tree: what is extracted is the pinned source.
  [[ "$("${git[@]}" rev-parse "$COMMIT^{commit}")" == "$COMMIT" ]] || die "commit $COMMIT not found"
  "${git[@]}" archive "$COMMIT" | tar -x -C "$dest"
}

cmd_build() {
  [[ $# -eq 1 ]] || die "usage: $0 build NAME"
  lookup "$1"
  local out="$DIR/$1"
  mkdir -p "$DIR"
  # One build of NAME at a time; a second waits, then finds it built.
  exec 8>"$out.lock"
  flock 8
  if built "$out"; then
    log "$1 already built in $out"
    echo "$out/bin"
    return 0
  fi
  need_tools
  rm -rf "$out.part"
  mkdir -p "$out.part/src"
  source_into "$out.part/src"
  log "building $1 in $out.part/src (make BUILD_TLS=no; log in $out.part/build.log)"
  local start=$SECONDS
  # One make: install builds what it needs (a second make would build
  # Valkey's release.o and link the server again).
  if ! (cd "$out.part/src" &&
    make -j"$(nproc)" BUILD_TLS=no PREFIX="$out.part" install) >"$out.part/build.log" 2>&1; then
    tail -n 30 "$out.part/build.log" >&2
    die "build of $1 failed; see $out.part/build.log"
  fi
  # The installed binaries have the prefix in no path: the tree can move.
  rm -rf "$out"
  mv "$out.part" "$out"
  built "$out" || die "$out/bin/redis-server does not say v=$VERSION"
  log "built $1 in $((SECONDS - start))s: $("$out/bin/redis-server" --version)"
  echo "$out/bin"
}

cmd_list() {
  local s
  for s in "${SERVERS[@]}"; do read -r n t c _ <<<"$s"; echo "$n $t $c"; done
}

case "${1:-}" in
  build) shift; cmd_build "$@" ;;
  list) cmd_list ;;
  *) echo "usage: $0 {list|build NAME}" >&2; exit 2 ;;
esac
