//! `hookbox inbox` against a real SQLite store: the operator's view of depth, dead
//! letters, replay and purge.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use hookbox_core::testing::delivery;
use hookbox_core::{Delivery, HandlerError, Inbox as _, RetryPolicy, Worked};
use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore};
use serde_json::Value;

mod common;

use common::{TempDir, json_lines};

async fn fail_on_poison(_conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    if delivery.body().as_ref() == b"poison" {
        Err("cannot parse: poison".into())
    } else {
        Ok(())
    }
}

/// A store with one processed row, one dead letter and one pending row.
async fn populated(path: &std::path::Path) {
    let retry = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let store = SqliteStore::open(path, SqliteOptions::default().with_retry(retry))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store.receive(&delivery("evt_ok", "{}")).await.unwrap();
    store
        .receive(&delivery("evt_poison", "poison"))
        .await
        .unwrap();
    while store.work_one(&fail_on_poison).await.unwrap() != Worked::Idle {}
    store
        .receive(&delivery("evt_pending", "{\"a\":1}"))
        .await
        .unwrap();
}

fn inbox(db: &str, args: &[&str]) -> (i32, Vec<Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["inbox", "--store", db])
        .args(args)
        .output()
        .unwrap();
    json_lines(output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_depth_dead_letters_and_replays_them() {
    let dir = TempDir::new("inbox");
    let path = dir.0.join("hookbox.db");
    populated(&path).await;
    let db = path.to_str().unwrap();

    let (code, stats) = inbox(db, &["stats"]);
    assert_eq!(code, 0);
    assert_eq!(stats[0]["pending"], 1);
    assert_eq!(stats[0]["processed"], 1);
    assert_eq!(stats[0]["dead"], 1);
    assert!(stats[0]["oldest_pending"].is_i64());

    let (_, pending) = inbox(db, &["list"]);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["delivery_id"], "evt_pending");
    assert_eq!(pending[0]["status"], "pending");

    let (_, all) = inbox(db, &["list", "--status", "all", "--limit", "2"]);
    assert_eq!(all.len(), 2);

    let (_, dead) = inbox(db, &["dead"]);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["delivery_id"], "evt_poison");
    assert_eq!(dead[0]["attempts"], 1);
    assert!(dead[0]["last_error"].as_str().unwrap().contains("poison"));
    let dead_id = dead[0]["id"].as_i64().unwrap().to_string();

    let (code, shown) = inbox(db, &["show", &dead_id]);
    assert_eq!(code, 0);
    assert_eq!(shown[0]["body"], "poison");
    assert_eq!(shown[0]["body_encoding"], "utf-8");
    assert_eq!(shown[0]["headers"][0][0], "webhook-id");

    let (code, replayed) = inbox(db, &["replay", &dead_id]);
    assert_eq!((code, replayed[0]["replayed"].as_u64()), (0, Some(1)));
    let (_, stats) = inbox(db, &["stats"]);
    assert_eq!(
        (stats[0]["pending"].as_u64(), stats[0]["dead"].as_u64()),
        (Some(2), Some(0))
    );
    let (_, replayed) = inbox(db, &["replay", "--all"]);
    assert_eq!(replayed[0]["replayed"], 0);
    // `--dead`, as `hookbox outbox replay` also spells it
    let (code, replayed) = inbox(db, &["replay", "--dead"]);
    assert_eq!((code, replayed[0]["replayed"].as_u64()), (0, Some(0)));

    // nothing is old enough to purge under the default retention
    let (code, purged) = inbox(db, &["purge"]);
    assert_eq!(code, 0);
    assert_eq!(purged[0]["purged_inbox_rows"], 0);
}

#[test]
fn operator_mistakes_are_usage_errors_or_clear_failures() {
    let (code, _) = inbox("/nonexistent/hookbox.db", &["stats"]);
    assert_eq!(code, 1, "a missing store is a failure, not a crash");
    let (code, _) = inbox("unused.db", &["purge", "--keep", "shopify=1h"]);
    assert_eq!(code, 2, "a keep below Shopify's 4 h minimum is refused");
    let (code, _) = inbox("unused.db", &["purge", "--keep", "shopify"]);
    assert_eq!(code, 2);
    let (code, _) = inbox("unused.db", &["show"]);
    assert_eq!(code, 2);
}

/// Runs `hookbox` with `args` and no `HOOKBOX_STORE`: (exit status, stdout, stderr).
fn hookbox(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .env_remove("HOOKBOX_STORE")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_is_accepted_before_or_after_the_subcommand() {
    let dir = TempDir::new("inbox-global-store");
    let path = dir.0.join("hookbox.db");
    populated(&path).await;
    let db = path.to_str().unwrap();
    for args in [
        ["inbox", "--store", db, "stats"],
        ["inbox", "stats", "--store", db],
    ] {
        let (code, stdout, stderr) = hookbox(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        let stats: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(stats["pending"], 1, "{args:?}");
    }
    for args in [
        ["outbox", "--store", db, "stats"],
        ["outbox", "stats", "--store", db],
    ] {
        let (code, stdout, stderr) = hookbox(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        let stats: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(stats["pending"], 0, "{args:?}");
    }
    let (code, _, stderr) = hookbox(&["inbox", "list", "--status", "dead", "--store", db]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_missing_store_and_a_short_keep_name_the_flags_to_use() {
    for command in ["inbox", "outbox"] {
        let (code, _, stderr) = hookbox(&[command, "stats"]);
        assert_eq!(code, 2, "{command} stats without a store: {stderr}");
        assert!(stderr.contains("store"), "{stderr}");
    }
    let (code, _, stderr) = hookbox(&[
        "inbox",
        "purge",
        "--store",
        "unused.db",
        "--keep",
        "shopify=1h",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--below-provider-minimum"), "{stderr}");
    assert!(!stderr.contains("keep_below_provider_minimum"), "{stderr}");
}
