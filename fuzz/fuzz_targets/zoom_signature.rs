#![no_main]
//! Fuzzes the `hookbox_zoom` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_zoom::Zoom::new("wXyWgWXUSDuaBJRUVEzYhg").expect("valid secret");
    common::verify_with(&provider, &["x-zm-signature", "x-zm-request-timestamp"], data);
});
