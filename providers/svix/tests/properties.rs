//! Properties that hold for every body, id, timestamp and header.

use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use hookbox_svix::{Svix, SvixSigner};
use proptest::prelude::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NOW: i64 = 1_614_265_330;

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(NOW).expect("test setup")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sign_then_verify_round_trips(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        id in "[!-~]{1,40}",
        skew in -300i64..=300,
    ) {
        let headers = SvixSigner::new(SECRET).expect("test setup").sign(&id, NOW + skew, &body).to_header_map();
        let delivery = Svix::new(SECRET).expect("test setup").verify(&headers, body.clone().into(), now()).expect("a signed delivery verifies");
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.body().as_ref(), body.as_slice());
    }

    #[test]
    fn any_one_byte_change_to_the_body_fails(
        body in proptest::collection::vec(any::<u8>(), 1..256),
        index in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let headers = SvixSigner::new(SECRET).expect("test setup").sign("msg_1", NOW, &body).to_header_map();
        let mut changed = body.clone();
        changed[index.index(body.len())] ^= flip;
        let err = Svix::new(SECRET).expect("test setup").verify(&headers, changed.into(), now()).unwrap_err();
        prop_assert_eq!(err.kind(), "signature_mismatch");
    }

    #[test]
    fn any_one_byte_change_to_the_id_or_timestamp_fails(
        id in "[!-~]{1,40}",
        index in any::<prop::sample::Index>(),
        replacement in 0x21u8..=0x7e,
        name in prop_oneof![Just("svix-id"), Just("svix-timestamp")],
    ) {
        let signed = SvixSigner::new(SECRET).expect("test setup").sign(&id, NOW, b"[]");
        let original = signed.get(name).expect("test setup").as_bytes().to_vec();
        let mut changed = original.clone();
        changed[index.index(original.len())] = replacement;
        prop_assume!(changed != original);
        let mut headers = signed.to_header_map();
        headers.insert(HeaderName::from_static(name), HeaderValue::from_bytes(&changed).expect("test setup"));
        // a changed timestamp may no longer parse: any error will do, never a pass
        let result = Svix::new(SECRET).expect("test setup").verify(&headers, b"[]".to_vec().into(), now());
        prop_assert!(result.is_err());
    }

    #[test]
    fn arbitrary_headers_never_panic(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 6),
        text in "(v1,[A-Za-z0-9+/=]{0,60}| |[ -~]{0,20}){0,8}",
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let names = [
            "svix-id", "svix-timestamp", "svix-signature",
            "webhook-id", "webhook-timestamp", "webhook-signature",
        ];
        let mut headers = HeaderMap::new();
        for (name, value) in names.iter().zip(&values) {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        let svix = Svix::new(SECRET).expect("test setup");
        let _ = svix.verify(&headers, body.clone().into(), now());
        headers.insert("svix-signature", HeaderValue::from_str(&text).expect("test setup"));
        let _ = svix.verify(&headers, body.into(), now());
    }
}
