#!/usr/bin/env bash
# proxies.sh - install the proxies the proxy suite runs the adapters
# behind (slidelogtest.RunProxySuite): nginx (Debian package nginx-light)
# and haproxy, with apt-get, when missing. The tests start and stop them
# themselves, bound to loopback, with their own configuration; the
# packages' own services are not used (on a fresh Debian the package may
# start its service: it is stopped again so that it holds no port).
#
#   scripts/proxies.sh install
set -euo pipefail

log() { echo "proxies: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }

cmd_install() {
  local pkgs=()
  have nginx || pkgs+=(nginx-light)
  have haproxy || pkgs+=(haproxy)
  if ((${#pkgs[@]} == 0)); then
    log "nginx and haproxy already installed"
    return 0
  fi
  log "missing: ${pkgs[*]}; installing with apt-get"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${pkgs[*]} by hand"
  local sudo=()
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot apt-get install ${pkgs[*]}"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
  for svc in nginx haproxy; do
    if command -v systemctl >/dev/null 2>&1; then
      "${sudo[@]}" systemctl stop "$svc" >/dev/null 2>&1 || true
    fi
  done
  have nginx || die "nginx still not found after apt-get install"
  have haproxy || die "haproxy still not found after apt-get install"
  log "installed: $( (nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1) | head -n1), $( (haproxy -v 2>/dev/null || /usr/sbin/haproxy -v) | head -n1)"
}

case "${1:-}" in
  install) cmd_install ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
