//! Faults: the server killed (SIGKILL, as a crash) while deliveries arrive, then
//! started again on the same data. No delivery is answered `Stored` unless it is in
//! the inbox after the restart, every failure in between is transient (5xx, the
//! sender retries), and the store resumes by itself, without a new `connect`.
//!
//! Skips without a private server's programs (see `common::server`); with
//! `HOOKBOX_REQUIRE_SERVICES=1` it fails instead.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use hookbox_core::testing::delivery;
use hookbox_core::{CommitMode, Inbox, InboxAdmin as _, InboxFilter, Received, StoreError};
use hookbox_diesel_mysql::diesel_async::{
    AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _,
};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_testkit::mysql_server::PrivateServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_server_loses_no_acknowledged_delivery_and_the_store_resumes() {
    let Some(mut server) = PrivateServer::start(None).await else {
        return;
    };
    let mut conn = AsyncMysqlConnection::establish(&server.url("127.0.0.1", "mysql", ""))
        .await
        .unwrap();
    conn.batch_execute("CREATE DATABASE hb_faults")
        .await
        .unwrap();
    drop(conn);
    for mode in [CommitMode::PerRequest, CommitMode::default()] {
        let store = MysqlStore::connect(
            &server.url("127.0.0.1", "hb_faults", "?ssl-mode=DISABLED"),
            MysqlOptions::new()
                .with_commit_mode(mode)
                .with_pool_timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let tag = if matches!(mode, CommitMode::PerRequest) {
            "per_request"
        } else {
            "grouped"
        };
        let mut stored = BTreeSet::new();
        let mut failed = BTreeSet::new();
        let send =
            async |n: usize, stored: &mut BTreeSet<String>, failed: &mut BTreeSet<String>| {
                let id = format!("evt_{tag}_{n:04}");
                match store.receive(&delivery(&id, "{}")).await {
                    Ok(Received::Stored) => {
                        stored.insert(id);
                    }
                    Ok(Received::Duplicate) => panic!("{id} was never sent before"),
                    Err(err) => {
                        assert!(err.is_transient(), "{id}: {err:?}");
                        failed.insert(id);
                    }
                }
            };
        for n in 0..50 {
            send(n, &mut stored, &mut failed).await;
        }
        assert_eq!(stored.len(), 50, "the server is up");
        server.kill();
        for n in 50..60 {
            send(n, &mut stored, &mut failed).await;
        }
        assert_eq!(
            failed.len(),
            10,
            "nothing is stored while the server is down"
        );
        server.restart().await;
        // the store resumes by itself: the pool drops the dead connections
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut n = 60;
        loop {
            send(n, &mut stored, &mut failed).await;
            let id = format!("evt_{tag}_{n:04}");
            n += 1;
            if stored.contains(&id) {
                break;
            }
            assert!(Instant::now() < deadline, "the store did not resume");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let rows = store.list(InboxFilter::all(), 1000).await.unwrap();
        let kept: BTreeSet<String> = rows
            .iter()
            .map(|row| row.key.delivery_id().to_string())
            .collect();
        for id in &stored {
            assert!(
                kept.contains(id),
                "{id} was answered Stored: it survived the crash"
            );
        }
        // the senders' retries of what failed are stored now
        for id in &failed {
            let retried = store.receive(&delivery(id, "{}")).await.unwrap();
            assert_eq!(retried, Received::Stored, "{id} was not stored before");
        }
        println!(
            "{tag}: {} stored, {} failed and retried",
            stored.len(),
            failed.len()
        );
    }
}
