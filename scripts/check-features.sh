#!/usr/bin/env bash
# Optional features cost nothing when off: without `metrics` no crate pulls the
# metrics facade, and verifying a delivery pulls no async runtime (tokio).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
deps_of() { cargo tree -p "$1" -e normal --prefix none --offline 2>/dev/null | awk '{print $1}' | sort -u; }

for crate in hookbox-core hookbox-axum hookbox-outbox hookbox-redis-cache hookbox-sqlite hookbox-diesel-pg; do
  if deps_of "$crate" | grep -qx metrics; then
    echo "FAIL: $crate depends on metrics without its metrics feature" >&2
    fail=1
  else
    echo "ok: $crate without metrics: no metrics crate"
  fi
done
for crate in hookbox-stripe hookbox-shopify hookbox-github hookbox-svix hookbox-standard \
  hookbox-slack hookbox-twitch hookbox-zoom hookbox-discord hookbox-paddle \
  hookbox-twilio hookbox-square hookbox-gitlab hookbox-linear hookbox-custom; do
  if deps_of "$crate" | grep -qx tokio; then
    echo "FAIL: $crate (verify only) pulls tokio" >&2
    fail=1
  else
    echo "ok: $crate: $(deps_of "$crate" | wc -l) crates, no tokio"
  fi
done
# the broker clients only behind hookbox-outbox's `nats` and `amqp` features
for client in async-nats lapin; do
  if deps_of hookbox-outbox | grep -qx "$client"; then
    echo "FAIL: hookbox-outbox pulls $client without its broker feature" >&2
    fail=1
  else
    echo "ok: hookbox-outbox without nats/amqp: no $client"
  fi
done
# and on: the feature really brings the facade
if ! cargo tree -p hookbox-axum -e normal --features metrics --prefix none --offline | awk '{print $1}' | grep -qx metrics; then
  echo "FAIL: hookbox-axum --features metrics does not depend on metrics" >&2
  fail=1
fi
exit "$fail"
