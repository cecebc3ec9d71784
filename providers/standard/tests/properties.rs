//! Properties that hold for every body, id, timestamp and header.

use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use hookbox_standard::{Standard, StandardSigner, public_key};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WHSK: &str = "whsk_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
const NOW: i64 = 1_614_265_330;

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(NOW).expect("test setup")
}

/// Message ids as senders make them: visible ASCII without spaces.
fn id() -> impl Strategy<Value = String> {
    "[!-~]{1,40}"
}

fn body(min: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), min..512)
}

/// A signer and a receiver for `v1` (HMAC) or for `v1a` (ed25519) signatures.
fn parties(ed25519: bool) -> (StandardSigner, Standard) {
    if ed25519 {
        let receiver = Standard::new(public_key(WHSK).expect("test setup")).expect("test setup");
        (StandardSigner::new(WHSK).expect("test setup"), receiver)
    } else {
        (
            StandardSigner::new(SECRET).expect("test setup"),
            Standard::new(SECRET).expect("test setup"),
        )
    }
}

fn round_trip(ed25519: bool, body: Vec<u8>, id: &str, skew: i64) -> Result<(), TestCaseError> {
    let (signer, receiver) = parties(ed25519);
    let headers = signer.sign(id, NOW + skew, &body).to_header_map();
    let delivery = receiver
        .verify(&headers, body.clone().into(), now())
        .expect("a signed delivery verifies");
    prop_assert_eq!(delivery.dedupe_key().delivery_id(), id);
    prop_assert_eq!(delivery.body().as_ref(), body.as_slice());
    Ok(())
}

fn body_change_fails(
    ed25519: bool,
    body: Vec<u8>,
    index: prop::sample::Index,
    flip: u8,
) -> Result<(), TestCaseError> {
    let (signer, receiver) = parties(ed25519);
    let headers = signer.sign("msg_1", NOW, &body).to_header_map();
    let mut changed = body.clone();
    changed[index.index(body.len())] ^= flip;
    let err = receiver
        .verify(&headers, changed.into(), now())
        .expect_err("a changed body never verifies");
    prop_assert_eq!(err.kind(), "signature_mismatch");
    Ok(())
}

fn header_change_fails(
    ed25519: bool,
    id: &str,
    index: prop::sample::Index,
    replacement: u8,
    name: &'static str,
) -> Result<(), TestCaseError> {
    let (signer, receiver) = parties(ed25519);
    let signed = signer.sign(id, NOW, b"[]");
    let original = signed.get(name).expect("test setup").as_bytes().to_vec();
    let mut changed = original.clone();
    changed[index.index(original.len())] = replacement;
    prop_assume!(changed != original);
    let mut headers = signed.to_header_map();
    headers.insert(
        HeaderName::from_static(name),
        HeaderValue::from_bytes(&changed).expect("test setup"),
    );
    // a changed timestamp may no longer parse: any error will do, never a pass
    let result = receiver.verify(&headers, b"[]".to_vec().into(), now());
    prop_assert!(result.is_err());
    Ok(())
}

fn header() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("webhook-id"), Just("webhook-timestamp")]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn v1_sign_then_verify_round_trips(body in body(0), id in id(), skew in -300i64..=300) {
        round_trip(false, body, &id, skew)?;
    }

    #[test]
    fn v1_any_one_byte_change_to_the_body_fails(
        body in body(1), index in any::<prop::sample::Index>(), flip in 1u8..=255,
    ) {
        body_change_fails(false, body, index, flip)?;
    }

    #[test]
    fn v1_any_one_byte_change_to_the_id_or_timestamp_fails(
        id in id(), index in any::<prop::sample::Index>(), byte in 0x21u8..=0x7e, name in header(),
    ) {
        header_change_fails(false, &id, index, byte, name)?;
    }

    #[test]
    fn arbitrary_headers_never_panic(
        id in proptest::collection::vec(any::<u8>(), 0..64),
        timestamp in proptest::collection::vec(any::<u8>(), 0..32),
        signature in proptest::collection::vec(any::<u8>(), 0..400),
        text in "(v1a?,[A-Za-z0-9+/=]{0,100}| |[ -~]{0,20}){0,8}",
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let receiver = Standard::new([SECRET, &public_key(WHSK).expect("test setup")]).expect("test setup");
        for value in [signature, text.into_bytes()] {
            let mut headers = HeaderMap::new();
            for (name, value) in [
                ("webhook-id", &id),
                ("webhook-timestamp", &timestamp),
                ("webhook-signature", &value),
            ] {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    headers.insert(HeaderName::from_static(name), value);
                }
            }
            let _ = receiver.verify(&headers, body.clone().into(), now());
        }
    }

    #[test]
    fn arbitrary_secrets_never_panic(secret in "(whsec_|whpk_|whsk_)?[ -~\n]{0,80}") {
        let _ = Standard::new(secret.as_str());
        let _ = StandardSigner::new(secret.as_str());
        let _ = public_key(&secret);
    }
}

// ed25519 is slow in unoptimised test builds, so fewer cases
proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn v1a_sign_then_verify_round_trips(body in body(0), id in id(), skew in -300i64..=300) {
        round_trip(true, body, &id, skew)?;
    }

    #[test]
    fn v1a_any_one_byte_change_to_the_body_fails(
        body in body(1), index in any::<prop::sample::Index>(), flip in 1u8..=255,
    ) {
        body_change_fails(true, body, index, flip)?;
    }

    #[test]
    fn v1a_any_one_byte_change_to_the_id_or_timestamp_fails(
        id in id(), index in any::<prop::sample::Index>(), byte in 0x21u8..=0x7e, name in header(),
    ) {
        header_change_fails(true, &id, index, byte, name)?;
    }
}
