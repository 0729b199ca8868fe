#!/usr/bin/env bash
# set-version.sh - set the release version of every module (lockstep).
#
#   scripts/set-version.sh [--drop-replace] vX.Y.Z
#
# Writes vX.Y.Z to VERSION and, in the go.mod of every module listed in
# go.work (scripts/modules.sh), sets each requirement on a sibling module
# (github.com/slidelog/slidelog/...) to vX.Y.Z with `go mod edit -require`.
# The local `replace` directives to siblings are kept by default: they keep
# development and `GOWORK=off` builds on the working tree, and a module's
# replace directives are ignored when another module requires it, so a
# released module still resolves its siblings by version. --drop-replace
# removes them (`go mod edit -dropreplace`), for a tree that must build
# against the published tags only (then run `GOWORK=off go mod tidy` in each
# module once the tags are pushed, to record their checksums).
# See docs/releasing.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PREFIX="github.com/slidelog/slidelog/"

usage() { echo "usage: scripts/set-version.sh [--drop-replace] vX.Y.Z" >&2; exit 2; }
drop_replace=0
version=""
for arg in "$@"; do
  case "$arg" in
    --drop-replace) drop_replace=1 ;;
    --keep-replace) drop_replace=0 ;;
    -h | --help) usage ;;
    -*) echo "set-version.sh: unknown flag $arg" >&2; usage ;;
    *) [[ -z "$version" ]] || usage; version="$arg" ;;
  esac
done
[[ -n "$version" ]] || usage
if ! [[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "set-version.sh: $version is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 2
fi
if ((BASH_REMATCH[1] >= 2)); then
  echo "set-version.sh: $version: a major version 2 or above needs /v${BASH_REMATCH[1]} in every module path first" >&2
  exit 2
fi

# go_mod_paths SECTION FILE prints the module paths of a go.mod's Require
# entries (SECTION=Require) or of its Replace entries' Old side
# (SECTION=Replace), from `go mod edit -json`.
go_mod_paths() {
  go mod edit -json "$2" | awk -v want="$1" '
    /^\t"[A-Za-z]+":/ { section = $1; gsub(/[":]/, "", section) }
    section == want && want == "Require" && /^\t\t\t"Path":/ { print }
    section == want && want == "Replace" && /^\t\t\t"Old":/ { old = 1; next }
    section == want && want == "Replace" && old && /^\t\t\t\t"Path":/ { print; old = 0 }
  ' | sed 's/.*"Path": "\([^"]*\)".*/\1/'
}

mapfile -t modules < <(scripts/modules.sh)
((${#modules[@]})) || { echo "set-version.sh: no modules in go.work" >&2; exit 1; }

changed=0
for m in "${modules[@]}"; do
  mod="$m/go.mod"
  args=()
  while read -r path; do
    [[ "$path" == "$PREFIX"* ]] && args+=("-require=$path@$version")
  done < <(go_mod_paths Require "$mod")
  if ((drop_replace)); then
    while read -r path; do
      [[ "$path" == "$PREFIX"* ]] && args+=("-dropreplace=$path")
    done < <(go_mod_paths Replace "$mod")
  fi
  if ((${#args[@]})); then
    go mod edit "${args[@]}" "$mod"
    echo "set-version.sh: $mod: ${args[*]}"
    changed=$((changed + 1))
  fi
done
echo "$version" >VERSION
echo "set-version.sh: VERSION=$version; $changed of ${#modules[@]} go.mod files name siblings"
