//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a forged copy is refused; SIGTERM stops it cleanly.

use hookbox_svix::SvixSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-svix");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/svix";
/// The example's documented demo secret.
const SECRET: &str = "whsec_aG9va2JveC1zdml4LWRlbW8tc2VjcmV0";

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
    let svix = SvixSigner::new(SECRET).unwrap();
    let id = unique("msg");
    let body = br#"{"type":"invoice.paid","data":{"invoice_id":"inv_1"}}"#;

    let first = example.send(PATH, &svix, &id, body).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &svix, &id, body).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = SvixSigner::new("whsec_bm90LXRoZS1lbmRwb2ludC1zZWNyZXQ=").unwrap();
    let forged = example.send(PATH, &forger, &unique("msg"), body).await;
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
    let lines = sandbox
        .query_i64(&format!(
            "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}' AND event_type = 'invoice.paid'"
        ))
        .await;
    assert_eq!(lines, 1, "the event written to the ledger exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_and_exits_with_status_0() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &[]);
    let svix = SvixSigner::new(SECRET).unwrap();
    let body = br#"{"type":"invoice.paid","data":{"invoice_id":"inv_2"}}"#;
    let stored = example.send(PATH, &svix, &unique("msg"), body).await;
    assert_eq!(stored.outcome(), "stored", "{stored:?}");
    sandbox.wait_processed(1).await;

    let status = example.terminate().await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        example.log()
    );
    assert!(example.log().contains("stopped"), "{}", example.log());
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
