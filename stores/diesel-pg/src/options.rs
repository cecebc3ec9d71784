//! How a store is configured, and the statements each new connection runs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hookbox_core::{CommitMode, RetentionPolicy, RetryPolicy};

use crate::error::PgError;

/// How a [`PgStore`](crate::PgStore) is configured.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_diesel_pg::PgOptions;
///
/// let options = PgOptions::new()
///     .with_max_connections(16)
///     .with_lock_timeout(Duration::from_secs(2))
///     .with_schema("webhooks");
/// assert_eq!(options.max_connections(), 16);
/// ```
#[derive(Debug, Clone)]
pub struct PgOptions {
    max_connections: usize,
    retention: RetentionPolicy,
    retry: RetryPolicy,
    lock_timeout: Duration,
    pool_timeout: Duration,
    schema: Option<String>,
    tls_roots: Option<RootsPem>,
    commit: CommitMode,
    group_writers: usize,
    worker_concurrency: u32,
}

/// Writer tasks of a grouped store by default: batches on the wire while the next
/// ones gather. See [`PgOptions::with_group_commit_writers`].
pub const DEFAULT_GROUP_COMMIT_WRITERS: usize = 4;

/// Batches a worker runs side by side by default (`SKIP LOCKED` keeps them on
/// different rows). See [`PgOptions::with_worker_concurrency`].
pub const DEFAULT_WORKER_CONCURRENCY: u32 = 2;

/// Root certificates in PEM, shown by their size only.
#[derive(Clone)]
struct RootsPem(Arc<[u8]>);

impl fmt::Debug for RootsPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes of PEM>", self.0.len())
    }
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            retention: RetentionPolicy::default(),
            retry: RetryPolicy::default(),
            lock_timeout: Duration::from_secs(5),
            pool_timeout: Duration::from_secs(5),
            schema: None,
            tls_roots: None,
            commit: CommitMode::default(),
            group_writers: DEFAULT_GROUP_COMMIT_WRITERS,
            worker_concurrency: DEFAULT_WORKER_CONCURRENCY,
        }
    }
}

impl PgOptions {
    /// The defaults: 8 connections, the default retention and retry policies, a 5 s
    /// lock timeout, a 5 s pool timeout, the role's default `search_path`, group
    /// commit with 4 writer tasks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how `Inbox::receive` commits (default: grouped, 256 deliveries per
    /// statement at most). Grouped, writer tasks take every insert that is waiting
    /// and write them as one multi-row `INSERT … ON CONFLICT DO NOTHING`, and a
    /// delivery whose key is already stored is answered by a read without queueing.
    /// [`CommitMode::PerRequest`] inserts each delivery on its own.
    pub fn with_commit_mode(mut self, mode: CommitMode) -> Self {
        self.commit = mode;
        self
    }

    /// Returns how `Inbox::receive` commits.
    pub fn commit_mode(&self) -> CommitMode {
        self.commit
    }

    /// Sets how many writer tasks a grouped store runs (default
    /// [`DEFAULT_GROUP_COMMIT_WRITERS`], at least 1), each writing one batch at a
    /// time on a pooled connection of its own.
    ///
    /// More writers overlap more commits, which pays when a commit waits long (a
    /// database across a network, a slow disk) and a few senders are in flight;
    /// fewer make larger batches, so fewer statements, which pays when the database
    /// shares CPUs with the receiver. docs/performance.md has the measurements. The
    /// pool must hold the writers, the lookup and the other callers:
    /// [`with_max_connections`](Self::with_max_connections) well above the writers.
    ///
    /// ```
    /// use hookbox_diesel_pg::{DEFAULT_GROUP_COMMIT_WRITERS, PgOptions};
    ///
    /// assert_eq!(PgOptions::new().group_commit_writers(), DEFAULT_GROUP_COMMIT_WRITERS);
    /// let options = PgOptions::new().with_max_connections(16).with_group_commit_writers(8);
    /// assert_eq!(options.group_commit_writers(), 8);
    /// assert_eq!(PgOptions::new().with_group_commit_writers(0).group_commit_writers(), 1);
    /// ```
    pub fn with_group_commit_writers(mut self, writers: usize) -> Self {
        self.group_writers = writers.max(1);
        self
    }

    /// Returns how many writer tasks a grouped store runs.
    pub fn group_commit_writers(&self) -> usize {
        self.group_writers
    }

    /// Sets how many batches `run_worker` runs at once on this store unless its
    /// `WorkerOptions` say otherwise (default 2, at least 1). Each running batch
    /// holds one pooled connection for its transaction.
    pub fn with_worker_concurrency(mut self, batches: u32) -> Self {
        self.worker_concurrency = batches.max(1);
        self
    }

    /// Returns how many batches a worker runs at once by default.
    pub fn worker_concurrency(&self) -> u32 {
        self.worker_concurrency
    }

    /// Sets the most connections the pool opens (default 8, at least 1).
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets how long keys and processed inbox rows are kept (default: 30 days for
    /// every provider). Build it with [`RetentionPolicy::keep`], which refuses a rule
    /// shorter than the provider's resend window.
    pub fn with_retention(mut self, retention: RetentionPolicy) -> Self {
        self.retention = retention;
        self
    }

    /// Sets how failed inbox rows are retried and when they become dead letters
    /// (default: 5 attempts, backoff from 1 s to 1 h with full jitter).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the longest a statement waits for a row lock (default 5 s): the server's
    /// `lock_timeout`, set on every pooled connection.
    ///
    /// A concurrent copy of a delivery blocks on the first copy's uncommitted key and
    /// then reports a duplicate; this bounds the wait, so a stuck transaction cannot
    /// hang every receiver. A wait that runs out fails with the transient
    /// [`PgError::LockTimeout`]. Zero disables the bound (not recommended).
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Sets how long a call waits for a free pooled connection, and for a new one
    /// to open (default 5 s). A wait that runs out fails with the transient
    /// [`PgError::PoolTimeout`] or [`PgError::Connect`].
    pub fn with_pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// Puts the hookbox tables in `schema`: every pooled connection runs
    /// `SET search_path TO "<schema>"`, so your side effects see that schema too
    /// (qualify your own tables if they live elsewhere). The schema must exist; the
    /// name must be a plain identifier (checked by [`PgStore::connect`](crate::PgStore::connect)).
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Trusts the root certificates in `pem` (one or more `-----BEGIN CERTIFICATE-----`
    /// blocks: your server's CA, a cloud provider's bundle) instead of the compiled-in
    /// Mozilla roots, for the connections whose URL names no `sslrootcert` (which
    /// takes precedence, like a connection string over a default).
    ///
    /// The roots are used as the URL's `sslmode` says (see [`SslMode`](crate::SslMode)):
    /// `verify-full` checks the chain and the host name, `verify-ca` and `require`
    /// the chain only; `prefer` (the default when the URL has no `sslmode`) and
    /// `disable` verify nothing, so pair this with `?sslmode=verify-full`. The PEM is
    /// parsed by [`PgStore::connect`](crate::PgStore::connect), which fails with
    /// [`PgError::TlsSettings`] when it holds no valid certificate.
    ///
    /// ```
    /// use hookbox_diesel_pg::PgOptions;
    ///
    /// # fn read_ca() -> Vec<u8> { Vec::new() }
    /// let ca: Vec<u8> = read_ca(); // e.g. std::fs::read("/etc/hookbox/db-ca.pem")?
    /// let options = PgOptions::new().with_tls_root_certificates_pem(ca);
    /// // with "postgres://app@db.internal/app?sslmode=verify-full"
    /// # drop(options);
    /// ```
    pub fn with_tls_root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_roots = Some(RootsPem(pem.into().into()));
        self
    }

    /// Returns the root certificates given to
    /// [`PgOptions::with_tls_root_certificates_pem`], if any.
    pub fn tls_root_certificates_pem(&self) -> Option<&[u8]> {
        self.tls_roots.as_ref().map(|pem| &*pem.0)
    }

    /// Returns the pool size.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Returns the retention policy.
    pub fn retention(&self) -> &RetentionPolicy {
        &self.retention
    }

    /// Returns the retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// Returns the lock timeout.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// Returns the pool timeout.
    pub fn pool_timeout(&self) -> Duration {
        self.pool_timeout
    }

    /// Returns the schema, if one was set.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The statements each new connection runs before the pool hands it out.
    pub(crate) fn setup_sql(&self) -> String {
        let mut sql = format!("SET lock_timeout = '{}ms'", self.lock_timeout.as_millis());
        if let Some(schema) = &self.schema {
            // validated by `check_schema`: no quote can appear in it
            sql.push_str(&format!("; SET search_path TO \"{schema}\""));
        }
        sql
    }
}

pub(crate) fn check_schema(schema: &str) -> Result<(), PgError> {
    let mut chars = schema.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && schema.len() <= 63;
    if valid {
        Ok(())
    } else {
        Err(PgError::InvalidSchema {
            name: schema.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["hookbox", "hb_0123abcd", "_private", "Webhooks"] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in ["", "1st", "a;b", "a\"b", "a b", "schéma", &"x".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn setup_sets_the_lock_timeout_and_search_path() {
        let sql = PgOptions::new()
            .with_lock_timeout(Duration::from_millis(1500))
            .with_schema("hb_test")
            .setup_sql();
        assert_eq!(
            sql,
            "SET lock_timeout = '1500ms'; SET search_path TO \"hb_test\""
        );
    }
}
