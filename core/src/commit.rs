//! How a store commits inbox writes: one transaction per delivery, or many
//! deliveries per transaction (group commit).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How [`Inbox::receive`](crate::Inbox::receive) commits.
///
/// A receiver must not answer 2xx before the delivery is durable, and on a disk that
/// honours `fsync` each commit waits for it. With [`CommitMode::Grouped`], calls that
/// arrive together are written by one writer in one transaction: many durable
/// acknowledgements per `fsync`, each answered only after the commit that holds it
/// returned. [`CommitMode::PerRequest`] is the plain path, kept so the two can be
/// compared in one run (the HTTP bench prints both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// One transaction per delivery.
    PerRequest,
    /// Deliveries that wait together share a transaction.
    Grouped(GroupCommit),
}

impl Default for CommitMode {
    fn default() -> Self {
        Self::Grouped(GroupCommit::default())
    }
}

/// The limits of group commit.
///
/// The writer takes what is queued when it is free (no timer, no linger): at low load
/// a batch is one delivery and costs what a per-request commit costs; under load the
/// batch grows with the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommit {
    /// The most deliveries one transaction holds (default 256).
    pub max_batch: usize,
    /// How many deliveries may wait for the writer (default 4,096), besides the few
    /// batches of at most `max_batch` a store's lookup and writer stages hold in
    /// hand. When the queue is full a caller waits for room (backpressure), up to
    /// `queue_timeout`.
    pub queue_depth: usize,
    /// How long a caller waits for room in a full queue before it gets a transient
    /// error, which an HTTP edge answers with 503 and `Retry-After` (default 2 s).
    pub queue_timeout: Duration,
}

impl Default for GroupCommit {
    fn default() -> Self {
        Self {
            max_batch: 256,
            queue_depth: 4_096,
            queue_timeout: Duration::from_secs(2),
        }
    }
}

/// What a store's group-commit writer has done since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Transactions (or statements) committed.
    pub batches: u64,
    /// Deliveries they held.
    pub rows: u64,
}

impl GroupCommitStats {
    /// Returns the deliveries per commit since `before`, or `None` when nothing was
    /// committed in between.
    pub fn mean_batch_since(&self, before: &Self) -> Option<f64> {
        let batches = self.batches.checked_sub(before.batches)?;
        let rows = self.rows.checked_sub(before.rows)?;
        (batches > 0).then(|| rows as f64 / batches as f64)
    }
}

/// The commits a group-committing store made and the deliveries they held, read as
/// [`GroupCommitStats`]. Every writer of a store counts into one.
///
/// For store implementations.
///
/// # Examples
/// ```
/// use hookbox_core::spi::CommitCounts;
///
/// let counts = CommitCounts::default();
/// counts.committed(3);
/// counts.committed(1);
/// let stats = counts.stats();
/// assert_eq!((stats.batches, stats.rows), (2, 4));
/// ```
#[derive(Debug, Default)]
pub struct CommitCounts {
    batches: AtomicU64,
    rows: AtomicU64,
}

impl CommitCounts {
    /// Counts one commit of `rows` deliveries (a batch, or a lone receive's own
    /// statement); with the `metrics` feature, also records it in the histogram
    /// `hookbox_inbox_batch_size`.
    pub fn committed(&self, rows: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::histogram!("hookbox_inbox_batch_size").record(rows as f64);
    }

    /// Returns the commits and deliveries counted so far.
    pub fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            batches: self.batches.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
        }
    }
}

/// The receives a group-committing store has not answered yet, so that a receive can
/// tell it is the only one (low load) and write its own row, as per-request commit
/// does, instead of passing through the store's stages for nothing to batch with.
///
/// For store implementations.
///
/// # Examples
/// ```
/// use hookbox_core::spi::ReceivesInFlight;
///
/// let in_flight = ReceivesInFlight::default();
/// let first = in_flight.enter();
/// assert!(first.alone());
/// assert!(!in_flight.enter().alone());
/// drop(first);
/// assert!(in_flight.enter().alone());
/// ```
#[derive(Debug, Default)]
pub struct ReceivesInFlight(AtomicUsize);

impl ReceivesInFlight {
    /// Counts a receive until the returned guard is dropped (when it is answered, or
    /// when its future is dropped first).
    #[must_use = "the receive counts only while the guard lives"]
    pub fn enter(&self) -> InFlight<'_> {
        let before = self.0.fetch_add(1, Ordering::AcqRel);
        InFlight {
            count: &self.0,
            alone: before == 0,
        }
    }
}

/// One receive counted by [`ReceivesInFlight::enter`].
#[derive(Debug)]
pub struct InFlight<'a> {
    count: &'a AtomicUsize,
    alone: bool,
}

impl InFlight<'_> {
    /// No other receive was in flight when this one entered.
    pub fn alone(&self) -> bool {
        self.alone
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}
