#![no_main]
//! Fuzzes the `hookbox_discord` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_discord::Discord::new("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a").expect("valid key");
    common::verify_with(&provider, &["x-signature-ed25519", "x-signature-timestamp"], data);
});
