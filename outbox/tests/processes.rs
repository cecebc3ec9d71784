//! Relays as separate processes: one killed with SIGKILL between the sink's receipt
//! and the relay's record, and four relays on one Postgres outbox against a sink
//! that fails a fifth of its requests.
//!
//! The relays are this test binary run again with `--exact child_relay_entry` and
//! `HOOKBOX_OUTBOX_CHILD` set: no extra binary in the crate.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Behaviour, PgSchema, SinkServer, pg_url, stage_events};
use hookbox_core::{IdempotencyStore, OutboxAdmin, OutboxStore, RetryPolicy};
use hookbox_outbox::{HttpSink, RelayPolicy, Sinks, run_relay};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};

/// `sqlite:<path>` or `postgres:<schema>@<url>`: the store a child relays from.
const CHILD: &str = "HOOKBOX_OUTBOX_CHILD";
/// The sink URL a child posts to.
const CHILD_SINK: &str = "HOOKBOX_OUTBOX_CHILD_SINK";
/// The child's lease, in milliseconds.
const CHILD_LEASE_MS: &str = "HOOKBOX_OUTBOX_CHILD_LEASE_MS";
const READY: &str = "hookbox-relay ready";

/// The child: relay until the outbox has nothing pending, then exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_relay_entry() {
    let Ok(store) = std::env::var(CHILD) else {
        return; // run as a test of its own: nothing to do
    };
    let sink = std::env::var(CHILD_SINK).unwrap();
    let lease = std::env::var(CHILD_LEASE_MS).unwrap().parse().unwrap();
    let policy = RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 1_000,
            base: Duration::from_millis(5),
            cap: Duration::from_millis(50),
        },
        lease: Duration::from_millis(lease),
        batch: 8,
        idle: Duration::from_millis(20),
        ..RelayPolicy::default()
    };
    let sinks = Sinks::new().with("email", HttpSink::new(&sink).unwrap());
    if let Some(path) = store.strip_prefix("sqlite:") {
        let store = SqliteStore::open(std::path::Path::new(path), SqliteOptions::default())
            .await
            .unwrap();
        relay_until_drained(&store, &sinks, policy).await;
    } else {
        let (schema, url) = store
            .strip_prefix("postgres:")
            .and_then(|rest| rest.split_once('@'))
            .unwrap();
        let store = hookbox_diesel_pg::PgStore::connect(
            url,
            hookbox_diesel_pg::PgOptions::new()
                .with_schema(schema)
                .with_max_connections(2),
        )
        .await
        .unwrap();
        relay_until_drained(&store, &sinks, policy).await;
    }
}

async fn relay_until_drained<S: OutboxStore + OutboxAdmin>(
    store: &S,
    sinks: &Sinks,
    policy: RelayPolicy,
) {
    println!("{READY}");
    let drained = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Ok(stats) = store.stats().await
                && stats.pending == 0
            {
                return;
            }
        }
    };
    let report = run_relay(store, sinks, policy, drained).await.unwrap();
    println!("relay report: {report:?}");
}

/// Starts a relay process and waits until it says it is ready.
fn spawn_relay(store: &str, sink: &str, lease_ms: u64) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_relay_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, store)
        .env(CHILD_SINK, sink)
        .env(CHILD_LEASE_MS, lease_ms.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    loop {
        let line = lines
            .next()
            .expect("the relay exited before it was ready")
            .unwrap();
        if line.contains(READY) {
            break;
        }
    }
    // keep draining its output so it never blocks on a full pipe
    std::thread::spawn(move || for _ in lines {});
    child
}

fn kill(child: &mut Child) {
    // SIGKILL: no destructor, no graceful shutdown, no chance to record the send
    child.kill().unwrap();
    child.wait().unwrap();
}

fn wait_for_exit(children: &mut [Child], within: Duration) {
    let deadline = Instant::now() + within;
    for child in children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "a relay failed: {status}");
                break;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("a relay did not drain the outbox in {within:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Kills a relay while the sink holds request number 5 unanswered (the sink got it,
/// the relay has not recorded it), restarts the relay, and checks that the message
/// went again with the same key and that every key was applied exactly once.
async fn killed_between_send_and_mark<S: IdempotencyStore + OutboxStore + OutboxAdmin>(
    store: &S,
    location: &str,
) {
    let ids = stage_events(store, 12, 2, 6).await;
    let sink = SinkServer::start(Behaviour {
        hold_request: Some(5),
        ..Behaviour::default()
    })
    .await;
    let lease_ms = 1_500;
    let mut first = spawn_relay(location, &sink.url, lease_ms);
    tokio::time::timeout(Duration::from_secs(30), sink.state.held.notified())
        .await
        .expect("the sink got the fifth request");
    kill(&mut first);
    assert!(sink.state.holding.load(Ordering::SeqCst));
    let unrecorded = store.stats().await.unwrap().pending;
    assert!(unrecorded >= 1, "the held message is not marked sent");

    let mut second = spawn_relay(location, &sink.url, lease_ms);
    tokio::task::spawn_blocking(move || {
        wait_for_exit(std::slice::from_mut(&mut second), Duration::from_secs(60))
    })
    .await
    .unwrap();

    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 24, 0));
    assert_eq!(
        sink.state.applied_count(),
        24,
        "every message reached the sink"
    );
    let held = sink
        .state
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|seen| seen.status == 0)
        .cloned()
        .unwrap();
    assert!(ids.iter().any(|id| id.as_str() == held.key));
    let attempts: Vec<(u32, u16)> = sink
        .state
        .requests_for(&held.key)
        .iter()
        .map(|seen| (seen.attempt, seen.status))
        .collect();
    assert_eq!(
        attempts,
        vec![(1, 0), (2, 200)],
        "the unrecorded send went again, with the same Idempotency-Key, and was applied"
    );
    assert_eq!(sink.state.overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(sink.state.order_violations.load(Ordering::SeqCst), 0);
    println!(
        "requests {} for 24 messages, {} absorbed by their key",
        sink.state.request_count(),
        sink.state.absorbed.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_killed_between_send_and_mark_resends_with_the_same_key_sqlite() {
    let dir = TempDir::new();
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let location = format!("sqlite:{}", dir.db().display());
    killed_between_send_and_mark(&store, &location).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_killed_between_send_and_mark_resends_with_the_same_key_postgres() {
    let Some(url) = pg_url().await else { return };
    let schema = PgSchema::create(&url).await;
    let store = schema.store(4).await;
    let location = format!("postgres:{}@{}", schema.name, url);
    killed_between_send_and_mark(&store, &location).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_four_relay_processes_on_postgres_deliver_everything_in_order_never_concurrently() {
    let Some(url) = pg_url().await else { return };
    let schema = PgSchema::create(&url).await;
    let store = schema.store(4).await;
    // 1,000 deliveries with two messages each, over 100 ordering keys
    let ids = stage_events(&store, 1_000, 2, 100).await;
    assert_eq!(ids.len(), 2_000);
    let sink = SinkServer::start(Behaviour {
        fail_share: 0.2,
        ..Behaviour::default()
    })
    .await;
    let location = format!("postgres:{}@{}", schema.name, url);
    let mut relays: Vec<Child> = (0..4)
        .map(|_| spawn_relay(&location, &sink.url, 10_000))
        .collect();
    let started = Instant::now();
    tokio::task::spawn_blocking(move || wait_for_exit(&mut relays, Duration::from_secs(240)))
        .await
        .unwrap();

    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 2_000, 0));
    assert_eq!(sink.state.applied_count(), 2_000, "every message delivered");
    assert_eq!(
        sink.state.overlaps.load(Ordering::SeqCst),
        0,
        "no message was in flight from two relays at once"
    );
    assert_eq!(
        sink.state.order_violations.load(Ordering::SeqCst),
        0,
        "per-key order held"
    );
    let failed = sink
        .state
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|seen| seen.status == 503)
        .count();
    assert!(failed > 200, "the sink failed about a fifth: {failed}");
    println!(
        "4 relays: 2,000 messages in {:.1} s, {} requests, {failed} answered 503, {} absorbed",
        started.elapsed().as_secs_f64(),
        sink.state.request_count(),
        sink.state.absorbed.load(Ordering::SeqCst)
    );
}
