#!/usr/bin/env bash
# faults.sh - run the fault suite (faulttest/, its own disposable Redis
# Cluster) and write its table into docs/operations.md between the
# "faults:begin" and "faults:end" markers. Figures come from a run without
# -race (the limiter as users build it); `make test` runs the same suite
# with -race and asserts only what must hold on any machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/redis-rig.sh install
report="$(mktemp)"
log="$(mktemp)"
trap 'rm -f "$report" "$log"' EXIT
started=$(date -u +%Y-%m-%d)
if ! (cd faulttest && SLIDELOG_FAULT_REPORT="$report" go test -count=1 -v -timeout 20m -parallel 4 -run '^TestFaults$' . 2>&1 | tee "$log" | grep --line-buffered 'FAULT\|FAILOVER\|--- FAIL\|^--- \|^FAIL\|^ok'); then
  echo "faults.sh: the fault suite failed; docs/operations.md left as it was" >&2
  exit 1
fi
[[ -s "$report" ]] || { echo "faults.sh: no report written" >&2; exit 1; }
machine="$(nproc) cores, $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/Redis \1/p'), $(go version | awk '{print $3}')"
{
  echo "<!-- faults:begin (written by make faults; do not edit by hand) -->"
  echo
  echo "Run of $started on this project's CI machine kind ($machine), no \`-race\`, nothing else running:"
  echo
  cat "$report"
  echo
  echo "<!-- faults:end -->"
} >"$report.section"
python3 - "$report.section" docs/operations.md <<'PY'
import re, sys
section = open(sys.argv[1]).read().rstrip("\n")
path = sys.argv[2]
doc = open(path).read()
pattern = re.compile(r"<!-- faults:begin.*?<!-- faults:end -->", re.S)
if not pattern.search(doc):
    sys.exit("faults.sh: markers not found in " + path)
open(path, "w").write(pattern.sub(lambda m: section, doc))
PY
rm -f "$report.section"
echo "faults.sh: table written into docs/operations.md"
