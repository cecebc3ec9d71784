//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a forged copy is refused.

use hookbox_paddle::PaddleSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-paddle");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/paddle";
/// The example's documented demo secret.
const SECRET: &str = "pdl_ntfset_hookbox_demo_secret_key";

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_twice_is_applied_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let signer = PaddleSigner::new(SECRET).unwrap();
    let id = unique("paddle");
    let body = format!(r#"{{"event_id":"{id}","event_type":"transaction.completed","data":{{}}}}"#);
    let key = id.clone();

    let first = example.send(PATH, &signer, &id, body.as_bytes()).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &signer, &id, body.as_bytes()).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = PaddleSigner::new("pdl_ntfset_not_the_secret_key").unwrap();
    let forged = example.send(PATH, &forger, &id, body.as_bytes()).await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(
        stats.processed, 1,
        "one row: the duplicate and the forgery were not stored"
    );
    let lines = format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{key}' AND event_type = 'transaction.completed'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}
