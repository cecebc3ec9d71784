//! The operator's verbs through the cache: [`InboxAdmin`] and [`OutboxAdmin`] for
//! [`Cached`], each the wrapped store's, except that the inbox's `purge` is
//! `Cached`'s own [`Purge`] (the store's purge, then the flush it may need).
//!
//! No operator verb reads or writes Redis: a replayed dead letter or message keeps
//! its dedupe key, so the cache's entries stay true.

use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BoxFuture, InboxAdmin, InboxFilter, InboxStats, MessageId, OutboxAdmin,
    OutboxFilter, OutboxMessage, OutboxStats, Purge, Purged, StoredDelivery,
};

use crate::Cached;

impl<S: InboxAdmin + Purge> InboxAdmin for Cached<S> {
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>> {
        self.inner().stats()
    }

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
        self.inner().list(filter, limit)
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

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        self.inner().list(filter, limit)
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
