//! PostgreSQL store for hookbox, on diesel-async: claim a webhook's dedupe key in
//! the same transaction as your side effect, or acknowledge fast into an inbox and
//! let a worker apply it.
//!
//! [`PgStore`] implements the store traits of `hookbox-core` over one pool of
//! [`AsyncPgConnection`](diesel_async::AsyncPgConnection)s ([`Store`](hookbox_core::Store)
//! names that connection and [`PgError`] once for all of them):
//!
//! - [`IdempotencyStore`](hookbox_core::IdempotencyStore): `process_once` begins a
//!   transaction, inserts the key (`INSERT … ON CONFLICT DO NOTHING`), runs your side
//!   effect on the same connection only if the key was new, and commits both or
//!   neither; `claim` does the insert inside a transaction you hold.
//! - [`Inbox`](hookbox_core::Inbox): `receive` is one autocommitted insert; `work_one`
//!   takes a due row with `FOR UPDATE SKIP LOCKED`, runs your handler in a savepoint,
//!   and commits `processed_at` with the handler's writes, or rolls the handler back
//!   and records the failure (attempts, `last_error`, backoff, dead letter).
//!   The raw body, the verified headers, the event type, the correlation id and the
//!   signed timestamp are stored at receipt, so a worker's handler sees the same
//!   [`Delivery`](hookbox_core::Delivery) an inline one would. The headers are kept in
//!   core's one lossless text form
//!   ([`KeptHeaders::to_json`](hookbox_core::KeptHeaders::to_json)), the same as on
//!   SQLite, so a value that is not UTF-8 reads back byte for byte.
//! - [`VersionGuard`](hookbox_core::VersionGuard): per-object versions, in the claim's
//!   transaction.
//! - [`OutboxStore`](hookbox_core::OutboxStore): `stage` inserts a message into
//!   `hookbox_outbox` on your side effect's or handler's connection (one `INSERT … ON
//!   CONFLICT DO NOTHING` on the message id, never a transaction of its own), so it
//!   commits with the claim and your writes or not at all, and a replayed delivery
//!   stages nothing twice. A relay's `lease` is one autocommitted statement: it locks
//!   due messages with `FOR UPDATE SKIP LOCKED`, skips any whose ordering key has an
//!   earlier message neither sent nor dead (leased by another relay included), and
//!   records a lease with a random token; the send then runs outside any
//!   transaction, and only the token's holder can `settle` the message while no
//!   other relay took it after the lease expired. Sent messages are purged with the
//!   retention of their delivery's provider; pending ones and dead letters never are.
//!   Order per key is staging order (`seq`) among messages whose transactions commit
//!   one after the other; two transactions staging for one key at the same time may
//!   commit, and so be sent, in either order.
//! - [`Purge`](hookbox_core::Purge): delete the keys, processed inbox rows and sent
//!   messages the retention lets go, in short batches.
//! - [`InboxAdmin`](hookbox_core::InboxAdmin) and
//!   [`OutboxAdmin`](hookbox_core::OutboxAdmin): the operator's verbs, the same on
//!   both (`stats`, `list`, `get`, `replay`, `replay_matching`, `purge`), also as
//!   `&dyn`.
//!
//! # Guarantees
//!
//! | event | what holds |
//! |---|---|
//! | `process_once` or `receive` returned `Ok` (answer 2xx) | the key, and with `process_once` the side effect, are committed on the primary. With the default `synchronous_commit = on` the commit is flushed to the primary's WAL before it returns |
//! | a duplicate, a concurrent copy | exactly one copy applies; a concurrent copy waits on the first copy's uncommitted key (at most `lock_timeout`) and then reports `Duplicate`, or applies if the first rolled back |
//! | the side effect failed, the store failed | nothing was committed: the key is free, the sender's retry runs the side effect again |
//! | a statement failed inside the side effect but it returned `Ok` (error swallowed) | PostgreSQL would answer `COMMIT` with a silent rollback; the store notices the failed statement, rolls back and returns [`PgError::StatementFailed`] instead of reporting the delivery as applied (a worker's handler that does this fails its row) |
//! | the process crashed or was killed mid-transaction | the server rolls back the open transaction when the connection drops: the key is free again, an inbox row is unprocessed and another worker takes it (`SKIP LOCKED` skips only rows locked by live transactions) |
//! | a future dropped mid-transaction (a cancelled request) | the store closes that connection instead of returning it to the pool, so the server rolls back and releases the key at once; also for a connection you took with [`PgStore::connection`] |
//! | power loss on the database server | what was committed survives if the server runs with `fsync = on` and `synchronous_commit = on` (the defaults); with `synchronous_commit = off` the last commits (up to 3 × `wal_writer_delay`) can be lost even though 2xx was answered |
//! | failover to a replica | with asynchronous replication (the default) the last commits before the failover can be missing on the new primary: keys too, so a retry of such a delivery is applied again. Only synchronous replication (`synchronous_standby_names` with `synchronous_commit = on` or `remote_apply`) makes a 2xx survive failover |
//!
//! # Examples
//!
//! Apply a credit once per delivery (needs a running server, so not run here). The
//! side effect is an async closure on the claim's connection; `?` turns the
//! driver's error into the [`HandlerError`](hookbox_core::HandlerError) it returns:
//!
//! ```no_run
//! use hookbox_core::{DedupeKey, IdempotencyStore, Processed};
//! use hookbox_diesel_pg::diesel_async::RunQueryDsl;
//! use hookbox_diesel_pg::{PgOptions, PgStore, diesel};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let store = PgStore::connect("postgres://app@localhost/app", PgOptions::new()).await?;
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
//! use hookbox_diesel_pg::diesel::prelude::*;
//! use hookbox_diesel_pg::diesel_async::{AsyncPgConnection, RunQueryDsl};
//! use hookbox_diesel_pg::{PgOptions, PgStore, diesel};
//!
//! diesel::table! {
//!     audit (delivery) {
//!         delivery -> Text,
//!     }
//! }
//!
//! // the handler runs on the row's transaction: its writes commit with `processed_at`
//! async fn handle(conn: &mut AsyncPgConnection, delivery: &Delivery) -> Result<(), HandlerError> {
//!     diesel::insert_into(audit::table)
//!         .values(audit::delivery.eq(delivery.delivery_id()))
//!         .execute(conn)
//!         .await?;
//!     Ok(())
//! }
//!
//! # async fn run(delivery: VerifiedDelivery) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let store = PgStore::connect("postgres://app@localhost/app", PgOptions::new()).await?;
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
//! See [`PgOptions`]: pool size (default 8), `lock_timeout` (default 5 s; a lock wait
//! that runs out is the transient [`PgError::LockTimeout`]), pool timeout, the
//! schema (`search_path`), retention and retry policies. The schema is applied only by
//! an explicit [`PgStore::migrate`], which returns how many migrations it applied.
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
//! Each new connection runs `SET lock_timeout`, `SET search_path` when a schema is
//! configured, and `SET lc_messages TO 'C'` where the role may, over TLS or not as
//! the URL's `sslmode` says (see [TLS](#tls)).
//!
//! Errors are classified for [`StoreError::is_transient`](hookbox_core::StoreError):
//! connection refused or closed, pool timeout, lock timeout (55P03), serialization
//! failure (40001), deadlock (40P01), shutdown (57P0x), too many connections and a
//! read-only standby are transient; constraint and syntax errors are not. diesel-async
//! does not expose the SQLSTATE of most errors, so several are recognised by the
//! server's message: the store asks each connection for untranslated messages
//! (`lc_messages = 'C'`), which a role without the right to set it cannot; on a server
//! that then sends translated messages those errors read as not transient.
//!
//! # TLS
//!
//! Connections use TLS as libpq's `sslmode` in the URL says (see [`SslMode`]):
//!
//! | URL | connection |
//! |---|---|
//! | `postgres://app@db/app?sslmode=verify-full` | TLS; the certificate must chain to a trusted root and be valid for `db` |
//! | `…?sslmode=verify-full&sslrootcert=/etc/hookbox/db-ca.pem` | the same, trusting only the CA certificates in that PEM file |
//! | `…?sslmode=verify-ca&sslrootcert=…` | TLS; the chain is verified, the host name is not |
//! | `…?sslmode=require` | TLS or no connection, the certificate unverified (verified as `verify-ca` when a root certificate is given) |
//! | `postgres://app@db/app` or `…?sslmode=prefer` | TLS when the server offers it, else plain text; nothing verified |
//! | `…?sslmode=disable` | plain text |
//!
//! The key/value form (`host=db user=app sslmode=verify-full`) is read the same way.
//! A server that answers "no TLS" to a connection that requires it fails with
//! [`PgError::TlsNotSupported`] instead of being used in plain text; a refused
//! certificate is [`PgError::TlsCertificate`] ("certificate not valid for host …",
//! "not signed by a trusted root"); a wrong `sslmode` value is
//! [`PgError::InvalidSslMode`], reported by [`PgStore::connect`] before any
//! connection opens. None of these is transient.
//!
//! The trusted roots are `sslrootcert`'s PEM file, else
//! [`PgOptions::with_tls_root_certificates_pem`], else the Mozilla roots compiled in
//! (`webpki-roots`: the same set on every machine, including containers without a CA
//! bundle; `sslrootcert=system` asks for them explicitly and implies `verify-full`).
//! libpq's `~/.postgresql/root.crt` is not read, and client certificates (`sslcert`,
//! `sslkey`) and `sslmode=allow` are not supported. TLS is rustls (1.2 and 1.3) on
//! the ring provider, set on the store's own rustls configuration: the process-wide
//! rustls default is neither read nor installed. With SCRAM authentication over TLS
//! the connection binds the login to the server's certificate
//! (`SCRAM-SHA-256-PLUS`, `tls-server-end-point`); `channel_binding=require` in the
//! URL insists on it.
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
mod watch;
mod work;
mod writer;

pub use error::PgError;
pub use options::{DEFAULT_GROUP_COMMIT_WRITERS, DEFAULT_WORKER_CONCURRENCY, PgOptions};
pub use pool::PooledConnection;
pub use store::PgStore;
pub use tls::SslMode;

// the driver, re-exported so users build side effects with matching versions
pub use diesel;
pub use diesel_async;

/// The connection a side effect or handler runs on, inside the store's transaction
/// (the same name as `hookbox_sqlite::Conn`, so code can switch stores by one `use`).
pub type Conn = diesel_async::AsyncPgConnection;
