//! `hookbox sim --store postgres://…` as a user runs it: the built binary, a prefix of
//! the seed's stream, real concurrent workers and SIGKILLed worker processes, the
//! printed tables read back. Reads `HOOKBOX_PG_URL`; skips without it unless
//! `HOOKBOX_REQUIRE_SERVICES=1`. The usage errors need no server.
//!
//! Concurrency is real, so only what must hold whatever the interleaving is asserted:
//! (c) and (d) exact, the atomic crash design losing nothing, the split design losing
//! one event per kill. (b)'s double applies are racy: printed, not asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::process::{Command, Output};

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use hookbox_diesel_pg::{diesel, diesel_async};

mod common;

use common::pg_url;

/// Events replayed: enough for concurrent copies, shuffles, lost acks and (with the
/// crash test's keyed draws) four kills, few enough for a few seconds in debug.
const EVENTS: &str = "300";
const WORKERS: &str = "4";

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

/// The numbers of the table row labelled `label` (the label padded to `width`).
fn row(stdout: &str, label: &str, width: usize) -> Vec<i64> {
    let line = stdout
        .lines()
        .find(|l| l.len() > width && l[..width].trim_end() == label)
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{stdout}"));
    line[width..]
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// A handler row by column name.
fn handler(stdout: &str, label: &str) -> HashMap<&'static str, i64> {
    const COLUMNS: [&str; 9] = [
        "deliveries",
        "5xx",
        "dup events",
        "extra applies",
        "lost",
        "stale writes",
        "stale accts",
        "ledger",
        "expected",
    ];
    let values = row(stdout, label, 22);
    assert_eq!(values.len(), COLUMNS.len(), "{label}: {values:?}");
    COLUMNS.into_iter().zip(values).collect()
}

/// A crash row by column name.
fn crash(stdout: &str, label: &str) -> HashMap<&'static str, i64> {
    const COLUMNS: [&str; 7] = [
        "events", "crashes", "keys", "applied", "lost", "ledger", "expected",
    ];
    let values = row(stdout, label, 34);
    assert_eq!(values.len(), COLUMNS.len(), "{label}: {values:?}");
    COLUMNS.into_iter().zip(values).collect()
}

#[derive(diesel::QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    nspname: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_designs_stay_exact_under_real_concurrency_and_kills() {
    let Some(url) = pg_url().await else { return };
    let output = sim(&[
        "--store",
        &url,
        "--workers",
        WORKERS,
        "--events",
        EVENTS,
        "--timings",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // the whole run, (b)'s racy numbers included, for whoever reads the log
    println!("{stdout}\n{stderr}");
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");

    assert!(stdout.contains(&format!("workers: {WORKERS} ")), "{stdout}");
    assert!(
        stdout.contains(&format!("events: {EVENTS} of 10000 ")),
        "{stdout}"
    );
    for label in ["c atomic insert", "d version guard"] {
        let r = handler(&stdout, label);
        assert_eq!(r["ledger"], r["expected"], "{label}");
        assert_eq!(r["dup events"], 0, "{label}");
        assert_eq!(r["extra applies"], 0, "{label}");
        assert_eq!(r["lost"], 0, "{label}");
    }
    let guard = handler(&stdout, "d version guard");
    assert_eq!(guard["stale writes"], 0);
    assert_eq!(guard["stale accts"], 0);
    // (b) runs to the end; whether it double-applied depends on the interleaving
    let b = handler(&stdout, "b check-then-insert");
    assert_eq!(b["lost"], 0);

    let atomic = crash(&stdout, "insert key + side effect, one tx");
    assert!(atomic["crashes"] >= 1, "no real kill: {atomic:?}");
    assert_eq!(atomic["lost"], 0);
    assert_eq!(atomic["applied"], atomic["events"]);
    assert_eq!(atomic["ledger"], atomic["expected"]);
    let split = crash(&stdout, "insert key, then side effect");
    assert!(split["crashes"] >= 1, "no real kill: {split:?}");
    assert_eq!(split["lost"], split["crashes"]);
    assert_eq!(split["keys"], split["events"]);

    // every schema of the run is gone
    let prefix = stdout
        .lines()
        .find_map(|l| l.strip_prefix("schemas: "))
        .and_then(|l| l.split("_* ").next())
        .unwrap_or_else(|| panic!("no schemas line in:\n{stdout}"));
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    let left: Vec<String> = diesel::sql_query("SELECT nspname FROM pg_namespace")
        .load::<Name>(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.nspname)
        .filter(|n| n.starts_with(prefix))
        .collect();
    assert!(left.is_empty(), "schemas left behind: {left:?}");
}

#[test]
fn store_must_be_a_postgres_url() {
    let output = sim(&["--store", "webhooks.db"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("postgres://"), "{stderr}");
}

#[test]
fn postgres_options_need_a_store() {
    for args in [
        &["--workers", "8"][..],
        &["--events", "10"],
        &["--io-delay-ms", "5"],
    ] {
        let output = sim(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--store"), "{args:?}: {stderr}");
    }
}

#[test]
fn one_worker_is_a_usage_error() {
    let output = sim(&[
        "--store",
        "postgres://nobody@127.0.0.1:1/none",
        "--workers",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(2));
}
