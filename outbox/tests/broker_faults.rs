//! The broker sinks under faults, against the real servers (`HOOKBOX_NATS_URL`,
//! `HOOKBOX_AMQP_URL`), each test with a stream or queue of its own:
//!
//! - a relay process SIGKILLed between the broker's ack and its record, again and
//!   again: JetStream holds each message exactly once; RabbitMQ delivers each
//!   `message_id` at least once and the consumer recipe (dedupe on `message_id`)
//!   applies each once;
//! - the broker unreachable for 10 s mid-run (a TCP proxy in front of it drops every
//!   connection and refuses new ones), then back: nothing lost, nothing dead, the
//!   relay resumes by itself.
//!
//! The killed relays are this test binary run again with `--exact
//! child_broker_relay_entry` and `HOOKBOX_BROKER_CHILD` set.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{TestQueue, TestStream, service_url, stage_events};
use hookbox_core::{BoxFuture, OutboxAdmin, OutboxMessage, RetryPolicy};
use hookbox_outbox::{RelayPolicy, Sink, SinkError, Sinks, connect_sink, run_relay};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use tokio::net::{TcpListener, TcpStream};

/// The SQLite file a child relays from.
const CHILD: &str = "HOOKBOX_BROKER_CHILD";
/// The sink URL a child publishes to.
const CHILD_SINK: &str = "HOOKBOX_BROKER_CHILD_SINK";
/// `hold`: the child stops after one acked publish and waits to be killed; `drain`:
/// it relays until nothing is pending.
const CHILD_MODE: &str = "HOOKBOX_BROKER_CHILD_MODE";
const ACKED: &str = "acked-and-holding";
const READY: &str = "broker-relay ready";

fn policy() -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 1_000,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(500),
        },
        lease: Duration::from_secs(2),
        batch: 8,
        concurrency: 16,
        idle: Duration::from_millis(20),
        ..RelayPolicy::default()
    }
}

/// Passes sends to `inner`; after the first one the broker acked, says so on stdout
/// and never returns, so the relay holds an acked, unrecorded message when killed.
struct HoldAfterAck {
    inner: Arc<dyn Sink>,
    held: AtomicBool,
}

impl Sink for HoldAfterAck {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            self.inner.send(message).await?;
            if !self.held.swap(true, Ordering::SeqCst) {
                println!("{ACKED} {}", message.id);
                std::future::pending::<()>().await;
            }
            Ok(())
        })
    }
}

/// The child relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_broker_relay_entry() {
    let Ok(path) = std::env::var(CHILD) else {
        return; // run as a test of its own: nothing to do
    };
    let url = std::env::var(CHILD_SINK).unwrap();
    let hold = std::env::var(CHILD_MODE).unwrap() == "hold";
    let store = SqliteStore::open(std::path::Path::new(&path), SqliteOptions::default())
        .await
        .unwrap();
    let sink = connect_sink(&url, &policy()).await.unwrap();
    let sinks = if hold {
        Sinks::new().with(
            "email",
            HoldAfterAck {
                inner: sink,
                held: AtomicBool::new(false),
            },
        )
    } else {
        Sinks::new().with("email", sink)
    };
    println!("{READY}");
    let drained = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if store.stats().await.unwrap().pending == 0 {
                return;
            }
        }
    };
    let report = run_relay(&store, &sinks, policy(), drained).await.unwrap();
    println!("relay report: {report:?}");
}

/// Starts a child relay; with `hold`, returns once it printed that it holds an acked
/// message.
fn spawn_relay(db: &str, sink: &str, hold: bool) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_broker_relay_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, db)
        .env(CHILD_SINK, sink)
        .env(CHILD_MODE, if hold { "hold" } else { "drain" })
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let wanted = if hold { ACKED } else { READY };
    loop {
        let line = lines
            .next()
            .expect("the relay exited before it was ready")
            .unwrap();
        if line.contains(wanted) {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

/// Stages 60 messages, kills five relays each holding an acked, unrecorded message,
/// then lets a sixth drain the outbox.
async fn kill_relays_between_ack_and_record(sink: &str) -> (SqliteStore, Vec<String>, TempDir) {
    let dir = TempDir::new();
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let ids = stage_events(&store, 30, 2, 10).await;
    let db = dir.db().display().to_string();
    for _ in 0..5 {
        let (db, sink) = (db.clone(), sink.to_string());
        let mut child = tokio::task::spawn_blocking(move || spawn_relay(&db, &sink, true))
            .await
            .unwrap();
        child.kill().unwrap(); // SIGKILL: no destructor, no record of the ack
        child.wait().unwrap();
    }
    assert!(
        store.stats().await.unwrap().pending > 0,
        "the held messages are not recorded"
    );
    let (db2, sink2) = (db.clone(), sink.to_string());
    tokio::task::spawn_blocking(move || {
        let mut child = spawn_relay(&db2, &sink2, false);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "the draining relay failed: {status}");
                return;
            }
            assert!(Instant::now() < deadline, "the outbox did not drain");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 60, 0));
    (store, ids.iter().map(ToString::to_string).collect(), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_holds_each_message_once_across_relays_killed_between_ack_and_record() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, Duration::from_secs(120), 0).await;
    let sink = format!("{url}/{}", stream.subject);
    let (_store, ids, _dir) = kill_relays_between_ack_and_record(&sink).await;
    assert_eq!(
        stream.count().await,
        60,
        "stream messages = messages staged"
    );
    let stored: HashSet<String> = stream.message_ids().await.into_iter().collect();
    assert_eq!(stored, ids.into_iter().collect::<HashSet<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_delivers_each_id_at_least_once_and_the_consumer_applies_each_once() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, false).await;
    let sink = format!("{url}?queue={}", queue.queue);
    let (_store, ids, _dir) = kill_relays_between_ack_and_record(&sink).await;
    let delivered = queue.drain().await;
    // the consumer recipe: apply a message only if its id was not applied before
    let mut applied = HashSet::new();
    let mut dropped = 0;
    for (id, _) in &delivered {
        if !applied.insert(id.clone()) {
            dropped += 1;
        }
    }
    assert_eq!(
        applied,
        ids.into_iter().collect::<HashSet<_>>(),
        "each id at least once"
    );
    assert!(
        dropped >= 5,
        "the five acked, unrecorded messages came twice: {dropped}"
    );
    println!(
        "{} deliveries, {} applied, {dropped} dropped by message_id",
        delivered.len(),
        applied.len()
    );
}

/// A TCP proxy in front of a broker: while down, it drops every connection and
/// closes new ones at once.
struct Proxy {
    port: u16,
    down: Arc<AtomicBool>,
    generation: Arc<tokio::sync::watch::Sender<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let down = Arc::new(AtomicBool::new(false));
        let (generation, _) = tokio::sync::watch::channel(0_u64);
        let generation = Arc::new(generation);
        let (down2, generation2) = (down.clone(), generation.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if down2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let mut cut = generation2.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            port,
            down,
            generation,
            task,
        }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `scheme://[credentials@]host:port…` with host:port replaced by the proxy's.
fn through(url: &str, port: u16) -> (String, String) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (credentials, rest) = match rest.rsplit_once('@') {
        Some((credentials, rest)) => (format!("{credentials}@"), rest),
        None => (String::new(), rest),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let upstream = rest[..end].to_string();
    (
        format!("{scheme}://{credentials}127.0.0.1:{port}{}", &rest[end..]),
        upstream,
    )
}

/// Relays 300 messages through a proxy that goes down for 10 s once about a third
/// are sent; returns the store once everything is sent.
async fn relay_through_an_outage(broker_url: &str, suffix: &str) -> SqliteStore {
    let (_, upstream) = through(broker_url, 0);
    let proxy = Proxy::start(upstream).await;
    let (proxied, _) = through(broker_url, proxy.port);
    let dir = TempDir::new();
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    stage_events(&store, 300, 1, 30).await;
    let sink = connect_sink(&format!("{proxied}{suffix}"), &policy())
        .await
        .unwrap();
    let sinks = Sinks::new().with("email", sink);
    let relay_policy = RelayPolicy {
        lease: Duration::from_secs(5),
        ..policy()
    };
    let outage = async {
        while store.stats().await.unwrap().sent < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        proxy.set_down(true);
        tokio::time::sleep(Duration::from_secs(10)).await;
        proxy.set_down(false);
        let deadline = Instant::now() + Duration::from_secs(90);
        while store.stats().await.unwrap().pending > 0 {
            assert!(Instant::now() < deadline, "the relay did not resume");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let report = run_relay(&store, &sinks, relay_policy, outage)
        .await
        .unwrap();
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 300, 0));
    assert!(
        report.retried > 0,
        "the outage failed some sends: {report:?}"
    );
    println!("through a 10 s outage: {report:?}");
    drop(dir);
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_down_for_ten_seconds_loses_nothing_and_the_relay_resumes() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, Duration::from_secs(120), 0).await;
    relay_through_an_outage(&url, &format!("/{}", stream.subject)).await;
    assert_eq!(stream.count().await, 300, "each message once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_down_for_ten_seconds_loses_nothing_and_the_relay_resumes() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, false).await;
    relay_through_an_outage(&url, &format!("?queue={}", queue.queue)).await;
    let ids: HashSet<String> = queue.drain().await.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 300, "every message_id delivered");
}
