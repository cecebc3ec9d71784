//! The synchronous path: `blocking::*` on a plain connection and
//! `SqliteStore::process_once_blocking`, which must keep every guarantee of the async
//! `process_once` (same file, same keys, same rollback).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use diesel::RunQueryDsl as _;
use diesel::SqliteConnection;
use diesel::sql_types::{BigInt, Text};
use hookbox_core::time::{Duration as TimeDuration, OffsetDateTime};
use hookbox_core::{
    Advance, Claim, DedupeKey, HandlerError, IdempotencyStore, ProcessError, Processed,
    TimestampAdvance,
};
use hookbox_sqlite::testing::{TempDir, balance, credit, open, total};
use hookbox_sqlite::{SqliteError, SqliteOptions, blocking};

fn credit_sync(
    conn: &mut SqliteConnection,
    account: &str,
    amount: i64,
) -> Result<(), HandlerError> {
    diesel::sql_query(
        "INSERT INTO ledger (account, balance) VALUES (?, ?) \
         ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance",
    )
    .bind::<Text, _>(account)
    .bind::<BigInt, _>(amount)
    .execute(conn)?;
    Ok(())
}

fn key(id: &str) -> DedupeKey {
    DedupeKey::new("test", "standard", id.to_owned())
}

#[test]
fn connect_refuses_memory_databases_and_runs_the_pragmas() {
    assert!(matches!(
        blocking::connect(":memory:", &SqliteOptions::default()),
        Err(SqliteError::Config(_))
    ));
    #[derive(diesel::QueryableByName)]
    struct Mode {
        #[diesel(sql_type = Text)]
        journal_mode: String,
    }
    let dir = TempDir::new();
    let mut conn = blocking::connect(dir.db(), &SqliteOptions::default()).unwrap();
    let mode = diesel::sql_query("PRAGMA journal_mode")
        .get_result::<Mode>(&mut conn)
        .unwrap();
    assert_eq!(mode.journal_mode, "wal");
    assert!(blocking::migrate(&mut conn).unwrap() > 0);
    assert_eq!(blocking::migrate(&mut conn).unwrap(), 0, "already applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_effect_error_releases_the_key_and_the_retry_applies_once() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default()).await;
    let mut conn = blocking::connect(dir.db(), &SqliteOptions::default()).unwrap();
    let k = key("evt_1");

    let failed = blocking::process_once(&mut conn, &k, |conn| {
        credit_sync(conn, "acct_1", 100)?;
        Err::<(), _>("the downstream call failed".into())
    });
    match failed {
        Err(ProcessError::SideEffect(err)) => {
            assert_eq!(err.to_string(), "the downstream call failed");
        }
        other => panic!("expected the side effect's error, got {other:?}"),
    }
    assert_eq!(balance(&store, "acct_1").await.unwrap(), 0, "rolled back");

    let retried = blocking::process_once(&mut conn, &k, |conn| credit_sync(conn, "acct_1", 100));
    assert_eq!(retried.unwrap(), Processed::Applied(()));
    let again = blocking::process_once(&mut conn, &k, |conn| credit_sync(conn, "acct_1", 100));
    assert_eq!(again.unwrap(), Processed::Duplicate);
    assert_eq!(balance(&store, "acct_1").await.unwrap(), 100);

    // the async form sees the same key: one store, two ways in
    let from_async = store
        .process_once(&k, async |conn| Ok(credit(conn, "acct_1", 100).await?))
        .await
        .unwrap();
    assert_eq!(from_async, Processed::Duplicate);
}

#[test]
fn claim_inside_the_callers_transaction_rolls_back_with_it() {
    let dir = TempDir::new();
    let mut conn = blocking::connect(dir.db(), &SqliteOptions::default()).unwrap();
    blocking::migrate(&mut conn).unwrap();
    let k = key("evt_2");
    let aborted = conn.immediate_transaction(|conn| {
        assert_eq!(blocking::claim(conn, &k)?, Claim::New);
        Err::<(), SqliteError>(SqliteError::Config("the caller gives up"))
    });
    assert!(aborted.is_err());
    let committed = conn.immediate_transaction(|conn| blocking::claim(conn, &k));
    assert_eq!(
        committed.unwrap(),
        Claim::New,
        "the aborted claim left nothing"
    );
    let dup = conn.immediate_transaction(|conn| blocking::claim(conn, &k));
    assert_eq!(dup.unwrap(), Claim::Duplicate);
}

#[test]
fn the_version_guards_apply_only_newer_and_report_ties() {
    let dir = TempDir::new();
    let mut conn = blocking::connect(dir.db(), &SqliteOptions::default()).unwrap();
    blocking::migrate(&mut conn).unwrap();
    assert_eq!(
        blocking::advance(&mut conn, "acct_1", 2).unwrap(),
        Advance::Applied
    );
    assert_eq!(
        blocking::advance(&mut conn, "acct_1", 1).unwrap(),
        Advance::Stale
    );
    assert_eq!(
        blocking::advance(&mut conn, "acct_1", 2).unwrap(),
        Advance::Stale
    );
    assert_eq!(
        blocking::advance(&mut conn, "acct_1", 3).unwrap(),
        Advance::Applied
    );

    let at = OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap();
    let advance_at = |conn: &mut SqliteConnection, at| blocking::advance_at(conn, "acct_1", at);
    assert_eq!(
        advance_at(&mut conn, at).unwrap(),
        TimestampAdvance::Applied
    );
    assert_eq!(
        advance_at(&mut conn, at).unwrap(),
        TimestampAdvance::Unknown
    );
    let earlier = at - TimeDuration::seconds(1);
    assert_eq!(
        advance_at(&mut conn, earlier).unwrap(),
        TimestampAdvance::Stale
    );
}

/// Copies racing through `process_once_blocking` from several tasks (so several
/// pooled connections and blocking threads) apply each event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn process_once_blocking_applies_racing_copies_once() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default().with_max_connections(4)).await;
    let (events, copies) = (200u32, 4u32);
    let mut tasks = Vec::new();
    for copy in 0..copies {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut applied = 0;
            for n in 0..events {
                let i = (n * 7 + copy * 50) % events;
                let account = format!("acct_{}", i % 10);
                let outcome = store
                    .process_once_blocking(&key(&format!("evt_{i}")), move |conn| {
                        credit_sync(conn, &account, 100)
                    })
                    .await
                    .unwrap();
                applied += u32::from(outcome == Processed::Applied(()));
            }
            applied
        }));
    }
    let mut applied = 0;
    for task in tasks {
        applied += task.await.unwrap();
    }
    assert_eq!(applied, events);
    assert_eq!(total(&store).await, i64::from(events) * 100);

    // a failing side effect through the store's blocking path rolls back too
    let failed = store
        .process_once_blocking(&key("evt_fail"), |conn| {
            credit_sync(conn, "acct_0", 1)?;
            Err::<(), _>("boom".into())
        })
        .await;
    match failed {
        Err(ProcessError::SideEffect(err)) => assert_eq!(err.to_string(), "boom"),
        other => panic!("expected the side effect's error, got {other:?}"),
    }
    assert_eq!(total(&store).await, i64::from(events) * 100);
}
