//! A faithful Rust port of the seed's `webhook-sim.mjs` (the end of
//! `webhook-idempotency-post.txt`): a seeded simulation of webhook receivers under
//! at-least-once delivery.
//!
//! [`run`] prints exactly what the script prints, line for line, except the four
//! run-metadata lines (runtime, SQLite version, machine, run date) that [`RunMeta`]
//! supplies. Every handler runs on an in-memory SQLite database, as in the script.
//! Handlers (a) naive and (b) check-then-insert are the deliberately broken designs
//! and stay here on plain SQL; handler (c) is hookbox's own claim, key and side
//! effect in one `BEGIN IMMEDIATE` transaction ([`blocking::process_once`], the
//! synchronous form of `SqliteStore::process_once`: the same SQL on the schema of
//! hookbox's migrations), and the three (d) variants are that plus the store's
//! version guard ([`blocking::advance`]) or the two `created` comparisons the seed
//! describes (`created >= stored`, `created > stored`). The crash test runs on a
//! file, closing and reopening the connection, as the script does.
//!
//! The sections are independent (each has its own database and draws), so [`run`]
//! computes them on all cores and prints them in the script's order.
//!
//! Concurrency is the script's: two copies of one delivery interleave at a single
//! `await io()`. Node runs each copy until its first await, then resumes them in
//! order, each to completion (nothing after the await awaits again). The port models
//! that as an explicit two-phase state machine per group: every copy's pre-await
//! part, then every waiting copy's post-await part, in copy order. For (c)/(d) the
//! await comes before the transaction, so each copy's `process_once` runs to
//! completion, in that order.
#![forbid(unsafe_code)]

pub mod pg;

use std::collections::{HashMap, VecDeque};
use std::fmt::Display;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hookbox_core::{Advance, DedupeKey, Processed, error_chain};
use hookbox_sqlite::blocking;
use hookbox_sqlite::diesel::connection::SimpleConnection as _;
use hookbox_sqlite::diesel::prelude::*;
use hookbox_sqlite::diesel::sql_types::{BigInt, Integer, Text};
use hookbox_sqlite::diesel::{self, QueryResult, QueryableByName, SqliteConnection};

const SEED: u32 = 20261023;
const N_EVENTS: usize = 10000;
const N_ACCOUNTS: usize = 500;
const P_CREDIT: f64 = 0.6;
const P_TIE: f64 = 0.05;
const P_DUPLICATE: f64 = 0.03;
const P_ACK_LOST: f64 = 0.02;
const P_CONCURRENT: f64 = 0.01;
const P_SHUFFLE: f64 = 0.10;
const SHUFFLE_WINDOW: f64 = 20.0;

/// The run-metadata lines the script prints after `seed:`; the comparison with the
/// published output ignores them.
#[derive(Debug, Clone)]
pub struct RunMeta {
    /// The runtime (the script prints `node: v24.20.0`).
    pub runtime: String,
    /// The SQLite library version.
    pub sqlite: String,
    /// The machine (the script prints CPU model, platform, arch).
    pub machine: String,
    /// The run date, `YYYY-MM-DD` (UTC).
    pub run_date: String,
}

impl RunMeta {
    /// Detects the metadata of this run: the crate version, SQLite's
    /// `sqlite_version()`, OS and architecture, today's UTC date.
    pub fn detect() -> Self {
        #[derive(QueryableByName)]
        struct V {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let sqlite = SqliteConnection::establish(":memory:")
            .ok()
            .and_then(|mut c| {
                diesel::sql_query("SELECT sqlite_version() v")
                    .get_result::<V>(&mut c)
                    .ok()
            })
            .map_or_else(|| "unknown".to_string(), |v| v.v);
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86400) as i64;
        let (y, m, d) = civil_from_days(days);
        Self {
            runtime: format!("hookbox-sim {} (Rust)", env!("CARGO_PKG_VERSION")),
            sqlite,
            machine: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            run_date: format!("{y:04}-{m:02}-{d:02}"),
        }
    }
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

// ---------- deterministic randomness ----------

/// mulberry32, in u32 wrapping arithmetic (`Math.imul` is the low 32 bits of the
/// product; `>>>` is a logical shift).
struct Mulberry32(u32);

impl Mulberry32 {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x6d2b79f5);
        let a = self.0;
        let mut t = (a ^ (a >> 15)).wrapping_mul(1 | a);
        t = t.wrapping_add((t ^ (t >> 7)).wrapping_mul(61 | t)) ^ t;
        f64::from(t ^ (t >> 14)) / 4294967296.0
    }
}

/// `keyed(...parts)`: the string hash over `parts.join("|")`, then one mulberry32
/// draw. Every part is a string or an integer, whose JavaScript number-to-string is
/// its decimal form, which is Rust's `Display` for integers.
fn keyed(parts: &[&dyn Display]) -> f64 {
    let joined = parts
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("|");
    let mut h = SEED;
    // all parts are ASCII, so chars are UTF-16 code units
    for ch in joined.encode_utf16() {
        h = (h ^ u32::from(ch)).wrapping_mul(2654435761);
    }
    Mulberry32(h).next()
}

// ---------- logical events ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Credit,
    Plan,
}

#[derive(Debug, Clone)]
struct Event {
    id: String,
    idx: usize,
    kind: Kind,
    acct: i32,
    amount: i64,
    version: i64,
    created: i64,
    tie: bool,
}

fn make_events() -> (Vec<Event>, Vec<i64>) {
    let mut rnd = Mulberry32(SEED);
    let mut events: Vec<Event> = Vec::with_capacity(N_EVENTS);
    let mut plan_version = vec![0i64; N_ACCOUNTS];
    let mut t: i64 = 1790000000;
    let push = |events: &mut Vec<Event>, mut e: Event| {
        e.id = format!("evt_{:06}", events.len());
        e.idx = events.len();
        events.push(e);
    };
    let blank = |kind, acct, version, created, tie| Event {
        id: String::new(),
        idx: 0,
        kind,
        acct,
        amount: if kind == Kind::Credit { 100 } else { 0 },
        version,
        created,
        tie,
    };
    while events.len() < N_EVENTS {
        if rnd.next() < 0.5 {
            t += 1;
        }
        let acct = (rnd.next() * N_ACCOUNTS as f64).floor() as usize;
        if rnd.next() < P_CREDIT {
            push(&mut events, blank(Kind::Credit, acct as i32, 0, t, false));
        } else {
            plan_version[acct] += 1;
            push(
                &mut events,
                blank(Kind::Plan, acct as i32, plan_version[acct], t, false),
            );
            if rnd.next() < P_TIE && events.len() < N_EVENTS {
                plan_version[acct] += 1;
                push(
                    &mut events,
                    blank(Kind::Plan, acct as i32, plan_version[acct], t, true),
                );
            }
        }
    }
    (events, plan_version)
}

// ---------- delivery stream ----------

#[derive(Debug, Clone)]
struct Group {
    at: f64,
    event: usize,
    copies: u32,
    kind: &'static str,
}

fn make_groups(events: &[Event]) -> Vec<Group> {
    let mut groups = Vec::new();
    for e in events {
        let mut at = e.idx as f64;
        if keyed(&[&e.id, &"shuffle"]) < P_SHUFFLE {
            at += (keyed(&[&e.id, &"shift"]) * 2.0 - 1.0) * SHUFFLE_WINDOW;
        }
        let copies = if keyed(&[&e.id, &"concurrent"]) < P_CONCURRENT {
            2
        } else {
            1
        };
        groups.push(Group {
            at,
            event: e.idx,
            copies,
            kind: if copies == 2 {
                "first+concurrent"
            } else {
                "first"
            },
        });
        if keyed(&[&e.id, &"dup"]) < P_DUPLICATE {
            groups.push(Group {
                at: e.idx as f64 + 1.0 + keyed(&[&e.id, &"dupAt"]) * 200.0,
                event: e.idx,
                copies: 1,
                kind: "duplicate",
            });
        }
    }
    // `a.at - b.at || a.event.idx - b.event.idx`, and Array.prototype.sort is stable
    groups.sort_by(|a, b| {
        a.at.partial_cmp(&b.at)
            .expect("no NaN")
            .then(a.event.cmp(&b.event))
    });
    groups
}

// ---------- the sim's plain SQL ----------

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, credits INTEGER NOT NULL DEFAULT 0,
      plan TEXT, plan_version INTEGER NOT NULL DEFAULT 0, plan_created INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY);
    CREATE TABLE IF NOT EXISTS applied (event_id TEXT NOT NULL);";

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Acct {
    #[diesel(sql_type = BigInt)]
    plan_version: i64,
    #[diesel(sql_type = BigInt)]
    plan_created: i64,
}

#[derive(QueryableByName)]
struct AppliedRow {
    #[diesel(sql_type = Text)]
    event_id: String,
    #[diesel(sql_type = BigInt)]
    c: i64,
}

#[derive(QueryableByName)]
struct AcctVersion {
    #[diesel(sql_type = Integer)]
    id: i32,
    #[diesel(sql_type = BigInt)]
    plan_version: i64,
}

#[derive(QueryableByName)]
struct Sum {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    s: Option<i64>,
}

/// `freshDb`'s schema and 500 accounts (only when the table is empty).
fn fresh_schema(conn: &mut SqliteConnection) -> QueryResult<()> {
    conn.batch_execute(SCHEMA)?;
    let n = diesel::sql_query("SELECT count(*) n FROM accounts").get_result::<Count>(conn)?;
    if n.n == 0 {
        conn.batch_execute("BEGIN")?;
        for i in 0..N_ACCOUNTS as i32 {
            diesel::insert_into(accounts::table)
                .values(accounts::id.eq(i))
                .execute(conn)?;
        }
        conn.batch_execute("COMMIT")?;
    }
    Ok(())
}

fn fresh_db(file: &str) -> QueryResult<SqliteConnection> {
    let mut conn = SqliteConnection::establish(file)
        .map_err(|e| diesel::result::Error::QueryBuilderError(Box::new(e)))?;
    fresh_schema(&mut conn)?;
    Ok(conn)
}

/// The script's tables, for diesel's query builder: its statements are prepared
/// once per connection and cached, as the script's `prep(db)` does.
mod tables {
    diesel::table! {
        accounts (id) {
            id -> Integer,
            credits -> BigInt,
            plan -> Nullable<Text>,
            plan_version -> BigInt,
            plan_created -> BigInt,
        }
    }
    diesel::table! {
        processed_events (event_id) {
            event_id -> Text,
        }
    }
    diesel::table! {
        // no primary key in the script's schema; SQLite's rowid stands in
        applied (rowid) {
            rowid -> BigInt,
            event_id -> Text,
        }
    }
}

use tables::{accounts, applied, processed_events};

/// The script's two `UPDATE`s as statements diesel prepares once per connection and
/// caches, as the script's `prep(db)` does: diesel never caches an `update()` or a
/// `sql_query`, but it caches any query whose type identifies its SQL.
mod updates {
    use diesel::query_builder::{AstPass, QueryFragment, QueryId};
    use diesel::sql_types::{BigInt, Integer, Text};
    use diesel::sqlite::{Sqlite, SqliteConnection};
    use diesel::{QueryResult, RunQueryDsl};

    /// `UPDATE accounts SET credits = credits + ? WHERE id = ?`
    #[derive(QueryId)]
    pub(super) struct Credit {
        pub(super) amount: i64,
        pub(super) acct: i32,
    }

    impl QueryFragment<Sqlite> for Credit {
        fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
            out.push_sql("UPDATE accounts SET credits = credits + ");
            out.push_bind_param::<BigInt, _>(&self.amount)?;
            out.push_sql(" WHERE id = ");
            out.push_bind_param::<Integer, _>(&self.acct)
        }
    }

    impl RunQueryDsl<SqliteConnection> for Credit {}

    /// `UPDATE accounts SET plan = ?, plan_version = ?, plan_created = ? WHERE id = ?`
    #[derive(QueryId)]
    pub(super) struct SetPlan {
        pub(super) plan: String,
        pub(super) version: i64,
        pub(super) created: i64,
        pub(super) acct: i32,
    }

    impl QueryFragment<Sqlite> for SetPlan {
        fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
            out.push_sql("UPDATE accounts SET plan = ");
            out.push_bind_param::<Text, _>(&self.plan)?;
            out.push_sql(", plan_version = ");
            out.push_bind_param::<BigInt, _>(&self.version)?;
            out.push_sql(", plan_created = ");
            out.push_bind_param::<BigInt, _>(&self.created)?;
            out.push_sql(" WHERE id = ");
            out.push_bind_param::<Integer, _>(&self.acct)
        }
    }

    impl RunQueryDsl<SqliteConnection> for SetPlan {}
}

fn sql_credit(conn: &mut SqliteConnection, amount: i64, acct: i32) -> QueryResult<usize> {
    updates::Credit { amount, acct }.execute(conn)
}

fn sql_set_plan(conn: &mut SqliteConnection, e: &Event) -> QueryResult<usize> {
    updates::SetPlan {
        plan: format!("plan_v{}", e.version),
        version: e.version,
        created: e.created,
        acct: e.acct,
    }
    .execute(conn)
}

fn sql_get_acct(conn: &mut SqliteConnection, acct: i32) -> QueryResult<Acct> {
    let (plan_version, plan_created) = accounts::table
        .find(acct)
        .select((accounts::plan_version, accounts::plan_created))
        .get_result::<(i64, i64)>(conn)?;
    Ok(Acct {
        plan_version,
        plan_created,
    })
}

fn sql_applied(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(applied::table)
        .values(applied::event_id.eq(id))
        .execute(conn)
}

fn sql_seen(conn: &mut SqliteConnection, id: &str) -> QueryResult<bool> {
    processed_events::table
        .find(id)
        .select(processed_events::event_id)
        .get_result::<String>(conn)
        .optional()
        .map(|r| r.is_some())
}

fn sql_mark(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(processed_events::table)
        .values(processed_events::event_id.eq(id))
        .execute(conn)
}

fn sql_claim(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(processed_events::table)
        .values(processed_events::event_id.eq(id))
        .on_conflict_do_nothing()
        .execute(conn)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    None,
    CreatedGe,
    CreatedGt,
    /// the version guard already passed (hookbox's `VersionGuard::advance`)
    Passed,
}

/// `apply(s, e, guard)`; returns `true` when the write was a stale write (an older
/// plan overwrote a newer one).
fn apply(conn: &mut SqliteConnection, e: &Event, guard: Guard) -> QueryResult<bool> {
    if e.kind == Kind::Credit {
        sql_credit(conn, e.amount, e.acct)?;
        sql_applied(conn, &e.id)?;
        return Ok(false);
    }
    let cur = sql_get_acct(conn, e.acct)?;
    let ok = match guard {
        Guard::None | Guard::Passed => true,
        Guard::CreatedGe => e.created >= cur.plan_created,
        Guard::CreatedGt => e.created > cur.plan_created,
    };
    if !ok {
        return Ok(false); // stale: recorded as processed, not applied
    }
    let stale = e.version < cur.plan_version;
    sql_set_plan(conn, e)?;
    sql_applied(conn, &e.id)?;
    Ok(stale)
}

// ---------- receivers ----------

const HANDLERS: [&str; 6] = [
    "a naive",
    "b check-then-insert",
    "c atomic insert",
    "d order by created>=",
    "d order by created>",
    "d version guard",
];

fn sim_err(e: impl Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// A handler's database: in memory, as in the script. For (c)/(d) it also holds
/// hookbox's schema (its embedded migrations), and the claim is hookbox's own
/// `process_once`; the medium is the script's, so the comparison with it is fair
/// (the crash test is where the script, and this port, use a file).
fn open_db(name: &str) -> io::Result<SqliteConnection> {
    let mut conn = fresh_db(":memory:").map_err(sim_err)?;
    if !(name.starts_with('a') || name.starts_with('b')) {
        blocking::migrate(&mut conn).map_err(sim_err)?;
    }
    Ok(conn)
}

/// Runs sync SQL on a handler's database.
fn with<R>(
    conn: &mut SqliteConnection,
    f: impl FnOnce(&mut SqliteConnection) -> QueryResult<R>,
) -> io::Result<R> {
    f(conn).map_err(sim_err)
}

fn temp_dir(prefix: &str) -> io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "{prefix}{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// (c)/(d): hookbox's `process_once`, the store's claim and the side effect in one
/// `BEGIN IMMEDIATE` transaction (the synchronous form, so the sim measures the
/// store and not tokio's blocking pool). Returns whether a stale write happened.
fn atomic(conn: &mut SqliteConnection, e: &Event, guard: Guard) -> Result<bool, String> {
    let key = DedupeKey::new("sim", "sim", e.id.clone());
    let outcome = blocking::process_once(conn, &key, |conn| {
        if guard == Guard::Passed && e.kind == Kind::Plan {
            let object = format!("acct_{}", e.acct);
            if blocking::advance(conn, &object, e.version)? == Advance::Stale {
                return Ok(false);
            }
        }
        Ok(apply(conn, e, guard)?)
    })
    .map_err(|e| error_chain(&e))?;
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

/// The handler table's header.
pub(crate) fn write_handler_header(out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{}{}{}{}{}{}{}{}{}{}",
        pad("handler", 22),
        lpad("deliveries", 11),
        lpad("5xx", 6),
        lpad("dup events", 11),
        lpad("extra applies", 14),
        lpad("lost", 6),
        lpad("stale writes", 13),
        lpad("stale accts", 12),
        lpad("ledger", 10),
        lpad("expected", 10)
    )
}

/// One row of the handler table.
pub(crate) fn write_handler_row(out: &mut impl Write, r: &HandlerRow) -> io::Result<()> {
    writeln!(
        out,
        "{}{}{}{}{}{}{}{}{}{}",
        pad(r.name, 22),
        lpad(r.deliveries, 11),
        lpad(r.errors, 6),
        lpad(r.dup_events, 11),
        lpad(r.dup_applies, 14),
        lpad(r.lost, 6),
        lpad(r.stale_writes, 13),
        lpad(r.stale, 12),
        lpad(r.ledger, 10),
        lpad(r.expected, 10)
    )
}

struct HandlerResult {
    row: HandlerRow,
    log: Vec<String>,
    traced_applied: i64,
    tie_after: Option<i64>,
}

#[derive(Clone)]
struct QItem {
    at: f64,
    event: usize,
    copies: u32,
    kind: &'static str,
}

fn run_handler(
    name: &'static str,
    events: &[Event],
    groups: &[Group],
    latest_plan: &[i64],
    trace: &str,
    tie_trace: Option<&str>,
) -> io::Result<HandlerResult> {
    let mut db = open_db(name)?;
    let mut stale_writes = 0u64;
    let mut queue: VecDeque<QItem> = groups
        .iter()
        .map(|g| QItem {
            at: g.at,
            event: g.event,
            copies: g.copies,
            kind: g.kind,
        })
        .collect();
    let mut attempts: HashMap<usize, u32> = HashMap::new();
    let (mut deliveries, mut errors) = (0u64, 0u64);
    let mut log: Vec<String> = Vec::new();
    let mut tie_after = None;
    let enqueue = |queue: &mut VecDeque<QItem>, item: QItem| {
        let i = queue
            .iter()
            .position(|q| q.at > item.at)
            .unwrap_or(queue.len());
        queue.insert(i, item);
    };
    while let Some(g) = queue.pop_front() {
        let e = &events[g.event];
        // phase 1: each copy runs until its first `await io()`
        let mut runs: Vec<(Pending, u32)> = Vec::new();
        for _ in 0..g.copies {
            let n = attempts.get(&e.idx).copied().unwrap_or(0) + 1;
            attempts.insert(e.idx, n);
            let pending = match name {
                "b check-then-insert" => {
                    let id = e.id.clone();
                    if with(&mut db, move |c| sql_seen(c, &id))? {
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
                        if with(&mut db, move |c| apply(c, &ev, Guard::None))? {
                            stale_writes += 1;
                        }
                        200
                    }
                    "b check-then-insert" => {
                        let ev = e.clone();
                        let (stale, marked) = with(&mut db, move |c| {
                            let stale = apply(c, &ev, Guard::None)?;
                            Ok((stale, sql_mark(c, &ev.id).is_ok()))
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
                        if atomic(&mut db, e, guard).map_err(sim_err)? {
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
                tie_after = Some(with(&mut db, move |c| sql_get_acct(c, acct))?.plan_version);
            }
            if status >= 500 {
                errors += 1;
                let at = g.at + 5.0 + keyed(&[&e.id, &n, &"retryAt"]) * 200.0;
                enqueue(
                    &mut queue,
                    QItem {
                        at,
                        event: e.idx,
                        copies: 1,
                        kind: "retry-after-500",
                    },
                );
            } else if keyed(&[&e.id, &n, &"ackLost"]) < P_ACK_LOST {
                let at = g.at + 5.0 + keyed(&[&e.id, &n, &"retryAt"]) * 200.0;
                enqueue(
                    &mut queue,
                    QItem {
                        at,
                        event: e.idx,
                        copies: 1,
                        kind: "retry-after-timeout",
                    },
                );
                if e.id == trace
                    && let Some(last) = log.last_mut()
                {
                    last.push_str(" (response lost, sender retries)");
                }
            }
        }
    }
    let (applied_rows, accounts, ledger) = with(&mut db, |c| {
        let applied =
            diesel::sql_query("SELECT event_id, count(*) c FROM applied GROUP BY event_id")
                .load::<AppliedRow>(c)?;
        let accounts =
            diesel::sql_query("SELECT id, plan_version FROM accounts").load::<AcctVersion>(c)?;
        let ledger =
            diesel::sql_query("SELECT sum(credits) s FROM accounts").get_result::<Sum>(c)?;
        Ok((applied, accounts, ledger.s.unwrap_or(0)))
    })?;
    let applied_counts: HashMap<String, i64> = applied_rows
        .into_iter()
        .map(|r| (r.event_id, r.c))
        .collect();
    let (mut dup_events, mut dup_applies, mut lost) = (0, 0, 0);
    let credits: Vec<&Event> = events.iter().filter(|e| e.kind == Kind::Credit).collect();
    for e in &credits {
        let c = applied_counts.get(&e.id).copied().unwrap_or(0);
        if c == 0 {
            lost += 1;
        }
        if c > 1 {
            dup_events += 1;
            dup_applies += c - 1;
        }
    }
    let stale = accounts
        .iter()
        .filter(|r| {
            let latest = latest_plan[r.id as usize];
            latest > 0 && r.plan_version != latest
        })
        .count() as u64;
    Ok(HandlerResult {
        row: HandlerRow {
            name,
            deliveries,
            errors,
            dup_events,
            dup_applies,
            lost,
            stale_writes,
            stale,
            ledger,
            expected: credits.len() as i64 * 100,
        },
        log,
        traced_applied: applied_counts.get(trace).copied().unwrap_or(0),
        tie_after,
    })
}

// ---------- retention test ----------

enum Cell {
    Num(i64),
    Text(String),
}

impl Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Num(n) => write!(f, "{n}"),
            Cell::Text(s) => f.write_str(s),
        }
    }
}

fn retention() -> Vec<(&'static str, &'static str, Cell)> {
    const H: i64 = 3600;
    const D: i64 = 86400;
    let cum = |delays: &[i64]| {
        let mut t = 0;
        delays
            .iter()
            .map(|d| {
                t += d;
                t
            })
            .collect::<Vec<i64>>()
    };
    let schedules: [(&str, Vec<i64>); 3] = [
        (
            "Svix published schedule",
            cum(&[0, 5, 300, 1800, 2 * H, 5 * H, 10 * H, 10 * H]),
        ),
        (
            "Standard Webhooks example",
            cum(&[
                0,
                5,
                300,
                1800,
                2 * H,
                5 * H,
                10 * H,
                14 * H,
                20 * H,
                24 * H,
            ]),
        ),
        (
            "3-day window, illustrative intervals",
            vec![
                0, 60, 360, 2160, 5760, 12960, 27360, 56160, 113760, 172800, 259200,
            ],
        ),
    ];
    let ttls: [(&str, i64); 4] = [
        ("5 min", 300),
        ("24 h", D),
        ("7 days", 7 * D),
        ("30 days", 30 * D),
    ];
    const P_LOST: f64 = 0.05;
    const P_UNREACHABLE: f64 = 0.5;
    const P_MANUAL: f64 = 0.005;
    let mut rows = Vec::new();
    for (sname, offsets) in &schedules {
        let manual = sname.starts_with("3-day");
        for (tname, ttl) in ttls {
            let mut applies: i64 = 0;
            for i in 0..N_EVENTS {
                let mut expires: f64 = -1.0;
                let mut done = false;
                let mut visit = |t: f64, n: &dyn Display| {
                    if t >= expires {
                        applies += 1;
                        expires = t + ttl as f64;
                    }
                    keyed(&[&"ret", sname, &i, &n, &"lost"]) >= P_LOST
                };
                let mut n = 0;
                while n < offsets.len() && !done {
                    if n > 0 && keyed(&[&"ret", sname, &i, &n, &"down"]) < P_UNREACHABLE {
                        n += 1;
                        continue;
                    }
                    done = visit(offsets[n] as f64, &n);
                    n += 1;
                }
                if manual && keyed(&[&"ret", sname, &i, &"manual"]) < P_MANUAL {
                    let t = D as f64 + keyed(&[&"ret", sname, &i, &"manualAt"]) * 14.0 * D as f64;
                    visit(t, &"manual");
                }
            }
            rows.push((*sname, tname, Cell::Num(applies - N_EVENTS as i64)));
        }
        rows.push((
            *sname,
            "last retry at",
            Cell::Text(fmt_hms(offsets[offsets.len() - 1])),
        ));
    }
    rows
}

fn fmt_hms(sec: i64) -> String {
    let h = sec / 3600;
    let m = (sec % 3600) / 60;
    let s = sec % 60;
    format!("{h}:{m:02}:{s:02}")
}

// ---------- crash test ----------

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
    writeln!(
        out,
        "{}{}{}{}{}{}{}{}",
        pad("design", 34),
        lpad("events", 7),
        lpad("crashes", 8),
        lpad("keys", 6),
        lpad("applied", 8),
        lpad("lost", 6),
        lpad("ledger", 8),
        lpad("expected", 9)
    )
}

/// One row of the crash table, for the design called `label`.
pub(crate) fn write_crash_row(out: &mut impl Write, label: &str, r: &CrashRow) -> io::Result<()> {
    writeln!(
        out,
        "{}{}{}{}{}{}{}{}",
        pad(label, 34),
        lpad(r.n, 7),
        lpad(r.crashes, 8),
        lpad(r.keys, 6),
        lpad(r.applied, 8),
        lpad(r.lost, 6),
        lpad(r.ledger, 8),
        lpad(r.expected, 9)
    )
}

fn crash_test(split: bool) -> io::Result<CrashRow> {
    let dir = temp_dir("whsim-")?;
    let file = dir.join("crash.db");
    let result = crash_run(split, &file);
    std::fs::remove_dir_all(&dir)?;
    result
}

fn crash_run(split: bool, file: &Path) -> io::Result<CrashRow> {
    let file = file
        .to_str()
        .ok_or_else(|| sim_err("temp path is not UTF-8"))?;
    let mut db = fresh_db(file).map_err(sim_err)?;
    const N: i64 = 2000;
    const P_CRASH: f64 = 0.01;
    let mut crashes = 0;
    let mut queue: VecDeque<(String, i32, u32)> = (0..N)
        .map(|i| (format!("evt_c{i:05}"), (i % N_ACCOUNTS as i64) as i32, 1))
        .collect();
    let run = |db: &mut SqliteConnection, id: &str, acct: i32| -> QueryResult<()> {
        sql_credit(db, 100, acct)?;
        sql_applied(db, id)?;
        Ok(())
    };
    while let Some((id, acct, n)) = queue.pop_front() {
        let crash = keyed(&[&"crash", &id, &n]) < P_CRASH;
        if split {
            if sql_seen(&mut db, &id).map_err(sim_err)? {
                continue; // already "processed": ack
            }
            sql_mark(&mut db, &id).map_err(sim_err)?; // dedupe row commits on its own
            if crash {
                crashes += 1;
                // the process dies: the connection closes, a new one opens
                drop(db);
                db = fresh_db(file).map_err(sim_err)?;
                queue.push_back((id, acct, n + 1));
                continue;
            }
            run(&mut db, &id, acct).map_err(sim_err)?;
        } else {
            db.batch_execute("BEGIN IMMEDIATE").map_err(sim_err)?;
            if sql_claim(&mut db, &id).map_err(sim_err)? == 0 {
                db.batch_execute("COMMIT").map_err(sim_err)?;
                continue;
            }
            if crash {
                crashes += 1;
                // no COMMIT: closing the connection discards the open transaction
                drop(db);
                db = fresh_db(file).map_err(sim_err)?;
                queue.push_back((id, acct, n + 1));
                continue;
            }
            run(&mut db, &id, acct).map_err(sim_err)?;
            db.batch_execute("COMMIT").map_err(sim_err)?;
        }
    }
    let applied = diesel::sql_query("SELECT count(DISTINCT event_id) n FROM applied")
        .get_result::<Count>(&mut db)
        .map_err(sim_err)?
        .n;
    let keys = diesel::sql_query("SELECT count(*) n FROM processed_events")
        .get_result::<Count>(&mut db)
        .map_err(sim_err)?
        .n;
    let ledger = diesel::sql_query("SELECT sum(credits) s FROM accounts")
        .get_result::<Sum>(&mut db)
        .map_err(sim_err)?
        .s
        .unwrap_or(0);
    drop(db);
    Ok(CrashRow {
        n: N,
        crashes,
        keys,
        applied,
        lost: N - applied,
        ledger,
        expected: N * 100,
    })
}

// ---------- sender side: jitter ----------

struct JitterRow {
    mode: &'static str,
    attempts: u64,
    peak_after: u64,
    last_ok: i64,
}

fn jitter() -> Vec<JitterRow> {
    const N: usize = 1000;
    const RECOVER: f64 = 300.0;
    const BASE: f64 = 1.0;
    const CAP: f64 = 3600.0;
    let mut out = Vec::new();
    for mode in ["exponential, no jitter", "exponential, full jitter"] {
        let full = mode.contains("full");
        let mut rnd = Mulberry32(SEED.wrapping_add(u32::from(full)));
        let mut buckets: HashMap<i64, u64> = HashMap::new();
        let mut attempts = 0u64;
        let mut last_ok: f64 = 0.0;
        for _ in 0..N {
            let mut t: f64 = 0.0;
            let mut k: i32 = 0;
            loop {
                attempts += 1;
                let sec = t.floor() as i64;
                *buckets.entry(sec).or_insert(0) += 1;
                if t >= RECOVER {
                    last_ok = last_ok.max(t);
                    break;
                }
                let d = CAP.min(BASE * 2f64.powi(k));
                k += 1;
                t += if full { rnd.next() * d } else { d };
            }
        }
        let peak_after = buckets
            .iter()
            .filter(|(sec, _)| **sec >= RECOVER as i64)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        // Math.round on a positive number: half rounds up
        out.push(JitterRow {
            mode,
            attempts,
            peak_after,
            last_ok: (last_ok + 0.5).floor() as i64,
        });
    }
    out
}

// ---------- main ----------

/// `String(v).padEnd(n)`
fn pad(v: impl Display, n: usize) -> String {
    format!("{:<n$}", v.to_string())
}

/// `String(v).padStart(n)`
fn lpad(v: impl Display, n: usize) -> String {
    format!("{:>n$}", v.to_string())
}

/// What one independent section of the run computed.
enum Section {
    Handler(HandlerResult),
    Retention(Vec<(&'static str, &'static str, Cell)>),
    Crash(CrashRow),
    Jitter(Vec<JitterRow>),
}

type Job<'a> = Box<dyn FnOnce() -> io::Result<Section> + Send + 'a>;

/// Runs `jobs` on as many threads as the machine has cores; returns each job's
/// result and elapsed time, in the order given. Jobs are started from the last one
/// back, so the crash tests, the longest (they wait on the file system), start
/// first and the short handler runs fill in around them.
fn run_parallel(jobs: Vec<Job<'_>>) -> Vec<(io::Result<Section>, Duration)> {
    use std::sync::{Mutex, PoisonError};
    let n = jobs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .clamp(1, n.max(1));
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_back();
                    let Some((i, job)) = next else { break };
                    let t0 = Instant::now();
                    let result = job();
                    let elapsed = t0.elapsed();
                    done.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((i, result, elapsed));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_by_key(|(i, _, _)| *i);
    done.into_iter().map(|(_, r, t)| (r, t)).collect()
}

/// Runs the whole simulation and prints what `webhook-sim.mjs` prints.
///
/// # Errors
/// Writing to `out` failed, or SQLite did.
pub fn run(out: &mut impl Write, meta: &RunMeta) -> io::Result<()> {
    run_timed(out, meta).map(|_| ())
}

/// [`run`], returning the elapsed time of each section (events and groups, each
/// handler, retention, each crash design, jitter), in order.
///
/// # Errors
/// Writing to `out` failed, or SQLite did.
pub fn run_timed(out: &mut impl Write, meta: &RunMeta) -> io::Result<Vec<(String, Duration)>> {
    let mut timings = Vec::new();
    let t0 = Instant::now();
    writeln!(out, "webhook-sim (simulation, synthetic data)")?;
    writeln!(out, "seed: {SEED}")?;
    writeln!(out, "runtime: {}", meta.runtime)?;
    writeln!(out, "sqlite: {}", meta.sqlite)?;
    writeln!(out, "machine: {}", meta.machine)?;
    writeln!(out, "run date: {}", meta.run_date)?;

    let (events, plan_version) = make_events();
    let groups = make_groups(&events);
    let ties = events.iter().filter(|e| e.tie).count();
    let n_credit = events.iter().filter(|e| e.kind == Kind::Credit).count();
    let n_plan = events.iter().filter(|e| e.kind == Kind::Plan).count();
    writeln!(
        out,
        "events: {} ({n_credit} credit, {n_plan} plan), accounts: {N_ACCOUNTS}, same-second plan pairs: {ties}",
        events.len()
    )?;
    writeln!(
        out,
        "chances per delivery: duplicate {P_DUPLICATE}, response lost after commit {P_ACK_LOST}, concurrent redelivery {P_CONCURRENT}, shuffled {P_SHUFFLE} (window {SHUFFLE_WINDOW})"
    )?;

    // Traced event: first credit event with a concurrent pair, else the credit event
    // with the most scheduled deliveries.
    let mut per_event: HashMap<usize, u32> = HashMap::new();
    for g in &groups {
        *per_event.entry(g.event).or_insert(0) += g.copies;
    }
    let trace = match groups
        .iter()
        .find(|g| g.copies == 2 && events[g.event].kind == Kind::Credit)
    {
        Some(g) => &events[g.event],
        None => {
            let mut credits: Vec<&Event> =
                events.iter().filter(|e| e.kind == Kind::Credit).collect();
            credits.sort_by(|a, b| per_event[&b.idx].cmp(&per_event[&a.idx]));
            credits[0]
        }
    };

    // Traced tie: the first same-second pair whose newer update arrived first.
    let mut pos: HashMap<usize, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        pos.entry(g.event).or_insert(i);
    }
    let reversed: Vec<&Event> = events
        .iter()
        .filter(|e| e.tie && pos[&e.idx] < pos[&(e.idx - 1)])
        .collect();
    let tie_trace = reversed.first().map(|e| events[e.idx - 1].id.as_str());
    timings.push(("events and delivery stream".to_string(), t0.elapsed()));

    // every section below is independent of the others (its own database, its own
    // draws): compute them on all cores, then print in the script's order
    let mut jobs: Vec<(String, Job<'_>)> = Vec::new();
    for name in HANDLERS {
        let (events, groups, plan_version, trace) = (&events, &groups, &plan_version, &trace.id);
        jobs.push((
            format!("handler {name}"),
            Box::new(move || {
                run_handler(name, events, groups, plan_version, trace, tie_trace)
                    .map(Section::Handler)
            }),
        ));
    }
    jobs.push((
        "retention".into(),
        Box::new(|| Ok(Section::Retention(retention()))),
    ));
    for (label, split) in [("crash split", true), ("crash atomic", false)] {
        jobs.push((
            label.into(),
            Box::new(move || crash_test(split).map(Section::Crash)),
        ));
    }
    jobs.push(("jitter".into(), Box::new(|| Ok(Section::Jitter(jitter())))));
    let mut results = Vec::new();
    let mut retention_rows = Vec::new();
    let mut crashes = Vec::new();
    let mut jitter_rows = Vec::new();
    let (labels, jobs): (Vec<String>, Vec<Job<'_>>) = jobs.into_iter().unzip();
    for (label, (section, elapsed)) in labels.into_iter().zip(run_parallel(jobs)) {
        timings.push((label, elapsed));
        match section? {
            Section::Handler(r) => results.push(r),
            Section::Retention(rows) => retention_rows = rows,
            Section::Crash(r) => crashes.push(r),
            Section::Jitter(rows) => jitter_rows = rows,
        }
    }

    writeln!(out, "\n== handlers (simulation)")?;
    write_handler_header(out)?;
    for r in &results {
        write_handler_row(out, &r.row)?;
    }

    writeln!(
        out,
        "\n== traced event {}: add {} credits to acct_{:04}",
        trace.id, trace.amount, trace.acct
    )?;
    for r in results.iter().take(3) {
        writeln!(out, "{}: applied {}x", r.row.name, r.traced_applied)?;
        for l in &r.log {
            writeln!(out, "  {l}")?;
        }
    }

    writeln!(
        out,
        "\n== same-second pairs delivered newer-first: {} of {ties}",
        reversed.len()
    )?;
    if let Some(e) = reversed.first() {
        let older = &events[e.idx - 1];
        writeln!(
            out,
            "example acct_{:04}: {} sets plan_v{}, {} sets plan_v{}, both created {}; arrival order {} then {}",
            e.acct, older.id, older.version, e.id, e.version, e.created, e.id, older.id
        )?;
        for r in &results {
            // `plan_v${r.tieAfter}`: JavaScript prints "undefined" when it was never set
            let after = r
                .tie_after
                .map_or_else(|| "undefined".to_string(), |v| v.to_string());
            writeln!(out, "  {}: plan_v{after} after both arrived", r.row.name)?;
        }
    }

    writeln!(
        out,
        "\n== retention: duplicate applies that got past the dedupe store (simulation)"
    )?;
    writeln!(
        out,
        "chances: response lost after processing 0.05 per attempt, later attempt unreachable 0.5, manual resend 0.005 (3-day row only, 1 to 15 days later)"
    )?;
    for (s, t, n) in retention_rows {
        writeln!(out, "{}{}{}", pad(s, 38), pad(t, 15), lpad(n, 8))?;
    }

    writeln!(
        out,
        "\n== crash after dedupe insert, before side effect (simulation, file-backed SQLite, chance 0.01 per delivery)"
    )?;
    write_crash_header(out)?;
    for (split, r) in [true, false].into_iter().zip(crashes) {
        write_crash_row(out, crash_label(split), &r)?;
    }

    writeln!(
        out,
        "\n== sender retries: 1,000 failed deliveries, receiver back at t=300 s (simulation)"
    )?;
    for r in jitter_rows {
        writeln!(
            out,
            "{} attempts {}, peak per second after recovery {}, last delivered at t={} s",
            pad(r.mode, 26),
            r.attempts,
            r.peak_after,
            r.last_ok
        )?;
    }
    Ok(timings)
}
