//! AmqpSink against a real RabbitMQ (`HOOKBOX_AMQP_URL`): each test makes its own
//! queue (and exchange) and deletes it. Publishes are persistent and confirmed,
//! carry the message id as `message_id`, are mandatory (an unroutable message is
//! retried and dead-lettered with the broker's reason, never counted as sent), and
//! the sink opens a new channel after the broker closed one.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::{TestQueue, service_url, stage_events};
use hookbox_core::{OutboxAdmin, OutboxFilter, OutboxStore, RetryPolicy};
use hookbox_outbox::{AmqpOptions, AmqpSink, RelayPolicy, SinkError, Sinks, relay_once};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};

async fn sqlite(dir: &TempDir) -> SqliteStore {
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

fn quick(max_attempts: u32) -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        idle: Duration::from_millis(10),
        ..RelayPolicy::default()
    }
}

async fn drain<S: OutboxStore + OutboxAdmin>(store: &S, sinks: &Sinks, policy: &RelayPolicy) {
    for _ in 0..1_000 {
        relay_once(store, sinks, policy).await.unwrap();
        if store.stats().await.unwrap().pending == 0 {
            return;
        }
    }
    panic!("the outbox never drained");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_relay_publishes_each_message_confirmed_with_its_id_as_message_id() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, false).await;
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let ids = stage_events(&store, 20, 2, 5).await;
    let sink = AmqpSink::connect(&url, AmqpOptions::queue(&queue.queue))
        .await
        .unwrap();
    let sinks = Sinks::new().with("email", sink);
    drain(&store, &sinks, &quick(5)).await;
    let got = queue.drain().await;
    let mut got_ids: Vec<String> = got.iter().map(|(id, _)| id.clone()).collect();
    let mut expected: Vec<String> = ids.iter().map(ToString::to_string).collect();
    got_ids.sort();
    expected.sort();
    assert_eq!(
        got_ids, expected,
        "each message once, message_id = message id"
    );
    assert_eq!(store.stats().await.unwrap().sent, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_exchange_routes_by_key_and_an_unroutable_message_is_never_counted_as_sent() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, true).await;
    let exchange = queue.exchange.clone().unwrap();
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 1, 1, 1).await;
    // routed: the bound key reaches the queue
    let bound = AmqpSink::connect(&url, AmqpOptions::exchange(&exchange, "bound"))
        .await
        .unwrap();
    drain(&store, &Sinks::new().with("email", bound), &quick(3)).await;
    assert_eq!(queue.drain().await.len(), 1);

    // unroutable: no queue for the key; mandatory makes the broker return it
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 1, 1, 1).await;
    let unbound = AmqpSink::connect(&url, AmqpOptions::exchange(&exchange, "nobody"))
        .await
        .unwrap();
    drain(&store, &Sinks::new().with("email", unbound), &quick(3)).await;
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.sent, stats.dead), (0, 1));
    let dead = store.list(OutboxFilter::dead(), 1).await.unwrap();
    let reason = dead[0].last_error.clone().unwrap();
    assert!(reason.contains("312 NO_ROUTE"), "{reason}");
    // the broker's answer, under the kind of sink that gave it
    let (kind, _) = hookbox_outbox::recorded_sink_answer(&reason).unwrap();
    assert_eq!(kind, "amqp", "{reason}");
    assert_eq!(dead[0].attempts, 3, "retried by the policy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_bad_setup_is_a_clear_error_at_start() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let missing_queue = AmqpSink::connect(&url, AmqpOptions::queue("hb.no.such.queue"))
        .await
        .unwrap_err();
    assert!(
        matches!(&missing_queue, SinkError::Setup(text) if text.contains("the queue `hb.no.such.queue` does not exist")),
        "{missing_queue:?}"
    );
    let missing_exchange = AmqpSink::connect(&url, AmqpOptions::exchange("hb.no.such.x", "k"))
        .await
        .unwrap_err();
    assert!(
        matches!(&missing_exchange, SinkError::Setup(text) if text.contains("the exchange `hb.no.such.x` does not exist")),
        "{missing_exchange:?}"
    );
    let unreachable = AmqpSink::connect(
        "amqp://guest:guest@127.0.0.1:1/%2f",
        AmqpOptions::queue("q").connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&unreachable, SinkError::Setup(text) if text.contains("connecting to AMQP")),
        "{unreachable:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_sink_opens_a_new_channel_after_the_broker_closed_one() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, true).await;
    let exchange = queue.exchange.clone().unwrap();
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 2, 1, 2).await;
    let sink = AmqpSink::connect(&url, AmqpOptions::exchange(&exchange, "bound"))
        .await
        .unwrap();
    let sinks = Sinks::new().with("email", sink);
    // the exchange goes away: a publish to it makes the broker close the channel
    queue
        .channel
        .exchange_delete(exchange.as_str().into(), Default::default())
        .await
        .unwrap();
    let round = relay_once(&store, &sinks, &quick(50)).await.unwrap();
    assert_eq!(round.sent, 0, "nothing counted as sent: {round:?}");
    // it comes back; the next sends open a new channel and go through
    queue
        .channel
        .exchange_declare(
            exchange.as_str().into(),
            lapin::ExchangeKind::Direct,
            Default::default(),
            Default::default(),
        )
        .await
        .unwrap();
    queue
        .channel
        .queue_bind(
            queue.queue.as_str().into(),
            exchange.as_str().into(),
            "bound".into(),
            Default::default(),
            Default::default(),
        )
        .await
        .unwrap();
    drain(&store, &sinks, &quick(50)).await;
    assert_eq!(store.stats().await.unwrap().sent, 2);
    assert_eq!(queue.drain().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_sink_from_a_url_publishes_to_the_queue_or_exchange_it_names() {
    let Some(url) = service_url("HOOKBOX_AMQP_URL") else {
        return;
    };
    let queue = TestQueue::create(&url, true).await;
    let exchange = queue.exchange.clone().unwrap();
    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    stage_events(&store, 2, 1, 2).await;
    let to_queue = hookbox_outbox::connect_sink(
        &format!("{url}?queue={}", queue.queue),
        &RelayPolicy::default(),
    )
    .await
    .unwrap();
    let to_exchange = hookbox_outbox::connect_sink(
        &format!("{url}?exchange={exchange}&routing_key=bound"),
        &RelayPolicy::default(),
    )
    .await
    .unwrap();
    relay_once(&store, &Sinks::new().with("email", to_queue), &quick(3))
        .await
        .unwrap();
    assert_eq!(queue.drain().await.len(), 2);
    stage_events(&store, 4, 1, 4).await;
    drain(&store, &Sinks::new().with("email", to_exchange), &quick(3)).await;
    assert_eq!(
        queue.drain().await.len(),
        2,
        "events 2 and 3 through the exchange"
    );
    let neither = hookbox_outbox::connect_sink(&url, &RelayPolicy::default())
        .await
        .err();
    assert!(matches!(neither, Some(SinkError::Setup(text)) if text.contains("?queue=")));
}
