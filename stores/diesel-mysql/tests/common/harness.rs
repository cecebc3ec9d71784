//! The conformance harness: a fresh database per check on the server of
//! `HOOKBOX_MYSQL_URL`, with the ledger of `create_database`.

use diesel::sql_types::Text;
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection as _,
};
use hookbox_core::testing::{Capabilities, Harness, Reclaim, Rotation, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey, IdempotencyStore};
use hookbox_diesel_mysql::{MysqlError, MysqlOptions, MysqlStore, diesel, diesel_async};
use hookbox_standard::{Standard, StandardSigner};

use super::{TestDatabase, URL_VAR, credit, mysql_url, store};

/// The conformance harness for [`MysqlStore`].
pub struct MysqlHarness {
    store: MysqlStore,
    // dropped after the store's pool: drops the database
    _database: TestDatabase,
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

impl Harness for MysqlHarness {
    type Conn = AsyncMysqlConnection;
    type Error = MysqlError;
    type Store = MysqlStore;

    // a worker's row is locked by its transaction (`FOR UPDATE SKIP LOCKED`)
    const CAPABILITIES: Capabilities = Capabilities {
        reclaim: Reclaim::AtOnce,
    };

    fn available() -> BoxFuture<'static, bool> {
        Box::pin(async { mysql_url().await.is_some() })
    }

    fn rotation() -> Option<Rotation> {
        Rotation::from_secrets(Standard::new, StandardSigner::new)
    }

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            // `available` found the server first
            let url = std::env::var(URL_VAR).expect("checked by `available`");
            let database = TestDatabase::new(&url).await;
            let store = store(&database, options(&config)).await;
            Self {
                store,
                _database: database,
            }
        })
    }

    fn store(&self) -> &MysqlStore {
        &self.store
    }

    fn credit<'c>(
        conn: &'c mut AsyncMysqlConnection,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), MysqlError>> {
        credit(conn, account, amount)
    }

    fn set_plan<'c>(
        conn: &'c mut AsyncMysqlConnection,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), MysqlError>> {
        set_plan(conn, account, plan)
    }

    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, MysqlError>> {
        balance(&self.store, account)
    }

    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, MysqlError>> {
        plan(&self.store, account)
    }

    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()> {
        refuse_inbox_row(&self.store, delivery_id)
    }

    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        fail_commits_crediting(&self.store, account)
    }

    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, MysqlError>> {
        claim_in_own_transaction(&self.store, &self.store, key, account, amount)
    }
}

/// The options a check's configuration asks for.
pub fn options(config: &SuiteConfig) -> MysqlOptions {
    MysqlOptions::new()
        .with_max_connections(8)
        .with_retention(config.retention.clone())
        .with_retry(config.retry)
        .with_lock_timeout(config.lock_timeout)
}

/// Sets `account`'s plan on `conn`, creating the account first.
pub fn set_plan<'c>(
    conn: &'c mut AsyncMysqlConnection,
    account: &'c str,
    plan: &'c str,
) -> BoxFuture<'c, Result<(), MysqlError>> {
    Box::pin(async move {
        diesel::sql_query(
            "INSERT INTO ledger (account, plan) VALUES (?, ?) \
             ON DUPLICATE KEY UPDATE plan = VALUES(plan)",
        )
        .bind::<Text, _>(account)
        .bind::<Text, _>(plan)
        .execute(conn)
        .await?;
        Ok(())
    })
}

/// Reads a balance on a pooled connection of `store`; 0 for no account.
pub fn balance<'a>(
    store: &'a MysqlStore,
    account: &'a str,
) -> BoxFuture<'a, Result<i64, MysqlError>> {
    Box::pin(async move {
        let mut conn = store.connection().await?;
        let rows: Vec<Balance> = diesel::sql_query("SELECT balance FROM ledger WHERE account = ?")
            .bind::<Text, _>(account)
            .load(&mut *conn)
            .await?;
        Ok(rows.into_iter().next().map_or(0, |row| row.balance))
    })
}

/// Reads a plan on a pooled connection of `store`.
pub fn plan<'a>(
    store: &'a MysqlStore,
    account: &'a str,
) -> BoxFuture<'a, Result<Option<String>, MysqlError>> {
    Box::pin(async move {
        let mut conn = store.connection().await?;
        let rows: Vec<Plan> = diesel::sql_query("SELECT plan FROM ledger WHERE account = ?")
            .bind::<Text, _>(account)
            .load(&mut *conn)
            .await?;
        Ok(rows.into_iter().next().and_then(|row| row.plan))
    })
}

/// Makes the server refuse the inbox row of `delivery_id` (a trigger that signals).
pub fn refuse_inbox_row<'a>(store: &'a MysqlStore, delivery_id: &'a str) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        let id = delivery_id.replace('\'', "''");
        let mut conn = store.connection().await.unwrap();
        // the server parses a trigger's body as one statement
        conn.batch_execute(&format!(
            "CREATE TRIGGER hookbox_test_refuse BEFORE INSERT ON hookbox_inbox \
             FOR EACH ROW BEGIN IF NEW.delivery_id = '{id}' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; \
             END IF; END"
        ))
        .await
        .unwrap();
    })
}

/// Makes every transaction that credits `account` fail to commit.
///
/// MySQL has no deferred constraint to fail a COMMIT with: the write kills its own
/// connection instead, so the transaction never commits (the server rolls it back)
/// and the batch fails, as a failed commit would.
pub fn fail_commits_crediting<'a>(store: &'a MysqlStore, account: &'a str) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        let account = account.replace('\'', "''");
        let mut conn = store.connection().await.unwrap();
        for event in ["INSERT", "UPDATE"] {
            conn.batch_execute(&format!(
                "CREATE TRIGGER hookbox_test_fail_commit_{event} BEFORE {event} ON ledger \
                 FOR EACH ROW BEGIN IF NEW.account = '{account}' THEN \
                 KILL CONNECTION_ID(); END IF; END"
            ))
            .await
            .unwrap();
        }
    })
}

/// The caller-owned form: a transaction on a connection of `store`, the claim
/// through `claims` (the store itself, or a cache in front of it), the credit when
/// the claim is new.
pub fn claim_in_own_transaction<'a, S>(
    store: &'a MysqlStore,
    claims: &'a S,
    key: &'a DedupeKey,
    account: &'a str,
    amount: i64,
) -> BoxFuture<'a, Result<Claim, MysqlError>>
where
    S: IdempotencyStore<Conn = AsyncMysqlConnection, Error = MysqlError>,
{
    Box::pin(async move {
        let mut conn = store.connection().await?;
        conn.transaction(async |conn| {
            let claim = claims.claim(conn, key).await?;
            if claim == Claim::New {
                credit(conn, account, amount).await?;
            }
            Ok(claim)
        })
        .await
    })
}
