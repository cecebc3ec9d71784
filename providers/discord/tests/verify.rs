//! hookbox-discord: RFC 8032's key, its signer, tampering, the window, both `PING`s,
//! interactions and webhook events, and every malformed shape.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, Verified, VerifyError};
use hookbox_discord::{Discord, DiscordSigner};
use proptest::prelude::*;

/// RFC 8032 section 7.1, test 1: the secret key (seed) and its public key.
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const T: i64 = 1_700_000_000;
const COMMAND: &str = r#"{"type":2,"token":"A_UNIQUE_TOKEN","id":"786008729715212338","application_id":"775799577604522054","data":{"name":"blep","type":1},"version":1}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn signed(t: i64, body: &str) -> HeaderMap {
    DiscordSigner::new(SEED)
        .unwrap()
        .sign("", t, body.as_bytes())
        .to_header_map()
}

fn kind(result: &Result<Verified, VerifyError>) -> &'static str {
    match result {
        Ok(Verified::Event(_)) => "event",
        Ok(Verified::Handshake(_)) => "handshake",
        Err(err) => err.kind(),
    }
}

fn check(headers: &HeaderMap, body: &str, now: i64) -> Result<Verified, VerifyError> {
    Discord::new(PUBLIC).unwrap().verify_request(
        headers,
        Bytes::copy_from_slice(body.as_bytes()),
        at(now),
    )
}

#[test]
fn the_signer_derives_rfc_8032s_public_key() {
    assert_eq!(DiscordSigner::new(SEED).unwrap().public_key_hex(), PUBLIC);
    assert_eq!(Discord::new(PUBLIC.to_uppercase()).map(|_| ()), Ok(()));
    for bad in ["", "abc", &"zz".repeat(32)] {
        assert_eq!(
            Discord::new(bad).unwrap_err().kind(),
            "invalid_secret",
            "{bad}"
        );
    }
}

#[test]
fn an_interaction_is_keyed_by_its_id_and_typed_by_its_type() {
    let Ok(Verified::Event(delivery)) = check(&signed(T, COMMAND), COMMAND, T) else {
        panic!("an event");
    };
    assert_eq!(delivery.dedupe_key().delivery_id(), "786008729715212338");
    assert_eq!(delivery.event_type(), Some("APPLICATION_COMMAND"));
}

#[test]
fn both_pings_are_answered_and_verified_first() {
    let ping = r#"{"id":"1","application_id":"2","type":1,"token":"t","version":1}"#;
    let result = check(&signed(T, ping), ping, T);
    let Ok(Verified::Handshake(reply)) = &result else {
        panic!("{result:?}");
    };
    assert_eq!(
        (reply.status().as_u16(), reply.content_type()),
        (200, Some("application/json"))
    );
    assert_eq!(&reply.body()[..], br#"{"type":1}"#);
    let other = DiscordSigner::new(&"11".repeat(32))
        .unwrap()
        .sign("", T, ping.as_bytes());
    assert_eq!(
        kind(&check(&other.to_header_map(), ping, T)),
        "signature_mismatch"
    );

    let events_ping = r#"{"version":1,"application_id":"1234560123453231555","type":0}"#;
    let result = check(&signed(T, events_ping), events_ping, T);
    let Ok(Verified::Handshake(reply)) = &result else {
        panic!("{result:?}");
    };
    assert_eq!(
        (
            reply.status().as_u16(),
            reply.content_type(),
            reply.body().len()
        ),
        (204, None, 0)
    );
}

#[test]
fn a_webhook_event_is_keyed_by_its_type_and_timestamp() {
    let body = r#"{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53.064834","data":{"user":{"id":"111178765189277770"}}}}"#;
    let Ok(Verified::Event(delivery)) = check(&signed(T, body), body, T) else {
        panic!("an event");
    };
    assert_eq!(
        delivery.dedupe_key().delivery_id(),
        "APPLICATION_AUTHORIZED:2024-10-18T14:42:53.064834"
    );
    assert_eq!(delivery.event_type(), Some("APPLICATION_AUTHORIZED"));
    let body = r#"{"version":1,"type":1,"event":{"type":"ENTITLEMENT_CREATE"}}"#;
    assert_eq!(
        kind(&check(&signed(T, body), body, T)),
        "missing_dedupe_key"
    );
}

#[test]
fn the_window_and_the_body_are_checked_after_the_signature() {
    let headers = signed(T, COMMAND);
    assert_eq!(kind(&check(&headers, COMMAND, T + 300)), "event");
    assert_eq!(kind(&check(&headers, COMMAND, T - 300)), "event");
    assert_eq!(
        kind(&check(&headers, COMMAND, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(&check(&headers, COMMAND, T - 301)),
        "timestamp_in_future"
    );
    for (body, expected) in [
        ("", "malformed_body"),
        ("[]", "malformed_body"),
        (r#"{"type":2}"#, "missing_dedupe_key"),
        (r#"{"type":2,"id":7}"#, "missing_dedupe_key"),
    ] {
        assert_eq!(kind(&check(&signed(T, body), body, T)), expected, "{body}");
    }
}

#[test]
fn every_malformed_header_shape_is_a_typed_error() {
    let good = signed(T, COMMAND);
    let sig = good["x-signature-ed25519"].to_str().unwrap().to_string();
    let with = |name: &'static str, value: &str| {
        let mut headers = good.clone();
        headers.insert(name, value.parse().unwrap());
        kind(&check(&headers, COMMAND, T))
    };
    assert_eq!(
        with("x-signature-ed25519", &sig.to_uppercase()),
        "signature_mismatch"
    );
    assert_eq!(with("x-signature-ed25519", &sig[..126]), "malformed_header");
    assert_eq!(
        with("x-signature-ed25519", &"zz".repeat(64)),
        "malformed_header"
    );
    assert_eq!(
        with("x-signature-ed25519", &"00".repeat(64)),
        "signature_mismatch"
    );
    assert_eq!(
        with("x-signature-timestamp", &(T + 1).to_string()),
        "signature_mismatch"
    );
    assert_eq!(with("x-signature-timestamp", "now"), "malformed_header");
    for missing in ["x-signature-ed25519", "x-signature-timestamp"] {
        let mut headers = good.clone();
        headers.remove(missing);
        assert_eq!(kind(&check(&headers, COMMAND, T)), "missing_header");
    }
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let headers = signed(T, COMMAND);
        let mut body = COMMAND.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Discord::new(PUBLIC).unwrap().verify_request(&headers, Bytes::from(body), at(T));
        prop_assert_eq!(kind(&result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(signature in "[ -~]{0,140}", timestamp in "[ -~]{0,24}") {
        let mut headers = HeaderMap::new();
        if let Ok(value) = signature.parse() { headers.insert("x-signature-ed25519", value); }
        if let Ok(value) = timestamp.parse() { headers.insert("x-signature-timestamp", value); }
        let _ = check(&headers, COMMAND, T);
    }
}
