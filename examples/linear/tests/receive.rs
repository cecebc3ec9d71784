//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a tampered copy and a stale one are refused.

use hookbox_core::Signer;
use hookbox_core::time::{Duration, OffsetDateTime};
use hookbox_linear::LinearSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-linear");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/linear";
/// The example's documented demo secret.
const SECRET: &str = "lin_wh_hookbox_demo_signing_secret";

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

/// An `Issue` created `age` ago, as Linear sends it: the time it was sent is inside
/// the signed body, in Unix milliseconds.
fn issue(id: &str, age: Duration) -> String {
    let sent = OffsetDateTime::now_utc() - age;
    let millis = sent.unix_timestamp_nanos() / 1_000_000;
    format!(
        r#"{{"action":"create","type":"Issue","data":{{"id":"{id}","title":"Checkout button does nothing"}},"createdAt":"2026-01-23T12:53:18.084Z","webhookTimestamp":{millis}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_twice_is_applied_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let signer = LinearSigner::new(SECRET).unwrap();
    // `Linear-Delivery` is the dedupe key
    let delivery = unique("linear");
    let body = issue(&unique("issue"), Duration::ZERO);

    let first = example
        .send(PATH, &signer, &delivery, body.as_bytes())
        .await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example
        .send(PATH, &signer, &delivery, body.as_bytes())
        .await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    // signed, then changed on the way
    let headers = signer.sign(&unique("linear"), 0, body.as_bytes());
    let tampered = body.replace("\"create\"", "\"remove\"");
    let forged = example.post(PATH, &headers, tampered.as_bytes()).await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    // correctly signed, but sent ten minutes ago: a replay
    let stale = issue(&unique("issue"), Duration::minutes(10));
    let replayed = example
        .send(PATH, &signer, &unique("linear"), stale.as_bytes())
        .await;
    assert_eq!(
        (replayed.status, replayed.outcome().as_str()),
        (401, "timestamp_too_old"),
        "{replayed:?}"
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(
        stats.processed, 1,
        "one row: the duplicate, the tampered and the stale copies were not stored"
    );
    let lines = format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{delivery}' AND event_type = 'Issue.create'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}
