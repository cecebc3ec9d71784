//! The outbox through the cache: every call goes to the wrapped store.
//!
//! The outbox has no hot read a cache could answer: staging writes on the handler's
//! connection, and the relay's lease is a write. Redis plays no part in it, so a
//! handler written for `Cached<S>` stages exactly as it would on `S`. The
//! operator's verbs ([`OutboxAdmin`](hookbox_core::OutboxAdmin)) go to the store
//! too, in [`admin`](crate::admin).

use std::time::Duration;

use hookbox_core::spi::{Lease, Leased, Settlement, Staged, StagedMessage};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{BoxFuture, OutboxStore};

use crate::Cached;

impl<S: OutboxStore> OutboxStore for Cached<S> {
    fn stage<'a>(
        &'a self,
        conn: &'a mut S::Conn,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, S::Error>> {
        self.inner().stage(conn, message)
    }

    fn lease(
        &self,
        limit: u32,
        lease: Duration,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<Leased>, S::Error>> {
        self.inner().lease(limit, lease, now)
    }

    fn settle<'a>(
        &'a self,
        lease: Lease,
        settlement: Settlement<'a>,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<bool, S::Error>> {
        self.inner().settle(lease, settlement, now)
    }

    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, S::Error>> {
        self.inner().settle_many(settlements, now)
    }
}
