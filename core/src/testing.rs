//! The conformance suite every store runs (feature `testing`).
//!
//! A store crate implements [`Harness`] for its own test setup (a fresh schema or
//! file per test, plus a small ledger table the side effects write to) and calls
//! each `check_*` function from a `#[tokio::test]`, or all of them through
//! [`conformance_tests!`](crate::conformance_tests). The checks are the seed's
//! testing checklist plus the guarantees of [`IdempotencyStore`], [`VersionGuard`]
//! and [`Inbox`].
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::{
    Advance, BoxFuture, Claim, DedupeKey, IdempotencyStore, Inbox, KeptHeaders, ProcessError,
    Processed, Received, RetentionPolicy, RetryPolicy, StoreError, StoredDelivery,
    TimestampAdvance, VerifiedDelivery, VersionGuard, Worked,
};

/// How the suite wants a store configured for one check.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// Retention for purge checks.
    pub retention: RetentionPolicy,
    /// Retry policy for worker checks (the suite uses a zero backoff base so failed
    /// rows are due again at once).
    pub retry: RetryPolicy,
    /// How long a worker's claim on an inbox row lasts before another worker may
    /// take the row (stores that lease rows; others ignore it).
    pub lease: Duration,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        Self {
            retention: RetentionPolicy::default(),
            retry: RetryPolicy {
                max_attempts: 5,
                base: Duration::ZERO,
                cap: Duration::ZERO,
            },
            lease: Duration::from_secs(1),
        }
    }
}

/// A store under test, with a ledger its side effects write to.
///
/// The ledger is one table `(account TEXT PRIMARY KEY, balance BIGINT NOT NULL
/// DEFAULT 0, plan TEXT)` in the same database as the store, so that side effects
/// commit or roll back with the claim.
pub trait Harness: Send + Sync + Sized + 'static {
    /// The connection side effects run on.
    type Conn: Send;
    /// The store's error.
    type Error: StoreError;
    /// The store: all three traits over one connection type.
    type Store: IdempotencyStore<Conn = Self::Conn, Error = Self::Error>
        + VersionGuard
        + Inbox<Conn = Self::Conn, Error = Self::Error>
        + 'static;

    /// Builds a fresh, isolated store (its own schema or file) with `config`, with
    /// migrations applied and an empty ledger.
    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self>;

    /// Returns the store.
    fn store(&self) -> &Self::Store;

    /// The side effect: adds `amount` to `account` on `conn` (inside the claim's
    /// transaction), creating the account at zero first if needed.
    fn credit<'c>(
        conn: &'c mut Self::Conn,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), Self::Error>>;

    /// The side effect: sets `account`'s plan on `conn`.
    fn set_plan<'c>(
        conn: &'c mut Self::Conn,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), Self::Error>>;

    /// Reads a balance on a separate connection (committed state only); 0 when the
    /// account does not exist.
    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, Self::Error>>;

    /// Reads a plan on a separate connection.
    fn plan<'a>(&'a self, account: &'a str)
    -> BoxFuture<'a, Result<Option<String>, Self::Error>>;

    /// The caller-owned form: begins a transaction itself, calls
    /// [`IdempotencyStore::claim`] inside it, credits `amount` to `account` when the
    /// claim is new, and commits.
    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, Self::Error>>;
}

/// A key in a test's own scope.
pub fn key(id: &str) -> DedupeKey {
    DedupeKey::new("conformance", "standard", id)
}

/// A delivery as a provider would hand it over (verification is the providers'
/// concern; the suite tests what stores do with one).
pub fn delivery(id: &str, body: &str) -> VerifiedDelivery {
    let mut headers = KeptHeaders::default();
    headers.push(
        http::HeaderName::from_static("webhook-id"),
        http::HeaderValue::from_str(id).unwrap(),
    );
    VerifiedDelivery::new(key(id), Bytes::from(body.to_string()), headers)
        .with_event_type(Some("credit".to_string()))
}

/// Runs `process_once` with a 100-credit side effect on `account`.
pub async fn credit_once<H: Harness>(
    h: &H,
    key: &DedupeKey,
    account: &str,
) -> Result<Processed<()>, ProcessError<H::Error, H::Error>> {
    let account = account.to_string();
    h.store()
        .process_once(key, move |conn| {
            Box::pin(async move { H::credit(conn, &account, 100).await })
        })
        .await
}

/// Checklist 1 and "first claim wins": the same event twice is applied once.
pub async fn check_same_event_twice_applies_once<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_twice");
    assert_eq!(credit_once(&h, &k, "acct").await.unwrap(), Processed::Applied(()));
    assert_eq!(credit_once(&h, &k, "acct").await.unwrap(), Processed::Duplicate);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// Keys are scoped: the same delivery id from another source or provider is new.
pub async fn check_keys_are_scoped_by_source_and_provider<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let ids = [
        DedupeKey::new("endpoint-a", "stripe", "evt_1"),
        DedupeKey::new("endpoint-b", "stripe", "evt_1"),
        DedupeKey::new("endpoint-a", "svix", "evt_1"),
        DedupeKey::new("endpoint-a", "shopify", "evt_1").with_tenant("a.myshopify.com"),
        DedupeKey::new("endpoint-a", "shopify", "evt_1").with_tenant("b.myshopify.com"),
    ];
    for k in &ids {
        assert_eq!(credit_once(&h, k, "acct").await.unwrap(), Processed::Applied(()));
    }
    for k in &ids {
        assert_eq!(credit_once(&h, k, "acct").await.unwrap(), Processed::Duplicate);
    }
    assert_eq!(h.balance("acct").await.unwrap(), 500);
}

/// Checklist 2 and "N concurrent claims give exactly one winner": copies of one
/// event racing on separate connections apply once, and no copy sees an error.
pub async fn check_concurrent_copies_apply_once<H: Harness>(copies: usize) {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    let k = key("evt_concurrent");
    let tasks: Vec<_> = (0..copies)
        .map(|_| {
            let (h, k) = (Arc::clone(&h), k.clone());
            tokio::spawn(async move { credit_once(&*h, &k, "acct").await })
        })
        .collect();
    let mut applied = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(Processed::Applied(())) => applied += 1,
            Ok(Processed::Duplicate) => {}
            Err(err) => panic!("a concurrent copy failed instead of reporting a duplicate: {err:?}"),
        }
    }
    assert_eq!(applied, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}
