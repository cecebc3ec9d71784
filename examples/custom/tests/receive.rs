//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice is stored once
//! and written to the ledger once; a forged copy is refused.

use hookbox_core::Retention;
use hookbox_custom::{Algorithm, CustomSigner, Encoding, Scheme, Source};
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-custom");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/razorpay";
/// The example's documented demo secret.
const SECRET: &str = "hookbox_demo_webhook_secret";

/// The scheme `src/main.rs` verifies with: Razorpay signs like this.
fn razorpay() -> Scheme {
    Scheme::builder("razorpay")
        .signature("X-Razorpay-Signature", Algorithm::Sha256, Encoding::Hex)
        .signed("{body}")
        .id(Source::header("X-Razorpay-Event-Id"))
        .event_type(Source::field("event"))
        .retention(Retention::from_days(15))
        .build()
        .expect("the scheme is valid")
}

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
    // the signer puts the id in `X-Razorpay-Event-Id`, as Razorpay does
    let signer = CustomSigner::new(razorpay(), SECRET).unwrap();
    let id = unique("razorpay");
    let body = format!(
        r#"{{"entity":"event","event":"payment.captured","contains":["payment"],"payload":{{"payment":{{"entity":{{"id":"pay_{id}","amount":100,"currency":"INR"}}}}}},"created_at":1567674606}}"#
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

    let forger = CustomSigner::new(razorpay(), "not_the_webhook_secret").unwrap();
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
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{key}' AND event_type = 'payment.captured'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}
