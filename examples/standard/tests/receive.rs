//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a forged copy is refused; a receiver process and a
//! separate worker process share one database, and both stop cleanly on SIGTERM.

use hookbox_standard::StandardSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-standard");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/standard";
/// The example's documented demo secret.
const SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
const BODY: &[u8] = br#"{"type":"contact.created","data":{"id":"contact_1"}}"#;

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

fn ledger_lines(id: &str) -> String {
    format!("SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}'")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_twice_is_applied_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let standard = StandardSigner::new(SECRET).unwrap();
    let id = unique("msg");

    let first = example.send(PATH, &standard, &id, BODY).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &standard, &id, BODY).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = StandardSigner::new("whsec_bm90LXRoZS1lbmRwb2ludC1zZWNyZXQ=").unwrap();
    let forged = example.send(PATH, &forger, &unique("msg"), BODY).await;
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
    assert_eq!(
        sandbox.query_i64(&ledger_lines(&id)).await,
        1,
        "applied exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_worker_process_applies_what_the_receiver_stored() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut receiver = sandbox.start(BIN, &["serve", "--no-worker"]);
    let standard = StandardSigner::new(SECRET).unwrap();
    let id = unique("msg");

    let first = receiver.send(PATH, &standard, &id, BODY).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = receiver.send(PATH, &standard, &id, BODY).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );
    // no worker runs anywhere yet: the delivery waits in the inbox
    let stats = sandbox.stats().await;
    assert_eq!((stats.pending, stats.processed), (1, 0), "{stats:?}");

    let mut worker = sandbox.spawn(BIN, &["worker"]);
    sandbox.wait_processed(1).await;
    assert_eq!(
        sandbox.query_i64(&ledger_lines(&id)).await,
        1,
        "applied exactly once"
    );
    assert!(
        worker.log().contains("applied once"),
        "the worker process applied it:\n{}",
        worker.log()
    );
    assert!(
        !receiver.log().contains("applied once"),
        "the receiver ran no worker:\n{}",
        receiver.log()
    );

    // SIGTERM, as an orchestrator stops a process: each exits with status 0
    for (name, process) in [("worker", &mut worker), ("receiver", &mut receiver)] {
        let status = process.terminate().await;
        assert!(
            status.success(),
            "the {name} after SIGTERM: {status}\n{}",
            process.log()
        );
    }
    assert!(
        worker.log().contains("stopped"),
        "the worker returned its report:\n{}",
        worker.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_prints_a_ready_line_and_refuses_to_start_without_its_store() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let worker = sandbox.spawn(BIN, &["worker"]);
    assert_eq!(worker.next_line(), "worker started", "{}", worker.log());

    // split across processes, a default store would be a file of the worker's own
    for args in [&["worker"][..], &["serve", "--no-worker"][..]] {
        let mut unnamed = sandbox.spawn_with(BIN, args, &[("HOOKBOX_STORE", "")]);
        let status = unnamed.exited().await;
        assert_eq!(status.code(), Some(1), "{args:?}: {status}");
        assert!(
            unnamed.log().contains("HOOKBOX_STORE is required"),
            "{args:?}: {}",
            unnamed.log()
        );
    }
}
