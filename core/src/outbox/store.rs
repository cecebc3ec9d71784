//! [`OutboxStore`]: the trait a store implements to stage, lease and settle
//! messages, and [`Outbox`], the handle a handler stages through (each needs the
//! other). The operator's verbs (list, show, replay, stats, purge) are
//! [`OutboxAdmin`](super::OutboxAdmin)'s.

use std::time::Duration;

use time::OffsetDateTime;

use super::message::{Message, MessageId};
use super::row::{Lease, Leased, Settlement, Staged, StagedMessage};
use crate::DedupeKey;
use crate::store::{BoxFuture, Store};

/// Stages messages for one handler run: each [`Outbox::stage`] call takes the next
/// position, so the ids depend only on the delivery, the handler's name and the
/// order of the calls.
///
/// Make one per handler run (`store.outbox(delivery.dedupe_key(), "receipts")`
/// inside the handler), never one shared across runs.
#[derive(Debug)]
pub struct Outbox<'s, S: ?Sized> {
    store: &'s S,
    key: DedupeKey,
    handler: String,
    next: u32,
}

impl<'s, S: OutboxStore + ?Sized> Outbox<'s, S> {
    /// Starts staging for `handler` running on the delivery `key`.
    pub fn new(store: &'s S, key: &DedupeKey, handler: impl Into<String>) -> Self {
        Self {
            store,
            key: key.clone(),
            handler: handler.into(),
            next: 0,
        }
    }

    /// Inserts `message` on `conn`, the handler's connection, inside its transaction;
    /// returns the message's id for your records.
    ///
    /// # Errors
    /// The database failed; return the error so the transaction rolls back.
    pub fn stage<'a>(
        &'a mut self,
        conn: &'a mut S::Conn,
        message: Message,
    ) -> BoxFuture<'a, Result<MessageId, S::Error>> {
        let sequence = self.next;
        self.next = self.next.saturating_add(1);
        let staged = StagedMessage {
            id: MessageId::derive(&self.key, &self.handler, sequence),
            key: self.key.clone(),
            handler: self.handler.clone(),
            sequence,
            message,
        };
        Box::pin(async move {
            let _outcome = self.store.stage(conn, &staged).await?;
            // counted at the insert: a message rolled back with its transaction is
            // counted too, as a staged attempt
            #[cfg(feature = "metrics")]
            if _outcome == Staged::New {
                metrics::counter!("hookbox_outbox_staged_total", "sink" => staged.message.sink.clone())
                    .increment(1);
            }
            Ok(staged.id)
        })
    }
}

/// A store with an outbox table beside its claims.
///
/// # Guarantees
/// - [`OutboxStore::stage`] writes on the caller's connection only: the message
///   commits with the caller's transaction or not at all.
/// - A message is leased to one relay at a time; a lease ends when the relay settles
///   it or when it expires (the relay's process died).
/// - [`OutboxStore::lease`] never returns a message while an earlier message with
///   the same ordering key is neither sent nor dead.
/// - Sent messages are purged with the store's retention
///   ([`Purge`](crate::Purge), [`OutboxAdmin::purge`](super::OutboxAdmin::purge));
///   pending and dead ones never are.
pub trait OutboxStore: Store {
    /// Inserts `message` on `conn`, inside the caller's transaction; a message with
    /// the same id already there is kept and [`Staged::AlreadyStaged`] returned.
    ///
    /// # Errors
    /// The database failed; the caller's transaction should roll back.
    fn stage<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, Self::Error>>;

    /// Starts staging for `handler` on the delivery `key` (see [`Outbox`]).
    fn outbox<'s>(&'s self, key: &DedupeKey, handler: impl Into<String>) -> Outbox<'s, Self>
    where
        Self: Sized,
    {
        Outbox::new(self, key, handler)
    }

    /// Leases up to `limit` due messages until `now + lease`, counting an attempt on
    /// each, in one short transaction. A message is due when it is neither sent nor
    /// dead, its `next_attempt_at` has come, no live lease holds it, and no earlier
    /// message with its ordering key is pending.
    ///
    /// # Errors
    /// The database failed; nothing was leased.
    fn lease(
        &self,
        limit: u32,
        lease: Duration,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<Leased>, Self::Error>>;

    /// Records how a leased message's send ended; `false` when the lease is no longer
    /// held (it expired and another relay took the message, or an operator replayed
    /// it), in which case nothing changed.
    ///
    /// # Errors
    /// The database failed; the lease stays until it expires.
    fn settle<'a>(
        &'a self,
        lease: Lease,
        settlement: Settlement<'a>,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<bool, Self::Error>>;

    /// Records the outcomes of many leased messages, in one transaction where the
    /// store can (both database stores do); returns, in order, whether each lease
    /// was still held ([`OutboxStore::settle`]). The default settles them one by
    /// one.
    ///
    /// # Errors
    /// The database failed; the leases that were not recorded stay until they
    /// expire.
    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, Self::Error>> {
        Box::pin(async move {
            let mut settled = Vec::with_capacity(settlements.len());
            for (lease, settlement) in settlements {
                settled.push(self.settle(*lease, *settlement, now).await?);
            }
            Ok(settled)
        })
    }
}

// `Arc<S>` and `&S` are the outbox itself.
macro_rules! forward_outbox {
    ($($ty:ty),*) => {$(
        impl<S: OutboxStore> OutboxStore for $ty {
            fn stage<'a>(
                &'a self,
                conn: &'a mut Self::Conn,
                message: &'a StagedMessage,
            ) -> BoxFuture<'a, Result<Staged, Self::Error>> {
                (**self).stage(conn, message)
            }

            fn lease(
                &self,
                limit: u32,
                lease: Duration,
                now: OffsetDateTime,
            ) -> BoxFuture<'_, Result<Vec<Leased>, Self::Error>> {
                (**self).lease(limit, lease, now)
            }

            fn settle<'a>(
                &'a self,
                lease: Lease,
                settlement: Settlement<'a>,
                now: OffsetDateTime,
            ) -> BoxFuture<'a, Result<bool, Self::Error>> {
                (**self).settle(lease, settlement, now)
            }

            fn settle_many<'a>(
                &'a self,
                settlements: &'a [(Lease, Settlement<'a>)],
                now: OffsetDateTime,
            ) -> BoxFuture<'a, Result<Vec<bool>, Self::Error>> {
                (**self).settle_many(settlements, now)
            }
        }
    )*};
}

forward_outbox!(std::sync::Arc<S>, &S);
