//! The conformance suite every store runs (feature `testing`).
//!
//! A store crate implements [`Harness`] for its own test setup (a fresh schema or
//! file per test, plus a small ledger table the side effects write to) and calls
//! each `check_*` function from a `#[tokio::test]`, or all of them through
//! [`conformance_tests!`](crate::conformance_tests). The checks are the seed's
//! testing checklist plus the guarantees of [`IdempotencyStore`], [`VersionGuard`]
//! and [`Inbox`].
//!
//! The checks call the store the way user code does: side effects are async
//! closures, `async |conn| { …; Ok(value) }`, and handlers are async closures or
//! `async fn`s taking `(&mut Conn, &Delivery)` (see [`credit_handler`]), all
//! returning [`HandlerError`] on failure.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::{
    Advance, BoxFuture, Claim, DedupeKey, Delivery, Handler, HandlerError, IdempotencyStore, Inbox,
    KeptHeaders, ProcessError, ProcessResult, Processed, Received, RetentionPolicy, RetryPolicy,
    SideEffect, StoreError, StoredDelivery, TimestampAdvance, VerifiedDelivery, VersionGuard,
    Worked,
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
        + Inbox
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
    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, Self::Error>>;

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

/// [`delivery`] with every fact a provider may add: a correlation id and a signed
/// timestamp (whole seconds, as providers sign them), and a second header.
pub fn delivery_with_facts(id: &str, body: &str) -> VerifiedDelivery {
    let original = delivery(id, body);
    let mut headers = original.headers().clone();
    headers.push(
        http::HeaderName::from_static("webhook-timestamp"),
        http::HeaderValue::from_static("1790000039"),
    );
    VerifiedDelivery::new(
        original.dedupe_key().clone(),
        original.body().clone(),
        headers,
    )
    .with_event_type(Some("credit.facts".to_string()))
    .with_correlation_id(Some(format!("obj_{id}:credit.facts")))
    .with_signed_at(Some(
        OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap(),
    ))
}

/// Runs `process_once` with a 100-credit side effect on `account`.
pub async fn credit_once<H: Harness>(
    h: &H,
    key: &DedupeKey,
    account: &str,
) -> ProcessResult<(), H::Error> {
    h.store()
        .process_once(key, async |conn| {
            H::credit(conn, account, 100).await?;
            Ok(())
        })
        .await
}

/// Checklist 1 and "first claim wins": the same event twice is applied once.
pub async fn check_same_event_twice_applies_once<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_twice");
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Applied(())
    );
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Duplicate
    );
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
        assert_eq!(
            credit_once(&h, k, "acct").await.unwrap(),
            Processed::Applied(())
        );
    }
    for k in &ids {
        assert_eq!(
            credit_once(&h, k, "acct").await.unwrap(),
            Processed::Duplicate
        );
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
            Err(err) => {
                panic!("a concurrent copy failed instead of reporting a duplicate: {err:?}")
            }
        }
    }
    assert_eq!(applied, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// Runs `side_effect` inside a `process_once` transaction under a fresh key and
/// returns its value, for checks that need a connection inside a transaction.
async fn in_transaction<'a, H, T, F>(h: &'a H, k: &'a DedupeKey, side_effect: F) -> T
where
    H: Harness,
    T: Send + 'a,
    F: SideEffect<H::Conn, T> + 'a,
{
    match h.store().process_once(k, side_effect).await {
        Ok(Processed::Applied(value)) => value,
        Ok(Processed::Duplicate) => panic!("a fresh key was reported as a duplicate"),
        Err(err) => panic!("transaction failed: {err:?}"),
    }
}

/// The caller-owned form: `claim` inside the caller's own transaction.
pub async fn check_claim_inside_callers_transaction<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_caller_owned");
    assert_eq!(
        h.claim_in_own_transaction(&k, "acct", 100).await.unwrap(),
        Claim::New
    );
    assert_eq!(
        h.claim_in_own_transaction(&k, "acct", 100).await.unwrap(),
        Claim::Duplicate
    );
    // the two forms share one key space
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Duplicate
    );
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// A failing side effect rolls back its writes and releases the claim, so the
/// sender's retry applies it.
pub async fn check_failing_side_effect_releases_the_claim<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_fails_once");
    let result: ProcessResult<(), _> = h
        .store()
        .process_once(&k, async |conn| {
            H::credit(conn, "acct", 100).await?;
            Err("downstream rejected it".into())
        })
        .await;
    match result {
        Err(ProcessError::SideEffect(err)) => {
            assert_eq!(err.to_string(), "downstream rejected it");
        }
        other => panic!("expected the side effect's error, got {other:?}"),
    }
    assert_eq!(h.balance("acct").await.unwrap(), 0, "the write rolled back");
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Applied(())
    );
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// The side effect's writes are invisible to other connections until the claim
/// commits.
pub async fn check_side_effect_is_invisible_until_commit<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_invisible");
    let seen_inside = h
        .store()
        .process_once(&k, async |conn| {
            H::credit(conn, "acct", 100).await?;
            Ok(h.balance("acct").await?)
        })
        .await
        .unwrap();
    assert_eq!(seen_inside, Processed::Applied(0));
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// Checklist 3: shuffled updates for one object end on the latest version; stale
/// ones are still recorded as processed.
pub async fn check_shuffled_updates_end_on_the_latest_version<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    // a fixed shuffle of versions 1..=20, the newest arriving mid-stream
    let order = [
        3, 1, 7, 2, 20, 5, 4, 19, 6, 9, 8, 11, 10, 13, 12, 18, 14, 17, 15, 16,
    ];
    let mut applied = 0;
    for version in order {
        let k = key(&format!("evt_plan_v{version}"));
        let store = h.store();
        let outcome = store
            .process_once(&k, async |conn| {
                let advance = store.advance(conn, "acct/plan", version).await?;
                if advance == Advance::Applied {
                    H::set_plan(conn, "acct", &format!("plan_v{version}")).await?;
                }
                Ok(advance)
            })
            .await
            .unwrap();
        if outcome == Processed::Applied(Advance::Applied) {
            applied += 1;
        }
        // the stale ones were processed too: a redelivery is a duplicate
        assert_eq!(
            credit_once(&h, &k, "other").await.unwrap(),
            Processed::Duplicate
        );
    }
    assert_eq!(h.plan("acct").await.unwrap().as_deref(), Some("plan_v20"));
    // 3, 7 and 20 were each newer than everything before them
    assert_eq!(applied, 3);
}

/// Timestamps that tie are reported as unknown, not as newer or older.
pub async fn check_timestamp_guard_reports_ties_as_unknown<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let t = OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap();
    let store = h.store();
    let outcomes = in_transaction(&h, &key("tx-times"), async |conn| {
        let second = Duration::from_secs(1);
        Ok(vec![
            store.advance_at(conn, "acct/plan", t).await?,
            store.advance_at(conn, "acct/plan", t).await?,
            store.advance_at(conn, "acct/plan", t - second).await?,
            store.advance_at(conn, "acct/plan", t + second).await?,
            store.advance_at(conn, "acct/plan", t).await?,
        ])
    })
    .await;
    use TimestampAdvance::{Applied, Stale, Unknown};
    assert_eq!(outcomes, vec![Applied, Unknown, Stale, Applied, Stale]);
}

/// Version guard edge: an equal version is stale, and versions are per object.
pub async fn check_version_guard_is_strict_and_per_object<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let store = h.store();
    let outcomes = in_transaction(&h, &key("tx-versions"), async |conn| {
        Ok(vec![
            store.advance(conn, "a", 2).await?,
            store.advance(conn, "a", 2).await?,
            store.advance(conn, "a", 1).await?,
            store.advance(conn, "b", 1).await?,
            store.advance(conn, "a", 3).await?,
        ])
    })
    .await;
    use Advance::{Applied, Stale};
    assert_eq!(outcomes, vec![Applied, Stale, Stale, Applied, Applied]);
}

/// A version advanced in a transaction that rolls back is not stored.
pub async fn check_version_rolls_back_with_the_transaction<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let store = h.store();
    let result: ProcessResult<(), _> = store
        .process_once(&key("evt_rolled_back"), async |conn| {
            store.advance(conn, "obj", 5).await?;
            Err("abort".into())
        })
        .await;
    assert!(matches!(result, Err(ProcessError::SideEffect(_))));
    let again = in_transaction(&h, &key("tx-after"), async |conn| {
        Ok(store.advance(conn, "obj", 5).await?)
    })
    .await;
    assert_eq!(again, Advance::Applied);
}

/// Checklist 5: a day-old replay is still caught, by a key and by the inbox.
pub async fn check_day_old_replay_is_still_caught<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let k = key("evt_day_old");
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Applied(())
    );
    let d = delivery("evt_day_old_inbox", "{}");
    assert_eq!(h.store().receive(&d).await.unwrap(), Received::Stored);
    drain(&h, &credit_handler::<H>).await;

    let a_day_later = OffsetDateTime::now_utc() + Duration::from_secs(86_400);
    h.store().purge(a_day_later).await.unwrap();
    assert_eq!(
        credit_once(&h, &k, "acct").await.unwrap(),
        Processed::Duplicate
    );
    assert_eq!(h.store().receive(&d).await.unwrap(), Received::Duplicate);
    assert_eq!(drain(&h, &credit_handler::<H>).await, 0);
    assert_eq!(h.balance("acct").await.unwrap(), 200);
}

/// Checklist 7: purge keeps keys for the provider's minimum, then deletes them;
/// dead letters and unprocessed rows are never purged.
pub async fn check_purge_keeps_keys_for_the_provider_minimum<H: Harness>() {
    let four_hours = Duration::from_secs(4 * 3600);
    let retention = RetentionPolicy::default()
        .keep("standard", crate::Retention::from_hours(4), four_hours)
        .unwrap()
        .batch_size(2);
    let config = SuiteConfig {
        retention,
        ..SuiteConfig::default()
    };
    let h = H::setup(config).await;
    for i in 0..5 {
        let k = key(&format!("evt_purge_{i}"));
        assert_eq!(
            credit_once(&h, &k, "acct").await.unwrap(),
            Processed::Applied(())
        );
    }
    let processed = delivery("evt_purge_inbox", "{}");
    h.store().receive(&processed).await.unwrap();
    drain(&h, &credit_handler::<H>).await;
    let pending = delivery("evt_purge_pending", "{}");
    h.store().receive(&pending).await.unwrap();

    let now = OffsetDateTime::now_utc();
    let just_inside = now + four_hours - Duration::from_secs(60);
    assert_eq!(
        h.store().purge(just_inside).await.unwrap(),
        crate::Purged::default()
    );
    assert_eq!(
        credit_once(&h, &key("evt_purge_0"), "acct").await.unwrap(),
        Processed::Duplicate
    );

    let past = now + four_hours + Duration::from_secs(60);
    let purged = h.store().purge(past).await.unwrap();
    assert_eq!(
        purged.keys, 5,
        "batches of 2 still delete every expired key"
    );
    assert_eq!(purged.inbox_rows, 1, "only the processed row goes");
    // gone means a resend is new again: why the minimum matters
    assert_eq!(
        credit_once(&h, &key("evt_purge_0"), "acct").await.unwrap(),
        Processed::Applied(())
    );
    let stats = h.store().stats().await.unwrap();
    assert_eq!(stats.pending, 1, "an unprocessed row is never purged");
    assert_eq!(stats.processed, 0);
}

/// The handler the inbox checks use: credits 100 to the account named in the body,
/// or fails when the body says `poison`.
///
/// # Errors
/// The body says `poison`, or the credit failed.
pub async fn credit_handler<H: Harness>(
    conn: &mut H::Conn,
    delivery: &Delivery,
) -> Result<(), HandlerError> {
    let body = String::from_utf8_lossy(delivery.body()).into_owned();
    if body.contains("poison") {
        return Err(format!("cannot handle {}: poison", delivery.delivery_id()).into());
    }
    let account = if body.contains("acct_b") {
        "acct_b"
    } else {
        "acct"
    };
    H::credit(conn, account, 100).await?;
    Ok(())
}

/// Runs `work_one` with `handler` until the inbox is idle; returns how many rows
/// were processed.
pub async fn drain<H, F>(h: &H, handler: &F) -> u64
where
    H: Harness,
    F: Handler<H::Conn> + 'static,
{
    let mut processed = 0;
    for _ in 0..10_000 {
        match h.store().work_one(handler).await.unwrap() {
            Worked::Idle => return processed,
            Worked::Processed { .. } => processed += 1,
            Worked::Failed { .. } => {}
        }
    }
    panic!("the inbox never became idle");
}

/// Inbox receive: one row per delivery, both outcomes durable.
pub async fn check_inbox_receive_dedupes<H: Harness>(copies: usize) {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    let d = delivery("evt_inbox_copies", "{}");
    let tasks: Vec<_> = (0..copies)
        .map(|_| {
            let (h, d) = (Arc::clone(&h), d.clone());
            tokio::spawn(async move { h.store().receive(&d).await })
        })
        .collect();
    let mut stored = 0;
    for task in tasks {
        if task.await.unwrap().unwrap() == Received::Stored {
            stored += 1;
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(drain(&*h, &credit_handler::<H>).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// The inbox keeps the exact bytes and the headers to verify them again.
pub async fn check_inbox_keeps_raw_bytes_and_headers<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let body: Vec<u8> = vec![0xff, 0x00, b'{', 0x80, b'}', b'\n'];
    let original = delivery("evt_bytes", "");
    let d = VerifiedDelivery::new(
        original.dedupe_key().clone(),
        Bytes::from(body.clone()),
        original.headers().clone(),
    )
    .with_event_type(Some("bytes.test".to_string()));
    h.store().receive(&d).await.unwrap();
    let stats = h.store().stats().await.unwrap();
    assert_eq!(stats.pending, 1);
    assert!(stats.oldest_pending.is_some());
    let check_body = async |_: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.body().as_ref() == [0xff, 0x00, b'{', 0x80, b'}', b'\n'] {
            Ok(())
        } else {
            Err("body changed".into())
        }
    };
    assert_eq!(drain(&h, &check_body).await, 1);
    let row = find_by_key(&h, "evt_bytes").await;
    assert_eq!(row.body.as_ref(), body.as_slice());
    assert_eq!(row.headers, d.headers().clone());
    assert_eq!(row.event_type.as_deref(), Some("bytes.test"));
    assert_eq!(row.key, *d.dedupe_key());
    assert!(row.processed_at.is_some());
}

async fn find_by_key<H: Harness>(h: &H, id: &str) -> StoredDelivery {
    for row_id in 1..1000 {
        if let Some(row) = h.store().get(row_id).await.unwrap()
            && row.key.delivery_id() == id
        {
            return row;
        }
    }
    panic!("no inbox row for {id}");
}

/// The inbox keeps a delivery's correlation id and signed timestamp, reads them
/// back into the row and into the [`Delivery`] a handler gets, and keeps `None` as
/// `None` for providers that send neither.
pub async fn check_inbox_keeps_correlation_id_and_signed_at<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let with = delivery_with_facts("evt_facts", "{}");
    let without = delivery("evt_no_facts", "{}");
    assert_eq!(h.store().receive(&with).await.unwrap(), Received::Stored);
    assert_eq!(h.store().receive(&without).await.unwrap(), Received::Stored);

    let row = find_by_key(&h, "evt_facts").await;
    assert_eq!(row.correlation_id.as_deref(), with.correlation_id());
    assert_eq!(
        row.correlation_id.as_deref(),
        Some("obj_evt_facts:credit.facts")
    );
    assert_eq!(row.signed_at, with.signed_at());
    assert_eq!(
        row.signed_at,
        Some(OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap())
    );
    assert_eq!(row.event_type.as_deref(), Some("credit.facts"));
    let view = row.delivery();
    assert_eq!(view.correlation_id(), with.correlation_id());
    assert_eq!(view.signed_at(), with.signed_at());
    assert_eq!(
        Some(view.occurred_at()),
        with.signed_at(),
        "the signed time"
    );

    let bare = find_by_key(&h, "evt_no_facts").await;
    assert_eq!(bare.correlation_id, None);
    assert_eq!(bare.signed_at, None);
    assert_eq!(
        bare.delivery().occurred_at(),
        bare.received_at,
        "no signed time: when it was received"
    );

    // and the worker's handler sees them too
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = Arc::clone(&seen);
        async move |_: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
            seen.lock().unwrap().push((
                delivery.delivery_id().to_string(),
                delivery.correlation_id().map(str::to_string),
                delivery.signed_at(),
            ));
            Ok(())
        }
    };
    assert_eq!(drain(&h, &record).await, 2);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (
                "evt_facts".to_string(),
                with.correlation_id().map(str::to_string),
                with.signed_at()
            ),
            ("evt_no_facts".to_string(), None, None),
        ]
    );
}

/// What a handler can read from a [`Delivery`] that does not depend on when or how
/// often it ran: what both modes must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFacts {
    pub provider: String,
    pub dedupe_key: DedupeKey,
    pub delivery_id: String,
    pub event_type: Option<String>,
    pub correlation_id: Option<String>,
    pub signed_at: Option<OffsetDateTime>,
    pub occurred_at: OffsetDateTime,
    pub attempt: u32,
    pub body: Bytes,
    pub headers: KeptHeaders,
}

impl DeliveryFacts {
    /// Reads the facts off `delivery`.
    pub fn of(delivery: &Delivery) -> Self {
        Self {
            provider: delivery.provider().to_string(),
            dedupe_key: delivery.dedupe_key().clone(),
            delivery_id: delivery.delivery_id().to_string(),
            event_type: delivery.event_type().map(str::to_string),
            correlation_id: delivery.correlation_id().map(str::to_string),
            signed_at: delivery.signed_at(),
            occurred_at: delivery.occurred_at(),
            attempt: delivery.attempt(),
            body: delivery.body().clone(),
            headers: delivery.headers().clone(),
        }
    }
}

/// One handler serves both modes: the same handler value runs inline, wrapped in
/// `process_once` with [`Delivery::received_now`], and from the inbox through
/// `work_one`; it sees the same [`Delivery`] facts either way, and its writes
/// commit with the claim in one mode and with `processed_at` in the other.
pub async fn check_one_handler_serves_both_modes<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    // an ordinary handler: reads the delivery, writes on the transaction's connection
    let handler = {
        let seen = Arc::clone(&seen);
        async move |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
            seen.lock().unwrap().push(DeliveryFacts::of(delivery));
            H::credit(conn, "acct", 100).await?;
            Ok(())
        }
    };
    let verified = delivery_with_facts("evt_both_modes", r#"{"account":"acct"}"#);

    // inline: verified just now, handled inside the claim's transaction
    let key = verified.dedupe_key().clone();
    let inline = Delivery::received_now(verified.clone(), OffsetDateTime::now_utc());
    let outcome = h
        .store()
        .process_once(&key, async |conn| handler.handle(conn, &inline).await)
        .await
        .unwrap();
    assert_eq!(outcome, Processed::Applied(()));
    // a redelivery inline is a duplicate: the handler does not run again
    let again = h
        .store()
        .process_once(&key, async |conn| handler.handle(conn, &inline).await)
        .await
        .unwrap();
    assert_eq!(again, Processed::Duplicate);
    assert_eq!(h.balance("acct").await.unwrap(), 100);

    // from the inbox: the same delivery stored, then worked by the same handler
    assert_eq!(
        h.store().receive(&verified).await.unwrap(),
        Received::Stored
    );
    assert_eq!(drain(&h, &handler).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 200);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "once inline, once from the inbox");
    let (inline_facts, worker_facts) = (&seen[0], &seen[1]);
    assert_eq!(inline_facts, worker_facts, "one view in both modes");
    assert_eq!(inline_facts.dedupe_key, *verified.dedupe_key());
    assert_eq!(inline_facts.provider, verified.provider());
    assert_eq!(inline_facts.delivery_id, "evt_both_modes");
    assert_eq!(inline_facts.event_type.as_deref(), verified.event_type());
    assert_eq!(
        inline_facts.correlation_id.as_deref(),
        verified.correlation_id()
    );
    assert!(inline_facts.correlation_id.is_some());
    assert_eq!(inline_facts.signed_at, verified.signed_at());
    assert!(inline_facts.signed_at.is_some());
    assert_eq!(Some(inline_facts.occurred_at), verified.signed_at());
    assert_eq!(inline_facts.body, *verified.body());
    assert_eq!(inline_facts.headers, *verified.headers());
    assert_eq!(inline_facts.attempt, 1, "the first attempt in both modes");
}

/// Checklist 8: a poison event becomes a dead letter after the attempt limit while
/// the events behind it keep flowing; replay after a fix applies it once.
pub async fn check_poison_event_dead_letters_while_others_flow<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    h.store()
        .receive(&delivery("evt_poison", "poison"))
        .await
        .unwrap();
    for i in 0..3 {
        h.store()
            .receive(&delivery(&format!("evt_after_poison_{i}"), "{}"))
            .await
            .unwrap();
    }
    let mut failures = 0;
    let mut dead = 0;
    for _ in 0..100 {
        match h.store().work_one(&credit_handler::<H>).await.unwrap() {
            Worked::Idle => break,
            Worked::Processed { .. } => {}
            Worked::Failed {
                attempts,
                dead: is_dead,
                ..
            } => {
                failures += 1;
                assert_eq!(attempts, failures);
                dead += u32::from(is_dead);
            }
        }
    }
    assert_eq!(failures, 5, "the default attempt limit");
    assert_eq!(dead, 1);
    assert_eq!(
        h.balance("acct").await.unwrap(),
        300,
        "the events behind it flowed"
    );
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.processed), (0, 1, 3));

    let letters = h.store().dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.key.delivery_id(), "evt_poison");
    assert_eq!(letter.attempts, 5);
    assert!(letter.dead_at.is_some());
    assert!(
        letter
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("poison")
    );

    // a dead letter is never purged, however old
    let next_year = OffsetDateTime::now_utc() + Duration::from_secs(365 * 86_400);
    h.store().purge(next_year).await.unwrap();
    assert_eq!(h.store().dead_letters(10).await.unwrap().len(), 1);

    // after the fix: replay, and the fixed handler applies it once
    let fixed = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    assert!(h.store().replay(letter.id).await.unwrap());
    assert!(
        !h.store().replay(letter.id).await.unwrap(),
        "no longer dead"
    );
    assert_eq!(drain(&h, &fixed).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 400);
    assert_eq!(h.store().stats().await.unwrap().dead, 0);
}

/// `replay_all` makes every dead letter due again.
pub async fn check_replay_all<H: Harness>() {
    let config = SuiteConfig {
        retry: RetryPolicy {
            max_attempts: 1,
            ..SuiteConfig::default().retry
        },
        ..SuiteConfig::default()
    };
    let h = H::setup(config).await;
    for i in 0..3 {
        let d = delivery(&format!("evt_dead_{i}"), "poison");
        h.store().receive(&d).await.unwrap();
    }
    drain(&h, &credit_handler::<H>).await;
    assert_eq!(h.store().stats().await.unwrap().dead, 3);
    assert_eq!(h.store().replay_all().await.unwrap(), 3);
    let fixed = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    assert_eq!(drain(&h, &fixed).await, 3);
    assert_eq!(h.balance("acct").await.unwrap(), 300);
}

/// Checklist 4: a worker killed between taking a row and committing its side effect
/// (here: its future dropped mid-transaction) leaves the row unprocessed, and the
/// next worker applies it once, not zero times and not twice.
pub async fn check_worker_killed_mid_transaction_applies_once<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    h.store()
        .receive(&delivery("evt_killed", "{}"))
        .await
        .unwrap();
    let stuck = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        // the process "dies" here: the future never completes and is dropped
        std::future::pending::<()>().await;
        Ok(())
    };
    let killed = tokio::time::timeout(Duration::from_millis(300), h.store().work_one(&stuck)).await;
    assert!(killed.is_err(), "the stuck worker was cut off");
    assert_eq!(h.balance("acct").await.unwrap(), 0, "nothing committed");

    // the row comes back (at once, or when the lease expires) and is applied once
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut processed = 0;
    while tokio::time::Instant::now() < deadline && processed == 0 {
        processed = drain(&h, &credit_handler::<H>).await;
        if processed == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(processed, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
    assert_eq!(drain(&h, &credit_handler::<H>).await, 0);
}

/// Several worker tasks never take the same row: every delivery is applied once.
pub async fn check_concurrent_workers_apply_each_row_once<H: Harness>(
    deliveries: usize,
    workers: usize,
) {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    for i in 0..deliveries {
        let d = delivery(&format!("evt_many_{i}"), "{}");
        h.store().receive(&d).await.unwrap();
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let h = Arc::clone(&h);
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                crate::run_worker(
                    h.store(),
                    credit_handler::<H>,
                    Duration::from_millis(20),
                    shutdown,
                )
                .await
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while h.store().stats().await.unwrap().pending > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "workers did not drain the inbox"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap().unwrap().processed;
    }
    assert_eq!(total, deliveries as u64);
    assert_eq!(h.balance("acct").await.unwrap(), 100 * deliveries as i64);
}

/// Checklist 6 at the store: the same delivery verified under the old and the new
/// secret during a rotation is one event. `old` and `new` are the two verified
/// copies (signed with each secret; the store tests build them with a provider).
pub async fn check_rotated_copies_are_one_event<H: Harness>(
    old: VerifiedDelivery,
    new: VerifiedDelivery,
) {
    assert_eq!(old.dedupe_key(), new.dedupe_key());
    let h = H::setup(SuiteConfig::default()).await;
    assert_eq!(h.store().receive(&old).await.unwrap(), Received::Stored);
    assert_eq!(h.store().receive(&new).await.unwrap(), Received::Duplicate);
    assert_eq!(drain(&h, &credit_handler::<H>).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// Generates one `#[tokio::test]` per check for a [`Harness`] type.
///
/// ```text
/// hookbox_core::conformance_tests!(MyHarness);
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($harness:ty) => {
        mod conformance_suite {
            use super::*;
            use $crate::testing as suite;

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn same_event_twice_applies_once() {
                suite::check_same_event_twice_applies_once::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn keys_are_scoped_by_source_and_provider() {
                suite::check_keys_are_scoped_by_source_and_provider::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn concurrent_copies_apply_once() {
                suite::check_concurrent_copies_apply_once::<$harness>(8).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn claim_inside_callers_transaction() {
                suite::check_claim_inside_callers_transaction::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn failing_side_effect_releases_the_claim() {
                suite::check_failing_side_effect_releases_the_claim::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn side_effect_is_invisible_until_commit() {
                suite::check_side_effect_is_invisible_until_commit::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn shuffled_updates_end_on_the_latest_version() {
                suite::check_shuffled_updates_end_on_the_latest_version::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn timestamp_guard_reports_ties_as_unknown() {
                suite::check_timestamp_guard_reports_ties_as_unknown::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn version_guard_is_strict_and_per_object() {
                suite::check_version_guard_is_strict_and_per_object::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn version_rolls_back_with_the_transaction() {
                suite::check_version_rolls_back_with_the_transaction::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn day_old_replay_is_still_caught() {
                suite::check_day_old_replay_is_still_caught::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn purge_keeps_keys_for_the_provider_minimum() {
                suite::check_purge_keeps_keys_for_the_provider_minimum::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn inbox_receive_dedupes() {
                suite::check_inbox_receive_dedupes::<$harness>(8).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn inbox_keeps_raw_bytes_and_headers() {
                suite::check_inbox_keeps_raw_bytes_and_headers::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn inbox_keeps_correlation_id_and_signed_at() {
                suite::check_inbox_keeps_correlation_id_and_signed_at::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn one_handler_serves_both_modes() {
                suite::check_one_handler_serves_both_modes::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn poison_event_dead_letters_while_others_flow() {
                suite::check_poison_event_dead_letters_while_others_flow::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn replay_all() {
                suite::check_replay_all::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn worker_killed_mid_transaction_applies_once() {
                suite::check_worker_killed_mid_transaction_applies_once::<$harness>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn concurrent_workers_apply_each_row_once() {
                suite::check_concurrent_workers_apply_each_row_once::<$harness>(100, 4).await;
            }
        }
    };
}
