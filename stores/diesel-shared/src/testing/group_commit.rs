//! Group commit when a batch's statement dies with its connection: no caller of
//! that batch is answered `Stored`, nothing of it is half-stored, and the senders'
//! retries are stored; and one writer task under a burst of copies. (The core's
//! conformance suite checks bursts and a refused row on every backend.)
//!
//! Run each check on a multi-threaded runtime.

use std::sync::Arc;
use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::{
    DedupeKey, Inbox as _, InboxAdmin, InboxFilter, KeptHeaders, Received, StoreError as _,
    VerifiedDelivery,
};

use super::{Backend, Settings};

fn delivery(id: &str) -> VerifiedDelivery {
    VerifiedDelivery::new(
        DedupeKey::new("group", "standard", id),
        Bytes::from_static(b"{}"),
        KeptHeaders::default(),
    )
}

/// Makes every batch statement sleep before it inserts, kills the connections that
/// run them mid-statement, as a crashed or restarted server would, and checks that
/// no caller of a killed batch was answered `Stored`, nothing of it is stored, and
/// the retries are stored. Returns at once when the test must skip (see
/// [`Backend::url`]).
///
/// # Panics
/// A check failed.
pub async fn a_batch_whose_connection_dies_answers_no_caller_stored_and_stores_nothing_of_it<
    B: Backend,
>() {
    let Some(fixture) = super::fixture::<B>(Settings::new()).await else {
        return;
    };
    let store = Arc::new(fixture.store.clone());
    B::slow_inbox_inserts(&store).await;

    let ids: Vec<String> = (0..16).map(|n| format!("evt_killed_{n}")).collect();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (store, copy) = (Arc::clone(&store), delivery(id));
            tokio::spawn(async move { store.receive(&copy).await })
        })
        .collect();
    // the batches are on the wire, each statement asleep in its trigger
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = B::kill_inbox_inserts(&store).await;
    assert!(killed >= 1, "no batch statement was running to kill");

    let mut failed = Vec::new();
    let mut stored = Vec::new();
    for (id, task) in ids.iter().zip(tasks) {
        match task.await.unwrap() {
            Ok(Received::Stored) => stored.push(id.clone()),
            Ok(Received::Duplicate) => panic!("{id}: nothing was stored before"),
            Err(err) => {
                assert!(
                    err.is_transient(),
                    "{id}: a lost connection is transient: {err}"
                );
                failed.push(id.clone());
            }
        }
    }
    assert!(
        !failed.is_empty(),
        "the killed statements' callers got errors"
    );
    let rows = store.list(InboxFilter::all(), 100).await.unwrap();
    let kept: Vec<&str> = rows.iter().map(|r| r.key.delivery_id()).collect();
    for id in &stored {
        assert!(
            kept.contains(&id.as_str()),
            "{id} was answered Stored: its row is there"
        );
    }
    for id in &failed {
        assert!(
            !kept.contains(&id.as_str()),
            "{id} got an error: nothing of it is stored"
        );
    }

    // the senders retry each failed delivery, and the retries are stored
    B::fast_inbox_inserts(&store).await;
    for id in &failed {
        assert_eq!(
            store.receive(&delivery(id)).await.unwrap(),
            Received::Stored,
            "{id}"
        );
    }
}

/// With one writer task, a burst of copies queues behind each batch: every key is
/// still stored once and answered `Stored` once, and a copy answered `Duplicate`
/// finds its row. Returns at once when the test must skip (see [`Backend::url`]).
///
/// # Panics
/// A check failed.
pub async fn one_writer_stores_each_key_of_a_burst_once<B: Backend>() {
    let Some(fixture) = super::fixture::<B>(Settings::new().with_group_commit_writers(1)).await
    else {
        return;
    };
    assert_eq!(B::group_commit_writers(&fixture.store), 1);
    let store = Arc::new(fixture.store.clone());
    let ids: Vec<String> = (0..48).map(|n| format!("evt_one_writer_{n}")).collect();
    // three copies of each key, sent at once
    let tasks: Vec<_> = ids
        .iter()
        .cycle()
        .take(ids.len() * 3)
        .map(|id| {
            let (store, copy, id) = (Arc::clone(&store), delivery(id), id.clone());
            tokio::spawn(async move { (id, store.receive(&copy).await.unwrap()) })
        })
        .collect();
    let mut stored = std::collections::HashMap::<String, usize>::new();
    for task in tasks {
        let (id, received) = task.await.unwrap();
        *stored.entry(id).or_default() += usize::from(received == Received::Stored);
    }
    for id in &ids {
        assert_eq!(stored[id], 1, "{id}: one copy is answered Stored");
    }
    let rows = store.list(InboxFilter::all(), 1000).await.unwrap();
    assert_eq!(rows.len(), ids.len(), "one row per key");
    let batches = B::group_commit_stats(&store).unwrap();
    assert!(
        batches.rows >= ids.len() as u64,
        "every row went through a commit the stats count: {batches:?}"
    );
}
