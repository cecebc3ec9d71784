//! hookbox-linear: a hand-signed webhook, its signer, rotation, tampering, the
//! 60-second window at its millisecond edges and every malformed shape.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_linear::{Linear, LinearSigner, with_webhook_timestamp};
use proptest::prelude::*;

const SECRET: &str = "lin_wh_hookbox_test_signing_secret";
const DELIVERY: &str = "234d1a4e-b617-4388-90fe-adc3633d6b72";
/// The `webhookTimestamp` of the example payload in Linear's "Webhook payload" section.
const T: i64 = 1_676_056_940_508;
/// That example payload (a comment created), on one line.
const BODY: &str = r#"{"action":"create","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","createdAt":"2020-01-23T12:53:18.084Z","updatedAt":"2020-01-23T12:53:18.084Z","archivedAt":null,"body":"Indeed, I think this is definitely an improvement over the previous version.","edited":false,"issueId":"539068e2-ae88-4d09-bd75-22eb4a59612f","userId":"aacdca22-6266-4c0a-ab3c-8fa70a26765c"},"type":"Comment","url":"https://linear.app/issue/LIN-1778/foo-bar#comment-77217de3-fb52-4dad-bb9a-b356beb93de8","createdAt":"2020-01-23T12:53:18.084Z","organizationId":"dc844923-f9a4-40a3-825c-dea7747e57d6","webhookTimestamp":1676056940508,"webhookId":"000042e3-d123-4980-b49f-8e140eef9329"}"#;
/// `BODY`'s signature with `SECRET`, computed once with Python:
/// `hmac.new(SECRET.encode(), BODY.encode(), hashlib.sha256).hexdigest()`.
const SIGNATURE: &str = "f1fa3d8cd38b0083517005f32640fd8a374610e641c2701b21f78ca235462cb8";

/// The instant `ms` milliseconds after the Unix epoch.
fn at(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap()
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, value.parse().unwrap());
    }
    map
}

fn signed(secret: &str, body: &str) -> HeaderMap {
    LinearSigner::new(secret)
        .unwrap()
        .sign(DELIVERY, 0, body.as_bytes())
        .to_header_map()
}

fn verify_with(
    linear: &Linear,
    headers: &HeaderMap,
    body: &str,
    now_ms: i64,
) -> Result<VerifiedDelivery, VerifyError> {
    linear.verify(headers, Bytes::copy_from_slice(body.as_bytes()), at(now_ms))
}

fn verify(headers: &HeaderMap, body: &str, now_ms: i64) -> Result<VerifiedDelivery, VerifyError> {
    verify_with(&Linear::new(SECRET).unwrap(), headers, body, now_ms)
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

#[test]
fn a_hand_signed_webhook_verifies() {
    let sent = headers(&[
        ("linear-delivery", DELIVERY),
        ("linear-event", "Comment"),
        ("linear-signature", SIGNATURE),
    ]);
    let delivery = verify(&sent, BODY, T).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), DELIVERY);
    assert_eq!(delivery.dedupe_key().provider(), "linear");
    assert_eq!(delivery.event_type(), Some("Comment.create"));
    assert_eq!(
        delivery.correlation_id(),
        Some("2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9:Comment.create")
    );
    assert_eq!(delivery.signed_at(), Some(at(T)));
    assert_eq!(delivery.headers().len(), 3);
    // the signer sends the same three headers, the entity type read from the body
    assert_eq!(signed(SECRET, BODY), sent);
}

#[test]
fn a_wrong_secret_or_a_changed_body_is_a_mismatch() {
    assert_eq!(
        kind(verify(&signed("lin_wh_another_webhook", BODY), BODY, T)),
        "signature_mismatch"
    );
    let tampered = BODY.replace("create", "remove");
    assert_eq!(
        kind(verify(&signed(SECRET, BODY), &tampered, T)),
        "signature_mismatch"
    );
    // a trailing newline added after signing is named as the likely cause
    let err = verify(&signed(SECRET, BODY), &format!("{BODY}\n"), T).unwrap_err();
    assert!(
        matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("trailing whitespace")),
        "{err:?}"
    );
    assert!(!err.to_string().contains(SECRET));
}

#[test]
fn any_configured_secret_passes_during_a_rotation() {
    let both = Linear::new(["lin_wh_old_secret", "lin_wh_new_secret"]).unwrap();
    for secret in ["lin_wh_old_secret", "lin_wh_new_secret"] {
        assert_eq!(
            kind(verify_with(&both, &signed(secret, BODY), BODY, T)),
            "ok"
        );
    }
    assert_eq!(
        kind(verify_with(&both, &signed(SECRET, BODY), BODY, T)),
        "signature_mismatch"
    );
    // one header, one signature: the signer takes one secret
    let err = LinearSigner::new(["lin_wh_old_secret", "lin_wh_new_secret"]).unwrap_err();
    assert_eq!(err.kind(), "invalid_secret");
    for blank in ["", " \n"] {
        assert_eq!(Linear::new(blank).unwrap_err().kind(), "invalid_secret");
        assert_eq!(
            LinearSigner::new(blank).unwrap_err().kind(),
            "invalid_secret"
        );
    }
}

#[test]
fn the_window_is_sixty_seconds_to_the_millisecond_in_both_directions() {
    let sent = signed(SECRET, BODY);
    assert_eq!(kind(verify(&sent, BODY, T + 60_000)), "ok");
    assert_eq!(kind(verify(&sent, BODY, T - 60_000)), "ok");
    let err = verify(&sent, BODY, T + 60_001).unwrap_err();
    assert_eq!(
        err,
        VerifyError::TimestampTooOld {
            age_secs: 61,
            tolerance_secs: 60,
            skew_secs: 1
        },
        "1 ms outside the window is reported as 1 s, rounded up"
    );
    let err = verify(&sent, BODY, T - 60_001).unwrap_err();
    assert_eq!(
        err,
        VerifyError::TimestampInFuture {
            ahead_secs: 61,
            tolerance_secs: 60,
            skew_secs: 1
        }
    );
    assert_eq!(
        kind(verify(&sent, BODY, T + 3_600_000)),
        "timestamp_too_old"
    );
    // a wider window through the options
    let lenient = Linear::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().tolerance(Duration::from_millis(300_500)));
    assert_eq!(kind(verify_with(&lenient, &sent, BODY, T + 300_500)), "ok");
    assert_eq!(
        kind(verify_with(&lenient, &sent, BODY, T + 300_501)),
        "timestamp_too_old"
    );
}

#[test]
fn every_malformed_header_is_a_typed_error() {
    let upper = SIGNATURE.to_uppercase();
    let prefixed = format!("sha256={SIGNATURE}");
    for (signature, expected) in [
        (upper.as_str(), "signature_mismatch"),
        (prefixed.as_str(), "malformed_header"),
        ("nothex", "malformed_header"),
        (&SIGNATURE[1..], "malformed_header"),
    ] {
        let sent = headers(&[
            ("linear-delivery", DELIVERY),
            ("linear-signature", signature),
        ]);
        assert_eq!(kind(verify(&sent, BODY, T)), expected, "{signature}");
    }
    let sent = headers(&[("linear-delivery", DELIVERY), ("linear-signature", &upper)]);
    let err = verify(&sent, BODY, T).unwrap_err();
    assert!(
        matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("upper-case hex")),
        "{err:?}"
    );

    let missing = verify(&headers(&[("linear-delivery", DELIVERY)]), BODY, T).unwrap_err();
    assert_eq!(
        missing,
        VerifyError::MissingHeader {
            header: "Linear-Signature".to_string()
        }
    );
    // the dedupe key is a header: without it, nothing to deduplicate on
    let missing = verify(&headers(&[("linear-signature", SIGNATURE)]), BODY, T).unwrap_err();
    assert_eq!(
        missing,
        VerifyError::MissingHeader {
            header: "Linear-Delivery".to_string()
        }
    );
    let empty = headers(&[("linear-delivery", ""), ("linear-signature", SIGNATURE)]);
    assert_eq!(kind(verify(&empty, BODY, T)), "missing_header");
    let twice = headers(&[
        ("linear-delivery", DELIVERY),
        ("linear-signature", SIGNATURE),
        ("linear-signature", SIGNATURE),
    ]);
    assert_eq!(kind(verify(&twice, BODY, T)), "malformed_header");
    // `Linear-Event` is optional: the body names the event
    let no_event = headers(&[
        ("linear-delivery", DELIVERY),
        ("linear-signature", SIGNATURE),
    ]);
    assert_eq!(
        verify(&no_event, BODY, T).unwrap().event_type(),
        Some("Comment.create")
    );
}

#[test]
fn a_body_without_a_numeric_webhook_timestamp_is_malformed() {
    let body_at = |value: &str| BODY.replace("1676056940508", value);
    for (body, why) in [
        (
            BODY.replace(r#""webhookTimestamp":1676056940508,"#, ""),
            "absent",
        ),
        (body_at(r#""1676056940508""#), "a string"),
        (body_at("1676056940508.0"), "a float"),
        (body_at("1.676056940508e12"), "an exponent"),
        (body_at("-1676056940508"), "negative"),
        (body_at("null"), "null"),
        (body_at("99999999999999999999"), "too large"),
        (
            BODY.replace(
                r#""webhookTimestamp":1676056940508,"#,
                r#""data2":{"webhookTimestamp":1676056940508},"#,
            ),
            "nested only",
        ),
        ("not json at all".to_string(), "not JSON"),
        ("".to_string(), "empty"),
        ("[1676056940508]".to_string(), "an array"),
    ] {
        let err = verify(&signed(SECRET, &body), &body, T).unwrap_err();
        assert_eq!(err.kind(), "malformed_body", "{why}: {err}");
        assert!(err.to_string().contains("webhookTimestamp"), "{why}: {err}");
    }
    // read only after the signature: an unsigned bad body is a mismatch
    let body = body_at(r#""1676056940508""#);
    assert_eq!(
        kind(verify(&signed(SECRET, BODY), &body, T)),
        "signature_mismatch"
    );
}

#[test]
fn the_event_type_comes_from_the_body_then_the_header() {
    // (body, the signer's `Linear-Event`, the header sent, event type, correlation id)
    let cases = [
        (
            r#"{"type":"IssueSLA","action":"breached","webhookTimestamp":1676056940508}"#,
            None,
            Some("IssueSLA"),
            Some("IssueSLA.breached"),
            None,
        ),
        (
            r#"{"type":"Issue","webhookTimestamp":1676056940508,"data":{"id":"i1"}}"#,
            None,
            Some("Issue"),
            Some("Issue"),
            Some("i1:Issue"),
        ),
        (
            r#"{"type":"Issue","action":"update","webhookTimestamp":1676056940508}"#,
            Some("Comment"),
            Some("Comment"),
            Some("Issue.update"),
            None,
        ),
        (
            r#"{"webhookTimestamp":1676056940508,"action":"create"}"#,
            Some("Issue"),
            Some("Issue"),
            Some("Issue"),
            None,
        ),
        (
            r#"{"webhookTimestamp":1676056940508}"#,
            None,
            None,
            None,
            None,
        ),
    ];
    for (body, signer_event, header, event_type, correlation) in cases {
        let mut signer = LinearSigner::new(SECRET).unwrap();
        if let Some(event) = signer_event {
            signer = signer.event(event);
        }
        let sent = signer.sign(DELIVERY, 0, body.as_bytes()).to_header_map();
        let sent_event = sent.get("linear-event").map(|v| v.to_str().unwrap());
        assert_eq!(sent_event, header, "{body}");
        let delivery = verify(&sent, body, T).unwrap();
        assert_eq!(delivery.event_type(), event_type, "{body}");
        assert_eq!(delivery.correlation_id(), correlation, "{body}");
    }
}

#[test]
fn the_body_limit_comes_first() {
    let small = Linear::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(16));
    assert_eq!(
        kind(verify_with(&small, &HeaderMap::new(), BODY, T)),
        "body_too_large"
    );
}

#[test]
fn a_fresh_timestamp_is_put_in_a_body() {
    // replaced in place: every other byte is kept
    let stamped = with_webhook_timestamp(BODY.as_bytes(), T + 5).unwrap();
    assert_eq!(
        stamped,
        BODY.replace("1676056940508", "1676056940513").as_bytes()
    );
    // added last when absent
    let without = r#"{ "type": "Issue" }"#;
    assert_eq!(
        with_webhook_timestamp(without.as_bytes(), T).unwrap(),
        br#"{ "type": "Issue" ,"webhookTimestamp":1676056940508}"#
    );
    assert_eq!(
        with_webhook_timestamp(b" {} ", T).unwrap(),
        br#" {"webhookTimestamp":1676056940508} "#
    );
    for bad in [
        r#"{"webhookTimestamp":"1676056940508"}"#,
        r#"{"webhookTimestamp":null}"#,
        "[]",
        "not json",
    ] {
        let err = with_webhook_timestamp(bad.as_bytes(), T).unwrap_err();
        assert_eq!(err.kind(), "malformed_body", "{bad}");
    }
    // what the CLI does for a stale sample: stamp, sign, verify
    let stale = BODY.replace("1676056940508", "1");
    let fresh = String::from_utf8(with_webhook_timestamp(stale.as_bytes(), T).unwrap()).unwrap();
    assert_eq!(kind(verify(&signed(SECRET, &fresh), &fresh, T)), "ok");
    assert_eq!(
        kind(verify(&signed(SECRET, &stale), &stale, T)),
        "timestamp_too_old"
    );
}

proptest! {
    #[test]
    fn signed_bodies_round_trip(
        id in "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        entity in "[A-Z][A-Za-z]{0,20}",
        action in "[a-z]{1,12}",
        text in "\\PC{0,64}",
        skew in -60_000i64..=60_000,
    ) {
        let body = serde_json::json!({
            "action": action,
            "type": entity,
            "data": { "id": id, "title": text },
            "webhookTimestamp": T,
        })
        .to_string();
        let sent = signed(SECRET, &body);
        let delivery = verify(&sent, &body, T + skew).unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), DELIVERY);
        let event_type = format!("{entity}.{action}");
        prop_assert_eq!(delivery.event_type(), Some(event_type.as_str()));
        let correlation = format!("{id}:{event_type}");
        prop_assert_eq!(delivery.correlation_id(), Some(correlation.as_str()));
        prop_assert_eq!(delivery.signed_at(), Some(at(T)));
    }

    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let sent = signed(SECRET, BODY);
        let mut body = BODY.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Linear::new(SECRET).unwrap().verify(&sent, Bytes::from(body), at(T));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(signature in "[ -~]{0,120}", delivery in "[ -~]{0,60}") {
        let mut sent = HeaderMap::new();
        if let (Ok(signature), Ok(delivery)) = (signature.parse(), delivery.parse()) {
            sent.insert("linear-signature", signature);
            sent.insert("linear-delivery", delivery);
            let _ = verify(&sent, BODY, T);
        }
    }
}
