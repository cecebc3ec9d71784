//! hookbox-paddle: a hand-signed webhook, its signer, several `h1` during a rotation,
//! tampering, the 5-second window and every malformed shape.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError};
use hookbox_paddle::{Paddle, PaddleSigner};
use proptest::prelude::*;

const SECRET: &str = "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI";
/// The `ts` of the example header in Paddle's "Verify webhook signatures" page.
const T: i64 = 1_671_552_777;
const BODY: &str =
    r#"{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed"}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn header(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("Paddle-Signature", value.parse().unwrap());
    headers
}

fn signed(secrets: &[&str], t: i64, body: &str) -> HeaderMap {
    PaddleSigner::new(secrets.to_vec())
        .unwrap()
        .sign("", t, body.as_bytes())
        .to_header_map()
}

fn verify(headers: &HeaderMap, body: &str, now: i64) -> Result<VerifiedDelivery, VerifyError> {
    Paddle::new(SECRET)
        .unwrap()
        .verify(headers, Bytes::copy_from_slice(body.as_bytes()), at(now))
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

/// The hex computed once with Python's `hmac` over `"{ts}:{body}"`, as Paddle's
/// documentation describes it.
#[test]
fn a_hand_signed_webhook_verifies() {
    let headers = header(&format!(
        "ts={T};h1=6b16f6101e6d6d3d764dc20b32062a57f980a19f2f5802db585d750679ab7b3b"
    ));
    let delivery = verify(&headers, BODY, T).unwrap();
    assert_eq!(
        delivery.dedupe_key().delivery_id(),
        "evt_01h8bzakzx3hm2fmen703n5q45"
    );
    assert_eq!(delivery.event_type(), Some("transaction.completed"));
    assert_eq!(signed(&[SECRET], T, BODY), headers);
}

#[test]
fn any_h1_matching_any_secret_passes_during_a_rotation() {
    let headers = signed(&["pdl_ntfset_old", SECRET], T, BODY);
    assert_eq!(
        headers["paddle-signature"]
            .to_str()
            .unwrap()
            .matches(";h1=")
            .count(),
        2
    );
    assert_eq!(kind(verify(&headers, BODY, T)), "ok");
    let both = Paddle::new(["pdl_ntfset_old", "pdl_ntfset_new"]).unwrap();
    let headers = signed(&["pdl_ntfset_new"], T, BODY);
    assert!(
        both.verify(&headers, Bytes::from_static(BODY.as_bytes()), at(T))
            .is_ok()
    );
    assert_eq!(
        kind(verify(&signed(&["pdl_ntfset_other"], T, BODY), BODY, T)),
        "signature_mismatch"
    );
}

#[test]
fn the_window_is_five_seconds_inclusive_in_both_directions() {
    let headers = signed(&[SECRET], T, BODY);
    assert_eq!(kind(verify(&headers, BODY, T + 5)), "ok");
    assert_eq!(kind(verify(&headers, BODY, T - 5)), "ok");
    assert_eq!(kind(verify(&headers, BODY, T + 6)), "timestamp_too_old");
    assert_eq!(kind(verify(&headers, BODY, T - 6)), "timestamp_in_future");
}

#[test]
fn every_malformed_shape_is_a_typed_error() {
    let good = signed(&[SECRET], T, BODY);
    let value = good["paddle-signature"].to_str().unwrap().to_string();
    let h1 = value.split_once(";h1=").unwrap().1.to_string();
    for (header_value, expected) in [
        (format!("h1={h1}"), "malformed_header"),
        (format!("ts={T}"), "malformed_header"),
        (format!("ts={T};ts={T};h1={h1}"), "malformed_header"),
        (format!("ts=soon;h1={h1}"), "malformed_header"),
        (format!("ts={T};h1=nothex"), "malformed_header"),
        (
            format!("ts={T};h1={}", h1.to_uppercase()),
            "signature_mismatch",
        ),
        (format!("ts={T};h0={h1}"), "malformed_header"),
        (format!(" ts={T} ; h1={h1} "), "ok"),
        (format!("ts={T};h1=nothex;h1={h1}"), "ok"),
        (format!("ts={};h1={h1}", T + 1), "signature_mismatch"),
    ] {
        assert_eq!(
            kind(verify(&header(&header_value), BODY, T)),
            expected,
            "{header_value}"
        );
    }
    assert_eq!(kind(verify(&HeaderMap::new(), BODY, T)), "missing_header");
    for (body, expected) in [
        ("", "malformed_body"),
        ("[1]", "malformed_body"),
        (r#"{"event_type":"x"}"#, "missing_dedupe_key"),
        (r#"{"event_id":1}"#, "missing_dedupe_key"),
    ] {
        assert_eq!(
            kind(verify(&signed(&[SECRET], T, body), body, T)),
            expected,
            "{body}"
        );
    }
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let headers = signed(&[SECRET], T, BODY);
        let mut body = BODY.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Paddle::new(SECRET).unwrap().verify(&headers, Bytes::from(body), at(T));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(value in "[ -~]{0,120}") {
        if let Ok(value) = value.parse() {
            let mut headers = HeaderMap::new();
            headers.insert("paddle-signature", value);
            let _ = verify(&headers, BODY, T);
        }
    }
}
