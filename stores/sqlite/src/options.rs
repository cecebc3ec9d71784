//! How a store is configured.

use std::time::Duration;

use hookbox_core::{CommitMode, RetentionPolicy, RetryPolicy};

/// SQLite's `synchronous` setting: what a commit waits for before it returns.
///
/// In WAL mode (which the store always uses):
///
/// | level | a commit waits for | survives a process crash | survives power loss or an OS crash |
/// |---|---|---|---|
/// | [`Full`](Synchronous::Full) (default) | an fsync of the WAL | yes | yes |
/// | [`Normal`](Synchronous::Normal) | the write to the OS, fsync only at checkpoints | yes | the last commits may be lost |
///
/// With `Full`, a 2xx answered after [`Inbox::receive`](hookbox_core::Inbox::receive)
/// or a committed claim means the row is on disk. With `Normal`, a power cut can
/// take back a delivery that was already acknowledged, and the sender will not
/// resend it. The price of `Full` is one fsync per commit, which bounds the claim
/// rate by the disk's fsync latency; `docs/performance.md` has the measured rates of
/// both levels and the command that produced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `PRAGMA synchronous = FULL`: every commit is on disk before it returns.
    #[default]
    Full,
    /// `PRAGMA synchronous = NORMAL`: commits survive a process crash, not a power
    /// loss.
    Normal,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// The options of a [`SqliteStore`](crate::SqliteStore).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_sqlite::{SqliteOptions, Synchronous};
///
/// let options = SqliteOptions::default()
///     .with_max_connections(8)
///     .with_busy_timeout(Duration::from_secs(10))
///     .with_lease(Duration::from_secs(60))
///     .with_synchronous(Synchronous::Full);
/// assert_eq!(options.lease(), Duration::from_secs(60));
/// ```
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub(crate) retention: RetentionPolicy,
    pub(crate) retry: RetryPolicy,
    pub(crate) lease: Duration,
    pub(crate) max_connections: usize,
    pub(crate) busy_timeout: Duration,
    pub(crate) synchronous: Synchronous,
    pub(crate) commit: CommitMode,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            retention: RetentionPolicy::default(),
            retry: RetryPolicy::default(),
            lease: Duration::from_secs(30),
            max_connections: 4,
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
            commit: CommitMode::default(),
        }
    }
}

impl SqliteOptions {
    /// Sets how long dedupe keys and processed inbox rows are kept (default: 30 days
    /// for every provider). A rule shorter than a provider's minimum is refused when
    /// the policy is built ([`RetentionPolicy::keep`]).
    pub fn with_retention(mut self, policy: RetentionPolicy) -> Self {
        self.retention = policy;
        self
    }

    /// Sets how failed inbox rows are retried and when they become dead letters
    /// (default: 5 attempts, backoff from 1 s to 1 h with full jitter).
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sets how long a worker holds an inbox row before another worker may take it
    /// (default 30 s). A worker that dies mid-row leaves it for this long; a handler
    /// that runs longer than this may see its row taken by another worker, and then
    /// its work is rolled back rather than committed twice.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the number of pooled connections (default 4, at least 1). SQLite runs
    /// one writer at a time; more connections let readers and the next writer's
    /// setup overlap with a commit.
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets how long a statement waits for another connection's write lock before
    /// it fails with [`SqliteError::Busy`](crate::SqliteError::Busy) (default 5 s).
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets the durability of a commit (default [`Synchronous::Full`]).
    pub fn with_synchronous(mut self, level: Synchronous) -> Self {
        self.synchronous = level;
        self
    }

    /// Sets how `Inbox::receive` commits (default: grouped, 256 deliveries per
    /// transaction at most). Grouped, one writer thread takes every insert that is
    /// waiting and commits them together, and a delivery whose key is already stored
    /// is answered from a read connection without queueing for the write lock.
    /// [`CommitMode::PerRequest`] commits each delivery on its own.
    pub fn with_commit_mode(mut self, mode: CommitMode) -> Self {
        self.commit = mode;
        self
    }

    /// The `PRAGMA` that sets this busy timeout on a connection (milliseconds, as
    /// SQLite's `int` takes them).
    pub(crate) fn busy_timeout_pragma(&self) -> String {
        let millis = self.busy_timeout.as_millis().min(i32::MAX as u128);
        format!("PRAGMA busy_timeout = {millis};")
    }

    /// Returns how `Inbox::receive` commits.
    pub fn commit_mode(&self) -> CommitMode {
        self.commit
    }

    /// Returns the retention policy.
    pub fn retention(&self) -> &RetentionPolicy {
        &self.retention
    }

    /// Returns the retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// Returns the lease duration.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Returns the number of pooled connections.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Returns how long a statement waits for the write lock.
    pub fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Returns the durability of a commit.
    pub fn synchronous(&self) -> Synchronous {
        self.synchronous
    }
}
