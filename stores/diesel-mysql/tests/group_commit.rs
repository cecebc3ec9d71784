//! Group commit on MySQL and MariaDB when a batch's statement dies with its connection:
//! no caller of that batch is answered `Stored`, nothing of it is half-stored, and
//! the senders' retries are stored. (The conformance suite checks bursts and a
//! refused row on every backend.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::{
    DedupeKey, Inbox as _, InboxAdmin, InboxFilter, KeptHeaders, Received, StoreError as _,
    VerifiedDelivery,
};
use hookbox_diesel_mysql::MysqlOptions;

fn delivery(id: &str) -> VerifiedDelivery {
    VerifiedDelivery::new(
        DedupeKey::new("group", "standard", id),
        Bytes::from_static(b"{}"),
        KeptHeaders::default(),
    )
}

/// Every batch statement sleeps before it inserts, so the test can kill the
/// connections that run them mid-statement, as a crashed or restarted server would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_whose_connection_dies_answers_no_caller_stored_and_stores_nothing_of_it() {
    let Some(fixture) = common::fixture(MysqlOptions::new()).await else {
        return;
    };
    let store = Arc::new(fixture.store.clone());
    // MySQL's triggers run per row: each row of a batch sleeps
    common::exec(
        &store,
        "CREATE TRIGGER hookbox_test_slow BEFORE INSERT ON hookbox_inbox \
         FOR EACH ROW BEGIN DO SLEEP(0.5); END",
    )
    .await;

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
    let killed = kill_inserts(&store).await;
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
    common::exec(&store, "DROP TRIGGER hookbox_test_slow").await;
    for id in &failed {
        assert_eq!(
            store.receive(&delivery(id)).await.unwrap(),
            Received::Stored,
            "{id}"
        );
    }
}

/// Kills the connections running an insert into the inbox (asleep in the test's
/// trigger, which the process list shows as the running statement); returns how
/// many.
async fn kill_inserts(store: &hookbox_diesel_mysql::MysqlStore) -> usize {
    use hookbox_diesel_mysql::diesel;
    use hookbox_diesel_mysql::diesel_async::{RunQueryDsl, SimpleAsyncConnection};

    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        id: i64,
    }

    let mut conn = store.connection().await.unwrap();
    let running = diesel::sql_query(
        "SELECT CAST(id AS SIGNED) AS id FROM information_schema.processlist \
         WHERE db = DATABASE() AND info LIKE 'DO SLEEP%' AND id <> CONNECTION_ID()",
    )
    .load::<Id>(&mut *conn)
    .await
    .unwrap();
    for process in &running {
        // gone already when its statement ended meanwhile
        let _ = conn.batch_execute(&format!("KILL {}", process.id)).await;
    }
    running.len()
}

/// With one writer task, a burst of copies queues behind each batch: every key is
/// still stored once and answered `Stored` once, and a copy answered `Duplicate`
/// finds its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_writer_stores_each_key_of_a_burst_once() {
    let Some(fixture) = common::fixture(MysqlOptions::new().with_group_commit_writers(1)).await
    else {
        return;
    };
    assert_eq!(fixture.store.options().group_commit_writers(), 1);
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
    let batches = store.group_commit_stats().unwrap();
    assert!(
        batches.rows >= ids.len() as u64,
        "every row went through a commit the stats count: {batches:?}"
    );
}
