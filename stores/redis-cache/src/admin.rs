//! The operator's verbs through the cache: [`InboxAdmin`] and [`OutboxAdmin`] for
//! [`Cached`], each the wrapped store's, except that the inbox's `purge` is
//! `Cached`'s own [`Purge`] (the store's purge, then the flush it may need).
//!
//! No operator verb reads or writes Redis but `purge_matching`, which flushes the
//! cache after deleting dead letters: a replayed dead letter or message keeps its
//! dedupe key, so the cache's entries stay true, but a deleted dead letter's does
//! not.

use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BoxFuture, InboxAdmin, InboxFilter, InboxOverview, InboxStats, MessageId,
    OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats, Purge, Purged, SinkCounts,
    StoredDelivery,
};

use crate::Cached;

impl<S: InboxAdmin + Purge> InboxAdmin for Cached<S> {
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>> {
        self.inner().stats()
    }

    fn overview(
        &self,
        since: OffsetDateTime,
    ) -> BoxFuture<'_, Result<InboxOverview, AnyStoreError>> {
        self.inner().overview(since)
    }

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
        self.inner().list(filter, limit)
    }

    fn count(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        self.inner().count(filter)
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>> {
        self.inner().get(id)
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>> {
        self.inner().replay(id)
    }

    fn replay_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        self.inner().replay_matching(filter)
    }

    /// The store's `purge_matching`, then a flush of this cache's keys when it
    /// deleted any: a deleted dead letter's key must not answer its provider's next
    /// copy as a duplicate. A flush that fails is logged at error level (the copy of
    /// a deleted dead letter could be refused as a duplicate until its key's ttl).
    fn purge_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move {
            let deleted = self.inner().purge_matching(filter).await?;
            if deleted > 0 {
                self.forget_all().await;
            }
            Ok(deleted)
        })
    }

    /// [`Cached`]'s [`Purge::purge`], so a purge ahead of the clock also flushes
    /// the cache (see "Purge" on [`Cached`]).
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>> {
        Box::pin(async move { Purge::purge(self, now).await.map_err(AnyStoreError::new) })
    }
}

impl<S: OutboxAdmin> OutboxAdmin for Cached<S> {
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>> {
        self.inner().stats()
    }

    fn sinks(&self) -> BoxFuture<'_, Result<Vec<SinkCounts>, AnyStoreError>> {
        self.inner().sinks()
    }

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        self.inner().list(filter, limit)
    }

    fn count(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        self.inner().count(filter)
    }

    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>> {
        self.inner().get(id)
    }

    fn replay<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>> {
        self.inner().replay(id)
    }

    fn replay_matching(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        self.inner().replay_matching(filter)
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        self.inner().purge(now)
    }
}
