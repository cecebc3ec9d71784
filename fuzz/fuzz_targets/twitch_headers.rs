#![no_main]
//! Fuzzes the `hookbox_twitch` header parser and verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_twitch::Twitch::new("s3cRe7").expect("valid secret");
    common::verify_with(&provider, &["twitch-eventsub-message-signature", "twitch-eventsub-message-id", "twitch-eventsub-message-timestamp", "twitch-eventsub-message-type", "twitch-eventsub-subscription-type"], data);
});
