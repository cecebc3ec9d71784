#![no_main]
//! Fuzzes the `hookbox_linear` verifier with arbitrary header values and bodies, and,
//! since a random signature never matches, its body reading (`webhookTimestamp`,
//! `type`, `action`, `data.id`) with the same bytes correctly signed; and the
//! `with_webhook_timestamp` helper on them.

use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use libfuzzer_sys::fuzz_target;

mod common;

const SECRET: &str = "lin_wh_fuzz";

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_linear::Linear::new(SECRET).expect("valid secret");
    common::verify_with(
        &provider,
        &["linear-signature", "linear-delivery", "linear-event"],
        data,
    );

    let signer = hookbox_linear::LinearSigner::new(SECRET).expect("valid secret");
    let headers = signer.sign("fuzz-delivery", 0, data).to_header_map();
    let now = OffsetDateTime::from_unix_timestamp(1_614_265_330).expect("in range");
    let _ = provider.verify(&headers, Bytes::copy_from_slice(data), now);

    if let Ok(stamped) = hookbox_linear::with_webhook_timestamp(data, 1_614_265_330_000) {
        let headers = signer.sign("fuzz-delivery", 0, &stamped).to_header_map();
        let _ = provider.verify(&headers, Bytes::from(stamped), now);
    }
});
