#!/usr/bin/env bash
# Times `hookbox sim` (release build) against the seed's Node original, on the same
# settings: both with their temp folder on tmpfs (/dev/shm), outputs compared table by
# table. The Node original needs Node 22.5+ (node:sqlite); without it only hookbox
# runs, and the script says so.
#
#   scripts/sim-timings.sh [runs]      # default 5 runs each; prints every run's wall time
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
tmp="${SIM_TMPDIR:-/dev/shm}"

cargo build -q --release -p hookbox-cli
hookbox=./target/release/hookbox
reference=sim/reference/webhook-sim.mjs

wall() { # prints the wall time of "$@" in ms; stdout to $out
  local start end
  start=$(date +%s%N)
  TMPDIR="$tmp" "$@" >"$out" 2>/dev/null
  end=$(date +%s%N)
  echo $(( (end - start) / 1000000 ))
}

out=$(mktemp)
trap 'rm -f "$out" "$out.node" "$out.hookbox"' EXIT
echo "machine: $(nproc) cores, $(uname -sm); temp folder: $tmp"
echo "hookbox: $("$hookbox" --version)"
echo -n "hookbox sim wall ms:"
for _ in $(seq "$runs"); do echo -n " $(wall "$hookbox" sim)"; done
echo
echo "hookbox sim --timings (one more run, per section, stderr):"
TMPDIR="$tmp" "$hookbox" sim --timings 2>&1 >/dev/null | sed 's/^/  /'

node_ok=0
if command -v node >/dev/null; then
  node -e 'require("node:sqlite")' 2>/dev/null && node_ok=1
fi
if [ "$node_ok" = 1 ]; then
  echo "node: $(node --version)"
  cp "$out" "$out.hookbox"
  echo -n "node webhook-sim.mjs wall ms:"
  for _ in $(seq "$runs"); do echo -n " $(wall node "$reference")"; done
  echo
  # every line but the four run-metadata lines must be the same
  if diff <(sed '3,6d' "$out.hookbox") <(sed '3,6d' "$out") >/dev/null; then
    echo "outputs: identical apart from the run metadata"
  else
    echo "outputs: DIFFERENT"; exit 1
  fi
  rm -f "$out.hookbox"
else
  echo "node: $(node --version 2>/dev/null || echo absent) has no node:sqlite (needs 22.5+); the Node original was not run"
fi
