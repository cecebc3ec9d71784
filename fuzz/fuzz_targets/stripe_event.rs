#![no_main]
//! Fuzzes hookbox-stripe's event scanner against its reference, `serde_json`
//! (`providers/stripe/tests/common/serde_event.rs`, shared with the crate's own
//! tests): for any correctly signed body that `serde_json` reads as JSON,
//! `Stripe::verify` must read the same `id`, `type` and `data.object.id` (the first
//! copy of a repeated key). Any other body may be refused or read up to where the scan
//! stops, but never panics.

use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use libfuzzer_sys::fuzz_target;

#[path = "../../providers/stripe/tests/common/serde_event.rs"]
mod serde_event;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const T: i64 = 1_614_265_330;

fuzz_target!(|body: &[u8]| {
    let stripe = hookbox_stripe::Stripe::new(SECRET).expect("valid secret");
    let headers = hookbox_stripe::StripeSigner::new(SECRET)
        .expect("valid secret")
        .sign("", T, body)
        .to_header_map();
    let now = OffsetDateTime::from_unix_timestamp(T).expect("in range");
    let result = stripe.verify(&headers, Bytes::copy_from_slice(body), now);
    match serde_event::read(body) {
        // not JSON: whatever the scan met before it stopped decides
        Err(_) => assert!(
            matches!(
                result.as_ref().map_err(|e| e.kind()),
                Ok(_) | Err("malformed_body" | "missing_dedupe_key")
            ),
            "{result:?}"
        ),
        Ok([id, kind, object]) => match id.filter(|id| !id.is_empty()) {
            None => assert_eq!(
                result.as_ref().err().map(|e| e.kind()),
                Some("missing_dedupe_key"),
                "{result:?}"
            ),
            Some(id) => {
                let delivery = result.expect("the reference read an id");
                assert_eq!(delivery.dedupe_key().delivery_id(), id);
                assert_eq!(delivery.event_type(), kind.as_deref());
                let correlation = object.zip(kind).map(|(o, k)| format!("{o}:{k}"));
                assert_eq!(delivery.correlation_id(), correlation.as_deref());
            }
        },
    }
});
