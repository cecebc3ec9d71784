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
use tokio::task::JoinSet;

use super::backend::{Backend, SimConn};
use super::namespace::Schema;
use super::options::SimOptions;
use crate::error::failed;
use crate::seed::{Event, Group, Kind, Stream, enqueue, retry};
use crate::table::{HandlerRow, Sent};

/// A delivery that keeps failing this often stops the run: something other than the
/// race is wrong (the server, the schema).
const MAX_ATTEMPTS: u32 = 50;

/// The handlers the server mode replays: the broken check-then-insert and
/// hookbox's two correct designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handler {
    /// (b): SELECT the key, await I/O, apply, INSERT the key (a conflict answers 500).
    CheckThenInsert,
    /// (c): the store's `process_once` with the side effect in its transaction.
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

/// A worker: for (b) the connection it keeps for the whole run; (c)/(d) take one
/// from the store's pool per delivery (the pool has one per worker).
struct Worker<B: Backend> {
    conn: Option<B::Pooled>,
}

/// What a delivery answered: the status, and whether it made a stale write.
struct Answer {
    status: u16,
    stale: bool,
}

/// Replays the stream through `handler` on `schema` and counts the table row from
/// the schema's rows.
pub(super) async fn replay<B: Backend>(
    handler: Handler,
    stream: &Stream,
    options: &SimOptions,
    schema: &Schema<B>,
) -> io::Result<HandlerRow> {
    let store = schema.store(options.workers).await?;
    let events: Arc<[Event]> = stream.events.clone().into();
    let mut idle = Vec::with_capacity(options.workers);
    for _ in 0..options.workers {
        let conn = match handler {
            Handler::CheckThenInsert => Some(B::connection(&store).await?),
            Handler::Atomic | Handler::VersionGuard => None,
        };
        idle.push(Worker::<B> { conn });
    }

    let mut queue: VecDeque<Group> = stream.groups.iter().cloned().collect();
    let mut attempts: HashMap<usize, u32> = HashMap::new();
    let (mut deliveries, mut errors, mut stale_writes) = (0u64, 0u64, 0u64);
    let mut running: JoinSet<(Worker<B>, Group, u32, io::Result<Answer>)> = JoinSet::new();
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
        if answer.status >= 500 {
            errors += 1;
        }
        if let Some(retry) = retry(&g, &events[g.event], n, answer.status) {
            enqueue(&mut queue, retry);
        }
    }
    drop(idle);

    let end = B::connection(&store).await?.end_rows().await?;
    let sent = Sent {
        deliveries,
        errors,
        stale_writes,
    };
    Ok(HandlerRow::count(handler.name(), stream, sent, &end))
}

/// Runs one delivery through `handler`.
async fn deliver<B: Backend>(
    handler: Handler,
    store: &B::Store,
    worker: &mut Worker<B>,
    e: &Event,
    io_delay: Duration,
) -> io::Result<Answer> {
    match handler {
        Handler::CheckThenInsert => {
            let Some(conn) = worker.conn.as_mut() else {
                return Err(io::Error::other("(b) runs on a worker's own connection"));
            };
            check_then_insert(&mut **conn, e, io_delay).await
        }
        Handler::Atomic | Handler::VersionGuard => {
            // the await happens before the transaction, never inside it
            tokio::time::sleep(io_delay).await;
            atomic::<B>(store, e, handler == Handler::VersionGuard).await
        }
    }
}

/// (b), the script's shape: the check and the mark are statements of their own, so
/// two copies can both pass the check before either marks.
async fn check_then_insert(
    conn: &mut impl SimConn,
    e: &Event,
    io_delay: Duration,
) -> io::Result<Answer> {
    let failed = |err: DieselError| failed("(b) check-then-insert", &err);
    if conn.seen(&e.id).await.map_err(failed)? {
        return Ok(Answer {
            status: 200,
            stale: false,
        });
    }
    tokio::time::sleep(io_delay).await;
    let stale = conn.apply_in_tx(e).await.map_err(failed)?;
    let status = match conn.mark(&e.id).await {
        Ok(()) => 200,
        // the script's `catch { return 500; }`: the key is there, the credit too
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => 500,
        Err(err) => return Err(failed(err)),
    };
    Ok(Answer { status, stale })
}

/// (c) and (d): hookbox's `process_once`, the side effect on its connection inside
/// its transaction; (d) advances the account's version first and skips a stale plan.
async fn atomic<B: Backend>(
    store: &B::Store,
    e: &Event,
    version_guard: bool,
) -> io::Result<Answer> {
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
            Ok(conn.apply(e).await.map_err(B::Error::from)?)
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
        Err(ProcessError::Store(err)) => (err.is_transient(), failed("process_once", &err)),
        Err(ProcessError::SideEffect(err)) => (
            err.downcast_ref::<B::Error>()
                .is_some_and(|err| err.is_transient()),
            failed("process_once", err.as_error()),
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
