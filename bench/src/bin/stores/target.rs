//! What the rounds run against: a hookbox store and, beside it on the same database,
//! a raw pool set up as the store's; the one claim transaction each side runs; the
//! ledger their side effects bump.
//!
//! The raw side is the caller-owned form by hand: a transaction of its own on the raw
//! pool, in it the store's own claim statement (`IdempotencyStore::claim`, one
//! `INSERT … ON CONFLICT DO NOTHING`, built and cached as the store builds it), the
//! same `UPDATE`, the commit. What hookbox's `process_once` adds is the difference.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use deadpool::Runtime;
use diesel::ConnectionError;
use diesel::connection::InstrumentationEvent;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use diesel::{ExpressionMethods as _, QueryDsl as _, QueryableByName};
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{
    AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_bench::BoxErr;
use hookbox_bench::services::PgSchema;
use hookbox_core::{
    Claim, DedupeKey, Delivery, HandlerError, IdempotencyStore as _, Inbox as _, VerifiedDelivery,
    Worked, error_chain,
};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore};
use hookbox_sqlite::{
    ImmediateTransaction as _, SqliteError, SqliteOptions, SqliteStore, Synchronous, blocking,
};

type SqliteConn = hookbox_sqlite::Conn;

/// The ledger rows side effects update: one per task (or worker row), so concurrent
/// transactions never wait on each other's row lock.
pub(crate) const ACCOUNTS: [&str; 16] = [
    "acct_00", "acct_01", "acct_02", "acct_03", "acct_04", "acct_05", "acct_06", "acct_07",
    "acct_08", "acct_09", "acct_10", "acct_11", "acct_12", "acct_13", "acct_14", "acct_15",
];

diesel::table! {
    /// The side effects' table.
    bench_ledger (account) {
        /// The account (`acct_00` … `acct_15`).
        account -> Text,
        /// One per committed side effect.
        balance -> BigInt,
    }
}

/// The ledger table `table` with a zero balance for each of [`ACCOUNTS`].
fn ledger_sql(table: &str) -> String {
    let values: Vec<String> = ACCOUNTS.iter().map(|a| format!("('{a}')")).collect();
    format!(
        "CREATE TABLE {table} (account TEXT PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0); \
         INSERT INTO {table} (account) VALUES {}",
        values.join(", ")
    )
}

/// The key of claim `n` of task `task` in the run labelled `label`.
pub(crate) fn bench_key(label: &str, task: usize, n: u64) -> DedupeKey {
    DedupeKey::new(
        "bench",
        "standard",
        format!("evt_{label}_{task:02}_{n:010}"),
    )
}

/// The side effect on SQLite: one row, `balance + 1`.
async fn sqlite_bump(conn: &mut SqliteConn, account: &str) -> diesel::QueryResult<usize> {
    diesel::update(bench_ledger::table.find(account))
        .set(bench_ledger::balance.eq(bench_ledger::balance + 1))
        .execute(conn)
        .await
}

/// The side effect of `process_once_blocking`: [`sqlite_bump`]'s statement, run by
/// sync diesel on the blocking thread that runs the whole transaction.
fn sqlite_bump_blocking(conn: &mut SqliteConnection, account: &str) -> diesel::QueryResult<usize> {
    // spelled out: diesel-async's `RunQueryDsl` is in scope too, for the other paths
    diesel::RunQueryDsl::execute(
        diesel::update(bench_ledger::table.find(account))
            .set(bench_ledger::balance.eq(bench_ledger::balance + 1)),
        conn,
    )
}

/// The side effect on Postgres: the same statement.
async fn pg_bump(conn: &mut AsyncPgConnection, account: &str) -> diesel::QueryResult<usize> {
    diesel::update(bench_ledger::table.find(account))
        .set(bench_ledger::balance.eq(bench_ledger::balance + 1))
        .execute(conn)
        .await
}

/// The worker's handler on SQLite: the side effect, on an account picked by the
/// delivery's number.
async fn sqlite_handler(conn: &mut SqliteConn, delivery: &Delivery) -> Result<(), HandlerError> {
    sqlite_bump(conn, account_of(delivery)).await?;
    Ok(())
}

/// The worker's handler on Postgres.
async fn pg_handler(conn: &mut AsyncPgConnection, delivery: &Delivery) -> Result<(), HandlerError> {
    pg_bump(conn, account_of(delivery)).await?;
    Ok(())
}

/// The account a worker row updates: by the number that ends its delivery id
/// ([`bench_key`]), so consecutive rows, which workers take side by side, update
/// different accounts.
fn account_of(delivery: &Delivery) -> &'static str {
    let n = delivery
        .delivery_id()
        .rsplit('_')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    ACCOUNTS[(n % ACCOUNTS.len() as u64) as usize]
}

/// The raw transaction on SQLite, on `conn`: `BEGIN IMMEDIATE` as the store's, its
/// claim, the side effect, the commit. `true` when applied.
async fn sqlite_raw_tx(
    store: &SqliteStore,
    conn: &mut SqliteConn,
    key: &DedupeKey,
    account: &'static str,
) -> Result<bool, BoxErr> {
    // the store's own error type: the claim's, and diesel's by `From`
    let applied = conn
        .immediate_transaction(async |conn: &mut SqliteConn| -> Result<bool, SqliteError> {
            if store.claim(conn, key).await? == Claim::Duplicate {
                return Ok(false);
            }
            sqlite_bump(conn, account).await?;
            Ok(true)
        })
        .await?;
    Ok(applied)
}

/// The raw transaction on Postgres, on `conn`.
async fn pg_raw_tx(
    store: &PgStore,
    conn: &mut AsyncPgConnection,
    key: &DedupeKey,
    account: &'static str,
) -> Result<bool, BoxErr> {
    let applied = conn
        .transaction(
            async |conn: &mut AsyncPgConnection| -> Result<bool, PgError> {
                if store.claim(conn, key).await? == Claim::Duplicate {
                    return Ok(false);
                }
                pg_bump(conn, account).await?;
                Ok(true)
            },
        )
        .await?;
    Ok(applied)
}

/// A pool set up as `hookbox-sqlite`'s: deadpool, `RecyclingMethod::Fast`, and each
/// connection opened by the store's own `blocking::connect` with `options`.
fn raw_sqlite_pool(
    path: &str,
    options: &SqliteOptions,
    size: usize,
) -> Result<Pool<SqliteConn>, BoxErr> {
    let mut config = ManagerConfig::<SqliteConn>::default();
    config.recycling_method = RecyclingMethod::Fast;
    let options = options.clone();
    config.custom_setup = Box::new(move |url| {
        let (url, options) = (url.to_string(), options.clone());
        Box::pin(async move {
            let opened = tokio::task::spawn_blocking(move || blocking::connect(url, &options))
                .await
                .map_err(|err| ConnectionError::BadConnection(err.to_string()))?;
            match opened {
                Ok(conn) => Ok(SqliteConn::new(conn)),
                Err(SqliteError::Connect(err)) => Err(err),
                Err(err) => Err(ConnectionError::BadConnection(error_chain(&err))),
            }
        })
    });
    let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(path, config);
    Ok(Pool::builder(manager).max_size(size).build()?)
}

/// A pool set up as `hookbox-diesel-pg`'s for `options`: deadpool on tokio with its
/// pool timeout, `RecyclingMethod::Fast`, its `lock_timeout` and `search_path` on
/// every new connection; without the store's statement-failure instrumentation.
fn raw_pg_pool(url: &str, options: &PgOptions) -> Result<Pool<AsyncPgConnection>, BoxErr> {
    let mut setup = format!(
        "SET lock_timeout = '{}ms'",
        options.lock_timeout().as_millis()
    );
    if let Some(schema) = options.schema() {
        setup.push_str(&format!("; SET search_path TO \"{schema}\""));
    }
    let setup: Arc<str> = setup.into();
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |url| {
        let url = url.to_string();
        let setup = Arc::clone(&setup);
        Box::pin(async move {
            let mut conn = AsyncPgConnection::establish(&url).await?;
            let _ = conn.batch_execute("SET lc_messages TO 'C'").await;
            conn.batch_execute(&setup)
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::new_with_config(url, config);
    let timeout = Some(options.pool_timeout());
    Ok(Pool::builder(manager)
        .max_size(options.max_connections())
        .runtime(Runtime::Tokio1)
        .wait_timeout(timeout)
        .create_timeout(timeout)
        .recycle_timeout(timeout)
        .build()?)
}

/// A store and, beside it, a raw pool on the same database.
enum Backend {
    Sqlite {
        store: SqliteStore,
        raw: Pool<SqliteConn>,
    },
    Pg {
        store: PgStore,
        raw: Pool<AsyncPgConnection>,
    },
}

/// What a bench runs against; `applied` counts the side effects that committed on
/// its database, for the ledger check at the end.
pub(crate) struct Target {
    backend: Backend,
    pub(crate) applied: Arc<AtomicU64>,
}

/// Who runs a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// `IdempotencyStore::process_once`, with an async side effect.
    Hookbox,
    /// `SqliteStore::process_once_blocking`, with a sync side effect (SQLite only).
    Blocking,
    /// The same statements by hand, through diesel-async.
    Raw,
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Text)]
    v: String,
}

#[derive(QueryableByName)]
struct IntRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

const LEDGER_TOTAL: &str =
    "SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) AS n FROM bench_ledger";

impl Target {
    /// One transaction: claim `key` and, if new, bump `account`. `true` when applied.
    pub(crate) async fn claim(
        &self,
        side: Side,
        key: &DedupeKey,
        account: &'static str,
    ) -> Result<bool, BoxErr> {
        match (&self.backend, side) {
            (Backend::Sqlite { store, .. }, Side::Hookbox) => {
                let done = store
                    .process_once(key, async move |conn| Ok(sqlite_bump(conn, account).await?))
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Sqlite { store, .. }, Side::Blocking) => {
                let done = store
                    .process_once_blocking(key, move |conn| {
                        Ok(sqlite_bump_blocking(conn, account)?)
                    })
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Sqlite { store, raw }, Side::Raw) => {
                sqlite_raw_tx(store, &mut *raw.get().await?, key, account).await
            }
            (Backend::Pg { store, .. }, Side::Hookbox) => {
                let done = store
                    .process_once(key, async move |conn| Ok(pg_bump(conn, account).await?))
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Pg { .. }, Side::Blocking) => {
                Err("process_once_blocking is hookbox-sqlite's alone".into())
            }
            (Backend::Pg { store, raw }, Side::Raw) => {
                pg_raw_tx(store, &mut *raw.get().await?, key, account).await
            }
        }
    }

    /// The raw transaction as its connection ran it, its statements joined by `; `:
    /// one claim of a fresh key (its side effect counted), on a connection of the raw
    /// pool taken out of it, so the recording goes with it.
    pub(crate) async fn transaction_sql(&self) -> Result<String, BoxErr> {
        let statements = Arc::new(Mutex::new(Vec::new()));
        let record = {
            let statements = Arc::clone(&statements);
            move |event: InstrumentationEvent<'_>| {
                if let InstrumentationEvent::StartQuery { query, .. } = event {
                    let sql = query.to_string();
                    let sql = sql.split(" -- binds").next().unwrap_or(&sql).to_string();
                    lock(&statements).push(sql);
                }
            }
        };
        let key = bench_key("sql", 0, 0);
        let applied = match &self.backend {
            Backend::Sqlite { store, raw } => {
                let mut conn = Object::take(raw.get().await?);
                conn.set_instrumentation(record);
                sqlite_raw_tx(store, &mut conn, &key, ACCOUNTS[0]).await?
            }
            Backend::Pg { store, raw } => {
                let mut conn = Object::take(raw.get().await?);
                conn.set_instrumentation(record);
                pg_raw_tx(store, &mut conn, &key, ACCOUNTS[0]).await?
            }
        };
        self.applied
            .fetch_add(u64::from(applied), Ordering::Relaxed);
        Ok(lock(&statements).join("; "))
    }

    /// `sqlite_version()` on a SQLite target; empty on Postgres.
    pub(crate) async fn sqlite_version(&self) -> Result<String, BoxErr> {
        Ok(match &self.backend {
            Backend::Sqlite { raw, .. } => {
                diesel::sql_query("SELECT sqlite_version() AS v")
                    .get_result::<TextRow>(&mut *raw.get().await?)
                    .await?
                    .v
            }
            Backend::Pg { .. } => String::new(),
        })
    }

    /// Stores `delivery` in the inbox.
    pub(crate) async fn receive(&self, delivery: &VerifiedDelivery) -> Result<(), BoxErr> {
        match &self.backend {
            Backend::Sqlite { store, .. } => store.receive(delivery).await?,
            Backend::Pg { store, .. } => store.receive(delivery).await?,
        };
        Ok(())
    }

    /// Runs the worker once: the next due row through the ledger handler.
    pub(crate) async fn work_one(&self) -> Result<Worked, BoxErr> {
        Ok(match &self.backend {
            Backend::Sqlite { store, .. } => store.work_one(&sqlite_handler).await?,
            Backend::Pg { store, .. } => store.work_one(&pg_handler).await?,
        })
    }

    /// The sum of the ledger: one per committed side effect.
    pub(crate) async fn ledger_total(&self) -> Result<i64, BoxErr> {
        let query = diesel::sql_query(LEDGER_TOTAL);
        Ok(match &self.backend {
            Backend::Sqlite { raw, .. } => {
                query.get_result::<IntRow>(&mut *raw.get().await?).await?.n
            }
            Backend::Pg { raw, .. } => query.get_result::<IntRow>(&mut *raw.get().await?).await?.n,
        })
    }
}

/// Locks `m`, also after a panic poisoned it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Opens a migrated SQLite store with the ledger at `synchronous = level`, and a raw
/// pool on the same file with the same options.
pub(crate) async fn sqlite_target(
    path: &std::path::Path,
    level: Synchronous,
) -> Result<Arc<Target>, BoxErr> {
    let size = 4; // SqliteOptions' default max_connections
    let options = SqliteOptions::default()
        .with_synchronous(level)
        .with_max_connections(size);
    let store = SqliteStore::open(path, options.clone()).await?;
    store.migrate().await?;
    let mut conn = store.connection().await?;
    conn.batch_execute(&ledger_sql("bench_ledger")).await?;
    drop(conn);
    let url = path.to_str().ok_or("the bench directory is not UTF-8")?;
    let raw = raw_sqlite_pool(url, &options, size)?;
    Ok(Arc::new(Target {
        backend: Backend::Sqlite { store, raw },
        applied: Arc::new(AtomicU64::new(0)),
    }))
}

/// The Postgres server and the schema this run works in.
pub(crate) struct PgEnv {
    pub(crate) schema: PgSchema,
    applied: Arc<AtomicU64>,
}

impl PgEnv {
    /// Connects (within 5 s), reads the server's facts, creates the schema with the
    /// hookbox tables and the ledger.
    pub(crate) async fn setup(url: &str) -> Result<(Self, String), BoxErr> {
        let settings = ["server_version", "synchronous_commit", "fsync"];
        let (schema, facts, mut conn) = PgSchema::create(url, "hb_bench_", &settings).await?;
        let env = Self {
            schema,
            applied: Arc::new(AtomicU64::new(0)),
        };
        let ledger = format!("\"{}\".bench_ledger", env.schema.name);
        if let Err(err) = conn.batch_execute(&ledger_sql(&ledger)).await {
            let _ = env.schema.drop_schema().await;
            return Err(err.into());
        }
        Ok((env, facts.join(", ")))
    }

    /// A store and a raw pool of `pool` connections each.
    pub(crate) async fn target(&self, pool: usize) -> Result<Arc<Target>, BoxErr> {
        let store = self
            .schema
            .store(PgOptions::new().with_max_connections(pool))
            .await?;
        let raw = raw_pg_pool(&self.schema.url, store.options())?;
        Ok(Arc::new(Target {
            backend: Backend::Pg { store, raw },
            applied: Arc::clone(&self.applied),
        }))
    }
}
