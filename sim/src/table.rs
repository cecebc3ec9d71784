//! The two tables both modes print, the handler table and the crash table: their
//! columns, their rows, and the handler row counted from a database's end state as
//! the script counts it.

use std::collections::HashMap;
use std::fmt::Display;
use std::io::{self, Write};

use crate::seed::{Kind, Stream};

/// `String(v).padEnd(n)`
pub(crate) fn pad(v: impl Display, n: usize) -> String {
    format!("{:<n$}", v.to_string())
}

/// `String(v).padStart(n)`
pub(crate) fn lpad(v: impl Display, n: usize) -> String {
    format!("{:>n$}", v.to_string())
}

/// A column's title and width. A table's first column is padded at the end, the
/// others at the start, as the script pads them.
type Column = (&'static str, usize);

/// Writes one line of a table: `cells` in `columns`.
fn write_line(out: &mut impl Write, columns: &[Column], cells: &[&dyn Display]) -> io::Result<()> {
    let mut line = String::new();
    for (i, ((_, width), cell)) in columns.iter().zip(cells).enumerate() {
        line.push_str(&if i == 0 {
            pad(cell, *width)
        } else {
            lpad(cell, *width)
        });
    }
    writeln!(out, "{line}")
}

/// Writes a table's header: its columns' titles.
fn write_header(out: &mut impl Write, columns: &[Column]) -> io::Result<()> {
    let titles: Vec<&dyn Display> = columns.iter().map(|(t, _)| t as &dyn Display).collect();
    write_line(out, columns, &titles)
}

const HANDLER_COLUMNS: [Column; 10] = [
    ("handler", 22),
    ("deliveries", 11),
    ("5xx", 6),
    ("dup events", 11),
    ("extra applies", 14),
    ("lost", 6),
    ("stale writes", 13),
    ("stale accts", 12),
    ("ledger", 10),
    ("expected", 10),
];

/// One row of the handler table (the single-process run and the Postgres mode).
pub(crate) struct HandlerRow {
    pub(crate) name: &'static str,
    pub(crate) deliveries: u64,
    pub(crate) errors: u64,
    pub(crate) dup_events: u64,
    pub(crate) dup_applies: i64,
    pub(crate) lost: u64,
    pub(crate) stale_writes: u64,
    pub(crate) stale: u64,
    pub(crate) ledger: i64,
    pub(crate) expected: i64,
}

/// What a handler's run counted as it went.
pub(crate) struct Sent {
    /// Deliveries made, retries included.
    pub(crate) deliveries: u64,
    /// Deliveries answered 5xx.
    pub(crate) errors: u64,
    /// Plan writes that overwrote a newer plan.
    pub(crate) stale_writes: u64,
}

/// What a handler's database holds at the end of its run.
pub(crate) struct EndRows {
    /// Applies per event id.
    pub(crate) applied: HashMap<String, i64>,
    /// Each account's `plan_version`, by id.
    pub(crate) plan_versions: Vec<(i32, i64)>,
    /// `sum(credits)`.
    pub(crate) ledger: i64,
}

impl HandlerRow {
    /// The row of handler `name`, counted as the script counts it: lost and
    /// duplicated credits from the applied log, stale accounts from the accounts'
    /// plan versions, the ledger beside 100 per credit event of `stream`.
    pub(crate) fn count(name: &'static str, stream: &Stream, sent: Sent, end: &EndRows) -> Self {
        let (mut dup_events, mut dup_applies, mut lost) = (0, 0, 0);
        let mut n_credit = 0i64;
        for e in stream.events.iter().filter(|e| e.kind == Kind::Credit) {
            n_credit += 1;
            let c = end.applied.get(&e.id).copied().unwrap_or(0);
            if c == 0 {
                lost += 1;
            }
            if c > 1 {
                dup_events += 1;
                dup_applies += c - 1;
            }
        }
        let stale = end
            .plan_versions
            .iter()
            .filter(|(id, version)| {
                let latest = stream.latest_plan[*id as usize];
                latest > 0 && *version != latest
            })
            .count() as u64;
        Self {
            name,
            deliveries: sent.deliveries,
            errors: sent.errors,
            dup_events,
            dup_applies,
            lost,
            stale_writes: sent.stale_writes,
            stale,
            ledger: end.ledger,
            expected: n_credit * 100,
        }
    }
}

/// The handler table's header.
pub(crate) fn write_handler_header(out: &mut impl Write) -> io::Result<()> {
    write_header(out, &HANDLER_COLUMNS)
}

/// One row of the handler table.
pub(crate) fn write_handler_row(out: &mut impl Write, r: &HandlerRow) -> io::Result<()> {
    write_line(
        out,
        &HANDLER_COLUMNS,
        &[
            &r.name,
            &r.deliveries,
            &r.errors,
            &r.dup_events,
            &r.dup_applies,
            &r.lost,
            &r.stale_writes,
            &r.stale,
            &r.ledger,
            &r.expected,
        ],
    )
}

const CRASH_COLUMNS: [Column; 8] = [
    ("design", 34),
    ("events", 7),
    ("crashes", 8),
    ("keys", 6),
    ("applied", 8),
    ("lost", 6),
    ("ledger", 8),
    ("expected", 9),
];

/// One row of the crash table (the single-process run and the Postgres mode).
pub(crate) struct CrashRow {
    pub(crate) n: i64,
    pub(crate) crashes: i64,
    pub(crate) keys: i64,
    pub(crate) applied: i64,
    pub(crate) lost: i64,
    pub(crate) ledger: i64,
    pub(crate) expected: i64,
}

/// The crash table's name for a design: the key committed on its own (`split`), or
/// the key and the side effect in one transaction.
pub(crate) fn crash_label(split: bool) -> &'static str {
    if split {
        "insert key, then side effect"
    } else {
        "insert key + side effect, one tx"
    }
}

/// The crash table's header.
pub(crate) fn write_crash_header(out: &mut impl Write) -> io::Result<()> {
    write_header(out, &CRASH_COLUMNS)
}

/// One row of the crash table, for the design called `label`.
pub(crate) fn write_crash_row(out: &mut impl Write, label: &str, r: &CrashRow) -> io::Result<()> {
    write_line(
        out,
        &CRASH_COLUMNS,
        &[
            &label,
            &r.n,
            &r.crashes,
            &r.keys,
            &r.applied,
            &r.lost,
            &r.ledger,
            &r.expected,
        ],
    )
}
