//! Batches of inbox rows: the bounds a worker's transaction stays within, and what
//! became of each row it took.

use std::time::Duration;

use time::OffsetDateTime;

use crate::DedupeKey;
use crate::{RetryPolicy, StoredDelivery, Worked};

/// The bounds of one worker transaction ([`Inbox::work_batch`](crate::Inbox::work_batch)).
///
/// A batch takes up to `max_rows` due rows, runs each row's handler inside its own
/// savepoint of one transaction, and commits once. It starts no further row once
/// `time_budget` has passed since the batch began (the rows it took but did not
/// start are due again at once), so one slow handler holds neither a lock nor its
/// neighbours for long. A handler still running after `row_timeout` fails its row.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_core::BatchLimits;
///
/// let limits = BatchLimits::default().max_rows(50).time_budget(Duration::from_millis(5));
/// assert_eq!(limits.rows(), 50);
/// assert_eq!(BatchLimits::per_row().rows(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    max_rows: u32,
    time_budget: Duration,
    row_timeout: Duration,
}

impl Default for BatchLimits {
    /// 100 rows, a 10 ms budget, a 30 s row timeout.
    fn default() -> Self {
        Self {
            max_rows: 100,
            time_budget: Duration::from_millis(10),
            row_timeout: Duration::from_secs(30),
        }
    }
}

impl BatchLimits {
    /// One row per transaction: the worker as it was before batches, for comparison.
    pub fn per_row() -> Self {
        Self::default().max_rows(1)
    }

    /// Sets the most rows one transaction takes (at least 1).
    pub fn max_rows(mut self, rows: u32) -> Self {
        self.max_rows = rows.max(1);
        self
    }

    /// Sets the time after which a batch starts no further row.
    pub fn time_budget(mut self, budget: Duration) -> Self {
        self.time_budget = budget;
        self
    }

    /// Sets how long one handler may run before its row fails.
    pub fn row_timeout(mut self, timeout: Duration) -> Self {
        self.row_timeout = timeout;
        self
    }

    /// Returns the most rows one transaction takes.
    pub fn rows(&self) -> u32 {
        self.max_rows
    }

    /// Returns the time after which a batch starts no further row.
    pub fn budget(&self) -> Duration {
        self.time_budget
    }

    /// Returns how long one handler may run before its row fails.
    pub fn timeout(&self) -> Duration {
        self.row_timeout
    }
}

/// What became of one row a worker took, known after its transaction committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowOutcome {
    /// The inbox row's id.
    pub id: i64,
    /// The row's dedupe key.
    pub key: DedupeKey,
    /// The provider's event type, where verification read one.
    pub event_type: Option<String>,
    /// Processed, or failed and why.
    pub result: RowResult,
}

/// Whether a row's handler succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowResult {
    /// The handler's writes and the row's processed mark committed together.
    Processed,
    /// The handler failed (its writes rolled back) and the failure was recorded.
    Failed(RowFailure),
}

/// A recorded handler failure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowFailure {
    /// Failures so far, this one included.
    pub attempts: u32,
    /// The attempt limit: at `attempts == max_attempts` the row is a dead letter.
    pub max_attempts: u32,
    /// `true` when this failure made the row a dead letter.
    pub dead: bool,
    /// The error with its causes, as stored in `last_error`.
    pub error: String,
    /// When the row is due again; `None` for a dead letter.
    pub next_attempt_at: Option<OffsetDateTime>,
}

impl RowOutcome {
    /// The outcome of row `id` (its key and event type as stored).
    pub fn new(id: i64, key: DedupeKey, event_type: Option<String>, result: RowResult) -> Self {
        Self {
            id,
            key,
            event_type,
            result,
        }
    }

    /// The outcome of a row whose handler succeeded.
    pub fn processed(row: &StoredDelivery) -> Self {
        Self::new(
            row.id,
            row.key.clone(),
            row.event_type.clone(),
            RowResult::Processed,
        )
    }

    /// The outcome of a row whose handler failed.
    pub fn failed(row: &StoredDelivery, failure: RowFailure) -> Self {
        Self::new(
            row.id,
            row.key.clone(),
            row.event_type.clone(),
            RowResult::Failed(failure),
        )
    }

    /// Returns `true` when the handler succeeded.
    pub fn is_processed(&self) -> bool {
        matches!(self.result, RowResult::Processed)
    }

    /// Returns the failure, when the handler failed.
    pub fn failure(&self) -> Option<&RowFailure> {
        match &self.result {
            RowResult::Processed => None,
            RowResult::Failed(failure) => Some(failure),
        }
    }
}

impl RowFailure {
    /// The `attempts`-th failure of a row under `retry`, due again at `next_attempt_at`
    /// unless it reached the attempt limit (then it is a dead letter).
    pub fn new(
        attempts: u32,
        retry: &RetryPolicy,
        error: String,
        next_attempt_at: OffsetDateTime,
    ) -> Self {
        let dead = retry.is_dead(attempts);
        Self {
            attempts,
            max_attempts: retry.max_attempts,
            dead,
            error,
            next_attempt_at: (!dead).then_some(next_attempt_at),
        }
    }

    /// A failure that was not recorded: another worker settled the row meanwhile
    /// (Postgres releases an abandoned batch's rows with its connection, so a second
    /// worker may take and settle the row before this one records its failure). It
    /// neither reschedules nor dead-letters the row; `attempts` is what the row holds.
    pub fn not_recorded(attempts: u32, retry: &RetryPolicy, error: String) -> Self {
        Self {
            attempts,
            max_attempts: retry.max_attempts,
            dead: false,
            error,
            next_attempt_at: None,
        }
    }

    /// A row made a dead letter without running (it cannot be read back, or every
    /// attempt so far died with its worker).
    pub fn dead_letter(attempts: u32, retry: &RetryPolicy, error: String) -> Self {
        Self {
            attempts,
            max_attempts: retry.max_attempts,
            dead: true,
            error,
            next_attempt_at: None,
        }
    }
}

impl From<&RowOutcome> for Worked {
    fn from(outcome: &RowOutcome) -> Self {
        match &outcome.result {
            RowResult::Processed => Worked::Processed { id: outcome.id },
            RowResult::Failed(failure) => Worked::Failed {
                id: outcome.id,
                attempts: failure.attempts,
                dead: failure.dead,
            },
        }
    }
}
