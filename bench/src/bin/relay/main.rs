//! Relay throughput: messages per second from a store's outbox to JetStream, to
//! RabbitMQ and to an HTTP endpoint, acknowledged (the publish ack, the publisher
//! confirm, the 200) and recorded as sent.
//!
//! For each store (a SQLite file at `synchronous = FULL` as the store ships, and
//! PostgreSQL at `HOOKBOX_PG_URL` in a fresh schema) and each sink it stages
//! `HOOKBOX_BENCH_MESSAGES` messages (default 20,000) of 1 KiB without an ordering
//! key, then times one `run_relay` from the first lease until the outbox has nothing
//! pending, and checks that the broker holds (or the endpoint received) each message.
//! Sinks: a JetStream stream of its own on `HOOKBOX_NATS_URL` (default
//! `nats://127.0.0.1:4222`), a durable queue of its own on `HOOKBOX_AMQP_URL`
//! (default `amqp://guest:guest@127.0.0.1:5672/%2f`), and an axum endpoint on
//! 127.0.0.1 answering 200. A service that is unreachable skips its rows, unless
//! `HOOKBOX_REQUIRE_SERVICES=1`.
//!
//! The relay runs with `HOOKBOX_BENCH_BATCH` messages per lease (default 1,000) and
//! `HOOKBOX_BENCH_CONCURRENCY` sends in flight (default 2,000). It prints a table,
//! then one JSON line per row.
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench-relay`
#![allow(clippy::print_stdout)] // printing the table is this binary's job

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hookbox_bench::env::{DEFAULT_PG_URL, PG_URL_VAR, TempDir, unique_suffix, var_or};
use hookbox_bench::services::{PgSchema, skipped};
use hookbox_bench::table::thousands;
use hookbox_bench::{BoxErr, host};
use hookbox_core::{
    BoxFuture, DedupeKey, IdempotencyStore, Message, OutboxAdmin, OutboxMessage, OutboxStore,
    RetryPolicy,
};
use hookbox_outbox::{RelayPolicy, Sink, SinkError, Sinks, connect_sink, run_relay};
use hookbox_sqlite::{SqliteOptions, SqliteStore};

const PAYLOAD_BYTES: usize = 1024;
/// Messages staged per transaction while filling the outbox.
const STAGE_CHUNK: usize = 500;

#[derive(Clone, Copy, PartialEq)]
enum SinkKind {
    JetStream,
    RabbitMq,
    Http,
}

impl SinkKind {
    fn name(self) -> &'static str {
        match self {
            Self::JetStream => "jetstream",
            Self::RabbitMq => "rabbitmq",
            Self::Http => "http",
        }
    }
}

struct Row {
    store: &'static str,
    sink: &'static str,
    messages: usize,
    seconds: f64,
    delivered: u64,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxErr> {
    let messages: usize = var_or("HOOKBOX_BENCH_MESSAGES", "20000").parse()?;
    let batch: u32 = var_or("HOOKBOX_BENCH_BATCH", "1000").parse()?;
    let concurrency: u32 = var_or("HOOKBOX_BENCH_CONCURRENCY", "2000").parse()?;
    let nats_url = var_or("HOOKBOX_NATS_URL", "nats://127.0.0.1:4222");
    let amqp_url = var_or("HOOKBOX_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f");
    let pg_url = var_or(PG_URL_VAR, DEFAULT_PG_URL);
    let policy = RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 100,
            base: Duration::from_millis(50),
            cap: Duration::from_secs(1),
        },
        lease: Duration::from_secs(60),
        batch,
        concurrency,
        idle: Duration::from_millis(5),
        ..RelayPolicy::default()
    };
    println!(
        "relay throughput: {} messages of {PAYLOAD_BYTES} B per row, batch {batch}, {concurrency} in flight; {} CPUs ({}), {}",
        thousands(messages as f64),
        host::cpus(),
        host::cpu_model(),
        host::kernel()
    );
    let http = HttpEndpoint::start().await?;
    let mut rows = Vec::new();
    // each broker's own rate on this machine: its client alone, no store and no
    // hookbox code, the same messages and as many in flight
    for kind in [SinkKind::JetStream, SinkKind::RabbitMq] {
        let (url, var) = match kind {
            SinkKind::JetStream => (nats_url.as_str(), "HOOKBOX_NATS_URL"),
            _ => (amqp_url.as_str(), "HOOKBOX_AMQP_URL"),
        };
        match client_alone(kind, url, messages, concurrency as usize).await {
            Ok(row) => rows.push(row),
            Err(err) => println!(
                "{} client alone: {}",
                kind.name(),
                skipped(kind.name(), url, var, &err)?
            ),
        }
    }
    for store_name in ["sqlite", "postgres"] {
        for kind in [SinkKind::JetStream, SinkKind::RabbitMq, SinkKind::Http] {
            let url = match kind {
                SinkKind::JetStream => nats_url.as_str(),
                SinkKind::RabbitMq => amqp_url.as_str(),
                SinkKind::Http => http.url.as_str(),
            };
            let result = match store_name {
                "sqlite" => {
                    let dir = TempDir::new("hookbox-relay-bench-")?;
                    let store =
                        SqliteStore::open(&dir.path().join("outbox.db"), SqliteOptions::default())
                            .await?;
                    store.migrate().await?;
                    measure(&store, "sqlite", kind, url, &http, messages, policy).await
                }
                _ => {
                    let (schema, _, _) =
                        match PgSchema::create(&pg_url, "hb_relay_bench_", &[]).await {
                            Ok(schema) => schema,
                            Err(err) => {
                                println!(
                                    "postgres: {}",
                                    skipped("Postgres", &pg_url, PG_URL_VAR, &err)?
                                );
                                break;
                            }
                        };
                    let store = schema
                        .store(hookbox_diesel_pg::PgOptions::new().with_max_connections(4))
                        .await?;
                    let result =
                        measure(&store, "postgres", kind, url, &http, messages, policy).await;
                    schema.drop_schema().await?;
                    result
                }
            };
            match result {
                Ok(row) => rows.push(row),
                Err(err) => {
                    let var = match kind {
                        SinkKind::JetStream => "HOOKBOX_NATS_URL",
                        SinkKind::RabbitMq => "HOOKBOX_AMQP_URL",
                        SinkKind::Http => "-",
                    };
                    println!(
                        "{store_name} → {}: {}",
                        kind.name(),
                        skipped(kind.name(), url, var, &err)?
                    );
                }
            }
        }
    }
    println!();
    println!(
        "{:<9} {:<24} {:>9} {:>9} {:>12} {:>10}",
        "store", "sink", "messages", "seconds", "messages/s", "delivered"
    );
    for row in &rows {
        println!(
            "{:<9} {:<24} {:>9} {:>9.2} {:>12} {:>10}",
            row.store,
            row.sink,
            thousands(row.messages as f64),
            row.seconds,
            thousands(row.messages as f64 / row.seconds),
            thousands(row.delivered as f64)
        );
    }
    for row in &rows {
        println!(
            "{}",
            serde_json::json!({
                "bench": "relay",
                "store": row.store,
                "sink": row.sink,
                "messages": row.messages,
                "payload_bytes": PAYLOAD_BYTES,
                "batch": batch,
                "concurrency": concurrency,
                "seconds": row.seconds,
                "messages_per_sec": row.messages as f64 / row.seconds,
                "delivered": row.delivered,
            })
        );
    }
    Ok(())
}

/// Stages `messages`, relays them to the sink, checks the sink got each.
async fn measure<S: IdempotencyStore + OutboxStore + OutboxAdmin>(
    store: &S,
    store_name: &'static str,
    kind: SinkKind,
    url: &str,
    http: &HttpEndpoint,
    messages: usize,
    policy: RelayPolicy,
) -> Result<Row, BoxErr> {
    // the destination of this row alone
    let suffix = unique_suffix().replace('_', "");
    let destination = match kind {
        SinkKind::JetStream => Destination::stream(url, &suffix).await?,
        SinkKind::RabbitMq => Destination::queue(url, &suffix).await?,
        SinkKind::Http => Destination::Http(http.received.load(Ordering::SeqCst)),
    };
    let sink_url = match &destination {
        Destination::Stream { subject, .. } => format!("{url}/{subject}"),
        Destination::Queue { queue, .. } => format!("{url}?queue={queue}"),
        Destination::Http(_) => url.to_string(),
    };
    let sink = connect_sink(&sink_url, &policy).await?;
    let sent = Arc::new(AtomicU64::new(0));
    let sinks = Sinks::new().with(
        "bench",
        Counting {
            inner: sink,
            sent: sent.clone(),
        },
    );
    stage(store, messages, &suffix).await?;

    let started = Instant::now();
    // stop once the sink took every message: the relay records its sends in flight
    // before it returns. (Asking the store for its counts instead would scan the
    // outbox every poll, beside the relay it measures.)
    let drained = async {
        while sent.load(Ordering::SeqCst) < messages as u64 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let report = run_relay(store, &sinks, policy, drained)
        .await
        .map_err(|err| -> BoxErr { Box::new(err) })?;
    let seconds = started.elapsed().as_secs_f64();
    let pending = store.stats().await?.pending;
    if report.sent != messages as u64 || report.dead != 0 || pending != 0 {
        return Err(format!(
            "the relay sent {} and buried {}; {pending} pending",
            report.sent, report.dead
        )
        .into());
    }
    let delivered = destination.count(http).await?;
    destination.remove().await;
    if delivered < messages as u64 {
        return Err(format!("the sink holds {delivered} of {messages}").into());
    }
    Ok(Row {
        store: store_name,
        sink: kind.name(),
        messages,
        seconds,
        delivered,
    })
}

/// Publishes `messages` 1 KiB messages with the broker's client alone, `in_flight`
/// awaiting their ack at once, as the sinks publish them (JetStream with a message
/// id; RabbitMQ persistent and mandatory on a confirm-mode channel): the ceiling the
/// relay's rows compare with.
async fn client_alone(
    kind: SinkKind,
    url: &str,
    messages: usize,
    in_flight: usize,
) -> Result<Row, BoxErr> {
    use std::future::IntoFuture as _;

    use futures_util::stream::{FuturesUnordered, StreamExt as _};

    let suffix = unique_suffix().replace('_', "");
    let destination = match kind {
        SinkKind::JetStream => Destination::stream(url, &suffix).await?,
        _ => Destination::queue(url, &suffix).await?,
    };
    let payload = hookbox_core::bytes::Bytes::from(vec![b'x'; PAYLOAD_BYTES]);
    let started = Instant::now();
    match &destination {
        Destination::Stream {
            context, subject, ..
        } => {
            let mut acks = FuturesUnordered::new();
            for n in 0..messages {
                if acks.len() >= in_flight
                    && let Some(ack) = acks.next().await
                {
                    let _: async_nats::jetstream::publish::PublishAck = ack?;
                }
                let publish = async_nats::jetstream::message::PublishMessage::build()
                    .payload(payload.clone())
                    .message_id(format!("{suffix}-{n}"));
                acks.push(
                    context
                        .send_publish(subject.clone(), publish)
                        .await?
                        .into_future(),
                );
            }
            while let Some(ack) = acks.next().await {
                ack?;
            }
        }
        Destination::Queue {
            connection, queue, ..
        } => {
            let channel = connection.create_channel().await?;
            channel
                .confirm_select(lapin::options::ConfirmSelectOptions::default())
                .await?;
            let mut confirms = FuturesUnordered::new();
            let confirmed = |confirm: lapin::Confirmation| {
                if confirm.is_ack() {
                    Ok(())
                } else {
                    Err(format!("the broker did not confirm: {confirm:?}"))
                }
            };
            for n in 0..messages {
                if confirms.len() >= in_flight
                    && let Some(confirm) = confirms.next().await
                {
                    confirmed(confirm?)?;
                }
                let properties = lapin::BasicProperties::default()
                    .with_message_id(format!("{suffix}-{n}").into())
                    .with_delivery_mode(2);
                confirms.push(
                    channel
                        .basic_publish(
                            "".into(),
                            queue.as_str().into(),
                            lapin::options::BasicPublishOptions {
                                mandatory: true,
                                ..Default::default()
                            },
                            &payload,
                            properties,
                        )
                        .await?,
                );
            }
            while let Some(confirm) = confirms.next().await {
                confirmed(confirm?)?;
            }
        }
        Destination::Http(_) => return Err("no client-alone row for HTTP".into()),
    }
    let seconds = started.elapsed().as_secs_f64();
    let delivered = destination.count(&HttpEndpoint::none()).await?;
    destination.remove().await;
    if delivered < messages as u64 {
        return Err(format!("the broker holds {delivered} of {messages}").into());
    }
    Ok(Row {
        store: "-",
        sink: match kind {
            SinkKind::JetStream => "jetstream (client alone)",
            _ => "rabbitmq (client alone)",
        },
        messages,
        seconds,
        delivered,
    })
}

/// A sink that counts the sends its inner sink took.
struct Counting {
    inner: Arc<dyn Sink>,
    sent: Arc<AtomicU64>,
}

impl Sink for Counting {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let result = self.inner.send(message).await;
            if result.is_ok() {
                self.sent.fetch_add(1, Ordering::SeqCst);
            }
            result
        })
    }
}

/// Stages `messages` 1 KiB messages for the `bench` sink, `STAGE_CHUNK` per
/// transaction.
async fn stage<S: IdempotencyStore + OutboxStore>(
    store: &S,
    messages: usize,
    run: &str,
) -> Result<(), BoxErr> {
    let payload = hookbox_core::bytes::Bytes::from(vec![b'x'; PAYLOAD_BYTES]);
    let mut staged = 0;
    let mut chunk = 0;
    while staged < messages {
        let count = STAGE_CHUNK.min(messages - staged);
        let key = DedupeKey::new("bench", "stripe", format!("evt_{run}_{chunk}"));
        store
            .process_once(&key, async |conn| {
                let mut outbox = store.outbox(&key, "bench");
                for _ in 0..count {
                    outbox
                        .stage(conn, Message::new("bench", payload.clone()))
                        .await?;
                }
                Ok(())
            })
            .await
            .map_err(|err| err.to_string())?;
        staged += count;
        chunk += 1;
    }
    Ok(())
}

/// Where one row's messages go.
enum Destination {
    Stream {
        context: async_nats::jetstream::Context,
        name: String,
        subject: String,
    },
    Queue {
        channel: lapin::Channel,
        queue: String,
        connection: lapin::Connection,
    },
    /// The endpoint's count before the row.
    Http(u64),
}

impl Destination {
    async fn stream(url: &str, suffix: &str) -> Result<Self, BoxErr> {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(3))
            .connect(url)
            .await?;
        let context = async_nats::jetstream::new(client);
        let name = format!("HB_RELAY_BENCH_{suffix}");
        let subject = format!("hb.relay.bench.{suffix}");
        context
            .create_stream(async_nats::jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                duplicate_window: Duration::from_secs(300),
                ..Default::default()
            })
            .await?;
        Ok(Self::Stream {
            context,
            name,
            subject,
        })
    }

    async fn queue(url: &str, suffix: &str) -> Result<Self, BoxErr> {
        let connection = tokio::time::timeout(
            Duration::from_secs(3),
            lapin::Connection::connect(url, lapin::ConnectionProperties::default()),
        )
        .await
        .map_err(|_| "no connection within 3 s")??;
        let channel = connection.create_channel().await?;
        let queue = format!("hb.relay.bench.{suffix}");
        channel
            .queue_declare(
                queue.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await?;
        Ok(Self::Queue {
            channel,
            queue,
            connection,
        })
    }

    async fn count(&self, http: &HttpEndpoint) -> Result<u64, BoxErr> {
        Ok(match self {
            Self::Stream { context, name, .. } => {
                let stream = context.get_stream_no_info(name).await?;
                stream.get_info().await?.state.messages
            }
            Self::Queue { channel, queue, .. } => {
                let declared = channel
                    .queue_declare(
                        queue.as_str().into(),
                        lapin::options::QueueDeclareOptions {
                            passive: true,
                            ..Default::default()
                        },
                        Default::default(),
                    )
                    .await?;
                u64::from(declared.message_count())
            }
            Self::Http(before) => http.received.load(Ordering::SeqCst) - before,
        })
    }

    async fn remove(&self) {
        match self {
            Self::Stream { context, name, .. } => {
                let _ = context.delete_stream(name).await;
            }
            Self::Queue { channel, queue, .. } => {
                let _ = channel
                    .queue_delete(queue.as_str().into(), Default::default())
                    .await;
            }
            Self::Http(_) => {}
        }
    }
}

/// An HTTP endpoint on 127.0.0.1 that answers 200 to every POST and counts them.
struct HttpEndpoint {
    url: String,
    received: Arc<AtomicU64>,
}

impl HttpEndpoint {
    /// No endpoint: for counting a broker's messages.
    fn none() -> Self {
        Self {
            url: String::new(),
            received: Arc::new(AtomicU64::new(0)),
        }
    }

    async fn start() -> Result<Self, BoxErr> {
        let received = Arc::new(AtomicU64::new(0));
        let counter = received.clone();
        let app = axum::Router::new().route(
            "/receipts",
            axum::routing::post(move |_body: axum::body::Bytes| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/receipts", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, received })
    }
}
