//! [`Inbox`]: the trait a store implements to receive deliveries and work them.
//! The operator's verbs (list, show, replay, stats, purge) are
//! [`InboxAdmin`](super::InboxAdmin)'s.

use super::row::{Received, Worked};
use crate::batch::{BatchLimits, RowOutcome};
use crate::handler::{Handler, HandlerError};
use crate::store::{BoxFuture, Store};
use crate::{Delivery, VerifiedDelivery};

/// A handler with its type erased, as a store receives it
/// ([`Inbox::work_batch_erased`]).
pub type ErasedHandler<'a, C> = dyn for<'c> Fn(&'c mut C, &'c Delivery) -> BoxFuture<'c, Result<(), HandlerError>>
    + Send
    + Sync
    + 'a;

/// A durable inbox with a worker queue and a dead-letter set.
///
/// # Guarantees
/// - [`Inbox::receive`] returns only after the row is durable; both outcomes mean 2xx.
/// - [`Inbox::work_one`] never gives one row to two workers at once, runs the handler
///   with the row's transaction connection, and commits the handler's writes with
///   `processed_at`, or neither. A worker killed mid-transaction leaves the row
///   unprocessed for another worker.
/// - A dead letter is never retried (until an operator replays it through
///   [`InboxAdmin`](super::InboxAdmin)) and never blocks the rows behind it.
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
        }
    )*};
}

forward_inbox!(std::sync::Arc<S>, &S);
