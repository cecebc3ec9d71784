//! A Redis front cache for any hookbox store: duplicates answered from Redis, every
//! decision still made by the database.
//!
//! [`Cached`] wraps a database store (`hookbox-sqlite`, `hookbox-diesel-pg`, or your
//! own) and implements the same traits again. Most redeliveries are duplicates of a
//! delivery already applied; the cache answers those from Redis without opening a
//! database transaction. Redis is never the authority: a key is written only after
//! the database committed it, and anything short of a clear, timely "present" goes to
//! the database claim, which decides exactly as it would without a cache. Losing
//! Redis never loses or doubles an event; it only makes duplicates cost a database
//! round trip again.
//!
//! # Guarantees
//! - **A hit** (the key is in Redis, and Redis answered within the timeout) means
//!   the database committed that key earlier: the call answers
//!   [`Processed::Duplicate`](hookbox_core::Processed::Duplicate) (or
//!   [`Received::Duplicate`](hookbox_core::Received::Duplicate)) without
//!   touching the database.
//! - **A miss** (absent, expired, evicted) goes to the database claim; once it
//!   returns `Ok` (the commit happened, now or before) the key is written to Redis
//!   with the TTL.
//! - **An outage, an error or a slow answer** is a miss: each Redis call is bounded
//!   by a client-side timeout (5 ms by default), never surfaces as an error, and the
//!   write after the commit is spawned so the acknowledgement never waits on it.
//!   The connection manager reconnects in the background.
//! - **A failure is never cached**: a side-effect or store error writes nothing.
//! - **The TTL is never longer than the retention**: [`Cached::new`] reads the
//!   store's own retention ([`Store::retention`](hookbox_core::Store::retention))
//!   and refuses a TTL longer than its shortest keep, so Redis cannot outlive the
//!   database row a hit stands for.
//!
//! | Redis state | `process_once` / `receive` answers | the database |
//! |---|---|---|
//! | up, key cached | `Duplicate` at once | not touched |
//! | up, key absent (new, expired, evicted) | the store's answer; the key is cached after the commit | claims as usual |
//! | slower than the timeout (`CLIENT PAUSE`, overload) | the store's answer, at most one timeout later | claims as usual |
//! | down, refusing connections, restarting | the store's answer; reconnection happens in the background | claims as usual |
//! | restarted empty or flushed | the store's answer; keys are cached again as copies arrive | claims as usual |
//! | any, and the side effect or store fails | the error, unchanged | rolled back; nothing cached |
//!
//! `claim` (inside a transaction you own) goes to the store only, because the cache
//! cannot know when you commit; see [`Cached`] for that and for `purge`.
//!
//! # TLS
//! | URL | connection |
//! |---|---|
//! | `redis://cache.internal:6379/0` | plain text |
//! | `rediss://cache.internal:6380/0` with [`connect`] | TLS; the certificate must chain to one of the Mozilla roots compiled in (`webpki-roots`) and be valid for `cache.internal` |
//! | `rediss://cache.internal:6380/0` with [`connect_with_root_ca`] | TLS; the certificate must chain to a CA of the PEM given and be valid for `cache.internal` |
//!
//! TLS is rustls (1.2 and 1.3) on the ring provider. `rediss://…#insecure` (no
//! certificate check) is refused. A TLS failure once the cache runs (a certificate
//! refused, a server without TLS, a name mismatch) is a Redis failure like any other:
//! every lookup misses, the database decides, and nothing fails a delivery; only
//! what [`connect`] and [`connect_with_root_ca`] can check up front (the URL, the
//! PEM) is an error. The redis crate builds its rustls configuration from rustls's
//! process-wide provider: for a `rediss://` URL, [`connect`] installs ring's as that
//! default when the process has none (see there).
//!
//! # Features
//! - `metrics`: counts lookups as `hookbox_cache_lookups_total{result}` (`hit`,
//!   `miss`, `fallthrough` for a timeout or an error) through the `metrics` facade.
//!
//! # Examples
//! Wrap the embedded SQLite store; the code is the same with Redis up or down (with
//! it down, every lookup falls through to SQLite):
//! ```
//! use std::time::Duration;
//!
//! use diesel_async::RunQueryDsl;
//! use hookbox_core::{DedupeKey, IdempotencyStore, Processed};
//! use hookbox_redis_cache::{CacheOptions, Cached};
//! use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore};
//!
//! async fn credit(conn: &mut Conn) -> diesel::QueryResult<usize> {
//!     diesel::sql_query(
//!         "INSERT INTO credits VALUES ('acct_1', 100) \
//!          ON CONFLICT (account) DO UPDATE SET balance = balance + 100",
//!     )
//!     .execute(conn)
//!     .await
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let unique = format!("{}-{}", std::process::id(), std::time::SystemTime::now()
//! #     .duration_since(std::time::UNIX_EPOCH)?.as_nanos());
//! # let dir = std::env::temp_dir().join(format!("hookbox-redis-doc-{unique}"));
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("hookbox.db");
//! let db = SqliteStore::open(&path, SqliteOptions::default()).await?;
//! db.migrate().await?;
//! # let mut conn = db.connection().await?;
//! # diesel::sql_query("CREATE TABLE credits (account TEXT PRIMARY KEY, balance INTEGER)")
//! #     .execute(&mut *conn)
//! #     .await?;
//! # drop(conn);
//! let redis = hookbox_redis_cache::connect("redis://127.0.0.1:6379/")?;
//! let options = CacheOptions::default()
//!     .with_ttl(Duration::from_secs(24 * 3600))
//!     .with_timeout(Duration::from_millis(5));
//! # let options = options.with_ttl(Duration::from_secs(60)).with_prefix(format!("hookbox-doc-{unique}:"));
//! // the TTL ceiling is the store's own retention (`db.retention()`)
//! let store = Cached::new(db, redis, options)?;
//!
//! let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! let first = store.process_once(&key, async |conn| Ok(credit(conn).await?)).await?;
//! assert_eq!(first, Processed::Applied(1));
//!
//! // the retry: answered from Redis once the key is cached, else by SQLite
//! let again = store.process_once(&key, async |conn| Ok(credit(conn).await?)).await?;
//! assert_eq!(again, Processed::Duplicate);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod admin;
mod cached;
mod connect;
mod error;
mod key;
mod options;
mod outbox;

pub use cached::{CacheStats, Cached};
pub use connect::{connect, connect_with_root_ca};
pub use error::CacheError;
pub use options::{CacheOptions, DEFAULT_PREFIX, DEFAULT_TIMEOUT, DEFAULT_TTL};

// the client, so users build connection managers with the version this crate uses
pub use redis;
