#!/usr/bin/env bash
# Packages every publishable crate (the library crates, the CLI and the sim it runs)
# as crates.io would take it, and builds each from its packaged sources against the
# packaged others (`cargo package` does both). Crates marked `publish = false`
# (examples, bench, test helpers) are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
# `publish` is null when the crate may go to any registry, [] for publish = false
print(" ".join("-p " + p["name"] for p in meta["packages"] if p["publish"] is None or p["publish"]))
')
echo "packaging: ${packages//-p /}"
# shellcheck disable=SC2086 # one word per flag
cargo package --locked "$@" $packages
