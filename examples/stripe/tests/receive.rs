//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`): a signed delivery sent twice is
//! stored once and credited once; a forged copy is refused; SIGTERM stops it cleanly;
//! a SQLite build refuses a Postgres URL.

use hookbox_example_testkit::{Sandbox, unique};
use hookbox_stripe::StripeSigner;

const BIN: &str = env!("CARGO_BIN_EXE_example-stripe");
const PATH: &str = "/webhooks/stripe";
/// The example's documented demo secret.
const SECRET: &str = "whsec_hookbox_stripe_demo";

fn payment(event: &str, customer: &str, amount: i64) -> Vec<u8> {
    format!(
        r#"{{"id":"{event}","object":"event","type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_1","object":"payment_intent","amount":{amount},"currency":"usd","customer":"{customer}"}}}}}}"#
    )
    .into_bytes()
}

/// The sandbox for this build's backend; `None` when Postgres is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(cfg!(feature = "postgres")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_sent_twice_is_credited_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_alice", 2000);

    // Stripe takes the event id from the body; the id argument is unused
    let first = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = StripeSigner::new("whsec_not_the_endpoint_secret").unwrap();
    let forged = example
        .send(
            PATH,
            &forger,
            "",
            &payment(&unique("evt"), "cus_alice", 1_000_000),
        )
        .await;
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
    let balance = sandbox
        .query_i64("SELECT balance AS n FROM balances WHERE account = 'cus_alice'")
        .await;
    assert_eq!(balance, 2000, "credited exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_and_exits_with_status_0() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &[]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_carol", 700);
    let stored = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(stored.outcome(), "stored", "{stored:?}");
    sandbox.wait_processed(1).await;

    let status = example.terminate().await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        example.log()
    );
    assert!(
        example.log().contains("stopped"),
        "the worker returned its report:\n{}",
        example.log()
    );
}

#[cfg(not(feature = "postgres"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_build_refuses_a_postgres_url_and_says_which_build_to_use() {
    let sandbox = Sandbox::new();
    let mut example = sandbox.spawn_with(
        BIN,
        &[],
        &[("HOOKBOX_STORE", "postgres://postgres@127.0.0.1:5432/test")],
    );
    let status = example.exited().await;
    assert!(!status.success(), "{status}\n{}", example.log());
    assert!(
        example.log().contains("--features postgres"),
        "the error names the build that speaks Postgres:\n{}",
        example.log()
    );
}
