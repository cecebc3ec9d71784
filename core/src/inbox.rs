//! The inbox: acknowledge fast, process later.
//!
//! Providers time out fast (Shopify 5 s, GitHub 10 s). The durable path is: verify,
//! insert into an inbox table whose UNIQUE key is the dedupe key, answer 2xx, and let a
//! worker apply the side effect, marking the row processed in the same transaction.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::batch::{BatchLimits, RowOutcome};
use crate::handler::{Handler, HandlerError};
use crate::store::{BoxFuture, IdempotencyStore, Purged, Store, StoreError};
use crate::{DedupeKey, Delivery, KeptHeaders, VerifiedDelivery};

/// A handler with its type erased, as a store receives it
/// ([`Inbox::work_batch_erased`]).
pub type ErasedHandler<'a, C> = dyn for<'c> Fn(&'c mut C, &'c Delivery) -> BoxFuture<'c, Result<(), HandlerError>>
    + Send
    + Sync
    + 'a;

/// What [`Inbox::receive`] did. Both mean the delivery is durably stored: answer 2xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Inserted now.
    Stored,
    /// Inserted before (a retry or a concurrent copy); nothing changed.
    Duplicate,
}

/// A delivery as the inbox keeps it: the raw bytes and the headers to verify them
/// again, plus the worker's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    /// The inbox row's id.
    pub id: i64,
    /// The dedupe key (the row's unique key).
    pub key: DedupeKey,
    /// The provider's event type, where verification read one.
    pub event_type: Option<String>,
    /// The id shared by deliveries of one change, where the provider has one.
    pub correlation_id: Option<String>,
    /// The timestamp the provider signed, for providers that sign one.
    pub signed_at: Option<OffsetDateTime>,
    /// The raw body exactly as it was signed.
    pub body: Bytes,
    /// The headers it was verified with.
    pub headers: KeptHeaders,
    /// When the inbox stored it.
    pub received_at: OffsetDateTime,
    /// How many times a handler failed on it.
    pub attempts: u32,
    /// The last handler error, as text.
    pub last_error: Option<String>,
    /// When a worker may take it next.
    pub next_attempt_at: OffsetDateTime,
    /// When a handler succeeded on it.
    pub processed_at: Option<OffsetDateTime>,
    /// When it reached the attempt limit and became a dead letter.
    pub dead_at: Option<OffsetDateTime>,
}

impl StoredDelivery {
    /// Returns the view a handler receives: the same [`Delivery`] an inline handler
    /// gets, with [`Delivery::attempt`] counting this row's tries.
    pub fn delivery(&self) -> Delivery {
        Delivery::of_row(self)
    }

    /// Deserializes the body into your own type.
    ///
    /// # Errors
    /// The body does not match `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// What one [`Inbox::work_one`] call did (a batch's rows are [`RowOutcome`]s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worked {
    /// No row was due.
    Idle,
    /// The handler succeeded; its writes and `processed_at` committed together.
    Processed {
        /// The inbox row's id.
        id: i64,
    },
    /// The handler failed; its writes rolled back and the failure was recorded.
    Failed {
        /// The inbox row's id.
        id: i64,
        /// Failures so far, this one included.
        attempts: u32,
        /// `true` when this failure reached the attempt limit: the row is now a dead
        /// letter and will not be retried until replayed.
        dead: bool,
    },
}

/// Which inbox rows an operator lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InboxFilter {
    /// Not yet processed and not dead, the next due first.
    #[default]
    Pending,
    /// Processed, the most recent first.
    Processed,
    /// Dead letters, the oldest first.
    Dead,
    /// Every row, the newest first.
    All,
}

/// Counts an operator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InboxStats {
    /// Rows not yet processed and not dead (the backlog).
    pub pending: u64,
    /// Rows processed and kept until the retention purges them.
    pub processed: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest pending row was received.
    pub oldest_pending: Option<OffsetDateTime>,
}

/// How failed rows are retried.
///
/// Exponential backoff with full jitter: the delay before attempt `n + 1` is a random
/// duration between zero and `min(cap, base * 2^(n-1))`. Without jitter, every row
/// that failed in one outage retries in the same second (the seed's sender simulation
/// measured a spike of 1,000 retries in one second against 11 with full jitter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failures after which a row becomes a dead letter (default 5).
    pub max_attempts: u32,
    /// The first backoff ceiling (default 1 s).
    pub base: Duration,
    /// The largest backoff ceiling (default 1 h).
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// Returns the delay before the next attempt after `attempts` failures, drawing
    /// the jitter from `unit`, a number in `[0, 1)`.
    pub fn backoff(&self, attempts: u32, unit: f64) -> Duration {
        let exponent = attempts.saturating_sub(1).min(32);
        let ceiling = self
            .base
            .checked_mul(1u32 << exponent.min(31))
            .map_or(self.cap, |d| d.min(self.cap));
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }

    /// Returns the delay before the next attempt after `attempts` failures, with
    /// fresh jitter.
    pub fn next_delay(&self, attempts: u32) -> Duration {
        self.backoff(attempts, fastrand::f64())
    }

    /// Returns `true` when `attempts` failures make a row a dead letter.
    pub fn is_dead(&self, attempts: u32) -> bool {
        attempts >= self.max_attempts
    }
}

/// A durable inbox with a worker queue and a dead-letter set.
///
/// # Guarantees
/// - [`Inbox::receive`] returns only after the row is durable; both outcomes mean 2xx.
/// - [`Inbox::work_one`] never gives one row to two workers at once, runs the handler
///   with the row's transaction connection, and commits the handler's writes with
///   `processed_at`, or neither. A worker killed mid-transaction leaves the row
///   unprocessed for another worker.
/// - A dead letter is never retried and never blocks the rows behind it.
pub trait Inbox: Store {
    /// Stores a verified delivery: one insert, durable before it returns.
    ///
    /// # Errors
    /// Not stored (answer 5xx so the sender retries).
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, Self::Error>>;

    /// Takes one due row and runs `handler` on it in one transaction: a batch of
    /// one row ([`BatchLimits::per_row`]).
    ///
    /// `handler` is an async closure or `async fn`, `async |conn, delivery| { …;
    /// Ok(()) }` (see [`Handler`]). A handler error rolls its writes back, increments
    /// `attempts`, stores the error text (with its causes) in `last_error` and
    /// schedules the next attempt by the retry policy, or makes the row a dead letter
    /// at the attempt limit.
    ///
    /// # Errors
    /// The database failed; the row stays unprocessed.
    fn work_one<'a, H>(&'a self, handler: &'a H) -> BoxFuture<'a, Result<Worked, Self::Error>>
    where
        H: Handler<Self::Conn> + 'static,
    {
        Box::pin(async move {
            let outcomes = self.work_batch(handler, BatchLimits::per_row()).await?;
            Ok(outcomes.first().map_or(Worked::Idle, Worked::from))
        })
    }

    /// Takes up to [`BatchLimits::rows`] due rows and runs `handler` on each, in one
    /// transaction that commits once; returns what became of each row it ran (empty
    /// when none was due).
    ///
    /// # Guarantees
    /// - Each row's handler runs inside its own savepoint: a row's writes and its
    ///   processed mark commit together or not at all.
    /// - A handler error rolls back to that row's savepoint only; its attempt, error
    ///   text and next due time are recorded in the same transaction and its
    ///   neighbours commit.
    /// - A handler that panics or outruns [`BatchLimits::timeout`] is abandoned: the
    ///   whole transaction rolls back (its neighbours are due again, none applied)
    ///   and the failure is recorded against that row alone.
    /// - A failed commit, a crash or a cancelled future applies no row of the batch;
    ///   every row is due again (where the store leases rows, when its lease ends).
    ///
    /// # Errors
    /// The database failed; no row of the batch was applied.
    fn work_batch<'a, H>(
        &'a self,
        handler: &'a H,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, Self::Error>>
    where
        H: Handler<Self::Conn> + 'static,
    {
        Box::pin(async move {
            let erased: &ErasedHandler<'_, Self::Conn> =
                &|conn, delivery| Box::pin(handler.handle(conn, delivery));
            self.work_batch_erased(erased, limits).await
        })
    }

    /// [`Inbox::work_batch`] with the handler's type erased: what a store implements.
    ///
    /// # Errors
    /// As [`Inbox::work_batch`].
    fn work_batch_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, Self::Conn>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, Self::Error>>;

    /// Returns how many batches a worker runs at once on this store unless told
    /// otherwise ([`WorkerOptions::concurrency`](crate::WorkerOptions)): 1 unless
    /// the store can run batches side by side.
    fn worker_concurrency(&self) -> u32 {
        1
    }

    /// Returns one row by id.
    ///
    /// # Errors
    /// The database failed.
    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, Self::Error>>;

    /// Returns up to `limit` rows that match `filter`, in the filter's order.
    ///
    /// # Errors
    /// The database failed.
    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, Self::Error>>;

    /// Returns up to `limit` dead letters, oldest first.
    ///
    /// # Errors
    /// The database failed.
    fn dead_letters(&self, limit: u32) -> BoxFuture<'_, Result<Vec<StoredDelivery>, Self::Error>> {
        self.list(InboxFilter::Dead, limit)
    }

    /// Makes one dead letter due again with its attempts reset; `false` when `id` is
    /// not a dead letter.
    ///
    /// # Errors
    /// The database failed.
    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, Self::Error>>;

    /// Makes every dead letter due again; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn replay_all(&self) -> BoxFuture<'_, Result<u64, Self::Error>>;

    /// Returns the backlog, processed and dead-letter counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, Self::Error>>;
}

// `Arc<S>` and `&S` are the inbox itself.
macro_rules! forward_inbox {
    ($($ty:ty),*) => {$(
        impl<S: Inbox> Inbox for $ty {
            fn receive<'a>(
                &'a self,
                delivery: &'a VerifiedDelivery,
            ) -> BoxFuture<'a, Result<Received, Self::Error>> {
                (**self).receive(delivery)
            }

            fn work_batch_erased<'a>(
                &'a self,
                handler: &'a ErasedHandler<'a, Self::Conn>,
                limits: BatchLimits,
            ) -> BoxFuture<'a, Result<Vec<RowOutcome>, Self::Error>> {
                (**self).work_batch_erased(handler, limits)
            }

            fn worker_concurrency(&self) -> u32 {
                (**self).worker_concurrency()
            }

            fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, Self::Error>> {
                (**self).get(id)
            }

            fn list(
                &self,
                filter: InboxFilter,
                limit: u32,
            ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, Self::Error>> {
                (**self).list(filter, limit)
            }

            fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, Self::Error>> {
                (**self).replay(id)
            }

            fn replay_all(&self) -> BoxFuture<'_, Result<u64, Self::Error>> {
                (**self).replay_all()
            }

            fn stats(&self) -> BoxFuture<'_, Result<InboxStats, Self::Error>> {
                (**self).stats()
            }
        }
    )*};
}

forward_inbox!(std::sync::Arc<S>, &S);

/// Any store's error, boxed: what [`InboxAdmin`] returns, so one `&dyn InboxAdmin`
/// serves every backend.
pub struct AnyStoreError(Box<dyn StoreError>);

impl AnyStoreError {
    /// Boxes a store's error.
    pub fn new(error: impl StoreError) -> Self {
        Self(Box::new(error))
    }

    /// Returns the store's own error, to downcast.
    pub fn inner(&self) -> &(dyn StoreError + 'static) {
        &*self.0
    }
}

impl fmt::Debug for AnyStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for AnyStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for AnyStoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl StoreError for AnyStoreError {
    fn is_transient(&self) -> bool {
        self.0.is_transient()
    }
}

/// An operator's view of an inbox (list, show, replay, dead letters, purge, stats),
/// usable as `&dyn InboxAdmin` so a command-line tool or an admin page needs no enum
/// over backends. Implemented for every store that is an [`Inbox`] and an
/// [`IdempotencyStore`].
pub trait InboxAdmin: Send + Sync {
    /// Returns the backlog, processed and dead-letter counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>>;

    /// Returns up to `limit` rows that match `filter`.
    ///
    /// # Errors
    /// The database failed.
    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>>;

    /// Returns one row by id.
    ///
    /// # Errors
    /// The database failed.
    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>>;

    /// Makes one dead letter due again; `false` when `id` is not a dead letter.
    ///
    /// # Errors
    /// The database failed.
    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>>;

    /// Makes every dead letter due again; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn replay_all(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes what the retention policy lets go (see [`IdempotencyStore::purge`]).
    ///
    /// # Errors
    /// The database failed.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>>;
}

impl<S: Inbox + IdempotencyStore> InboxAdmin for S {
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>> {
        Box::pin(async move { Inbox::stats(self).await.map_err(AnyStoreError::new) })
    }

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
        Box::pin(async move {
            Inbox::list(self, filter, limit)
                .await
                .map_err(AnyStoreError::new)
        })
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>> {
        Box::pin(async move { Inbox::get(self, id).await.map_err(AnyStoreError::new) })
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>> {
        Box::pin(async move { Inbox::replay(self, id).await.map_err(AnyStoreError::new) })
    }

    fn replay_all(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move { Inbox::replay_all(self).await.map_err(AnyStoreError::new) })
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>> {
        Box::pin(async move {
            IdempotencyStore::purge(self, now)
                .await
                .map_err(AnyStoreError::new)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_to_the_cap_with_full_jitter() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1, 1.0), Duration::from_secs(1));
        assert_eq!(policy.backoff(2, 1.0), Duration::from_secs(2));
        assert_eq!(policy.backoff(5, 1.0), Duration::from_secs(16));
        assert_eq!(policy.backoff(40, 1.0), Duration::from_secs(3600));
        assert_eq!(policy.backoff(5, 0.0), Duration::ZERO);
        assert_eq!(policy.backoff(5, 0.5), Duration::from_secs(8));
    }

    #[test]
    fn the_fifth_failure_is_dead_by_default() {
        let policy = RetryPolicy::default();
        assert!(!policy.is_dead(4));
        assert!(policy.is_dead(5));
    }
}
