//! `hookbox send` against a real receiver: copies of one signed delivery are stored
//! once, a wrong secret is refused.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use hookbox_axum::Webhook;
use hookbox_core::InboxAdmin as _;
use hookbox_github::GitHub;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use serde_json::Value;

mod common;

use common::{TempDir, json_lines};

const SECRET: &str = "send-test-secret";

/// Starts a GitHub inbox receiver on a random port; returns its URL and store.
async fn receiver(dir: &std::path::Path) -> (String, SqliteStore) {
    let store = SqliteStore::open(dir.join("hookbox.db"), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let app = Webhook::inbox(GitHub::new(SECRET).unwrap(), store.clone()).into_router("/hooks");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { hookbox_axum::axum::serve(listener, app).await });
    (format!("http://{addr}/hooks"), store)
}

/// Runs `hookbox send` off the runtime's threads; returns the exit code and answers.
async fn send(args: Vec<String>) -> (i32, Vec<Value>) {
    tokio::task::spawn_blocking(move || {
        let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .arg("send")
            .args(&args)
            .output()
            .unwrap();
        json_lines(output)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_copies_are_stored_once_and_a_wrong_secret_is_refused() {
    let tmp = TempDir::new("send");
    let dir = &tmp.0;
    let body = dir.join("push.json");
    std::fs::write(&body, br#"{"ref":"refs/heads/main"}"#).unwrap();
    let (url, store) = receiver(dir).await;
    let args = |secret: &str, extra: &[&str]| {
        let mut args: Vec<String> = ["--provider", "github", "--secret", secret, "--url", &url]
            .iter()
            .map(ToString::to_string)
            .collect();
        args.extend([
            "--body-file".to_string(),
            body.to_str().unwrap().to_string(),
        ]);
        args.extend(extra.iter().map(ToString::to_string));
        args
    };

    let (code, answers) = send(args(SECRET, &["--copies", "3", "--concurrent"])).await;
    assert_eq!(code, 0, "{answers:?}");
    assert_eq!(answers.len(), 3);
    let outcomes: Vec<&str> = answers
        .iter()
        .map(|a| {
            assert_eq!(a["status"], 200);
            let body: Value = serde_json::from_str(a["body"].as_str().unwrap()).unwrap();
            if body["outcome"] == "stored" {
                "stored"
            } else {
                "duplicate"
            }
        })
        .collect();
    assert_eq!(
        outcomes.iter().filter(|o| **o == "stored").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(store.stats().await.unwrap().pending, 1);

    let (code, answers) = send(args("another endpoint's secret", &["--id", "other"])).await;
    assert_eq!(code, 1);
    assert_eq!(answers[0]["status"], 401);
    assert_eq!(store.stats().await.unwrap().pending, 1, "nothing stored");

    let (code, _) = send(args(SECRET, &["--url", "https://example.invalid/"])).await;
    assert_eq!(code, 2, "https is a usage error");
    drop(store);
}
