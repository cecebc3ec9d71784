//! What a hit, a miss, a failure and an expired key mean, against the real Redis of
//! `HOOKBOX_REDIS_URL` (each test skips without it unless `HOOKBOX_REQUIRE_SERVICES=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{DEAD_REDIS, Fixture, exists, pttl, shared_redis, wait_until};
use hookbox_core::{
    Claim, DedupeKey, HandlerError, IdempotencyStore as _, Inbox as _, InboxFilter, KeptHeaders,
    ProcessError, Processed, Purge as _, Received, Retention, RetentionPolicy, Store as _,
    VerifiedDelivery,
};
use hookbox_redis_cache::{CacheError, CacheOptions, Cached};
use hookbox_sqlite::ImmediateTransaction as _;

fn key(id: &str) -> DedupeKey {
    DedupeKey::new("cache-tests", "standard", id)
}

fn delivery(id: &str) -> VerifiedDelivery {
    VerifiedDelivery::new(key(id), "{}".into(), KeptHeaders::default())
}

/// A generous timeout: these tests are about what a hit or a miss means, and a busy
/// machine must not turn a hit into a (correct, but here unwanted) fall-through.
fn patient() -> CacheOptions {
    CacheOptions::default().with_timeout(Duration::from_secs(2))
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_answers_duplicate_without_touching_the_database() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    let f = Fixture::new(redis.clone(), patient(), RetentionPolicy::default()).await;
    let k = key("evt_hit");
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    let cached = f.store.processed_key(&k);
    wait_until("the applied key is cached", WAIT, || {
        exists(&redis, &cached)
    })
    .await;

    // take the claim table away: any call that reaches the database now fails
    common::execute(
        f.store.inner(),
        "ALTER TABLE hookbox_processed_keys RENAME TO hookbox_processed_keys_away",
    )
    .await;
    let control = f
        .store
        .process_once(&key("evt_not_cached"), async |_conn| Ok(()))
        .await;
    assert!(
        matches!(control, Err(ProcessError::Store(_))),
        "a miss reaches the (now broken) database: {control:?}"
    );

    let hits_before = f.store.cache_stats().hits;
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Duplicate);
    assert_eq!(f.store.cache_stats().hits, hits_before + 1);
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_hit_answers_duplicate_without_touching_the_database() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    let f = Fixture::new(redis.clone(), patient(), RetentionPolicy::default()).await;
    let d = delivery("evt_inbox_hit");
    assert_eq!(f.store.receive(&d).await.unwrap(), Received::Stored);
    let cached = f.store.inbox_key(d.dedupe_key());
    wait_until("the stored delivery is cached", WAIT, || {
        exists(&redis, &cached)
    })
    .await;
    // the inbox namespace is its own: the same dedupe key was not processed
    assert!(!exists(&redis, &f.store.processed_key(d.dedupe_key())).await);

    common::execute(
        f.store.inner(),
        "ALTER TABLE hookbox_inbox RENAME TO hookbox_inbox_away",
    )
    .await;
    assert!(
        f.store
            .receive(&delivery("evt_inbox_not_cached"))
            .await
            .is_err(),
        "a miss reaches the (now broken) database"
    );
    assert_eq!(f.store.receive(&d).await.unwrap(), Received::Duplicate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_goes_to_the_database_and_is_cached_with_the_ttl() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    let ttl = Duration::from_secs(120);
    let f = Fixture::new(
        redis.clone(),
        patient().with_ttl(ttl),
        RetentionPolicy::default(),
    )
    .await;

    // a new key: absent from Redis, applied by the database, then cached
    let k = key("evt_miss");
    let cached = f.store.processed_key(&k);
    assert!(!exists(&redis, &cached).await);
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    assert_eq!(f.store.cache_stats().misses, 1);
    wait_until("the applied key is cached", WAIT, || {
        exists(&redis, &cached)
    })
    .await;
    let left = pttl(&redis, &cached).await;
    assert!(
        left > 0 && left <= ttl.as_millis() as i64,
        "the cached key expires within the configured ttl: {left} ms"
    );

    // a key the database knows but Redis does not (claimed in a caller-owned
    // transaction, which never writes Redis): the database answers the duplicate,
    // and from then on Redis does
    let owned = key("evt_caller_owned");
    let claimed = {
        let mut conn = f.store.inner().connection().await.unwrap();
        let store = &f.store;
        conn.immediate_transaction(async |conn: &mut hookbox_sqlite::Conn| {
            let claim = store.claim(conn, &owned).await?;
            common::credit(conn, "acct", 100).await?;
            Ok::<_, hookbox_sqlite::SqliteError>(claim)
        })
        .await
        .unwrap()
    };
    assert_eq!(claimed, Claim::New);
    let owned_cached = f.store.processed_key(&owned);
    assert!(
        !exists(&redis, &owned_cached).await,
        "claim never writes Redis"
    );
    assert_eq!(
        f.credit_once(&owned, "acct", 100).await,
        Processed::Duplicate
    );
    wait_until("the database's duplicate is cached", WAIT, || {
        exists(&redis, &owned_cached)
    })
    .await;
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_side_effect_is_never_cached() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    let f = Fixture::new(redis.clone(), patient(), RetentionPolicy::default()).await;
    let k = key("evt_fails_once");
    let failed = f
        .store
        .process_once(&k, async |conn| {
            common::credit(conn, "acct", 100).await?;
            Err::<(), _>(HandlerError::from("downstream rejected it"))
        })
        .await;
    assert!(matches!(failed, Err(ProcessError::SideEffect(_))));

    // a later success is cached; by then a write for the failure would have landed
    let other = key("evt_after_failure");
    assert_eq!(
        f.credit_once(&other, "other", 1).await,
        Processed::Applied(())
    );
    let other_cached = f.store.processed_key(&other);
    wait_until("the later success is cached", WAIT, || {
        exists(&redis, &other_cached)
    })
    .await;
    assert!(!exists(&redis, &f.store.processed_key(&k)).await);
    assert_eq!(f.store.cache_stats().writes, 1);

    // so the sender's retry reaches the database and applies it
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_key_falls_through_and_is_still_a_duplicate() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    // a 1 s TTL is allowed: the store keeps keys 30 days
    let options = patient().with_ttl(Duration::from_secs(1));
    let f = Fixture::new(redis.clone(), options, RetentionPolicy::default()).await;
    let k = key("evt_expires");
    let cached = f.store.processed_key(&k);
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    wait_until("the key is cached", WAIT, || exists(&redis, &cached)).await;
    wait_until("the key expires", WAIT, || async {
        !exists(&redis, &cached).await
    })
    .await;

    let before = f.store.cache_stats();
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Duplicate);
    let after = f.store.cache_stats();
    assert_eq!(
        after.misses,
        before.misses + 1,
        "the copy went to the database"
    );
    assert_eq!(after.hits, before.hits);
    wait_until("the database's duplicate is cached again", WAIT, || {
        exists(&redis, &cached)
    })
    .await;
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_ahead_of_the_clock_forgets_what_the_database_forgot() {
    let Some(redis) = shared_redis().await else {
        return;
    };
    let f = Fixture::new(redis.clone(), patient(), RetentionPolicy::default()).await;
    let k = key("evt_purged");
    let cached = f.store.processed_key(&k);
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    wait_until("the key is cached", WAIT, || exists(&redis, &cached)).await;

    // a purge at the wall clock deletes nothing young, and keeps the cache
    let now = hookbox_core::time::OffsetDateTime::now_utc();
    assert_eq!(f.store.purge(now).await.unwrap().keys, 0);
    assert!(exists(&redis, &cached).await);

    // 31 days later the store has purged the key: Redis must not remember it
    // either, when the operator's door purges too
    let later = now + Duration::from_secs(31 * 86_400);
    let admin: &dyn hookbox_core::InboxAdmin = &f.store;
    assert_eq!(admin.purge(later).await.unwrap().keys, 1);
    assert!(!exists(&redis, &cached).await);
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_longer_than_the_retention_is_refused() {
    let dir = common::TempDir::new();
    let shopify_4h = Duration::from_secs(4 * 3600);
    let retention = RetentionPolicy::default()
        .keep("shopify", Retention::from_hours(4), shopify_4h)
        .unwrap();
    let sqlite = hookbox_sqlite::SqliteOptions::default().with_retention(retention.clone());
    let inner = common::open_sqlite(&dir.db(), sqlite.clone()).await;
    let redis = hookbox_redis_cache::connect(DEAD_REDIS).unwrap();

    // the default 24 h outlives Shopify's 4 h keys, and the cache reads the 4 h from
    // the store itself
    let refused = Cached::new(inner, redis.clone(), CacheOptions::default());
    match refused {
        Err(CacheError::TtlLongerThanRetention { ttl, keep }) => {
            assert_eq!((ttl, keep), (Duration::from_secs(86_400), shopify_4h));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    let inner = common::open_sqlite(&dir.db(), sqlite).await;
    let equal = CacheOptions::default().with_ttl(shopify_4h);
    let cached =
        Cached::new(inner, redis.clone(), equal).expect("a ttl equal to the retention is allowed");
    assert_eq!(
        cached.retention(),
        &retention,
        "the store's retention, forwarded"
    );
    let inner = cached.into_inner();
    let zero = CacheOptions::default().with_ttl(Duration::ZERO);
    assert!(matches!(
        Cached::new(inner, redis.clone(), zero),
        Err(CacheError::InvalidOptions(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_a_miss_never_an_error() {
    let redis = hookbox_redis_cache::connect(DEAD_REDIS).unwrap();
    let f = Fixture::new(redis, CacheOptions::default(), RetentionPolicy::default()).await;
    let k = key("evt_no_redis");
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Duplicate);
    let d = delivery("evt_no_redis_inbox");
    assert_eq!(f.store.receive(&d).await.unwrap(), Received::Stored);
    assert_eq!(f.store.receive(&d).await.unwrap(), Received::Duplicate);
    let stats = f.store.cache_stats();
    assert_eq!((stats.hits, stats.misses, stats.lookup_failures), (0, 0, 4));
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_reach_the_store_through_the_cache_as_a_dyn_inbox_admin() {
    let redis = hookbox_redis_cache::connect(DEAD_REDIS).unwrap();
    let f = Fixture::new(redis, CacheOptions::default(), RetentionPolicy::default()).await;
    let d = delivery("evt_admin");
    assert_eq!(f.store.receive(&d).await.unwrap(), Received::Stored);

    // list, get and stats forward to the store through the cache's own InboxAdmin
    let admin: &dyn hookbox_core::InboxAdmin = &f.store;
    assert_eq!(admin.stats().await.unwrap().pending, 1);
    let rows = admin.list(InboxFilter::pending(), 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(&rows[0].key, d.dedupe_key());
    let row = admin.get(rows[0].id).await.unwrap().expect("the row by id");
    assert_eq!(row.key, rows[0].key);
}
