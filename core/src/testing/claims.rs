//! Claims, version guards and retention: what [`IdempotencyStore`] and
//! [`VersionGuard`] promise, checked the way user code calls them.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::fixtures::{credit_handler, credit_once, delivery, drain, in_transaction, key};
use super::{Harness, SuiteConfig};
use crate::{
    Advance, Claim, DedupeKey, IdempotencyStore, Inbox, InboxAdmin, ProcessError, ProcessResult,
    Processed, Purge, Received, RetentionPolicy, StoreError, TimestampAdvance, VersionGuard,
};

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

/// A copy that waits on a stuck first copy for longer than the lock timeout fails
/// with a transient store error (an edge answers 5xx and the sender retries)
/// instead of hanging every receiver; once the first copy commits, the next one is a
/// duplicate.
pub async fn check_stuck_copy_fails_transiently<H: Harness>() {
    let config = SuiteConfig {
        lock_timeout: Duration::from_millis(300),
        ..SuiteConfig::default()
    };
    let h = Arc::new(H::setup(config).await);
    let k = key("evt_stuck");
    let (holding, held) = tokio::sync::oneshot::channel::<()>();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let (h, k) = (Arc::clone(&h), k.clone());
        tokio::spawn(async move {
            h.store()
                .process_once(&k, async move |conn| {
                    H::credit(conn, "acct", 100).await?;
                    // the key is claimed and uncommitted while this waits
                    let _ = holding.send(());
                    let _ = released.await;
                    Ok(())
                })
                .await
        })
    };
    held.await.unwrap();
    match credit_once(&*h, &k, "acct").await {
        Err(ProcessError::Store(err)) => assert!(err.is_transient(), "{err:?}"),
        other => panic!("expected a transient store error, got {other:?}"),
    }
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), Processed::Applied(()));
    assert_eq!(
        credit_once(&*h, &k, "acct").await.unwrap(),
        Processed::Duplicate
    );
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
    Purge::purge(h.store(), a_day_later).await.unwrap();
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
        Purge::purge(h.store(), just_inside).await.unwrap(),
        crate::Purged::default()
    );
    assert_eq!(
        credit_once(&h, &key("evt_purge_0"), "acct").await.unwrap(),
        Processed::Duplicate
    );

    let past = now + four_hours + Duration::from_secs(60);
    let purged = Purge::purge(h.store(), past).await.unwrap();
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

/// Providers without a retention rule keep keys for the default 30 days; a rule
/// applies to its own provider only.
pub async fn check_purge_uses_the_default_for_providers_without_a_rule<H: Harness>() {
    let retention = RetentionPolicy::default()
        .keep_below_provider_minimum("shopify", Duration::from_secs(3600));
    let h = H::setup(SuiteConfig {
        retention,
        ..SuiteConfig::default()
    })
    .await;
    for provider in ["shopify", "stripe", "acme"] {
        let k = DedupeKey::new("conformance", provider, "evt_default");
        assert_eq!(
            credit_once(&h, &k, "acct").await.unwrap(),
            Processed::Applied(())
        );
    }
    let now = OffsetDateTime::now_utc();
    let purged = Purge::purge(h.store(), now + Duration::from_secs(2 * 3600))
        .await
        .unwrap();
    assert_eq!(purged.keys, 1, "only shopify's hour has passed");
    // the operator's door purges the same
    let purged = InboxAdmin::purge(h.store(), now + Duration::from_secs(31 * 86_400))
        .await
        .unwrap();
    assert_eq!(purged.keys, 2, "stripe and acme at 30 days");
}
