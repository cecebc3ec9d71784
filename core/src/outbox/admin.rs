//! [`OutboxAdmin`]: the operator's verbs on a store's outbox, as one object-safe
//! trait each store implements.

use std::sync::Arc;

use time::OffsetDateTime;

use super::filter::{OutboxFilter, SinkCounts};
use super::message::MessageId;
use super::row::{OutboxMessage, OutboxStats};
use crate::store::{AnyStoreError, BoxFuture};

/// The operator's verbs on an outbox: `stats`, `sinks`, `list`, `count`, `get`,
/// `replay`, `replay_matching` and `purge`, named as
/// [`InboxAdmin`](crate::InboxAdmin)'s on an inbox.
///
/// Object-safe, with every error boxed as [`AnyStoreError`], so one command holds a
/// `&dyn OutboxAdmin` (or a `Box<dyn OutboxAdmin>`) for every backend. Each store
/// implements it beside the SQL it runs (`hookbox-sqlite`, `hookbox-diesel-pg`;
/// `hookbox-redis-cache`'s `Cached<S>` forwards to the store it wraps); `Arc<S>`,
/// `Box<S>` and `&S` forward to `S`. None of these verbs is on the stage or relay
/// path ([`OutboxStore`](crate::OutboxStore)).
///
/// A store value that is also an [`InboxAdmin`](crate::InboxAdmin) answers both
/// traits' verbs: bring only the one you call into scope
/// (`use hookbox_core::OutboxAdmin as _;`), or name it
/// (`OutboxAdmin::stats(&store)`).
///
/// # Contract
/// - Every verb runs on a pooled connection in short statements of its own; none
///   waits for a relay's send.
/// - A replay drops any lease on the message, so a relay still holding an old
///   lease cannot settle it ([`OutboxStore::settle`](crate::OutboxStore::settle)
///   answers `false`); a pending message is never touched by a replay.
pub trait OutboxAdmin: Send + Sync {
    /// Returns the backlog (messages neither sent nor dead, and the oldest one's
    /// staging time), sent and dead counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>>;

    /// Returns the counts per sink, by name.
    ///
    /// # Errors
    /// The database failed.
    fn sinks(&self) -> BoxFuture<'_, Result<Vec<SinkCounts>, AnyStoreError>>;

    /// Returns up to `limit` messages that `filter` selects, newest first (by
    /// staging sequence, descending), starting after its
    /// [`before_seq`](OutboxFilter::before_seq) cursor.
    ///
    /// # Errors
    /// The database failed, or a message could not be read back (the error names
    /// it).
    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>>;

    /// Counts the messages `filter` selects, its cursor ignored.
    ///
    /// # Errors
    /// The database failed.
    fn count(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Returns one message by id; `None` when there is none.
    ///
    /// # Errors
    /// The database failed, or the message could not be read back.
    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>>;

    /// Makes a dead or sent message due now with its attempts reset and any lease
    /// dropped (the operator asks for a send again; its `last_error` is kept until
    /// the next failure replaces it); `false` when there is no such message or it
    /// is pending, in which case nothing changed.
    ///
    /// # Errors
    /// The database failed.
    fn replay<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>>;

    /// Makes every dead message among those `filter` selects (its cursor ignored)
    /// due now, as [`replay`](OutboxAdmin::replay) does one; returns how many.
    /// Messages that are not dead are left as they are (a sent message is sent
    /// again only by [`replay`](OutboxAdmin::replay) of its id), so a filter for
    /// pending or sent messages replays none.
    ///
    /// # Errors
    /// The database failed; nothing was replayed.
    fn replay_matching(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes sent messages whose `sent_at` is older than the retention of their
    /// delivery's provider at `now`
    /// ([`RetentionPolicy::cutoffs`](crate::RetentionPolicy::cutoffs)), in bounded
    /// batches; returns how many. Pending and dead messages stay. The outbox's share
    /// of [`Purge`](crate::Purge), which deletes these with the keys and inbox rows.
    ///
    /// # Errors
    /// The database failed; what was already deleted stays deleted.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>>;
}

// `Arc<S>`, `Box<S>` and `&S` (a `dyn OutboxAdmin` among them) are the view itself.
macro_rules! forward_outbox_admin {
    ($($ty:ty),*) => {$(
        impl<S: OutboxAdmin + ?Sized> OutboxAdmin for $ty {
            fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>> {
                (**self).stats()
            }

            fn sinks(&self) -> BoxFuture<'_, Result<Vec<SinkCounts>, AnyStoreError>> {
                (**self).sinks()
            }

            fn list(
                &self,
                filter: OutboxFilter,
                limit: u32,
            ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
                (**self).list(filter, limit)
            }

            fn count(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).count(filter)
            }

            fn get<'a>(
                &'a self,
                id: &'a MessageId,
            ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>> {
                (**self).get(id)
            }

            fn replay<'a>(
                &'a self,
                id: &'a MessageId,
            ) -> BoxFuture<'a, Result<bool, AnyStoreError>> {
                (**self).replay(id)
            }

            fn replay_matching(
                &self,
                filter: OutboxFilter,
            ) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).replay_matching(filter)
            }

            fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
                (**self).purge(now)
            }
        }
    )*};
}

forward_outbox_admin!(Arc<S>, Box<S>, &S);
