//! The conformance suite of `hookbox-core` against a real PostgreSQL, one fresh
//! schema per check.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use common::TestSchema;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use hookbox_core::testing::{Harness, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey, IdempotencyStore, Provider, Signer};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, diesel, diesel_async};

struct PgHarness {
    store: PgStore,
    // dropped after the store's pool: drops the schema
    _schema: TestSchema,
}

#[derive(diesel::QueryableByName)]
struct Balance {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    balance: i64,
}

#[derive(diesel::QueryableByName)]
struct Plan {
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    plan: Option<String>,
}

impl Harness for PgHarness {
    type Conn = AsyncPgConnection;
    type Error = PgError;
    type Store = PgStore;

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            // each check calls `common::pg_url` first and returns when it skips
            let url = std::env::var(common::URL_VAR).expect("checked by the test");
            let schema = TestSchema::new(&url).await;
            let options = PgOptions::new()
                .max_connections(8)
                .retention(config.retention)
                .retry(config.retry);
            let store = common::store(&url, &schema.name, options).await;
            Self {
                store,
                _schema: schema,
            }
        })
    }

    fn store(&self) -> &PgStore {
        &self.store
    }

    fn credit<'c>(
        conn: &'c mut AsyncPgConnection,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), PgError>> {
        common::credit(conn, account, amount)
    }

    fn set_plan<'c>(
        conn: &'c mut AsyncPgConnection,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), PgError>> {
        Box::pin(async move {
            diesel::sql_query(
                "INSERT INTO ledger (account, plan) VALUES ($1, $2) \
                 ON CONFLICT (account) DO UPDATE SET plan = EXCLUDED.plan",
            )
            .bind::<Text, _>(account)
            .bind::<Text, _>(plan)
            .execute(conn)
            .await?;
            Ok(())
        })
    }

    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, PgError>> {
        Box::pin(async move {
            let mut conn = self.store.connection().await?;
            let rows: Vec<Balance> =
                diesel::sql_query("SELECT balance FROM ledger WHERE account = $1")
                    .bind::<Text, _>(account)
                    .load(&mut *conn)
                    .await?;
            Ok(rows.into_iter().next().map_or(0, |row| row.balance))
        })
    }

    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, PgError>> {
        Box::pin(async move {
            let mut conn = self.store.connection().await?;
            let rows: Vec<Plan> = diesel::sql_query("SELECT plan FROM ledger WHERE account = $1")
                .bind::<Text, _>(account)
                .load(&mut *conn)
                .await?;
            Ok(rows.into_iter().next().and_then(|row| row.plan))
        })
    }

    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, PgError>> {
        Box::pin(async move {
            let mut conn = self.store.connection().await?;
            conn.transaction(async |conn| {
                let claim = self.store.claim(conn, key).await?;
                if claim == Claim::New {
                    common::credit(conn, account, amount).await?;
                }
                Ok(claim)
            })
            .await
        })
    }
}

/// One test per check, each skipped (or failed, in CI) without a server.
macro_rules! checks {
    ($($name:ident => $check:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                if common::pg_url().await.is_none() {
                    return;
                }
                $check.await;
            }
        )*
    };
}

use hookbox_core::testing as suite;

checks! {
    same_event_twice_applies_once => suite::check_same_event_twice_applies_once::<PgHarness>();
    keys_are_scoped_by_source_and_provider => suite::check_keys_are_scoped_by_source_and_provider::<PgHarness>();
    concurrent_copies_apply_once => suite::check_concurrent_copies_apply_once::<PgHarness>(16);
    claim_inside_callers_transaction => suite::check_claim_inside_callers_transaction::<PgHarness>();
    failing_side_effect_releases_the_claim => suite::check_failing_side_effect_releases_the_claim::<PgHarness>();
    side_effect_is_invisible_until_commit => suite::check_side_effect_is_invisible_until_commit::<PgHarness>();
    shuffled_updates_end_on_the_latest_version => suite::check_shuffled_updates_end_on_the_latest_version::<PgHarness>();
    timestamp_guard_reports_ties_as_unknown => suite::check_timestamp_guard_reports_ties_as_unknown::<PgHarness>();
    version_guard_is_strict_and_per_object => suite::check_version_guard_is_strict_and_per_object::<PgHarness>();
    version_rolls_back_with_the_transaction => suite::check_version_rolls_back_with_the_transaction::<PgHarness>();
    day_old_replay_is_still_caught => suite::check_day_old_replay_is_still_caught::<PgHarness>();
    purge_keeps_keys_for_the_provider_minimum => suite::check_purge_keeps_keys_for_the_provider_minimum::<PgHarness>();
    inbox_receive_dedupes => suite::check_inbox_receive_dedupes::<PgHarness>(16);
    inbox_keeps_raw_bytes_and_headers => suite::check_inbox_keeps_raw_bytes_and_headers::<PgHarness>();
    poison_event_dead_letters_while_others_flow => suite::check_poison_event_dead_letters_while_others_flow::<PgHarness>();
    replay_all => suite::check_replay_all::<PgHarness>();
    worker_killed_mid_transaction_applies_once => suite::check_worker_killed_mid_transaction_applies_once::<PgHarness>();
    concurrent_workers_apply_each_row_once => suite::check_concurrent_workers_apply_each_row_once::<PgHarness>(200, 4);
    inbox_keeps_correlation_id_and_signed_at => suite::check_inbox_keeps_correlation_id_and_signed_at::<PgHarness>();
    one_handler_serves_both_modes => suite::check_one_handler_serves_both_modes::<PgHarness>();
    rotated_copies_are_one_event => rotated_copies();
}

/// Checklist 6: one delivery signed once with the old secret and once with the new
/// one during a rotation verifies under both and is one event.
async fn rotated_copies() {
    use hookbox_standard::{Standard, StandardSigner};
    let (old, new) = (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_dGhlIG5ldyBzZWNyZXQgYWZ0ZXIgcm90YXRpb24=",
    );
    let receiver = Standard::new([old, new]).unwrap();
    let now = hookbox_core::time::OffsetDateTime::now_utc();
    let body = br#"{"account":"acct"}"#;
    let verify = |secret: &str| {
        let signed =
            StandardSigner::new(secret)
                .unwrap()
                .sign("msg_rotated", now.unix_timestamp(), body);
        receiver
            .verify(&signed.to_header_map(), body.as_slice().into(), now)
            .unwrap()
    };
    suite::check_rotated_copies_are_one_event::<PgHarness>(verify(old), verify(new)).await;
}

/// A lock wait that outlasts `lock_timeout` is the typed, transient `LockTimeout`,
/// not a hang and not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_copy_times_out_as_a_transient_lock_timeout() {
    use hookbox_core::{ProcessError, Processed, StoreError};
    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let store = common::store(
        &url,
        &schema.name,
        PgOptions::new().lock_timeout(Duration::from_millis(300)),
    )
    .await;
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
    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let store = common::store(&url, &schema.name, PgOptions::new()).await;

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
    assert!(key_is_free(&url, &schema.name, &key).await);
    assert_eq!(
        common::count(&store, "SELECT count(*) AS n FROM ledger").await,
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
    assert!(key_is_free(&url, &schema.name, &key).await);
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
async fn key_is_free(url: &str, schema: &str, key: &DedupeKey) -> bool {
    use diesel_async::SimpleAsyncConnection;
    let mut conn = AsyncPgConnection::establish(url).await.unwrap();
    conn.batch_execute(&format!(
        "SET search_path TO \"{schema}\"; SET lock_timeout = '2s'"
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
        PgOptions::new().pool_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(refused.is_transient(), "{refused:?}");

    let invalid = PgStore::connect(
        "postgres://postgres@127.0.0.1:1/test",
        PgOptions::new().schema("a\"; DROP TABLE x; --"),
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
    let store = PgStore::connect(&url, PgOptions::new().schema(&schema.name))
        .await
        .unwrap();
    // the schema and the columns added since
    assert_eq!(store.migrate().await.unwrap(), 2);
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
    use hookbox_core::{Delivery, HandlerError, Inbox, ProcessError, Processed, Worked};
    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let store = common::store(&url, &schema.name, PgOptions::new()).await;
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
        common::count(&store, "SELECT balance AS n FROM ledger").await,
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

/// `list` filters and orders rows the way an operator reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_shows_pending_processed_and_dead_rows() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{Inbox as _, InboxFilter, RetryPolicy};
    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let retry = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let store = common::store(&url, &schema.name, PgOptions::new().retry(retry)).await;
    for (id, body) in [("a", "{}"), ("b", "poison"), ("c", "{}")] {
        store.receive(&delivery(id, body)).await.unwrap();
    }
    while store.work_one(&fail_on_poison).await.unwrap() != hookbox_core::Worked::Idle {}
    store.receive(&delivery("d", "{}")).await.unwrap();

    let ids = |rows: Vec<hookbox_core::StoredDelivery>| {
        rows.iter()
            .map(|r| r.key.delivery_id().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store.list(InboxFilter::Pending, 10).await.unwrap()),
        ["d"]
    );
    assert_eq!(ids(store.list(InboxFilter::Dead, 10).await.unwrap()), ["b"]);
    assert_eq!(
        ids(store.list(InboxFilter::Processed, 10).await.unwrap()).len(),
        2
    );
    assert_eq!(
        ids(store.list(InboxFilter::All, 10).await.unwrap()),
        ["d", "c", "b", "a"]
    );
    assert_eq!(
        ids(store.list(InboxFilter::All, 2).await.unwrap()),
        ["d", "c"]
    );
}

/// Fails on a `poison` body, credits otherwise.
async fn fail_on_poison(
    conn: &mut AsyncPgConnection,
    delivery: &hookbox_core::Delivery,
) -> Result<(), hookbox_core::HandlerError> {
    if delivery.body().as_ref() == b"poison" {
        return Err("poison".into());
    }
    common::credit(conn, "acct", 1).await?;
    Ok(())
}

/// A worker keeps a handler's error with its causes (`{err:#}`), the text an operator
/// reads in `last_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn last_error_keeps_the_cause_chain() {
    use hookbox_core::testing::delivery;
    use hookbox_core::{Delivery, HandlerError, Inbox as _, Worked};

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("crediting failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    let Some(url) = common::pg_url().await else {
        return;
    };
    let schema = TestSchema::new(&url).await;
    let store = common::store(&url, &schema.name, PgOptions::new()).await;
    store.receive(&delivery("evt_chain", "{}")).await.unwrap();
    let failing = async |conn: &mut AsyncPgConnection, _: &Delivery| -> Result<(), HandlerError> {
        // written, then rolled back with the failure
        common::credit(conn, "acct", 100).await?;
        Err(Outer(std::io::Error::other("ledger offline")).into())
    };
    let Worked::Failed {
        id, attempts: 1, ..
    } = store.work_one(&failing).await.unwrap()
    else {
        panic!("expected a failed row");
    };
    let row = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        row.last_error.as_deref(),
        Some("crediting failed: ledger offline")
    );
    assert_eq!(
        common::count(&store, "SELECT count(*) AS n FROM ledger").await,
        0
    );
}
