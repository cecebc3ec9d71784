//! Test support: a counting HTTP sink served on a real socket, stores on a real
//! SQLite file or a fresh Postgres schema, and messages staged the way handlers do.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use hookbox_core::http::{HeaderName, HeaderValue};
use hookbox_core::{DedupeKey, IdempotencyStore, Message, MessageId, OutboxStore};
use hookbox_diesel_pg::{PgOptions, PgStore};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// The header test messages carry their ordering key in, so the sink can check order.
pub const ORDER: &str = "x-test-order";
/// The header with the message's index within its ordering key, from 0.
pub const INDEX: &str = "x-test-index";

/// One request the sink got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub key: String,
    pub attempt: u32,
    pub status: u16,
}

/// What the sink does with a request.
#[derive(Debug, Default)]
pub struct Behaviour {
    /// Answer this status to every request instead of 200.
    pub status: Option<u16>,
    /// Answer 503 to this share of requests, at random.
    pub fail_share: f64,
    /// Never answer the request with this number (1-based, counting all requests),
    /// and notify [`SinkState::held`] when it arrives.
    pub hold_request: Option<u64>,
}

/// Everything the sink saw, shared with the test.
#[derive(Debug, Default)]
pub struct SinkState {
    pub behaviour: Mutex<Behaviour>,
    pub seen: Mutex<Vec<Seen>>,
    /// Keys answered 2xx: a downstream that honours the key applies each once.
    pub applied: Mutex<HashSet<String>>,
    /// Requests whose key was already applied (absorbed by the key).
    pub absorbed: AtomicU64,
    /// Requests that arrived while another request with the same key was in flight.
    pub overlaps: AtomicU64,
    /// Requests whose index skipped ahead of the last one applied for its order key.
    pub order_violations: AtomicU64,
    in_flight: Mutex<HashSet<String>>,
    last_applied: Mutex<HashMap<String, i64>>,
    requests: AtomicU64,
    pub held: Notify,
    pub holding: AtomicBool,
}

impl SinkState {
    pub fn applied_count(&self) -> usize {
        self.applied.lock().unwrap().len()
    }

    pub fn requests_for(&self, key: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|seen| seen.key == key)
            .cloned()
            .collect()
    }

    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    async fn answer(&self, request: Request<Incoming>) -> u16 {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        let key = header("idempotency-key").unwrap_or_default();
        let attempt = header("hookbox-attempt")
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        let order = header(ORDER);
        let index: Option<i64> = header(INDEX).and_then(|i| i.parse().ok());
        let number = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if !self.in_flight.lock().unwrap().insert(key.clone()) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        // out of flight when answered or when the connection drops (a killed relay)
        let in_flight = InFlight {
            keys: &self.in_flight,
            key: key.clone(),
        };
        let _body = request.into_body().collect().await;
        let (status, fail_share, hold) = {
            let behaviour = self.behaviour.lock().unwrap();
            (
                behaviour.status,
                behaviour.fail_share,
                behaviour.hold_request,
            )
        };
        if hold == Some(number) {
            // recorded as unanswered (status 0) and out of flight: the test kills
            // the relay that sent it
            drop(in_flight);
            self.seen.lock().unwrap().push(Seen {
                key: key.clone(),
                attempt,
                status: 0,
            });
            self.holding.store(true, Ordering::SeqCst);
            self.held.notify_one();
            // the relay is killed while it waits for this answer
            std::future::pending::<()>().await;
            return 0;
        }
        // a moment in flight, so that a second sender of the key would overlap
        tokio::time::sleep(Duration::from_millis(1)).await;
        let status = status.unwrap_or(if fastrand::f64() < fail_share {
            503
        } else {
            200
        });
        if (200..300).contains(&status) {
            if let (Some(order), Some(index)) = (order, index) {
                let mut last = self.last_applied.lock().unwrap();
                let previous = last.get(&order).copied().unwrap_or(-1);
                if index > previous + 1 {
                    self.order_violations.fetch_add(1, Ordering::SeqCst);
                }
                last.insert(order, previous.max(index));
            }
            if !self.applied.lock().unwrap().insert(key.clone()) {
                self.absorbed.fetch_add(1, Ordering::SeqCst);
            }
        }
        drop(in_flight);
        self.seen.lock().unwrap().push(Seen {
            key,
            attempt,
            status,
        });
        status
    }
}

/// Takes a key out of the in-flight set when dropped.
struct InFlight<'a> {
    keys: &'a Mutex<HashSet<String>>,
    key: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(&self.key);
        }
    }
}

/// A counting HTTP sink on 127.0.0.1.
pub struct SinkServer {
    pub url: String,
    pub state: Arc<SinkState>,
    task: tokio::task::JoinHandle<()>,
}

impl SinkServer {
    pub async fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}/receipts", listener.local_addr().unwrap());
        let state = Arc::new(SinkState {
            behaviour: Mutex::new(behaviour),
            ..SinkState::default()
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = state.clone();
                        async move {
                            let status = state.answer(request).await;
                            let mut response = Response::new(String::new());
                            *response.status_mut() = StatusCode::from_u16(status).unwrap();
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, state, task }
    }
}

impl Drop for SinkServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The delivery key of event `n`.
pub fn event_key(n: usize) -> DedupeKey {
    DedupeKey::new("outbox-tests", "stripe", format!("evt_{n}"))
}

/// Stages `per_event` messages for each of `events` deliveries, each in its own
/// `process_once` (as a handler would), all in order key `cus_{n % keys}`; the
/// messages carry their order key and index for the sink to check. Returns the ids.
pub async fn stage_events<S>(
    store: &S,
    events: usize,
    per_event: usize,
    keys: usize,
) -> Vec<MessageId>
where
    S: IdempotencyStore + OutboxStore,
{
    let mut ids = Vec::new();
    let mut next_index: HashMap<String, i64> = HashMap::new();
    for n in 0..events {
        let key = event_key(n);
        let order = format!("cus_{}", n % keys.max(1));
        let first = *next_index.entry(order.clone()).or_default();
        let mut staged = Vec::new();
        store
            .process_once(&key, async |conn| {
                let mut outbox = store.outbox(&key, "receipts");
                for m in 0..per_event {
                    let index = first + i64::try_from(m).unwrap();
                    let message = Message::new("email", format!("receipt {n}.{m}"))
                        .with_ordering_key(order.clone())
                        .with_header(
                            HeaderName::from_static(ORDER),
                            HeaderValue::from_str(&order).unwrap(),
                        )
                        .with_header(HeaderName::from_static(INDEX), HeaderValue::from(index));
                    staged.push(outbox.stage(conn, message).await?);
                }
                Ok(())
            })
            .await
            .unwrap();
        next_index.insert(order, first + i64::try_from(per_event).unwrap());
        ids.extend(staged);
    }
    ids
}

// not every test binary talks to Postgres
#[allow(unused_imports)]
pub use hookbox_diesel_pg::testing::pg_url;

/// A fresh schema, migrated, dropped with the value.
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

impl PgSchema {
    pub async fn create(url: &str) -> Self {
        let name = format!("hb_outbox_{:016x}", fastrand::u64(..));
        let mut conn = AsyncPgConnection::establish(url).await.unwrap();
        conn.batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .await
            .unwrap();
        let schema = Self {
            url: url.to_string(),
            name,
        };
        schema.store(4).await.migrate().await.unwrap();
        schema
    }

    pub async fn store(&self, connections: usize) -> PgStore {
        PgStore::connect(
            &self.url,
            PgOptions::new()
                .with_schema(self.name.clone())
                .with_max_connections(connections),
        )
        .await
        .unwrap()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(mut conn) = AsyncPgConnection::establish(&url).await {
                    let _ = conn
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Returns the URL of the service in `var` when it answers on TCP, or `None` when
/// the test must skip; with `HOOKBOX_REQUIRE_SERVICES=1` a missing server panics.
pub fn service_url(var: &str) -> Option<String> {
    let required = std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    let Some(url) = std::env::var(var).ok().filter(|u| !u.is_empty()) else {
        assert!(!required, "{var} not set and HOOKBOX_REQUIRE_SERVICES=1");
        println!("skipped: {var} not set");
        return None;
    };
    // host:port between "://" (after any credentials) and the next '/'
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(host)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
        });
    if !reachable {
        assert!(
            !required,
            "{var} unreachable and HOOKBOX_REQUIRE_SERVICES=1"
        );
        println!("skipped: {var} unreachable");
        return None;
    }
    Some(url)
}

/// A random name for a test's stream, subject or queue.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// A JetStream stream made for one test, deleted with the value.
pub struct TestStream {
    pub url: String,
    pub name: String,
    pub subject: String,
    pub context: async_nats::jetstream::Context,
}

impl TestStream {
    /// A stream on `<subject>` and `<subject>.>` with `window` as its duplicate
    /// window and `max_message_size` bytes per message (0: the server's limit).
    pub async fn create(url: &str, window: Duration, max_message_size: i32) -> Self {
        let name = unique("HB").to_uppercase();
        let subject = unique("hb").replace('_', ".");
        let client = async_nats::connect(url).await.unwrap();
        let context = async_nats::jetstream::new(client);
        context
            .create_stream(async_nats::jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone(), format!("{subject}.>")],
                duplicate_window: window,
                max_message_size,
                ..Default::default()
            })
            .await
            .unwrap();
        Self {
            url: url.to_string(),
            name,
            subject,
            context,
        }
    }

    /// Messages the stream holds.
    pub async fn count(&self) -> u64 {
        let stream = self.context.get_stream_no_info(&self.name).await.unwrap();
        stream.get_info().await.unwrap().state.messages
    }

    /// The `Nats-Msg-Id` of every message the stream holds, in stream order.
    pub async fn message_ids(&self) -> Vec<String> {
        let stream = self.context.get_stream_no_info(&self.name).await.unwrap();
        let count = stream.get_info().await.unwrap().state.last_sequence;
        let mut ids = Vec::new();
        for seq in 1..=count {
            if let Ok(message) = stream.get_raw_message(seq).await {
                ids.push(
                    message
                        .headers
                        .get("Nats-Msg-Id")
                        .map(|v| v.as_str().to_string())
                        .unwrap_or_default(),
                );
            }
        }
        ids
    }
}

impl Drop for TestStream {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(client) = async_nats::connect(&url).await {
                    let _ = async_nats::jetstream::new(client)
                        .delete_stream(&name)
                        .await;
                }
            });
        })
        .join();
    }
}

/// A RabbitMQ queue made for one test (and optionally an exchange bound to it),
/// deleted with the value.
pub struct TestQueue {
    pub url: String,
    pub queue: String,
    pub exchange: Option<String>,
    pub channel: lapin::Channel,
    _connection: lapin::Connection,
}

impl TestQueue {
    /// A durable queue of its own; with `exchange`, a direct exchange of its own
    /// bound to it with the routing key `bound`.
    pub async fn create(url: &str, exchange: bool) -> Self {
        use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
        use lapin::types::FieldTable;
        let connection = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let channel = connection.create_channel().await.unwrap();
        let queue = unique("hb.q");
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        let exchange = if exchange {
            let name = unique("hb.x");
            channel
                .exchange_declare(
                    name.as_str().into(),
                    lapin::ExchangeKind::Direct,
                    ExchangeDeclareOptions::default(),
                    FieldTable::default(),
                )
                .await
                .unwrap();
            channel
                .queue_bind(
                    queue.as_str().into(),
                    name.as_str().into(),
                    "bound".into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .unwrap();
            Some(name)
        } else {
            None
        };
        Self {
            url: url.to_string(),
            queue,
            exchange,
            channel,
            _connection: connection,
        }
    }

    /// Takes every message now in the queue: `(message_id, payload)` in queue order.
    pub async fn drain(&self) -> Vec<(String, Vec<u8>)> {
        use lapin::options::BasicGetOptions;
        let mut messages = Vec::new();
        while let Some(got) = self
            .channel
            .basic_get(self.queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let id = got
                .delivery
                .properties
                .message_id()
                .as_ref()
                .map(|id| id.as_str().to_string())
                .unwrap_or_default();
            messages.push((id, got.delivery.data.clone()));
        }
        messages
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        let (url, queue, exchange) = (self.url.clone(), self.queue.clone(), self.exchange.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let Ok(connection) =
                    lapin::Connection::connect(&url, lapin::ConnectionProperties::default()).await
                else {
                    return;
                };
                if let Ok(channel) = connection.create_channel().await {
                    let _ = channel
                        .queue_delete(queue.as_str().into(), Default::default())
                        .await;
                    if let Some(exchange) = exchange {
                        let _ = channel
                            .exchange_delete(exchange.as_str().into(), Default::default())
                            .await;
                    }
                }
                let _ = connection.close(200, "done".into()).await;
            });
        })
        .join();
    }
}
