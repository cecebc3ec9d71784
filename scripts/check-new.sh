#!/usr/bin/env bash
# Runs `hookbox new` for every provider as a new user would, outside this workspace,
# and checks that `cargo build && cargo test` pass in each new directory with nothing
# edited. The crates are not on crates.io yet, so each project takes them from this
# checkout (`--hookbox-path`); everything else resolves from the workspace's
# Cargo.lock, offline.
#
# All projects share one target directory with scripts/check-examples.sh and
# scripts/check-readme.sh (CHECK_EXAMPLES_TARGET_DIR, by default
# target/examples-copy), so dependencies compile once; the summary prints how long
# each project took; a stripe project with `--store postgres --cache redis --outbox
# nats` is checked too. For github, svix and standard it then runs the new README's
# commands as written in the new directory (scripts/check-readme-commands.sh
# --project). The tests read HOOKBOX_PG_URL / HOOKBOX_REDIS_URL as the
# examples' tests do (they skip without them unless HOOKBOX_REQUIRE_SERVICES=1).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CHECK_EXAMPLES_TARGET_DIR:-$ROOT/target/examples-copy}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# no incremental caches for code built once per run: they only cost disk
export CARGO_INCREMENTAL=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hookbox-new.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# the `hookbox` a user would have installed, built where the workspace's tests build it
CARGO_TARGET_DIR="$ROOT/target" cargo build --quiet -p hookbox-cli
HOOKBOX="$ROOT/target/debug/hookbox"

# the providers whose new README's commands are run too (scripts/check-readme-commands.sh
# --project): those whose README follows the run-it / what-to-expect layout
README_PROVIDERS="${CHECK_NEW_README_PROVIDERS:-github svix standard}"

# every provider `hookbox new` has an example for (default: all), or those given
providers=("$@")
if [ "${#providers[@]}" -eq 0 ]; then
  for dir in cli/scaffold/*/; do providers+=("$(basename "$dir")"); done
fi

failed=0
summary=()
total_start=$SECONDS

# new_project <dir> <label> <hookbox new flags…>: writes the project, then runs
# `cargo build && cargo test` in it; records the outcome under <label>
new_project() {
  local project="$1" label="$2"
  shift 2
  echo "== hookbox new $(basename "$project") $*"
  "$HOOKBOX" new "$project" "$@" --hookbox-path "$ROOT"
  # the versions the workspace tests; --offline, not --locked: cargo prunes the lock
  # to what this project uses
  cp Cargo.lock "$project/Cargo.lock"
  local start=$SECONDS
  if (cd "$project" && cargo build --offline && cargo test --offline); then
    summary+=("$label: cargo build && cargo test passed in $((SECONDS - start)) s")
  else
    failed=1
    summary+=("$label: FAILED after $((SECONDS - start)) s")
    return 1
  fi
}

for provider in "${providers[@]}"; do
  project="$WORK/$provider-receiver"
  new_project "$project" "$provider" --provider "$provider" || continue
  # the new README's commands, as written, in the new directory
  if [[ " $README_PROVIDERS " == *" $provider "* ]]; then
    start=$SECONDS
    if PATH="$(dirname "$HOOKBOX"):$PATH" bash scripts/check-readme-commands.sh --project "$project" "$provider"; then
      summary+=("$provider: its README's commands ran as written in $((SECONDS - start)) s")
    else
      failed=1
      summary+=("$provider: its README's commands FAILED (see above)")
    fi
  fi
done

# one project with the other choices: Postgres as its default store, the Redis cache
# built in (its tests then run on both services, as the example's own `--features
# postgres` tests do) and a relay built for JetStream only (its test checks that an
# http:// sink URL is refused); CHECK_NEW_CACHED=0 skips it
if [ "${CHECK_NEW_CACHED:-1}" = 1 ] && [[ " ${providers[*]} " == *" stripe "* ]]; then
  new_project "$WORK/stripe-cached" "stripe --store postgres --cache redis --outbox nats" \
    --provider stripe --store postgres --cache redis --outbox nats || true
fi

echo "== check-new summary (target dir $CARGO_TARGET_DIR, $((SECONDS - total_start)) s in all)"
printf '%s\n' "${summary[@]}"
exit "$failed"
