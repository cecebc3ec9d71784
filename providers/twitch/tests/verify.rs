//! hookbox-twitch: its signer, tampering, the RFC 3339 window, the challenge,
//! revocations and every malformed shape.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderName};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, Verified, VerifyError};
use hookbox_twitch::{Twitch, TwitchSigner};
use proptest::prelude::*;

const SECRET: &str = "s3cRe7-t0-tw1tch";
const T: i64 = 1_700_000_000;
const ID: &str = "befa7b53-d79d-478f-86b9-120f112b044e";
const BODY: &str = r#"{"subscription":{"id":"f1c2a387","type":"channel.follow","version":"2"},"event":{"user_id":"1337","broadcaster_user_id":"1337"}}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn signed(secret: &str, message_type: &str, t: i64, body: &str) -> HeaderMap {
    TwitchSigner::new(secret)
        .unwrap()
        .message_type(message_type)
        .sign(ID, t, body.as_bytes())
        .to_header_map()
}

fn kind(result: Result<Verified, VerifyError>) -> &'static str {
    match result {
        Ok(Verified::Event(_)) => "event",
        Ok(Verified::Handshake(_)) => "handshake",
        Err(err) => err.kind(),
    }
}

fn check(headers: &HeaderMap, body: &str, now: i64) -> Result<Verified, VerifyError> {
    Twitch::new(SECRET).unwrap().verify_request(
        headers,
        Bytes::copy_from_slice(body.as_bytes()),
        at(now),
    )
}

#[test]
fn a_notification_is_keyed_by_the_message_id_and_typed_by_the_subscription() {
    let headers = signed(SECRET, "notification", T, BODY);
    let Ok(Verified::Event(delivery)) = check(&headers, BODY, T) else {
        panic!("an event");
    };
    assert_eq!(delivery.dedupe_key().delivery_id(), ID);
    assert_eq!(delivery.event_type(), Some("channel.follow"));
    assert_eq!(delivery.signed_at(), Some(at(T)));
    // a resend: same id, new signature and timestamp, same key
    let later = signed(SECRET, "notification", T + 30, BODY);
    let Ok(Verified::Event(again)) = check(&later, BODY, T + 30) else {
        panic!("an event");
    };
    assert_eq!(again.dedupe_key(), delivery.dedupe_key());
}

#[test]
fn the_challenge_is_answered_as_text_and_a_revocation_is_stored() {
    let body = r#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"status":"webhook_callback_verification_pending"}}"#;
    let headers = signed(SECRET, "webhook_callback_verification", T, body);
    let Ok(Verified::Handshake(reply)) = check(&headers, body, T) else {
        panic!("a handshake");
    };
    assert_eq!(
        (reply.status().as_u16(), reply.content_type()),
        (200, Some("text/plain"))
    );
    assert_eq!(&reply.body()[..], b"pogchamp-kappa-360noscope-vohiyo");
    let forged = signed("not the secret", "webhook_callback_verification", T, body);
    assert_eq!(kind(check(&forged, body, T)), "signature_mismatch");
    let body = r#"{"subscription":{"status":"x"}}"#;
    let headers = signed(SECRET, "webhook_callback_verification", T, body);
    assert_eq!(kind(check(&headers, body, T)), "malformed_body");

    let body = r#"{"subscription":{"status":"authorization_revoked","type":"channel.follow"}}"#;
    let headers = signed(SECRET, "revocation", T, body);
    let Ok(Verified::Event(delivery)) = check(&headers, body, T) else {
        panic!("a revocation is stored");
    };
    assert_eq!(delivery.event_type(), Some("revocation"));
}

#[test]
fn the_window_is_600_seconds_inclusive_in_both_directions() {
    let headers = signed(SECRET, "notification", T, BODY);
    assert_eq!(kind(check(&headers, BODY, T + 600)), "event");
    assert_eq!(kind(check(&headers, BODY, T - 600)), "event");
    assert_eq!(kind(check(&headers, BODY, T + 601)), "timestamp_too_old");
    assert_eq!(kind(check(&headers, BODY, T - 601)), "timestamp_in_future");
}

#[test]
fn every_malformed_header_shape_is_a_typed_error() {
    let good = signed(SECRET, "notification", T, BODY);
    let with = |name: &str, value: &str| {
        let mut headers = good.clone();
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        kind(check(&headers, BODY, T))
    };
    let sig = good["twitch-eventsub-message-signature"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        with(
            "twitch-eventsub-message-signature",
            &sig.replace("sha256=", "")
        ),
        "malformed_header"
    );
    assert_eq!(
        with("twitch-eventsub-message-signature", "sha256=nothex"),
        "malformed_header"
    );
    assert_eq!(
        with(
            "twitch-eventsub-message-signature",
            &sig.to_uppercase().replace("SHA256=", "sha256=")
        ),
        "signature_mismatch"
    );
    assert_eq!(
        with("twitch-eventsub-message-timestamp", "1700000000"),
        "malformed_header"
    );
    assert_eq!(
        with("twitch-eventsub-message-timestamp", "2023-07-19T10:11:12"),
        "malformed_header"
    );
    // a valid RFC 3339 time that is not the one signed
    assert_eq!(
        with(
            "twitch-eventsub-message-timestamp",
            "2023-11-14T22:13:20.5Z"
        ),
        "signature_mismatch"
    );
    assert_eq!(
        with("twitch-eventsub-message-id", "another-id"),
        "signature_mismatch"
    );
    for missing in [
        "twitch-eventsub-message-signature",
        "twitch-eventsub-message-id",
        "twitch-eventsub-message-timestamp",
        "twitch-eventsub-message-type",
    ] {
        let mut headers = good.clone();
        headers.remove(missing);
        assert_eq!(
            kind(check(&headers, BODY, T)),
            "missing_header",
            "{missing}"
        );
    }
}

#[test]
fn either_secret_verifies_during_rotation() {
    let twitch = Twitch::new(["old-secret-0123", "new-secret-0123"]).unwrap();
    for secret in ["old-secret-0123", "new-secret-0123"] {
        let headers = signed(secret, "notification", T, BODY);
        assert!(
            twitch
                .verify(&headers, Bytes::from_static(BODY.as_bytes()), at(T))
                .is_ok()
        );
    }
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let headers = signed(SECRET, "notification", T, BODY);
        let mut body = BODY.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Twitch::new(SECRET).unwrap().verify_request(&headers, Bytes::from(body), at(T));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(signature in ".{0,80}", timestamp in ".{0,40}", kind_text in ".{0,30}") {
        let mut headers = signed(SECRET, "notification", T, BODY);
        if let Ok(value) = signature.parse() { headers.insert("twitch-eventsub-message-signature", value); }
        if let Ok(value) = timestamp.parse() { headers.insert("twitch-eventsub-message-timestamp", value); }
        if let Ok(value) = kind_text.parse() { headers.insert("twitch-eventsub-message-type", value); }
        let _ = check(&headers, BODY, T);
    }
}

/// A challenge signed by hand (the hex computed once with Python's `hmac`), with the
/// nanosecond timestamp Twitch sends.
#[test]
fn a_hand_signed_challenge_with_nanoseconds_verifies() {
    let body = r#"{"challenge":"pogchamp-kappa-360noscope-vohiyo"}"#;
    let mut headers = HeaderMap::new();
    headers.insert(
        "Twitch-Eventsub-Message-Id",
        "e76c6bd4-55c9-4987-8304-da1588d8988b".parse().unwrap(),
    );
    headers.insert(
        "Twitch-Eventsub-Message-Timestamp",
        "2019-11-16T10:11:12.634234626Z".parse().unwrap(),
    );
    headers.insert(
        "Twitch-Eventsub-Message-Type",
        "webhook_callback_verification".parse().unwrap(),
    );
    headers.insert(
        "Twitch-Eventsub-Message-Signature",
        "sha256=4c0adcd82df4e7d4c4c1f02b22f9f8a67ca5e65298f568c834787af89857af0f"
            .parse()
            .unwrap(),
    );
    let now = OffsetDateTime::parse(
        "2019-11-16T10:11:12Z",
        &hookbox_core::time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let result = Twitch::new("s3cRe7").unwrap().verify_request(
        &headers,
        Bytes::from_static(body.as_bytes()),
        now,
    );
    let Ok(Verified::Handshake(reply)) = result else {
        panic!("{result:?}");
    };
    assert_eq!(&reply.body()[..], b"pogchamp-kappa-360noscope-vohiyo");
}
