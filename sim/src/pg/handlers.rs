//! The handlers' replay: the time-ordered delivery queue, dispatched to concurrent
//! workers, each on its own connection.
//!
//! The dispatcher pops groups in time order while enough workers are idle: a group's
//! copies start together, one worker each, so a concurrent pair really runs on two
//! connections at once. When a delivery answers, its worker is idle again and the
//! sender's reaction follows the script: a 5xx, or a 2xx whose response is lost
//! (`keyed(id, attempt, "ackLost")`), schedules a retry at
//! `at + 5 + keyed(id, attempt, "retryAt") * 200` in the same queue.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hookbox_core::{
    Advance, DedupeKey, IdempotencyStore as _, ProcessError, Processed, StoreError as _,
    VersionGuard as _,
};
use hookbox_diesel_pg::diesel::result::{DatabaseErrorKind, Error as DieselError};
use hookbox_diesel_pg::{PgError, PgStore, PooledConnection};
use tokio::task::JoinSet;

use super::db::{self, Schema};
use super::{HandlerRow, PgSimOptions, Stream, pg_err};
use crate::{Event, Kind, P_ACK_LOST, keyed};

/// A delivery that keeps failing this often stops the run: something other than the
/// race is wrong (the server, the schema).
const MAX_ATTEMPTS: u32 = 50;

/// The handlers the Postgres mode replays: the broken check-then-insert and
/// hookbox's two correct designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handler {
    /// (b): SELECT the key, await I/O, apply, INSERT the key (a conflict answers 500).
    CheckThenInsert,
    /// (c): `PgStore::process_once` with the side effect in its transaction.
    Atomic,
    /// (d): (c) plus `VersionGuard::advance` for plan events.
    VersionGuard,
}

impl Handler {
    pub(super) const ALL: [Handler; 3] = [
        Handler::CheckThenInsert,
        Handler::Atomic,
        Handler::VersionGuard,
    ];

    /// The row label, as in the single-process table.
    pub(super) fn name(self) -> &'static str {
        match self {
            Handler::CheckThenInsert => "b check-then-insert",
            Handler::Atomic => "c atomic insert",
            Handler::VersionGuard => "d version guard",
        }
    }

    pub(super) fn schema_suffix(self) -> &'static str {
        match self {
            Handler::CheckThenInsert => "b",
            Handler::Atomic => "c",
            Handler::VersionGuard => "d",
        }
    }
}

/// One delivery: a copy of a group, or a retry.
#[derive(Clone)]
struct QItem {
    at: f64,
    event: usize,
    copies: u32,
}

/// A worker: for (b) the connection it keeps for the whole run; (c)/(d) take one
/// from the store's pool per delivery (the pool has one per worker).
struct Worker {
    conn: Option<PooledConnection>,
}

/// What a delivery answered: the status, and whether it made a stale write.
struct Answer {
    status: u16,
    stale: bool,
}

/// Replays the stream through `handler` on `schema` and counts the table row from
/// the schema's rows.
pub(super) async fn replay(
    handler: Handler,
    stream: &Stream,
    options: &PgSimOptions,
    schema: &Schema,
) -> io::Result<HandlerRow> {
    let store = schema.store(options.workers).await?;
    let events: Arc<[Event]> = stream.events.clone().into();
    let mut idle = Vec::with_capacity(options.workers);
    for _ in 0..options.workers {
        let conn = match handler {
            Handler::CheckThenInsert => Some(
                store
                    .connection()
                    .await
                    .map_err(|e| pg_err("taking a worker's connection", &e))?,
            ),
            Handler::Atomic | Handler::VersionGuard => None,
        };
        idle.push(Worker { conn });
    }

    let mut queue: VecDeque<QItem> = stream
        .groups
        .iter()
        .map(|g| QItem {
            at: g.at,
            event: g.event,
            copies: g.copies,
        })
        .collect();
    let mut attempts: HashMap<usize, u32> = HashMap::new();
    let (mut deliveries, mut errors, mut stale_writes) = (0u64, 0u64, 0u64);
    let mut running: JoinSet<(Worker, QItem, u32, io::Result<Answer>)> = JoinSet::new();
    loop {
        // start every group at the head that has enough idle workers, in time order
        while queue
            .front()
            .is_some_and(|g| g.copies as usize <= idle.len())
        {
            let Some(g) = queue.pop_front() else { break };
            for _ in 0..g.copies {
                let n = attempts.entry(g.event).or_insert(0);
                *n += 1;
                let n = *n;
                if n > MAX_ATTEMPTS {
                    return Err(io::Error::other(format!(
                        "{}: {} failed {MAX_ATTEMPTS} times; giving up",
                        handler.name(),
                        events[g.event].id
                    )));
                }
                let Some(mut worker) = idle.pop() else { break };
                let (store, events, item) = (store.clone(), Arc::clone(&events), g.clone());
                let io_delay = options.io_delay;
                running.spawn(async move {
                    let e = &events[item.event];
                    let answer = deliver(handler, &store, &mut worker, e, io_delay).await;
                    (worker, item, n, answer)
                });
            }
        }
        let Some(done) = running.join_next().await else {
            break; // nothing running and nothing left to start
        };
        let (worker, g, n, answer) = done.map_err(io::Error::other)?;
        idle.push(worker);
        let answer = answer?;
        deliveries += 1;
        if answer.stale {
            stale_writes += 1;
        }
        let e = &events[g.event];
        let retry_at = || g.at + 5.0 + keyed(&[&e.id, &n, &"retryAt"]) * 200.0;
        if answer.status >= 500 {
            errors += 1;
            enqueue(&mut queue, retry_at(), g.event);
        } else if keyed(&[&e.id, &n, &"ackLost"]) < P_ACK_LOST {
            enqueue(&mut queue, retry_at(), g.event);
        }
    }
    drop(idle);

    let mut conn = store
        .connection()
        .await
        .map_err(|e| pg_err("taking a connection", &e))?;
    let rows = db::rows(&mut conn).await?;
    Ok(tally(
        handler,
        stream,
        rows,
        deliveries,
        errors,
        stale_writes,
    ))
}

/// Inserts a retry before the first queued delivery that is due later, as the
/// script's `enqueue` does.
fn enqueue(queue: &mut VecDeque<QItem>, at: f64, event: usize) {
    let i = queue.iter().position(|q| q.at > at).unwrap_or(queue.len());
    queue.insert(
        i,
        QItem {
            at,
            event,
            copies: 1,
        },
    );
}

/// Runs one delivery through `handler`.
async fn deliver(
    handler: Handler,
    store: &PgStore,
    worker: &mut Worker,
    e: &Event,
    io_delay: Duration,
) -> io::Result<Answer> {
    match handler {
        Handler::CheckThenInsert => {
            let Some(conn) = worker.conn.as_mut() else {
                return Err(io::Error::other("(b) runs on a worker's own connection"));
            };
            check_then_insert(conn, e, io_delay).await
        }
        Handler::Atomic | Handler::VersionGuard => {
            // the await happens before the transaction, never inside it
            tokio::time::sleep(io_delay).await;
            atomic(store, e, handler == Handler::VersionGuard).await
        }
    }
}

/// (b), the script's shape: the check and the mark are statements of their own, so
/// two copies can both pass the check before either marks.
async fn check_then_insert(
    conn: &mut PooledConnection,
    e: &Event,
    io_delay: Duration,
) -> io::Result<Answer> {
    let failed = |err: DieselError| pg_err("(b) check-then-insert", &err);
    if db::seen(conn, &e.id).await.map_err(failed)? {
        return Ok(Answer {
            status: 200,
            stale: false,
        });
    }
    tokio::time::sleep(io_delay).await;
    let stale = db::apply_in_tx(conn, e).await.map_err(failed)?;
    let status = match db::mark(conn, &e.id).await {
        Ok(()) => 200,
        // the script's `catch { return 500; }`: the key is there, the credit too
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => 500,
        Err(err) => return Err(failed(err)),
    };
    Ok(Answer { status, stale })
}

/// (c) and (d): hookbox's `process_once`, the side effect on its connection inside
/// its transaction; (d) advances the account's version first and skips a stale plan.
async fn atomic(store: &PgStore, e: &Event, version_guard: bool) -> io::Result<Answer> {
    let key = DedupeKey::new("sim", "sim", e.id.clone());
    let outcome = store
        .process_once(&key, async |conn| {
            if version_guard && e.kind == Kind::Plan {
                let object = format!("acct_{}", e.acct);
                if store.advance(conn, &object, e.version).await? == Advance::Stale {
                    return Ok(false); // recorded as processed
                }
            }
            // as the store's error, so a failure is classified as the store's own are
            Ok(db::apply(conn, e).await.map_err(PgError::from)?)
        })
        .await;
    let (transient, err) = match outcome {
        Ok(Processed::Applied(stale)) => return Ok(Answer { status: 200, stale }),
        Ok(Processed::Duplicate) => {
            return Ok(Answer {
                status: 200,
                stale: false,
            });
        }
        Err(ProcessError::Store(err)) => (err.is_transient(), pg_err("process_once", &err)),
        Err(ProcessError::SideEffect(err)) => (
            err.downcast_ref::<PgError>()
                .is_some_and(|err| err.is_transient()),
            pg_err("process_once", err.as_error()),
        ),
    };
    if transient {
        // nothing was committed: answer 5xx and let the sender retry
        Ok(Answer {
            status: 500,
            stale: false,
        })
    } else {
        Err(err)
    }
}

/// The table row, counted as the script counts it: from the applied log, the
/// accounts and the ledger.
fn tally(
    handler: Handler,
    stream: &Stream,
    rows: db::Rows,
    deliveries: u64,
    errors: u64,
    stale_writes: u64,
) -> HandlerRow {
    let applied: HashMap<String, i64> = rows.applied.into_iter().collect();
    let (mut dup_events, mut dup_applies, mut lost) = (0, 0, 0);
    let credits = stream.events.iter().filter(|e| e.kind == Kind::Credit);
    let mut n_credit = 0i64;
    for e in credits {
        n_credit += 1;
        let c = applied.get(&e.id).copied().unwrap_or(0);
        if c == 0 {
            lost += 1;
        }
        if c > 1 {
            dup_events += 1;
            dup_applies += c - 1;
        }
    }
    let stale = rows
        .plan_versions
        .iter()
        .filter(|(id, version)| {
            let latest = stream.latest_plan[*id as usize];
            latest > 0 && *version != latest
        })
        .count() as u64;
    HandlerRow {
        name: handler.name(),
        deliveries,
        errors,
        dup_events,
        dup_applies,
        lost,
        stale_writes,
        stale,
        ledger: rows.ledger,
        expected: n_credit * 100,
    }
}
