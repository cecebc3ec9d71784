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
    Processed, Received, RetentionPolicy, RetryPolicy, ScopedBoxFuture, StoreError, StoredDelivery,
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

/// Runs `f` inside a `process_once` transaction under a fresh key and returns its
/// value, for checks that need a connection inside a transaction.
async fn in_transaction<'a, H, T, F>(h: &'a H, k: &'a DedupeKey, f: F) -> T
where
    H: Harness,
    T: Send + 'a,
    F: for<'c> FnOnce(&'c mut H::Conn) -> ScopedBoxFuture<'a, 'c, Result<T, H::Error>> + Send + 'a,
{
    match h.store().process_once(k, f).await {
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
    let result = h
        .store()
        .process_once(&k, |conn| {
            Box::pin(async move {
                H::credit(conn, "acct", 100)
                    .await
                    .map_err(|e| e.to_string())?;
                Err::<(), String>("downstream rejected it".to_string())
            })
        })
        .await;
    match result {
        Err(ProcessError::SideEffect(msg)) => assert_eq!(msg, "downstream rejected it"),
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
        .process_once(&k, |conn| {
            let h = &h;
            Box::pin(async move {
                H::credit(conn, "acct", 100).await?;
                h.balance("acct").await
            })
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
            .process_once(&k, move |conn| {
                Box::pin(async move {
                    let advance = store.advance(conn, "acct/plan", version).await?;
                    if advance == Advance::Applied {
                        H::set_plan(conn, "acct", &format!("plan_v{version}")).await?;
                    }
                    Ok::<_, H::Error>(advance)
                })
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
    let outcomes = in_transaction(&h, &key("tx-times"), move |conn| {
        Box::pin(async move {
            let second = Duration::from_secs(1);
            Ok(vec![
                store.advance_at(conn, "acct/plan", t).await?,
                store.advance_at(conn, "acct/plan", t).await?,
                store.advance_at(conn, "acct/plan", t - second).await?,
                store.advance_at(conn, "acct/plan", t + second).await?,
                store.advance_at(conn, "acct/plan", t).await?,
            ])
        })
    })
    .await;
    use TimestampAdvance::{Applied, Stale, Unknown};
    assert_eq!(outcomes, vec![Applied, Unknown, Stale, Applied, Stale]);
}

/// Version guard edge: an equal version is stale, and versions are per object.
pub async fn check_version_guard_is_strict_and_per_object<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let store = h.store();
    let outcomes = in_transaction(&h, &key("tx-versions"), move |conn| {
        Box::pin(async move {
            Ok(vec![
                store.advance(conn, "a", 2).await?,
                store.advance(conn, "a", 2).await?,
                store.advance(conn, "a", 1).await?,
                store.advance(conn, "b", 1).await?,
                store.advance(conn, "a", 3).await?,
            ])
        })
    })
    .await;
    use Advance::{Applied, Stale};
    assert_eq!(outcomes, vec![Applied, Stale, Stale, Applied, Applied]);
}

/// A version advanced in a transaction that rolls back is not stored.
pub async fn check_version_rolls_back_with_the_transaction<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let store = h.store();
    let result = store
        .process_once(&key("evt_rolled_back"), move |conn| {
            Box::pin(async move {
                store
                    .advance(conn, "obj", 5)
                    .await
                    .map_err(|e| e.to_string())?;
                Err::<(), String>("abort".to_string())
            })
        })
        .await;
    assert!(matches!(result, Err(ProcessError::SideEffect(_))));
    let again = in_transaction(&h, &key("tx-after"), move |conn| {
        Box::pin(async move { store.advance(conn, "obj", 5).await })
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
    assert_eq!(
        h.store().receive(&d).await.unwrap(),
        Received::AlreadyStored
    );
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
pub fn credit_handler<'c, H: Harness>(
    conn: &'c mut H::Conn,
    row: &'c StoredDelivery,
) -> BoxFuture<'c, Result<(), String>> {
    Box::pin(async move {
        let body = String::from_utf8_lossy(&row.body).into_owned();
        if body.contains("poison") {
            return Err(format!("cannot handle {}: poison", row.key.delivery_id()));
        }
        let account = if body.contains("acct_b") {
            "acct_b"
        } else {
            "acct"
        };
        H::credit(conn, account, 100)
            .await
            .map_err(|e| e.to_string())
    })
}

/// A handler as a trait object, for [`drain`].
pub type DynHandler<H> = dyn for<'c> Fn(
        &'c mut <H as Harness>::Conn,
        &'c StoredDelivery,
    ) -> BoxFuture<'c, Result<(), String>>
    + Send
    + Sync;

/// Pins a handler closure to the higher-ranked signature `work_one` wants (closure
/// lifetimes are not inferred as higher-ranked on their own).
pub fn handler<H, F>(f: F) -> F
where
    H: Harness,
    F: for<'c> Fn(&'c mut H::Conn, &'c StoredDelivery) -> BoxFuture<'c, Result<(), String>>
        + Send
        + Sync,
{
    f
}

/// Runs `work_one` until the inbox is idle; returns how many rows were processed.
pub async fn drain<H: Harness>(h: &H, handler: &DynHandler<H>) -> u64 {
    let mut processed = 0;
    for _ in 0..10_000 {
        match h.store().work_one(&handler).await.unwrap() {
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
    let check_body = handler::<H, _>(|_, row| {
        let ok = row.body.as_ref() == [0xff, 0x00, b'{', 0x80, b'}', b'\n'];
        Box::pin(async move {
            if ok {
                Ok(())
            } else {
                Err("body changed".to_string())
            }
        })
    });
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
    let fixed = handler::<H, _>(|conn, _| {
        Box::pin(async move {
            H::credit(conn, "acct", 100)
                .await
                .map_err(|e| e.to_string())
        })
    });
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
    let fixed = handler::<H, _>(|conn, _| {
        Box::pin(async move {
            H::credit(conn, "acct", 100)
                .await
                .map_err(|e| e.to_string())
        })
    });
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
    let stuck = handler::<H, _>(|conn, _| {
        Box::pin(async move {
            H::credit(conn, "acct", 100)
                .await
                .map_err(|e| e.to_string())?;
            // the process "dies" here: the future never completes and is dropped
            std::future::pending::<Result<(), String>>().await
        })
    });
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
    assert_eq!(
        h.store().receive(&new).await.unwrap(),
        Received::AlreadyStored
    );
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
