//! How a store is configured, and the statements each new connection runs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hookbox_core::{CommitMode, RetentionPolicy, RetryPolicy};

/// How a [`MysqlStore`](crate::MysqlStore) is configured.
///
/// The database is the URL's (`mysql://app@db/webhooks`): the hookbox tables live
/// there, beside your own.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_diesel_mysql::MysqlOptions;
///
/// let options = MysqlOptions::new()
///     .with_max_connections(16)
///     .with_lock_timeout(Duration::from_secs(2));
/// assert_eq!(options.max_connections(), 16);
/// ```
#[derive(Debug, Clone)]
pub struct MysqlOptions {
    max_connections: usize,
    retention: RetentionPolicy,
    retry: RetryPolicy,
    lock_timeout: Duration,
    pool_timeout: Duration,
    tls_roots: Option<RootsPem>,
    commit: CommitMode,
    group_writers: usize,
    worker_concurrency: u32,
}

/// Writer tasks of a grouped store by default: batches on the wire while the next
/// ones gather. See [`MysqlOptions::with_group_commit_writers`].
pub const DEFAULT_GROUP_COMMIT_WRITERS: usize = 4;

/// Batches a worker runs side by side by default (`SKIP LOCKED` keeps them on
/// different rows). See [`MysqlOptions::with_worker_concurrency`].
pub const DEFAULT_WORKER_CONCURRENCY: u32 = 2;

/// Root certificates in PEM, shown by their size only.
#[derive(Clone)]
struct RootsPem(Arc<[u8]>);

impl fmt::Debug for RootsPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes of PEM>", self.0.len())
    }
}

impl Default for MysqlOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            retention: RetentionPolicy::default(),
            retry: RetryPolicy::default(),
            lock_timeout: Duration::from_secs(5),
            pool_timeout: Duration::from_secs(5),
            tls_roots: None,
            commit: CommitMode::default(),
            group_writers: DEFAULT_GROUP_COMMIT_WRITERS,
            worker_concurrency: DEFAULT_WORKER_CONCURRENCY,
        }
    }
}

impl MysqlOptions {
    /// The defaults: 8 connections, the default retention and retry policies, a 5 s
    /// lock timeout, a 5 s pool timeout, group commit with 4 writer tasks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how `Inbox::receive` commits (default: grouped, 256 deliveries per
    /// statement at most). Grouped, writer tasks take every insert that is waiting
    /// and write them as one multi-row `INSERT`, and a delivery whose key is already
    /// stored is answered by a read without queueing.
    /// [`CommitMode::PerRequest`] reads and inserts each delivery on its own (the
    /// read answers a stored key without the lock an `INSERT`'s duplicate check
    /// would wait for).
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
    /// shares CPUs with the receiver. The pool must hold the writers, the lookup and
    /// the other callers: [`with_max_connections`](Self::with_max_connections) well
    /// above the writers.
    ///
    /// ```
    /// use hookbox_diesel_mysql::{DEFAULT_GROUP_COMMIT_WRITERS, MysqlOptions};
    ///
    /// assert_eq!(MysqlOptions::new().group_commit_writers(), DEFAULT_GROUP_COMMIT_WRITERS);
    /// let options = MysqlOptions::new().with_max_connections(16).with_group_commit_writers(8);
    /// assert_eq!(options.group_commit_writers(), 8);
    /// assert_eq!(MysqlOptions::new().with_group_commit_writers(0).group_commit_writers(), 1);
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
    /// `innodb_lock_wait_timeout`, set on every pooled connection in whole seconds
    /// (rounded up, at least 1 s).
    ///
    /// A concurrent copy of a delivery blocks on the first copy's uncommitted key and
    /// then reports a duplicate; this bounds the wait, so a stuck transaction cannot
    /// hang every receiver. A wait that runs out fails with the transient
    /// [`MysqlError::LockTimeout`](crate::MysqlError::LockTimeout). Zero sets the
    /// server's largest value (not recommended).
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Sets how long a call waits for a free pooled connection, and for a new one
    /// to open (default 5 s). A wait that runs out fails with the transient
    /// [`MysqlError::PoolTimeout`](crate::MysqlError::PoolTimeout) or
    /// [`MysqlError::Connect`](crate::MysqlError::Connect).
    pub fn with_pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// Trusts the root certificates in `pem` (one or more `-----BEGIN CERTIFICATE-----`
    /// blocks: your server's CA, a cloud provider's bundle) instead of the compiled-in
    /// Mozilla roots, for the connections whose URL names no `ssl-ca` (which takes
    /// precedence, like a connection string over a default).
    ///
    /// The roots are used as the URL's `ssl-mode` says (see [`SslMode`](crate::SslMode)):
    /// `VERIFY_IDENTITY` checks the chain and the host name, `VERIFY_CA` and
    /// `REQUIRED` the chain; `PREFERRED` (the default when the URL has no `ssl-mode`)
    /// and `DISABLED` verify nothing, so pair this with `?ssl-mode=VERIFY_IDENTITY`.
    /// The PEM is parsed by [`MysqlStore::connect`](crate::MysqlStore::connect),
    /// which fails with [`MysqlError::TlsSettings`](crate::MysqlError::TlsSettings)
    /// when it holds no valid certificate.
    ///
    /// ```
    /// use hookbox_diesel_mysql::MysqlOptions;
    ///
    /// # fn read_ca() -> Vec<u8> { Vec::new() }
    /// let ca: Vec<u8> = read_ca(); // e.g. std::fs::read("/etc/hookbox/db-ca.pem")?
    /// let options = MysqlOptions::new().with_tls_root_certificates_pem(ca);
    /// // with "mysql://app@db.internal/app?ssl-mode=VERIFY_IDENTITY"
    /// # drop(options);
    /// ```
    pub fn with_tls_root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_roots = Some(RootsPem(pem.into().into()));
        self
    }

    /// Returns the root certificates given to
    /// [`MysqlOptions::with_tls_root_certificates_pem`], if any.
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

    /// The statements each new connection runs before the pool hands it out.
    ///
    /// - `time_zone = '+00:00'`: `CURRENT_TIMESTAMP` defaults and any `TIMESTAMP`
    ///   column of yours read in UTC, as the store writes its `DATETIME(6)` columns.
    /// - `READ COMMITTED`, PostgreSQL's default: `FOR UPDATE SKIP LOCKED` and the
    ///   claims lock the rows they touch and no gaps, so a worker's batch never
    ///   blocks the inserts of new deliveries (REPEATABLE READ's next-key locks
    ///   would). Side effects and handlers run at this level too.
    /// - `innodb_lock_wait_timeout`: the lock timeout, in whole seconds.
    /// - `lc_messages = 'en_US'`: the error messages the store classifies.
    /// - `STRICT_ALL_TABLES` added to the session's `sql_mode`: a value too long for
    ///   its column is an error, never silently cut to a different key.
    pub(crate) fn setup_sql(&self) -> String {
        let seconds = if self.lock_timeout.is_zero() {
            // the server's largest value
            1_073_741_824
        } else {
            self.lock_timeout.as_secs() + u64::from(self.lock_timeout.subsec_nanos() > 0)
        };
        format!(
            "SET SESSION time_zone = '+00:00'; \
             SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
             SET SESSION innodb_lock_wait_timeout = {}; \
             SET SESSION lc_messages = 'en_US'; \
             SET SESSION sql_mode = IF(@@SESSION.sql_mode = '', 'STRICT_ALL_TABLES', \
               CONCAT(@@SESSION.sql_mode, ',STRICT_ALL_TABLES'))",
            seconds.max(1)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_sets_the_lock_timeout_in_whole_seconds() {
        let sql = MysqlOptions::new()
            .with_lock_timeout(Duration::from_millis(1500))
            .setup_sql();
        assert!(sql.contains("innodb_lock_wait_timeout = 2;"), "{sql}");
        let sql = MysqlOptions::new()
            .with_lock_timeout(Duration::from_millis(300))
            .setup_sql();
        assert!(sql.contains("innodb_lock_wait_timeout = 1;"), "{sql}");
        let sql = MysqlOptions::new().setup_sql();
        assert!(sql.contains("innodb_lock_wait_timeout = 5;"), "{sql}");
        assert!(sql.contains("READ COMMITTED"), "{sql}");
        assert!(sql.contains("time_zone = '+00:00'"), "{sql}");
    }
}
