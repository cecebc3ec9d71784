//! [`Cached`]: a store wrapped in a Redis front cache.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hookbox_core::spi::{ErasedHandler, ErasedSideEffect, RowOutcome};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Advance, BatchLimits, BoxFuture, Claim, DEFAULT_KEEP, DedupeKey, IdempotencyStore, Inbox,
    ProcessError, Purge, Purged, Received, RetentionPolicy, Store, TimestampAdvance,
    VerifiedDelivery, VersionGuard,
};
use redis::aio::ConnectionManager;

use crate::key::{self, INBOX, PROCESSED};
use crate::{CacheError, CacheOptions};

/// The bound on each command of the cache flush a time-travelling purge runs (see
/// [`Cached`]'s purge rule): not on the acknowledgement path, so longer than a lookup's.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// Keys one `SCAN` step asks for during a flush.
const FLUSH_BATCH: u32 = 1000;

/// Counts of what the cache did, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the key: answered from Redis, the database untouched.
    pub hits: u64,
    /// Lookups that found no key: the database decided.
    pub misses: u64,
    /// Lookups that failed or did not answer within the timeout: the database
    /// decided.
    pub lookup_failures: u64,
    /// Keys written after a commit (acknowledged by Redis).
    pub writes: u64,
    /// Writes that failed or timed out (the next copy of that delivery goes to the
    /// database, which still knows it).
    pub write_failures: u64,
}

/// Counters and the health flag, shared with the spawned writes.
#[derive(Debug)]
struct State {
    hits: AtomicU64,
    misses: AtomicU64,
    lookup_failures: AtomicU64,
    writes: AtomicU64,
    write_failures: AtomicU64,
    // spawned writes not finished yet, so a flush can wait for them first
    pending_writes: AtomicU64,
    // the last call's outcome, so an outage is logged once when it starts and once
    // when it ends rather than on every request
    healthy: AtomicBool,
}

impl State {
    fn new() -> Self {
        Self {
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            lookup_failures: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            write_failures: AtomicU64::new(0),
            pending_writes: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
        }
    }

    fn answered(&self) {
        // a load first: the common case writes nothing shared between threads
        if !self.healthy.load(Ordering::Relaxed) && !self.healthy.swap(true, Ordering::Relaxed) {
            tracing::info!("redis cache answering again");
        }
    }

    fn failed(&self, what: &'static str, err: &dyn fmt::Display) {
        if self.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                error = %err,
                "redis cache {what} failed; falling through to the database until it answers again"
            );
        } else {
            tracing::debug!(error = %err, "redis cache {what} failed");
        }
    }
}

/// A store behind a Redis front cache: a duplicate found in Redis is answered
/// without touching the database; everything else is decided by the database.
///
/// `Cached<S>` implements [`Store`] and [`IdempotencyStore`] for any store `S`, and
/// [`Inbox`], [`VersionGuard`], [`Purge`], `OutboxStore` and the operator's views
/// (`InboxAdmin`, `OutboxAdmin`) when `S` does, with `S`'s connection, error and
/// retention, so it drops in wherever the store was used (an `Arc<Cached<S>>` or a
/// `&Cached<S>` too, and a `&dyn InboxAdmin`).
///
/// # Guarantees
/// - **Redis is never the authority.** A key is written to Redis only after the
///   database committed it (the store's `process_once` returned `Applied` or
///   `Duplicate`, or its `receive` returned `Ok`). A hit therefore always stands for a committed key, and
///   answering it as a duplicate is what the database would answer.
/// - **A miss, an error or a slow answer falls through.** Every Redis call is bounded
///   by [`CacheOptions::with_timeout`] (5 ms by default); whatever does not answer a clear
///   "present" in time goes to the database claim, which decides as if there were no
///   cache. Redis failures are never returned as errors.
/// - **The acknowledgement never waits on a slow Redis.** The write after the commit
///   is spawned on the tokio runtime (bounded by the same timeout); the lookup is the
///   only Redis call on the path, and it is bounded.
/// - **A failed delivery is never cached.** A side-effect error or a store error
///   writes nothing to Redis, so the sender's retry reaches the database and runs
///   the side effect.
/// - **A late write is still true.** A write that missed its timeout may still reach
///   Redis when it answers again (a paused server runs its queued commands); it
///   stands for a committed key all the same.
/// - **No TTL outlives the retention.** [`Cached::new`] refuses a TTL longer than the
///   shortest keep of the store's [`Store::retention`], so Redis cannot remember a key the database has
///   purged (a hit after the purge would turn a resend the store treats as new into a
///   duplicate).
///
/// | Redis state | `process_once` / `receive` | database |
/// |---|---|---|
/// | up, key cached | `Duplicate` at once | not touched |
/// | up, key absent (new, expired, evicted, or cached by another prefix) | the store's own answer; the key is cached after the commit | claims as usual |
/// | slow (over the timeout) | the store's own answer after at most one timeout | claims as usual |
/// | down, refusing connections, restarting | the store's own answer; the manager reconnects in the background | claims as usual |
/// | flushed or restarted empty | the store's own answer; keys are cached again as copies arrive | claims as usual |
/// | side effect or store fails | the error, unchanged | rolled back; nothing cached |
///
/// # Caller-owned transactions
/// [`IdempotencyStore::claim`] runs inside a transaction the caller commits later,
/// so the cache cannot know when (or whether) the key becomes durable: it neither
/// writes Redis nor consults it there (a lookup would await outside I/O while the
/// caller's transaction is open). `claim` is the store's own. Keys claimed this way
/// get cached when a later copy arrives through `process_once`.
///
/// # Inbox and workers
/// `receive` gets the same treatment as `process_once`, in its own key namespace
/// (`i:` beside `k:`): a copy of a delivery already in the inbox is acknowledged from
/// Redis. The worker's methods (`work_one`, `work_batch`), the version guards and
/// the operator's verbs (`InboxAdmin`: `stats`, `list`, `get`, `replay`,
/// `replay_matching`) go straight to the store.
///
/// # Purge
/// [`Purge::purge`] (and so `InboxAdmin::purge`, the operator's door to it) is the
/// store's: Redis expires keys on its own, sooner than the store purges them. A purge whose `now` runs ahead of the wall clock by more than the
/// shortest retention minus the TTL (only tests that simulate time do that) could
/// delete keys Redis still holds, so such a purge also deletes every key under this
/// cache's prefix.
pub struct Cached<S> {
    inner: S,
    redis: ConnectionManager,
    options: CacheOptions,
    shortest_keep: Duration,
    ttl_millis: u64,
    state: Arc<State>,
}

impl<S: fmt::Debug> fmt::Debug for Cached<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the connection manager is left out: its client info holds the URL's password
        f.debug_struct("Cached")
            .field("inner", &self.inner)
            .field("options", &self.options)
            .field("shortest_keep", &self.shortest_keep)
            .field("stats", &self.cache_stats())
            .finish_non_exhaustive()
    }
}

/// Returns the shortest time `retention` keeps any provider's keys (providers without
/// a rule use [`DEFAULT_KEEP`]).
fn shortest_keep(retention: &RetentionPolicy) -> Duration {
    retention
        .rules()
        .map(|(_, keep)| keep)
        .fold(DEFAULT_KEEP, Duration::min)
}

impl<S: Store> Cached<S> {
    /// The cache a deployment turns on with an environment variable: `None` when
    /// `var` is unset or empty (the store alone), else `inner` behind a cache on the
    /// Redis URL `var` holds, with default [`CacheOptions`]. The examples call it with
    /// `HOOKBOX_REDIS_URL`.
    ///
    /// # Errors
    /// As [`connect`](crate::connect) (a URL that does not parse) and
    /// [`Cached::new`].
    pub fn from_env(inner: &S, var: &str) -> Result<Option<Self>, CacheError>
    where
        S: Clone,
    {
        match std::env::var(var) {
            Ok(url) if !url.trim().is_empty() => Ok(Some(Self::new(
                inner.clone(),
                crate::connect(url.trim())?,
                CacheOptions::default(),
            )?)),
            _ => Ok(None),
        }
    }

    /// Wraps `inner` in a Redis front cache on `redis` (see [`connect`](crate::connect)
    /// and [`connect_with_root_ca`](crate::connect_with_root_ca)).
    ///
    /// The TTL ceiling is the wrapped store's own [`Store::retention`]: the TTL must
    /// not be longer than the shortest time it keeps any provider's keys (providers
    /// without a rule are kept [`DEFAULT_KEEP`]).
    ///
    /// # Errors
    /// [`CacheError::TtlLongerThanRetention`] when `options`' TTL is longer than the
    /// store's shortest retention; [`CacheError::InvalidOptions`] for a zero TTL or
    /// timeout.
    pub fn new(
        inner: S,
        redis: ConnectionManager,
        options: CacheOptions,
    ) -> Result<Self, CacheError> {
        let ttl = options.ttl();
        let keep = shortest_keep(inner.retention());
        if ttl > keep {
            return Err(CacheError::TtlLongerThanRetention { ttl, keep });
        }
        // Redis takes whole milliseconds; rounding down keeps the TTL within the
        // retention
        let ttl_millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_millis == 0 {
            return Err(CacheError::InvalidOptions("the ttl must be at least 1 ms"));
        }
        if options.timeout().is_zero() {
            return Err(CacheError::InvalidOptions(
                "a zero timeout would make every lookup a miss",
            ));
        }
        Ok(Self {
            inner,
            redis,
            options,
            shortest_keep: keep,
            ttl_millis,
            state: Arc::new(State::new()),
        })
    }
}

impl<S> Cached<S> {
    /// Returns the wrapped store (for its own methods: migrations, connections).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Returns the wrapped store, dropping the cache.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Returns the options.
    pub fn options(&self) -> &CacheOptions {
        &self.options
    }

    /// Returns the Redis key this cache uses for `key` as processed by
    /// `process_once` (`{prefix}k:…`), for operators and tests.
    pub fn processed_key(&self, key: &DedupeKey) -> String {
        key::redis_key(self.options.prefix(), PROCESSED, key)
    }

    /// Returns the Redis key this cache uses for `key` as stored by the inbox's
    /// `receive` (`{prefix}i:…`).
    pub fn inbox_key(&self, key: &DedupeKey) -> String {
        key::redis_key(self.options.prefix(), INBOX, key)
    }

    /// Returns what the cache has done since it was built.
    pub fn cache_stats(&self) -> CacheStats {
        let s = &self.state;
        CacheStats {
            hits: s.hits.load(Ordering::Relaxed),
            misses: s.misses.load(Ordering::Relaxed),
            lookup_failures: s.lookup_failures.load(Ordering::Relaxed),
            writes: s.writes.load(Ordering::Relaxed),
            write_failures: s.write_failures.load(Ordering::Relaxed),
        }
    }

    /// Returns `true` only when Redis answered "present" within the timeout.
    async fn is_cached(&self, redis_key: &str) -> bool {
        let mut conn = self.redis.clone();
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(redis_key);
        let answer =
            tokio::time::timeout(self.options.timeout(), cmd.query_async::<u64>(&mut conn)).await;
        let state = &self.state;
        let (cached, result) = match answer {
            Ok(Ok(found)) => {
                state.answered();
                if found > 0 {
                    state.hits.fetch_add(1, Ordering::Relaxed);
                    (true, "hit")
                } else {
                    state.misses.fetch_add(1, Ordering::Relaxed);
                    (false, "miss")
                }
            }
            Ok(Err(err)) => {
                state.lookup_failures.fetch_add(1, Ordering::Relaxed);
                state.failed("lookup", &err);
                (false, "fallthrough")
            }
            Err(elapsed) => {
                state.lookup_failures.fetch_add(1, Ordering::Relaxed);
                state.failed("lookup", &elapsed);
                (false, "fallthrough")
            }
        };
        #[cfg(feature = "metrics")]
        metrics::counter!("hookbox_cache_lookups_total", "result" => result).increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = result;
        cached
    }

    /// Writes `redis_key` with the TTL, in a spawned task bounded by the timeout, so
    /// the caller's acknowledgement does not wait for Redis. Call only after the
    /// database committed.
    fn remember(&self, redis_key: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // no runtime to write from: the key stays uncached, the database still
            // knows it
            self.state.write_failures.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut conn = self.redis.clone();
        let timeout = self.options.timeout();
        let ttl_millis = self.ttl_millis;
        self.state.pending_writes.fetch_add(1, Ordering::Relaxed);
        let pending = PendingWrite(Arc::clone(&self.state));
        runtime.spawn(async move {
            let state = &pending.0;
            let mut cmd = redis::cmd("SET");
            cmd.arg(&redis_key).arg(1u8).arg("PX").arg(ttl_millis);
            match tokio::time::timeout(timeout, cmd.query_async::<()>(&mut conn)).await {
                Ok(Ok(())) => {
                    state.answered();
                    state.writes.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(err)) => {
                    state.write_failures.fetch_add(1, Ordering::Relaxed);
                    state.failed("write", &err);
                }
                Err(elapsed) => {
                    state.write_failures.fetch_add(1, Ordering::Relaxed);
                    state.failed("write", &elapsed);
                }
            }
        });
    }

    /// Returns `true` when a purge at `now` may delete keys Redis still holds: a key
    /// cached at wall time `w` lives until `w + ttl`, and the store purges it at
    /// `now` once `now - keep > w`, so the two can overlap only when `now` is more
    /// than `keep - ttl` ahead of the wall clock.
    fn purge_outruns_ttl(&self, now: OffsetDateTime) -> bool {
        let ahead = now - OffsetDateTime::now_utc();
        let margin = self.shortest_keep.saturating_sub(self.options.ttl());
        ahead.is_positive() && ahead.unsigned_abs() > margin
    }

    /// Deletes every key under the prefix, after the writes already spawned have
    /// landed (so none of them re-creates a key behind the flush). A failure leaves
    /// keys behind and is only logged: what they say (committed) stays true.
    pub(crate) async fn forget_all(&self) {
        let deadline = tokio::time::Instant::now() + FLUSH_TIMEOUT;
        while self.state.pending_writes.load(Ordering::Relaxed) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let pattern = key::prefix_pattern(self.options.prefix());
        let mut conn = self.redis.clone();
        let mut cursor: u64 = 0;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(FLUSH_BATCH);
            let step = tokio::time::timeout(
                FLUSH_TIMEOUT,
                scan.query_async::<(u64, Vec<Vec<u8>>)>(&mut conn),
            )
            .await;
            let (next, keys) = match step {
                Ok(Ok(step)) => step,
                Ok(Err(err)) => return flush_failed(&err),
                Err(elapsed) => return flush_failed(&elapsed),
            };
            if !keys.is_empty() {
                let mut unlink = redis::cmd("UNLINK");
                unlink.arg(keys);
                match tokio::time::timeout(FLUSH_TIMEOUT, unlink.query_async::<u64>(&mut conn))
                    .await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(err)) => return flush_failed(&err),
                    Err(elapsed) => return flush_failed(&elapsed),
                }
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

/// Counts a spawned write as pending until its task ends, however it ends (a runtime
/// shutting down drops the task without running it to completion).
struct PendingWrite(Arc<State>);

impl Drop for PendingWrite {
    fn drop(&mut self) {
        self.0.pending_writes.fetch_sub(1, Ordering::Relaxed);
    }
}

fn flush_failed(err: &dyn fmt::Display) {
    tracing::error!(
        error = %err,
        "redis cache flush after a purge failed; some deleted keys stay cached until their ttl \
         (a copy of a deleted delivery may be answered as a duplicate until then)"
    );
}

impl<S: Store> Store for Cached<S> {
    type Conn = S::Conn;
    type Error = S::Error;

    /// Returns the wrapped store's retention (the cache's TTL ceiling).
    fn retention(&self) -> &RetentionPolicy {
        self.inner.retention()
    }

    /// Pings the wrapped store only: the cache is optional, so Redis being down
    /// never makes the receiver unready.
    fn ping(&self) -> BoxFuture<'_, Result<(), S::Error>> {
        self.inner.ping()
    }
}

impl<S: IdempotencyStore> IdempotencyStore for Cached<S> {
    /// Claims `key` with the wrapped store only: see "Caller-owned transactions" on
    /// [`Cached`].
    fn claim<'a>(
        &'a self,
        conn: &'a mut S::Conn,
        key: &'a DedupeKey,
    ) -> BoxFuture<'a, Result<Claim, S::Error>> {
        self.inner.claim(conn, key)
    }

    fn process_once_erased<'a>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: ErasedSideEffect<'a, S::Conn>,
    ) -> BoxFuture<'a, Result<Claim, ProcessError<S::Error>>> {
        Box::pin(async move {
            let redis_key = self.processed_key(key);
            if self.is_cached(&redis_key).await {
                // the side effect is dropped unrun: the key was committed before
                return Ok(Claim::Duplicate);
            }
            // an error returns here, before anything is cached: the retry must
            // reach the database
            let claim = self.inner.process_once_erased(key, side_effect).await?;
            // committed now (new) or before (duplicate): either way the key is
            // durable in the database
            self.remember(redis_key);
            Ok(claim)
        })
    }
}

/// The wrapped store's purge, then a flush of this cache's keys when `now` runs far
/// ahead of the wall clock (see "Purge" on [`Cached`]).
impl<S: Purge> Purge for Cached<S> {
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, S::Error>> {
        Box::pin(async move {
            let purged = self.inner.purge(now).await?;
            // after the store's purge, not before: an entry cached in between stands
            // for a key that was still there
            if self.purge_outruns_ttl(now) {
                self.forget_all().await;
            }
            Ok(purged)
        })
    }
}

impl<S: VersionGuard> VersionGuard for Cached<S> {
    fn advance<'a>(
        &'a self,
        conn: &'a mut S::Conn,
        object: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Advance, S::Error>> {
        self.inner.advance(conn, object, version)
    }

    fn advance_at<'a>(
        &'a self,
        conn: &'a mut S::Conn,
        object: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<TimestampAdvance, S::Error>> {
        self.inner.advance_at(conn, object, at)
    }
}

impl<S: Inbox> Inbox for Cached<S> {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, S::Error>> {
        Box::pin(async move {
            let redis_key = self.inbox_key(delivery.dedupe_key());
            if self.is_cached(&redis_key).await {
                return Ok(Received::Duplicate);
            }
            let received = self.inner.receive(delivery).await?;
            // durable now (stored) or before (duplicate)
            self.remember(redis_key);
            Ok(received)
        })
    }

    fn work_batch_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, S::Conn>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, S::Error>> {
        self.inner.work_batch_erased(handler, limits)
    }

    fn worker_concurrency(&self) -> u32 {
        self.inner.worker_concurrency()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::Retention;

    #[test]
    fn the_shortest_keep_counts_the_default_for_providers_without_a_rule() {
        let policy = RetentionPolicy::default();
        assert_eq!(shortest_keep(&policy), DEFAULT_KEEP);
        let long = Duration::from_secs(60 * 86_400);
        let policy = policy
            .keep("stripe", Retention::from_days(30), long)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shortest_keep(&policy), DEFAULT_KEEP);
        let policy = policy
            .keep(
                "shopify",
                Retention::from_hours(4),
                Duration::from_secs(5 * 3600),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shortest_keep(&policy), Duration::from_secs(5 * 3600));
    }
}
