//! The embedded SQLite store for hookbox: one file, no server.
//!
//! [`SqliteStore`] implements the store traits of `hookbox-core` on diesel's
//! SQLite backend:
//!
//! - [`IdempotencyStore`](hookbox_core::IdempotencyStore): claim a delivery's dedupe
//!   key with `INSERT … ON CONFLICT DO NOTHING` in the **same transaction** as your
//!   side effect, so the two commit together or not at all;
//! - [`Inbox`](hookbox_core::Inbox): store the verified delivery durably, answer
//!   2xx, and let a worker apply it later with retries, backoff and dead letters;
//! - [`VersionGuard`](hookbox_core::VersionGuard): apply an update only when its
//!   version is newer than the stored one, in the same transaction;
//! - [`OutboxStore`](hookbox_core::OutboxStore): stage a message for a sink (an
//!   email, another company's API) in the same transaction, for a relay to send
//!   after the commit;
//! - [`Purge`](hookbox_core::Purge): delete the keys, processed rows and sent
//!   messages the retention lets go, in short batches;
//! - [`InboxAdmin`](hookbox_core::InboxAdmin) and
//!   [`OutboxAdmin`](hookbox_core::OutboxAdmin): the operator's verbs (`stats`,
//!   `list`, `get`, `replay`, `replay_matching`, `purge`), also as `&dyn`.
//!
//! Side effects and handlers are async closures that run on [`Conn`], diesel-async's
//! [`SyncConnectionWrapper`](diesel_async::sync_connection_wrapper::SyncConnectionWrapper)
//! around a [`SqliteConnection`](diesel::SqliteConnection), inside the store's
//! transaction: write with `diesel_async::RunQueryDsl` exactly as on Postgres, and
//! return `Ok(value)`; `?` turns any error into the
//! [`HandlerError`](hookbox_core::HandlerError) that rolls the transaction back. The
//! same handler, `async fn(&mut Conn, &Delivery) -> Result<(), HandlerError>`, serves
//! an inline endpoint and the inbox worker.
//!
//! # Runtime
//! Use a **multi-threaded** tokio runtime (`#[tokio::main(flavor = "multi_thread")]`,
//! and `#[tokio::test(flavor = "multi_thread")]` in tests). The wrapper runs each
//! statement on tokio's blocking pool, and when a query's future is dropped (a client
//! that disconnects, a timeout) it waits for the statement with `block_in_place`,
//! which panics on a current-thread runtime. [`SqliteStore::open`] therefore refuses
//! a current-thread runtime with [`SqliteError::CurrentThreadRuntime`] instead of
//! letting the first cancelled query panic; the default `#[tokio::test]` is
//! current-thread.
//!
//! When the side effect is plain sync diesel code, prefer
//! [`SqliteStore::process_once_blocking`]: the claim, the side effect and the commit
//! run in one trip to the blocking pool instead of one per statement, with the same
//! guarantees (1.48x to 1.88x the claims per second at `synchronous = FULL` and
//! 2.04x to 2.83x at `NORMAL` in `docs/performance.md`). The [`blocking`] module is
//! the same path for programs without a runtime.
//!
//! # Examples
//! Open a store, apply the schema, and apply one delivery exactly once:
//! ```
//! use diesel_async::RunQueryDsl;
//! use hookbox_core::{DedupeKey, IdempotencyStore, Processed};
//! use hookbox_sqlite::{SqliteOptions, SqliteStore};
//!
//! const CREDIT: &str = "INSERT INTO credits VALUES ('acct_1', 100) \
//!                       ON CONFLICT (account) DO UPDATE SET balance = balance + 100";
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("hookbox-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("hookbox.db");
//! let store = SqliteStore::open(&path, SqliteOptions::default()).await?;
//! store.migrate().await?;
//! # let mut conn = store.connection().await?;
//! # diesel::sql_query("CREATE TABLE credits (account TEXT PRIMARY KEY, balance INTEGER)")
//! #     .execute(&mut *conn)
//! #     .await?;
//! # drop(conn);
//!
//! let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! let first = store
//!     .process_once(&key, async |conn| {
//!         // on the claim's connection, inside its transaction
//!         let credited = diesel::sql_query(CREDIT).execute(conn).await?;
//!         Ok(credited)
//!     })
//!     .await?;
//! assert_eq!(first, Processed::Applied(1));
//!
//! // the provider retries: the key is there, the side effect does not run again
//! let second = store
//!     .process_once(&key, async |conn| Ok(diesel::sql_query(CREDIT).execute(conn).await?))
//!     .await?;
//! assert_eq!(second, Processed::Duplicate);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! Or answer at once and apply later: [`receive`](hookbox_core::Inbox::receive) stores
//! the verified delivery, and a worker runs a handler on it in the row's transaction:
//! ```
//! use diesel_async::RunQueryDsl;
//! use hookbox_core::bytes::Bytes;
//! use hookbox_core::{DedupeKey, Delivery, HandlerError, Inbox, KeptHeaders, VerifiedDelivery, Worked};
//! use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore};
//!
//! /// The handler: the same one an inline endpoint would take.
//! async fn record(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
//!     diesel::sql_query("INSERT INTO seen VALUES (?)")
//!         .bind::<diesel::sql_types::Text, _>(delivery.delivery_id())
//!         .execute(conn)
//!         .await?;
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("hookbox-doc-inbox-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("hookbox.db");
//! let store = SqliteStore::open(&path, SqliteOptions::default()).await?;
//! store.migrate().await?;
//! # let mut conn = store.connection().await?;
//! # diesel::sql_query("CREATE TABLE seen (id TEXT PRIMARY KEY)").execute(&mut *conn).await?;
//! # drop(conn);
//! # let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! # let verified = VerifiedDelivery::new(key, Bytes::from_static(b"{}"), KeptHeaders::default());
//! // `verified` came from a provider's `verify`
//! store.receive(&verified).await?;
//! assert!(matches!(store.work_one(&record).await?, Worked::Processed { .. }));
//! assert_eq!(store.work_one(&record).await?, Worked::Idle);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//!
//! | event | with the default `synchronous = FULL` | with `synchronous = NORMAL` |
//! |---|---|---|
//! | a 2xx after [`receive`](hookbox_core::Inbox::receive) or a committed claim | the row is in the WAL and fsynced | the row is written to the OS, not yet fsynced |
//! | the process crashes or is killed | every acknowledged row survives; an open transaction (claim and side effect together) rolls back, so the retry applies it | same |
//! | power loss or an OS crash | every acknowledged row survives | the last commits before the cut may be lost, and their senders will not resend them |
//! | a worker dies mid-row | the row stays unprocessed; its lease expires and another worker applies it once | same |
//! | power loss while a worker drains | the worker commits at `NORMAL` (below): its last commits may be lost, each whole (the handler's writes with the row's mark), so those rows are worked again once | same |
//! | two copies at once, in one process or several on the same file | exactly one applies; the other waits for the lock and reports a duplicate | same |
//! | failover | none: SQLite is one file on one machine; use `hookbox-diesel-pg` for a replicated database | same |
//!
//! [`Synchronous`] explains the choice: in WAL mode, `FULL` fsyncs the WAL on every
//! commit, which is what "a 2xx means the delivery is stored" needs; `NORMAL` trades
//! that for throughput.
//!
//! ## How it is built
//! - **Locks.** Every write transaction starts with `BEGIN IMMEDIATE`, taking
//!   SQLite's single write lock up front; a second writer waits up to the busy
//!   timeout ([`SqliteOptions::with_busy_timeout`], default 5 s) and then fails with the
//!   transient [`SqliteError::Busy`]. Deferred transactions that read first and then
//!   write could instead fail to upgrade. SQLite's busy handler sleeps 1, 2, 5 …
//!   100 ms between tries and so favours newcomers: one store's `process_once`
//!   calls take their turn in arrival order before `BEGIN` (a fair async mutex), and
//!   a receive's own insert waits for the lock in sub-millisecond steps.
//! - **Pool.** A small pool ([`SqliteOptions::with_max_connections`], default 4). A
//!   connection whose transaction was left open (a cancelled future) is closed,
//!   never handed out again, so its lock is released at once.
//! - **Worker.** SQLite has no `SKIP LOCKED`; an inbox row is leased instead (a token
//!   and an expiry, [`SqliteOptions::with_lease`], default 30 s) in a short transaction,
//!   and the handler runs in a second one that commits `processed_at` only while the
//!   lease is still its own. The attempt is counted when the lease is taken, so a
//!   poison event that crashes the whole process still reaches the dead-letter
//!   limit. A handler error rolls back to a savepoint and records the failure.
//!   The worker's connection commits at `synchronous = NORMAL` and waits for the
//!   write lock in 1 ms steps instead of SQLite's busy handler (1, 2, 5, 10… ms),
//!   so its commits hold the one write lock for microseconds rather than an fsync:
//!   nothing acknowledged rests on them, and every later `FULL` commit (the edge's
//!   inserts) flushes the WAL before it, theirs included. The settings are put
//!   back before the connection returns to the pool.
//! - **Group commit.** [`Inbox::receive`](hookbox_core::Inbox::receive) goes
//!   through two threads with a connection each: a lookup that answers stored keys
//!   from a read, and a writer that commits whatever queued while it was busy in
//!   one transaction and answers each caller after the `COMMIT`
//!   ([`SqliteOptions::with_commit_mode`]).
//! - **Outbox.** [`stage`](hookbox_core::OutboxStore::stage) is one
//!   `INSERT … ON CONFLICT (message_id) DO NOTHING` on the handler's connection, so
//!   the message commits with the claim or not at all, and a handler that runs again
//!   (a retry after a rollback, a replay) stages nothing twice. A relay leases due
//!   messages as the worker leases inbox rows (a token and an expiry, counted as an
//!   attempt), in one short `BEGIN IMMEDIATE` transaction, and sends them outside
//!   any transaction; only the lease's holder can settle a message. A message with
//!   an ordering key waits while an earlier message of its key is neither sent nor
//!   dead. Sent messages are purged with the retention; pending and dead ones stay.
//! - **Time.** Every timestamp is an `INTEGER` of unix microseconds (UTC): exact,
//!   sortable, and the same for every process that opens the file.
//! - **Headers.** The verified headers are kept in core's one text form
//!   ([`KeptHeaders::to_json`](hookbox_core::KeptHeaders::to_json)), the same as
//!   on PostgreSQL: readable for visible ASCII, base64 for any other byte, so every
//!   value reads back byte for byte.
//! - **Schema.** Embedded migrations, applied only by [`SqliteStore::migrate`];
//!   tables are prefixed `hookbox_`.
#![forbid(unsafe_code)]

pub mod blocking;
mod claims;
mod connect;
mod error;
mod filter;
mod inbox;
mod options;
mod outbox;
mod pool;
mod purge;
mod rows;
mod runner;
mod schema;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod transaction;
mod work;
mod writer;

pub use connect::Conn;
pub use error::SqliteError;
pub use options::{SqliteOptions, Synchronous};
pub use pool::PooledConnection;
pub use runner::StatementRunner;
pub use store::SqliteStore;
pub use transaction::{ImmediateTransaction, TransactionFn};

// the driver, so users write side effects against the versions this crate uses
pub use diesel;
pub use diesel_async;
