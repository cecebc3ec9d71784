#!/usr/bin/env bash
# The main job until `hookbox demo` lands: for each provider, `hookbox sign` a sample
# delivery and feed its headers, unchanged, to `hookbox verify`. Prints one JSON line
# per provider and fails if any does not verify.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p hookbox-cli
hookbox=target/debug/hookbox
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%s' '{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1"}}}' > "$work/body.json"

roundtrip() {
  local provider=$1 secret=$2
  local args=() id=()
  # Stripe's event id is inside the body; the others send it in a header
  [ "$provider" = stripe ] || id=(--id "delivery-0001")
  while IFS= read -r line; do args+=(--header "$line"); done \
    < <("$hookbox" sign --provider "$provider" --secret "$secret" --body-file "$work/body.json" "${id[@]}")
  "$hookbox" verify --provider "$provider" --secret "$secret" --body-file "$work/body.json" "${args[@]}"
}

roundtrip stripe   whsec_test_secret
roundtrip shopify  shopify-client-secret
roundtrip github   "It's a Secret to Everybody"
roundtrip svix     whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
roundtrip standard whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
