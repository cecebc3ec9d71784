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
//!   store's defaults: `synchronous = FULL`, 4 connections) and Postgres
//!   (`HOOKBOX_PG_URL`, default `postgres://postgres@127.0.0.1:5432/test`, a fresh
//!   schema dropped at the end, the store's default pool of 8), each without and with
//!   the Redis cache (`HOOKBOX_REDIS_URL`, default `redis://127.0.0.1:6379`, a
//!   per-run key prefix deleted at the end);
//! - the store's own **`Inbox::receive`** rate at the same concurrency, without
//!   HTTP, on the same runtime: the denominator of the fresh-path target.
//!
//! Every request is signed (and, for the `Inbox::receive` rows, verified) before its
//! timing starts, so signing is not measured. No worker runs: the fresh rows only
//! fill the inbox. No tracing subscriber is installed, as in a service without one.
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench-http`
//! (`HOOKBOX_BENCH_CELL_MS` sets a cell's measured length, default 2000;
//! `HOOKBOX_BENCH_WARM_MS` its warm-up, default 300; `HOOKBOX_BENCH_DIR` the directory
//! for the SQLite file; `HOOKBOX_REQUIRE_SERVICES=1` fails instead of skipping when
//! Postgres or Redis is unreachable).
#![allow(clippy::print_stdout)] // printing the table is this binary's job

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::error::Error;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use axum::routing::post;
use axum::serve::ListenerExt as _;
use diesel_async::{
    AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_axum::Webhook;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Inbox, Provider as _, Received, Signer as _, VerifiedDelivery};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_redis_cache::redis::aio::ConnectionManager;
use hookbox_redis_cache::{CacheOptions, CacheStats, Cached, redis};
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use hookbox_standard::{Standard, StandardSigner};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::runtime::Runtime;

type BoxErr = Box<dyn Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Full<Bytes>>;

const COMMAND: &str = "cargo run --release -p hookbox-bench --bin hookbox-bench-http";
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const PG_URL_VAR: &str = "HOOKBOX_PG_URL";
const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
const REDIS_URL_VAR: &str = "HOOKBOX_REDIS_URL";

/// The route every server answers.
const PATH: &str = "/webhooks/standard";
/// The endpoint's Standard Webhooks secret (the spec's example), keyed once per run.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Concurrent connections (request loops) per cell.
const CONNECTIONS: [usize; 3] = [1, 16, 64];
/// How many stored deliveries the duplicate rows send again, round robin.
const DUPLICATES: usize = 16;
/// Requests signed for a fresh side's first phase (its warm-up), and the least for
/// any later phase, whose budget is sized from the fastest phase before.
const WARM_REQUESTS: usize = 8_000;
/// The most requests signed for one measured fresh phase.
const MAX_SIGNED: usize = 200_000;
/// Worker threads of the receiver's runtime (and of the client's).
const WORKER_THREADS: usize = 2;

/// What each request carries: a small Standard Webhooks event.
const BODY: &[u8] = br#"{"type":"invoice.paid","timestamp":"2026-11-29T12:00:00Z","data":{"id":"in_1NG8Du2eZvKYlo2C","customer":"cus_9s6XKzkNRiz8i3","amount_paid":2000,"currency":"usd"}}"#;

/// How long each phase of a cell runs.
struct Timing {
    warm: Duration,
    cell: Duration,
}

impl Timing {
    fn from_env() -> Self {
        let millis = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map_or(Duration::from_millis(default), Duration::from_millis)
        };
        Self {
            warm: millis("HOOKBOX_BENCH_WARM_MS", 300),
            cell: millis("HOOKBOX_BENCH_CELL_MS", 2000),
        }
    }
}

/// One request, signed ahead of time: its headers and raw body.
struct Prepared {
    headers: HeaderMap,
    body: Bytes,
}

/// What the loops draw from: a list taken once each (fresh) or round robin
/// (duplicates, the ceiling).
struct Batch<T> {
    items: Vec<Arc<T>>,
    next: AtomicUsize,
    cycle: bool,
}

impl<T> Batch<T> {
    fn once(items: Vec<Arc<T>>) -> Self {
        Self {
            items,
            next: AtomicUsize::new(0),
            cycle: false,
        }
    }

    fn cycle(items: Vec<Arc<T>>) -> Self {
        Self {
            items,
            next: AtomicUsize::new(0),
            cycle: true,
        }
    }

    /// The next item; `None` when a one-shot list is used up.
    fn take(&self) -> Option<Arc<T>> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let n = if self.cycle && !self.items.is_empty() {
            n % self.items.len()
        } else {
            n
        };
        self.items.get(n).map(Arc::clone)
    }
}

/// What one request got.
enum Answer {
    /// 2xx, `"outcome":"stored"` (or `Received::Stored`).
    Stored,
    /// 2xx, `"outcome":"duplicate"` (or `Received::Duplicate`).
    Duplicate,
    /// 2xx from the bare handler.
    Ok,
    /// A non-2xx status, with the start of its body.
    Status(u16, String),
    /// No answer: a connection or body error, or a store error without HTTP.
    Failed(String),
}

/// What a phase of a cell counted.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    stored: u64,
    duplicate: u64,
    ok: u64,
    statuses: BTreeMap<u16, u64>,
    failed: u64,
    first_error: Option<String>,
    ran_out: bool,
    elapsed: Duration,
    warm_errors: u64,
}

impl Tally {
    fn record(&mut self, answer: Answer, latency: Duration) {
        match answer {
            Answer::Stored => self.stored += 1,
            Answer::Duplicate => self.duplicate += 1,
            Answer::Ok => self.ok += 1,
            Answer::Status(status, body) => {
                *self.statuses.entry(status).or_default() += 1;
                self.first_error
                    .get_or_insert_with(|| format!("HTTP {status}: {body}"));
                return;
            }
            Answer::Failed(message) => {
                self.failed += 1;
                self.first_error.get_or_insert(message);
                return;
            }
        }
        self.latencies.push(latency);
    }

    /// Adds another loop's (or round's) counts; `elapsed` adds up across rounds.
    fn merge(&mut self, other: Self) {
        self.latencies.extend(other.latencies);
        self.stored += other.stored;
        self.duplicate += other.duplicate;
        self.ok += other.ok;
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.ran_out |= other.ran_out;
        self.elapsed += other.elapsed;
        self.warm_errors += other.warm_errors;
    }

    /// Folds a warm-up in: only its errors count.
    fn warmed(mut self, warm: Self) -> Self {
        self.warm_errors += warm.errors();
        if self.first_error.is_none() {
            self.first_error = warm.first_error;
        }
        self
    }

    /// Acknowledged requests (2xx, or stored without HTTP).
    fn acked(&self) -> u64 {
        self.stored + self.duplicate + self.ok
    }

    fn errors(&self) -> u64 {
        self.statuses.values().sum::<u64>() + self.failed
    }

    fn rate(&self) -> f64 {
        self.acked() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn percentile(&self, p: f64) -> Option<Duration> {
        // `latencies` is sorted by `sorted`
        let n = self.latencies.len();
        (n > 0).then(|| {
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            self.latencies[rank - 1]
        })
    }

    fn sorted(mut self) -> Self {
        self.latencies.sort_unstable();
        self
    }
}

/// Runs `conns` loops, each taking the next item and awaiting `op` on it, until
/// `duration` has passed or the batch is used up.
async fn phase<T, F, Fut>(conns: usize, batch: Arc<Batch<T>>, duration: Duration, op: F) -> Tally
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let start = Instant::now();
    let until = start + duration;
    let mut handles = Vec::with_capacity(conns);
    for _ in 0..conns {
        let (batch, op) = (Arc::clone(&batch), op.clone());
        handles.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            while Instant::now() < until {
                let Some(item) = batch.take() else {
                    tally.ran_out = true;
                    break;
                };
                let sent = Instant::now();
                let answer = op(item).await;
                tally.record(answer, sent.elapsed());
            }
            tally
        }));
    }
    let mut total = Tally::default();
    for handle in handles {
        match handle.await {
            Ok(tally) => total.merge(tally),
            Err(err) => total.record(
                Answer::Failed(format!("loop failed: {err}")),
                Duration::ZERO,
            ),
        }
    }
    // the loops' own elapsed times are zero: the phase's wall time is the divisor
    total.elapsed = start.elapsed();
    total
}

/// What a cell sends.
enum Feed<'a, T> {
    /// The same items, round robin.
    Cycle(Vec<Arc<T>>),
    /// New items only: signs `n` more each time it is called.
    Fresh(&'a dyn Fn(usize) -> Result<Vec<Arc<T>>, BoxErr>),
}

/// One side of a cell: loops on a runtime, what they send, and what they do with it.
struct Side<'a, T, F> {
    rt: &'a Runtime,
    conns: usize,
    feed: Feed<'a, T>,
    op: F,
    peak_rate: Option<f64>,
}

/// A side of a cell, whatever it sends.
trait Phase {
    /// Runs the loops for `duration`.
    fn run(&mut self, duration: Duration) -> Result<Tally, BoxErr>;
}

impl<T, F, Fut> Phase for Side<'_, T, F>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    fn run(&mut self, duration: Duration) -> Result<Tally, BoxErr> {
        let batch = match &self.feed {
            Feed::Cycle(items) => Batch::cycle(items.clone()),
            Feed::Fresh(sign) => {
                // enough for this phase at three times the fastest rate seen so far
                // (an fsync stall makes a round slow, the next one fast); a phase that
                // still uses them up stops early and says so
                let budget = self.peak_rate.map_or(WARM_REQUESTS, |rate| {
                    (rate * duration.as_secs_f64() * 3.0) as usize + 16 * self.conns
                });
                Batch::once(sign(budget.clamp(WARM_REQUESTS, MAX_SIGNED))?)
            }
        };
        let tally = self.rt.block_on(phase(
            self.conns,
            Arc::new(batch),
            duration,
            self.op.clone(),
        ));
        self.peak_rate = Some(self.peak_rate.unwrap_or(0.0).max(tally.rate()));
        Ok(tally)
    }
}

/// Measures one side alone: a warm-up, then one measured phase.
fn single(side: &mut dyn Phase, timing: &Timing) -> Result<Tally, BoxErr> {
    let warm = side.run(timing.warm)?;
    Ok(side.run(timing.cell)?.warmed(warm).sorted())
}

/// Rounds per side of a paired cell.
const ROUNDS: u32 = 4;

/// Measures two sides whose ratio is a target: both warm up, then they alternate in
/// rounds (A B B A A B B A) that add up to a cell's length each, so drift on a busy
/// machine hits both alike.
fn paired(a: &mut dyn Phase, b: &mut dyn Phase, timing: &Timing) -> Result<(Tally, Tally), BoxErr> {
    let (warm_a, warm_b) = (a.run(timing.warm)?, b.run(timing.warm)?);
    let round = timing.cell / ROUNDS;
    let (mut total_a, mut total_b) = (Tally::default(), Tally::default());
    for n in 0..ROUNDS {
        if n % 2 == 0 {
            total_a.merge(a.run(round)?);
            total_b.merge(b.run(round)?);
        } else {
            total_b.merge(b.run(round)?);
            total_a.merge(a.run(round)?);
        }
    }
    Ok((
        total_a.warmed(warm_a).sorted(),
        total_b.warmed(warm_b).sorted(),
    ))
}

/// Sends one prepared request and reads the whole answer.
async fn send(client: &HttpClient, uri: Uri, prepared: &Prepared) -> Answer {
    let mut request = Request::new(Full::new(prepared.body.clone()));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri;
    *request.headers_mut() = prepared.headers.clone();
    let response = match client.request(request).await {
        Ok(response) => response,
        Err(err) => return Answer::Failed(format!("request failed: {}", chain(&err))),
    };
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(err) => return Answer::Failed(format!("reading the answer failed: {err}")),
    };
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Answer::Status(status.as_u16(), text);
    }
    if contains(&body, br#""outcome":"stored""#) {
        Answer::Stored
    } else if contains(&body, br#""outcome":"duplicate""#) {
        Answer::Duplicate
    } else {
        Answer::Ok
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// An error with its sources, `a: b: c`.
fn chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A keep-alive HTTP/1 client; `TCP_NODELAY` as on the server, so small writes are
/// not held back by Nagle's algorithm.
fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A server on the receiver's runtime, stopped when dropped.
struct Server {
    uri: Uri,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on `127.0.0.1:0` on `rt`.
fn serve(rt: &Runtime, router: Router) -> Result<Server, BoxErr> {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr: SocketAddr = listener.local_addr()?;
    let listener = listener.tap_io(|tcp| {
        // a refused option only costs latency; the bench still runs
        let _ = tcp.set_nodelay(true);
    });
    let task = rt.spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            println!("server on {addr} stopped: {err}");
        }
    });
    Ok(Server {
        uri: format!("http://{addr}{PATH}").parse()?,
        task,
    })
}

/// The ceiling: reads the body with the edge's limit and answers 200.
fn bare_router(limit: usize) -> Router {
    Router::new()
        .route(PATH, post(|_body: Bytes| async { StatusCode::OK }))
        .layer(DefaultBodyLimit::max(limit))
}

/// Which path a row measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
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
enum Via {
    /// The bare handler over HTTP.
    Bare,
    /// The edge over HTTP.
    Edge { cache: bool },
    /// `Inbox::receive` called directly.
    Receive,
}

/// One printed row.
struct Row {
    store: &'static str,
    via: Via,
    kind: Kind,
    conns: usize,
    rate: f64,
}

/// The Redis server the cached rows use.
struct Redis {
    manager: ConnectionManager,
    prefix: String,
    facts: String,
}

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
    rows: RefCell<Vec<Row>>,
    anomalies: RefCell<Vec<String>>,
    errors: Cell<u64>,
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
                        Err(err) => Answer::Failed(format!("receive failed: {}", chain(&err))),
                    }
                }
            },
            peak_rate: None,
        }
    }

    /// Records, prints and checks one row.
    fn report(&self, store: &'static str, via: Via, kind: Kind, conns: usize, tally: &Tally) {
        let target = match via {
            Via::Bare if store == "bare" => "bare axum handler".to_string(),
            Via::Bare => "bare handler, paired".to_string(),
            Via::Edge { cache: false } => store.to_string(),
            Via::Edge { cache: true } => format!("{store} + redis"),
            Via::Receive => format!("{store} Inbox::receive"),
        };
        let ms = |d: Option<Duration>| {
            d.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
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
        self.rows.borrow_mut().push(Row {
            store,
            via,
            kind,
            conns,
            rate: tally.rate(),
        });
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

    /// Every row of one store: the edge without the cache beside `Inbox::receive`
    /// without HTTP, then with the Redis cache beside the bare handler.
    fn store_section<S>(&self, name: &'static str, store: S) -> Result<(), BoxErr>
    where
        S: Inbox + Clone + 'static,
    {
        let direct = Arc::new(store.clone());
        let sign = |n| Ok(self.sign_fresh(n));
        let sign_verified = |n| self.verified_fresh(n);
        let plain = Via::Edge { cache: false };
        let server = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, store.clone()).into_router(PATH),
        )?;
        for conns in CONNECTIONS {
            // the fresh-path target: the edge over HTTP against the store alone, on the
            // same runtime, in alternating rounds
            let mut receive = self.receive_side(&direct, conns, Feed::Fresh(&sign_verified));
            let mut http = self.http_side(&server, conns, Feed::Fresh(&sign));
            let (alone, edge) = paired(&mut receive, &mut http, &self.timing)?;
            self.report(name, Via::Receive, Kind::Fresh, conns, &alone);
            self.report(name, plain, Kind::Fresh, conns, &edge);
        }
        // the same few deliveries, stored once, then sent again
        let duplicates = self.sign_fresh(DUPLICATES);
        self.store_once(&server, &duplicates)?;
        for conns in CONNECTIONS {
            let mut http = self.http_side(&server, conns, Feed::Cycle(duplicates.clone()));
            let tally = single(&mut http, &self.timing)?;
            self.report(name, plain, Kind::Duplicate, conns, &tally);
        }
        drop(server);

        let Some(redis) = &self.redis else {
            println!(
                "{:<26} (skipped: Redis unreachable)",
                format!("{name} + redis")
            );
            return Ok(());
        };
        // a per-run prefix and a short TTL: the keys are deleted at the end, and
        // expire on their own if the run is killed
        let options = CacheOptions::default()
            .prefix(redis.prefix.clone())
            .ttl(Duration::from_secs(600));
        // the TTL ceiling is the store's own retention
        let cached = Arc::new(Cached::new(store, redis.manager.clone(), options)?);
        // the edge takes its store by value: an `Arc` of the cache is one, and the
        // bench keeps the other to read the cache's counters
        let server = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, Arc::clone(&cached)).into_router(PATH),
        )?;
        let via = Via::Edge { cache: true };
        let before = cached.cache_stats();
        for conns in CONNECTIONS {
            let mut http = self.http_side(&server, conns, Feed::Fresh(&sign));
            let tally = single(&mut http, &self.timing)?;
            self.report(name, via, Kind::Fresh, conns, &tally);
        }
        self.cache_line("fresh", &cached, &before);

        // stored once through the cache, which remembers them in Redis after the
        // commit (a spawned write, done well within the warm-up)
        let duplicates = self.sign_fresh(DUPLICATES);
        self.store_once(&server, &duplicates)?;
        let bare = serve(
            &self.server_rt,
            bare_router(self.provider.options().body_limit()),
        )?;
        let before = cached.cache_stats();
        for conns in CONNECTIONS {
            // the duplicate-path target: against the bare handler, in alternating rounds
            let mut edge = self.http_side(&server, conns, Feed::Cycle(duplicates.clone()));
            let mut ceiling = self.http_side(&bare, conns, Feed::Cycle(duplicates.clone()));
            let (edge, ceiling) = paired(&mut edge, &mut ceiling, &self.timing)?;
            self.report(name, via, Kind::Duplicate, conns, &edge);
            self.report(name, Via::Bare, Kind::Ceiling, conns, &ceiling);
        }
        self.cache_line("duplicate", &cached, &before);
        Ok(())
    }

    /// Prints what the cache did during the cells since `before`.
    fn cache_line<S>(&self, cells: &str, cached: &Cached<S>, before: &CacheStats) {
        let after = cached.cache_stats();
        println!(
            "{:<26} redis, {cells} cells: {} hits, {} misses, {} lookups failed or over the \
             {} ms timeout (the database answered); {} keys written, {} writes failed",
            "",
            after.hits - before.hits,
            after.misses - before.misses,
            after.lookup_failures - before.lookup_failures,
            cached.options().call_timeout().as_millis(),
            after.writes - before.writes,
            after.write_failures - before.write_failures,
        );
    }

    fn rate(&self, store: &str, via: Via, kind: Kind, conns: usize) -> Option<f64> {
        self.rows
            .borrow()
            .iter()
            .find(|r| r.store == store && r.via == via && r.kind == kind && r.conns == conns)
            .map(|r| r.rate)
    }
}

fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}_{nanos:09}", std::process::id())
}

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// `scheme://user:secret@host:port/db` as `host:port/db`.
fn without_credentials(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.rsplit_once('@').map_or(rest, |(_, host)| host)
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_string())
}

/// Connects to Redis (within 1 s) and reads its version.
async fn redis_setup(url: &str) -> Result<Redis, BoxErr> {
    let manager = hookbox_redis_cache::connect(url)?;
    let mut conn = manager.clone();
    let info = tokio::time::timeout(
        Duration::from_secs(1),
        redis::cmd("INFO")
            .arg("server")
            .query_async::<String>(&mut conn),
    )
    .await
    .map_err(|_| "no answer within 1 s")??;
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    Ok(Redis {
        manager,
        prefix: format!("hookbox-bench:{}:", unique_suffix()),
        facts: format!(
            "{} (redis {version}); Cached with the default {} ms lookup timeout",
            without_credentials(url),
            hookbox_redis_cache::DEFAULT_TIMEOUT.as_millis()
        ),
    })
}

/// Deletes every key under the run's prefix; returns how many.
async fn redis_cleanup(redis: &Redis) -> Result<u64, BoxErr> {
    let mut conn = redis.manager.clone();
    let pattern = format!("{}*", redis.prefix);
    let mut cursor = 0_u64;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            deleted += redis::cmd("DEL")
                .arg(&keys)
                .query_async::<u64>(&mut conn)
                .await?;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

/// Creates a fresh schema, connects the store to it with its default pool, migrates.
async fn pg_setup(url: &str, schema: &str) -> Result<(PgStore, String), BoxErr> {
    let mut conn = tokio::time::timeout(Duration::from_secs(5), AsyncPgConnection::establish(url))
        .await
        .map_err(|_| "no connection within 5 s")??;
    let mut facts = Vec::new();
    for setting in ["server_version", "synchronous_commit"] {
        let row = diesel::sql_query(format!("SELECT current_setting('{setting}') AS v"))
            .get_result::<TextRow>(&mut conn)
            .await?;
        facts.push(format!("{setting}={}", row.v));
    }
    conn.batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await?;
    let store = PgStore::connect(url, PgOptions::new().schema(schema)).await?;
    store.migrate().await?;
    let pool = store.options().get_max_connections();
    facts.push(format!("pool {pool} (the store's default)"));
    Ok((store, facts.join(", ")))
}

async fn pg_drop_schema(url: &str, schema: &str) -> Result<(), BoxErr> {
    let mut conn = AsyncPgConnection::establish(url).await?;
    conn.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await?;
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct TextRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    v: String,
}

fn runtime(name: &str) -> Result<Runtime, BoxErr> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name(name)
        .enable_all()
        .build()?)
}

/// The SQLite section: a store on a file in `dir` with the store's defaults.
fn sqlite_section(ctx: &Ctx, path: &Path) -> Result<(), BoxErr> {
    let store = ctx.server_rt.block_on(async {
        let store = SqliteStore::open(path, SqliteOptions::default()).await?;
        store.migrate().await?;
        Ok::<_, BoxErr>(store)
    })?;
    ctx.store_section("sqlite", store)
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
        rows: RefCell::new(Vec::new()),
        anomalies: RefCell::new(Vec::new()),
        errors: Cell::new(0),
    };
    let redis_url = env_or(REDIS_URL_VAR, DEFAULT_REDIS_URL);
    let (redis, redis_facts) = match ctx.server_rt.block_on(redis_setup(&redis_url)) {
        Ok(redis) => {
            let facts = redis.facts.clone();
            (Some(redis), facts)
        }
        Err(err) if services_required() => {
            return Err(format!("Redis at {redis_url} unreachable: {err}").into());
        }
        Err(err) => (
            None,
            format!(
                "{}: unreachable ({err}); the Redis rows are skipped, set {REDIS_URL_VAR}",
                without_credentials(&redis_url)
            ),
        ),
    };
    ctx.redis = redis;

    let base = std::env::var_os("HOOKBOX_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = TempDir(base.join(format!("hookbox-bench-http-{}", unique_suffix())));
    std::fs::create_dir_all(&dir.0)?;

    let pg_url = env_or(PG_URL_VAR, DEFAULT_PG_URL);
    let schema = format!("hb_bench_http_{}", unique_suffix());
    let (pg, pg_facts) = match ctx.server_rt.block_on(pg_setup(&pg_url, &schema)) {
        Ok((store, facts)) => (Some(store), facts),
        Err(err) => {
            // a half-made schema is dropped; an unreachable server has none
            let _ = ctx.server_rt.block_on(pg_drop_schema(&pg_url, &schema));
            if services_required() {
                return Err(format!("Postgres at {pg_url} unreachable: {err}").into());
            }
            (
                None,
                format!("unreachable ({err}); the Postgres rows are skipped, set {PG_URL_VAR}"),
            )
        }
    };

    println!(
        "hookbox HTTP edge benchmark: requests/s and ack latency over loopback, beside a bare axum handler"
    );
    println!("command:  {COMMAND}");
    println!(
        "machine:  nproc {} ({}), kernel {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model().unwrap_or_else(|| "unknown CPU".into()),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".into(), |v| v.trim().to_string()),
    );
    println!(
        "receiver: axum {PATH} in this process, its own tokio runtime ({WORKER_THREADS} worker \
         threads), 127.0.0.1, TCP_NODELAY; Webhook::inbox(Standard, store), no worker running"
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
        dir.0.display()
    );
    println!("postgres: {}: {pg_facts}", without_credentials(&pg_url));
    println!("redis:    {redis_facts}");
    println!();
    println!(
        "{:<26} {:<10} {:>5} {:>11} {:>9} {:>9} {:>10} {:>7}",
        "target", "path", "conns", "req/s", "p50 ms", "p99 ms", "acked", "errors"
    );

    let result = (|| -> Result<(), BoxErr> {
        // the ceiling, with the same signed requests the duplicate rows send
        let limit = ctx.provider.options().body_limit();
        let server = serve(&ctx.server_rt, bare_router(limit))?;
        let requests = ctx.sign_fresh(DUPLICATES);
        for conns in CONNECTIONS {
            let mut bare = ctx.http_side(&server, conns, Feed::Cycle(requests.clone()));
            let tally = single(&mut bare, &ctx.timing)?;
            ctx.report("bare", Via::Bare, Kind::Ceiling, conns, &tally);
        }
        drop(server);

        sqlite_section(&ctx, &dir.0.join("hookbox.db"))?;

        match &pg {
            Some(store) => ctx.store_section("postgres", store.clone())?,
            None => println!("{:<26} (skipped: server unreachable)", "postgres"),
        }
        Ok(())
    })();

    if let Some(redis) = &ctx.redis {
        match ctx.server_rt.block_on(redis_cleanup(redis)) {
            Ok(n) => println!("redis: {n} keys under {} deleted", redis.prefix),
            Err(err) => println!(
                "redis: could not delete the keys under {}: {err}",
                redis.prefix
            ),
        }
    }
    if let Some(store) = pg {
        drop(store);
        match ctx.server_rt.block_on(pg_drop_schema(&pg_url, &schema)) {
            Ok(()) => println!("postgres: schema {schema} dropped"),
            Err(err) => println!("postgres: could not drop schema {schema}: {err}"),
        }
    }
    if let Err(err) = result {
        // what was measured before the failure still says what went wrong
        print_anomalies(&ctx);
        return Err(err);
    }

    println!();
    println!("target: duplicates with the Redis cache >= 0.5x the bare handler (paired rounds)");
    println!(
        "{:<10} {:>5} {:>15} {:>11} {:>8}",
        "store", "conns", "dup+redis/s", "bare/s", "ratio"
    );
    for store in ["sqlite", "postgres"] {
        for conns in CONNECTIONS {
            let cached = ctx.rate(store, Via::Edge { cache: true }, Kind::Duplicate, conns);
            let bare = ctx.rate(store, Via::Bare, Kind::Ceiling, conns);
            print_ratio(store, conns, cached, bare, 0.5);
        }
    }
    println!();
    println!(
        "target: fresh deliveries over HTTP >= 0.9x the store's own Inbox::receive rate \
         (paired rounds)"
    );
    println!(
        "{:<10} {:>5} {:>15} {:>11} {:>8}",
        "store", "conns", "fresh/s", "receive/s", "ratio"
    );
    for store in ["sqlite", "postgres"] {
        for conns in CONNECTIONS {
            let fresh = ctx.rate(store, Via::Edge { cache: false }, Kind::Fresh, conns);
            let direct = ctx.rate(store, Via::Receive, Kind::Fresh, conns);
            print_ratio(store, conns, fresh, direct, 0.9);
        }
    }

    println!();
    print_anomalies(&ctx);
    let errors = ctx.errors.get();
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

fn print_anomalies(ctx: &Ctx) {
    for anomaly in ctx.anomalies.borrow().iter() {
        println!("ANOMALY: {anomaly}");
    }
}

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
