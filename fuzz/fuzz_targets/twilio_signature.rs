#![no_main]
//! Fuzzes the `hookbox_twilio` header parsers (signature, settings, Content-Type), the
//! form parameter parser and the verifier with arbitrary header values and bodies.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_twilio::Twilio::new(
        "fuzz_auth_token",
        "https://fuzz.example/webhooks/twilio?tenant=a",
    )
    .expect("valid token and public URL");
    common::verify_with(
        &provider,
        &[
            "x-twilio-signature",
            "x-twilio-webhooks-signature-settings",
            "i-twilio-idempotency-token",
            "content-type",
        ],
        data,
    );
});
