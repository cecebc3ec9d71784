//! PostgreSQL-specific behaviour: the typed lock timeout, connections closed when a
//! transaction is abandoned, connection failures, migrations, and a statement error
//! a side effect swallowed. (The conformance suite runs in `conformance.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use common::TestSchema;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use hookbox_core::{DedupeKey, IdempotencyStore};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, diesel, diesel_async};

/// A lock wait that outlasts `lock_timeout` is the typed, transient `LockTimeout`,
/// not a hang and not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_copy_times_out_as_a_transient_lock_timeout() {
    use hookbox_core::{ProcessError, Processed, StoreError};
    let options = PgOptions::new().with_lock_timeout(Duration::from_millis(300));
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
        Err(ProcessError::Store(err @ PgError::LockTimeout(_))) => {
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
    use hookbox_core::Processed;
    let Some(fixture) = common::fixture(PgOptions::new()).await else {
        return;
    };
    let (store, schema) = (&fixture.store, &fixture.schema);

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
    assert!(key_is_free(schema, &key).await);
    assert_eq!(
        common::count(store, "SELECT count(*) AS n FROM ledger").await,
        0
    );

    let key = DedupeKey::new("drop", "standard", "evt_dropped_caller_owned");
    let abandoned = tokio::time::timeout(Duration::from_millis(200), async {
        let mut conn = store.connection().await?;
        conn.transaction(async |conn| {
            store.claim(conn, &key).await?;
            std::future::pending::<Result<(), PgError>>().await
        })
        .await
    })
    .await;
    assert!(abandoned.is_err());
    assert!(key_is_free(schema, &key).await);
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
async fn key_is_free(schema: &TestSchema, key: &DedupeKey) -> bool {
    use diesel_async::SimpleAsyncConnection;
    let mut conn = AsyncPgConnection::establish(&schema.url).await.unwrap();
    conn.batch_execute(&format!(
        "SET search_path TO \"{}\"; SET lock_timeout = '2s'",
        schema.name
    ))
    .await
    .unwrap();
    let inserted = diesel::sql_query(
        "INSERT INTO hookbox_processed_keys (source, provider, delivery_id) \
         VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind::<Text, _>(key.scope())
    .bind::<Text, _>(key.provider())
    .bind::<Text, _>(key.delivery_id())
    .execute(&mut conn)
    .await
    .expect("the key is still locked by the abandoned transaction");
    inserted == 1
}

/// Connection failures are transient; a bad schema name is refused up front.
#[tokio::test]
async fn connection_failures_are_classified() {
    use hookbox_core::StoreError;
    let refused = PgStore::connect(
        "postgres://postgres@127.0.0.1:1/test",
        PgOptions::new().with_pool_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(refused.is_transient(), "{refused:?}");

    let invalid = PgStore::connect(
        "postgres://postgres@127.0.0.1:1/test",
        PgOptions::new().with_schema("a\"; DROP TABLE x; --"),
    )
    .await
    .unwrap_err();
    assert!(matches!(invalid, PgError::InvalidSchema { .. }));
    assert!(!invalid.is_transient());
}

/// `migrate` reports what it applied and is a no-op the second time, also on a
/// current-thread runtime.
#[tokio::test(flavor = "current_thread")]
async fn migrate_is_idempotent_on_a_current_thread_runtime() {
    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let store = PgStore::connect(&url, PgOptions::new().with_schema(&schema.name))
        .await
        .unwrap();
    // the schema, the columns added since, the outbox, the console's index
    assert_eq!(store.migrate().await.unwrap(), 4);
    assert_eq!(store.migrate().await.unwrap(), 0);
    assert_eq!(
        common::count(&store, "SELECT count(*) AS n FROM hookbox_inbox").await,
        0
    );
}

/// PostgreSQL answers `COMMIT` after a failed statement with a silent rollback. A
/// side effect that swallows the statement's error is reported as a store error (and
/// nothing is committed, so the retry applies), never as applied; a failure the side
/// effect rolled back to its own savepoint is fine. A worker's handler that does the
/// same fails its row instead of stopping the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swallowed_statement_error_is_never_reported_as_applied() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{
        Delivery, HandlerError, Inbox, InboxAdmin as _, ProcessError, Processed, Worked,
    };
    let Some(fixture) = common::fixture(PgOptions::new()).await else {
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
        matches!(outcome, Err(ProcessError::Store(PgError::StatementFailed))),
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
        conn: &mut AsyncPgConnection,
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

/// Headers written before the core's codec went through `from_utf8_lossy` and were
/// kept as UTF-8 text: they read back as written. The same headers received now are
/// stored in the shared form (base64 for what is not ASCII), so a value that is not
/// UTF-8 is no longer changed on the way in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn headers_written_before_the_shared_codec_read_back_as_written() {
    use hookbox_core::bytes::Bytes;
    use hookbox_core::http::{HeaderName, HeaderValue};
    use hookbox_core::{Inbox as _, InboxAdmin as _, KeptHeaders, VerifiedDelivery};

    #[derive(diesel::QueryableByName)]
    struct Headers {
        #[diesel(sql_type = Text)]
        headers: String,
    }

    let Some(fixture) = common::fixture(PgOptions::new()).await else {
        return;
    };
    let store = &fixture.store;
    common::exec(
        store,
        r#"INSERT INTO hookbox_inbox (source, provider, delivery_id, body, headers)
           VALUES ('conformance', 'standard', 'evt_old', '\x7b7d', '[["x-odd","café"],["x-lossy","caf�"]]')"#,
    )
    .await;
    let old = store
        .list(hookbox_core::InboxFilter::all(), 1)
        .await
        .unwrap();
    let headers = &old[0].headers;
    assert_eq!(headers.get("x-odd").unwrap().as_bytes(), "café".as_bytes());
    assert_eq!(
        headers.get("x-lossy").unwrap().as_bytes(),
        "caf\u{fffd}".as_bytes()
    );

    let mut obs_text = KeptHeaders::default();
    obs_text.push(
        HeaderName::from_static("x-odd"),
        HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    );
    let now = VerifiedDelivery::new(
        DedupeKey::new("conformance", "standard", "evt_now"),
        Bytes::from_static(b"{}"),
        obs_text.clone(),
    );
    store.receive(&now).await.unwrap();
    let mut conn = store.connection().await.unwrap();
    let stored =
        diesel::sql_query("SELECT headers FROM hookbox_inbox WHERE delivery_id = 'evt_now'")
            .get_result::<Headers>(&mut *conn)
            .await
            .unwrap();
    assert_eq!(stored.headers, r#"[["x-odd",{"base64":"Y2Fm6Q=="}]]"#);
    drop(conn);
    let rows = store
        .list(hookbox_core::InboxFilter::all(), 1)
        .await
        .unwrap();
    assert_eq!(rows[0].headers, obs_text);
}
