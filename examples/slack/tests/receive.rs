//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a forged copy is refused; the handshake gets its documented answer and leaves no row.

use hookbox_slack::SlackSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-slack");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/slack";
/// The example's documented demo secret.
const SECRET: &str = "hookbox-slack-demo-signing-secret";
const HANDSHAKE: &[u8] = include_bytes!("../handshake.json");

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
    let signer = SlackSigner::new(SECRET).unwrap();
    let id = unique("slack");
    let body = format!(
        r#"{{"type":"event_callback","event":{{"type":"app_mention","text":"hi"}},"event_id":"{id}"}}"#
    );
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

    let forger = SlackSigner::new("not-the-signing-secret").unwrap();
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
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{key}' AND event_type = 'app_mention'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_gets_its_documented_answer_and_leaves_no_row() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &["serve", "--no-worker"]);
    let signer = SlackSigner::new(SECRET).unwrap();
    let reply = example
        .send(PATH, &signer, &unique("handshake"), HANDSHAKE)
        .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"),
        "{reply:?}"
    );
    // a second handshake gets the same answer: nothing was claimed
    let again = example
        .send(PATH, &signer, &unique("handshake"), HANDSHAKE)
        .await;
    assert_eq!(again, reply);
    // forged, it is refused like an event
    let forger = SlackSigner::new("not-the-signing-secret").unwrap();
    let forged = example
        .send(PATH, &forger, &unique("handshake"), HANDSHAKE)
        .await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );
    let stats = sandbox.stats().await;
    assert_eq!(
        (stats.pending, stats.processed, stats.dead),
        (0, 0, 0),
        "the handshake left no row: {stats:?}"
    );
    assert_eq!(sandbox.rows().await.len(), 0);
}
