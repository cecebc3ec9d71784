//! Concurrent redelivery with real connections: 1,000 events, 4 copies each, 16 tasks
//! racing over 8 pooled connections.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;

use common::Tally;
use hookbox_core::{DedupeKey, IdempotencyStore, Processed};
use hookbox_diesel_mysql::MysqlOptions;

const EVENTS: usize = 1_000;
const COPIES: usize = 4;
const TASKS: usize = 16;
const CONNECTIONS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_racing_over_pooled_connections_apply_each_event_once() {
    let options = MysqlOptions::new().with_max_connections(CONNECTIONS);
    let Some(fixture) = common::fixture(options).await else {
        return;
    };
    let store = &fixture.store;

    // copy c of event e goes to task (e + 4c) % 16: the four copies of one event sit
    // at the same position in four different task queues, so they race each other
    let mut queues: Vec<Vec<usize>> = vec![Vec::new(); TASKS];
    for event in 0..EVENTS {
        for copy in 0..COPIES {
            queues[(event + copy * (TASKS / COPIES)) % TASKS].push(event);
        }
    }
    let start = Arc::new(tokio::sync::Barrier::new(TASKS));
    let tasks: Vec<_> = queues
        .into_iter()
        .map(|queue| {
            let (store, start) = (store.clone(), Arc::clone(&start));
            tokio::spawn(async move {
                start.wait().await;
                let (mut applied, mut duplicates) = (0u64, 0u64);
                for event in queue {
                    let id = format!("evt_{event:04}");
                    let key = DedupeKey::new("race", "stripe", id.clone());
                    let account = common::account(event);
                    let outcome = store
                        .process_once(&key, async |conn| {
                            common::apply(conn, &id, &account, common::amount(event)).await?;
                            Ok(())
                        })
                        .await;
                    match outcome {
                        Ok(Processed::Applied(())) => applied += 1,
                        Ok(Processed::Duplicate) => duplicates += 1,
                        Err(err) => panic!("copy of event {event} failed: {err:?}"),
                    }
                }
                (applied, duplicates)
            })
        })
        .collect();

    let (mut applied, mut duplicates) = (0, 0);
    for task in tasks {
        let (a, d) = tokio::time::timeout(common::PATIENCE, task)
            .await
            .expect("a task hung: deadlock or pool starvation")
            .unwrap();
        applied += a;
        duplicates += d;
    }
    assert_eq!(applied, EVENTS as u64, "every event applied once");
    assert_eq!(duplicates, ((COPIES - 1) * EVENTS) as u64);
    assert_eq!(
        common::tally(store).await,
        Tally {
            applications: EVENTS as i64,
            distinct: EVENTS as i64,
            ledger: common::expected_total(EVENTS),
        }
    );
    assert_eq!(
        common::count(store, "SELECT count(*) AS n FROM hookbox_processed_keys").await,
        EVENTS as i64
    );
}
