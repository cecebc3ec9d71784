#![no_main]
//! Fuzzes the `hookbox_svix` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_svix::Svix::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("valid secret");
    common::verify_with(&provider, &["svix-id", "svix-timestamp", "svix-signature", "webhook-signature"], data);
});
