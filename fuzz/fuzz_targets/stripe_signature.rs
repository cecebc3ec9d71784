#![no_main]
//! Fuzzes the `hookbox_stripe` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_stripe::Stripe::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("valid secret");
    common::verify_with(&provider, &["stripe-signature"], data);
});
