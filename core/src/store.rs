//! The store traits: claim a dedupe key in the same transaction as the side effect.
//!
//! Two forms, both claiming the key with a UNIQUE insert in the side effect's
//! transaction (a check-then-insert double-applies under concurrency; a key committed
//! apart from its side effect loses every event whose process dies in between):
//!
//! - [`IdempotencyStore::claim`] runs *inside* a transaction the caller already holds,
//!   for code that owns its transaction;
//! - [`IdempotencyStore::process_once`] opens the transaction itself: insert the key
//!   (`ON CONFLICT DO NOTHING`), run the side effect on the same connection only if the
//!   key was new, and commit both or neither.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::handler::{HandlerError, SideEffect};
use crate::{DedupeKey, RetentionPolicy};

/// A boxed, `Send` future: the shape every store method returns, so that code generic
/// over a store can call it (an `impl Future` in these positions trips rustc issue
/// #100013, "`Send` not provable", in generic callers).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A side effect with its types erased, as a store receives it
/// ([`IdempotencyStore::process_once_erased`]). The second argument is a scope
/// marker: `&'c &'a ()` proves that whatever the side effect borrows for `'a`
/// outlives the connection borrow `'c`.
pub type ErasedSideEffect<'a, C> = Box<
    dyn for<'c> FnOnce(&'c mut C, &'c &'a ()) -> BoxFuture<'c, Result<(), HandlerError>>
        + Send
        + 'a,
>;

/// The result of [`IdempotencyStore::process_once`].
pub type ProcessResult<T, S> = Result<Processed<T>, ProcessError<S>>;

/// What claiming a key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The key was not there: this delivery is the first; apply its side effect.
    New,
    /// The key was already claimed by a committed transaction: skip and acknowledge.
    Duplicate,
}

/// What [`IdempotencyStore::process_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed<T> {
    /// The key was new; the side effect ran and committed with it.
    Applied(T),
    /// The key was already claimed; nothing ran. Answer 2xx all the same.
    Duplicate,
}

impl<T> Processed<T> {
    /// Returns `true` for [`Processed::Duplicate`].
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Self::Duplicate)
    }
}

/// Why [`IdempotencyStore::process_once`] failed. In every case nothing was
/// committed: the key is free again, so the sender's retry runs the side effect.
#[derive(Debug)]
pub enum ProcessError<S> {
    /// The store failed (connection lost, lock timeout); see
    /// [`StoreError::is_transient`].
    Store(S),
    /// The side effect returned an error; its writes and the claim were rolled back.
    SideEffect(HandlerError),
}

impl<S: StoreError> ProcessError<S> {
    /// Returns `true` when retrying later may succeed, so an HTTP edge answers 5xx and
    /// lets the sender retry. A side-effect error is the caller's to classify.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(err) => err.is_transient(),
            Self::SideEffect(_) => false,
        }
    }
}

impl<S: StoreError> fmt::Display for ProcessError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Store(_) => "the store failed; nothing was committed",
            Self::SideEffect(_) => {
                "the side effect failed; its writes and the claim were rolled back"
            }
        })
    }
}

impl<S: StoreError> StdError for ProcessError<S> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Store(err) => Some(err),
            Self::SideEffect(err) => Some(err.as_error()),
        }
    }
}

/// The error of a store crate.
pub trait StoreError: StdError + Send + Sync + 'static {
    /// Returns `true` when the failure may pass on its own (connection lost, lock or
    /// busy timeout, database restarting): the delivery was not stored, answer 5xx
    /// so the sender retries. `false` means retrying the same call cannot help.
    fn is_transient(&self) -> bool;
}

/// What every store declares once: the connection user code runs on and the error.
///
/// [`IdempotencyStore`], [`Inbox`](crate::Inbox), [`VersionGuard`],
/// [`OutboxStore`](crate::OutboxStore) and [`Purge`](crate::Purge) build on it, so
/// a store names its connection and error in one place. `Arc<S>` and `&S` are stores
/// too.
pub trait Store: Send + Sync {
    /// The connection side effects and handlers run on, inside the store's
    /// transaction.
    type Conn: Send;
    /// The store's error.
    type Error: StoreError;

    /// Returns how long the store keeps dedupe keys, processed rows and sent
    /// messages ([`Purge`](crate::Purge) deletes by it); a cache in front of the
    /// store reads its TTL ceiling from here.
    fn retention(&self) -> &RetentionPolicy;

    /// Checks that the store can take a delivery now: a trivial read of its own
    /// tables on a pooled connection, bounded by the pool's timeout. A readiness
    /// probe calls it (`hookbox_axum::health_router`); it writes nothing.
    ///
    /// # Errors
    /// The database is unreachable, or its tables are gone.
    fn ping(&self) -> BoxFuture<'_, Result<(), Self::Error>>;
}

/// Claims dedupe keys in the same transaction as the caller's side effect.
///
/// A store wraps a database whose UNIQUE constraint on `(scope, provider, delivery
/// id)` decides which copy of a delivery wins; a cache can wrap a store and implement
/// this trait again (the Redis cache does).
///
/// # Guarantees
/// - A key claimed in a transaction that rolls back is free again.
/// - Two concurrent claims of one key: exactly one sees [`Claim::New`]; the other
///   waits for the first transaction and then sees [`Claim::Duplicate`] (or, if the
///   first rolled back, [`Claim::New`]).
/// - The store awaits no outside I/O while its transaction is open; the side effect
///   must not either.
pub trait IdempotencyStore: Store {
    /// Claims `key` on `conn`, inside a transaction the caller has already begun and
    /// will commit or roll back.
    ///
    /// # Errors
    /// The database failed; the caller's transaction should roll back.
    fn claim<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        key: &'a DedupeKey,
    ) -> BoxFuture<'a, Result<Claim, Self::Error>>;

    /// Begins a transaction, claims `key`, runs `side_effect` on the same connection
    /// only if the key was new, and commits both or neither.
    ///
    /// The side effect is an async closure, `async |conn| { …; Ok(value) }` (see
    /// [`SideEffect`]); it may borrow the delivery and anything else around it.
    ///
    /// # Errors
    /// [`ProcessError::SideEffect`] when the side effect failed (everything rolled
    /// back, the key is free), [`ProcessError::Store`] when the database did.
    fn process_once<'a, T, F>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: F,
    ) -> BoxFuture<'a, ProcessResult<T, Self::Error>>
    where
        F: SideEffect<Self::Conn, T> + 'a,
        T: Send + 'a,
    {
        Box::pin(async move {
            // the value leaves through a slot, so stores see one erased closure type
            let mut value = None;
            let slot = &mut value;
            let erased: ErasedSideEffect<'_, Self::Conn> = Box::new(move |conn, _scope| {
                Box::pin(async move {
                    *slot = Some(side_effect(conn).await?);
                    Ok(())
                })
            });
            match self.process_once_erased(key, erased).await? {
                Claim::Duplicate => Ok(Processed::Duplicate),
                Claim::New => value.map(Processed::Applied).ok_or_else(|| {
                    ProcessError::SideEffect(
                        "the store committed without running the side effect".into(),
                    )
                }),
            }
        })
    }

    /// [`IdempotencyStore::process_once`] with the side effect's types erased: what a
    /// store implements. Returns [`Claim::New`] when the side effect ran and
    /// committed with the key, [`Claim::Duplicate`] when it did not run.
    ///
    /// Call it with the scope argument `&&()`; it only ties the side effect's
    /// lifetime to the borrow it was built from.
    ///
    /// # Errors
    /// As [`IdempotencyStore::process_once`].
    fn process_once_erased<'a>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: ErasedSideEffect<'a, Self::Conn>,
    ) -> BoxFuture<'a, Result<Claim, ProcessError<Self::Error>>>;
}

/// What [`VersionGuard::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// The version was newer than the stored one and is now stored: apply the update.
    Applied,
    /// The version was not newer: skip the update (the event is still processed).
    Stale,
}

/// What [`VersionGuard::advance_at`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampAdvance {
    /// Strictly newer than the stored time: stored, apply the update.
    Applied,
    /// Older than the stored time: skip the update.
    Stale,
    /// The same time as the stored one: whole-second timestamps tie, and neither `>=`
    /// (a stale update overwrites a newer one) nor `>` (a newer update is lost) is
    /// right. Nothing is stored; the caller decides, for example by re-fetching the
    /// object from the provider's API.
    Unknown,
}

/// Orders updates per object, in the same transaction as the claim.
///
/// No provider promises order. A per-object version from the source decides
/// "newer": the update applies only when `version > stored`.
pub trait VersionGuard: IdempotencyStore {
    /// Stores `version` for `object` if it is greater than the stored one.
    ///
    /// Call it on the claim's connection, inside its transaction.
    ///
    /// # Errors
    /// The database failed.
    fn advance<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        object: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Advance, Self::Error>>;

    /// Stores `at` for `object` if it is strictly later than the stored time, and
    /// reports a tie as [`TimestampAdvance::Unknown`].
    ///
    /// # Errors
    /// The database failed.
    fn advance_at<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        object: &'a str,
        at: time::OffsetDateTime,
    ) -> BoxFuture<'a, Result<TimestampAdvance, Self::Error>>;
}

// `Arc<S>` and `&S` are the store itself: one pool, shared.
macro_rules! forward_store {
    ($($ty:ty),*) => {$(
        impl<S: Store + ?Sized> Store for $ty {
            type Conn = S::Conn;
            type Error = S::Error;
            fn retention(&self) -> &RetentionPolicy {
                (**self).retention()
            }

            fn ping(&self) -> BoxFuture<'_, Result<(), Self::Error>> {
                (**self).ping()
            }
        }

        impl<S: IdempotencyStore> IdempotencyStore for $ty {
            fn claim<'a>(
                &'a self,
                conn: &'a mut Self::Conn,
                key: &'a DedupeKey,
            ) -> BoxFuture<'a, Result<Claim, Self::Error>> {
                (**self).claim(conn, key)
            }

            fn process_once_erased<'a>(
                &'a self,
                key: &'a DedupeKey,
                side_effect: ErasedSideEffect<'a, Self::Conn>,
            ) -> BoxFuture<'a, Result<Claim, ProcessError<Self::Error>>> {
                (**self).process_once_erased(key, side_effect)
            }
        }

        impl<S: VersionGuard> VersionGuard for $ty {
            fn advance<'a>(
                &'a self,
                conn: &'a mut Self::Conn,
                object: &'a str,
                version: i64,
            ) -> BoxFuture<'a, Result<Advance, Self::Error>> {
                (**self).advance(conn, object, version)
            }

            fn advance_at<'a>(
                &'a self,
                conn: &'a mut Self::Conn,
                object: &'a str,
                at: time::OffsetDateTime,
            ) -> BoxFuture<'a, Result<TimestampAdvance, Self::Error>> {
                (**self).advance_at(conn, object, at)
            }
        }
    )*};
}
forward_store!(Arc<S>, &S);

/// Any store's error, boxed: what [`InboxAdmin`](crate::InboxAdmin) and
/// [`OutboxAdmin`](crate::OutboxAdmin) return, so one `&dyn InboxAdmin` (or
/// `&dyn OutboxAdmin`) serves every backend.
pub struct AnyStoreError(Box<dyn StoreError>);

impl AnyStoreError {
    /// Boxes a store's error.
    pub fn new(error: impl StoreError) -> Self {
        Self(Box::new(error))
    }

    /// Returns the store's own error, to downcast.
    pub fn inner(&self) -> &(dyn StoreError + 'static) {
        &*self.0
    }
}

impl fmt::Debug for AnyStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for AnyStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl StdError for AnyStoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl StoreError for AnyStoreError {
    fn is_transient(&self) -> bool {
        self.0.is_transient()
    }
}
