//! Shopify verification: a hand-computed vector, both header families, tenant scoping,
//! rotation, and every header shape.
// helpers outside #[test] functions panic on a bad fixture, as the tests do
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_shopify::{CLASSIC, EVENTS, MIN_RETENTION, Shopify, ShopifySigner};
use proptest::prelude::*;

const SECRET: &str = "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";
const NEW_SECRET: &str = "shpss_the_new_client_secret";
const BODY: &str = r#"{"id":820982911946154508,"email":"jon@example.com","total_price":"199.00"}"#;
// python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(SECRET, BODY, hashlib.sha256).digest()).decode())'
const HMAC: &str = "R7lMh77oHXBotms/UVq2zJca4BPBqkW3FqfsNprj4wg=";
// the same with NEW_SECRET
const NEW_HMAC: &str = "5FL3MHl1beo2KTkfQMW6ntCopyZopG5/2YKLapvOZeU=";
const WEBHOOK_ID: &str = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043";
const EVENT_ID: &str = "98880550-7158-44d4-b7cd-2c97c8a091b5";
const SHOP: &str = "shop.myshopify.com";

fn now() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH
}

fn headers_from(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    headers
}

fn classic_headers() -> HeaderMap {
    headers_from(&[
        ("X-Shopify-Topic", "orders/create"),
        ("X-Shopify-Hmac-Sha256", HMAC),
        ("X-Shopify-Shop-Domain", SHOP),
        ("X-Shopify-API-Version", "2025-10"),
        ("X-Shopify-Webhook-Id", WEBHOOK_ID),
        ("X-Shopify-Triggered-At", "2025-10-01T12:00:00.123456789Z"),
        ("X-Shopify-Event-Id", EVENT_ID),
    ])
}

fn events_headers() -> HeaderMap {
    headers_from(&[
        ("shopify-topic", "orders/create"),
        ("shopify-hmac-sha256", HMAC),
        ("shopify-shop-domain", SHOP),
        ("shopify-api-version", "unstable"),
        ("shopify-webhook-id", WEBHOOK_ID),
        ("shopify-triggered-at", "2025-10-01T12:00:00Z"),
        ("shopify-event-id", EVENT_ID),
    ])
}

fn verify(
    shopify: &Shopify,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<VerifiedDelivery, VerifyError> {
    shopify.verify(headers, Bytes::copy_from_slice(body), now())
}

fn kind<T>(result: Result<T, VerifyError>) -> &'static str {
    result.err().map_or("ok", |e| e.kind())
}

fn with(mut headers: HeaderMap, name: &str, value: &[u8]) -> HeaderMap {
    headers.insert(
        HeaderName::from_bytes(name.as_bytes()).unwrap(),
        HeaderValue::from_bytes(value).unwrap(),
    );
    headers
}

fn without(mut headers: HeaderMap, name: &str) -> HeaderMap {
    headers.remove(name);
    headers
}

#[test]
fn the_hand_computed_vector_verifies_in_both_families() {
    let shopify = Shopify::new(SECRET).unwrap();
    for headers in [classic_headers(), events_headers()] {
        let delivery = verify(&shopify, &headers, BODY.as_bytes()).unwrap();
        assert_eq!(delivery.provider(), "shopify");
        let key = delivery.dedupe_key();
        assert_eq!(key.source(), "shopify");
        assert_eq!(key.tenant(), Some(SHOP));
        assert_eq!(key.delivery_id(), WEBHOOK_ID);
        assert_eq!(delivery.correlation_id(), Some(EVENT_ID));
        assert_eq!(delivery.event_type(), Some("orders/create"));
        assert_eq!(delivery.signed_at(), None);
        assert_eq!(delivery.body().as_ref(), BODY.as_bytes());
        // every Shopify header is kept, the informational ones too
        assert_eq!(delivery.headers().len(), 7);
    }
    assert_eq!(shopify.name(), "shopify");
    assert_eq!(shopify.min_retention(), MIN_RETENTION);
    assert_eq!(MIN_RETENTION.as_duration(), Duration::from_secs(4 * 3600));
}

#[test]
fn the_signer_reproduces_the_vector_in_both_families() {
    let signer = ShopifySigner::new(SECRET)
        .unwrap()
        .shop_domain(SHOP)
        .event_id(EVENT_ID);
    let classic = signer.sign(WEBHOOK_ID, 1_759_320_000, BODY.as_bytes());
    assert_eq!(
        classic.to_string(),
        format!(
            "X-Shopify-Topic: orders/create\nX-Shopify-Hmac-Sha256: {HMAC}\n\
             X-Shopify-Shop-Domain: {SHOP}\nX-Shopify-API-Version: 2025-10\n\
             X-Shopify-Webhook-Id: {WEBHOOK_ID}\nX-Shopify-Triggered-At: 2025-10-01T12:00:00Z\n\
             X-Shopify-Event-Id: {EVENT_ID}\n"
        )
    );
    let events = signer
        .clone()
        .events_family(true)
        .topic("products/update")
        .api_version("unstable")
        .sign(WEBHOOK_ID, 1_759_320_000, BODY.as_bytes());
    assert_eq!(events.get("shopify-hmac-sha256"), Some(HMAC));
    assert_eq!(events.get("shopify-webhook-id"), Some(WEBHOOK_ID));
    assert_eq!(events.get("shopify-topic"), Some("products/update"));
    assert_eq!(events.get("shopify-api-version"), Some("unstable"));
    assert_eq!(events.get("X-Shopify-Hmac-Sha256"), None);
    assert!(events.iter().all(|(name, _)| name.starts_with("shopify-")));

    // defaults: the event id is the webhook id, the shop and topic are examples
    let plain = ShopifySigner::new(SECRET).unwrap().sign("wh-1", 0, b"{}");
    assert_eq!(plain.get("x-shopify-event-id"), Some("wh-1"));
    assert_eq!(
        plain.get("x-shopify-shop-domain"),
        Some("example.myshopify.com")
    );
    assert_eq!(plain.get("x-shopify-topic"), Some("orders/create"));
    assert_eq!(
        plain.get("x-shopify-triggered-at"),
        Some("1970-01-01T00:00:00Z")
    );
    let out_of_range = ShopifySigner::new(SECRET)
        .unwrap()
        .sign("wh-1", i64::MAX, b"{}");
    assert_eq!(out_of_range.get("x-shopify-triggered-at"), None);
}

#[test]
fn the_classic_family_wins_when_both_are_sent() {
    let shopify = Shopify::new(SECRET).unwrap();
    let mut headers = classic_headers();
    for (name, value) in events_headers() {
        headers.insert(name.unwrap(), value);
    }
    headers = with(headers, "shopify-webhook-id", b"events-id");
    headers = with(headers, "shopify-hmac-sha256", b"not base64 at all");
    let delivery = verify(&shopify, &headers, BODY.as_bytes()).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), WEBHOOK_ID);
    // only the headers it was verified with are kept, one of each
    assert_eq!(delivery.headers().len(), 7);
    assert!(delivery.headers().get("shopify-webhook-id").is_none());

    // the families may also be mixed, one header from each
    let mixed = headers_from(&[("shopify-hmac-sha256", HMAC), ("X-Shopify-Webhook-Id", "w")]);
    assert_eq!(kind(verify(&shopify, &mixed, BODY.as_bytes())), "ok");
}

#[test]
fn two_subscriptions_are_two_deliveries_and_two_shops_two_tenants() {
    let shopify = Shopify::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let first = ShopifySigner::new(SECRET).unwrap().event_id(EVENT_ID);
    let key = |signer: &ShopifySigner, id: &str| {
        verify(&shopify, &signer.sign(id, 0, body).to_header_map(), body)
            .unwrap()
            .dedupe_key()
            .clone()
    };
    // one merchant action, two subscriptions: same event id, different webhook ids
    let a = key(&first, "webhook-a");
    let b = key(&first, "webhook-b");
    assert_ne!(a, b, "deduplicating on the event id would drop the second");

    // the same webhook id from two shops is two deliveries
    let shop_one = first.clone().shop_domain("one.myshopify.com");
    let shop_two = first.shop_domain("two.myshopify.com");
    let one = key(&shop_one, WEBHOOK_ID);
    let two = key(&shop_two, WEBHOOK_ID);
    assert_ne!(one, two);
    assert_eq!(one.delivery_id(), two.delivery_id());
    assert_eq!(one.tenant(), Some("one.myshopify.com"));
    assert_eq!(one.scope(), "shopify/one.myshopify.com");
    // and a retry of one delivery is the same key
    assert_eq!(one, key(&shop_one, WEBHOOK_ID));

    // without a shop domain the key has no tenant
    let headers = without(classic_headers(), "x-shopify-shop-domain");
    let delivery = verify(&shopify, &headers, body).unwrap();
    assert_eq!(delivery.dedupe_key().tenant(), None);
}

#[test]
fn either_secret_verifies_during_rotation() {
    let body = BODY.as_bytes();
    for receiver in [[SECRET, NEW_SECRET], [NEW_SECRET, SECRET]] {
        let shopify = Shopify::new(receiver).unwrap();
        assert_eq!(kind(verify(&shopify, &classic_headers(), body)), "ok");
        let new = with(
            classic_headers(),
            "x-shopify-hmac-sha256",
            NEW_HMAC.as_bytes(),
        );
        assert_eq!(kind(verify(&shopify, &new, body)), "ok");
    }
    let shopify = Shopify::new(NEW_SECRET).unwrap();
    assert_eq!(
        kind(verify(&shopify, &classic_headers(), body)),
        "signature_mismatch"
    );
}

#[test]
fn header_names_are_case_insensitive() {
    let shopify = Shopify::new(SECRET).unwrap();
    let headers = headers_from(&[
        ("X-SHOPIFY-HMAC-SHA256", HMAC),
        ("x-shopify-webhook-id", WEBHOOK_ID),
        ("X-Shopify-Shop-DOMAIN", SHOP),
    ]);
    let delivery = verify(&shopify, &headers, BODY.as_bytes()).unwrap();
    assert_eq!(delivery.dedupe_key().tenant(), Some(SHOP));
    let headers = headers_from(&[("Shopify-Hmac-SHA256", HMAC), ("SHOPIFY-WEBHOOK-ID", "w")]);
    assert_eq!(kind(verify(&shopify, &headers, BODY.as_bytes())), "ok");
}

#[test]
fn an_empty_body_is_malformed_only_once_its_signature_verifies() {
    let shopify = Shopify::new(SECRET).unwrap();
    let signed_empty = ShopifySigner::new(SECRET).unwrap().sign("w", 0, b"");
    assert_eq!(
        kind(verify(&shopify, &signed_empty.to_header_map(), b"")),
        "malformed_body"
    );
    assert_eq!(
        kind(verify(&shopify, &classic_headers(), b"")),
        "signature_mismatch"
    );
    // the body is never parsed: anything non-empty that is signed verifies
    for body in [&b"not json"[..], b"\xff\xfe\x00", b" "] {
        let headers = ShopifySigner::new(SECRET).unwrap().sign("w", 0, body);
        assert_eq!(kind(verify(&shopify, &headers.to_header_map(), body)), "ok");
    }
}

#[test]
fn required_headers_are_named_when_missing() {
    let shopify = Shopify::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    for (headers, named) in [
        (
            without(classic_headers(), "x-shopify-hmac-sha256"),
            "X-Shopify-Hmac-Sha256",
        ),
        (
            without(events_headers(), "shopify-hmac-sha256"),
            "X-Shopify-Hmac-Sha256",
        ),
        (
            with(classic_headers(), "x-shopify-hmac-sha256", b""),
            "X-Shopify-Hmac-Sha256",
        ),
        (
            without(classic_headers(), "x-shopify-webhook-id"),
            "X-Shopify-Webhook-Id",
        ),
        (
            without(events_headers(), "shopify-webhook-id"),
            "X-Shopify-Webhook-Id",
        ),
        (
            with(classic_headers(), "x-shopify-webhook-id", b""),
            "X-Shopify-Webhook-Id",
        ),
    ] {
        let err = verify(&shopify, &headers, body).unwrap_err();
        assert_eq!(
            err,
            VerifyError::MissingHeader {
                header: named.to_string()
            }
        );
    }
    assert_eq!(
        kind(verify(&shopify, &HeaderMap::new(), body)),
        "missing_header"
    );
    // the optional ones are optional
    let minimal = headers_from(&[
        ("X-Shopify-Hmac-Sha256", HMAC),
        ("X-Shopify-Webhook-Id", "w"),
    ]);
    let delivery = verify(&shopify, &minimal, body).unwrap();
    assert_eq!(delivery.correlation_id(), None);
    assert_eq!(delivery.event_type(), None);
    assert_eq!(delivery.dedupe_key().tenant(), None);
}

#[test]
fn a_hmac_that_is_not_base64_of_32_bytes_is_malformed() {
    let shopify = Shopify::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    for value in [
        "not base64!",
        "YWJj",
        "R7lMh77oHXBotms/UVq2zJca4BPBqkW3FqfsNprj4wg=AAAA",
        "sha256=R7lMh77oHXBotms/UVq2zJca4BPBqkW3FqfsNprj4wg=",
        "47b94c87bee81d7068b66b3f515ab6cc971ae013c1aa45b716a7ec369ae3e308",
    ] {
        let headers = with(classic_headers(), "x-shopify-hmac-sha256", value.as_bytes());
        let err = verify(&shopify, &headers, body).unwrap_err();
        assert_eq!(err.kind(), "malformed_header", "{value}");
        assert!(err.to_string().contains("X-Shopify-Hmac-Sha256"), "{err}");
        let headers = with(events_headers(), "shopify-hmac-sha256", value.as_bytes());
        let err = verify(&shopify, &headers, body).unwrap_err();
        assert!(err.to_string().contains("`shopify-hmac-sha256`"), "{err}");
    }
}

#[test]
fn only_the_canonical_base64_matches_as_in_shopifys_libraries() {
    // @shopify/shopify-api computes the base64 HMAC and compares the text
    // (lib/utils/hmac-validator.ts `validateHmacString` and `safeCompare`), so another
    // spelling of the same MAC is a mismatch, never a pass
    let shopify = Shopify::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let cases = [
        (HMAC.trim_end_matches('=').to_string(), "padding"),
        (HMAC.replace('/', "_"), "URL-safe"),
        // `g` is 0b100000; `h` sets a bit that 32 bytes leave unused
        (HMAC.replace("4wg=", "4wh="), "trailing bits"),
    ];
    for (value, spelling) in cases {
        assert_ne!(value, HMAC);
        let headers = with(classic_headers(), "x-shopify-hmac-sha256", value.as_bytes());
        let err = verify(&shopify, &headers, body).unwrap_err();
        assert_eq!(err.kind(), "signature_mismatch", "{value}");
        assert!(err.to_string().contains(spelling), "{value}: {err}");
    }
    assert_eq!(kind(verify(&shopify, &classic_headers(), body)), "ok");
}

#[test]
fn duplicated_or_non_ascii_headers_are_malformed() {
    let shopify = Shopify::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    for name in [
        "x-shopify-hmac-sha256",
        "x-shopify-webhook-id",
        "x-shopify-event-id",
        "x-shopify-shop-domain",
        "x-shopify-topic",
    ] {
        let mut duplicated = classic_headers();
        let copy = duplicated.get(name).unwrap().clone();
        duplicated.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), copy);
        assert_eq!(
            kind(verify(&shopify, &duplicated, body)),
            "malformed_header",
            "{name}"
        );

        let non_ascii = with(classic_headers(), name, "caf\u{e9}".as_bytes());
        assert_eq!(
            kind(verify(&shopify, &non_ascii, body)),
            "malformed_header",
            "{name}"
        );
    }
    let mut duplicated = events_headers();
    duplicated.append("shopify-webhook-id", HeaderValue::from_static("other"));
    assert_eq!(
        kind(verify(&shopify, &duplicated, body)),
        "malformed_header"
    );
}

#[test]
fn a_body_over_the_limit_is_refused_before_anything_else() {
    let body = BODY.as_bytes();
    let small = Shopify::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(body.len() - 1));
    assert_eq!(
        kind(verify(&small, &classic_headers(), body)),
        "body_too_large"
    );
    assert_eq!(
        kind(verify(&small, &HeaderMap::new(), body)),
        "body_too_large"
    );
    let exact = Shopify::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(body.len()));
    assert_eq!(kind(verify(&exact, &classic_headers(), body)), "ok");
}

#[test]
fn no_timestamp_is_checked_and_the_source_option_scopes_the_key() {
    let shopify = Shopify::new(SECRET).unwrap().with_options(
        VerifyOptions::default()
            .tolerance(Duration::ZERO)
            .source("store-a"),
    );
    let far_future = OffsetDateTime::from_unix_timestamp(4_000_000_000).unwrap();
    let delivery = shopify
        .verify(
            &classic_headers(),
            Bytes::from_static(BODY.as_bytes()),
            far_future,
        )
        .unwrap();
    assert_eq!(delivery.dedupe_key().source(), "store-a");
    assert_eq!(delivery.dedupe_key().scope(), format!("store-a/{SHOP}"));
}

#[test]
fn the_mismatch_message_names_the_likely_cause() {
    let body = BODY.as_bytes();
    let shopify = Shopify::new(format!(" {SECRET}")).unwrap();
    let err = verify(&shopify, &classic_headers(), body).unwrap_err();
    assert_eq!(err.kind(), "signature_mismatch");
    assert!(err.to_string().contains("whitespace"), "{err}");

    let shopify = Shopify::new(SECRET).unwrap();
    let with_newline = format!("{BODY}\n");
    let err = verify(&shopify, &classic_headers(), with_newline.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("trailing whitespace"), "{err}");
}

#[test]
fn blank_or_absent_secrets_are_refused() {
    for secrets in [vec![""], vec!["\t"], vec![SECRET, ""], vec![]] {
        assert_eq!(
            Shopify::new(secrets.clone()).unwrap_err().kind(),
            "invalid_secret",
            "{secrets:?}"
        );
    }
    assert_eq!(
        ShopifySigner::new(" ").unwrap_err().kind(),
        "invalid_secret"
    );
}

#[test]
fn the_header_families_are_spelled_as_documented() {
    assert_eq!(CLASSIC.hmac.label(), "X-Shopify-Hmac-Sha256");
    assert_eq!(CLASSIC.webhook_id.label(), "X-Shopify-Webhook-Id");
    assert_eq!(CLASSIC.api_version.label(), "X-Shopify-API-Version");
    assert_eq!(EVENTS.hmac.name().as_str(), "shopify-hmac-sha256");
    assert_eq!(EVENTS.webhook_id.name().as_str(), "shopify-webhook-id");
    assert_eq!(EVENTS.event_id.name().as_str(), "shopify-event-id");
    assert_eq!(EVENTS.shop_domain.name().as_str(), "shopify-shop-domain");
    assert_eq!(EVENTS.topic.name().as_str(), "shopify-topic");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn signed_deliveries_round_trip(
        body in proptest::collection::vec(any::<u8>(), 1..400),
        id in "[A-Za-z0-9-]{1,40}",
        timestamp in any::<i64>(),
        events in any::<bool>(),
    ) {
        let shopify = Shopify::new(SECRET).unwrap();
        let signer = ShopifySigner::new(SECRET).unwrap().events_family(events);
        let headers = signer.sign(&id, timestamp, &body).to_header_map();
        let delivery = verify(&shopify, &headers, &body).unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.body().as_ref(), body.as_slice());
    }

    #[test]
    fn any_one_byte_change_to_the_body_fails(
        body in proptest::collection::vec(any::<u8>(), 1..200),
        index in any::<prop::sample::Index>(),
        delta in 1_u8..=255,
    ) {
        let shopify = Shopify::new(SECRET).unwrap();
        let headers = ShopifySigner::new(SECRET).unwrap().sign("w", 0, &body).to_header_map();
        let mut changed = body.clone();
        let i = index.index(changed.len());
        changed[i] = changed[i].wrapping_add(delta);
        prop_assert_eq!(kind(verify(&shopify, &headers, &changed)), "signature_mismatch");
    }

    #[test]
    fn any_one_byte_change_to_the_id_changes_the_key(
        id in "[A-Za-z0-9]{1,40}",
        index in any::<prop::sample::Index>(),
        replacement in "[A-Za-z0-9]",
    ) {
        // the webhook id is not signed: a changed id verifies, as a different delivery
        let shopify = Shopify::new(SECRET).unwrap();
        let signer = ShopifySigner::new(SECRET).unwrap();
        let i = index.index(id.len());
        let mut changed = id.clone();
        changed.replace_range(i..=i, &replacement);
        prop_assume!(changed != id);
        let key = |id: &str| {
            verify(&shopify, &signer.sign(id, 0, BODY.as_bytes()).to_header_map(), BODY.as_bytes())
                .map(|d| d.dedupe_key().clone())
        };
        prop_assert_ne!(key(&id).unwrap(), key(&changed).unwrap());
    }

    #[test]
    fn any_one_character_change_to_the_hmac_fails(
        index in 0_usize..42,
        replacement in "[A-Za-z0-9+/]",
    ) {
        let shopify = Shopify::new(SECRET).unwrap();
        let mut hmac = HMAC.to_string();
        hmac.replace_range(index..=index, &replacement);
        prop_assume!(hmac != HMAC);
        let headers = with(classic_headers(), "x-shopify-hmac-sha256", hmac.as_bytes());
        prop_assert_eq!(kind(verify(&shopify, &headers, BODY.as_bytes())), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(
        value in proptest::collection::vec(any::<u8>(), 0..120),
        which in 0_usize..4,
    ) {
        let shopify = Shopify::new(SECRET).unwrap();
        let name = ["x-shopify-hmac-sha256", "shopify-hmac-sha256", "x-shopify-webhook-id", "shopify-shop-domain"][which];
        if let Ok(value) = HeaderValue::from_bytes(&value) {
            let mut headers = classic_headers();
            headers.insert(name, value);
            let _ = verify(&shopify, &headers, BODY.as_bytes());
        }
    }
}
