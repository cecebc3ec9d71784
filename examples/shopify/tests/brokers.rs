//! The example publishing order events through its relay to a real NATS JetStream
//! (`HOOKBOX_NATS_URL`) and a real RabbitMQ (`HOOKBOX_AMQP_URL`): each test makes its
//! own stream or queue, and skips without the server unless
//! `HOOKBOX_REQUIRE_SERVICES=1`. A build tests the brokers its relay is built for
//! (features `nats` and `amqp`, both defaults).
#![cfg(any(feature = "nats", feature = "amqp"))]

use std::time::Duration;

use hookbox_shopify::ShopifySigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-shopify");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/shopify";
const SECRET: &str = "hookbox-shopify-demo-secret";

/// The URL in `var`, or `None` (the test skips) when it is unset and services are
/// not required.
fn service(var: &str) -> Option<String> {
    let required = std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    match std::env::var(var).ok().filter(|url| !url.is_empty()) {
        Some(url) => Some(url),
        None => {
            assert!(!required, "{var} not set and HOOKBOX_REQUIRE_SERVICES=1");
            eprintln!("skipped: {var} not set");
            None
        }
    }
}

async fn send_orders(example: &hookbox_testkit::Example, shop: &str) {
    let signer = ShopifySigner::new(SECRET)
        .expect("the demo secret")
        .shop_domain(shop);
    let first = unique("webhook");
    for (id, order) in [(&first, 1_i64), (&first, 1), (&unique("webhook"), 2)] {
        let body = format!(r#"{{"id":{order},"total_price":"10.00"}}"#);
        let answer = example.send(PATH, &signer, id, body.as_bytes()).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
}

#[cfg(feature = "nats")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_events_reach_a_jetstream_subject_once_each_with_their_message_id() {
    let Some(url) = service("HOOKBOX_NATS_URL") else {
        return;
    };
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    let client = async_nats::connect(&url).await.expect("NATS");
    let js = async_nats::jetstream::new(client);
    let name = unique("HB_SHOP").replace('-', "_").to_uppercase();
    let subject = unique("hb.shop").replace(['-', '_'], ".");
    js.create_stream(async_nats::jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        duplicate_window: Duration::from_secs(7_200),
        ..Default::default()
    })
    .await
    .expect("a stream of its own");

    let example = sandbox.start_with(
        BIN,
        &[],
        &[("NATS_URL", &url), ("ORDERS_SUBJECT", &subject)],
    );
    let shop = unique("nats") + ".myshopify.com";
    send_orders(&example, &shop).await;
    sandbox.wait_processed(2).await;
    let stream = js.get_stream_no_info(&name).await.expect("the stream");
    let mut messages = 0;
    for _ in 0..200 {
        messages = stream.get_info().await.expect("info").state.messages;
        if messages >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        messages,
        2,
        "two orders, the resent one absorbed\n{}",
        example.log()
    );
    let first = stream.get_raw_message(1).await.expect("the first message");
    let id = first.headers.get("Nats-Msg-Id").expect("Nats-Msg-Id");
    assert_eq!(id.as_str().len(), 32);
    let payload = String::from_utf8_lossy(&first.payload);
    assert!(payload.contains(&shop), "{payload}");
    drop(example);
    js.delete_stream(&name).await.expect("delete the stream");
}

#[cfg(feature = "nats")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_subject_no_stream_covers_refuses_to_start() {
    let Some(url) = service("HOOKBOX_NATS_URL") else {
        return;
    };
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    let subject = unique("hb.nobody").replace(['-', '_'], ".");
    let mut relay = sandbox.spawn_with(
        BIN,
        &["relay"],
        &[("NATS_URL", &url), ("ORDERS_SUBJECT", &subject)],
    );
    let status = relay.exited().await;
    assert!(!status.success());
    assert!(
        relay
            .log()
            .contains("no JetStream stream covers the subject"),
        "{}",
        relay.log()
    );
}

#[cfg(feature = "amqp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_events_reach_a_rabbitmq_queue_with_their_message_id() {
    use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
    let Some(url) = service("HOOKBOX_AMQP_URL") else {
        return;
    };
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    let connection = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .expect("RabbitMQ");
    let channel = connection.create_channel().await.expect("a channel");
    let queue = unique("hb.shop");
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            Default::default(),
        )
        .await
        .expect("a queue of its own");

    let example = sandbox.start_with(BIN, &[], &[("AMQP_URL", &url), ("ORDERS_QUEUE", &queue)]);
    let shop = unique("amqp") + ".myshopify.com";
    send_orders(&example, &shop).await;
    sandbox.wait_processed(2).await;
    let mut got = Vec::new();
    for _ in 0..200 {
        if let Some(message) = channel
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get")
        {
            got.push(message.delivery);
            if got.len() == 2 {
                break;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(got.len(), 2, "{}", example.log());
    for delivery in &got {
        let id = delivery
            .properties
            .message_id()
            .as_ref()
            .expect("message_id");
        assert_eq!(id.as_str().len(), 32);
        assert!(String::from_utf8_lossy(&delivery.data).contains(&shop));
    }
    drop(example);
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .expect("delete the queue");
}
