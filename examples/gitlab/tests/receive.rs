//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an event sent twice (a retry has a
//! new `X-Gitlab-Webhook-UUID`, the same event id) is stored once and written to the
//! ledger once; a wrong secret token is refused; with `GITLAB_SIGNING_TOKEN`, a request
//! with the right secret token but no signature is refused.

use hookbox_core::time::OffsetDateTime;
use hookbox_core::{SignedHeaders, Signer};
use hookbox_gitlab::GitLabSigner;
use hookbox_testkit::{Backend, Example, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-gitlab");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/gitlab";
/// The example's documented demo secret token.
const SECRET: &str = "hookbox-gitlab-demo-token";
/// A signing token in GitLab's form: `whsec_` and the base64 of 32 bytes.
const SIGNING_TOKEN: &str = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=";

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

/// A push body naming `id`, so each test's ledger line is its own.
fn push(id: &str) -> String {
    format!(r#"{{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"{id}"}}"#)
}

/// Sends `headers` as one attempt of an event: like GitLab, each attempt gets an
/// `X-Gitlab-Webhook-UUID` of its own (named after `label`). Returns the answer's
/// status and outcome.
async fn attempt(
    example: &Example,
    mut headers: SignedHeaders,
    label: &str,
    body: &str,
) -> (u16, String) {
    headers.push("X-Gitlab-Webhook-UUID", unique(label));
    let answer = example.post(PATH, &headers, body.as_bytes()).await;
    (answer.status, answer.outcome())
}

/// The ledger lines of `id` for a push.
fn lines(id: &str) -> String {
    format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}' AND event_type = 'Push Hook'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_twice_is_applied_once_and_a_wrong_token_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    // an empty GITLAB_SIGNING_TOKEN is unset, whatever the caller's environment holds
    let example = sandbox.start_with(BIN, &[], &[("GITLAB_SIGNING_TOKEN", "")]);
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let signer = GitLabSigner::new(SECRET).unwrap().event("Push Hook");

    // GitLab 17.4 and later: Idempotency-Key and X-Gitlab-Event-UUID
    let id = unique("gitlab");
    let body = push(&id);
    let headers = signer.sign(&id, now, body.as_bytes());
    let first = attempt(&example, headers.clone(), "first", &body).await;
    assert_eq!(first, (200, "stored".to_string()), "{}", example.log());
    let retry = attempt(&example, headers, "retry", &body).await;
    assert_eq!(retry, (200, "duplicate".to_string()), "{}", example.log());

    // an older GitLab sends no Idempotency-Key: the event UUID is the key
    let event_uuid = unique("gitlab_event");
    let old_body = push(&event_uuid);
    let mut old = SignedHeaders::default();
    old.push("X-Gitlab-Event", "Push Hook");
    old.push("X-Gitlab-Token", SECRET);
    old.push("X-Gitlab-Event-UUID", event_uuid.clone());
    let first = attempt(&example, old.clone(), "old_first", &old_body).await;
    assert_eq!(first, (200, "stored".to_string()), "{}", example.log());
    let retry = attempt(&example, old, "old_retry", &old_body).await;
    assert_eq!(retry, (200, "duplicate".to_string()), "{}", example.log());

    let forger = GitLabSigner::new("not-the-secret-token").unwrap();
    let forged_id = unique("forged");
    let forged = forger.sign(&forged_id, now, body.as_bytes());
    assert_eq!(
        attempt(&example, forged, "forged", &body).await,
        (401, "signature_mismatch".to_string())
    );

    let stats = sandbox.wait_processed(2).await;
    assert_eq!(
        stats.processed, 2,
        "two rows: the retries and the forgery were not stored"
    );
    assert_eq!(
        sandbox.query_i64(&lines(&id)).await,
        1,
        "applied exactly once"
    );
    assert_eq!(
        sandbox.query_i64(&lines(&event_uuid)).await,
        1,
        "applied exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_signing_token_an_unsigned_request_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start_with(BIN, &[], &[("GITLAB_SIGNING_TOKEN", SIGNING_TOKEN)]);
    let now = OffsetDateTime::now_utc().unix_timestamp();

    let id = unique("gitlab_signed");
    let body = push(&id);
    let signer = GitLabSigner::new(SECRET)
        .unwrap()
        .with_signing_secrets(SIGNING_TOKEN)
        .unwrap();
    let signed = signer.sign(&id, now, body.as_bytes());
    assert_eq!(
        attempt(&example, signed.clone(), "signed", &body).await,
        (200, "stored".to_string()),
        "{}",
        example.log()
    );
    assert_eq!(
        attempt(&example, signed, "signed_retry", &body).await,
        (200, "duplicate".to_string())
    );

    // the right secret token without a signature: a downgrade, refused
    let unsigned_id = unique("gitlab_unsigned");
    let unsigned = GitLabSigner::new(SECRET)
        .unwrap()
        .sign(&unsigned_id, now, body.as_bytes());
    assert_eq!(
        attempt(&example, unsigned, "unsigned", &body).await,
        (401, "signature_mismatch".to_string())
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(stats.processed, 1, "only the signed event was stored");
    assert_eq!(
        sandbox.query_i64(&lines(&id)).await,
        1,
        "applied exactly once"
    );
}
