//! MySQL and MariaDB store for hookbox, on diesel-async: claim a webhook's dedupe
//! key in the same transaction as your side effect, or acknowledge fast into an
//! inbox and let a worker apply it.
//!
//! [`MysqlStore`] implements the store traits of `hookbox-core` over one pool of
//! [`AsyncMysqlConnection`](diesel_async::AsyncMysqlConnection)s
//! ([`Store`](hookbox_core::Store) names that connection and [`MysqlError`] once for
//! all of them). It needs MySQL 8.0 or MariaDB 10.6 and later (`SKIP LOCKED`), and
//! InnoDB.
//!
//! - [`IdempotencyStore`](hookbox_core::IdempotencyStore): `process_once` begins a
//!   transaction, inserts the key with a plain `INSERT`, runs your side effect on
//!   the same connection only if the key was new, and commits both or neither;
//!   `claim` does the insert inside a transaction you hold. A duplicate is the
//!   server's duplicate-key error (1062), which InnoDB answers by rolling back that
//!   one statement, never an affected-row count (diesel-async connects with
//!   `CLIENT_FOUND_ROWS`, so `ON DUPLICATE KEY UPDATE` counts a new key and a
//!   duplicate alike) nor `INSERT IGNORE` (which turns every error into a warning
//!   and stores coerced values). docs/design.md has the argument.
//! - [`Inbox`](hookbox_core::Inbox): `receive` reads whether the key is stored (a
//!   read that takes no lock) and inserts it if not; `work_one` takes a due row with
//!   `FOR UPDATE SKIP LOCKED`, runs your handler in a savepoint, and commits
//!   `processed_at` with the handler's writes, or rolls the handler back and records
//!   the failure (attempts, `last_error`, backoff, dead letter). The raw body, the
//!   verified headers, the event type, the correlation id and the signed timestamp
//!   are stored at receipt, so a worker's handler sees the same
//!   [`Delivery`](hookbox_core::Delivery) an inline one would. The headers are kept
//!   in core's one lossless text form
//!   ([`KeptHeaders::to_json`](hookbox_core::KeptHeaders::to_json)), as on the other
//!   stores, so a value that is not UTF-8 reads back byte for byte.
//! - [`VersionGuard`](hookbox_core::VersionGuard): per-object versions, in the claim's
//!   transaction (the object's row read with `FOR UPDATE`, then written).
//! - [`OutboxStore`](hookbox_core::OutboxStore): `stage` inserts a message into
//!   `hookbox_outbox` on your side effect's or handler's connection (one plain
//!   `INSERT`, a duplicate message id answered from its error, never a transaction
//!   of its own), so it commits with the claim and your writes or not at all, and a
//!   replayed delivery stages nothing twice. A relay's `lease` is one short
//!   transaction: it locks due messages with `FOR UPDATE SKIP LOCKED`, skips any
//!   whose ordering key has an earlier message neither sent nor dead (leased by
//!   another relay included), and records a lease with a random token; the send
//!   then runs outside any transaction, and only the token's holder can `settle` the
//!   message while no other relay took it after the lease expired. Sent messages are
//!   purged with the retention of their delivery's provider; pending ones and dead
//!   letters never are.
//! - [`Purge`](hookbox_core::Purge): delete the keys, processed inbox rows and sent
//!   messages the retention lets go, in short batches (`DELETE … LIMIT`).
//! - [`InboxAdmin`](hookbox_core::InboxAdmin) and
//!   [`OutboxAdmin`](hookbox_core::OutboxAdmin): the operator's verbs, the same on
//!   every store (`stats`, `list`, `count`, `get`, `replay`, `replay_matching`,
//!   `purge`, …), also as `&dyn`.
//!
//! # Guarantees
//!
//! | event | what holds |
//! |---|---|
//! | `process_once` or `receive` returned `Ok` (answer 2xx) | the key, and with `process_once` the side effect, are committed on the primary. With the default `innodb_flush_log_at_trx_commit = 1` the commit is flushed to InnoDB's redo log before it returns (and with `sync_binlog = 1` to the binary log) |
//! | a duplicate, a concurrent copy | exactly one copy applies; a concurrent copy waits on the first copy's uncommitted key (at most the lock timeout) and then reports `Duplicate`, or applies if the first rolled back |
//! | the side effect failed, the store failed | nothing was committed: the key is free, the sender's retry runs the side effect again |
//! | a statement failed inside the side effect but it returned `Ok` (error swallowed) | a deadlock would have rolled the whole transaction back, key included, and the statements after it would commit on their own; the store rolls back and returns [`MysqlError::StatementFailed`] instead of reporting the delivery as applied (a worker's handler that does this fails its row). A failure the side effect rolled back to a savepoint of its own (`conn.transaction(…)` nested) is fine |
//! | the process crashed or was killed mid-transaction | the server rolls back the open transaction when the connection drops: the key is free again, an inbox row is unprocessed and another worker takes it (`SKIP LOCKED` skips only rows locked by live transactions) |
//! | a future dropped mid-transaction (a cancelled request) | the store closes that connection instead of returning it to the pool, so the server rolls back and releases the key at once; also for a connection you took with [`MysqlStore::connection`] |
//! | power loss on the database server | what was committed survives with `innodb_flush_log_at_trx_commit = 1` (the default) and storage that honours flushes; with `0` or `2` up to about a second of commits can be lost even though 2xx was answered |
//! | failover to a replica | with asynchronous replication (the default) the last commits before the failover can be missing on the new primary: keys too, so a retry of such a delivery is applied again. Only semi-synchronous replication (`rpl_semi_sync_master_wait_point = AFTER_SYNC`) or a synchronous cluster (Galera, Group Replication) makes a 2xx survive failover |
//!
//! # Examples
//!
//! Apply a credit once per delivery (needs a running server, so not run here). The
//! side effect is an async closure on the claim's connection; `?` turns the
//! driver's error into the [`HandlerError`](hookbox_core::HandlerError) it returns:
//!
//! ```no_run
//! use hookbox_core::{DedupeKey, IdempotencyStore, Processed};
//! use hookbox_diesel_mysql::diesel_async::RunQueryDsl;
//! use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, diesel};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let store = MysqlStore::connect("mysql://app@localhost/app", MysqlOptions::new()).await?;
//! store.migrate().await?;
//!
//! let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! let outcome = store
//!     .process_once(&key, async |conn| {
//!         // runs in the claim's transaction: commits with the key or not at all
//!         diesel::sql_query("UPDATE accounts SET balance = balance + 100 WHERE id = 42")
//!             .execute(conn)
//!             .await?;
//!         Ok(())
//!     })
//!     .await;
//! match outcome {
//!     Ok(Processed::Applied(())) | Ok(Processed::Duplicate) => { /* answer 2xx */ }
//!     Err(err) if err.is_transient() => { /* answer 5xx: the sender retries */ }
//!     Err(err) => return Err(err.into()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Acknowledge into the inbox and drain it with a worker. The handler is the same
//! shape an inline endpoint takes, an `async fn` (or closure) of the connection and
//! the [`Delivery`](hookbox_core::Delivery):
//!
//! ```no_run
//! use std::time::Duration;
//! use hookbox_core::{Delivery, HandlerError, Inbox, VerifiedDelivery, run_worker};
//! use hookbox_diesel_mysql::diesel::prelude::*;
//! use hookbox_diesel_mysql::diesel_async::{AsyncMysqlConnection, RunQueryDsl};
//! use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, diesel};
//!
//! diesel::table! {
//!     audit (delivery) {
//!         delivery -> Text,
//!     }
//! }
//!
//! // the handler runs on the row's transaction: its writes commit with `processed_at`
//! async fn handle(
//!     conn: &mut AsyncMysqlConnection,
//!     delivery: &Delivery,
//! ) -> Result<(), HandlerError> {
//!     diesel::insert_into(audit::table)
//!         .values(audit::delivery.eq(delivery.delivery_id()))
//!         .execute(conn)
//!         .await?;
//!     Ok(())
//! }
//!
//! # async fn run(delivery: VerifiedDelivery) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let store = MysqlStore::connect("mysql://app@localhost/app", MysqlOptions::new()).await?;
//! store.receive(&delivery).await?; // Stored or Duplicate: answer 2xx
//!
//! let shutdown = tokio::time::sleep(Duration::from_secs(60));
//! let report = run_worker(&store, handle, Duration::from_millis(200), shutdown).await?;
//! println!("processed {}, dead letters {}", report.processed, report.dead);
//! # Ok(())
//! # }
//! ```
//!
//! A handler that fails rolls its writes back; the worker records the error with its
//! causes (`{err:#}`) in the row's `last_error` and retries it later, up to the retry
//! policy's attempt limit.
//!
//! # Configuration
//!
//! See [`MysqlOptions`]: pool size (default 8), lock timeout (default 5 s, set as
//! `innodb_lock_wait_timeout` in whole seconds; a lock wait that runs out is the
//! transient [`MysqlError::LockTimeout`]), pool timeout, retention and retry
//! policies. The tables live in the URL's database. The schema is applied only by
//! an explicit [`MysqlStore::migrate`], which returns how many migrations it
//! applied; docs/schema.md describes the tables, their `VARBINARY` keys (compared
//! byte for byte) and `DATETIME(6)` times (UTC).
//!
//! # Sessions
//!
//! Each new connection runs, before the pool hands it out:
//!
//! - `SET time_zone = '+00:00'`: the store writes `UTC_TIMESTAMP(6)` into
//!   `DATETIME(6)` columns, and a `CURRENT_TIMESTAMP` of yours reads UTC too;
//! - `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`, PostgreSQL's default: the
//!   worker's `FOR UPDATE SKIP LOCKED` and the claims lock the rows they touch and
//!   no gaps, so a batch in progress never blocks the insert of a new delivery
//!   (REPEATABLE READ's next-key locks would). Your side effects and handlers run
//!   at this level. With binary logging on, READ COMMITTED needs `binlog_format =
//!   ROW` or `MIXED` (the defaults of MySQL 8.0 and MariaDB);
//! - `SET innodb_lock_wait_timeout`, and `lc_messages = 'en_US'` so errors are
//!   classified by their English messages;
//! - `STRICT_ALL_TABLES` added to the session's `sql_mode`: a value too long for
//!   its column is an error, never cut to a different key.
//!
//! # Pool and driver
//!
//! The pool is diesel-async's deadpool integration (`pooled_connection::deadpool`),
//! chosen over bb8 because deadpool lets the store take a connection out of the pool
//! (`Object::take`) and close it on the spot. That matters twice:
//!
//! - A future dropped mid-transaction (a request cancelled by its client, a
//!   `tokio::time::timeout`) leaves its connection inside an open transaction that
//!   still holds the claimed key's lock. diesel-async's recycle check refuses such a
//!   connection, but only when the pool next hands it out; until then every copy of
//!   that delivery would wait on the lock. [`PooledConnection`] closes it when
//!   dropped instead: the server rolls the transaction back and releases its locks
//!   immediately.
//! - A connection whose socket died (the server restarted, a failover) is closed
//!   after its first error instead of failing again and again. This lets the pool
//!   skip the test query on checkout (`RecyclingMethod::Fast`), which would add a
//!   round trip to every claim.
//!
//! Errors are classified for [`StoreError::is_transient`](hookbox_core::StoreError):
//! connection refused, closed or killed, pool timeout, lock wait timeout (1205),
//! deadlock (1213), server shutdown (1053), too many connections (1040) and a
//! read-only replica (1290, 1792) are transient; constraint, syntax and "data too
//! long" errors are not. diesel-async keeps the server's message but not its error
//! code (1062 aside), so these are recognised by the message.
//!
//! # TLS
//!
//! Connections use TLS as the URL's `ssl-mode` says, in the vocabulary of MySQL's own
//! clients (see [`SslMode`]):
//!
//! | URL | connection |
//! |---|---|
//! | `mysql://app@db/app?ssl-mode=VERIFY_IDENTITY` | TLS; the certificate must chain to a trusted root and be valid for `db` |
//! | `…?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/hookbox/db-ca.pem` | the same, trusting only the CA certificates in that PEM file |
//! | `…?ssl-mode=VERIFY_CA&ssl-ca=…` | TLS; the chain is verified (and, with this driver, the host name: see [`SslMode`]) |
//! | `…?ssl-mode=REQUIRED` | TLS or no connection, the certificate unverified (verified as `VERIFY_CA` when a CA is given) |
//! | `mysql://app@db/app` or `…?ssl-mode=PREFERRED` | TLS when the server offers it, else plain text; nothing verified |
//! | `…?ssl-mode=DISABLED` | plain text |
//!
//! The value may be written in any case (`required`). A server without TLS under a
//! mode that requires it fails with [`MysqlError::TlsNotSupported`] before the login
//! is sent; a refused certificate is [`MysqlError::TlsCertificate`] ("certificate
//! not valid for host …", "not signed by a trusted root"); a wrong `ssl-mode` is
//! [`MysqlError::InvalidSslMode`], and mysql_async's own switches (`require_ssl`,
//! `verify_ca`, `verify_identity`, `built_in_roots`) beside it are
//! [`MysqlError::TlsSettings`], both reported by [`MysqlStore::connect`] before any
//! connection opens. None of these is transient.
//!
//! The trusted roots are `ssl-ca`'s PEM file, else
//! [`MysqlOptions::with_tls_root_certificates_pem`], else the Mozilla roots compiled
//! in (`webpki-roots`: the same set on every machine, including containers without a
//! CA bundle). Client certificates (`ssl-cert`, `ssl-key`) are not supported. TLS is
//! rustls (1.2 and 1.3) on the ring provider, never native-tls or OpenSSL;
//! mysql_async builds its rustls configuration from the process-wide default
//! provider, installing ring as that default when none is set (with `aws-lc-rs`
//! absent from the build, as in this workspace).
//!
//! `diesel` and `diesel_async` are re-exported so your side effects use the versions
//! this crate was built with.
#![forbid(unsafe_code)]

mod claims;
mod error;
mod filter;
mod inbox;
mod migrations;
mod options;
mod outbox;
mod pool;
mod purge;
mod rows;
mod schema;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
mod url;
mod watch;
mod work;
mod writer;

pub use error::MysqlError;
pub use options::{DEFAULT_GROUP_COMMIT_WRITERS, DEFAULT_WORKER_CONCURRENCY, MysqlOptions};
pub use pool::PooledConnection;
pub use store::MysqlStore;
pub use tls::SslMode;
pub use url::url_with_database;

// the driver, re-exported so users build side effects with matching versions
pub use diesel;
pub use diesel_async;

/// The connection a side effect or handler runs on, inside the store's transaction
/// (the same name as `hookbox_sqlite::Conn` and `hookbox_diesel_pg::Conn`, so code
/// can switch stores by one `use`).
pub type Conn = diesel_async::AsyncMysqlConnection;
