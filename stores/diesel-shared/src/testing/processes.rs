//! Real processes: three worker processes draining one inbox, and a child that is
//! SIGKILLed with its claim uncommitted, twenty times.
//!
//! The children are the test binary run again (`--exact <child test> --nocapture`)
//! with the schema or database in [`Backend::CHILD_VAR`]. Run without that variable,
//! each child test runs a single-process version of its workload and checks it.
//!
//! A store's test binary holds four `#[test]`s (not `#[tokio::test]`: each check
//! builds its own runtime), each calling one function here; the two parents are
//! given the names of the two child tests, which must be top-level tests of the same
//! binary.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderName, HeaderValue};
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore, Inbox, InboxAdmin, KeptHeaders, Processed,
    Received, VerifiedDelivery, Worked,
};

use super::{Backend, PATIENCE, Settings, Tally};

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
async fn receive_all<B: Backend>(store: &B::Store, events: usize, copies: usize) -> (u64, u64) {
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
async fn handle<B: Backend>(conn: &mut B::Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let event: usize = std::str::from_utf8(delivery.body())?.parse()?;
    let account = super::account(event);
    B::apply(conn, delivery.delivery_id(), &account, super::amount(event)).await?;
    Ok(())
}

/// Runs `tasks` worker tasks until no row is pending; returns rows processed.
async fn drain<B: Backend>(store: &B::Store, tasks: usize) -> u64 {
    let tasks: Vec<_> = (0..tasks)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut processed = 0;
                let deadline = tokio::time::Instant::now() + PATIENCE;
                loop {
                    assert!(tokio::time::Instant::now() < deadline, "draining hung");
                    match store.work_one(&handle::<B>).await.unwrap() {
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

async fn assert_inbox_exact<B: Backend>(store: &B::Store, events: usize) {
    assert_eq!(
        super::tally::<B>(store).await,
        Tally {
            applications: events as i64,
            distinct: events as i64,
            ledger: super::expected_total(events),
        }
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.processed, stats.dead),
        (0, events as u64, 0)
    );
}

/// Stores 1,000 events (four copies each, deduped to one row each), then starts
/// three worker processes (`child`, the name of the test that calls [`child_worker`])
/// together and checks that they drained the inbox with each row applied exactly
/// once. Returns at once when the test must skip (see [`Backend::url`]).
///
/// # Panics
/// A child failed or hung, or a row was applied twice or not at all.
pub fn three_worker_processes_drain_one_inbox<B: Backend>(child: &str) {
    let runtime = runtime();
    let Some(url) = runtime.block_on(B::url()) else {
        return;
    };
    let schema = runtime.block_on(B::scope(&url));
    let store = runtime.block_on(B::store(&url, B::scope_name(&schema), Settings::new()));
    let (stored, already) =
        runtime.block_on(receive_all::<B>(&store, WORKER_EVENTS, WORKER_COPIES));
    assert_eq!(
        stored, WORKER_EVENTS as u64,
        "the inbox dedupes to one row per event"
    );
    assert_eq!(already, ((WORKER_COPIES - 1) * WORKER_EVENTS) as u64);
    runtime.block_on(B::exec(&store, "CREATE TABLE go (ready INT)"));

    let env = [(B::CHILD_VAR, B::scope_name(&schema).to_string())];
    let mut children: Vec<Child> = (0..WORKER_PROCESSES)
        .map(|_| spawn_child(child, &env))
        .collect();
    let channels: Vec<_> = children.iter_mut().map(markers).collect();
    // start them together, so that they race for the same rows
    for channel in &channels {
        let ready = channel.recv_timeout(PATIENCE).unwrap();
        assert_eq!(ready, "ready");
    }
    runtime.block_on(B::exec(&store, "INSERT INTO go VALUES (1)"));

    let mut split = Vec::new();
    for (child, channel) in children.iter_mut().zip(&channels) {
        let done = channel.recv_timeout(PATIENCE).unwrap();
        let processed: u64 = done.strip_prefix("processed ").unwrap().parse().unwrap();
        split.push(processed);
        assert!(child.wait().unwrap().success());
    }
    println!("rows processed per worker process: {split:?}");
    assert_eq!(split.iter().sum::<u64>(), WORKER_EVENTS as u64);
    runtime.block_on(assert_inbox_exact::<B>(&store, WORKER_EVENTS));
}

/// A worker process of `three_worker_processes_drain_one_inbox`; on its own, the same
/// workload (200 events × 4 copies) received and drained by three tasks of one process.
///
/// # Panics
/// A step failed, or (on its own) a row was applied twice or not at all.
pub fn child_worker<B: Backend>() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(B::url()) else {
        return;
    };
    match std::env::var(B::CHILD_VAR) {
        Ok(schema) => runtime.block_on(async {
            let store = B::store(&url, &schema, Settings::new().with_max_connections(4)).await;
            mark("ready");
            while B::count(&store, "SELECT count(*) AS n FROM go").await == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let processed = drain::<B>(&store, 2).await;
            mark(&format!("processed {processed}"));
        }),
        Err(_) => runtime.block_on(async {
            let events = 200;
            let schema = B::scope(&url).await;
            let store = B::store(&url, B::scope_name(&schema), Settings::new()).await;
            let (stored, already) = receive_all::<B>(&store, events, WORKER_COPIES).await;
            assert_eq!((stored, already), (events as u64, 3 * events as u64));
            assert_eq!(drain::<B>(&store, 3).await, events as u64);
            assert_inbox_exact::<B>(&store, events).await;
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
async fn claim_all<B: Backend>(store: &B::Store, seed: u64, slow: bool) -> u64 {
    let mut order: Vec<usize> = (0..CRASH_EVENTS).collect();
    fastrand::Rng::with_seed(seed).shuffle(&mut order);
    let mut applied = 0;
    for event in order {
        let key = crash_key(event);
        let id = key.delivery_id().to_string();
        let account = super::account(event);
        let outcome = store
            .process_once(&key, async |conn| {
                B::apply(conn, &id, &account, super::amount(event)).await?;
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

async fn key_committed<B: Backend>(store: &B::Store, id: &str) -> bool {
    let sql =
        format!("SELECT count(*) AS n FROM hookbox_processed_keys WHERE delivery_id = '{id}'");
    B::count(store, &sql).await == 1
}

async fn assert_claims_exact<B: Backend>(store: &B::Store) {
    assert_eq!(
        super::tally::<B>(store).await,
        Tally {
            applications: CRASH_EVENTS as i64,
            distinct: CRASH_EVENTS as i64,
            ledger: super::expected_total(CRASH_EVENTS),
        },
        "nothing lost, nothing doubled"
    );
    assert_eq!(
        B::count(store, "SELECT count(*) AS n FROM hookbox_processed_keys").await,
        CRASH_EVENTS as i64,
        "every key claimed exactly once"
    );
}

/// Runs the claiming child (`child`, the name of the test that calls
/// [`crash_child`]) twenty times, SIGKILLing it while a claim's transaction is open,
/// then once to the end, and checks that every event was applied exactly once.
/// Returns at once when the test must skip (see [`Backend::url`]).
///
/// # Panics
/// A child ended before its kill, no kill landed inside a transaction, or an event
/// was lost or applied twice.
pub fn sigkill_before_commit_loses_nothing_and_doubles_nothing<B: Backend>(child: &str) {
    let runtime = runtime();
    let Some(url) = runtime.block_on(B::url()) else {
        return;
    };
    let schema = runtime.block_on(B::scope(&url));
    let store = runtime.block_on(B::store(&url, B::scope_name(&schema), Settings::new()));

    let mut killed_mid_transaction = 0;
    for round in 0..KILLS {
        let env = [
            (B::CHILD_VAR, B::scope_name(&schema).to_string()),
            (CHILD_MODE, "crash".to_string()),
            (CHILD_SEED, round.to_string()),
        ];
        let mut child = spawn_child(child, &env);
        let channel = markers(&mut child);
        // kill after a random number of claims, each still uncommitted when announced
        let kill_after = fastrand::usize(1..=5);
        let mut last_claimed = None;
        for _ in 0..kill_after {
            match channel.recv_timeout(PATIENCE) {
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
            && !runtime.block_on(key_committed::<B>(&store, &id))
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
        (B::CHILD_VAR, B::scope_name(&schema).to_string()),
        (CHILD_MODE, "clean".to_string()),
        (CHILD_SEED, "99".to_string()),
    ];
    let mut child = spawn_child(child, &env);
    let channel = markers(&mut child);
    assert!(child.wait().unwrap().success(), "the clean run failed");
    let done = channel.recv_timeout(PATIENCE).unwrap();
    println!("the clean run {done}");
    runtime.block_on(assert_claims_exact::<B>(&store));
}

/// The process `sigkill_before_commit_loses_nothing_and_doubles_nothing` kills; on its
/// own, the same workload in one process, where "killed" is a future dropped
/// mid-transaction at a random point, five times, then a clean run.
///
/// # Panics
/// A step failed, or (on its own) an event was lost or applied twice.
pub fn crash_child<B: Backend>() {
    let runtime = runtime();
    let Some(url) = runtime.block_on(B::url()) else {
        return;
    };
    match std::env::var(B::CHILD_VAR) {
        Ok(schema) => runtime.block_on(async {
            let store = B::store(&url, &schema, Settings::new().with_max_connections(1)).await;
            let slow = std::env::var(CHILD_MODE).is_ok_and(|mode| mode == "crash");
            let seed = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
            let applied = claim_all::<B>(&store, seed, slow).await;
            mark(&format!("applied {applied}"));
        }),
        Err(_) => runtime.block_on(async {
            let schema = B::scope(&url).await;
            let store = B::store(&url, B::scope_name(&schema), Settings::new()).await;
            for round in 0..5 {
                let cut = Duration::from_millis(fastrand::u64(20..=200));
                let killed = tokio::time::timeout(cut, claim_all::<B>(&store, round, true)).await;
                assert!(killed.is_err(), "round {round} finished before the cut");
            }
            claim_all::<B>(&store, 99, false).await;
            assert_claims_exact::<B>(&store).await;
        }),
    }
}
