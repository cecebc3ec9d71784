//! What the edge logs: the provider, the dedupe key, the outcome and the status,
//! never the body, the signature or the secret.
//!
//! One test in its own binary: it installs the process-wide subscriber, which the
//! server's tasks on other threads log to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{HttpClient, TempDir, WriteLock, open, options, serve};
use hookbox_axum::Webhook;
use hookbox_core::Signer;
use hookbox_github::{GitHub, GitHubSigner};
use tracing_subscriber::fmt::MakeWriter;

/// Everything the subscriber writes, kept in memory.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

const SECRET: &str = "SECRET-MARKER-5d1c9e";
const BODY: &str = r#"{"account":"acct_1","amount":100,"card":"BODY-MARKER-77a2f0"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_name_the_delivery_and_never_hold_the_body_or_the_secret() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::TRACE)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = TempDir::new();
    // a short busy timeout: the write gives up quickly while the lock is held
    let store = open(
        &dir.db(),
        options().with_busy_timeout(Duration::from_millis(100)),
    )
    .await;
    let server =
        serve(Webhook::inbox(GitHub::new(SECRET).unwrap(), store.clone()).into_router("/github"))
            .await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);

    let good =
        GitHubSigner::new(SECRET)
            .unwrap()
            .event("push")
            .sign("d-logged-1", 0, BODY.as_bytes());
    let signature = good.get("X-Hub-Signature-256").unwrap().to_string();
    assert_eq!(
        client.post(&url, &good.to_header_map(), BODY).await.status,
        200
    );
    assert_eq!(
        client.post(&url, &good.to_header_map(), BODY).await.status,
        200
    );
    let forged =
        GitHubSigner::new("SECRET-MARKER-forger")
            .unwrap()
            .sign("d-logged-2", 0, BODY.as_bytes());
    assert_eq!(
        client
            .post(&url, &forged.to_header_map(), BODY)
            .await
            .status,
        401
    );
    let mut missing = good.to_header_map();
    missing.remove("X-Hub-Signature-256");
    assert_eq!(client.post(&url, &missing, BODY).await.status, 400);
    let lock = WriteLock::take(&dir.db());
    let unstored = GitHubSigner::new(SECRET)
        .unwrap()
        .sign("d-logged-3", 0, BODY.as_bytes());
    assert_eq!(
        client
            .post(&url, &unstored.to_header_map(), BODY)
            .await
            .status,
        503
    );
    lock.release();

    let logs = capture.text();
    // what an operator needs to find a delivery
    for needle in [
        "hookbox.delivery",
        r#"provider="github""#,
        r#"scope="github""#,
        r#"delivery_id="d-logged-1""#,
        r#"event_type="push""#,
        r#"outcome="stored""#,
        r#"outcome="duplicate""#,
        "status=200",
        "status=401",
        r#"error="signature_mismatch""#,
        "status=400",
        r#"error="missing_header""#,
        "X-Hub-Signature-256",
        "status=503",
        r#"error="store_unavailable""#,
        // a transient store error: WARN, rate-limited, with the count held back
        "WARN",
        "the store is unavailable",
        "suppressed=0",
        // the cause chain, down to SQLite's own message
        "database is locked",
    ] {
        assert!(logs.contains(needle), "no {needle} in:\n{logs}");
    }
    // what must never be logged
    for secret in ["BODY-MARKER", "SECRET-MARKER", &signature] {
        assert!(!logs.contains(secret), "{secret} leaked into:\n{logs}");
    }
}
