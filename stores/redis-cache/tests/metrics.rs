//! The cache's lookup counter, read back from a Prometheus recorder installed for
//! this test binary (feature `metrics`): hits, misses, and fall-throughs when Redis
//! is unreachable.
#![allow(clippy::unwrap_used)]

mod common;

use common::{DEAD_REDIS, Fixture, shared_redis};
use hookbox_core::{DedupeKey, Processed, RetentionPolicy};
use hookbox_redis_cache::CacheOptions;
use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_metrics_count_hits_misses_and_fall_throughs() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();
    let lookups = |result: &str| {
        let wanted = format!("hookbox_cache_lookups_total{{result=\"{result}\"}} ");
        handle
            .render()
            .lines()
            .find_map(|line| {
                line.strip_prefix(&wanted)
                    .map(|v| v.trim().parse::<f64>().unwrap())
            })
            .unwrap_or(0.0)
    };

    // Redis down: every lookup falls through to the database, which still decides
    let down = hookbox_redis_cache::connect(DEAD_REDIS).unwrap();
    let outage = Fixture::new(down, CacheOptions::default(), RetentionPolicy::default()).await;
    let key = DedupeKey::new("metrics", "standard", "evt_down");
    assert_eq!(
        outage.credit_once(&key, "acct", 1).await,
        Processed::Applied(())
    );
    assert_eq!(
        outage.credit_once(&key, "acct", 1).await,
        Processed::Duplicate
    );
    assert_eq!(lookups("fallthrough"), 2.0);

    let Some(redis) = shared_redis().await else {
        return;
    };
    let fixture = Fixture::new(redis, CacheOptions::default(), RetentionPolicy::default()).await;
    let key = DedupeKey::new("metrics", "standard", "evt_up");
    assert_eq!(
        fixture.credit_once(&key, "acct", 1).await,
        Processed::Applied(())
    );
    assert_eq!(lookups("miss"), 1.0);
    // the key is written to Redis after the commit, in the background
    for _ in 0..100 {
        if fixture.credit_once(&key, "acct", 1).await == Processed::Duplicate
            && lookups("hit") >= 1.0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        lookups("hit") >= 1.0,
        "a duplicate answered from Redis is a hit"
    );
}
