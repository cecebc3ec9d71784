//! The example over real HTTP: a push sent twice is stored once and counted once; a
//! forged copy is refused.

use hookbox_example_testkit::{Sandbox, unique};
use hookbox_github::GitHubSigner;

const BIN: &str = env!("CARGO_BIN_EXE_example-github");
const PATH: &str = "/webhooks/github";
/// The example's documented demo secret.
const SECRET: &str = "hookbox-github-demo-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_sent_twice_is_counted_once_and_a_forgery_is_refused() {
    let sandbox = Sandbox::new();
    let example = sandbox.start(BIN, &[]);
    let github = GitHubSigner::new(SECRET).unwrap().event("push");
    let id = unique("delivery");
    let body = br#"{"ref":"refs/heads/main","repository":{"full_name":"octo/hello"},"commits":[{"id":"a"},{"id":"b"}]}"#;

    let first = example.send(PATH, &github, &id, body).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &github, &id, body).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = GitHubSigner::new("not-the-webhook-secret")
        .unwrap()
        .event("push");
    let forged = example.send(PATH, &forger, &unique("delivery"), body).await;
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
    let pushes = sandbox
        .query_i64("SELECT pushes AS n FROM pushes WHERE repo = 'octo/hello'")
        .await;
    let commits = sandbox
        .query_i64("SELECT commits AS n FROM pushes WHERE repo = 'octo/hello'")
        .await;
    assert_eq!((pushes, commits), (1, 2), "the push counted exactly once");
}
