#![no_main]
//! Fuzzes the `hookbox_paddle` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_paddle::Paddle::new("pdl_ntfset_fuzz").expect("valid secret");
    common::verify_with(&provider, &["paddle-signature"], data);
});
