#![no_main]
//! Fuzzes the `hookbox_gitlab` token check, dedupe-key headers and signing-token
//! verification with arbitrary header values and bodies, on a receiver that requires
//! both a secret token and a signature.

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let provider = hookbox_gitlab::GitLab::new("gitlab-fuzz-token")
        .expect("valid secret token")
        .with_signing_secrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .expect("valid signing token");
    common::verify_with(
        &provider,
        &[
            "x-gitlab-token",
            "x-gitlab-event-uuid",
            "idempotency-key",
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        ],
        data,
    );
});
