//! Several processes on one database file, and processes killed with SIGKILL.
//!
//! The child processes are this test binary run again with `--exact
//! child_process_entry` and `HOOKBOX_CHILD_DB` set: no extra binary in the crate.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl as _;
use hookbox_core::testing::delivery;
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore, Inbox, InboxAdmin, Processed, RetryPolicy,
    Worked,
};
use hookbox_sqlite::testing::{TempDir, credit, open, total};
use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore};

const CHILD_DB: &str = "HOOKBOX_CHILD_DB";
/// `race`: one pass over the events, starting at `HOOKBOX_CHILD_START_MS`;
/// `crash`: loop until killed; `final`: the crash workload run to the end.
const CHILD_MODE: &str = "HOOKBOX_CHILD_MODE";
const CHILD_START: &str = "HOOKBOX_CHILD_START_MS";
const CHILD_EVENTS: &str = "HOOKBOX_CHILD_EVENTS";
/// Where a racing child starts walking the events.
const CHILD_OFFSET: &str = "HOOKBOX_CHILD_OFFSET";
const READY: &str = "hookbox-child ready";

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn inbox_handler(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let account = format!("inbox-{}", delivery.delivery_id());
    credit(conn, &account, 100).await?;
    Ok(())
}

/// A side effect that takes a moment inside its transaction, so that a kill at a
/// random time usually lands between BEGIN and COMMIT.
async fn slow_inbox_handler(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let account = format!("inbox-{}", delivery.delivery_id());
    credit(conn, &account, 50).await?;
    tokio::time::sleep(Duration::from_millis(2)).await;
    credit(conn, &account, 50).await?;
    Ok(())
}

fn direct_key(i: usize) -> DedupeKey {
    DedupeKey::new("direct", "standard", format!("evt_{i}"))
}

async fn process_direct(store: &SqliteStore, i: usize, slow: bool) -> Processed<()> {
    let account = format!("direct-{i}");
    store
        .process_once(&direct_key(i), async |conn| {
            credit(conn, &account, 50).await?;
            if slow {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            credit(conn, &account, 50).await?;
            Ok(())
        })
        .await
        .unwrap()
}

/// Works the inbox until no row is pending; another process may still hold a lease
/// on a row, so an idle answer with pending rows means "wait".
async fn drain_inbox(store: &SqliteStore, slow: bool) -> u64 {
    let mut processed = 0;
    loop {
        let worked = if slow {
            store.work_one(&slow_inbox_handler).await.unwrap()
        } else {
            store.work_one(&inbox_handler).await.unwrap()
        };
        match worked {
            Worked::Processed { .. } => processed += 1,
            Worked::Failed { .. } => panic!("the handler does not fail"),
            Worked::Idle => {
                if store.stats().await.unwrap().pending == 0 {
                    return processed;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One process's share of the race: every event through `process_once`, and two
/// worker tasks on the inbox. Returns (applied, processed).
async fn race_workload(store: SqliteStore, events: usize, offset: usize) -> (u64, u64) {
    let direct = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut applied = 0;
            // each process walks the events from its own starting point, so they
            // meet head-on halfway rather than one trailing the other
            for n in 0..events {
                let i = (n + offset) % events;
                applied += u64::from(!process_direct(&store, i, false).await.is_duplicate());
            }
            applied
        })
    };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { drain_inbox(&store, false).await })
        })
        .collect();
    let applied = direct.await.unwrap();
    let mut processed = 0;
    for worker in workers {
        processed += worker.await.unwrap();
    }
    (applied, processed)
}

/// The crash workload: like the race, with slow side effects; `forever` loops
/// until the process is killed.
async fn crash_workload(store: SqliteStore, events: usize, forever: bool) {
    let direct = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                for i in 0..events {
                    process_direct(&store, i, true).await;
                }
                if !forever {
                    return;
                }
            }
        })
    };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                loop {
                    drain_inbox(&store, true).await;
                    if !forever {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    direct.await.unwrap();
    for worker in workers {
        worker.await.unwrap();
    }
}

fn crash_options() -> SqliteOptions {
    SqliteOptions::default()
        .with_lease(Duration::from_millis(200))
        // every kill may count an attempt on the rows in flight: keep them alive
        .with_retry(RetryPolicy {
            max_attempts: 1000,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        })
        .with_busy_timeout(Duration::from_secs(30))
}

/// Creates the database with its ledger and `events` inbox rows.
async fn prepare(db: &Path, events: usize, options: SqliteOptions) -> SqliteStore {
    let store = open(db, options).await;
    for i in 0..events {
        store
            .receive(&delivery(&format!("evt_{i}"), "{}"))
            .await
            .unwrap();
    }
    store
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// Asserts every direct event and every inbox row was applied exactly once.
async fn assert_exactly_once(store: &SqliteStore, events: usize) {
    let mut conn = store.connection().await.unwrap();
    for prefix in ["direct-%", "inbox-%"] {
        let applied = diesel::sql_query(
            "SELECT COUNT(*) AS count FROM ledger WHERE account LIKE ? AND balance = 100",
        )
        .bind::<diesel::sql_types::Text, _>(prefix)
        .get_result::<Count>(&mut *conn)
        .await
        .unwrap();
        assert_eq!(
            applied.count, events as i64,
            "{prefix}: every one exactly 100"
        );
    }
    drop(conn);
    assert_eq!(
        total(store).await,
        2 * 100 * events as i64,
        "nothing doubled"
    );
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.processed, stats.dead),
        (0, events as u64, 0)
    );
}

fn child(db: &Path, mode: &str, events: usize, start_ms: u64) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, db)
        .env(CHILD_MODE, mode)
        .env(CHILD_EVENTS, events.to_string())
        .env(CHILD_START, start_ms.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// The child's side when `HOOKBOX_CHILD_DB` is set. Run on its own, it runs the
/// race in one process instead: two stores on one file, each doing the whole
/// workload, and checks the ledger.
#[test]
fn child_process_entry() {
    let Some(db) = std::env::var_os(CHILD_DB) else {
        runtime().block_on(async {
            let dir = TempDir::new();
            let events = 100;
            let store = prepare(&dir.db(), events, SqliteOptions::default()).await;
            let other = SqliteStore::open(dir.db(), SqliteOptions::default())
                .await
                .unwrap();
            let (a, b) = tokio::join!(
                race_workload(store.clone(), events, 0),
                race_workload(other, events, events / 2)
            );
            assert_eq!(a.0 + b.0, events as u64);
            assert_eq!(a.1 + b.1, events as u64);
            assert_exactly_once(&store, events).await;
        });
        return;
    };
    let mode = std::env::var(CHILD_MODE).unwrap();
    let events: usize = std::env::var(CHILD_EVENTS).unwrap().parse().unwrap();
    let start_ms: u64 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    runtime().block_on(async {
        let options = if mode == "race" {
            SqliteOptions::default().with_busy_timeout(Duration::from_secs(30))
        } else {
            crash_options()
        };
        let store = SqliteStore::open(&db, options).await.unwrap();
        // several processes may migrate at once; all but one find nothing to do
        store.migrate().await.unwrap();
        println!("{READY}");
        match mode.as_str() {
            "race" => {
                let wait = start_ms.saturating_sub(unix_ms());
                tokio::time::sleep(Duration::from_millis(wait)).await;
                let offset = std::env::var(CHILD_OFFSET).unwrap().parse().unwrap();
                let (applied, processed) = race_workload(store, events, offset).await;
                println!("hookbox-child applied={applied} processed={processed}");
            }
            "crash" => crash_workload(store, events, true).await,
            "final" => crash_workload(store, events, false).await,
            other => panic!("unknown child mode {other}"),
        }
    });
}

/// Parses `applied=A processed=P` from a child's output.
fn parse_counts(output: &str) -> (u64, u64) {
    let line = output
        .lines()
        .find(|l| l.starts_with("hookbox-child applied="))
        .unwrap_or_else(|| panic!("no counts in the child's output:\n{output}"));
    let mut numbers = line
        .split_whitespace()
        .skip(1)
        .map(|part| part.split('=').nth(1).unwrap().parse::<u64>().unwrap());
    (numbers.next().unwrap(), numbers.next().unwrap())
}

/// Two processes each process the same 500 events (through `process_once` and by
/// draining one inbox) at the same time on one file: each event applies once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_file_apply_each_event_once() {
    let dir = TempDir::new();
    let events = 500;
    let store = prepare(&dir.db(), events, SqliteOptions::default()).await;
    // both start together, after both have opened the file
    let start = unix_ms() + 1500;
    let children: Vec<_> = (0..2)
        .map(|n| {
            child(&dir.db(), "race", events, start)
                .env(CHILD_OFFSET, (n * events / 2).to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut applied = 0;
    let mut processed = 0;
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "a child failed:\n{stdout}");
        let (a, p) = parse_counts(&stdout);
        println!("child: applied {a}, processed {p}");
        applied += a;
        processed += p;
    }
    assert_eq!(
        applied, events as u64,
        "each event applied by exactly one process"
    );
    assert_eq!(
        processed, events as u64,
        "each inbox row worked by exactly one process"
    );
    assert_exactly_once(&store, events).await;
}

/// A child claims and works inside transactions and is killed with SIGKILL at a
/// random moment, 20 times; a final clean run then finishes the work. Nothing is
/// lost (every event applied) and nothing doubled (each exactly once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_processes_lose_nothing_and_double_nothing() {
    let dir = TempDir::new();
    let events = 300;
    let store = prepare(&dir.db(), events, crash_options()).await;
    let mut killed_mid_work = 0;
    for round in 0..20 {
        let mut running = child(&dir.db(), "crash", events, 0).spawn().unwrap();
        let mut stdout = BufReader::new(running.stdout.take().unwrap());
        // wait until the child has opened the store, then let it work a little
        let mut line = String::new();
        while !line.contains(READY) {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "round {round}: the child exited before it was ready"
            );
        }
        tokio::time::sleep(Duration::from_millis(fastrand::u64(5..60))).await;
        running.kill().unwrap(); // SIGKILL on Unix
        let status = running.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: the child finished before the kill"
        );
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        let stats = store.stats().await.unwrap();
        println!("round {round}: {} inbox rows processed", stats.processed);
        killed_mid_work += u32::from(stats.pending > 0);
    }
    assert!(
        killed_mid_work > 0,
        "the kills all came after the work was done"
    );

    let interrupted = {
        let mut conn = store.connection().await.unwrap();
        diesel::sql_query(
            "SELECT COUNT(*) AS count FROM hookbox_inbox \
             WHERE lease_token IS NOT NULL OR last_error LIKE '%lease expired%'",
        )
        .get_result::<Count>(&mut *conn)
        .await
        .unwrap()
        .count
    };
    println!("rows whose worker was killed mid-row so far: {interrupted}");

    let output = child(&dir.db(), "final", events, 0).output().unwrap();
    assert!(
        output.status.success(),
        "the final run failed:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_exactly_once(&store, events).await;
}
