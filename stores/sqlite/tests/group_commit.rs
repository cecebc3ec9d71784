//! Group commit on a real SQLite file: the queue is bounded (callers past it get a
//! transient error, never a silent wait without end), a batch whose transaction
//! cannot begin answers every caller with an error and stores nothing, and the
//! per-request path stays available. A lone receive waits for the write lock itself
//! and hands its connection back with the store's busy timeout; `process_once`
//! behind a held lock waits and runs its side effect once.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use diesel::Connection as _;
use diesel::connection::SimpleConnection as _;
use hookbox_core::spi::GroupCommit;
use hookbox_core::testing::delivery;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    CommitMode, IdempotencyStore as _, Inbox as _, InboxAdmin, InboxFilter, Received,
    StoreError as _,
};
use hookbox_sqlite::testing::{TempDir, open};
use hookbox_sqlite::{SqliteError, SqliteOptions};

/// Holds SQLite's write lock from a connection of its own until dropped.
struct WriteLock(diesel::SqliteConnection);

impl WriteLock {
    fn take(path: &std::path::Path) -> Self {
        let mut conn = diesel::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
        conn.batch_execute("BEGIN IMMEDIATE").unwrap();
        Self(conn)
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.0.batch_execute("ROLLBACK");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_queue_is_bounded_and_past_it_callers_get_overloaded() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_busy_timeout(Duration::from_secs(5))
        .with_commit_mode(CommitMode::Grouped(GroupCommit {
            max_batch: 4,
            queue_depth: 2,
            queue_timeout: Duration::from_millis(200),
        }));
    let store = Arc::new(open(&dir.db(), options).await);
    let lock = WriteLock::take(&dir.db());
    let tasks: Vec<_> = (0..30)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move { store.receive(&delivery(&format!("evt_q_{n}"), "{}")).await })
        })
        .collect();
    // the writer is stuck behind the lock: the queue fills, and the callers past it
    // give up after the queue timeout instead of piling up; at most the queue (2),
    // three batches of 4 (the lookup's, the one handed over, the writer's), the
    // writer's leftover (up to 3: it takes whole batches until it has 4) and the
    // receive that found nothing else in flight (its own statement) wait: 18
    // (looked for until 4 s, short of the 5 s busy timeout that would end the wait
    // of the stuck ones too: a loaded machine may start the tasks late)
    let started = std::time::Instant::now();
    let finished = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let finished = tasks.iter().filter(|task| task.is_finished()).count();
        if finished >= 12 || started.elapsed() >= Duration::from_secs(4) {
            break finished;
        }
    };
    assert!(
        finished >= 12,
        "only {finished} of 30 answered while the writer was stuck"
    );
    drop(lock);

    let (mut stored, mut overloaded) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(Received::Stored) => stored += 1,
            Err(err @ SqliteError::Overloaded) => {
                assert!(
                    err.is_transient(),
                    "an edge answers 503 and the sender retries"
                );
                overloaded += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(stored + overloaded, 30);
    assert!(overloaded >= 12, "{overloaded} overloaded");
    let rows = store.list(InboxFilter::all(), 100).await.unwrap();
    assert_eq!(
        rows.len(),
        stored,
        "every Stored answer is a row, nothing else is"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_that_cannot_begin_answers_every_caller_with_an_error_and_stores_nothing() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(200));
    let store = Arc::new(open(&dir.db(), options).await);
    let lock = WriteLock::take(&dir.db());
    let tasks: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move { store.receive(&delivery(&format!("evt_b_{n}"), "{}")).await })
        })
        .collect();
    for task in tasks {
        let err = task
            .await
            .unwrap()
            .expect_err("no 2xx while the database is locked");
        assert!(err.is_transient(), "{err}");
    }
    drop(lock);
    assert!(
        store
            .list(InboxFilter::all(), 100)
            .await
            .unwrap()
            .is_empty()
    );
    // the senders retry, and the retry is stored
    assert_eq!(
        store.receive(&delivery("evt_b_0", "{}")).await.unwrap(),
        Received::Stored
    );
}

/// A duplicate is answered from a read, so it does not wait for the write lock: not
/// in a batch, and not when it is the only receive in flight (which writes its own
/// row when its key is new).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_alone_is_answered_while_another_connection_holds_the_write_lock() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_busy_timeout(Duration::from_secs(30));
    let store = open(&dir.db(), options).await;
    let copy = delivery("evt_alone", "{}");
    assert_eq!(store.receive(&copy).await.unwrap(), Received::Stored);

    let lock = WriteLock::take(&dir.db());
    let answer = tokio::time::timeout(Duration::from_secs(10), store.receive(&copy))
        .await
        .expect("a duplicate does not wait for the 30 s busy timeout behind the lock");
    assert_eq!(answer.unwrap(), Received::Duplicate);
    drop(lock);
    assert_eq!(store.group_commit_stats().unwrap().rows, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_request_commit_stays_available() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_commit_mode(CommitMode::PerRequest);
    let store = open(&dir.db(), options).await;
    let copy = delivery("evt_per_request", "{}");
    assert_eq!(store.receive(&copy).await.unwrap(), Received::Stored);
    assert_eq!(store.receive(&copy).await.unwrap(), Received::Duplicate);
}

/// A `COMMIT` that fails (here a deferred foreign key one row of the batch breaks,
/// which SQLite checks only at `COMMIT`) answers every caller of the batch with an
/// error: no 2xx, nothing of the batch stored; the senders' retries of the other
/// rows are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_that_fails_answers_every_caller_of_its_batch_with_an_error() {
    let dir = TempDir::new();
    let store = Arc::new(open(&dir.db(), SqliteOptions::default()).await);
    let mut setup = diesel::SqliteConnection::establish(dir.db().to_str().unwrap()).unwrap();
    setup
        .batch_execute(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE test_parent (id INTEGER PRIMARY KEY);
             CREATE TABLE test_child (parent INTEGER
                 REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TRIGGER test_poison AFTER INSERT ON hookbox_inbox
                 WHEN NEW.delivery_id = 'evt_poison'
                 BEGIN INSERT INTO test_child VALUES (42); END;",
        )
        .unwrap();
    drop(setup);

    // two deliveries wait for the lock: the first alone in flight (its own
    // statement), the second in the lookup thread (the writer being idle, it writes
    // it itself); the batch behind them gathers in the queue meanwhile, so it is
    // written (and fails) as one transaction
    let lock = WriteLock::take(&dir.db());
    let receive = |id: String| {
        let store = store.clone();
        tokio::spawn(async move { store.receive(&delivery(&id, "{}")).await })
    };
    let first = receive("evt_first".into());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = receive("evt_second".into());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ids: Vec<String> = (0..6)
        .map(|n| format!("evt_neighbour_{n}"))
        .chain(["evt_poison".to_string()])
        .collect();
    let batch: Vec<_> = ids.iter().cloned().map(receive).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(lock);

    assert_eq!(first.await.unwrap().unwrap(), Received::Stored);
    assert_eq!(second.await.unwrap().unwrap(), Received::Stored);
    for (id, task) in ids.iter().zip(batch) {
        let err = task
            .await
            .unwrap()
            .expect_err("no 2xx for a batch whose COMMIT failed");
        assert!(
            !err.is_transient(),
            "{id}: a constraint is not transient: {err}"
        );
    }
    let rows = store.list(InboxFilter::all(), 100).await.unwrap();
    let mut kept: Vec<&str> = rows.iter().map(|r| r.key.delivery_id()).collect();
    // the two lone writers both retry the lock in short steps: either may win
    kept.sort_unstable();
    assert_eq!(
        kept,
        ["evt_first", "evt_second"],
        "nothing of the failed batch is stored"
    );
    // the senders retry: the neighbours are stored, the poison fails again alone
    for id in &ids[..6] {
        assert_eq!(
            store.receive(&delivery(id, "{}")).await.unwrap(),
            Received::Stored
        );
    }
    assert!(store.receive(&delivery("evt_poison", "{}")).await.is_err());
}

/// A lone receive waits for the write lock without SQLite's busy handler, and puts
/// the handler back before its connection returns to the pool: the next caller of
/// that connection (here `process_once`, on a pool of one) still waits for a lock
/// held elsewhere instead of failing at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lone_receive_hands_its_connection_back_with_the_busy_timeout() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_max_connections(1)
        .with_busy_timeout(Duration::from_secs(5));
    let store = Arc::new(open(&dir.db(), options).await);

    // alone in flight, behind a lock held elsewhere: the receive's own insert
    // retries the lock and is stored once the lock is released
    let lock = WriteLock::take(&dir.db());
    let lone = {
        let store = store.clone();
        tokio::spawn(async move { store.receive(&delivery("evt_lone", "{}")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(lock);
    assert_eq!(lone.await.unwrap().unwrap(), Received::Stored);

    assert_waits_for_the_lock_with_the_busy_timeout(&store, &dir).await;
}

/// On a pool of one, a purge (which leaves the lock to the busy handler) behind a
/// lock held elsewhere waits and succeeds: the connection has the store's busy
/// timeout, not the zero a lock-waiting caller set on it.
async fn assert_waits_for_the_lock_with_the_busy_timeout(
    store: &Arc<hookbox_sqlite::SqliteStore>,
    dir: &TempDir,
) {
    let lock = WriteLock::take(&dir.db());
    let purge = {
        let store = store.clone();
        tokio::spawn(async move { store.purge(OffsetDateTime::now_utc()).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(lock);
    let outcome = purge.await.unwrap();
    assert!(
        outcome.is_ok(),
        "the connection kept the store's busy timeout: {outcome:?}"
    );
}

/// `process_once` behind a write lock held elsewhere waits for it, runs the side
/// effect exactly once when it gets the lock, and leaves its connection with the
/// store's busy timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn process_once_waits_for_the_lock_and_runs_its_side_effect_once() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_max_connections(1)
        .with_busy_timeout(Duration::from_secs(5));
    let store = Arc::new(open(&dir.db(), options).await);
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));

    for round in 0..2 {
        let lock = WriteLock::take(&dir.db());
        let claim = {
            let (store, runs) = (store.clone(), runs.clone());
            tokio::spawn(async move {
                let key = hookbox_core::DedupeKey::new("group", "standard", format!("evt_{round}"));
                store
                    .process_once(&key, async |_conn| {
                        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Ok(())
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::SeqCst),
            round,
            "the side effect waits for the lock"
        );
        drop(lock);
        let outcome = claim.await.unwrap();
        assert!(outcome.is_ok(), "round {round}: {outcome:?}");
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::SeqCst),
            round + 1,
            "the side effect ran once"
        );
    }
    assert_waits_for_the_lock_with_the_busy_timeout(&store, &dir).await;
}

/// Concurrent `process_once` calls on one store take the write lock in the order
/// they arrived, not in the order SQLite's busy handler happens to wake them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn process_once_callers_take_the_lock_in_arrival_order() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_max_connections(8)
        .with_busy_timeout(Duration::from_secs(5));
    let store = Arc::new(open(&dir.db(), options).await);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));

    let lock = WriteLock::take(&dir.db());
    let mut calls = Vec::new();
    for n in 0..6 {
        let (store, order) = (store.clone(), order.clone());
        calls.push(tokio::spawn(async move {
            let key = hookbox_core::DedupeKey::new("group", "standard", format!("evt_{n}"));
            store
                .process_once(&key, async |_conn| {
                    order.lock().unwrap().push(n);
                    Ok(())
                })
                .await
        }));
        // each waits at the lock before the next arrives
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    drop(lock);
    for call in calls {
        assert!(call.await.unwrap().is_ok());
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
}

/// A side effect that calls `process_once` on the same store cannot get the lock
/// its own transaction holds: the inner call fails with the transient busy error
/// after the busy timeout (twice over: first for the turn), and nothing hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn process_once_inside_a_side_effect_fails_instead_of_hanging() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(100));
    let store = Arc::new(open(&dir.db(), options).await);
    let outer = hookbox_core::DedupeKey::new("group", "standard", "evt_outer");
    let inner = hookbox_core::DedupeKey::new("group", "standard", "evt_inner");
    let nested = tokio::time::timeout(
        Duration::from_secs(30),
        store.process_once(&outer, async |_conn| {
            let err = store
                .process_once(&inner, async |_conn| Ok(()))
                .await
                .expect_err("the outer transaction holds the write lock");
            assert!(err.is_transient(), "{err}");
            Ok(())
        }),
    )
    .await
    .expect("the nested call gave up after the busy timeout");
    assert!(nested.is_ok(), "{nested:?}");
}
