//! [`InboxAdmin`]: an operator's view of any store's inbox, as one object-safe trait.

use time::OffsetDateTime;

use super::row::{InboxFilter, InboxStats, StoredDelivery};
use super::store::Inbox;
use crate::store::{AnyStoreError, BoxFuture, IdempotencyStore, Purged};

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
