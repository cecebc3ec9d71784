//! Requests per second and acknowledgement latency of the axum edge over loopback
//! HTTP, beside a bare axum handler that answers 200.
//!
//! The receiver runs in this process on its own multi-thread tokio runtime (2 worker
//! threads), bound to `127.0.0.1:0`; the load generator is a hyper-util keep-alive
//! HTTP/1 client on a second runtime, where `K` connections means `K` concurrent
//! request loops (`K` = 1, 16, 64). Each cell is a short warm-up, then a fixed
//! duration; every request's latency (send → whole response read) is kept and the
//! p50/p99 are read from the sorted list. The two sides of each target ratio (fresh
//! over HTTP against `Inbox::receive`; duplicates with the cache against the bare
//! handler) are measured in alternating rounds (A B B A A B B A, each side a cell's
//! length in all), so drift on a busy machine hits both alike. Every answer's status is checked: non-2xx
//! answers and failed requests are counted apart from the acknowledgements and
//! printed.
//!
//! Rows:
//! - the **ceiling**: a bare axum handler that reads the body and answers 200, on the
//!   same server setup;
//! - the **edge in inbox mode** (`Webhook::inbox(Standard, store).into_router(…)`)
//!   for **fresh** deliveries (each request a new `webhook-id`) and **duplicates**
//!   (the same 16 stored deliveries sent again), on SQLite (a temporary file, the
//!   store's defaults: `synchronous = FULL`, 4 connections), Postgres
//!   (`HOOKBOX_PG_URL`, default `postgres://postgres@127.0.0.1:5432/test`, a fresh
//!   schema dropped at the end, the store's default pool of 8) and MySQL or MariaDB
//!   (`HOOKBOX_MYSQL_URL`, default `mysql://root@127.0.0.1:3306/test`, a fresh
//!   database dropped at the end, the store's defaults), each without and with
//!   the Redis cache (`HOOKBOX_REDIS_URL`, default `redis://127.0.0.1:6379`, a
//!   per-run key prefix deleted at the end);
//! - the store's own **`Inbox::receive`** rate at the same concurrency, without
//!   HTTP, on the same runtime: the denominator of the fresh-path target.
//!
//! Every request is signed (and, for the `Inbox::receive` rows, verified) before its
//! timing starts, so signing is not measured. No worker runs: the fresh rows only
//! fill the inbox. No tracing subscriber is installed, as in a service without one.
//!
//! - **the edge beside a worker**: `run_worker` (a handler that does nothing, so
//!   the rows measure the worker's own transactions) draining the same store while
//!   64 connections send fresh deliveries, first at an offered 1,500 per second,
//!   then as fast as answered; after each row what the worker processed meanwhile,
//!   and at the end what it drains alone in a cell's length;
//! - **group commit against per-request commit** on each store: two stores side by
//!   side (`CommitMode::Grouped`, the default, and `CommitMode::PerRequest`), the
//!   edge over HTTP on each, fresh and duplicates, in alternating rounds; the group
//!   rows say how many deliveries each commit held (`mean_batch`).
//!
//! - **the worker alone** (section `worker`): a filled inbox drained by
//!   `run_worker_with` whose handler inserts one ledger row, batched against per-row
//!   on each store in alternating rounds (see `drain.rs`); JSON rows `"row":
//!   "worker"` with `store`, `mode`, `concurrency`, `rows`, `rows_per_s`,
//!   `mean_batch`, `seconds`, and one `"row": "worker-ratio"` per store.
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench-http`
//! (`HOOKBOX_BENCH_ONLY=bare,sqlite` limits the run to those sections of `bare`,
//! `sqlite`, `postgres`, `mysql`, `worker`; `HOOKBOX_BENCH_JSON=<file>` appends one JSON
//! object per row: `row`, `store`, `commit`, `cache`, `kind`, `conns`, `acks_per_s`,
//! `p50_ms`, `p99_ms`, `mean_batch`; `HOOKBOX_BENCH_DRAIN_ROWS` the rows of a
//! batched worker round, default 20,000; `HOOKBOX_BENCH_WORKER_CONCURRENCY` the
//! worker's batches at once, default the store's)
//! (`HOOKBOX_BENCH_CELL_MS` sets a cell's measured length, default 2000;
//! `HOOKBOX_BENCH_WARM_MS` its warm-up, default 300; `HOOKBOX_BENCH_PG_WRITERS` the
//! Postgres store's group-commit writer tasks, default 4, `HOOKBOX_BENCH_MYSQL_WRITERS` the
//! MySQL store's; `HOOKBOX_BENCH_DIR` the directory
//! for the SQLite file; `HOOKBOX_REQUIRE_SERVICES=1` fails instead of skipping when
//! Postgres, MySQL or Redis is unreachable).
#![allow(clippy::print_stdout)] // printing the table is this binary's job

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, header};
use hookbox_bench::env::{
    self, DEFAULT_MYSQL_URL, DEFAULT_PG_URL, DEFAULT_REDIS_URL, MYSQL_URL_VAR, PG_URL_VAR,
    REDIS_URL_VAR, TempDir, unique_suffix,
};
use hookbox_bench::services::{MysqlDatabase, PgSchema, Redis, skipped, without_credentials};
use hookbox_bench::{BoxErr, host};
use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    CommitMode, Delivery, Inbox, Provider as _, Received, Signer as _, VerifiedDelivery,
    error_chain,
};
use hookbox_diesel_mysql::diesel_async::AsyncMysqlConnection;
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::diesel_async::AsyncPgConnection;
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use hookbox_standard::{Standard, StandardSigner};
use tokio::runtime::Runtime;

mod drain;
mod phase;
mod report;
mod sections;
mod server;
mod tally;

use phase::{CONNECTIONS, Feed, Phase, ROUNDS, Side, Timing, single};
use report::{Kind, TARGETS, Table, Via};
use server::{PATH, Prepared, Server, bare_router, http_client, send, serve};
use tally::Answer;

const COMMAND: &str = "cargo run --release -p hookbox-bench --bin hookbox-bench-http";
/// The endpoint's Standard Webhooks secret (the spec's example), keyed once per run.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// How many stored deliveries the duplicate rows send again, round robin.
const DUPLICATES: usize = 16;
/// The offered load of the first row with a worker beside the edge: a modest,
/// steady rate the worker can keep up with.
const WORKER_PACE: f64 = 1_500.0;
/// How long the worker beside the edge waits when no row is due.
const WORKER_IDLE: Duration = Duration::from_millis(10);
/// Worker threads of the receiver's runtime (and of the client's).
const WORKER_THREADS: usize = 2;

/// What each request carries: a small Standard Webhooks event.
const BODY: &[u8] = br#"{"type":"invoice.paid","timestamp":"2026-11-29T12:00:00Z","data":{"id":"in_1NG8Du2eZvKYlo2C","customer":"cus_9s6XKzkNRiz8i3","amount_paid":2000,"currency":"usd"}}"#;

/// What every section shares.
struct Ctx {
    server_rt: Runtime,
    client_rt: Runtime,
    timing: Timing,
    signer: StandardSigner,
    provider: Standard,
    run: String,
    batches: AtomicU64,
    redis: Option<Redis>,
    table: Table,
}

impl Ctx {
    /// Signs `n` requests with new delivery ids, at the current time.
    fn sign_fresh(&self, n: usize) -> Vec<Arc<Prepared>> {
        let batch = self.batches.fetch_add(1, Ordering::Relaxed);
        let now = OffsetDateTime::now_utc().unix_timestamp();
        (0..n)
            .map(|i| Arc::new(self.prepare(&format!("msg_{}_{batch}_{i}", self.run), now)))
            .collect()
    }

    fn prepare(&self, id: &str, timestamp: i64) -> Prepared {
        let mut headers = self.signer.sign(id, timestamp, BODY).to_header_map();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Prepared {
            headers,
            body: Bytes::from_static(BODY),
        }
    }

    /// Signs and verifies `n` new deliveries, for `Inbox::receive` without HTTP: the
    /// same deliveries the edge would store.
    fn verified_fresh(&self, n: usize) -> Result<Vec<Arc<VerifiedDelivery>>, BoxErr> {
        let now = OffsetDateTime::now_utc();
        self.sign_fresh(n)
            .into_iter()
            .map(|p| {
                let delivery = self.provider.verify(&p.headers, p.body.clone(), now)?;
                Ok(Arc::new(delivery))
            })
            .collect()
    }

    /// A side that POSTs to `server` from the client runtime, on a new client (its
    /// connections close when the side is dropped).
    fn http_side<'a>(
        &'a self,
        server: &Server,
        conns: usize,
        feed: Feed<'a, Prepared>,
    ) -> impl Phase + 'a {
        self.paced_http_side(server, conns, feed, None)
    }

    /// A side as [`Ctx::http_side`], sending `pace` requests per second in all when
    /// set (an offered load) instead of as fast as answered.
    fn paced_http_side<'a>(
        &'a self,
        server: &Server,
        conns: usize,
        feed: Feed<'a, Prepared>,
        pace: Option<f64>,
    ) -> impl Phase + 'a {
        let client = http_client();
        let uri = server.uri.clone();
        Side {
            rt: &self.client_rt,
            conns,
            feed,
            op: move |prepared: Arc<Prepared>| {
                let (client, uri) = (client.clone(), uri.clone());
                async move { send(&client, uri, &prepared).await }
            },
            peak_rate: None,
            pace,
        }
    }

    /// A side that calls `Inbox::receive` on the receiver's runtime, without HTTP.
    fn receive_side<'a, S: Inbox + 'static>(
        &'a self,
        store: &Arc<S>,
        conns: usize,
        feed: Feed<'a, VerifiedDelivery>,
    ) -> impl Phase + 'a {
        let store = Arc::clone(store);
        Side {
            rt: &self.server_rt,
            conns,
            feed,
            op: move |delivery: Arc<VerifiedDelivery>| {
                let store = Arc::clone(&store);
                async move {
                    match store.receive(&delivery).await {
                        Ok(Received::Stored) => Answer::Stored,
                        Ok(Received::Duplicate) => Answer::Duplicate,
                        Err(err) => {
                            Answer::Failed(format!("receive failed: {}", error_chain(&err)))
                        }
                    }
                }
            },
            peak_rate: None,
            pace: None,
        }
    }

    /// Sends each of `requests` once and checks it was stored.
    fn store_once(&self, server: &Server, requests: &[Arc<Prepared>]) -> Result<(), BoxErr> {
        let client = http_client();
        self.client_rt.block_on(async {
            for prepared in requests {
                match send(&client, server.uri.clone(), prepared).await {
                    Answer::Stored | Answer::Duplicate => {}
                    Answer::Ok => {
                        return Err("storing a duplicate: no outcome in the answer".into());
                    }
                    Answer::Status(status, body) => {
                        return Err(format!("storing a duplicate: HTTP {status}: {body}").into());
                    }
                    Answer::Failed(message) => {
                        return Err(format!("storing a duplicate: {message}").into());
                    }
                }
            }
            Ok(())
        })
    }
}

/// Creates a fresh schema, connects the store to it with its default pool (and
/// `HOOKBOX_BENCH_PG_WRITERS` group-commit writers, when set); returns the schema,
/// the store and the server's facts for the header.
async fn pg_setup(url: &str, settings: &[&str]) -> Result<(PgSchema, PgStore, String), BoxErr> {
    let (schema, mut facts, _) = PgSchema::create(url, "hb_bench_http_", settings).await?;
    let mut options = PgOptions::new();
    if let Ok(writers) = std::env::var("HOOKBOX_BENCH_PG_WRITERS") {
        options = options.with_group_commit_writers(writers.parse()?);
    }
    let store = schema.store(options).await?;
    let pool = store.options().max_connections();
    let writers = store.options().group_commit_writers();
    facts.push(format!(
        "pool {pool} (the store's default), {writers} group-commit writers"
    ));
    Ok((schema, store, facts.join(", ")))
}

/// A database of the run's own on the MySQL server at `url`, its store (the store's
/// defaults, and `HOOKBOX_BENCH_MYSQL_WRITERS` group-commit writers, when set) and
/// the header's facts.
async fn mysql_setup(url: &str) -> Result<(MysqlDatabase, MysqlStore, String), BoxErr> {
    let (database, version) = MysqlDatabase::create(url, "hb_bench_http_").await?;
    let mut options = MysqlOptions::new();
    if let Ok(writers) = std::env::var("HOOKBOX_BENCH_MYSQL_WRITERS") {
        options = options.with_group_commit_writers(writers.parse()?);
    }
    let store = match database.store(options).await {
        Ok(store) => store,
        Err(err) => {
            let _ = database.drop_database().await;
            return Err(err);
        }
    };
    let pool = store.options().max_connections();
    let writers = store.options().group_commit_writers();
    Ok((
        database,
        store,
        format!("{version}, pool {pool} (the store's default), {writers} group-commit writers"),
    ))
}

fn runtime(name: &str) -> Result<Runtime, BoxErr> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name(name)
        .enable_all()
        .build()?)
}

/// Opens and migrates a SQLite store on `path` with `options`.
fn sqlite_store(ctx: &Ctx, path: &Path, options: SqliteOptions) -> Result<SqliteStore, BoxErr> {
    ctx.server_rt.block_on(async {
        let store = SqliteStore::open(path, options).await?;
        store.migrate().await?;
        Ok::<_, BoxErr>(store)
    })
}

/// The SQLite section: group commit against per-request commit on two files, then
/// every row on a store with the defaults (group commit, `synchronous = FULL`).
fn sqlite_section(ctx: &Ctx, dir: &Path) -> Result<(), BoxErr> {
    let group = sqlite_store(ctx, &dir.join("group.db"), SqliteOptions::default())?;
    let per_request = SqliteOptions::default().with_commit_mode(CommitMode::PerRequest);
    let per_request = sqlite_store(ctx, &dir.join("per-request.db"), per_request)?;
    ctx.commit_section(
        ("sqlite group", "sqlite per-request"),
        group,
        per_request,
        SqliteStore::group_commit_stats,
    )?;
    let store = sqlite_store(ctx, &dir.join("hookbox.db"), SqliteOptions::default())?;
    ctx.store_section("sqlite", store)?;
    let beside = sqlite_store(ctx, &dir.join("worker.db"), SqliteOptions::default())?;
    ctx.worker_section(
        "sqlite",
        beside,
        async |_conn: &mut hookbox_sqlite::Conn, _delivery: &Delivery| Ok(()),
    )
}

/// Which sections `HOOKBOX_BENCH_ONLY` (a comma-separated subset of `bare`,
/// `sqlite`, `postgres`, `mysql`, `worker`) asks for; all when unset.
fn only(section: &str) -> bool {
    std::env::var("HOOKBOX_BENCH_ONLY").map_or(true, |only| {
        only.split(',').any(|name| name.trim() == section)
    })
}

fn main() -> Result<(), BoxErr> {
    let started = Instant::now();
    let timing = Timing::from_env();
    let mut ctx = Ctx {
        server_rt: runtime("receiver")?,
        client_rt: runtime("client")?,
        timing,
        signer: StandardSigner::new(SECRET)?,
        provider: Standard::new(SECRET)?,
        run: unique_suffix(),
        batches: AtomicU64::new(0),
        redis: None,
        table: Table::default(),
    };
    let redis_url = env::var_or(REDIS_URL_VAR, DEFAULT_REDIS_URL);
    let redis_facts = match ctx.server_rt.block_on(Redis::connect(&redis_url)) {
        Ok(redis) => {
            let facts = format!(
                "{}; Cached with the default {} ms lookup timeout",
                redis.facts,
                hookbox_redis_cache::DEFAULT_TIMEOUT.as_millis()
            );
            ctx.redis = Some(redis);
            facts
        }
        Err(err) => format!(
            "{}: {}",
            without_credentials(&redis_url),
            skipped("Redis", &redis_url, REDIS_URL_VAR, &err)?
        ),
    };

    let dir = TempDir::new("hookbox-bench-http-")?;
    ctx.table.open_json()?;

    let pg_url = env::var_or(PG_URL_VAR, DEFAULT_PG_URL);
    let settings = ["server_version", "synchronous_commit"];
    let (pg, pg_facts) = match ctx.server_rt.block_on(pg_setup(&pg_url, &settings)) {
        Ok((schema, store, facts)) => (Some((schema, store)), facts),
        Err(err) => (None, skipped("Postgres", &pg_url, PG_URL_VAR, &err)?),
    };

    let mysql_url = env::var_or(MYSQL_URL_VAR, DEFAULT_MYSQL_URL);
    let (mysql, mysql_facts) = match ctx.server_rt.block_on(mysql_setup(&mysql_url)) {
        Ok((database, store, facts)) => (Some((database, store)), facts),
        Err(err) => (None, skipped("MySQL", &mysql_url, MYSQL_URL_VAR, &err)?),
    };

    println!(
        "hookbox HTTP edge benchmark: requests/s and ack latency over loopback, beside a bare axum handler"
    );
    println!("command:  {COMMAND}");
    println!(
        "machine:  nproc {} ({}), kernel {}",
        host::cpus(),
        host::cpu_model(),
        host::kernel(),
    );
    println!(
        "receiver: axum {PATH} in this process, its own tokio runtime ({WORKER_THREADS} worker \
         threads), 127.0.0.1, TCP_NODELAY; Webhook::inbox(Standard, store), no worker running \
         except in the \"+ worker\" rows"
    );
    println!(
        "client:   hyper-util legacy client, HTTP/1.1 keep-alive, on a second runtime \
         ({WORKER_THREADS} worker threads); K connections = K request loops"
    );
    println!(
        "requests: POST {} B JSON, Standard Webhooks v1 signed before timing; fresh = a new \
         webhook-id each, duplicate = {DUPLICATES} stored deliveries round robin",
        BODY.len()
    );
    println!(
        "timing:   per cell a {} ms warm-up, then {} ms measured (target pairs: {ROUNDS} \
         alternating rounds of {} ms per side); latency = send to whole answer read, p50/p99 \
         of every acknowledged request",
        ctx.timing.warm.as_millis(),
        ctx.timing.cell.as_millis(),
        (ctx.timing.cell / ROUNDS).as_millis(),
    );
    println!(
        "sqlite:   {}/hookbox.db, the store's defaults (WAL, synchronous = FULL, 4 connections)",
        dir.path().display()
    );
    println!("postgres: {}: {pg_facts}", without_credentials(&pg_url));
    println!(
        "mysql:    {}: {mysql_facts}",
        without_credentials(&mysql_url)
    );
    println!("redis:    {redis_facts}");
    println!();
    Table::print_header();

    let result = (|| -> Result<(), BoxErr> {
        // the ceiling, with the same signed requests the duplicate rows send
        if only("bare") {
            let limit = ctx.provider.options().body_limit();
            let server = serve(&ctx.server_rt, bare_router(limit))?;
            let requests = ctx.sign_fresh(DUPLICATES);
            for conns in CONNECTIONS {
                let mut bare = ctx.http_side(&server, conns, Feed::Cycle(requests.clone()));
                let tally = single(&mut bare, &ctx.timing)?;
                ctx.table
                    .row("bare", Via::Bare, Kind::Ceiling, conns, &tally);
            }
            drop(server);
        }

        if only("sqlite") {
            sqlite_section(&ctx, dir.path())?;
        }

        if only("postgres") {
            match &pg {
                Some((_, store)) => {
                    let per_request = ctx.server_rt.block_on(
                        pg.as_ref()
                            .map(|(schema, _)| schema)
                            .ok_or("no schema")?
                            .store(PgOptions::new().with_commit_mode(CommitMode::PerRequest)),
                    )?;
                    ctx.commit_section(
                        ("postgres group", "postgres per-request"),
                        store.clone(),
                        per_request,
                        PgStore::group_commit_stats,
                    )?;
                    ctx.store_section("postgres", store.clone())?;
                    ctx.worker_section(
                        "postgres",
                        store.clone(),
                        async |_conn: &mut AsyncPgConnection, _delivery: &Delivery| Ok(()),
                    )?;
                }
                None => println!("{:<26} (skipped: server unreachable)", "postgres"),
            }
        }
        if only("mysql") {
            match &mysql {
                Some((database, store)) => {
                    let per_request = ctx.server_rt.block_on(
                        database
                            .store(MysqlOptions::new().with_commit_mode(CommitMode::PerRequest)),
                    )?;
                    ctx.commit_section(
                        ("mysql group", "mysql per-request"),
                        store.clone(),
                        per_request,
                        MysqlStore::group_commit_stats,
                    )?;
                    ctx.store_section("mysql", store.clone())?;
                    ctx.worker_section(
                        "mysql",
                        store.clone(),
                        async |_conn: &mut AsyncMysqlConnection, _delivery: &Delivery| Ok(()),
                    )?;
                }
                None => println!("{:<26} (skipped: server unreachable)", "mysql"),
            }
        }
        if only("worker") {
            println!();
            drain::print_header();
            let drained =
                sqlite_store(&ctx, &dir.path().join("drain.db"), SqliteOptions::default())?;
            ctx.drain_section("sqlite", drained, drain::sqlite_ledger)?;
            match &pg {
                Some((schema, _)) => {
                    // a schema of its own, so the rows the other sections left pending
                    // are not counted
                    let (drain_schema, _, _) = ctx.server_rt.block_on(PgSchema::create(
                        &schema.url,
                        "hb_bench_drain_",
                        &[],
                    ))?;
                    let drained = ctx.server_rt.block_on(drain_schema.store(PgOptions::new()));
                    let result = drained
                        .and_then(|store| ctx.drain_section("postgres", store, drain::pg_ledger));
                    let _ = ctx.server_rt.block_on(drain_schema.drop_schema());
                    result?;
                }
                None => println!("{:<26} (skipped: server unreachable)", "postgres worker"),
            }
            match &mysql {
                Some((database, _)) => {
                    // a database of its own, as Postgres's schema above
                    let (drain_database, _) = ctx
                        .server_rt
                        .block_on(MysqlDatabase::create(&database.server, "hb_bench_drain_"))?;
                    let drained = ctx
                        .server_rt
                        .block_on(drain_database.store(MysqlOptions::new()));
                    let result = drained
                        .and_then(|store| ctx.drain_section("mysql", store, drain::mysql_ledger));
                    let _ = ctx.server_rt.block_on(drain_database.drop_database());
                    result?;
                }
                None => println!("{:<26} (skipped: server unreachable)", "mysql worker"),
            }
        }
        Ok(())
    })();

    if let Some(redis) = &ctx.redis {
        match ctx.server_rt.block_on(redis.delete_keys()) {
            Ok(n) => println!("redis: {n} keys under {} deleted", redis.prefix),
            Err(err) => println!(
                "redis: could not delete the keys under {}: {err}",
                redis.prefix
            ),
        }
    }
    if let Some((schema, store)) = pg {
        drop(store);
        match ctx.server_rt.block_on(schema.drop_schema()) {
            Ok(()) => println!("postgres: schema {} dropped", schema.name),
            Err(err) => println!("postgres: could not drop schema {}: {err}", schema.name),
        }
    }
    if let Some((database, store)) = mysql {
        drop(store);
        match ctx.server_rt.block_on(database.drop_database()) {
            Ok(()) => println!("mysql: database {} dropped", database.name),
            Err(err) => println!("mysql: could not drop database {}: {err}", database.name),
        }
    }
    if let Err(err) = result {
        // what was measured before the failure still says what went wrong
        ctx.table.print_anomalies();
        return Err(err);
    }

    for target in &TARGETS {
        println!();
        ctx.table.print_target(target);
    }
    println!();
    ctx.table.print_group_commit();
    println!();
    ctx.table.print_anomalies();
    let errors = ctx.table.errors();
    println!("total time: {:.0} s", started.elapsed().as_secs_f64());
    drop(dir);
    if errors > 0 {
        return Err(format!(
            "the run got {errors} errors: its figures are not clean (see the ANOMALY lines)"
        )
        .into());
    }
    Ok(())
}
