//! The edge's and the worker's metrics over real HTTP, read back from a Prometheus
//! recorder installed for this test binary (feature `metrics`).
//!
//! One test walks every outcome in turn: a recorder is process-wide, so the checks
//! share it and read deltas.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{HttpClient, TempDir, WriteLock, apply, body, github, open, options, serve, signed};
use hookbox_axum::Webhook;
use hookbox_core::http::HeaderMap;
use hookbox_core::run_worker;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Returns the value of the sample `name{labels}` in the rendered text, 0 if absent.
fn sample(handle: &PrometheusHandle, name: &str, labels: &str) -> f64 {
    let wanted = format!("{name}{{{labels}}} ");
    handle
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&wanted))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

fn deliveries(handle: &PrometheusHandle, outcome: &str) -> f64 {
    sample(
        handle,
        "hookbox_deliveries_total",
        &format!("provider=\"github\",outcome=\"{outcome}\""),
    )
}

fn errors(handle: &PrometheusHandle, kind: &str) -> f64 {
    sample(
        handle,
        "hookbox_delivery_errors_total",
        &format!("provider=\"github\",kind=\"{kind}\""),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_for_each_outcome_over_real_http() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();

    let dir = TempDir::new();
    let store = open(
        &dir.db(),
        options().with_busy_timeout(Duration::from_millis(100)),
    )
    .await;
    let inbox = serve(Webhook::inbox(github(), store.clone()).into_router("/inbox")).await;
    let inline =
        serve(Webhook::inline(github(), store.clone(), apply).into_router("/inline")).await;
    let client = HttpClient::new();
    let post = async |url: &str, id: &str, body: &str| {
        client.post(url, &signed(id, body), body.to_string()).await
    };
    let inbox_url = format!("{}/inbox", inbox.url);
    let inline_url = format!("{}/inline", inline.url);

    assert_eq!(post(&inbox_url, "m-1", &body("a")).await.status, 200);
    assert_eq!(deliveries(&handle, "stored"), 1.0);
    assert_eq!(post(&inbox_url, "m-1", &body("a")).await.status, 200);
    assert_eq!(deliveries(&handle, "duplicate"), 1.0);

    // a forgery and a request without the signature: rejected, by kind
    let mut forged = signed("m-2", &body("a"));
    forged.insert(
        "x-hub-signature-256",
        format!("sha256={}", "0".repeat(64)).parse().unwrap(),
    );
    assert_eq!(
        client.post(&inbox_url, &forged, body("a")).await.status,
        401
    );
    let unsigned = HeaderMap::new();
    assert_eq!(
        client.post(&inbox_url, &unsigned, body("a")).await.status,
        400
    );
    assert_eq!(deliveries(&handle, "rejected"), 2.0);
    assert_eq!(errors(&handle, "signature_mismatch"), 1.0);
    assert_eq!(errors(&handle, "missing_header"), 1.0);

    // the store cannot write: unavailable, 503
    let lock = WriteLock::take(&dir.db());
    assert_eq!(post(&inbox_url, "m-3", &body("a")).await.status, 503);
    lock.release();
    assert_eq!(deliveries(&handle, "unavailable"), 1.0);
    assert_eq!(errors(&handle, "store_unavailable"), 1.0);

    // inline: applied, and a failing handler
    assert_eq!(post(&inline_url, "m-4", &body("b")).await.status, 200);
    assert_eq!(deliveries(&handle, "applied"), 1.0);
    assert_eq!(post(&inline_url, "m-5", &body("poison")).await.status, 500);
    assert_eq!(deliveries(&handle, "failed"), 1.0);
    assert_eq!(errors(&handle, "side_effect_failed"), 1.0);

    let latency = sample(
        &handle,
        "hookbox_ack_duration_seconds_count",
        "provider=\"github\",outcome=\"stored\"",
    );
    assert_eq!(latency, 1.0, "one latency sample per stored delivery");

    // the worker: one row processed, and the backlog gauge set when it started
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker_store = store.clone();
    let worker = tokio::spawn(async move {
        run_worker(&worker_store, apply, Duration::from_millis(10), async {
            let _ = stopped.await;
        })
        .await
    });
    for _ in 0..200 {
        if sample(
            &handle,
            "hookbox_worker_rows_total",
            "outcome=\"processed\"",
        ) >= 1.0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.processed, 1);
    assert_eq!(
        sample(
            &handle,
            "hookbox_worker_rows_total",
            "outcome=\"processed\""
        ),
        1.0
    );
    let text = handle.render();
    assert!(text.contains("hookbox_inbox_pending 1"), "{text}");
    assert!(
        text.contains("hookbox_inbox_oldest_pending_age_seconds "),
        "{text}"
    );

    // a handshake is an outcome of its own, answered with the provider's reply
    let slack = hookbox_slack::Slack::new("slack-secret").unwrap();
    let slack = serve(Webhook::inbox(slack, store.clone()).into_router("/slack")).await;
    let challenge = r#"{"type":"url_verification","challenge":"c-123"}"#;
    let now = hookbox_core::time::OffsetDateTime::now_utc().unix_timestamp();
    let headers = hookbox_core::Signer::sign(
        &hookbox_slack::SlackSigner::new("slack-secret").unwrap(),
        "",
        now,
        challenge.as_bytes(),
    )
    .to_header_map();
    let (status, _, reply) = client
        .post_raw(&format!("{}/slack", slack.url), &headers, challenge)
        .await;
    assert_eq!((status, &reply[..]), (200, &b"c-123"[..]));
    assert_eq!(
        sample(
            &handle,
            "hookbox_deliveries_total",
            "provider=\"slack\",outcome=\"handshake\""
        ),
        1.0
    );
    assert!(handle.render().contains("hookbox_inbox_pending 1"));
}
