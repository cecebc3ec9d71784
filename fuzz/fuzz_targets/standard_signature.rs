#![no_main]
//! Fuzzes the `hookbox_standard` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_standard::Standard::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("valid secret");
    common::verify_with(&provider, &["webhook-id", "webhook-timestamp", "webhook-signature"], data);
});
