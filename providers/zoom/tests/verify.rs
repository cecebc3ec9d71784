//! hookbox-zoom: a hand-signed URL validation, its signer, tampering, the window, the
//! `{event}:{event_ts}` key and every malformed shape.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, Verified, VerifyError};
use hookbox_zoom::{Zoom, ZoomSigner};
use proptest::prelude::*;

const SECRET: &str = "wXyWgWXUSDuaBJRUVEzYhg";
const T: i64 = 1_654_503_849;
const VALIDATION: &str = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
const EVENT: &str = r#"{"event":"meeting.started","payload":{"account_id":"D8cJuqWVQ623CI4Q8yQK0Q","object":{"id":"1234567890"}},"event_ts":1626230691572}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn signed(secret: &str, t: i64, body: &str) -> HeaderMap {
    ZoomSigner::new(secret)
        .unwrap()
        .sign("", t, body.as_bytes())
        .to_header_map()
}

fn kind(result: Result<Verified, VerifyError>) -> &'static str {
    match result {
        Ok(Verified::Event(_)) => "event",
        Ok(Verified::Handshake(_)) => "handshake",
        Err(err) => err.kind(),
    }
}

fn check(zoom: &Zoom, headers: &HeaderMap, body: &str, now: i64) -> Result<Verified, VerifyError> {
    zoom.verify_request(headers, Bytes::copy_from_slice(body.as_bytes()), at(now))
}

/// The signature and the encrypted token computed once with Python's `hmac`, as
/// Zoom's documentation describes them.
#[test]
fn a_hand_signed_url_validation_gets_the_documented_answer() {
    let zoom = Zoom::new(SECRET).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("x-zm-request-timestamp", T.to_string().parse().unwrap());
    headers.insert(
        "x-zm-signature",
        "v0=281710e77cabe1279f2715ee90fd3f9a304f58e74a5062d05a2b43778467fe98"
            .parse()
            .unwrap(),
    );
    let Ok(Verified::Handshake(reply)) = check(&zoom, &headers, VALIDATION, T) else {
        panic!("a handshake");
    };
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.content_type(), Some("application/json"));
    let answer: serde_json::Value = serde_json::from_slice(reply.body()).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({
            "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
            "encryptedToken": "27d9f8fb74e64dd8c85f805718dabf4e57e24a14fdd346d94aaed5381d77683e",
        })
    );
    assert_eq!(signed(SECRET, T, VALIDATION), headers);
    // the validation is verified like an event
    assert_eq!(
        kind(check(&zoom, &signed("other", T, VALIDATION), VALIDATION, T)),
        "signature_mismatch"
    );
    // answered with the secret that signed it, during a rotation
    let rotating = Zoom::new(["old-token", SECRET]).unwrap();
    let Ok(Verified::Handshake(reply)) = check(&rotating, &headers, VALIDATION, T) else {
        panic!("a handshake");
    };
    assert!(String::from_utf8_lossy(reply.body()).contains("27d9f8fb74e6"));
}

#[test]
fn an_event_is_keyed_by_its_event_and_event_ts() {
    let zoom = Zoom::new(SECRET).unwrap();
    let Ok(Verified::Event(delivery)) = check(&zoom, &signed(SECRET, T, EVENT), EVENT, T) else {
        panic!("an event");
    };
    assert_eq!(
        delivery.dedupe_key().delivery_id(),
        "meeting.started:1626230691572"
    );
    assert_eq!(delivery.event_type(), Some("meeting.started"));
    // a retry, signed later, has the same key
    let Ok(Verified::Event(retry)) = check(&zoom, &signed(SECRET, T + 300, EVENT), EVENT, T + 300)
    else {
        panic!("an event");
    };
    assert_eq!(retry.dedupe_key(), delivery.dedupe_key());
    for (body, expected) in [
        ("[]", "malformed_body"),
        ("", "malformed_body"),
        (r#"{"event":"meeting.started"}"#, "missing_dedupe_key"),
        (r#"{"event_ts":1}"#, "missing_dedupe_key"),
        (r#"{"event":"","event_ts":1}"#, "missing_dedupe_key"),
        (
            r#"{"event":"endpoint.url_validation","payload":{}}"#,
            "malformed_body",
        ),
        (r#"{"event":"a.b","event_ts":"1626230691572"}"#, "event"),
    ] {
        assert_eq!(
            kind(check(&zoom, &signed(SECRET, T, body), body, T)),
            expected,
            "{body}"
        );
    }
}

#[test]
fn the_window_is_inclusive_and_headers_are_checked() {
    let zoom = Zoom::new(SECRET).unwrap();
    let headers = signed(SECRET, T, EVENT);
    assert_eq!(kind(check(&zoom, &headers, EVENT, T + 300)), "event");
    assert_eq!(kind(check(&zoom, &headers, EVENT, T - 300)), "event");
    assert_eq!(
        kind(check(&zoom, &headers, EVENT, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(check(&zoom, &headers, EVENT, T - 301)),
        "timestamp_in_future"
    );
    let sig = headers["x-zm-signature"].to_str().unwrap().to_string();
    let with = |name: &'static str, value: &str| {
        let mut headers = headers.clone();
        headers.insert(name, value.parse().unwrap());
        kind(check(&zoom, &headers, EVENT, T))
    };
    assert_eq!(with("x-zm-signature", &sig[3..]), "malformed_header");
    assert_eq!(with("x-zm-signature", "v0=123"), "malformed_header");
    assert_eq!(
        with("x-zm-signature", &sig.to_uppercase().replace("V0=", "v0=")),
        "signature_mismatch"
    );
    assert_eq!(
        with("x-zm-request-timestamp", "1654503849000"),
        "signature_mismatch"
    );
    assert_eq!(with("x-zm-request-timestamp", "soon"), "malformed_header");
    for missing in ["x-zm-signature", "x-zm-request-timestamp"] {
        let mut headers = headers.clone();
        headers.remove(missing);
        assert_eq!(kind(check(&zoom, &headers, EVENT, T)), "missing_header");
    }
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let zoom = Zoom::new(SECRET).unwrap();
        let headers = signed(SECRET, T, EVENT);
        let mut body = EVENT.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        prop_assert_eq!(kind(zoom.verify_request(&headers, Bytes::from(body), at(T))), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(signature in ".{0,80}", timestamp in ".{0,24}") {
        let zoom = Zoom::new(SECRET).unwrap();
        let mut headers = HeaderMap::new();
        if let Ok(value) = signature.parse() { headers.insert("x-zm-signature", value); }
        if let Ok(value) = timestamp.parse() { headers.insert("x-zm-request-timestamp", value); }
        let _ = check(&zoom, &headers, EVENT, T);
    }
}
