#!/usr/bin/env bash
# modules.sh - print the module directories listed in go.work's `use`
# directives, one per line, relative to the repo root (e.g. "core").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ -f go.work ]] || { echo "modules.sh: no go.work in $ROOT" >&2; exit 1; }
# `go work edit -json` parses every form of use (single line, blocks,
# quoted paths, comments) without touching the network.
GOWORK="$ROOT/go.work" go work edit -json |
  sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)",\{0,1\}$/\1/p' |
  sed -e 's#^\./##' -e 's#/$##' -e 's#^$#.#'
