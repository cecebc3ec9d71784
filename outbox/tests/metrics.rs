//! The outbox's metrics, read back from a Prometheus recorder installed for this
//! test binary (feature `metrics`).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::stage_events;
use hookbox_core::{OutboxAdmin, RetryPolicy};
use hookbox_outbox::{LogSink, RelayPolicy, Sinks, run_relay};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_metrics_count_staged_and_sent_messages_and_the_backlog() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();

    let dir = TempDir::new();
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    stage_events(&store, 3, 1, 3).await;
    let policy = RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 3,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        idle: Duration::from_millis(10),
        ..RelayPolicy::default()
    };
    let drained = async {
        while store.stats().await.unwrap().pending > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let sinks = Sinks::new().with("email", LogSink);
    let report = run_relay(&store, &sinks, policy, drained).await.unwrap();
    assert_eq!(report.sent, 3);

    let text = handle.render();
    assert!(
        text.contains("hookbox_outbox_staged_total{sink=\"email\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("hookbox_outbox_sends_total{sink=\"email\",outcome=\"sent\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("hookbox_outbox_send_duration_seconds_count{sink=\"email\"} 3"),
        "{text}"
    );
    // set when the relay started, before it sent anything
    assert!(text.contains("hookbox_outbox_pending 3"), "{text}");
}
