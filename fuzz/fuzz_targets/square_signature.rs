#![no_main]
//! Fuzzes the `hookbox_square` verifier with arbitrary signature header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_square::Square::new(
        "square_fuzz_signature_key",
        "https://fuzz.example/webhooks/square",
    )
    .expect("valid signature key and notification URL");
    common::verify_with(&provider, &["x-square-hmacsha256-signature"], data);
});
