//! Concurrent redelivery with real connections: 1,000 events, 4 copies each, 16 tasks
//! racing over 8 pooled connections.
#![allow(missing_docs)]

mod common;

use hookbox_diesel_shared::testing::concurrency;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_racing_over_pooled_connections_apply_each_event_once() {
    concurrency::copies_racing_over_pooled_connections_apply_each_event_once::<common::Pg>().await;
}
