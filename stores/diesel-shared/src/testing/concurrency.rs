//! Concurrent redelivery with real connections: 1,000 events, 4 copies each, 16 tasks
//! racing over 8 pooled connections.

use std::sync::Arc;

use hookbox_core::{DedupeKey, IdempotencyStore, Processed};

use super::{Backend, PATIENCE, Settings};

const EVENTS: usize = 1_000;
const COPIES: usize = 4;
const TASKS: usize = 16;
const CONNECTIONS: usize = 8;

/// Sends four copies of each of 1,000 events through `process_once` from 16 tasks
/// over 8 pooled connections, and checks that each event was applied exactly once.
/// Returns at once when the test must skip (see [`Backend::url`]). Run it on a
/// multi-threaded runtime.
///
/// # Panics
/// A copy failed, a task hung, or an event was applied twice or not at all.
pub async fn copies_racing_over_pooled_connections_apply_each_event_once<B: Backend>() {
    let Some(fixture) =
        super::fixture::<B>(Settings::new().with_max_connections(CONNECTIONS)).await
    else {
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
                    let account = super::account(event);
                    let outcome = store
                        .process_once(&key, async |conn| {
                            B::apply(conn, &id, &account, super::amount(event)).await?;
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
        let (a, d) = tokio::time::timeout(PATIENCE, task)
            .await
            .expect("a task hung: deadlock or pool starvation")
            .expect("a task panicked");
        applied += a;
        duplicates += d;
    }
    assert_eq!(applied, EVENTS as u64, "every event applied once");
    assert_eq!(duplicates, ((COPIES - 1) * EVENTS) as u64);
    assert_eq!(super::tally::<B>(store).await, super::exact_tally(EVENTS));
    assert_eq!(
        B::count(store, "SELECT count(*) AS n FROM hookbox_processed_keys").await,
        EVENTS as i64
    );
}
