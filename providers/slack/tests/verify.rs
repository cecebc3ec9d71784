//! hookbox-slack against Slack's documented example, its own signer, tampering, the
//! timestamp window, the handshake and every malformed shape.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, Verified, VerifyError, VerifyOptions};
use hookbox_slack::{MIN_RETENTION, Slack, SlackSigner};
use proptest::prelude::*;

/// The signing secret, timestamp, body and signature of Slack's "Verifying requests
/// from Slack" walkthrough (a slash command, so a form-encoded body).
const DOC_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const DOC_TIMESTAMP: i64 = 1_531_420_618;
const DOC_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const DOC_SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

const SECRET: &str = "slack-signing-secret";
const T: i64 = 1_700_000_000;
const EVENT: &str = r#"{"token":"z","team_id":"T1","api_app_id":"A1","event":{"type":"message","text":"hi","ts":"1.2"},"type":"event_callback","event_id":"Ev0PV52K21","event_time":1700000000}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn signed(secret: &str, t: i64, body: &str) -> HeaderMap {
    SlackSigner::new(secret)
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

fn check(
    slack: &Slack,
    headers: &HeaderMap,
    body: &str,
    now: i64,
) -> Result<Verified, VerifyError> {
    slack.verify_request(headers, Bytes::copy_from_slice(body.as_bytes()), at(now))
}

#[test]
fn slacks_documentation_example_verifies_then_is_not_an_events_api_body() {
    let slack = Slack::new(DOC_SECRET).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("X-Slack-Signature", DOC_SIGNATURE.parse().unwrap());
    headers.insert(
        "X-Slack-Request-Timestamp",
        DOC_TIMESTAMP.to_string().parse().unwrap(),
    );
    // the signature passes: only the body (a slash command) is refused
    assert_eq!(
        kind(check(&slack, &headers, DOC_BODY, DOC_TIMESTAMP)),
        "malformed_body"
    );
    // our signer writes the same header
    assert_eq!(
        signed(DOC_SECRET, DOC_TIMESTAMP, DOC_BODY)["x-slack-signature"],
        DOC_SIGNATURE
    );
    // one byte changed is a mismatch
    let changed = DOC_BODY.replace("roadrunner", "roadrunnex");
    assert_eq!(
        kind(check(&slack, &headers, &changed, DOC_TIMESTAMP)),
        "signature_mismatch"
    );
}

#[test]
fn an_event_verifies_with_its_id_type_and_retry_headers() {
    let slack = Slack::new(SECRET).unwrap();
    let mut headers = signed(SECRET, T, EVENT);
    headers.insert("X-Slack-Retry-Num", "1".parse().unwrap());
    headers.insert("X-Slack-Retry-Reason", "http_timeout".parse().unwrap());
    let delivery = slack
        .verify(&headers, Bytes::from_static(EVENT.as_bytes()), at(T))
        .unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "Ev0PV52K21");
    assert_eq!(delivery.dedupe_key().provider(), "slack");
    assert_eq!(delivery.event_type(), Some("message"));
    assert_eq!(delivery.signed_at(), Some(at(T)));
    assert_eq!(delivery.headers().get("x-slack-retry-num").unwrap(), "1");
    assert_eq!(
        delivery.headers().get("x-slack-retry-reason").unwrap(),
        "http_timeout"
    );
    // kept headers verify again
    let again = slack.verify(
        &delivery.headers().to_header_map(),
        delivery.body().clone(),
        at(T),
    );
    assert!(again.is_ok());
    assert!(MIN_RETENTION.as_duration().as_secs() >= 6 * 60);
}

#[test]
fn url_verification_is_answered_with_its_challenge_and_verified_first() {
    let slack = Slack::new(SECRET).unwrap();
    let body = r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let headers = signed(SECRET, T, body);
    let Ok(Verified::Handshake(reply)) = check(&slack, &headers, body, T) else {
        panic!("a handshake");
    };
    assert_eq!(reply.kind(), "url_verification");
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.content_type(), Some("text/plain"));
    assert_eq!(
        &reply.body()[..],
        b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    // `verify` has no event to give
    let err = slack
        .verify(&headers, Bytes::from_static(body.as_bytes()), at(T))
        .unwrap_err();
    assert_eq!(err.kind(), "handshake");
    // a forged handshake is refused like an event
    let forged = signed("another secret", T, body);
    assert_eq!(kind(check(&slack, &forged, body, T)), "signature_mismatch");
    // without its challenge it is malformed
    let body = r#"{"type":"url_verification"}"#;
    assert_eq!(
        kind(check(&slack, &signed(SECRET, T, body), body, T)),
        "malformed_body"
    );
    // app_rate_limited has no event_id: acknowledged, not stored
    let body = r#"{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}"#;
    let Ok(Verified::Handshake(reply)) = check(&slack, &signed(SECRET, T, body), body, T) else {
        panic!("acknowledged");
    };
    assert_eq!((reply.status().as_u16(), reply.body().len()), (200, 0));
}

#[test]
fn the_body_is_checked_after_a_valid_signature() {
    let slack = Slack::new(SECRET).unwrap();
    for (body, expected) in [
        ("", "malformed_body"),
        ("[]", "malformed_body"),
        ("not json", "malformed_body"),
        (r#"{"type":"event_callback"}"#, "missing_dedupe_key"),
        (r#"{"event_id":7}"#, "missing_dedupe_key"),
        (r#"{"event_id":""}"#, "missing_dedupe_key"),
        (r#"{"event_id":"Ev1"}"#, "event"),
    ] {
        assert_eq!(
            kind(check(&slack, &signed(SECRET, T, body), body, T)),
            expected,
            "{body}"
        );
    }
}

#[test]
fn the_window_is_inclusive_in_both_directions() {
    let slack = Slack::new(SECRET).unwrap();
    let headers = signed(SECRET, T, EVENT);
    assert_eq!(kind(check(&slack, &headers, EVENT, T + 300)), "event");
    assert_eq!(kind(check(&slack, &headers, EVENT, T - 300)), "event");
    assert_eq!(
        kind(check(&slack, &headers, EVENT, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(check(&slack, &headers, EVENT, T - 301)),
        "timestamp_in_future"
    );
    let wide = Slack::new(SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().tolerance(std::time::Duration::from_secs(900)));
    assert_eq!(kind(check(&wide, &headers, EVENT, T + 900)), "event");
}

#[test]
fn either_secret_verifies_during_rotation() {
    let slack = Slack::new(["old secret", "new secret"]).unwrap();
    for secret in ["old secret", "new secret"] {
        assert_eq!(
            kind(check(&slack, &signed(secret, T, EVENT), EVENT, T)),
            "event"
        );
    }
    assert_eq!(
        kind(check(&slack, &signed("other", T, EVENT), EVENT, T)),
        "signature_mismatch"
    );
    assert_eq!(Slack::new("  ").unwrap_err().kind(), "invalid_secret");
}

#[test]
fn every_malformed_header_shape_is_a_typed_error() {
    let slack = Slack::new(SECRET).unwrap();
    let good = signed(SECRET, T, EVENT);
    let sig = good["x-slack-signature"].to_str().unwrap().to_string();
    let with = |name: &str, value: &str| {
        let mut headers = good.clone();
        headers.insert(
            hookbox_core::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        kind(check(&slack, &headers, EVENT, T))
    };
    assert_eq!(
        with("x-slack-signature", &sig.replace("v0=", "v1=")),
        "malformed_header"
    );
    assert_eq!(with("x-slack-signature", "v0=zz"), "malformed_header");
    assert_eq!(
        with(
            "x-slack-signature",
            &sig.to_uppercase().replace("V0=", "v0=")
        ),
        "signature_mismatch"
    );
    assert_eq!(
        with("x-slack-request-timestamp", "17e8"),
        "malformed_header"
    );
    assert_eq!(with("x-slack-request-timestamp", "-1"), "malformed_header");
    assert_eq!(
        with("x-slack-request-timestamp", &(T + 1).to_string()),
        "signature_mismatch"
    );
    for missing in ["x-slack-signature", "x-slack-request-timestamp"] {
        let mut headers = good.clone();
        headers.remove(missing);
        assert_eq!(kind(check(&slack, &headers, EVENT, T)), "missing_header");
    }
    let mut twice = good.clone();
    twice.append("x-slack-signature", sig.parse().unwrap());
    assert_eq!(kind(check(&slack, &twice, EVENT, T)), "malformed_header");
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let slack = Slack::new(SECRET).unwrap();
        let headers = signed(SECRET, T, EVENT);
        let mut body = EVENT.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = slack.verify_request(&headers, Bytes::from(body), at(T));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(signature in ".{0,80}", timestamp in ".{0,24}", body in ".{0,64}") {
        let slack = Slack::new(SECRET).unwrap();
        let mut headers = HeaderMap::new();
        if let Ok(value) = signature.parse() { headers.insert("x-slack-signature", value); }
        if let Ok(value) = timestamp.parse() { headers.insert("x-slack-request-timestamp", value); }
        let _ = slack.verify_request(&headers, Bytes::from(body), at(T));
    }
}
