//! The script's six receivers on SQLite, each replaying the delivery stream on its
//! own in-memory database: (a) naive and (b) check-then-insert on plain SQL, (c)
//! hookbox's own claim, and the three (d) ordering guards on top of it.

use std::collections::{HashMap, VecDeque};
use std::io;

use hookbox_core::{Advance, DedupeKey, Processed};
use hookbox_sqlite::blocking;
use hookbox_sqlite::diesel::{QueryResult, SqliteConnection};

use super::db::{self, Guard};
use crate::error::failed;
use crate::seed::{Event, Group, Kind, RETRY_AFTER_TIMEOUT, Stream, enqueue, retry};
use crate::table::{HandlerRow, Sent};

/// The handlers, in the table's order.
pub(super) const HANDLERS: [&str; 6] = [
    "a naive",
    "b check-then-insert",
    "c atomic insert",
    "d order by created>=",
    "d order by created>",
    "d version guard",
];

/// A handler's database: in memory, as in the script. For (c)/(d) it also holds
/// hookbox's schema (its embedded migrations), and the claim is hookbox's own
/// `process_once`; the medium is the script's, so the comparison with it is fair
/// (the crash test is where the script, and this port, use a file).
fn open_db(name: &str) -> io::Result<SqliteConnection> {
    let mut conn =
        db::fresh_db(":memory:").map_err(|e| failed("opening the handler's database", &e))?;
    if !(name.starts_with('a') || name.starts_with('b')) {
        blocking::migrate(&mut conn).map_err(|e| failed("migrating hookbox's tables", &e))?;
    }
    Ok(conn)
}

/// Runs sync SQL on a handler's database.
fn with<R>(
    conn: &mut SqliteConnection,
    f: impl FnOnce(&mut SqliteConnection) -> QueryResult<R>,
) -> io::Result<R> {
    f(conn).map_err(|e| failed("the handler's SQL", &e))
}

/// (c)/(d): hookbox's `process_once`, the store's claim and the side effect in one
/// `BEGIN IMMEDIATE` transaction (the synchronous form, so the sim measures the
/// store and not tokio's blocking pool). Returns whether a stale write happened.
fn atomic(conn: &mut SqliteConnection, e: &Event, guard: Guard) -> io::Result<bool> {
    let key = DedupeKey::new("sim", "sim", e.id.clone());
    let outcome = blocking::process_once(conn, &key, |conn| {
        if guard == Guard::Passed && e.kind == Kind::Plan {
            let object = format!("acct_{}", e.acct);
            if blocking::advance(conn, &object, e.version)? == Advance::Stale {
                return Ok(false);
            }
        }
        Ok(db::apply(conn, e, guard)?)
    })
    .map_err(|e| failed("process_once", &e))?;
    Ok(match outcome {
        Processed::Applied(stale) => stale,
        Processed::Duplicate => false,
    })
}

/// One copy of a delivery: the part before `await io()` ran; this is what remains.
enum Pending {
    Done(u16),
    Waiting,
}

/// What one handler's replay gave: its table row and what the traces print.
pub(super) struct HandlerResult {
    pub(super) row: HandlerRow,
    /// The traced event's deliveries, one line each.
    pub(super) log: Vec<String>,
    /// How often the traced event was applied.
    pub(super) traced_applied: i64,
    /// The traced tie's account's plan version right after its first delivery.
    pub(super) tie_after: Option<i64>,
}

/// Replays `stream` through handler `name`; `trace` is the traced event's id,
/// `tie_trace` the traced same-second pair's older event.
pub(super) fn run_handler(
    name: &'static str,
    stream: &Stream,
    trace: &str,
    tie_trace: Option<&str>,
) -> io::Result<HandlerResult> {
    let mut db = open_db(name)?;
    let mut stale_writes = 0u64;
    let mut queue: VecDeque<Group> = stream.groups.iter().cloned().collect();
    let mut attempts: HashMap<usize, u32> = HashMap::new();
    let (mut deliveries, mut errors) = (0u64, 0u64);
    let mut log: Vec<String> = Vec::new();
    let mut tie_after = None;
    while let Some(g) = queue.pop_front() {
        let e = &stream.events[g.event];
        // phase 1: each copy runs until its first `await io()`
        let mut runs: Vec<(Pending, u32)> = Vec::new();
        for _ in 0..g.copies {
            let n = attempts.get(&e.idx).copied().unwrap_or(0) + 1;
            attempts.insert(e.idx, n);
            let pending = match name {
                "b check-then-insert" => {
                    let id = e.id.clone();
                    if with(&mut db, move |c| db::sql_seen(c, &id))? {
                        Pending::Done(200)
                    } else {
                        Pending::Waiting
                    }
                }
                _ => Pending::Waiting,
            };
            runs.push((pending, n));
        }
        // phase 2: the waiting copies resume in order, each to completion
        let mut results: Vec<(u16, u32)> = Vec::new();
        for (pending, n) in runs {
            let status = match pending {
                Pending::Done(s) => s,
                Pending::Waiting => match name {
                    "a naive" => {
                        let ev = e.clone();
                        if with(&mut db, move |c| db::apply(c, &ev, Guard::None))? {
                            stale_writes += 1;
                        }
                        200
                    }
                    "b check-then-insert" => {
                        let ev = e.clone();
                        let (stale, marked) = with(&mut db, move |c| {
                            let stale = db::apply(c, &ev, Guard::None)?;
                            Ok((stale, db::sql_mark(c, &ev.id).is_ok()))
                        })?;
                        if stale {
                            stale_writes += 1;
                        }
                        if marked { 200 } else { 500 }
                    }
                    _ => {
                        let guard = match name {
                            "c atomic insert" => Guard::None,
                            "d order by created>=" => Guard::CreatedGe,
                            "d order by created>" => Guard::CreatedGt,
                            _ => Guard::Passed,
                        };
                        if atomic(&mut db, e, guard)? {
                            stale_writes += 1;
                        }
                        200
                    }
                },
            };
            results.push((status, n));
        }
        for (status, n) in results {
            deliveries += 1;
            if e.id == trace {
                log.push(format!("{} attempt {n}: {status}", g.kind));
            }
            if Some(e.id.as_str()) == tie_trace && n == 1 {
                let acct = e.acct;
                tie_after = Some(with(&mut db, move |c| db::sql_get_acct(c, acct))?.plan_version);
            }
            if status >= 500 {
                errors += 1;
            }
            let Some(retry) = retry(&g, e, n, status) else {
                continue;
            };
            if retry.kind == RETRY_AFTER_TIMEOUT
                && e.id == trace
                && let Some(last) = log.last_mut()
            {
                last.push_str(" (response lost, sender retries)");
            }
            enqueue(&mut queue, retry);
        }
    }
    let end = with(&mut db, db::end_rows)?;
    let sent = Sent {
        deliveries,
        errors,
        stale_writes,
    };
    Ok(HandlerResult {
        row: HandlerRow::count(name, stream, sent, &end),
        log,
        traced_applied: end.applied.get(trace).copied().unwrap_or(0),
        tie_after,
    })
}
