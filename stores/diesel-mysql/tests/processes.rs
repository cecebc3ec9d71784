//! Real processes: three worker processes draining one inbox, and a child that is
//! SIGKILLed with its claim uncommitted, twenty times.
//!
//! The children are this test binary run again (`--exact <child test> --nocapture`)
//! with the database in an environment variable. Run without that variable, each child
//! test runs a single-process version of its workload and checks it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Tally, TestDatabase};
use diesel_async::AsyncMysqlConnection;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderName, HeaderValue};
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore, Inbox, InboxAdmin, KeptHeaders, Processed,
    Received, VerifiedDelivery, Worked,
};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, diesel_async};

/// The database a child works on; absent when a child test runs on its own.
const CHILD_DATABASE: &str = "HOOKBOX_TEST_CHILD_DATABASE";
/// The crash child's mode: `crash` (slow transactions, to be killed) or `clean`.
const CHILD_MODE: &str = "HOOKBOX_TEST_CHILD_MODE";
/// The crash child's shuffle seed.
const CHILD_SEED: &str = "HOOKBOX_TEST_CHILD_SEED";
/// What children print, one marker per line, for the parent to read.
const MARK: &str = "HOOKBOX-MARK ";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn mark(what: &str) {
    println!("{MARK}{what}");
}

/// Starts this test binary again, running only `test`, with `env`.
fn spawn_child(test: &str, env: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().unwrap()
}

/// Forwards a child's markers to a channel, from a thread of their own.
fn markers(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find(MARK)
                && send.send(line[at + MARK.len()..].to_string()).is_err()
            {
                break;
            }
        }
    });
    receive
}

// ---------------------------------------------------------------- inbox workers

const WORKER_EVENTS: usize = 1_000;
const WORKER_COPIES: usize = 4;
const WORKER_PROCESSES: usize = 3;

fn delivery(event: usize) -> VerifiedDelivery {
    let id = format!("evt_{event:04}");
    let mut headers = KeptHeaders::default();
    headers.push(
        HeaderName::from_static("webhook-id"),
        HeaderValue::from_str(&id).unwrap(),
    );
    VerifiedDelivery::new(
        DedupeKey::new("workers", "standard", id),
        Bytes::from(event.to_string()),
        headers,
    )
}

/// Receives `copies` copies of each of `events` deliveries from 16 tasks; returns
/// (stored, already stored).
async fn receive_all(store: &MysqlStore, events: usize, copies: usize) -> (u64, u64) {
    let tasks: Vec<_> = (0..16)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                let (mut stored, mut already) = (0, 0);
                for n in (task..events * copies).step_by(16) {
                    match store.receive(&delivery(n % events)).await.unwrap() {
                        Received::Stored => stored += 1,
                        Received::Duplicate => already += 1,
                    }
                }
                (stored, already)
            })
        })
        .collect();
    let (mut stored, mut already) = (0, 0);
    for task in tasks {
        let (s, a) = task.await.unwrap();
        stored += s;
        already += a;
    }
    (stored, already)
}

/// The worker's handler: records the event and credits its amount.
async fn handle(conn: &mut AsyncMysqlConnection, delivery: &Delivery) -> Result<(), HandlerError> {
    let event: usize = std::str::from_utf8(delivery.body())?.parse()?;
    let account = common::account(event);
    common::apply(
        conn,
        delivery.delivery_id(),
        &account,
        common::amount(event),
    )
    .await?;
    Ok(())
}

/// Runs `tasks` worker tasks until no row is pending; returns rows processed.
async fn drain(store: &MysqlStore, tasks: usize) -> u64 {
    let tasks: Vec<_> = (0..tasks)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut processed = 0;
                let deadline = tokio::time::Instant::now() + common::PATIENCE;
                loop {
                    assert!(tokio::time::Instant::now() < deadline, "draining hung");
                    match store.work_one(&handle).await.unwrap() {
                        Worked::Processed { .. } => processed += 1,
                        Worked::Failed { id, .. } => panic!("row {id} failed"),
                        // idle: either done, or the remaining rows are locked by
                        // other workers (skipped, not waited for)
                        Worked::Idle => {
                            if store.stats().await.unwrap().pending == 0 {
                                return processed;
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            })
        })
        .collect();
    let mut processed = 0;
    for task in tasks {
        processed += task.await.unwrap();
    }
    processed
}

async fn assert_inbox_exact(store: &MysqlStore, events: usize) {
    assert_eq!(
        common::tally(store).await,
        Tally {
            applications: events as i64,
            distinct: events as i64,
            ledger: common::expected_total(events),
        }
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.processed, stats.dead),
        (0, events as u64, 0)
    );
}

#[test]
fn three_worker_processes_drain_one_inbox() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(common::mysql_url()) else {
        return;
    };
    let database = runtime.block_on(TestDatabase::new(&url));
    let store = runtime.block_on(common::store_in(&url, &database.name, MysqlOptions::new()));
    let (stored, already) = runtime.block_on(receive_all(&store, WORKER_EVENTS, WORKER_COPIES));
    assert_eq!(
        stored, WORKER_EVENTS as u64,
        "the inbox dedupes to one row per event"
    );
    assert_eq!(already, ((WORKER_COPIES - 1) * WORKER_EVENTS) as u64);
    runtime.block_on(common::exec(&store, "CREATE TABLE go (ready INT)"));

    let env = [(CHILD_DATABASE, database.name.clone())];
    let mut children: Vec<Child> = (0..WORKER_PROCESSES)
        .map(|_| spawn_child("child_worker", &env))
        .collect();
    let channels: Vec<_> = children.iter_mut().map(markers).collect();
    // start them together, so that they race for the same rows
    for channel in &channels {
        let ready = channel.recv_timeout(common::PATIENCE).unwrap();
        assert_eq!(ready, "ready");
    }
    runtime.block_on(common::exec(&store, "INSERT INTO go VALUES (1)"));

    let mut split = Vec::new();
    for (child, channel) in children.iter_mut().zip(&channels) {
        let done = channel.recv_timeout(common::PATIENCE).unwrap();
        let processed: u64 = done.strip_prefix("processed ").unwrap().parse().unwrap();
        split.push(processed);
        assert!(child.wait().unwrap().success());
    }
    println!("rows processed per worker process: {split:?}");
    assert_eq!(split.iter().sum::<u64>(), WORKER_EVENTS as u64);
    runtime.block_on(assert_inbox_exact(&store, WORKER_EVENTS));
}

/// A worker process of `three_worker_processes_drain_one_inbox`; on its own, the same
/// workload (200 events × 4 copies) received and drained by three tasks of one process.
#[test]
fn child_worker() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(common::mysql_url()) else {
        return;
    };
    match std::env::var(CHILD_DATABASE) {
        Ok(database) => runtime.block_on(async {
            let store =
                common::store_in(&url, &database, MysqlOptions::new().with_max_connections(4))
                    .await;
            mark("ready");
            while common::count(&store, "SELECT count(*) AS n FROM go").await == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let processed = drain(&store, 2).await;
            mark(&format!("processed {processed}"));
        }),
        Err(_) => runtime.block_on(async {
            let events = 200;
            let database = TestDatabase::new(&url).await;
            let store = common::store_in(&url, &database.name, MysqlOptions::new()).await;
            let (stored, already) = receive_all(&store, events, WORKER_COPIES).await;
            assert_eq!((stored, already), (events as u64, 3 * events as u64));
            assert_eq!(drain(&store, 3).await, events as u64);
            assert_inbox_exact(&store, events).await;
        }),
    }
}

// ---------------------------------------------------------------- SIGKILL

const CRASH_EVENTS: usize = 200;
const KILLS: usize = 20;

fn crash_key(event: usize) -> DedupeKey {
    DedupeKey::new("crash", "stripe", format!("evt_{event:04}"))
}

/// Claims every event in a shuffled order with `process_once`. With `slow`, each
/// new claim announces itself and then holds its transaction open 5–40 ms before
/// committing: the window the parent kills in.
async fn claim_all(store: &MysqlStore, seed: u64, slow: bool) -> u64 {
    let mut order: Vec<usize> = (0..CRASH_EVENTS).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    let mut applied = 0;
    for event in order {
        let key = crash_key(event);
        let id = key.delivery_id().to_string();
        let account = common::account(event);
        let outcome = store
            .process_once(&key, async |conn| {
                common::apply(conn, &id, &account, common::amount(event)).await?;
                if slow {
                    mark(&format!("claimed {id}"));
                    let hold = fastrand::u64(5..=40);
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                }
                Ok(())
            })
            .await
            .unwrap();
        if outcome == Processed::Applied(()) {
            applied += 1;
        }
    }
    applied
}

async fn key_committed(store: &MysqlStore, id: &str) -> bool {
    let sql =
        format!("SELECT count(*) AS n FROM hookbox_processed_keys WHERE delivery_id = '{id}'");
    common::count(store, &sql).await == 1
}

async fn assert_claims_exact(store: &MysqlStore) {
    assert_eq!(
        common::tally(store).await,
        Tally {
            applications: CRASH_EVENTS as i64,
            distinct: CRASH_EVENTS as i64,
            ledger: common::expected_total(CRASH_EVENTS),
        },
        "nothing lost, nothing doubled"
    );
    assert_eq!(
        common::count(store, "SELECT count(*) AS n FROM hookbox_processed_keys").await,
        CRASH_EVENTS as i64,
        "every key claimed exactly once"
    );
}

#[test]
fn sigkill_before_commit_loses_nothing_and_doubles_nothing() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(common::mysql_url()) else {
        return;
    };
    let database = runtime.block_on(TestDatabase::new(&url));
    let store = runtime.block_on(common::store_in(&url, &database.name, MysqlOptions::new()));

    let mut killed_mid_transaction = 0;
    for round in 0..KILLS {
        let env = [
            (CHILD_DATABASE, database.name.clone()),
            (CHILD_MODE, "crash".to_string()),
            (CHILD_SEED, round.to_string()),
        ];
        let mut child = spawn_child("crash_child", &env);
        let channel = markers(&mut child);
        // kill after a random number of claims, each still uncommitted when announced
        let kill_after = fastrand::usize(1..=5);
        let mut last_claimed = None;
        for _ in 0..kill_after {
            match channel.recv_timeout(common::PATIENCE) {
                Ok(line) => last_claimed = line.strip_prefix("claimed ").map(str::to_string),
                Err(_) => break,
            }
        }
        child.kill().unwrap(); // SIGKILL: no destructor, no rollback from the client
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child ended before the kill: {status}"
        );
        if let Some(id) = last_claimed
            && !runtime.block_on(key_committed(&store, &id))
        {
            killed_mid_transaction += 1;
        }
    }
    println!("{killed_mid_transaction} of {KILLS} kills landed before the claim committed");
    assert!(
        killed_mid_transaction > 0,
        "no kill landed inside a transaction"
    );

    let env = [
        (CHILD_DATABASE, database.name.clone()),
        (CHILD_MODE, "clean".to_string()),
        (CHILD_SEED, "99".to_string()),
    ];
    let mut child = spawn_child("crash_child", &env);
    let channel = markers(&mut child);
    assert!(child.wait().unwrap().success(), "the clean run failed");
    let done = channel.recv_timeout(common::PATIENCE).unwrap();
    println!("the clean run {done}");
    runtime.block_on(assert_claims_exact(&store));
}

/// The process `sigkill_before_commit_loses_nothing_and_doubles_nothing` kills; on its
/// own, the same workload in one process, where "killed" is a future dropped
/// mid-transaction at a random point, five times, then a clean run.
#[test]
fn crash_child() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(common::mysql_url()) else {
        return;
    };
    match std::env::var(CHILD_DATABASE) {
        Ok(database) => runtime.block_on(async {
            let store =
                common::store_in(&url, &database, MysqlOptions::new().with_max_connections(1))
                    .await;
            let slow = std::env::var(CHILD_MODE).is_ok_and(|mode| mode == "crash");
            let seed = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
            let applied = claim_all(&store, seed, slow).await;
            mark(&format!("applied {applied}"));
        }),
        Err(_) => runtime.block_on(async {
            let database = TestDatabase::new(&url).await;
            let store = common::store_in(&url, &database.name, MysqlOptions::new()).await;
            for round in 0..5 {
                let cut = Duration::from_millis(fastrand::u64(20..=200));
                let killed = tokio::time::timeout(cut, claim_all(&store, round, true)).await;
                assert!(killed.is_err(), "round {round} finished before the cut");
            }
            claim_all(&store, 99, false).await;
            assert_claims_exact(&store).await;
        }),
    }
}
