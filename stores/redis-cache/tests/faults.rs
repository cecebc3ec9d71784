//! Redis failing under a stream of deliveries, on a private `redis-server` child (on
//! a random port, killed when the test ends): killed and restarted mid-stream, and
//! paused. The ledger must equal the expected total every time. Skips without the
//! `redis-server` binary unless `HOOKBOX_REQUIRE_SERVICES=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Fixture, RedisServer, exists, wait_until};
use hookbox_core::{DedupeKey, Processed, RetentionPolicy};
use hookbox_redis_cache::CacheOptions;
use tokio::sync::watch;

const COPIES: usize = 3;
const TASKS: usize = 6;

fn key(i: usize) -> DedupeKey {
    DedupeKey::new("fault-tests", "standard", format!("evt_{i}"))
}

/// Every event `COPIES` times, shuffled with a fixed seed.
fn stream(events: std::ops::Range<usize>, seed: u64) -> Vec<usize> {
    let mut items: Vec<usize> = events.flat_map(|i| [i; COPIES]).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut items);
    items
}

/// Runs `items` through `process_once` from `TASKS` tasks (each event credits 1),
/// waiting before item `i` until `gate(i)` allows it. Returns how many times each
/// event was applied; any error fails the test.
async fn run_stream(
    f: &Arc<Fixture>,
    items: Vec<usize>,
    done: Arc<AtomicUsize>,
    gates: Vec<(usize, watch::Receiver<bool>)>,
) -> Vec<u32> {
    let events = items.iter().max().map_or(0, |m| m + 1);
    let applied: Arc<Vec<AtomicU32>> = Arc::new((0..events).map(|_| AtomicU32::new(0)).collect());
    let items = Arc::new(items);
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (f, items, next, done, applied) = (
                Arc::clone(f),
                Arc::clone(&items),
                Arc::clone(&next),
                Arc::clone(&done),
                Arc::clone(&applied),
            );
            let mut gates = gates.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&event) = items.get(i) else { break };
                    for (from, gate) in &mut gates {
                        if i >= *from {
                            gate.wait_for(|open| *open).await.unwrap();
                        }
                    }
                    if f.credit_once(&key(event), "acct", 1).await == Processed::Applied(()) {
                        applied[event].fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    applied.iter().map(|a| a.load(Ordering::Relaxed)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_and_restarted_mid_stream_loses_and_doubles_nothing() {
    let Some(mut server) = RedisServer::start().await else {
        return;
    };
    let redis = hookbox_redis_cache::connect(&server.url()).unwrap();
    let f = Arc::new(
        Fixture::new(
            redis.clone(),
            CacheOptions::default(),
            RetentionPolicy::default(),
        )
        .await,
    );
    const EVENTS: usize = 300;
    let items = stream(0..EVENTS, 4);
    let total = items.len();

    // the kill lands somewhere between a third and half of the stream, the restart
    // between two thirds and five sixths, while the tasks keep going
    let (killed, killed_rx) = watch::channel(false);
    let (restarted, restarted_rx) = watch::channel(false);
    let gates = vec![(total / 2, killed_rx), (total * 5 / 6, restarted_rx)];
    let done = Arc::new(AtomicUsize::new(0));
    let runner = {
        let (f, done) = (Arc::clone(&f), Arc::clone(&done));
        tokio::spawn(async move { run_stream(&f, items, done, gates).await })
    };

    wait_for_progress(&done, total / 3).await;
    let before_kill = f.store.cache_stats();
    server.kill();
    killed.send(true).unwrap();
    wait_for_progress(&done, total * 2 / 3).await;
    let during_outage = f.store.cache_stats();
    server.restart().await;
    restarted.send(true).unwrap();
    let applied = runner.await.unwrap();

    assert!(
        applied.iter().all(|&n| n == 1),
        "every event applied exactly once: {:?}",
        applied
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 1)
            .collect::<Vec<_>>()
    );
    assert_eq!(common::total(f.store.inner()).await, EVENTS as i64);
    // the run really went through both states
    assert!(
        before_kill.hits > 0,
        "the cache answered before the kill: {before_kill:?}"
    );
    assert!(
        during_outage.lookup_failures > before_kill.lookup_failures,
        "the outage was felt: {during_outage:?}"
    );

    // and the cache comes back on its own: a fresh event ends up cached in the new
    // (empty) server and its copy is answered from there
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut fresh = EVENTS;
    let recovered = loop {
        fresh += 1;
        let k = key(fresh);
        assert_eq!(f.credit_once(&k, "acct", 1).await, Processed::Applied(()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        if exists(&redis, &f.store.processed_key(&k)).await {
            break k;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never worked again after the restart"
        );
    };
    assert_eq!(
        f.credit_once(&recovered, "acct", 1).await,
        Processed::Duplicate
    );
    assert_eq!(common::total(f.store.inner()).await, fresh as i64);
}

/// Waits until `n` deliveries of the stream are done.
async fn wait_for_progress(done: &AtomicUsize, n: usize) {
    wait_until("stream progress", Duration::from_secs(120), || async move {
        done.load(Ordering::Relaxed) >= n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_redis_never_holds_up_a_delivery() {
    let Some(server) = RedisServer::start().await else {
        return;
    };
    let redis = hookbox_redis_cache::connect(&server.url()).unwrap();
    let f = Arc::new(
        Fixture::new(
            redis.clone(),
            CacheOptions::default(),
            RetentionPolicy::default(),
        )
        .await,
    );

    // warm up: 50 events applied and cached
    const WARM: usize = 50;
    for i in 0..WARM {
        assert_eq!(
            f.credit_once(&key(i), "acct", 1).await,
            Processed::Applied(())
        );
    }
    let last = f.store.processed_key(&key(WARM - 1));
    wait_until("the warm-up is cached", Duration::from_secs(10), || {
        exists(&redis, &last)
    })
    .await;

    // Redis stops answering every client for 30 s (in Redis 7.0 not even CLIENT
    // UNPAUSE gets through, so the test ends by killing the server)
    let paused = server
        .command("CLIENT PAUSE 30000 ALL", Duration::from_secs(5))
        .await;
    assert_eq!(paused.as_deref(), Some("+OK\r\n"));

    // the cached events come again with 100 new ones, 3 copies each, concurrently
    const EVENTS: usize = 150;
    let done = Arc::new(AtomicUsize::new(0));
    let applied = run_stream(&f, stream(0..EVENTS, 7), done, Vec::new()).await;

    // every delivery finished while Redis was still paused: none waited for it
    let still_paused = server
        .command("EXISTS probe", Duration::from_millis(500))
        .await;
    assert_eq!(
        still_paused, None,
        "redis is still paused, so no delivery waited for it to answer"
    );
    assert!(
        applied[..WARM].iter().all(|&n| n == 0),
        "cached before: {applied:?}"
    );
    assert!(applied[WARM..].iter().all(|&n| n == 1), "new: {applied:?}");
    assert_eq!(common::total(f.store.inner()).await, EVENTS as i64);
    let stats = f.store.cache_stats();
    assert!(
        stats.lookup_failures >= (EVENTS * COPIES) as u64,
        "every lookup during the pause fell through: {stats:?}"
    );
}
