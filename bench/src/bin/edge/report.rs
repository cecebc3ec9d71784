//! The printed table: a row per measured cell, kept for the target ratios after it,
//! and the anomalies (errors, unexpected outcomes) found in the rows.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use hookbox_bench::table::{self, thousands};

use crate::phase::{CONNECTIONS, WORKER_CONNECTIONS};
use crate::tally::Tally;

/// Which path a row measures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The bare handler.
    Ceiling,
    /// New delivery ids.
    Fresh,
    /// Delivery ids already stored.
    Duplicate,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ceiling => "-",
            Self::Fresh => "fresh",
            Self::Duplicate => "duplicate",
        }
    }
}

/// How a row reached the store.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The bare handler over HTTP.
    Bare,
    /// The edge over HTTP.
    Edge { cache: bool },
    /// `Inbox::receive` called directly.
    Receive,
    /// The edge over HTTP while `run_worker` drains the same store, at an offered
    /// load (requests per second) or as fast as answered.
    EdgeWithWorker { offered: Option<u32> },
}

/// One printed row.
struct Row {
    store: &'static str,
    via: Via,
    kind: Kind,
    conns: usize,
    rate: f64,
    p99: Option<Duration>,
}

/// The rows printed so far, and what was wrong with them.
#[derive(Default)]
pub(crate) struct Table {
    rows: RefCell<Vec<Row>>,
    anomalies: RefCell<Vec<String>>,
    errors: Cell<u64>,
    /// Deliveries per commit of the group-commit rows being recorded.
    mean_batch: Cell<Option<f64>>,
    /// `HOOKBOX_BENCH_JSON`: where each row is also written as a JSON line.
    json: RefCell<Option<std::fs::File>>,
}

impl Table {
    /// The table's header.
    pub(crate) fn print_header() {
        println!(
            "{:<26} {:<10} {:>5} {:>11} {:>9} {:>9} {:>10} {:>7}",
            "target", "path", "conns", "req/s", "p50 ms", "p99 ms", "acked", "errors"
        );
    }

    /// Records, prints and checks one row.
    pub(crate) fn row(
        &self,
        store: &'static str,
        via: Via,
        kind: Kind,
        conns: usize,
        tally: &Tally,
    ) {
        let target = match via {
            Via::Bare if store == "bare" => "bare axum handler".to_string(),
            Via::Bare => "bare handler, paired".to_string(),
            Via::Edge { cache: false } => store.to_string(),
            Via::Edge { cache: true } => format!("{store} + redis"),
            Via::Receive => format!("{store} Inbox::receive"),
            Via::EdgeWithWorker { offered: None } => format!("{store} + worker"),
            Via::EdgeWithWorker {
                offered: Some(rate),
            } => format!("{store} + worker @{rate}/s"),
        };
        let mut note = String::new();
        if tally.ran_out {
            note.push_str(" (signed requests used up early)");
        }
        println!(
            "{target:<26} {:<10} {conns:>5} {:>11} {:>9} {:>9} {:>10} {:>7}{note}",
            kind.as_str(),
            thousands(tally.rate()),
            ms(tally.percentile(0.50)),
            ms(tally.percentile(0.99)),
            thousands(tally.acked() as f64),
            tally.errors() + tally.warm_errors,
        );
        let label = format!("{target} {} x{conns}", kind.as_str());
        let mut anomalies = self.anomalies.borrow_mut();
        if tally.errors() + tally.warm_errors > 0 {
            self.errors
                .set(self.errors.get() + tally.errors() + tally.warm_errors);
            let statuses: Vec<String> = tally
                .statuses
                .iter()
                .map(|(status, n)| format!("{n} x HTTP {status}"))
                .collect();
            anomalies.push(format!(
                "{label}: {} errors in the measured phase ({}{}), {} in the warm-up; first: {}",
                tally.errors(),
                statuses.join(", "),
                if tally.failed > 0 {
                    format!(
                        "{}{} failed requests",
                        if statuses.is_empty() { "" } else { ", " },
                        tally.failed
                    )
                } else {
                    String::new()
                },
                tally.warm_errors,
                tally.first_error.as_deref().unwrap_or("-"),
            ));
        }
        let unexpected = match kind {
            Kind::Ceiling => tally.stored + tally.duplicate,
            Kind::Fresh => tally.duplicate + tally.ok,
            Kind::Duplicate => tally.stored + tally.ok,
        };
        if unexpected > 0 {
            anomalies.push(format!(
                "{label}: {unexpected} acknowledgements with an unexpected outcome \
                 (stored {}, duplicate {}, other 2xx {})",
                tally.stored, tally.duplicate, tally.ok
            ));
        }
        self.write_json(store, via, kind, conns, tally);
        self.rows.borrow_mut().push(Row {
            store,
            via,
            kind,
            conns,
            rate: tally.rate(),
            p99: tally.percentile(0.99),
        });
    }

    /// Opens `HOOKBOX_BENCH_JSON` (appending) when it is set.
    pub(crate) fn open_json(&self) -> std::io::Result<()> {
        if let Some(path) = std::env::var_os("HOOKBOX_BENCH_JSON") {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            *self.json.borrow_mut() = Some(file);
        }
        Ok(())
    }

    /// Writes `value` as one JSON line to `HOOKBOX_BENCH_JSON`, when it is set (rows
    /// with fields of their own, such as the worker's).
    pub(crate) fn json_line(&self, value: serde_json::Value) {
        use std::io::Write as _;
        if let Some(file) = self.json.borrow_mut().as_mut() {
            let _ = writeln!(file, "{value}");
        }
    }

    /// Sets the deliveries per commit the next rows report (`None` for rows without
    /// group commit).
    pub(crate) fn set_mean_batch(&self, mean: Option<f64>) {
        self.mean_batch.set(mean);
    }

    /// Writes one row as a JSON line: `{"row", "store", "commit", "cache", "kind",
    /// "conns", "acks_per_s", "p50_ms", "p99_ms", "mean_batch"}`.
    fn write_json(&self, store: &str, via: Via, kind: Kind, conns: usize, tally: &Tally) {
        use std::io::Write as _;
        let mut json = self.json.borrow_mut();
        let Some(file) = json.as_mut() else { return };
        let (base, commit) = match store.split_once(' ') {
            Some((base, "per-request")) => (base, "per-request"),
            Some((base, _)) => (base, "group"),
            None => (store, "group"),
        };
        let (row, commit, cache, kind) = match via {
            Via::Bare => ("bare", "none", false, "bare"),
            Via::Edge { cache } => ("edge", commit, cache, kind.as_str()),
            Via::Receive => ("receive", commit, false, kind.as_str()),
            Via::EdgeWithWorker { .. } => ("edge+worker", commit, false, kind.as_str()),
        };
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        let mut line = serde_json::json!({
            "row": row,
            "store": if row == "bare" { "none" } else { base },
            "commit": commit,
            "cache": cache,
            "kind": kind,
            "conns": conns,
            "acks_per_s": tally.rate(),
            "p50_ms": ms(tally.percentile(0.50)),
            "p99_ms": ms(tally.percentile(0.99)),
            "mean_batch": if commit == "group" { self.mean_batch.get() } else { None },
        });
        if let Via::EdgeWithWorker { offered } = via {
            line["offered_per_s"] = serde_json::json!(offered);
        }
        let _ = writeln!(file, "{line}");
    }

    /// Prints group commit against per-request commit, fresh deliveries over HTTP,
    /// measured in the same paired rounds; against the bare handler; the duplicates
    /// without the cache against the bare handler; and the acknowledgement p99 with
    /// and without a worker draining the same store.
    pub(crate) fn print_group_commit(&self) {
        println!(
            "target: group commit >= 5x per-request commit on SQLite, >= 2.5x on Postgres and \
             >= 3x on MySQL, \
             fresh deliveries at 64 connections (paired rounds); group / bare alongside"
        );
        println!(
            "{:<10} {:>5} {:>12} {:>14} {:>8} {:>11} {:>12} {:>12}",
            "store",
            "conns",
            "group/s",
            "per-request/s",
            "ratio",
            "bare/s",
            "group/bare",
            "group p99 ms"
        );
        let edge = Via::Edge { cache: false };
        let bare_rate = |conns| self.rate("bare", Via::Bare, Kind::Ceiling, conns);
        let ratio = |num: f64, den: Option<f64>| {
            den.map_or_else(|| "-".into(), |den| format!("{:.2}x", num / den))
        };
        for (store, per_request) in [
            ("sqlite", "sqlite per-request"),
            ("postgres", "postgres per-request"),
            ("mysql", "mysql per-request"),
        ] {
            for conns in CONNECTIONS {
                let group = self.rate(&format!("{store} group"), edge, Kind::Fresh, conns);
                let per = self.rate(per_request, edge, Kind::Fresh, conns);
                let p99 = self.p99(&format!("{store} group"), edge, Kind::Fresh, conns);
                let bare = bare_rate(conns);
                match (group, per) {
                    (Some(group), Some(per)) if per > 0.0 => println!(
                        "{store:<10} {conns:>5} {:>12} {:>14} {:>7.2}x {:>11} {:>12} {:>12}",
                        thousands(group),
                        thousands(per),
                        group / per,
                        bare.map_or_else(|| "-".into(), thousands),
                        ratio(group, bare),
                        ms(p99),
                    ),
                    _ => println!("{store:<10} {conns:>5} (skipped)"),
                }
            }
        }
        println!();
        println!(
            "target: duplicates without the cache >= 0.5x the bare handler at 64 connections \
             (group commit's read; the bare rows of this run)"
        );
        println!(
            "{:<10} {:>5} {:>12} {:>11} {:>8}",
            "store", "conns", "dup/s", "bare/s", "ratio"
        );
        for store in STORES {
            for conns in CONNECTIONS {
                match self.rate(&format!("{store} group"), edge, Kind::Duplicate, conns) {
                    Some(dup) => println!(
                        "{store:<10} {conns:>5} {:>12} {:>11} {:>8}",
                        thousands(dup),
                        bare_rate(conns).map_or_else(|| "-".into(), thousands),
                        ratio(dup, bare_rate(conns)),
                    ),
                    None => println!("{store:<10} {conns:>5} (skipped)"),
                }
            }
        }
        println!();
        println!(
            "target: acknowledgement p99 < 20 ms on SQLite while a worker drains the same \
             store (fresh deliveries, {WORKER_CONNECTIONS} connections)"
        );
        println!(
            "{:<10} {:>12} {:>10} {:>10}",
            "store", "offered/s", "acked/s", "p99 ms"
        );
        for store in STORES {
            let rows: Vec<(Option<u32>, f64, Option<Duration>)> = self
                .rows
                .borrow()
                .iter()
                .filter(|r| r.store == store && r.kind == Kind::Fresh)
                .filter_map(|r| match r.via {
                    Via::EdgeWithWorker { offered } => Some((offered, r.rate, r.p99)),
                    _ => None,
                })
                .collect();
            if rows.is_empty() {
                println!("{store:<10} (skipped)");
            }
            for (offered, rate, p99) in rows {
                println!(
                    "{store:<10} {:>12} {:>10} {:>10}",
                    offered.map_or_else(|| "as answered".into(), |r| thousands(f64::from(r))),
                    thousands(rate),
                    ms(p99),
                );
            }
        }
    }

    /// The rate and p99 of the row measured for `store`, `via`, `kind` at `conns`.
    fn measured(
        &self,
        store: &str,
        via: Via,
        kind: Kind,
        conns: usize,
    ) -> Option<(f64, Option<Duration>)> {
        self.rows
            .borrow()
            .iter()
            .find(|r| r.store == store && r.via == via && r.kind == kind && r.conns == conns)
            .map(|r| (r.rate, r.p99))
    }

    /// The p99 of the row measured for `store`, `via`, `kind` at `conns`.
    fn p99(&self, store: &str, via: Via, kind: Kind, conns: usize) -> Option<Duration> {
        self.measured(store, via, kind, conns)
            .and_then(|(_, p99)| p99)
    }

    /// The rate of the row measured for `store`, `via`, `kind` at `conns`.
    fn rate(&self, store: &str, via: Via, kind: Kind, conns: usize) -> Option<f64> {
        self.measured(store, via, kind, conns).map(|(rate, _)| rate)
    }

    /// Every error counted in the rows, warm-ups included.
    pub(crate) fn errors(&self) -> u64 {
        self.errors.get()
    }

    /// Prints the anomalies found so far.
    pub(crate) fn print_anomalies(&self) {
        table::print_anomalies(&self.anomalies.borrow());
    }
}

/// A target ratio the run checks: the rate of rows `num` over the rate of rows
/// `den`, each measured in the same paired rounds, per store and concurrency.
pub(crate) struct Target {
    title: &'static str,
    columns: [&'static str; 2],
    num: (Via, Kind),
    den: (Via, Kind),
    at_least: f64,
}

/// The stores every table has rows for, in the order printed.
const STORES: [&str; 3] = ["sqlite", "postgres", "mysql"];

/// A latency in milliseconds with two decimals, or `-`.
fn ms(latency: Option<Duration>) -> String {
    latency.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
}

/// The target ratios the run checks, in the order printed.
pub(crate) const TARGETS: [Target; 2] = [
    Target {
        title: "duplicates with the Redis cache >= 0.5x the bare handler (paired rounds)",
        columns: ["dup+redis/s", "bare/s"],
        num: (Via::Edge { cache: true }, Kind::Duplicate),
        den: (Via::Bare, Kind::Ceiling),
        at_least: 0.5,
    },
    Target {
        title: "fresh deliveries over HTTP >= 0.9x the store's own Inbox::receive rate \
                (paired rounds)",
        columns: ["fresh/s", "receive/s"],
        num: (Via::Edge { cache: false }, Kind::Fresh),
        den: (Via::Receive, Kind::Fresh),
        at_least: 0.9,
    },
];

impl Table {
    /// Prints `target`'s table: a row per store and concurrency, `met` or `MISSED`.
    pub(crate) fn print_target(&self, target: &Target) {
        println!("target: {}", target.title);
        let [num, den] = target.columns;
        println!(
            "{:<10} {:>5} {num:>15} {den:>11} {:>8}",
            "store", "conns", "ratio"
        );
        for store in STORES {
            for conns in CONNECTIONS {
                let num = self.rate(store, target.num.0, target.num.1, conns);
                let den = self.rate(store, target.den.0, target.den.1, conns);
                print_ratio(store, conns, num, den, target.at_least);
            }
        }
    }
}

/// One row of a target's table: both rates and their ratio beside `target`, or
/// `(skipped)` when a side was not measured.
fn print_ratio(store: &str, conns: usize, num: Option<f64>, den: Option<f64>, target: f64) {
    match (num, den) {
        (Some(num), Some(den)) if den > 0.0 => {
            let ratio = num / den;
            let verdict = if ratio >= target { "met" } else { "MISSED" };
            println!(
                "{store:<10} {conns:>5} {:>15} {:>11} {ratio:>7.3}x {verdict}",
                thousands(num),
                thousands(den)
            );
        }
        _ => println!("{store:<10} {conns:>5} {:>15}", "(skipped)"),
    }
}
