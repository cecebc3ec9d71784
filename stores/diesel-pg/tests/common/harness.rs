//! The conformance harness: a fresh schema per check on the server of
//! `HOOKBOX_PG_URL`, with the ledger of `create_schema`.

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection as _};
use hookbox_core::testing::{Capabilities, Harness, Reclaim, Rotation, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey, IdempotencyStore};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, diesel, diesel_async};
use hookbox_standard::{Standard, StandardSigner};

use super::{TestSchema, URL_VAR, credit, pg_url, store};

/// The conformance harness for [`PgStore`].
pub struct PgHarness {
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

    // a worker's row is locked by its transaction (`FOR UPDATE SKIP LOCKED`)
    const CAPABILITIES: Capabilities = Capabilities {
        reclaim: Reclaim::AtOnce,
    };

    fn available() -> BoxFuture<'static, bool> {
        Box::pin(async { pg_url().await.is_some() })
    }

    fn rotation() -> Option<Rotation> {
        Rotation::from_secrets(Standard::new, StandardSigner::new)
    }

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            // `available` found the server first
            let url = std::env::var(URL_VAR).expect("checked by `available`");
            let schema = TestSchema::new(&url).await;
            let options = PgOptions::new()
                .with_max_connections(8)
                .with_retention(config.retention)
                .with_retry(config.retry)
                .with_lock_timeout(config.lock_timeout);
            let store = store(&url, &schema.name, options).await;
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
        credit(conn, account, amount)
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

    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let id = delivery_id.replace('\'', "''");
            let mut conn = self.store.connection().await.unwrap();
            conn.batch_execute(&format!(
                "CREATE FUNCTION hookbox_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.delivery_id = '{id}' THEN RAISE EXCEPTION 'refused by the test'; \
                 END IF; RETURN NEW; END $$; \
                 CREATE TRIGGER hookbox_test_refuse BEFORE INSERT ON hookbox_inbox \
                 FOR EACH ROW EXECUTE FUNCTION hookbox_test_refuse();"
            ))
            .await
            .unwrap();
        })
    }

    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let account = account.replace('\'', "''");
            let mut conn = self.store.connection().await.unwrap();
            // a constraint trigger deferred to commit: the handlers' savepoints
            // release, the transaction's COMMIT fails
            conn.batch_execute(&format!(
                "CREATE FUNCTION hookbox_test_fail_commit() RETURNS trigger \
                   LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused by the test'; END $$; \
                 CREATE CONSTRAINT TRIGGER hookbox_test_fail_commit AFTER INSERT OR UPDATE ON ledger \
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
                   WHEN (NEW.account = '{account}') EXECUTE FUNCTION hookbox_test_fail_commit();"
            ))
            .await
            .unwrap();
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
                    credit(conn, account, amount).await?;
                }
                Ok(claim)
            })
            .await
        })
    }
}
