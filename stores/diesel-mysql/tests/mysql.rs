//! MySQL- and MariaDB-specific behaviour: what InnoDB does to a transaction on a
//! duplicate key (the claim's method rests on it), byte-for-byte keys, UTC times,
//! the typed lock timeout, connections closed when a transaction is abandoned,
//! connection failures, migrations, and a statement error a side effect swallowed.
//! (The conformance suite runs in `conformance.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use common::TestDatabase;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use hookbox_core::{Claim, DedupeKey, IdempotencyStore, Processed, StoreError};
use hookbox_diesel_mysql::{MysqlError, MysqlOptions, MysqlStore, diesel, diesel_async};

/// The claim's argument, on the real server: a duplicate key fails its `INSERT`
/// alone. The transaction stays open, what it wrote before and after the duplicate
/// commits, and the duplicate check holds a shared lock on the stored key until the
/// transaction ends (a writer of that key waits for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_key_fails_its_statement_only_and_share_locks_the_key() {
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let (store, database) = (&fixture.store, &fixture.database);
    let key = DedupeKey::new("innodb", "standard", "evt_dup");
    assert_eq!(
        store
            .process_once(&key, async |_conn| Ok(()))
            .await
            .unwrap(),
        Processed::Applied(())
    );

    let (claimed, held) = tokio::sync::oneshot::channel::<()>();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let duplicate = {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move {
            let mut conn = store.connection().await.unwrap();
            conn.transaction(async |conn| {
                common::credit(conn, "before", 1).await?;
                let claim = store.claim(conn, &key).await?;
                // the duplicate failed one statement; the transaction goes on
                common::credit(conn, "after", 1).await?;
                claimed.send(()).unwrap();
                released.await.unwrap();
                Ok::<_, MysqlError>(claim)
            })
            .await
        })
    };
    held.await.unwrap();
    // a writer of the stored key waits for the duplicate's shared lock
    let mut other = AsyncMysqlConnection::establish(&database.url())
        .await
        .unwrap();
    other
        .batch_execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    let blocked =
        diesel::sql_query("DELETE FROM hookbox_processed_keys WHERE delivery_id = 'evt_dup'")
            .execute(&mut other)
            .await;
    let err = MysqlError::from(blocked.expect_err("the key is share-locked"));
    assert!(matches!(err, MysqlError::LockTimeout(_)), "{err:?}");
    assert!(err.is_transient());

    release.send(()).unwrap();
    assert_eq!(duplicate.await.unwrap().unwrap(), Claim::Duplicate);
    // both writes of the transaction committed around the failed insert
    assert_eq!(
        common::count(store, "SELECT count(*) AS n FROM ledger").await,
        2
    );
    assert_eq!(
        common::count(
            store,
            "SELECT count(*) AS n FROM hookbox_processed_keys WHERE delivery_id = 'evt_dup'"
        )
        .await,
        1
    );
}

/// Keys compare byte for byte: case, trailing spaces and accents make other keys
/// (a `PAD SPACE` or case-insensitive collation would merge them), and a key too
/// long for its column is refused, never cut to another key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_compare_byte_for_byte() {
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let store = &fixture.store;
    for id in ["evt_1", "evt_1 ", "EVT_1", "evt_1\u{0301}", "évt_1"] {
        let key = DedupeKey::new("bytes", "standard", id);
        let outcome = store
            .process_once(&key, async |_conn| Ok(()))
            .await
            .unwrap();
        assert_eq!(
            outcome,
            Processed::Applied(()),
            "{id:?} is a key of its own"
        );
    }
    let again = DedupeKey::new("bytes", "standard", "evt_1 ");
    assert_eq!(
        store
            .process_once(&again, async |_conn| Ok(()))
            .await
            .unwrap(),
        Processed::Duplicate
    );
    let long = DedupeKey::new("bytes", "standard", "x".repeat(1025));
    let refused = store.process_once(&long, async |_conn| Ok(())).await;
    match refused {
        Err(hookbox_core::ProcessError::Store(err)) => {
            assert!(!err.is_transient(), "{err:?}");
            assert!(
                hookbox_core::error_chain(&err).contains("Data too long"),
                "{err:?}"
            );
        }
        other => panic!("a key longer than its column is refused: {other:?}"),
    }
}

/// The store's times are UTC whatever the session's time zone: it writes
/// `UTC_TIMESTAMP(6)`, never `CURRENT_TIMESTAMP`, which follows the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn times_are_stored_in_utc() {
    use hookbox_core::{CommitMode, Inbox as _, InboxAdmin as _, InboxFilter};
    // one connection, so the session changed below is the one the store writes on
    let options = MysqlOptions::new()
        .with_max_connections(1)
        .with_commit_mode(CommitMode::PerRequest);
    let Some(fixture) = common::fixture(options).await else {
        return;
    };
    let store = &fixture.store;
    common::exec(store, "SET SESSION time_zone = '+05:00'").await;
    store
        .receive(&hookbox_core::testing::delivery("evt_utc", "{}"))
        .await
        .unwrap();
    assert_eq!(
        common::count(
            store,
            "SELECT TIMESTAMPDIFF(HOUR, UTC_TIMESTAMP(), NOW()) AS n"
        )
        .await,
        5,
        "the session is 5 hours ahead"
    );
    let rows = store.list(InboxFilter::all(), 1).await.unwrap();
    let skew = (time::OffsetDateTime::now_utc() - rows[0].received_at).abs();
    assert!(
        skew < time::Duration::minutes(1),
        "received_at {} is UTC",
        rows[0].received_at
    );
}

/// A lock wait that outlasts the lock timeout is the typed, transient
/// `LockTimeout`, not a hang and not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_copy_times_out_as_a_transient_lock_timeout() {
    use hookbox_core::ProcessError;
    let options = MysqlOptions::new().with_lock_timeout(Duration::from_millis(300));
    let Some(fixture) = common::fixture(options).await else {
        return;
    };
    let store = &fixture.store;
    let key = DedupeKey::new("lock", "standard", "evt_stuck");
    let (holding, held) = tokio::sync::oneshot::channel::<()>();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move {
            store
                .process_once(&key, async move |_conn| {
                    // the key is inserted and uncommitted while this waits
                    holding.send(()).unwrap();
                    released.await.unwrap();
                    Ok(())
                })
                .await
        })
    };
    held.await.unwrap();
    let second = store.process_once(&key, async |_conn| Ok(())).await;
    match second {
        Err(ProcessError::Store(err @ MysqlError::LockTimeout(_))) => {
            assert!(err.is_transient());
        }
        other => panic!("expected a lock timeout, got {other:?}"),
    }
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), Processed::Applied(()));
    // once the first copy committed, the next copy is a plain duplicate
    let third = store
        .process_once(&key, async |_conn| Ok(()))
        .await
        .unwrap();
    assert_eq!(third, Processed::Duplicate);
}

/// A future dropped mid-transaction does not leave its connection, open transaction
/// and locks idle in the pool: the key is free again at once, for a transaction the
/// store began and for one the caller began on a connection it took itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_transaction_releases_its_key_at_once() {
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let (store, database) = (&fixture.store, &fixture.database);

    let key = DedupeKey::new("drop", "standard", "evt_dropped");
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        store.process_once(&key, async |conn| {
            common::credit(conn, "acct", 100).await?;
            // never finishes: the timeout drops it with the transaction open
            let () = std::future::pending().await;
            Ok(())
        }),
    )
    .await;
    assert!(abandoned.is_err());
    // checked on a connection outside the pool, so that no pool checkout can be what
    // closes the abandoned connection
    assert!(key_is_free(database, &key).await);
    assert_eq!(
        common::count(store, "SELECT count(*) AS n FROM ledger").await,
        0
    );

    let key = DedupeKey::new("drop", "standard", "evt_dropped_caller_owned");
    let abandoned = tokio::time::timeout(Duration::from_millis(200), async {
        let mut conn = store.connection().await?;
        conn.transaction(async |conn| {
            store.claim(conn, &key).await?;
            std::future::pending::<Result<(), MysqlError>>().await
        })
        .await
    })
    .await;
    assert!(abandoned.is_err());
    assert!(key_is_free(database, &key).await);
    // and the pool still works
    let again = store
        .process_once(
            &DedupeKey::new("drop", "standard", "evt_after"),
            async |conn| {
                common::credit(conn, "acct", 100).await?;
                Ok(())
            },
        )
        .await
        .unwrap();
    assert_eq!(again, Processed::Applied(()));
}

/// Claims `key` on a fresh connection of its own, waiting at most 2 s for its lock;
/// `true` when the claim is new.
async fn key_is_free(database: &TestDatabase, key: &DedupeKey) -> bool {
    let mut conn = AsyncMysqlConnection::establish(&database.url())
        .await
        .unwrap();
    conn.batch_execute("SET SESSION innodb_lock_wait_timeout = 2")
        .await
        .unwrap();
    let inserted = diesel::sql_query(
        "INSERT INTO hookbox_processed_keys (source, provider, delivery_id) VALUES (?, ?, ?)",
    )
    .bind::<Text, _>(key.scope())
    .bind::<Text, _>(key.provider())
    .bind::<Text, _>(key.delivery_id())
    .execute(&mut conn)
    .await;
    match inserted {
        Ok(_) => true,
        Err(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        )) => false,
        Err(err) => panic!("the key is still locked by the abandoned transaction: {err}"),
    }
}

/// Connection failures are transient; a wrong URL is refused up front.
#[tokio::test]
async fn connection_failures_are_classified() {
    let refused = MysqlStore::connect(
        "mysql://root@127.0.0.1:1/test",
        MysqlOptions::new().with_pool_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(refused.is_transient(), "{refused:?}");

    let invalid = MysqlStore::connect("mysql://root@127.0.0.1:notaport/test", MysqlOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(invalid, MysqlError::Connect(_)), "{invalid:?}");
    assert!(!invalid.is_transient());

    let Some(url) = common::mysql_url().await else {
        return;
    };
    // the server answers, and refuses the login: not transient
    let host = url
        .rsplit_once('@')
        .map_or(url.trim_start_matches("mysql://"), |(_, rest)| rest)
        .split(['/', '?'])
        .next()
        .unwrap();
    let denied = MysqlStore::connect(
        &format!("mysql://hookbox_no_such_user:x@{host}/test"),
        MysqlOptions::new(),
    )
    .await
    .unwrap_err();
    assert!(!denied.is_transient(), "{denied:?}");
}

/// `migrate` reports what it applied and is a no-op the second time, also on a
/// current-thread runtime.
#[tokio::test(flavor = "current_thread")]
async fn migrate_is_idempotent_on_a_current_thread_runtime() {
    let Some(url) = common::mysql_url().await else {
        return;
    };
    let database = TestDatabase::new(&url).await;
    let store = MysqlStore::connect(&database.url(), MysqlOptions::new())
        .await
        .unwrap();
    // the tables, the outbox
    assert_eq!(store.migrate().await.unwrap(), 2);
    assert_eq!(store.migrate().await.unwrap(), 0);
    assert_eq!(
        common::count(&store, "SELECT count(*) AS n FROM hookbox_inbox").await,
        0
    );
}

/// A side effect that swallows a statement's error is reported as a store error
/// (and nothing is committed, so the retry applies), never as applied: a deadlock
/// would have rolled back the key with the transaction. A failure the side effect
/// rolled back to its own savepoint is fine. A worker's handler that does the same
/// fails its row instead of stopping the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swallowed_statement_error_is_never_reported_as_applied() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{Delivery, HandlerError, Inbox, InboxAdmin as _, ProcessError, Worked};
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let store = &fixture.store;
    let key = DedupeKey::new("swallow", "standard", "evt_swallowed");
    let outcome = store
        .process_once(&key, async |conn| {
            common::credit(conn, "acct", 100).await?;
            let _ignored = diesel::sql_query("SELECT * FROM no_such_table")
                .execute(conn)
                .await;
            Ok(())
        })
        .await;
    assert!(
        matches!(
            outcome,
            Err(ProcessError::Store(MysqlError::StatementFailed))
        ),
        "{outcome:?}"
    );
    let retried = store
        .process_once(&key, async |conn| {
            // a failure undone by the side effect's own savepoint is harmless
            let _ignored = conn
                .transaction(async |conn| {
                    diesel::sql_query("SELECT * FROM no_such_table")
                        .execute(conn)
                        .await
                })
                .await;
            common::credit(conn, "acct", 100).await?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(retried, Processed::Applied(()));
    assert_eq!(
        common::count(store, "SELECT balance AS n FROM ledger").await,
        100
    );

    async fn swallowing(
        conn: &mut AsyncMysqlConnection,
        _delivery: &Delivery,
    ) -> Result<(), HandlerError> {
        let _ignored = diesel::sql_query("SELECT * FROM no_such_table")
            .execute(conn)
            .await;
        Ok(())
    }
    store
        .receive(&delivery("evt_inbox_swallowed", "{}"))
        .await
        .unwrap();
    let worked = store.work_one(&swallowing).await.unwrap();
    let Worked::Failed {
        id,
        attempts: 1,
        dead: false,
    } = worked
    else {
        panic!("expected a failed row, got {worked:?}");
    };
    let row = store.get(id).await.unwrap().unwrap();
    assert!(row.processed_at.is_none());
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or("")
            .contains("statement failed"),
        "{:?}",
        row.last_error
    );
}

/// A copy of a delivery whose row a worker holds (locked in its batch) is answered
/// `Duplicate` at once: the receive reads before it inserts, and the read takes no
/// lock, where an `INSERT`'s duplicate check would wait for the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_of_a_row_being_worked_is_answered_at_once() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{CommitMode, Delivery, HandlerError, Inbox, Received};
    for mode in [CommitMode::PerRequest, CommitMode::default()] {
        let options = MysqlOptions::new()
            .with_commit_mode(mode)
            .with_lock_timeout(Duration::from_secs(30));
        let Some(fixture) = common::fixture(options).await else {
            return;
        };
        let store = fixture.store.clone();
        store.receive(&delivery("evt_held", "{}")).await.unwrap();
        let (holding, held) = tokio::sync::oneshot::channel::<()>();
        let holding = std::sync::Arc::new(std::sync::Mutex::new(Some(holding)));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let released = std::sync::Arc::new(tokio::sync::Mutex::new(Some(released)));
        let worker = {
            let store = store.clone();
            tokio::spawn(async move {
                let slow = async move |_conn: &mut AsyncMysqlConnection,
                                       _delivery: &Delivery|
                            -> Result<(), HandlerError> {
                    if let Some(holding) = holding.lock().unwrap().take() {
                        holding.send(()).unwrap();
                    }
                    if let Some(released) = released.lock().await.take() {
                        released.await.unwrap();
                    }
                    Ok(())
                };
                store.work_one(&slow).await.unwrap()
            })
        };
        held.await.unwrap();
        let copy = tokio::time::timeout(
            Duration::from_secs(3),
            store.receive(&delivery("evt_held", "{}")),
        )
        .await
        .expect("the copy is answered while the worker holds the row");
        assert_eq!(copy.unwrap(), Received::Duplicate, "{mode:?}");
        release.send(()).unwrap();
        worker.await.unwrap();
    }
}

#[test]
fn urls_point_at_the_test_database() {
    use common::url_for;
    assert_eq!(
        url_for("mysql://root@127.0.0.1:3306/test", "hb_1"),
        "mysql://root@127.0.0.1:3306/hb_1"
    );
    assert_eq!(
        url_for("mysql://root:p@h/test?ssl-mode=DISABLED", "hb_1"),
        "mysql://root:p@h/hb_1?ssl-mode=DISABLED"
    );
    assert_eq!(url_for("mysql://root@h", "hb_1"), "mysql://root@h/hb_1");
    assert_eq!(
        url_for("mysql://root@h?ssl-mode=DISABLED", "hb_1"),
        "mysql://root@h/hb_1?ssl-mode=DISABLED"
    );
}

/// A handler whose statement deadlocks has InnoDB roll back the whole batch, its
/// savepoints with it. In a batch run without savepoints that is a redo like any
/// failure, and the row applies on the second run; in a batch with savepoints (a
/// retried row) the batch fails as a transient error, counts no attempt, and leaves
/// every row due again; the worker goes on either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deadlocked_handler_fails_its_batch_transiently() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{BatchLimits, Delivery, HandlerError, Inbox, InboxAdmin as _, Worked};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let store = fixture.store.clone();
    common::exec(&store, "INSERT INTO ledger (account) VALUES ('x'), ('y')").await;
    // locks the first account, waits (the first two calls only) for the other
    // handler to hold its first, then locks the second: one of the two is chosen as
    // the deadlock's victim
    let crossing = || {
        let both_hold_one = Arc::new(tokio::sync::Barrier::new(2));
        let calls = Arc::new(AtomicUsize::new(0));
        async move |conn: &mut AsyncMysqlConnection,
                    delivery: &Delivery|
                    -> Result<(), HandlerError> {
            let body = String::from_utf8_lossy(delivery.body()).into_owned();
            let (first, second) = body.split_once(',').unwrap();
            let wait = calls.fetch_add(1, Ordering::SeqCst) < 2;
            for (i, account) in [first, second].into_iter().enumerate() {
                diesel::sql_query("UPDATE ledger SET balance = balance + 1 WHERE account = ?")
                    .bind::<Text, _>(account)
                    .execute(conn)
                    .await?;
                if i == 0 && wait {
                    both_hold_one.wait().await;
                }
            }
            Ok(())
        }
    };

    // fresh rows: the victim's batch runs again with savepoints and applies
    store.receive(&delivery("evt_xy", "x,y")).await.unwrap();
    store.receive(&delivery("evt_yx", "y,x")).await.unwrap();
    let handler = crossing();
    let (a, b) = tokio::join!(
        store.work_batch(&handler, BatchLimits::per_row()),
        store.work_batch(&handler, BatchLimits::per_row()),
    );
    for outcomes in [a.unwrap(), b.unwrap()] {
        assert!(
            matches!(
                outcomes[..],
                [hookbox_core::spi::RowOutcome {
                    result: hookbox_core::spi::RowResult::Processed,
                    ..
                }]
            ),
            "{outcomes:?}"
        );
    }

    // retried rows run in savepoints: the victim's batch fails, transiently
    store.receive(&delivery("evt_xy_2", "x,y")).await.unwrap();
    store.receive(&delivery("evt_yx_2", "y,x")).await.unwrap();
    common::exec(
        &store,
        "UPDATE hookbox_inbox SET attempts = 1 WHERE processed_at IS NULL",
    )
    .await;
    let handler = crossing();
    let (a, b) = tokio::join!(
        store.work_batch(&handler, BatchLimits::per_row()),
        store.work_batch(&handler, BatchLimits::per_row()),
    );
    let (ok, err) = match (a, b) {
        (Ok(ok), Err(err)) | (Err(err), Ok(ok)) => (ok, err),
        other => panic!("one batch is the deadlock's victim: {other:?}"),
    };
    assert!(err.is_transient(), "{err:?}");
    assert!(
        hookbox_core::error_chain(&err).contains("Deadlock"),
        "{err:?}"
    );
    assert_eq!(ok.len(), 1);
    // the victim's row is due again, no attempt counted, and is applied next
    let pending = store
        .list(hookbox_core::InboxFilter::pending(), 10)
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 1);
    let plain =
        async |conn: &mut AsyncMysqlConnection, _delivery: &Delivery| -> Result<(), HandlerError> {
            common::credit(conn, "x", 1).await?;
            Ok(())
        };
    assert!(matches!(
        store.work_one(&plain).await.unwrap(),
        Worked::Processed { .. }
    ));
}
