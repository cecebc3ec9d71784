#![no_main]
//! Fuzzes the `hookbox_slack` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_slack::Slack::new("8f742231b10e8888abcd99yyyzzz85a5").expect("valid secret");
    common::verify_with(&provider, &["x-slack-signature", "x-slack-request-timestamp", "x-slack-retry-num"], data);
});
