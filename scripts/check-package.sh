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
# cargo unpacks each packaged crate from its temporary local registry into
# $CARGO_HOME/registry/src/<that registry>/ and never unpacks the same name and version
# again, and fingerprints a registry crate by name and version alone, so a second run
# would verify against the first run's sources and builds: drop our own crates from
# those local-registry folders (crates.io's folder is left alone) and their
# fingerprints (our crates rebuild; their dependencies stay built)
target_dir=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
for name in ${packages//-p /}; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$name"-[0-9]*
  rm -rf "$target_dir"/debug/.fingerprint/"$name"-*
done
# shellcheck disable=SC2086 # one word per flag
cargo package --locked "$@" $packages
