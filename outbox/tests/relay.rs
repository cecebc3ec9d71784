//! The relay against a real SQLite file and a real HTTP sink on a socket: ids as
//! idempotency keys, retries, dead letters, unknown sinks, the send timeout.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Behaviour, SinkServer, stage_events};
use hookbox_core::{BoxFuture, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStore, RetryPolicy};
use hookbox_outbox::{HttpSink, RelayPolicy, Sink, SinkError, Sinks, relay_once, run_relay};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};

async fn sqlite(dir: &TempDir) -> SqliteStore {
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

fn quick(max_attempts: u32) -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        idle: Duration::from_millis(10),
        ..RelayPolicy::default()
    }
}

/// Relays until nothing is pending; returns the rounds it took.
async fn drain<S: OutboxStore + OutboxAdmin>(
    store: &S,
    sinks: &Sinks,
    policy: &RelayPolicy,
) -> u32 {
    for rounds in 0..1_000 {
        relay_once(store, sinks, policy).await.unwrap();
        if store.stats().await.unwrap().pending == 0 {
            return rounds + 1;
        }
    }
    panic!("the outbox never drained");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_relay_sends_each_message_with_its_id_as_the_idempotency_key() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let sink = SinkServer::start(Behaviour::default()).await;
    let ids = stage_events(&store, 10, 2, 3).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    drain(&store, &sinks, &quick(5)).await;

    assert_eq!(sink.state.applied_count(), 20);
    for id in &ids {
        let seen = sink.state.requests_for(id.as_str());
        assert_eq!(seen.len(), 1, "one request per message");
        assert_eq!((seen[0].attempt, seen[0].status), (1, 200));
    }
    assert_eq!(
        sink.state
            .order_violations
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 20, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_failing_sink_is_retried_then_dead_lettered_at_the_limit() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let sink = SinkServer::start(Behaviour {
        status: Some(503),
        ..Behaviour::default()
    })
    .await;
    let ids = stage_events(&store, 1, 1, 1).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    drain(&store, &sinks, &quick(3)).await;

    let attempts: Vec<u32> = sink
        .state
        .requests_for(ids[0].as_str())
        .iter()
        .map(|seen| seen.attempt)
        .collect();
    assert_eq!(
        attempts,
        vec![1, 2, 3],
        "three attempts, numbered, then dead"
    );
    let dead = store.list(OutboxFilter::dead(), 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].last_error.as_deref().unwrap().contains("503"),
        "{:?}",
        dead[0].last_error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_permanent_4xx_dead_letters_at_once_and_retry_sends_it_again() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let sink = SinkServer::start(Behaviour {
        status: Some(422),
        ..Behaviour::default()
    })
    .await;
    let ids = stage_events(&store, 1, 1, 1).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    let round = relay_once(&store, &sinks, &quick(5)).await.unwrap();
    assert_eq!((round.sent, round.dead), (0, 1));
    assert_eq!(sink.state.request_count(), 1, "a 422 is not retried");

    // the operator fixes the downstream and asks for a resend
    sink.state.behaviour.lock().unwrap().status = None;
    assert!(store.replay(&ids[0]).await.unwrap());
    let round = relay_once(&store, &sinks, &quick(5)).await.unwrap();
    assert_eq!(round.sent, 1);
    assert_eq!(sink.state.applied_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_message_for_a_missing_sink_waits_instead_of_vanishing() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 1, 1, 1).await;
    // more rounds than the attempt limit: a message without a sink never dies and
    // is never counted as sent, and keeps no attempt
    for _ in 0..3 {
        let round = relay_once(&store, &Sinks::new(), &quick(2)).await.unwrap();
        assert_eq!((round.unsent, round.sent, round.dead), (1, 0, 0));
        // due again after UNKNOWN_SINK_RECHECK; the test makes it due now
        make_due(&store).await;
    }
    let pending = store.list(OutboxFilter::pending(), 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 0, "waiting for a sink uses no attempt");
    assert!(
        pending[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("no sink named `email`")
    );
    // once the sink is configured it goes, as a first attempt
    let sink = SinkServer::start(Behaviour::default()).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    let round = relay_once(&store, &sinks, &quick(2)).await.unwrap();
    assert_eq!(round.sent, 1);
    assert_eq!(sink.state.seen.lock().unwrap()[0].attempt, 1);
}

/// Makes every pending message due now (the test's stand-in for waiting out
/// `UNKNOWN_SINK_RECHECK`).
async fn make_due(store: &SqliteStore) {
    use diesel_async::SimpleAsyncConnection as _;
    use hookbox_core::IdempotencyStore as _;
    let key = hookbox_core::DedupeKey::new("tests", "stripe", format!("due_{}", fastrand::u64(..)));
    store
        .process_once(&key, async |conn| {
            conn.batch_execute(
                "UPDATE hookbox_outbox SET next_attempt_at = 0 WHERE sent_at IS NULL",
            )
            .await?;
            Ok(())
        })
        .await
        .unwrap();
}

/// A sink that never answers.
struct Silent;

impl Sink for Silent {
    fn send<'a>(&'a self, _: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_send_is_cut_before_its_lease_can_expire() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 1, 1, 1).await;
    let policy = RelayPolicy {
        lease: Duration::from_millis(500),
        send_timeout: Duration::from_secs(30),
        ..quick(5)
    };
    assert_eq!(policy.effective_send_timeout(), Duration::from_millis(400));
    let started = std::time::Instant::now();
    let round = relay_once(&store, &Sinks::new().with("email", Silent), &policy)
        .await
        .unwrap();
    assert_eq!(
        round.retried, 1,
        "recorded by the holder, not lost to a lease"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    let row = &store.list(OutboxFilter::pending(), 1).await.unwrap()[0];
    assert!(
        row.last_error
            .as_deref()
            .unwrap()
            .contains("no answer within 400 ms")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_run_relay_drains_and_stops_on_shutdown() {
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let sink = SinkServer::start(Behaviour {
        fail_share: 0.3,
        ..Behaviour::default()
    })
    .await;
    stage_events(&store, 40, 1, 4).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    let watcher = async {
        while store.stats().await.unwrap().pending > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        run_relay(&store, &sinks, quick(50), watcher),
    )
    .await
    .expect("the relay drains the outbox")
    .unwrap();
    assert_eq!(report.sent, 40);
    assert_eq!(sink.state.applied_count(), 40);
    assert_eq!(
        sink.state
            .order_violations
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "per-key order holds through 30% failures"
    );
}

/// A sink that holds the message `receipt 0.0` until the test lets it go and
/// accepts the others at once.
struct OneSlow {
    gate: tokio::sync::Semaphore,
    slow_done: std::sync::atomic::AtomicBool,
    sent: std::sync::atomic::AtomicU64,
}

impl Sink for OneSlow {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if &message.payload[..] == b"receipt 0.0" {
                let _permit = self.gate.acquire().await.unwrap();
                self.slow_done
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            } else {
                self.sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_run_relay_keeps_sending_while_one_send_is_slow() {
    use std::sync::atomic::Ordering;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    // 60 messages on 60 keys; the first one's send does not finish until the end
    stage_events(&store, 60, 1, 60).await;
    let sink = std::sync::Arc::new(OneSlow {
        gate: tokio::sync::Semaphore::new(0),
        slow_done: false.into(),
        sent: 0.into(),
    });
    let sinks = Sinks::new().with("email", sink.clone());
    let policy = RelayPolicy {
        batch: 4,
        concurrency: 8,
        ..quick(5)
    };
    let watcher = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while sink.sent.load(Ordering::SeqCst) < 59 {
            assert!(
                std::time::Instant::now() < deadline,
                "the others were held up"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !sink.slow_done.load(Ordering::SeqCst),
            "59 sent while the slow one is still out"
        );
        // and recorded, not only sent: the store has them as sent
        while store.stats().await.unwrap().sent < 59 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sink.gate.add_permits(1);
        while store.stats().await.unwrap().pending > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let report = run_relay(&store, &sinks, policy, watcher).await.unwrap();
    assert_eq!(report.sent, 60);
    assert!(sink.slow_done.load(Ordering::SeqCst));
}
