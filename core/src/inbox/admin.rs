//! [`InboxAdmin`]: the operator's verbs on a store's inbox, as one object-safe
//! trait each store implements.

use std::sync::Arc;

use time::OffsetDateTime;

use super::filter::{InboxFilter, InboxOverview};
use super::row::{InboxStats, StoredDelivery};
use crate::purge::Purged;
use crate::store::{AnyStoreError, BoxFuture};

/// The operator's verbs on an inbox: `stats`, `overview`, `list`, `count`, `get`,
/// `replay`, `replay_matching`, `purge_matching` and `purge`, the same verbs as
/// [`OutboxAdmin`](crate::OutboxAdmin)'s on an outbox where an outbox has them.
///
/// Object-safe, with every error boxed as [`AnyStoreError`], so a command-line tool
/// or an admin page holds a `&dyn InboxAdmin` (or a `Box<dyn InboxAdmin>`) and
/// needs no enum over backends. Each store implements it beside the SQL it runs
/// (`hookbox-sqlite`, `hookbox-diesel-pg`; `hookbox-redis-cache`'s `Cached<S>`
/// forwards to the store it wraps); `Arc<S>`, `Box<S>` and `&S` forward to `S`.
/// None of these verbs is on the receive or work path ([`Inbox`](crate::Inbox)).
///
/// A store value that is also an [`OutboxAdmin`](crate::OutboxAdmin) answers both
/// traits' verbs: bring only the one you call into scope
/// (`use hookbox_core::InboxAdmin as _;`), or name it
/// (`InboxAdmin::stats(&store)`).
///
/// # Contract
/// - Every verb runs on a pooled connection, in short statements of its own,
///   never inside a worker's or a caller's transaction.
/// - Only [`replay`](InboxAdmin::replay), [`replay_matching`](InboxAdmin::replay_matching),
///   [`purge_matching`](InboxAdmin::purge_matching) and [`purge`](InboxAdmin::purge)
///   write; a replay touches dead letters only (never a processed row, so nothing
///   applied is applied again by it), and so does `purge_matching`.
pub trait InboxAdmin: Send + Sync {
    /// Returns the backlog (rows neither processed nor dead, and the oldest one's
    /// arrival), processed and dead-letter counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>>;

    /// Returns the counts per provider and, for every minute from `since` (rounded
    /// down to its minute) to now, the rows received and processed in it.
    ///
    /// A store may count a minute's processed rows among the rows received since
    /// shortly before `since` only, so that the minutes cost the window's rows and
    /// not the table's (`hookbox-sqlite` reads the ids above the first row received
    /// five minutes before `since`): a row received earlier and processed in the
    /// window, such as a dead letter replayed days later, is then in the counts per
    /// provider but not in the minutes.
    ///
    /// # Errors
    /// The database failed.
    fn overview(
        &self,
        since: OffsetDateTime,
    ) -> BoxFuture<'_, Result<InboxOverview, AnyStoreError>>;

    /// Returns up to `limit` rows that `filter` selects, newest first (by row id,
    /// descending), starting after its [`before_id`](InboxFilter::before_id)
    /// cursor: the next page starts after the last row returned.
    ///
    /// # Errors
    /// The database failed, or a row could not be read back (the error names it).
    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>>;

    /// Counts the rows `filter` selects, its cursor ignored: what
    /// [`replay_matching`](InboxAdmin::replay_matching) or
    /// [`purge_matching`](InboxAdmin::purge_matching) would look at.
    ///
    /// # Errors
    /// The database failed.
    fn count(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Returns one row by id; `None` when there is none.
    ///
    /// # Errors
    /// The database failed, or the row could not be read back.
    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>>;

    /// Makes one dead letter due now with its attempts reset (its `last_error` is
    /// kept until the next failure replaces it); `false` when `id` is not a dead
    /// letter (no such row, pending, or processed), in which case nothing changed.
    ///
    /// # Errors
    /// The database failed.
    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>>;

    /// Makes every dead letter among the rows `filter` selects (its cursor
    /// ignored) due now, as [`replay`](InboxAdmin::replay) does one; returns how
    /// many. Rows that are not dead letters are left as they are, so a filter for
    /// pending or processed rows replays none.
    ///
    /// # Errors
    /// The database failed; nothing was replayed.
    fn replay_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes the dead letters among the rows `filter` selects (its cursor
    /// ignored); returns how many. Only dead letters: a pending row has not been
    /// applied yet, and a processed row's key must outlive the provider's retries
    /// (the retention purges those). A deleted dead letter's delivery, sent again
    /// by its provider, is stored as new.
    ///
    /// # Errors
    /// The database failed; nothing was deleted.
    fn purge_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes what the store's retention lets go at `now`: the operator's door to
    /// the store's [`Purge`](crate::Purge), with the same contract (keys, processed
    /// rows and sent outbox messages past their cutoffs; unprocessed rows, dead
    /// letters and unsent messages never).
    ///
    /// # Errors
    /// The database failed; what was already deleted stays deleted.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>>;
}

// `Arc<S>`, `Box<S>` and `&S` (a `dyn InboxAdmin` among them) are the view itself.
macro_rules! forward_inbox_admin {
    ($($ty:ty),*) => {$(
        impl<S: InboxAdmin + ?Sized> InboxAdmin for $ty {
            fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>> {
                (**self).stats()
            }

            fn overview(
                &self,
                since: OffsetDateTime,
            ) -> BoxFuture<'_, Result<InboxOverview, AnyStoreError>> {
                (**self).overview(since)
            }

            fn list(
                &self,
                filter: InboxFilter,
                limit: u32,
            ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
                (**self).list(filter, limit)
            }

            fn count(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).count(filter)
            }

            fn get(
                &self,
                id: i64,
            ) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>> {
                (**self).get(id)
            }

            fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>> {
                (**self).replay(id)
            }

            fn replay_matching(
                &self,
                filter: InboxFilter,
            ) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).replay_matching(filter)
            }

            fn purge_matching(
                &self,
                filter: InboxFilter,
            ) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).purge_matching(filter)
            }

            fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>> {
                (**self).purge(now)
            }
        }
    )*};
}

forward_inbox_admin!(Arc<S>, Box<S>, &S);
