//! The batched worker: many rows per transaction, each handler in its own savepoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::fixtures::{credit_handler, delivery, find_by_key};
use super::{Harness, SuiteConfig};
use crate::spi::RowResult;
use crate::{
    Advance, BatchLimits, Delivery, HandlerError, Inbox, InboxAdmin, VersionGuard, WorkerOptions,
};

/// Bounds wide enough that a loaded test machine still runs the whole batch.
fn whole_batch(rows: u32) -> BatchLimits {
    BatchLimits::default()
        .max_rows(rows)
        .time_budget(Duration::from_secs(60))
        .row_timeout(Duration::from_secs(60))
}

/// Runs `work_batch` until the inbox is idle; returns how many rows were processed.
async fn drain_batches<H, F>(h: &H, handler: &F, limits: BatchLimits) -> u64
where
    H: Harness,
    F: crate::Handler<H::Conn> + 'static,
{
    let mut processed = 0;
    for _ in 0..1_000 {
        let outcomes = h.store().work_batch(handler, limits).await.unwrap();
        if outcomes.is_empty() {
            return processed;
        }
        processed += outcomes.iter().filter(|o| o.is_processed()).count() as u64;
    }
    panic!("the inbox never became idle");
}

/// A failing handler in a batch of 100 costs its neighbours nothing: the 99 commit
/// in the one transaction, the failure is recorded with its attempt, and the row is
/// retried by the policy until it is a dead letter.
pub async fn check_batch_failing_handler_costs_its_neighbours_nothing<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    for i in 0..100 {
        let body = if i == 50 { "poison" } else { "{}" };
        h.store()
            .receive(&delivery(&format!("evt_batch_{i}"), body))
            .await
            .unwrap();
    }
    let outcomes = h
        .store()
        .work_batch(&credit_handler::<H>, whole_batch(100))
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 100, "one batch ran every row");
    let failed: Vec<_> = outcomes.iter().filter_map(|o| o.failure()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0].attempts, failed[0].dead), (1, false));
    assert!(failed[0].error.contains("poison"), "{}", failed[0].error);
    assert!(failed[0].next_attempt_at.is_some());
    let poison = outcomes.iter().find(|o| !o.is_processed()).unwrap();
    assert_eq!(poison.key.delivery_id(), "evt_batch_50");
    assert_eq!(h.balance("acct").await.unwrap(), 9_900, "the 99 committed");
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.processed, stats.pending), (99, 1));

    // the policy retries it (zero backoff here) until the attempt limit
    let mut attempts = vec![];
    for _ in 0..10 {
        let outcomes = h
            .store()
            .work_batch(&credit_handler::<H>, whole_batch(100))
            .await
            .unwrap();
        if outcomes.is_empty() {
            break;
        }
        assert_eq!(outcomes.len(), 1, "a retry runs alone");
        let failure = outcomes[0].failure().unwrap();
        attempts.push((failure.attempts, failure.dead));
    }
    assert_eq!(
        attempts,
        vec![(2, false), (3, false), (4, false), (5, true)],
        "retried to the default limit of 5"
    );
    assert_eq!(
        h.balance("acct").await.unwrap(),
        9_900,
        "nothing applied twice"
    );
    let row = find_by_key(&h, "evt_batch_50").await;
    assert!(row.dead_at.is_some());
    assert_eq!(row.attempts, 5);
}

/// A handler that panics does not take the worker down: its row is charged the
/// failure ("the handler panicked: …"), its batch rolls back and the neighbours are
/// applied once by the next batch; the row dead-letters at the limit.
pub async fn check_batch_panicking_handler_fails_its_row_only<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    for i in 0..5 {
        let body = if i == 2 { "panic" } else { "{}" };
        h.store()
            .receive(&delivery(&format!("evt_panic_{i}"), body))
            .await
            .unwrap();
    }
    let panics = async |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.body().as_ref() == b"panic" {
            panic!("the handler met a row it cannot take");
        }
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    let outcomes = h
        .store()
        .work_batch(&panics, whole_batch(10))
        .await
        .unwrap();
    let failures: Vec<_> = outcomes.iter().filter_map(|o| o.failure()).collect();
    assert_eq!(failures.len(), 1, "{outcomes:?}");
    assert_eq!(failures[0].attempts, 1);
    assert!(
        failures[0]
            .error
            .contains("the handler panicked: the handler met a row it cannot take"),
        "{}",
        failures[0].error
    );
    // whatever ran before the panic rolled back with its batch
    let processed = outcomes.iter().filter(|o| o.is_processed()).count();
    assert_eq!(processed, 0, "the panicking batch committed nothing");
    assert_eq!(h.balance("acct").await.unwrap(), 0);

    // the worker loop survives it and drains the rest; the row ends a dead letter
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let store = h.store();
    let worker = crate::run_worker_with(
        store,
        panics,
        WorkerOptions::default()
            .idle(Duration::from_millis(10))
            .batch(whole_batch(10)),
        async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|s| *s).await;
        },
    );
    let watch = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let stats = store.stats().await.unwrap();
            if stats.pending == 0 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "not drained");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.send(true).unwrap();
    };
    let (report, ()) = tokio::join!(worker, watch);
    let report = report.unwrap();
    assert_eq!(report.processed, 4);
    assert_eq!(report.dead, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 400, "each neighbour once");
    let row = find_by_key(&h, "evt_panic_2").await;
    assert!(row.dead_at.is_some());
    assert!(row.last_error.unwrap().contains("panicked"));
}

/// A handler that outruns the row timeout fails its row; the others are applied.
pub async fn check_batch_row_timeout_fails_the_slow_row<H: Harness>() {
    let h = H::setup(SuiteConfig::with_max_attempts(1)).await;
    for i in 0..3 {
        let body = if i == 1 { "slow" } else { "{}" };
        h.store()
            .receive(&delivery(&format!("evt_slow_{i}"), body))
            .await
            .unwrap();
    }
    let slow = async |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        if delivery.body().as_ref() == b"slow" {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        Ok(())
    };
    let limits = whole_batch(10).row_timeout(Duration::from_millis(200));
    let processed = drain_batches(&h, &slow, limits).await;
    assert_eq!(processed, 2);
    assert_eq!(
        h.balance("acct").await.unwrap(),
        200,
        "the slow row's write rolled back"
    );
    let row = find_by_key(&h, "evt_slow_1").await;
    assert!(row.dead_at.is_some(), "one attempt allowed");
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or("")
            .contains("longer than its timeout"),
        "{:?}",
        row.last_error
    );
}

/// A batch stops starting rows once its time budget is spent; the rows it took but
/// did not start are due again at once, and nothing is lost or applied twice.
pub async fn check_batch_time_budget_bounds_a_batch<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    for i in 0..10 {
        h.store()
            .receive(&delivery(&format!("evt_budget_{i}"), "{}"))
            .await
            .unwrap();
    }
    let slowish = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    let limits = whole_batch(10).time_budget(Duration::from_millis(50));
    let first = h.store().work_batch(&slowish, limits).await.unwrap();
    assert!(
        (1..10).contains(&first.len()),
        "the budget cut the batch short: {} rows",
        first.len()
    );
    let rest = drain_batches(&h, &slowish, limits).await;
    assert_eq!(first.len() as u64 + rest, 10);
    assert_eq!(h.balance("acct").await.unwrap(), 1_000);
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.processed, stats.pending), (10, 0));
    for i in 0..10 {
        let row = find_by_key(&h, &format!("evt_budget_{i}")).await;
        assert_eq!(
            row.attempts, 0,
            "an unstarted row is not charged an attempt"
        );
    }
}

/// A commit that fails applies no row of its batch: every row stays due, with no
/// attempt charged, and a later batch applies each once.
pub async fn check_batch_failed_commit_applies_nothing<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    for i in 0..10 {
        h.store()
            .receive(&delivery(&format!("evt_commit_{i}"), "{}"))
            .await
            .unwrap();
    }
    h.fail_commits_crediting("acct_refused").await;
    // the fifth row's write makes the batch's commit fail
    let seen = Arc::new(AtomicU32::new(0));
    let poisons_the_commit =
        async move |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            H::credit(conn, "acct", 100).await?;
            if n == 4 {
                H::credit(conn, "acct_refused", 1).await?;
            }
            Ok(())
        };
    let failed = h
        .store()
        .work_batch(&poisons_the_commit, whole_batch(10))
        .await;
    assert!(failed.is_err(), "the commit failed: {failed:?}");
    assert_eq!(h.balance("acct").await.unwrap(), 0, "no row applied");
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.processed, stats.pending), (0, 10));

    // every row is due again and is applied once
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut processed = 0;
    while processed < 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "rows did not come back"
        );
        processed += drain_batches(&h, &credit_handler::<H>, whole_batch(10)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(h.balance("acct").await.unwrap(), 1_000);
}

/// A batch whose handler runs longer than the lease ([`SuiteConfig::lease`]) is not
/// taken over by another worker meanwhile: every row is applied exactly once.
pub async fn check_batch_outliving_its_lease_applies_each_row_once<H: Harness>() {
    let lease = Duration::from_millis(500);
    let h = Arc::new(
        H::setup(SuiteConfig {
            lease,
            ..SuiteConfig::default()
        })
        .await,
    );
    for i in 0..5 {
        h.store()
            .receive(&delivery(&format!("evt_lease_{i}"), "{}"))
            .await
            .unwrap();
    }
    let slow_first = async |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.delivery_id() == "evt_lease_0" {
            tokio::time::sleep(Duration::from_millis(1_200)).await;
        }
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    let slow_batch = h.store().work_batch(&slow_first, whole_batch(10));
    let other = async {
        // starts once the slow batch's lease has run out
        tokio::time::sleep(lease + Duration::from_millis(200)).await;
        drain_batches(&*h, &credit_handler::<H>, whole_batch(10)).await
    };
    let (slow, other) = tokio::join!(slow_batch, other);
    let slow = slow.unwrap().iter().filter(|o| o.is_processed()).count() as u64;
    let rest = drain_batches(&*h, &credit_handler::<H>, whole_batch(10)).await;
    assert_eq!(slow + other + rest, 5, "each row processed once");
    assert_eq!(
        h.balance("acct").await.unwrap(),
        500,
        "no row applied twice"
    );
}

/// Several batches at once keep the version guard's order per object: shuffled
/// updates processed by concurrent batches end on the latest version.
pub async fn check_version_guard_holds_under_concurrent_batches<H: Harness>() {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    let order = [
        3, 1, 7, 2, 20, 5, 4, 19, 6, 9, 8, 11, 10, 13, 12, 18, 14, 17, 15, 16,
    ];
    for version in order {
        for object in ["a", "b"] {
            let body = format!("{object}:{version}");
            h.store()
                .receive(&delivery(&format!("evt_v_{object}_{version}"), &body))
                .await
                .unwrap();
        }
    }
    let guard = Arc::clone(&h);
    let guarded =
        async move |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
            let body = String::from_utf8_lossy(delivery.body()).into_owned();
            let (object, version) = body.split_once(':').unwrap();
            let version: i64 = version.parse().unwrap();
            if guard.store().advance(conn, object, version).await? == Advance::Applied {
                H::set_plan(conn, object, &format!("plan_v{version}")).await?;
            }
            Ok(())
        };
    let store = h.store();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let options = WorkerOptions::default()
        .idle(Duration::from_millis(5))
        .batch(whole_batch(4))
        .concurrency(4);
    let worker = crate::run_worker_with(store, guarded, options, async move {
        let mut stopped = stopped;
        let _ = stopped.wait_for(|s| *s).await;
    });
    let watch = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while store.stats().await.unwrap().pending > 0 {
            assert!(tokio::time::Instant::now() < deadline, "not drained");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.send(true).unwrap();
    };
    let (report, ()) = tokio::join!(worker, watch);
    let report = report.unwrap();
    assert_eq!(report.processed, 40);
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(h.plan("a").await.unwrap().as_deref(), Some("plan_v20"));
    assert_eq!(h.plan("b").await.unwrap().as_deref(), Some("plan_v20"));
}

/// Per-row mode ([`BatchLimits::per_row`]) takes one row per transaction.
pub async fn check_per_row_mode_takes_one_row<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    for i in 0..3 {
        h.store()
            .receive(&delivery(&format!("evt_row_{i}"), "{}"))
            .await
            .unwrap();
    }
    let outcomes = h
        .store()
        .work_batch(&credit_handler::<H>, BatchLimits::per_row())
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 1);
    assert!(matches!(outcomes[0].result, RowResult::Processed));
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}
