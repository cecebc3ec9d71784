//! What the server-mode sim tests share (`sim_postgres.rs`, `sim_mysql.rs`): running
//! `hookbox sim`, reading its tables back, and what must hold on any server.
#![allow(dead_code, clippy::unwrap_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::process::{Command, Output};

/// Events replayed: enough for concurrent copies, shuffles, lost acks and (with the
/// crash test's keyed draws) four kills, few enough for a few seconds in debug.
pub(crate) const EVENTS: &str = "300";
pub(crate) const WORKERS: &str = "4";

/// Runs `hookbox sim` with `args`.
pub(crate) fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

/// Replays [`EVENTS`] events with [`WORKERS`] workers on `url`, checks what must
/// hold whatever the interleaving, and returns the stdout.
pub(crate) fn replay_and_check(url: &str) -> String {
    let output = sim(&[
        "--store",
        url,
        "--workers",
        WORKERS,
        "--events",
        EVENTS,
        "--timings",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
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
    stdout
}

/// The run's prefix, from the header line that starts with `namespaces` (`schemas`
/// on Postgres, `databases` on MySQL).
pub(crate) fn prefix<'s>(stdout: &'s str, namespaces: &str) -> &'s str {
    let start = format!("{namespaces}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(start.as_str()))
        .and_then(|l| l.split("_* ").next())
        .unwrap_or_else(|| panic!("no {namespaces} line in:\n{stdout}"))
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
pub(crate) fn handler(stdout: &str, label: &str) -> HashMap<&'static str, i64> {
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
pub(crate) fn crash(stdout: &str, label: &str) -> HashMap<&'static str, i64> {
    const COLUMNS: [&str; 7] = [
        "events", "crashes", "keys", "applied", "lost", "ledger", "expected",
    ];
    let values = row(stdout, label, 34);
    assert_eq!(values.len(), COLUMNS.len(), "{label}: {values:?}");
    COLUMNS.into_iter().zip(values).collect()
}
