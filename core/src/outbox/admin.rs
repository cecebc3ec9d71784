//! [`OutboxAdmin`]: an operator's view of any store's outbox, as one object-safe
//! trait.

use time::OffsetDateTime;

use super::message::MessageId;
use super::row::{OutboxFilter, OutboxMessage, OutboxStats};
use super::store::OutboxStore;
use crate::store::{AnyStoreError, BoxFuture};

/// An operator's view of an outbox, usable as `&dyn OutboxAdmin` so one command
/// serves every backend. Implemented for every [`OutboxStore`].
pub trait OutboxAdmin: Send + Sync {
    /// Returns the backlog, sent and dead counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>>;

    /// Returns up to `limit` messages that match `filter`.
    ///
    /// # Errors
    /// The database failed.
    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>>;

    /// Returns one message by id.
    ///
    /// # Errors
    /// The database failed.
    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>>;

    /// Makes a dead or sent message due again; `false` when there is none or it is
    /// pending.
    ///
    /// # Errors
    /// The database failed.
    fn retry<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>>;

    /// Makes every dead message due again; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn retry_dead(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes sent messages past their retention; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>>;
}

impl<S: OutboxStore> OutboxAdmin for S {
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>> {
        Box::pin(async move { self.outbox_stats().await.map_err(AnyStoreError::new) })
    }

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        Box::pin(async move {
            self.messages(filter, limit)
                .await
                .map_err(AnyStoreError::new)
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>> {
        Box::pin(async move { self.message(id).await.map_err(AnyStoreError::new) })
    }

    fn retry<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>> {
        Box::pin(async move { self.retry_message(id).await.map_err(AnyStoreError::new) })
    }

    fn retry_dead(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move { self.retry_dead_messages().await.map_err(AnyStoreError::new) })
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move { self.purge_sent(now).await.map_err(AnyStoreError::new) })
    }
}
