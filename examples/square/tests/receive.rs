//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event signed for `PUBLIC_URL` and
//! sent to the bound address twice is stored once and written to the ledger once; a
//! tampered copy, or one signed for another URL, is refused.

use hookbox_core::Signer as _;
use hookbox_square::SquareSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-square");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/square";
/// The example's documented demo signature key.
const SECRET: &str = "hookbox_demo_signature_key";
/// The URL Square would sign: not the address the example is bound to.
const PUBLIC_URL: &str = "https://public.example/webhooks/square";

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

fn event(id: &str) -> String {
    format!(
        r#"{{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"{id}","created_at":"2020-02-06T21:27:34.308Z","data":{{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY"}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_signed_for_the_public_url_is_applied_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start_with(BIN, &[], &[("PUBLIC_URL", PUBLIC_URL)]);
    let signer = SquareSigner::new(SECRET, PUBLIC_URL).unwrap();
    let id = unique("square");
    let body = event(&id);

    // sent to http://127.0.0.1:<port>/webhooks/square, signed for PUBLIC_URL
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

    // the signature of the body, sent with another body
    let headers = signer.sign(&id, 0, body.as_bytes());
    let tampered = body.replace("payment.updated", "payment.created");
    let forged = example.post(PATH, &headers, tampered.as_bytes()).await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );
    // signed for the address the request reached, not the configured PUBLIC_URL
    let local = SquareSigner::new(SECRET, format!("{}{PATH}", example.url())).unwrap();
    let elsewhere = example.send(PATH, &local, &id, body.as_bytes()).await;
    assert_eq!(
        (elsewhere.status, elsewhere.outcome().as_str()),
        (401, "signature_mismatch"),
        "{elsewhere:?}"
    );
    let forger = SquareSigner::new("not_the_signature_key", PUBLIC_URL).unwrap();
    let forged = example.send(PATH, &forger, &id, body.as_bytes()).await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(
        stats.processed, 1,
        "one row: the duplicate and the refused copies were not stored"
    );
    let lines = format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}' AND event_type = 'payment.updated'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_public_url_the_bound_address_is_the_notification_url() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    // empty counts as unset
    let example = sandbox.start_with(BIN, &[], &[("PUBLIC_URL", "")]);
    assert!(
        example.log().contains("PUBLIC_URL is unset"),
        "a warning says so\n{}",
        example.log()
    );
    let signer = SquareSigner::new(SECRET, format!("{}{PATH}", example.url())).unwrap();
    let id = unique("square");
    let answer = example
        .send(PATH, &signer, &id, event(&id).as_bytes())
        .await;
    assert_eq!(
        (answer.status, answer.outcome().as_str()),
        (200, "stored"),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_url_that_is_not_a_url_stops_the_process() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.spawn_with(BIN, &["serve"], &[("PUBLIC_URL", "public.example/hook")]);
    let status = example.exited().await;
    assert!(!status.success(), "{status}");
    assert!(
        example
            .log()
            .contains("the notification URL does not start with"),
        "{}",
        example.log()
    );
}
