//! SQLite-specific behaviour: connection setup, the pool's handling of abandoned
//! transactions, leases, several connections in one process.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl as _;
use hookbox_core::testing::delivery;
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore, Inbox, InboxAdmin, InboxFilter,
    ProcessError, Processed, RetryPolicy, StoreError as _, Worked,
};
use hookbox_sqlite::testing::{TempDir, balance, credit, open, total};
use hookbox_sqlite::{Conn, SqliteError, SqliteOptions, SqliteStore, Synchronous};

#[derive(diesel::QueryableByName)]
struct Pragma {
    #[diesel(sql_type = Text)]
    value: String,
}

async fn pragma(conn: &mut Conn, name: &str) -> String {
    // the one column of a pragma's table, whatever its name
    diesel::sql_query(format!(
        "SELECT CAST((SELECT * FROM pragma_{name}) AS TEXT) AS value"
    ))
    .get_result::<Pragma>(conn)
    .await
    .unwrap()
    .value
}

async fn credit_handler(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let account = format!("inbox-{}", delivery.delivery_id());
    credit(conn, &account, 100).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_connection_runs_the_pragmas() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(1234));
    let store = open(&dir.db(), options).await;
    let mut conn = store.connection().await.unwrap();
    assert_eq!(pragma(&mut conn, "journal_mode").await, "wal");
    assert_eq!(pragma(&mut conn, "synchronous").await, "2", "FULL");
    assert_eq!(pragma(&mut conn, "foreign_keys").await, "1");
    assert_eq!(pragma(&mut conn, "busy_timeout").await, "1234");
    drop(conn);

    let normal = SqliteStore::open(
        dir.db(),
        SqliteOptions::default().with_synchronous(Synchronous::Normal),
    )
    .await
    .unwrap();
    let mut conn = normal.connection().await.unwrap();
    assert_eq!(pragma(&mut conn, "synchronous").await, "1", "NORMAL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_is_idempotent_and_memory_databases_are_refused() {
    let dir = TempDir::new();
    let store = SqliteStore::open(dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    // the schema, the inbox's correlation id and signed time, the outbox, the
    // console's index
    assert_eq!(store.migrate().await.unwrap(), 4);
    assert_eq!(store.migrate().await.unwrap(), 0);

    let memory = SqliteStore::open(":memory:", SqliteOptions::default()).await;
    assert!(matches!(memory, Err(SqliteError::Config(_))), "{memory:?}");

    let missing = dir.path().join("no/such/dir/hookbox.db");
    let err = SqliteStore::open(missing, SqliteOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SqliteError::Connect(_)), "{err:?}");
}

/// `#[tokio::test]` runs on a current-thread runtime, where a cancelled query would
/// panic in diesel-async's `block_in_place`: `open` refuses it with a typed error
/// that says what to do.
#[tokio::test]
async fn open_refuses_a_current_thread_runtime() {
    let dir = TempDir::new();
    let err = SqliteStore::open(dir.db(), SqliteOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SqliteError::CurrentThreadRuntime), "{err:?}");
    assert!(
        err.to_string()
            .contains(r#"#[tokio::main(flavor = "multi_thread")]"#),
        "{err}"
    );
    assert!(
        !err.is_transient(),
        "a retry on the same runtime cannot help"
    );
    assert!(!dir.db().exists(), "refused before the file was touched");
}

/// A database created before the inbox kept correlation ids and signed times: the
/// second migration adds both columns, and the rows already there read back with
/// neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_from_before_the_second_migration_read_back_without_the_new_facts() {
    use diesel_migrations::{EmbeddedMigrations, MigrationHarness as _, embed_migrations};
    const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");
    let dir = TempDir::new();
    {
        let mut conn =
            hookbox_sqlite::blocking::connect(dir.db(), &SqliteOptions::default()).unwrap();
        conn.run_next_migration(MIGRATIONS).unwrap();
        diesel::RunQueryDsl::execute(
            diesel::sql_query(
                "INSERT INTO hookbox_inbox (source, provider, delivery_id, body, headers) \
                 VALUES ('conformance', 'standard', 'evt_old', X'7B7D', '[]')",
            ),
            &mut conn,
        )
        .unwrap();
    }
    let store = SqliteStore::open(dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        store.migrate().await.unwrap(),
        3,
        "only the three that came after it"
    );
    let row = store.get(1).await.unwrap().unwrap();
    assert_eq!(row.key.delivery_id(), "evt_old");
    assert_eq!((row.correlation_id.as_deref(), row.signed_at), (None, None));
    assert_eq!(row.delivery().occurred_at(), row.received_at);
    // and a new row keeps both
    let fresh = hookbox_core::testing::delivery_with_facts("evt_new", "{}");
    store.receive(&fresh).await.unwrap();
    let row = store.get(2).await.unwrap().unwrap();
    assert_eq!(row.correlation_id.as_deref(), fresh.correlation_id());
    assert_eq!(row.signed_at, fresh.signed_at());
}

/// Headers written before the core's codec, one character per byte (Latin-1),
/// read back byte for byte; the same row written now reads the same, in the
/// readable form for ASCII and base64 for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_written_before_the_shared_codec_read_back_exactly() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default()).await;
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(
        "INSERT INTO hookbox_inbox (source, provider, delivery_id, body, headers) \
         VALUES ('conformance', 'standard', 'evt_latin1', X'7B7D', ?)",
    )
    .bind::<Text, _>(r#"[["webhook-id","evt_latin1"],["x-odd","caf\u00e9 \u00ff"]]"#)
    .execute(&mut *conn)
    .await
    .unwrap();
    drop(conn);
    let row = store.get(1).await.unwrap().unwrap();
    assert_eq!(
        row.headers.get("x-odd").unwrap().as_bytes(),
        b"caf\xe9 \xff"
    );
    assert_eq!(row.headers.get("webhook-id").unwrap(), "evt_latin1");

    // received again today, the same headers are stored in the shared form
    let again = hookbox_core::VerifiedDelivery::new(
        DedupeKey::new("conformance", "standard", "evt_latin1_now"),
        row.body.clone(),
        row.headers.clone(),
    );
    store.receive(&again).await.unwrap();
    #[derive(diesel::QueryableByName)]
    struct Headers {
        #[diesel(sql_type = Text)]
        headers: String,
    }
    let mut conn = store.connection().await.unwrap();
    let stored = diesel::sql_query("SELECT headers FROM hookbox_inbox WHERE id = 2")
        .get_result::<Headers>(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        stored.headers,
        r#"[["webhook-id","evt_latin1"],["x-odd",{"base64":"Y2Fm6SD/"}]]"#
    );
    assert_eq!(store.get(2).await.unwrap().unwrap().headers, row.headers);
}

/// The signed time is kept to the microsecond, like every time in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_at_keeps_microseconds() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default()).await;
    let at =
        hookbox_core::time::OffsetDateTime::from_unix_timestamp_nanos(1_790_000_039_123_456_000)
            .unwrap();
    let d = delivery("evt_micros", "{}")
        .with_signed_at(Some(at))
        .with_correlation_id(Some("obj_1:updated".to_string()));
    store.receive(&d).await.unwrap();
    let row = store.get(1).await.unwrap().unwrap();
    assert_eq!(row.signed_at, Some(at));
    assert_eq!(row.correlation_id.as_deref(), Some("obj_1:updated"));
}

/// Several processes starting at once on a new file: one applies the schema, the
/// others wait for its lock and find nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_migrations_apply_the_schema_once() {
    let dir = TempDir::new();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let db = dir.db();
        tasks.push(tokio::spawn(async move {
            let store = SqliteStore::open(db, SqliteOptions::default())
                .await
                .unwrap();
            store.migrate().await.unwrap()
        }));
    }
    let mut applied = Vec::new();
    for task in tasks {
        applied.push(task.await.unwrap());
    }
    applied.sort();
    // one process applies every migration in its one transaction; the rest find none
    assert_eq!(applied, [0, 0, 0, 4]);
}

/// A future dropped mid-transaction must not leave SQLite's write lock held by a
/// connection parked in the pool: the next writer gets it within a short busy
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_transaction_releases_the_write_lock_at_once() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_busy_timeout(Duration::from_millis(200))
        .with_max_connections(2);
    let store = open(&dir.db(), options).await;
    let key = DedupeKey::new("test", "standard", "evt_cancelled");
    // another connection checked out meanwhile, so that the pool holds a healthy
    // idle connection ahead of the abandoned one
    let other = store.connection().await.unwrap();
    let mut stuck = Box::pin(store.process_once(&key, async |conn| {
        credit(conn, "acct", 100).await?;
        std::future::pending::<()>().await;
        Ok(())
    }));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut stuck)
            .await
            .is_err()
    );
    drop(other);
    drop(stuck);
    // with the lock still held, this would fail with Busy after 200 ms
    for i in 0..4 {
        let key = DedupeKey::new("test", "standard", format!("evt_after_{i}"));
        let applied = store
            .process_once(&key, async |conn| Ok(credit(conn, "acct", 1).await?))
            .await
            .unwrap();
        assert_eq!(applied, Processed::Applied(()));
    }
    assert_eq!(balance(&store, "acct").await.unwrap(), 4);
    // and the cancelled claim was released
    let again = store
        .process_once(&key, async |conn| Ok(credit(conn, "acct", 100).await?))
        .await
        .unwrap();
    assert_eq!(again, Processed::Applied(()));
}

/// A lock held past the busy timeout is reported as transient, so an edge answers
/// 5xx and the sender retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_held_too_long_is_a_transient_busy_error() {
    let dir = TempDir::new();
    let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(100));
    let store = open(&dir.db(), options).await;
    let mut holder = store.connection().await.unwrap();
    diesel::sql_query("BEGIN IMMEDIATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let key = DedupeKey::new("test", "standard", "evt_busy");
    let result = store
        .process_once(&key, async |conn| Ok(credit(conn, "acct", 1).await?))
        .await;
    match result {
        Err(ProcessError::Store(err @ SqliteError::Busy(_))) => assert!(err.is_transient()),
        other => panic!("expected Busy, got {other:?}"),
    }
    let received = store.receive(&delivery("evt_busy_inbox", "{}")).await;
    assert!(
        matches!(received, Err(SqliteError::Busy(_))),
        "{received:?}"
    );
    diesel::sql_query("ROLLBACK")
        .execute(&mut *holder)
        .await
        .unwrap();
}

/// Several connections in one process: 200 events, 4 copies each, racing over 4
/// pooled connections; every event applies once and the ledger is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_racing_over_several_connections_apply_once() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default().with_max_connections(4)).await;
    let (events, copies) = (200, 4);
    let mut tasks = Vec::new();
    for copy in 0..copies {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut applied = 0;
            for n in 0..events {
                // each copy walks the events in its own order
                let i = (n * 7 + copy * 50) % events;
                let key = DedupeKey::new("test", "standard", format!("evt_{i}"));
                let account = format!("acct_{}", i % 10);
                let outcome = store
                    .process_once(&key, async |conn| Ok(credit(conn, &account, 100).await?))
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
    for a in 0..10 {
        let expected = i64::from(events / 10) * 100;
        assert_eq!(
            balance(&store, &format!("acct_{a}")).await.unwrap(),
            expected
        );
    }
}

/// The same through the inbox: copies received concurrently, drained by four
/// worker tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inbox_copies_and_workers_over_several_connections() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default()).await;
    let events = 200;
    let mut receivers = Vec::new();
    for copy in 0..4 {
        let store = store.clone();
        receivers.push(tokio::spawn(async move {
            for n in 0..events {
                let i = (n + copy * 50) % events;
                store
                    .receive(&delivery(&format!("evt_{i}"), "{}"))
                    .await
                    .unwrap();
            }
        }));
    }
    let received = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (store, received) = (store.clone(), received.clone());
        workers.push(tokio::spawn(async move {
            let mut processed = 0;
            let mut idle = 0;
            // keep going until the receivers are done and the inbox stays empty
            while idle < 5 {
                match store.work_one(&credit_handler).await.unwrap() {
                    Worked::Processed { .. } => {
                        processed += 1;
                        idle = 0;
                    }
                    Worked::Idle => {
                        if std::sync::atomic::AtomicBool::load(
                            &received,
                            std::sync::atomic::Ordering::SeqCst,
                        ) {
                            idle += 1;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Worked::Failed { .. } => panic!("the handler does not fail"),
                }
            }
            processed
        }));
    }
    for task in receivers {
        task.await.unwrap();
    }
    received.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut processed = 0;
    for task in workers {
        processed += task.await.unwrap();
    }
    assert_eq!(processed, events);
    assert_eq!(total(&store).await, i64::from(events) * 100);
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed, stats.dead), (0, 200, 0));
}

/// The attempt is counted when the lease is taken: a row whose workers keep dying
/// (here: their futures are dropped) reaches the dead-letter limit without its
/// handler ever returning an error, and the rows behind it flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_row_that_keeps_killing_its_worker_is_dead_lettered() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_lease(Duration::from_millis(50))
        .with_retry(RetryPolicy {
            max_attempts: 3,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        });
    let store = open(&dir.db(), options).await;
    store
        .receive(&delivery("evt_crasher", "crash"))
        .await
        .unwrap();
    let crashing = async |conn: &mut Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.body().as_ref() == b"crash" {
            // the process "dies" mid-handler
            std::future::pending::<()>().await;
        }
        credit(conn, "acct", 100).await?;
        Ok(())
    };
    for attempt in 1..=3u32 {
        let cut = tokio::time::timeout(Duration::from_millis(100), store.work_one(&crashing)).await;
        assert!(cut.is_err(), "attempt {attempt} hung and was cut off");
        let row = store.get(1).await.unwrap().unwrap();
        assert_eq!(row.attempts, attempt);
        tokio::time::sleep(Duration::from_millis(60)).await; // the lease expires
    }
    store.receive(&delivery("evt_fine", "{}")).await.unwrap();
    let worked = store.work_one(&crashing).await.unwrap();
    assert_eq!(
        worked,
        Worked::Failed {
            id: 1,
            attempts: 3,
            dead: true
        }
    );
    let letter = &store.list(InboxFilter::dead(), 10).await.unwrap()[0];
    assert!(
        letter
            .last_error
            .as_deref()
            .unwrap()
            .contains("lease expired")
    );
    assert_eq!(
        store.work_one(&crashing).await.unwrap(),
        Worked::Processed { id: 2 }
    );
    assert_eq!(balance(&store, "acct").await.unwrap(), 100);
}

/// A row that cannot be read back (edited by hand) is dead-lettered with the reason
/// instead of stopping the worker; the rows behind it flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_row_is_dead_lettered_not_fatal() {
    let dir = TempDir::new();
    let store = open(&dir.db(), SqliteOptions::default()).await;
    store.receive(&delivery("evt_bad", "{}")).await.unwrap();
    store.receive(&delivery("evt_good", "{}")).await.unwrap();
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query("UPDATE hookbox_inbox SET headers = 'not json' WHERE id = 1")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    assert!(matches!(
        store.work_one(&credit_handler).await.unwrap(),
        Worked::Failed {
            id: 1,
            dead: true,
            ..
        }
    ));
    assert_eq!(
        store.work_one(&credit_handler).await.unwrap(),
        Worked::Processed { id: 2 }
    );
    // the operator's view boxes the store's error; its own is still there
    let err = store.get(1).await.unwrap_err();
    let inner: &dyn std::error::Error = err.inner();
    assert!(
        matches!(
            inner.downcast_ref::<SqliteError>(),
            Some(SqliteError::Corrupt { id: 1, .. })
        ),
        "{err:?}"
    );
    assert!(!err.is_transient());
}

/// Claims made by two stores on the same file (as two processes would) see each
/// other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_file_share_keys() {
    let dir = TempDir::new();
    let a = open(&dir.db(), SqliteOptions::default()).await;
    let b = Arc::new(open(&dir.db(), SqliteOptions::default()).await);
    let key = DedupeKey::new("test", "standard", "evt_shared");
    let applied = a
        .process_once(&key, async |conn| Ok(credit(conn, "acct", 100).await?))
        .await
        .unwrap();
    assert_eq!(applied, Processed::Applied(()));
    let dup = b
        .process_once(&key, async |conn| Ok(credit(conn, "acct", 100).await?))
        .await
        .unwrap();
    assert_eq!(dup, Processed::Duplicate);
    let _ = BigInt;
}

/// The worker relaxes its connection (`synchronous = NORMAL`, no busy handler) for
/// its own commits only: every pooled connection an inline `process_once` or a claim
/// may get afterwards is back at the store's settings, also after a `work_one` that
/// was cut off mid-handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_settings_never_reach_the_pool() {
    let dir = TempDir::new();
    let options = SqliteOptions::default()
        .with_max_connections(2)
        .with_busy_timeout(Duration::from_millis(1234));
    let store = open(&dir.db(), options).await;
    store.receive(&delivery("evt_cut", "hang")).await.unwrap();
    store.receive(&delivery("evt_done", "{}")).await.unwrap();
    let handler = async |conn: &mut Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.body().as_ref() == b"hang" {
            std::future::pending::<()>().await;
        }
        credit(conn, "acct", 1).await?;
        Ok(())
    };
    let cut = tokio::time::timeout(Duration::from_millis(100), store.work_one(&handler)).await;
    assert!(cut.is_err(), "the first row hangs and is cut off");
    // the cut row is leased: the next one is worked
    assert!(matches!(
        store.work_one(&handler).await.unwrap(),
        Worked::Processed { .. }
    ));
    // both pooled connections at once: whichever the worker had is among them
    let (mut a, mut b) = (
        store.connection().await.unwrap(),
        store.connection().await.unwrap(),
    );
    for conn in [&mut *a, &mut *b] {
        assert_eq!(pragma(conn, "synchronous").await, "2", "FULL");
        assert_eq!(pragma(conn, "busy_timeout").await, "1234");
    }
}
