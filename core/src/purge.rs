//! [`Purge`]: retention as a trait of its own, apart from the claim, receive and
//! relay paths, and [`Purged`], what one purge deleted.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::store::{BoxFuture, Store};

/// What a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Dedupe keys deleted.
    pub keys: u64,
    /// Processed inbox rows deleted.
    pub inbox_rows: u64,
    /// Sent outbox messages deleted.
    pub outbox_messages: u64,
}

/// Deletes what the store's retention lets go: the store's side of retention, run
/// by a periodic job or by an operator (the operator's door is
/// [`InboxAdmin::purge`](crate::InboxAdmin::purge)).
///
/// The cutoffs are [`RetentionPolicy::cutoffs`](crate::RetentionPolicy::cutoffs) of
/// the store's own policy ([`Store::retention`]) at the `now` given: for each
/// provider with a rule, `now` less its keep; for every other provider, `now` less
/// [`DEFAULT_KEEP`](crate::DEFAULT_KEEP).
///
/// # Contract
/// - **Deleted:** dedupe keys claimed before their provider's cutoff; processed
///   inbox rows received before it; sent outbox messages sent before it.
/// - **Never deleted, however old:** inbox rows not processed yet (due or waiting
///   for a retry), dead letters, and outbox messages not sent (pending or dead).
///   Only an operator's explicit act removes those.
/// - **Bounded:** rows go in batches of
///   [`RetentionPolicy::batch`](crate::RetentionPolicy::batch) per statement, each
///   its own short transaction, so a purge never holds locks for long and the
///   receive, work and relay paths keep running beside it. A purge that fails
///   part way keeps what it deleted; running it again finishes the job.
///
/// A store with a cache in front (`hookbox-redis-cache`'s `Cached<S>`) purges the
/// wrapped store, so nothing the cache remembers outlives the row it stands for.
pub trait Purge: Store {
    /// Deletes, in bounded batches, every key, processed inbox row and sent outbox
    /// message past its provider's cutoff at `now` (see the trait's contract);
    /// returns how many of each.
    ///
    /// # Errors
    /// The database failed; what was already deleted stays deleted.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, Self::Error>>;
}

// `Arc<S>` and `&S` purge the store itself.
macro_rules! forward_purge {
    ($($ty:ty),*) => {$(
        impl<S: Purge + ?Sized> Purge for $ty {
            fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, Self::Error>> {
                (**self).purge(now)
            }
        }
    )*};
}

forward_purge!(Arc<S>, &S);
