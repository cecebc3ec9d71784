//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): a push sent twice is stored once and
//! counted once; a forged copy is refused; `serve --inline` applies a push in the
//! request, once; SIGTERM stops either mode cleanly.

use hookbox_github::GitHubSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-github");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/github";
/// The example's documented demo secret.
const SECRET: &str = "hookbox-github-demo-secret";

const BODY: &[u8] = br#"{"ref":"refs/heads/main","repository":{"full_name":"octo/hello"},"commits":[{"id":"a"},{"id":"b"}]}"#;

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

/// The `pushes` and `commits` counted for `octo/hello`.
async fn counted(sandbox: &Sandbox) -> (i64, i64) {
    let pushes = sandbox
        .query_i64("SELECT pushes AS n FROM pushes WHERE repo = 'octo/hello'")
        .await;
    let commits = sandbox
        .query_i64("SELECT commits AS n FROM pushes WHERE repo = 'octo/hello'")
        .await;
    (pushes, commits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_sent_twice_is_counted_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let github = GitHubSigner::new(SECRET).unwrap().event("push");
    let id = unique("delivery");
    let body = BODY;

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
    assert_eq!(
        counted(&sandbox).await,
        (1, 2),
        "the push counted exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_inline_applies_a_push_once_in_the_request() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &["serve", "--inline"]);
    let github = GitHubSigner::new(SECRET).unwrap().event("push");
    let id = unique("delivery");

    // inline: the push is counted before the answer, which says so
    let first = example.send(PATH, &github, &id, BODY).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "applied"),
        "{first:?}"
    );
    assert_eq!(counted(&sandbox).await, (1, 2), "applied in the request");
    let retry = example.send(PATH, &github, &id, BODY).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );
    assert_eq!(counted(&sandbox).await, (1, 2), "applied exactly once");
    // nothing went through the inbox, and no worker ran
    let stats = sandbox.stats().await;
    assert_eq!((stats.pending, stats.processed), (0, 0), "{stats:?}");
    assert!(
        !example.log().contains("worker started"),
        "{}",
        example.log()
    );

    let status = example.terminate().await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        example.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_and_exits_with_status_0() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &[]);
    let github = GitHubSigner::new(SECRET).unwrap().event("push");
    let stored = example.send(PATH, &github, &unique("delivery"), BODY).await;
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

/// The value of the sample `name{labels}` in Prometheus text, 0 when absent.
fn sample(text: &str, name: &str, labels: &str) -> f64 {
    let wanted = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&wanted))
        .map_or(0.0, |value| value.trim().parse().unwrap_or(f64::NAN))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_deliveries_and_readiness_answers() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start_with(BIN, &[], &[("METRICS_PORT", "0")]);
    let metrics = example
        .next_line()
        .strip_prefix("metrics on ")
        .expect("the metrics address line")
        .to_string();
    let github = GitHubSigner::new(SECRET).unwrap().event("push");
    let id = unique("delivery");
    for _ in 0..2 {
        assert_eq!(example.send(PATH, &github, &id, BODY).await.status, 200);
    }
    let forger = GitHubSigner::new("not the secret").unwrap().event("push");
    assert_eq!(
        example
            .send(PATH, &forger, &unique("delivery"), BODY)
            .await
            .status,
        401
    );
    sandbox.wait_processed(1).await;

    let deliveries = |text: &str, outcome: &str| {
        sample(
            text,
            "hookbox_deliveries_total",
            &format!("provider=\"github\",outcome=\"{outcome}\""),
        )
    };
    let mut text = String::new();
    for _ in 0..100 {
        text = example.get(&metrics).await.body;
        if sample(&text, "hookbox_worker_rows_total", "outcome=\"processed\"") >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(deliveries(&text, "stored"), 1.0, "{text}");
    assert_eq!(deliveries(&text, "duplicate"), 1.0, "{text}");
    assert_eq!(deliveries(&text, "rejected"), 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "hookbox_delivery_errors_total",
            "provider=\"github\",kind=\"signature_mismatch\""
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "hookbox_worker_rows_total", "outcome=\"processed\""),
        1.0,
        "{text}"
    );
    assert!(text.contains("hookbox_ack_duration_seconds"), "{text}");

    let ready = example.get("/readyz").await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (200, r#"{"ready":true}"#)
    );
    assert_eq!(example.get("/livez").await.status, 200);
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

/// A build without the `redis` feature (a project from `hookbox new` without
/// `--cache redis`) refuses `HOOKBOX_REDIS_URL` rather than ignoring it.
#[cfg(not(feature = "redis"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_without_the_cache_refuses_a_redis_url() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.spawn_with(
        BIN,
        &["serve", "--no-worker"],
        &[("HOOKBOX_REDIS_URL", "redis://127.0.0.1:6379")],
    );
    let status = example.exited().await;
    assert_eq!(status.code(), Some(1), "{status}");
    assert!(
        example.log().contains("build with `--features redis`"),
        "{}",
        example.log()
    );
}
