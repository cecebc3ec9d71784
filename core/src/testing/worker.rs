//! The inbox worker: attempts, dead letters and replay, a worker that dies
//! mid-row (as [`Capabilities::reclaim`](super::Capabilities::reclaim) declares),
//! and several workers at once.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::fixtures::{credit_handler, delivery, drain, find_by_key};
use super::{Harness, Reclaim, SuiteConfig};
use crate::{Delivery, HandlerError, Inbox, InboxAdmin, InboxFilter, Purge, Worked};

/// Checklist 8: a poison event becomes a dead letter after the attempt limit while
/// the events behind it keep flowing; replay after a fix applies it once.
pub async fn check_poison_event_dead_letters_while_others_flow<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    h.store()
        .receive(&delivery("evt_poison", "poison"))
        .await
        .unwrap();
    for i in 0..3 {
        h.store()
            .receive(&delivery(&format!("evt_after_poison_{i}"), "{}"))
            .await
            .unwrap();
    }
    let mut failures = 0;
    let mut dead = 0;
    for _ in 0..100 {
        match h.store().work_one(&credit_handler::<H>).await.unwrap() {
            Worked::Idle => break,
            Worked::Processed { .. } => {}
            Worked::Failed {
                attempts,
                dead: is_dead,
                ..
            } => {
                failures += 1;
                assert_eq!(attempts, failures);
                dead += u32::from(is_dead);
            }
        }
    }
    assert_eq!(failures, 5, "the default attempt limit");
    assert_eq!(dead, 1);
    assert_eq!(
        h.balance("acct").await.unwrap(),
        300,
        "the events behind it flowed"
    );
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.processed), (0, 1, 3));

    let letters = h.store().list(InboxFilter::dead(), 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.key.delivery_id(), "evt_poison");
    assert_eq!(letter.attempts, 5);
    assert!(letter.dead_at.is_some());
    assert!(
        letter
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("poison")
    );

    // a dead letter is never purged, however old
    let next_year = OffsetDateTime::now_utc() + Duration::from_secs(365 * 86_400);
    Purge::purge(h.store(), next_year).await.unwrap();
    InboxAdmin::purge(h.store(), next_year).await.unwrap();
    assert_eq!(
        h.store().list(InboxFilter::dead(), 10).await.unwrap().len(),
        1
    );

    // after the fix: replay, and the fixed handler applies it once
    let fixed = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    assert!(h.store().replay(letter.id).await.unwrap());
    assert!(
        !h.store().replay(letter.id).await.unwrap(),
        "no longer dead"
    );
    assert_eq!(drain(&h, &fixed).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 400);
    assert_eq!(h.store().stats().await.unwrap().dead, 0);
}

/// `replay_matching` makes every dead letter among the rows its filter selects due
/// again, and touches no other row: `Pending` and `Processed` replay none, `Dead`
/// and `All` every one.
pub async fn check_replay_matching_replays_dead_letters_only<H: Harness>() {
    let h = H::setup(SuiteConfig::with_max_attempts(1)).await;
    for i in 0..3 {
        let d = delivery(&format!("evt_dead_{i}"), "poison");
        h.store().receive(&d).await.unwrap();
    }
    drain(&h, &credit_handler::<H>).await;
    h.store().receive(&delivery("evt_ok", "{}")).await.unwrap();
    drain(&h, &credit_handler::<H>).await;
    h.store()
        .receive(&delivery("evt_waiting", "{}"))
        .await
        .unwrap();
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed, stats.dead), (1, 1, 3));
    for filter in [InboxFilter::pending(), InboxFilter::processed()] {
        assert_eq!(
            h.store().replay_matching(filter.clone()).await.unwrap(),
            0,
            "{filter:?} selects no dead letter"
        );
    }
    assert_eq!(h.store().stats().await.unwrap(), stats, "nothing changed");
    assert_eq!(
        h.store()
            .replay_matching(InboxFilter::dead())
            .await
            .unwrap(),
        3
    );
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed, stats.dead), (4, 1, 0));
    let fixed = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        Ok(())
    };
    assert_eq!(drain(&h, &fixed).await, 4);
    assert_eq!(h.balance("acct").await.unwrap(), 500);

    // `All` selects every row: its dead letters are replayed, the rest stay
    let d = delivery("evt_dead_again", "poison");
    h.store().receive(&d).await.unwrap();
    drain(&h, &credit_handler::<H>).await;
    assert_eq!(h.store().stats().await.unwrap().dead, 1);
    assert_eq!(
        h.store().replay_matching(InboxFilter::all()).await.unwrap(),
        1
    );
    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed, stats.dead), (1, 5, 0));
}

/// A successful attempt counts no failure and leaves no error.
pub async fn check_attempts_count_failures_only<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    h.store().receive(&delivery("evt_ok", "{}")).await.unwrap();
    let Worked::Processed { id } = h.store().work_one(&credit_handler::<H>).await.unwrap() else {
        panic!("expected the row processed");
    };
    let row = h.store().get(id).await.unwrap().unwrap();
    assert_eq!(row.key.delivery_id(), "evt_ok");
    assert_eq!(row.attempts, 0);
    assert!(row.processed_at.is_some());
    assert_eq!(row.last_error, None);
    assert_eq!(row.dead_at, None);
    assert!(h.store().get(id + 1000).await.unwrap().is_none());
}

/// A failed attempt keeps the handler error with its causes (`{err:#}`) in
/// `last_error`, the text an operator reads, and rolls back what the handler wrote.
pub async fn check_last_error_keeps_the_cause_chain<H: Harness>() {
    #[derive(Debug)]
    struct Refused(std::io::Error);
    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the ledger refused the credit")
        }
    }
    impl std::error::Error for Refused {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    let h = H::setup(SuiteConfig::default()).await;
    h.store()
        .receive(&delivery("evt_refused", "{}"))
        .await
        .unwrap();
    let refuse = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        // written, then rolled back with the failure
        H::credit(conn, "acct", 100).await?;
        Err(Refused(std::io::Error::other("account frozen")).into())
    };
    let Worked::Failed {
        id,
        attempts: 1,
        dead: false,
    } = h.store().work_one(&refuse).await.unwrap()
    else {
        panic!("expected a failed first attempt");
    };
    let row = h.store().get(id).await.unwrap().unwrap();
    assert_eq!(
        row.last_error.as_deref(),
        Some("the ledger refused the credit: account frozen")
    );
    assert_eq!(row.attempts, 1);
    assert!(row.processed_at.is_none());
    assert_eq!(h.balance("acct").await.unwrap(), 0);
}

/// Checklist 4: a worker killed between taking a row and committing its side effect
/// (here: its future dropped mid-transaction) leaves the row unprocessed, and the
/// next worker applies it once, not zero times and not twice. When the row comes
/// back, and what the interrupted attempt leaves, is the backend's
/// [`Reclaim`].
pub async fn check_worker_killed_mid_transaction_applies_once<H: Harness>() {
    let lease = Duration::from_secs(3);
    let h = H::setup(SuiteConfig {
        lease,
        ..SuiteConfig::default()
    })
    .await;
    h.store()
        .receive(&delivery("evt_killed", "{}"))
        .await
        .unwrap();
    let stuck = async |conn: &mut H::Conn, _: &Delivery| -> Result<(), HandlerError> {
        H::credit(conn, "acct", 100).await?;
        // the process "dies" here: the future never completes and is dropped
        std::future::pending::<()>().await;
        Ok(())
    };
    let killed = tokio::time::timeout(Duration::from_millis(300), h.store().work_one(&stuck)).await;
    assert!(killed.is_err(), "the stuck worker was cut off");
    assert_eq!(h.balance("acct").await.unwrap(), 0, "nothing committed");

    let reclaim = H::CAPABILITIES.reclaim;
    let patience = match reclaim {
        // the dead worker's lease still holds the row: no worker may take it yet
        // (2.7 s of the lease are left, a margin for a loaded machine)
        Reclaim::WhenLeaseExpires => {
            assert_eq!(
                drain(&h, &credit_handler::<H>).await,
                0,
                "taken again before its lease expired"
            );
            lease + Duration::from_secs(10)
        }
        // the database rolls back as the connection closes; a few seconds bound the
        // wait for it to notice
        Reclaim::AtOnce => Duration::from_secs(5),
    };
    let deadline = tokio::time::Instant::now() + patience;
    let mut processed = 0;
    while tokio::time::Instant::now() < deadline && processed == 0 {
        processed = drain(&h, &credit_handler::<H>).await;
        if processed == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(processed, 1, "the row came back within {patience:?}");
    assert_eq!(h.balance("acct").await.unwrap(), 100);
    assert_eq!(drain(&h, &credit_handler::<H>).await, 0);

    let row = find_by_key(&h, "evt_killed").await;
    assert!(row.processed_at.is_some());
    match reclaim {
        Reclaim::WhenLeaseExpires => {
            assert_eq!(row.attempts, 1, "the interrupted attempt is counted");
            assert!(row.last_error.is_some(), "and recorded");
        }
        Reclaim::AtOnce => {
            assert_eq!(row.attempts, 0, "the interrupted attempt rolled back");
            assert_eq!(row.last_error, None);
        }
    }
}

/// Several worker tasks never take the same row: every delivery is applied once.
pub async fn check_concurrent_workers_apply_each_row_once<H: Harness>(
    deliveries: usize,
    workers: usize,
) {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    for i in 0..deliveries {
        let d = delivery(&format!("evt_many_{i}"), "{}");
        h.store().receive(&d).await.unwrap();
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let h = Arc::clone(&h);
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                crate::run_worker(
                    h.store(),
                    credit_handler::<H>,
                    Duration::from_millis(20),
                    shutdown,
                )
                .await
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while h.store().stats().await.unwrap().pending > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "workers did not drain the inbox"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap().unwrap().processed;
    }
    assert_eq!(total, deliveries as u64);
    assert_eq!(h.balance("acct").await.unwrap(), 100 * deliveries as i64);
}
