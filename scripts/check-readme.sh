#!/usr/bin/env bash
# Follows README.md as a newcomer would: `cargo new`, the README's first
# [dependencies] block, the quickstart's src/main.rs, `cargo run`; then sends the
# receiver a signed event twice and checks it was stored once and applied once.
#
# The crates are not on crates.io yet, so the new project patches them to this
# checkout ([patch.crates-io]); everything else resolves from the workspace's
# Cargo.lock, offline, in the target directory the example copies share.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CHECK_EXAMPLES_TARGET_DIR:-$ROOT/target/examples-copy}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# as check-new.sh, which shares the target: no incremental caches for code built once
export CARGO_INCREMENTAL=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hookbox-readme.XXXXXX")"
RECEIVER=""
cleanup() {
  if [ -n "$RECEIVER" ]; then kill "$RECEIVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# the first ```toml block after "## Add it to your project", and the first
# ```rust block after "## Quickstart"
python3 - "$ROOT/README.md" "$WORK" <<'PY'
import re, sys
readme, work = sys.argv[1], sys.argv[2]
text = open(readme).read()
def block(after, lang):
    start = text.index(after)
    match = re.compile(r"^```" + lang + r"[^\n]*\n(.*?)^```$", re.S | re.M).search(text, start)
    return match.group(1)
open(f"{work}/deps.toml", "w").write(block("## Add it to your project", "toml"))
open(f"{work}/main.rs", "w").write(block("## Quickstart", "rust"))
PY

cargo new --quiet --vcs none --name readme-quickstart "$WORK/app"
APP="$WORK/app"
python3 - "$ROOT" "$APP" "$WORK/deps.toml" <<'PY'
import os, sys, tomllib
root, app, deps = sys.argv[1:4]
manifest = open(f"{app}/Cargo.toml").read()
block = open(deps).read()
assert block.startswith("[dependencies]"), block
manifest = manifest.replace("[dependencies]\n", block, 1)
members = tomllib.load(open(f"{root}/Cargo.toml", "rb"))["workspace"]["members"]
patch = ["", "[patch.crates-io]"]
for member in members:
    package = tomllib.load(open(f"{root}/{member}/Cargo.toml", "rb"))["package"]
    # the library crates a project depends on (not the CLI, the bench, the sim)
    if package["name"].startswith("hookbox-") and package.get("publish") is not False \
            and member.split("/")[0] in ("core", "providers", "stores", "integrations", "outbox"):
        patch.append(f'{package["name"]} = {{ path = "{root}/{member}" }}')
open(f"{app}/Cargo.toml", "w").write(manifest + "\n".join(patch) + "\n")
PY
cp "$WORK/main.rs" "$APP/src/main.rs"
cp "$ROOT/Cargo.lock" "$APP/Cargo.lock"
echo "== the README's Cargo.toml"
cat "$APP/Cargo.toml"

echo "== cargo build (offline, the workspace's lock file)"
(cd "$APP" && cargo build --quiet --offline)
BIN="$CARGO_TARGET_DIR/debug/readme-quickstart"

# the sender is the workspace's own `hookbox` binary, built where the tests built it
CARGO_TARGET_DIR="$ROOT/target" cargo build --quiet -p hookbox-cli
HOOKBOX="$ROOT/target/debug/hookbox"

echo "== run it and send a signed event twice"
(cd "$APP" && STRIPE_WEBHOOK_SECRET=whsec_test exec "$BIN" > "$WORK/out.log" 2> "$WORK/err.log") &
RECEIVER=$!
for _ in $(seq 1 100); do
  grep -q "^listening on " "$WORK/out.log" 2>/dev/null && break
  kill -0 "$RECEIVER" 2>/dev/null || { cat "$WORK/err.log"; echo "the quickstart exited" >&2; exit 1; }
  sleep 0.1
done
grep -q "^listening on " "$WORK/out.log" || { cat "$WORK/err.log"; echo "the quickstart never listened" >&2; exit 1; }
URL="$(sed -n 's/^listening on //p' "$WORK/out.log")/webhooks/stripe"
printf '{"id":"evt_1","type":"payment_intent.succeeded"}' > "$WORK/event.json"
"$HOOKBOX" send --provider stripe --secret whsec_test \
  --body-file "$WORK/event.json" --url "$URL" --copies 2 | tee "$WORK/send.log"
python3 - "$WORK/send.log" <<'PY'
import json, sys
answers = [json.loads(line) for line in open(sys.argv[1])]
outcomes = [(a["status"], json.loads(a["body"])["outcome"]) for a in answers]
assert outcomes == [(200, "stored"), (200, "duplicate")], outcomes
PY
for _ in $(seq 1 50); do
  grep -q "^applied evt_1" "$WORK/out.log" && break
  sleep 0.1
done
applied="$(grep -c '^applied evt_1' "$WORK/out.log" || true)"
[ "$applied" = 1 ] || { cat "$WORK/out.log"; echo "applied $applied times, not once" >&2; exit 1; }
ready="$(curl -s -o /dev/null -w '%{http_code}' "${URL%/webhooks/stripe}/readyz" || true)"
echo "ok: the README's quickstart built from a fresh cargo project, stored the event once, applied it once, /readyz $ready"
