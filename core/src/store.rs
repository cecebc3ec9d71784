//! The store traits: claim a dedupe key in the same transaction as the side effect.
//!
//! Two forms, as the seed's measurements demand (check-then-insert double-applied
//! under concurrency; a key committed apart from its side effect lost every event
//! whose process died in between):
//!
//! - [`IdempotencyStore::claim`] runs *inside* a transaction the caller already holds,
//!   for code that owns its transaction;
//! - [`IdempotencyStore::process_once`] opens the transaction itself: insert the key
//!   (`ON CONFLICT DO NOTHING`), run the side effect on the same connection only if the
//!   key was new, and commit both or neither.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;

use crate::DedupeKey;

/// A boxed, `Send` future: the shape every store method returns, so that code generic
/// over a store can call it (an `impl Future` in these positions trips rustc issue
/// #100013, "`Send` not provable", in generic callers).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The future a side effect returns: it may borrow the connection (`'c`) and anything
/// the caller lends for `'a` (the delivery, a store), which a plain `BoxFuture<'c, _>`
/// under `for<'c>` cannot express. Write `Box::pin(async move { … })`; it coerces.
pub use scoped_futures::ScopedBoxFuture;

/// The result of [`IdempotencyStore::process_once`].
pub type ProcessResult<T, S, E> = Result<Processed<T>, ProcessError<S, E>>;

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
#[derive(Debug, thiserror::Error)]
pub enum ProcessError<S, E> {
    /// The store failed (connection lost, lock timeout); see
    /// [`StoreError::is_transient`].
    #[error("the store failed; nothing was committed")]
    Store(#[source] S),
    /// The side effect returned an error; its writes and the claim were rolled back.
    #[error("the side effect failed; its writes and the claim were rolled back")]
    SideEffect(#[source] E),
}

impl<S: StoreError, E> ProcessError<S, E> {
    /// Returns `true` when retrying later may succeed, so an HTTP edge answers 5xx and
    /// lets the sender retry. A side-effect error is the caller's to classify.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Store(err) => err.is_transient(),
            Self::SideEffect(_) => false,
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

/// Claims dedupe keys in the same transaction as the caller's side effect.
///
/// A store wraps a database whose UNIQUE constraint on `(scope, provider, delivery
/// id)` decides which copy of a delivery wins; a cache can wrap a store and implement
/// this trait again (the Redis cache does), since every method is object-free and
/// generic only over the side effect.
///
/// # Guarantees
/// - A key claimed in a transaction that rolls back is free again.
/// - Two concurrent claims of one key: exactly one sees [`Claim::New`]; the other
///   waits for the first transaction and then sees [`Claim::Duplicate`] (or, if the
///   first rolled back, [`Claim::New`]).
/// - The store awaits no outside I/O while its transaction is open; the side effect
///   must not either.
pub trait IdempotencyStore: Send + Sync {
    /// The connection the side effect runs on, inside the claim's transaction.
    type Conn: Send;
    /// The store's error.
    type Error: StoreError;

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
    /// # Errors
    /// [`ProcessError::SideEffect`] when the side effect failed (everything rolled
    /// back, the key is free), [`ProcessError::Store`] when the database did.
    fn process_once<'a, T, E, F>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: F,
    ) -> BoxFuture<'a, ProcessResult<T, Self::Error, E>>
    where
        F: for<'c> FnOnce(&'c mut Self::Conn) -> ScopedBoxFuture<'a, 'c, Result<T, E>> + Send + 'a,
        T: Send + 'a,
        E: Send + 'a;

    /// Deletes processed keys and processed inbox rows older than the store's
    /// [`RetentionPolicy`](crate::RetentionPolicy), in bounded batches. Dead letters
    /// and unprocessed rows are never purged.
    ///
    /// # Errors
    /// The database failed; what was already deleted stays deleted.
    fn purge(&self, now: time::OffsetDateTime) -> BoxFuture<'_, Result<Purged, Self::Error>>;
}

/// What a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Dedupe keys deleted.
    pub keys: u64,
    /// Processed inbox rows deleted.
    pub inbox_rows: u64,
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
    /// nor `>` is right (the seed measured 17 stale overwrites with one, 19 accounts
    /// stuck on an old plan with the other). Nothing is stored; the caller decides,
    /// for example by re-fetching the object from the provider's API.
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
