//! NatsSink against a real NATS server with JetStream (`HOOKBOX_NATS_URL`): each
//! test makes its own stream and deletes it. Resends carry the same `Nats-Msg-Id`
//! and the stream stores each message once; a duplicate window shorter than the
//! relay's resend gap is refused on request; bad input is a clear error or a dead
//! letter with the broker's reason, never a message counted as sent.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::{TestStream, service_url, stage_events};
use hookbox_core::{OutboxAdmin, OutboxFilter, OutboxStore, RetryPolicy};
use hookbox_outbox::{NatsOptions, NatsSink, RelayPolicy, Sink, SinkError, Sinks, relay_once};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};

const HOUR: Duration = Duration::from_secs(3_600);

async fn sqlite(dir: &TempDir) -> SqliteStore {
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// A relay policy whose longest resend gap (cap + lease) is 70 s.
fn policy() -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 5,
            base: Duration::ZERO,
            cap: Duration::from_secs(10),
        },
        lease: Duration::from_secs(60),
        idle: Duration::from_millis(10),
        ..RelayPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_relay_publishes_each_message_once_with_its_id_as_nats_msg_id() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, HOUR, 0).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let ids = stage_events(&store, 20, 2, 5).await;
    let sink = NatsSink::connect(&url, &stream.subject, &policy(), NatsOptions::new())
        .await
        .unwrap();
    assert_eq!(sink.stream(), stream.name);
    assert_eq!(sink.duplicate_window(), HOUR);
    let sinks = Sinks::new().with("email", sink);
    while store.stats().await.unwrap().pending > 0 {
        relay_once(&store, &sinks, &policy()).await.unwrap();
    }
    let stored = stream.message_ids().await;
    let mut expected: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    let mut got = stored.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "each message once, Nats-Msg-Id = message id");
    assert_eq!(store.stats().await.unwrap().sent, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_resend_of_a_published_message_is_acked_as_a_duplicate_and_stored_once() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, HOUR, 0).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 3, 1, 3).await;
    let sink = NatsSink::connect(&url, &stream.subject, &policy(), NatsOptions::new())
        .await
        .unwrap();
    // a relay that published and died before recording it: the message is leased
    // again after its lease and published again, with the same id
    let leased = store
        .lease(
            10,
            Duration::from_secs(60),
            hookbox_core::time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
    for leased in &leased {
        sink.send(&leased.message).await.unwrap();
        sink.send(&leased.message).await.unwrap();
        sink.send(&leased.message).await.unwrap();
    }
    assert_eq!(stream.count().await, 3, "nine publishes, three messages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_subject_per_ordering_key_puts_each_key_on_its_own_subject() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, HOUR, 0).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 2, 1, 2).await;
    let options = NatsOptions::new().subject_per_ordering_key(true);
    let sink = NatsSink::connect(&url, &stream.subject, &policy(), options)
        .await
        .unwrap();
    let sinks = Sinks::new().with("email", sink);
    relay_once(&store, &sinks, &policy()).await.unwrap();
    let js = &stream.context;
    let nats_stream = js.get_stream_no_info(&stream.name).await.unwrap();
    let mut subjects = Vec::new();
    for seq in 1..=2 {
        subjects.push(
            nats_stream
                .get_raw_message(seq)
                .await
                .unwrap()
                .subject
                .to_string(),
        );
    }
    subjects.sort();
    assert_eq!(
        subjects,
        vec![
            format!("{}.cus_0", stream.subject),
            format!("{}.cus_1", stream.subject)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_duplicate_window_shorter_than_the_resend_gap_warns_or_is_refused() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    // JetStream's default window, 2 minutes, against a relay that may resend a
    // message an hour and a minute later (the default retry cap plus lease)
    let stream = TestStream::create(&url, Duration::from_secs(120), 0).await;
    let relay = RelayPolicy::default();
    assert_eq!(relay.longest_resend_gap(), Duration::from_secs(3_660));
    let refused = NatsSink::connect(
        &url,
        &stream.subject,
        &relay,
        NatsOptions::new().refuse_short_window(true),
    )
    .await
    .unwrap_err();
    let SinkError::Setup(text) = refused else {
        panic!("a setup error: {refused:?}");
    };
    assert!(text.contains("duplicate window of 120 s"), "{text}");
    assert!(text.contains("3660 s"), "{text}");
    // without refusing it starts (and warns); a relay whose gap fits is accepted
    let warned = NatsSink::connect(&url, &stream.subject, &relay, NatsOptions::new())
        .await
        .unwrap();
    assert!(warned.duplicate_window() < warned.resend_gap());
    let fits = NatsSink::connect(
        &url,
        &stream.subject,
        &policy(),
        NatsOptions::new().refuse_short_window(true),
    )
    .await
    .unwrap();
    assert!(fits.duplicate_window() >= fits.resend_gap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_bad_setup_is_a_clear_error_at_start() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let uncovered = NatsSink::connect(&url, "hb.nobody.listens", &policy(), NatsOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&uncovered, SinkError::Setup(text) if text.contains("no JetStream stream covers the subject `hb.nobody.listens`")),
        "{uncovered:?}"
    );
    let wildcard = NatsSink::connect(&url, "hb.>", &policy(), NatsOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(wildcard, SinkError::Setup(_)));
    let unreachable = NatsSink::connect(
        "nats://127.0.0.1:1",
        "hb.x",
        &policy(),
        NatsOptions::new().connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&unreachable, SinkError::Setup(text) if text.contains("connecting to NATS")),
        "{unreachable:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_message_over_the_stream_limit_is_a_dead_letter_with_the_brokers_reason() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    // 64 bytes per message: the test's receipts with their headers do not fit
    let stream = TestStream::create(&url, HOUR, 64).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 1, 1, 1).await;
    let sink = NatsSink::connect(&url, &stream.subject, &policy(), NatsOptions::new())
        .await
        .unwrap();
    let sinks = Sinks::new().with("email", sink);
    let round = relay_once(&store, &sinks, &policy()).await.unwrap();
    assert_eq!((round.sent, round.dead), (0, 1));
    let dead = store.list(OutboxFilter::dead(), 1).await.unwrap();
    let reason = dead[0].last_error.clone().unwrap();
    assert!(reason.contains("message size exceeds maximum"), "{reason}");
    // the broker's answer, under the kind of sink that gave it
    let (kind, _) = hookbox_outbox::recorded_sink_answer(&reason).unwrap();
    assert_eq!(kind, "nats", "{reason}");
    assert_eq!(stream.count().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_sink_from_a_url_publishes_to_the_subject_in_its_path() {
    let Some(url) = service_url("HOOKBOX_NATS_URL") else {
        return;
    };
    let stream = TestStream::create(&url, HOUR, 0).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 2, 1, 2).await;
    let sink_url = format!("{url}/{}?subject_per_key=true", stream.subject);
    let sink = hookbox_outbox::connect_sink(&sink_url, &policy())
        .await
        .unwrap();
    relay_once(&store, &Sinks::new().with("email", sink), &policy())
        .await
        .unwrap();
    assert_eq!(stream.count().await, 2);
    let refused = hookbox_outbox::connect_sink(
        &format!("{url}/{}?refuse_short_window=true", stream.subject),
        &RelayPolicy {
            lease: Duration::from_secs(7_200),
            ..policy()
        },
    )
    .await
    .err();
    assert!(matches!(refused, Some(SinkError::Setup(_))));
    let unknown = hookbox_outbox::connect_sink(&format!("{url}/x?colour=red"), &policy())
        .await
        .err();
    assert!(matches!(unknown, Some(SinkError::Setup(text)) if text.contains("`colour`")));
}
