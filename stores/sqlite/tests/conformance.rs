//! The conformance suite of `hookbox-core`, on a fresh SQLite file per test.
#![allow(clippy::unwrap_used)]

use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider as _, Signer as _};
use hookbox_sqlite::testing::SqliteHarness;

hookbox_core::conformance_tests!(SqliteHarness);

/// Checklist 6: one delivery verified under the old and the new secret of a
/// rotation is one event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotated_copies_are_one_event() {
    let old = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let new = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let verifier = hookbox_standard::Standard::new(vec![old, new]).unwrap();
    let body = br#"{"type":"credit"}"#;
    let now = OffsetDateTime::now_utc();
    let copy = |secret: &str| {
        let headers = hookbox_standard::StandardSigner::new(secret)
            .unwrap()
            .sign("msg_rotated", now.unix_timestamp(), body)
            .to_header_map();
        verifier
            .verify(&headers, body.as_slice().into(), now)
            .unwrap()
    };
    hookbox_core::testing::check_rotated_copies_are_one_event::<SqliteHarness>(
        copy(old),
        copy(new),
    )
    .await;
}
