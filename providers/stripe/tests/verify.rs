//! Stripe verification: a hand-computed vector, rotation, the timestamp window, the
//! body rules, and every header shape.
// helpers outside #[test] functions panic on a bad fixture, as the tests do
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_stripe::{MIN_RETENTION, Stripe, StripeSigner};
use proptest::prelude::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEW_SECRET: &str = "whsec_new_secret_after_rotation";
const T: i64 = 1_614_265_330;
const BODY: &str = r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent"}}}"#;
// python3 -c 'import hmac,hashlib; print(hmac.new(SECRET, b"1614265330." + BODY, hashlib.sha256).hexdigest())'
const SIG: &str = "529b1e193450b767746621c2d9203444b7a013e87d5e726a524e7007d7a69b52";
// the same with NEW_SECRET
const NEW_SIG: &str = "53f6913190b2060b9504698e34d3d805e195aa10534da17db9f5a630bd23114e";

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn header(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("stripe-signature", HeaderValue::from_str(value).unwrap());
    headers
}

fn valid_header() -> HeaderMap {
    header(&format!("t={T},v1={SIG}"))
}

fn verify_at(
    stripe: &Stripe,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<VerifiedDelivery, VerifyError> {
    stripe.verify(headers, Bytes::copy_from_slice(body), at(now))
}

fn kind<T>(result: Result<T, VerifyError>) -> &'static str {
    result.err().map_or("ok", |e| e.kind())
}

/// Signs `body` with `secret` at `t` the way Stripe does.
fn signed(secret: &str, t: i64, body: &[u8]) -> HeaderMap {
    StripeSigner::new(secret)
        .unwrap()
        .sign("", t, body)
        .to_header_map()
}

#[test]
fn the_hand_computed_vector_verifies() {
    let stripe = Stripe::new(SECRET).unwrap();
    let delivery = verify_at(&stripe, &valid_header(), BODY.as_bytes(), T).unwrap();
    assert_eq!(delivery.provider(), "stripe");
    assert_eq!(delivery.dedupe_key().source(), "stripe");
    assert_eq!(delivery.dedupe_key().tenant(), None);
    assert_eq!(
        delivery.dedupe_key().delivery_id(),
        "evt_1NG8Du2eZvKYlo2CUI79vXWy"
    );
    assert_eq!(delivery.event_type(), Some("payment_intent.succeeded"));
    assert_eq!(
        delivery.correlation_id(),
        Some("pi_3NG8Du2eZvKYlo2C1:payment_intent.succeeded")
    );
    assert_eq!(delivery.signed_at(), Some(at(T)));
    assert_eq!(delivery.body().as_ref(), BODY.as_bytes());
    assert_eq!(delivery.headers().len(), 1);
    assert_eq!(
        delivery.headers().get("stripe-signature").unwrap(),
        &format!("t={T},v1={SIG}")
    );
    assert_eq!(stripe.name(), "stripe");
    assert_eq!(stripe.min_retention(), MIN_RETENTION);
    assert_eq!(
        MIN_RETENTION.as_duration(),
        Duration::from_secs(30 * 86_400)
    );
}

#[test]
fn the_signer_reproduces_the_vector() {
    let headers = StripeSigner::new(SECRET)
        .unwrap()
        .sign("ignored", T, BODY.as_bytes());
    assert_eq!(
        headers.get("Stripe-Signature"),
        Some(format!("t={T},v1={SIG}").as_str())
    );
    let both = StripeSigner::new([SECRET, NEW_SECRET])
        .unwrap()
        .sign("", T, BODY.as_bytes());
    assert_eq!(
        both.to_string(),
        format!("Stripe-Signature: t={T},v1={SIG},v1={NEW_SIG}\n")
    );
}

#[test]
fn the_source_option_scopes_the_key() {
    let stripe = Stripe::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().source("billing"));
    let delivery = verify_at(&stripe, &valid_header(), BODY.as_bytes(), T).unwrap();
    assert_eq!(delivery.dedupe_key().source(), "billing");
    assert_eq!(delivery.provider(), "stripe");
}

#[test]
fn either_secret_and_either_signature_verifies_during_rotation() {
    let body = BODY.as_bytes();
    // the receiver holds both secrets, the sender signs with one
    for receiver in [[SECRET, NEW_SECRET], [NEW_SECRET, SECRET]] {
        let stripe = Stripe::new(receiver).unwrap();
        assert_eq!(kind(verify_at(&stripe, &valid_header(), body, T)), "ok");
        let new_only = header(&format!("t={T},v1={NEW_SIG}"));
        assert_eq!(kind(verify_at(&stripe, &new_only, body, T)), "ok");
    }
    // the sender signs with both, the receiver holds either one
    let both = header(&format!("t={T},v1={SIG},v1={NEW_SIG}"));
    let both_reversed = header(&format!("t={T},v1={NEW_SIG},v1={SIG}"));
    for receiver in [SECRET, NEW_SECRET] {
        let stripe = Stripe::new(receiver).unwrap();
        assert_eq!(kind(verify_at(&stripe, &both, body, T)), "ok");
        assert_eq!(kind(verify_at(&stripe, &both_reversed, body, T)), "ok");
    }
    let stripe = Stripe::new("whsec_neither").unwrap();
    assert_eq!(
        kind(verify_at(&stripe, &both, body, T)),
        "signature_mismatch"
    );
}

#[test]
fn v0_alone_is_malformed_and_ignored_beside_v1() {
    let stripe = Stripe::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let err = verify_at(&stripe, &header(&format!("t={T},v0={SIG}")), body, T).unwrap_err();
    assert_eq!(err.kind(), "malformed_header");
    assert!(err.to_string().contains("no `v1=` signature"), "{err}");
    // a valid v0 never passes, however it is combined
    let v0_then_bad_v1 = header(&format!("t={T},v0={SIG},v1={NEW_SIG}"));
    assert_eq!(
        kind(verify_at(&stripe, &v0_then_bad_v1, body, T)),
        "signature_mismatch"
    );
    let with_v0 = header(&format!(
        "t={T},v1={SIG},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
    ));
    assert_eq!(kind(verify_at(&stripe, &with_v0, body, T)), "ok");
    // unknown schemes and items without `=` are ignored too
    let extra = header(&format!("scheme=x, t={T} ,junk, v2=abc ,v1={SIG},"));
    assert_eq!(kind(verify_at(&stripe, &extra, body, T)), "ok");
}

#[test]
fn the_timestamp_window_is_inclusive_in_both_directions() {
    let stripe = Stripe::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let headers = valid_header();
    assert_eq!(kind(verify_at(&stripe, &headers, body, T + 300)), "ok");
    assert_eq!(
        kind(verify_at(&stripe, &headers, body, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(kind(verify_at(&stripe, &headers, body, T - 300)), "ok");
    assert_eq!(
        kind(verify_at(&stripe, &headers, body, T - 301)),
        "timestamp_in_future"
    );

    let strict = Stripe::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().tolerance(Duration::from_secs(10)));
    assert_eq!(kind(verify_at(&strict, &headers, body, T + 10)), "ok");
    assert_eq!(kind(verify_at(&strict, &headers, body, T - 10)), "ok");
    assert_eq!(
        kind(verify_at(&strict, &headers, body, T + 11)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(verify_at(&strict, &headers, body, T - 11)),
        "timestamp_in_future"
    );
    let err = verify_at(&strict, &headers, body, T + 70).unwrap_err();
    assert!(err.to_string().contains("clock is 60 s ahead"), "{err}");
}

#[test]
fn header_names_are_case_insensitive() {
    let stripe = Stripe::new(SECRET).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_bytes(b"STRIPE-SIGNATURE").unwrap(),
        HeaderValue::from_str(&format!("t={T},v1={SIG}")).unwrap(),
    );
    assert_eq!(kind(verify_at(&stripe, &headers, BODY.as_bytes(), T)), "ok");
}

#[test]
fn upper_case_hex_is_a_mismatch_as_in_stripes_libraries() {
    // stripe-node computes the lower-case hex and compares the text
    // (src/Webhooks.ts `secureCompare`), so no other spelling of the MAC matches
    let stripe = Stripe::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let mixed = format!("{}{}", &SIG[..8].to_uppercase(), &SIG[8..]);
    for sig in [SIG.to_uppercase(), mixed] {
        let err = verify_at(&stripe, &header(&format!("t={T},v1={sig}")), body, T).unwrap_err();
        assert_eq!(err.kind(), "signature_mismatch", "{sig}");
        assert!(err.to_string().contains("upper-case hex"), "{err}");
        // beside the canonical spelling it changes nothing
        assert_eq!(
            kind(verify_at(
                &stripe,
                &header(&format!("t={T},v1={sig},v1={SIG}")),
                body,
                T
            )),
            "ok"
        );
        // beside another canonical signature, the usual diagnosis applies
        let err = verify_at(
            &stripe,
            &header(&format!("t={T},v1={sig},v1={NEW_SIG}")),
            body,
            T,
        )
        .unwrap_err();
        assert_eq!(err.kind(), "signature_mismatch");
        assert!(err.to_string().contains("no configured secret"), "{err}");
    }
    // the signer writes lower-case hex
    let signed = signed(SECRET, T, body);
    let value = signed.get("stripe-signature").unwrap().to_str().unwrap();
    assert!(!value.bytes().any(|b| b.is_ascii_uppercase()), "{value}");
}

#[test]
fn the_body_is_checked_after_a_valid_signature() {
    let stripe = Stripe::new(SECRET).unwrap();
    let check = |body: &[u8]| kind(verify_at(&stripe, &signed(SECRET, T, body), body, T));
    assert_eq!(check(b""), "malformed_body");
    assert_eq!(check(b"not json"), "malformed_body");
    assert_eq!(check(br#"{"id":"evt_1""#), "malformed_body");
    assert_eq!(check(br#"{"id":"evt_1"} {}"#), "malformed_body");
    assert_eq!(check(b"{\"id\":\"evt_\xff\"}"), "malformed_body");
    // a repeated id counts once, the first
    let body = br#"{"id":"evt_1","id":"evt_2"}"#;
    let delivery = verify_at(&stripe, &signed(SECRET, T, body), body, T).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "evt_1");
    // the scan stops once `id`, `type` and `data.object.id` are read: what follows is
    // authenticated by the signature and checked when a handler parses the body
    let body = br#"{"id":"evt_1","type":"t","data":{"object":{"id":"o"}}} trailing"#;
    assert_eq!(check(body), "ok");
    assert_eq!(check(br#"{"object":"event"}"#), "missing_dedupe_key");
    assert_eq!(check(br#"{"id":42}"#), "missing_dedupe_key");
    assert_eq!(check(br#"{"id":null}"#), "missing_dedupe_key");
    assert_eq!(check(br#"{"id":""}"#), "missing_dedupe_key");
    assert_eq!(check(br#"{"data":{"id":"evt_1"}}"#), "missing_dedupe_key");
    assert_eq!(check(br#"["evt_1"]"#), "missing_dedupe_key");
    assert_eq!(check(b"null"), "missing_dedupe_key");
    assert_eq!(check(br#"{"id":"evt_1"}"#), "ok");

    let err = verify_at(&stripe, &signed(SECRET, T, b"{}"), b"{}", T).unwrap_err();
    assert_eq!(
        err,
        VerifyError::MissingDedupeKey {
            field: "id".to_string()
        }
    );

    // before the signature is known good, the body's shape is never reported
    let forged = signed("whsec_forger", T, b"");
    assert_eq!(
        kind(verify_at(&stripe, &forged, b"", T)),
        "signature_mismatch"
    );
    // nor before the timestamp is
    let stale = signed(SECRET, T, b"not json");
    assert_eq!(
        kind(verify_at(&stripe, &stale, b"not json", T + 301)),
        "timestamp_too_old"
    );
}

#[test]
fn optional_event_fields_stay_optional() {
    let stripe = Stripe::new(SECRET).unwrap();
    let body =
        br#"{"id":"evt_\u0031","type":"customer.created","data":{"object":{"object":"customer"}}}"#;
    let delivery = verify_at(&stripe, &signed(SECRET, T, body), body, T).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "evt_1");
    assert_eq!(delivery.event_type(), Some("customer.created"));
    assert_eq!(delivery.correlation_id(), None);

    let body = br#"{"id":"evt_2","data":{"object":{"id":"cus_1"}}}"#;
    let delivery = verify_at(&stripe, &signed(SECRET, T, body), body, T).unwrap();
    assert_eq!(delivery.event_type(), None);
    assert_eq!(delivery.correlation_id(), None);
}

#[test]
fn a_bad_signature_is_reported_before_an_expired_timestamp() {
    let stripe = Stripe::new(SECRET).unwrap();
    let forged = header(&format!("t={T},v1={NEW_SIG}"));
    assert_eq!(
        kind(verify_at(&stripe, &forged, BODY.as_bytes(), T + 10_000)),
        "signature_mismatch"
    );
    assert_eq!(
        kind(verify_at(
            &stripe,
            &valid_header(),
            BODY.as_bytes(),
            T + 10_000
        )),
        "timestamp_too_old"
    );
}

#[test]
fn a_body_over_the_limit_is_refused_before_anything_else() {
    let stripe = Stripe::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(16));
    let body = BODY.as_bytes();
    assert_eq!(
        kind(verify_at(&stripe, &valid_header(), body, T)),
        "body_too_large"
    );
    assert_eq!(
        kind(verify_at(&stripe, &HeaderMap::new(), body, T)),
        "body_too_large"
    );
    let exact = Stripe::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(body.len()));
    assert_eq!(kind(verify_at(&exact, &valid_header(), body, T)), "ok");
}

#[test]
fn every_malformed_header_shape_is_a_typed_error() {
    let stripe = Stripe::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let with = |value: &str| kind(verify_at(&stripe, &header(value), body, T));
    assert_eq!(
        kind(verify_at(&stripe, &HeaderMap::new(), body, T)),
        "missing_header"
    );
    assert_eq!(with(""), "missing_header");
    for malformed in [
        format!("v1={SIG}"),
        format!("t=,v1={SIG}"),
        format!("t=abc,v1={SIG}"),
        format!("t=-5,v1={SIG}"),
        format!("t=1.5,v1={SIG}"),
        format!("t=99999999999999999999,v1={SIG}"),
        format!("t={T},t={T},v1={SIG}"),
        format!("t={T},v1={SIG},t={T}"),
        format!("t={T}"),
        format!("t={T},v1="),
        format!("t={T},v1=xyz"),
        format!("t={T},v1={}", &SIG[1..]),
        format!("t={T},v1={}", SIG.replace('5', "g")),
        format!("t={T},v1={SIG}00"),
        format!("t={T},V1={SIG}"),
        format!("T={T},v1={SIG}"),
        "t".to_string(),
        ",,,".to_string(),
    ] {
        assert_eq!(with(&malformed), "malformed_header", "{malformed}");
    }
    // an undecodable v1 is skipped when another decodes
    assert_eq!(with(&format!("t={T},v1=nothex,v1={SIG}")), "ok");
    // hex in the wrong case is a signature, just never the one Stripe sent
    assert_eq!(
        with(&format!("t={T},v1=nothex,v1={}", SIG.to_uppercase())),
        "signature_mismatch"
    );
    assert_eq!(
        with(&format!("t={T},v1=nothex,v1={NEW_SIG}")),
        "signature_mismatch"
    );

    let mut duplicated = valid_header();
    duplicated.append(
        "stripe-signature",
        HeaderValue::from_str(&format!("t={T},v1={SIG}")).unwrap(),
    );
    assert_eq!(
        kind(verify_at(&stripe, &duplicated, body, T)),
        "malformed_header"
    );

    let mut non_ascii = HeaderMap::new();
    non_ascii.insert(
        "stripe-signature",
        HeaderValue::from_bytes(format!("t={T},v1={SIG},v1=\u{e9}").as_bytes()).unwrap(),
    );
    assert_eq!(
        kind(verify_at(&stripe, &non_ascii, body, T)),
        "malformed_header"
    );
}

#[test]
fn the_timestamp_is_signed_as_the_text_that_was_sent() {
    // python3: hmac.new(SECRET, b"01614265330." + BODY, hashlib.sha256).hexdigest()
    const PADDED_SIG: &str = "3a262bfdffef4fc8b3c16d827e6da4e7548fac15d74ea1880fc07bbc8cb3f587";
    let stripe = Stripe::new(SECRET).unwrap();
    let body = BODY.as_bytes();
    let padded = header(&format!("t=0{T},v1={PADDED_SIG}"));
    let delivery = verify_at(&stripe, &padded, body, T).unwrap();
    assert_eq!(delivery.signed_at(), Some(at(T)));
    // the same number re-formatted is different signed content
    let reformatted = header(&format!("t=0{T},v1={SIG}"));
    assert_eq!(
        kind(verify_at(&stripe, &reformatted, body, T)),
        "signature_mismatch"
    );
}

#[test]
fn thousands_of_v1_entries_stay_cheap_and_the_last_one_counts() {
    let stripe = Stripe::new([NEW_SECRET, SECRET]).unwrap();
    let mut value = format!("t={T}");
    for i in 0..5_000 {
        value.push_str(&format!(",v1={i:064x}"));
    }
    value.push_str(&format!(",v1={SIG}"));
    let started = std::time::Instant::now();
    assert_eq!(
        kind(verify_at(&stripe, &header(&value), BODY.as_bytes(), T)),
        "ok"
    );
    // one MAC per secret, then constant-time compares: far under a second even unoptimised
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_mismatch_message_names_the_likely_cause() {
    let body = BODY.as_bytes();
    let stripe = Stripe::new(format!("{SECRET}\n")).unwrap();
    let err = verify_at(&stripe, &valid_header(), body, T).unwrap_err();
    assert_eq!(err.kind(), "signature_mismatch");
    assert!(err.to_string().contains("whitespace"), "{err}");

    let stripe = Stripe::new(SECRET.trim_start_matches("whsec_")).unwrap();
    let err = verify_at(&stripe, &valid_header(), body, T).unwrap_err();
    assert!(err.to_string().contains("`whsec_` prefix"), "{err}");

    let stripe = Stripe::new(SECRET).unwrap();
    let trimmed = &body[..body.len() - 1];
    let err = verify_at(&stripe, &valid_header(), trimmed, T).unwrap_err();
    assert!(err.to_string().contains("no configured secret"), "{err}");
}

#[test]
fn blank_or_absent_secrets_are_refused() {
    for secrets in [vec![""], vec!["  \n"], vec![SECRET, " "], vec![]] {
        let err = Stripe::new(secrets.clone()).unwrap_err();
        assert_eq!(err.kind(), "invalid_secret", "{secrets:?}");
        assert_eq!(
            StripeSigner::new(secrets).unwrap_err().kind(),
            "invalid_secret"
        );
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn signed_events_round_trip(
        id in "\\PC{1,40}",
        padding in proptest::collection::vec(any::<u8>(), 0..200),
        t in 0_i64..4_000_000_000,
        skew in -300_i64..=300,
    ) {
        // arbitrary ids (any Unicode, escaped by JSON) and arbitrary payload bytes
        let body = format!(
            r#"{{"id":{},"type":"x.y","pad":{}}}"#,
            json_string(&id),
            json_string(&String::from_utf8_lossy(&padding)),
        );
        let stripe = Stripe::new(SECRET).unwrap();
        let delivery = verify_at(&stripe, &signed(SECRET, t, body.as_bytes()), body.as_bytes(), t + skew).unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.signed_at(), Some(at(t)));
    }

    #[test]
    fn any_signed_bytes_get_past_the_signature(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let stripe = Stripe::new(SECRET).unwrap();
        let result = verify_at(&stripe, &signed(SECRET, T, &body), &body, T);
        prop_assert!(
            matches!(kind(result), "ok" | "malformed_body" | "missing_dedupe_key"),
            "non-UTF-8 and non-JSON bodies verify and are judged only by their content"
        );
    }

    #[test]
    fn any_one_byte_change_to_the_body_fails(index in any::<prop::sample::Index>(), delta in 1_u8..=255) {
        let stripe = Stripe::new(SECRET).unwrap();
        let mut body = BODY.as_bytes().to_vec();
        let i = index.index(body.len());
        body[i] = body[i].wrapping_add(delta);
        prop_assert_eq!(kind(verify_at(&stripe, &valid_header(), &body, T)), "signature_mismatch");
    }

    #[test]
    fn any_change_to_the_timestamp_fails(delta in -300_i64..=300) {
        prop_assume!(delta != 0);
        let stripe = Stripe::new(SECRET).unwrap();
        let moved = header(&format!("t={},v1={SIG}", T + delta));
        prop_assert_eq!(kind(verify_at(&stripe, &moved, BODY.as_bytes(), T)), "signature_mismatch");
    }

    #[test]
    fn any_one_character_change_to_the_signature_fails(
        index in 0_usize..64,
        digit in 0_u32..16,
        upper in any::<bool>(),
    ) {
        let stripe = Stripe::new(SECRET).unwrap();
        let mut sig: Vec<char> = SIG.chars().collect();
        let replacement = char::from_digit(digit, 16).unwrap();
        // an upper-case digit is a change too, even when it is the same digit
        let replacement = if upper { replacement.to_ascii_uppercase() } else { replacement };
        prop_assume!(sig[index] != replacement);
        sig[index] = replacement;
        let sig: String = sig.into_iter().collect();
        let headers = header(&format!("t={T},v1={sig}"));
        prop_assert_eq!(kind(verify_at(&stripe, &headers, BODY.as_bytes(), T)), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(value in proptest::collection::vec(any::<u8>(), 0..200)) {
        let stripe = Stripe::new(SECRET).unwrap();
        if let Ok(value) = HeaderValue::from_bytes(&value) {
            let mut headers = HeaderMap::new();
            headers.insert("stripe-signature", value);
            let _ = verify_at(&stripe, &headers, BODY.as_bytes(), T);
        }
    }

    #[test]
    fn header_like_strings_never_panic(
        items in proptest::collection::vec("(t|v1|v0|x| t|v1 )?=?[0-9a-fA-F ,=-]{0,70}", 0..8),
    ) {
        let stripe = Stripe::new(SECRET).unwrap();
        let value = items.join(",");
        if let Ok(value) = HeaderValue::from_str(&value) {
            let mut headers = HeaderMap::new();
            headers.insert("stripe-signature", value);
            let _ = verify_at(&stripe, &headers, BODY.as_bytes(), T);
        }
    }
}
