#![no_main]
//! Fuzzes the `hookbox_custom` verifier with arbitrary header values and bodies, on a
//! scheme with a prefixed, space-separated signature header, a timestamp header and an
//! id header, all three signed, and the event type read from the body.

use std::sync::LazyLock;
use std::time::Duration;

use hookbox_core::Retention;
use hookbox_custom::{Algorithm, Custom, Encoding, Scheme, Source, Unit};
use libfuzzer_sys::fuzz_target;

mod common;

/// Built once: a scheme's names are interned for the life of the process.
static PROVIDER: LazyLock<Custom> = LazyLock::new(|| {
    let scheme = Scheme::builder("fuzz")
        .signature("X-Fuzz-Signature", Algorithm::Sha256, Encoding::Base64)
        .prefix("v1,")
        .separator(' ')
        .signed("{id}.{timestamp}.{body}")
        .id(Source::header("X-Fuzz-Id"))
        .timestamp(Source::header("X-Fuzz-Timestamp"), Unit::Seconds)
        .tolerance(Duration::from_secs(300))
        .event_type(Source::field("type"))
        .retention(Retention::from_days(1))
        .build()
        .expect("a valid scheme");
    Custom::new(scheme, "fuzz-secret").expect("a valid secret")
});

fuzz_target!(|data: &[u8]| {
    common::verify_with(
        &*PROVIDER,
        &["x-fuzz-signature", "x-fuzz-timestamp", "x-fuzz-id"],
        data,
    );
});
