//! Outbox checks: messages stage with the claim's transaction, keep their ids across
//! retries, go to one relay at a time, keep order per key, dead-letter, and survive
//! the purge unless sent.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use time::OffsetDateTime;

use super::Harness;
use super::fixtures::key;
use crate::spi::{Lease, Leased, Settlement, Staged, StagedMessage};
use crate::{
    DedupeKey, IdempotencyStore, Message, MessageId, OutboxAdmin, OutboxFilter, OutboxStore,
    ProcessError, Processed, Purge,
};

const LEASE: Duration = Duration::from_secs(30);

async fn all_messages<H: Harness>(h: &H) -> Vec<crate::OutboxMessage> {
    h.store().list(OutboxFilter::all(), 1_000).await.unwrap()
}

async fn lease_now<H: Harness>(h: &H, now: OffsetDateTime) -> Vec<Leased> {
    h.store().lease(16, LEASE, now).await.unwrap()
}

fn ids(leased: &[Leased]) -> Vec<MessageId> {
    leased.iter().map(|l| l.message.id.clone()).collect()
}

/// Stages `messages` receipts for `key` inside `process_once` and credits the
/// ledger; fails after staging when `fail` is set. Returns the ids it staged.
async fn stage_receipts<H: Harness>(
    h: &H,
    key: &DedupeKey,
    messages: u32,
    fail: bool,
) -> (
    Result<Processed<()>, ProcessError<H::Error>>,
    Vec<MessageId>,
) {
    let mut staged = Vec::new();
    let result = h
        .store()
        .process_once(key, async |conn| {
            let mut outbox = h.store().outbox(key, "receipts");
            for n in 0..messages {
                let message = Message::new("email", format!("receipt {n}"));
                staged.push(outbox.stage(conn, message).await?);
            }
            H::credit(conn, "acct", 100).await?;
            if fail {
                return Err("the handler failed after staging".into());
            }
            Ok(())
        })
        .await;
    (result, staged)
}

/// A message staged in a side effect that fails is rolled back with the claim and
/// the ledger; staged in one that succeeds, it commits with them.
pub async fn check_outbox_stage_rolls_back_with_the_side_effect<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let key = key("evt_outbox_rollback");
    let (result, _) = stage_receipts(&h, &key, 2, true).await;
    assert!(matches!(result, Err(ProcessError::SideEffect(_))));
    assert!(
        all_messages(&h).await.is_empty(),
        "a rolled-back stage leaves no row"
    );
    assert_eq!(h.balance("acct").await.unwrap(), 0);
    assert!(lease_now(&h, OffsetDateTime::now_utc()).await.is_empty());

    let (result, staged) = stage_receipts(&h, &key, 2, false).await;
    assert_eq!(result.unwrap(), Processed::Applied(()));
    let rows = all_messages(&h).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
    let mut row_ids: Vec<_> = rows.iter().map(|m| m.id.clone()).collect();
    row_ids.sort();
    let mut staged = staged;
    staged.sort();
    assert_eq!(row_ids, staged);
}

/// A handler retried after a rollback stages the same ids as its first run, and a
/// delivery replayed after it committed stages nothing new: the ids depend on the
/// delivery, the handler and the order of the calls only.
pub async fn check_outbox_retried_handler_stages_the_same_ids<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let key = key("evt_outbox_same_ids");
    let (_, first) = stage_receipts(&h, &key, 3, true).await;
    let (result, second) = stage_receipts(&h, &key, 3, false).await;
    assert_eq!(result.unwrap(), Processed::Applied(()));
    assert_eq!(first, second, "a retried handler stages the same ids");
    assert_eq!(first[0], MessageId::derive(&key, "receipts", 0));

    // an operator's replay runs the handler again after the commit
    let mut conn_result = None;
    let replayed = h
        .store()
        .process_once(
            &crate::testing::key("evt_outbox_replay_marker"),
            async |conn| {
                let mut outcomes = Vec::new();
                for (sequence, id) in first.iter().enumerate() {
                    let staged = StagedMessage {
                        id: id.clone(),
                        key: key.clone(),
                        handler: "receipts".to_string(),
                        sequence: u32::try_from(sequence).unwrap(),
                        message: Message::new("email", "a replayed receipt"),
                    };
                    outcomes.push(h.store().stage(conn, &staged).await?);
                }
                conn_result = Some(outcomes);
                Ok(())
            },
        )
        .await;
    assert_eq!(replayed.unwrap(), Processed::Applied(()));
    assert_eq!(conn_result.unwrap(), vec![Staged::AlreadyStaged; 3]);
    let rows = all_messages(&h).await;
    assert_eq!(rows.len(), 3, "a replay stages no new message");
    assert!(
        rows.iter().all(|m| m.payload.starts_with(b"receipt ")),
        "the first staging is kept"
    );
}

/// A relay that dies holding a lease loses the message when the lease expires: the
/// next relay gets it with one more attempt, and the first relay's late answer
/// changes nothing.
pub async fn check_outbox_expired_lease_goes_to_another_relay<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let (result, staged) = stage_receipts(&h, &key("evt_outbox_lease"), 1, false).await;
    result.unwrap();
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let first = lease_now(&h, now).await;
    assert_eq!(ids(&first), staged);
    assert_eq!(first[0].message.attempts, 1);
    assert!(
        lease_now(&h, now + LEASE / 2).await.is_empty(),
        "a live lease keeps the message from every other relay"
    );

    let later = now + LEASE + Duration::from_secs(1);
    let second = lease_now(&h, later).await;
    assert_eq!(
        ids(&second),
        staged,
        "an expired lease hands the message on"
    );
    assert_eq!(second[0].message.attempts, 2);
    assert_ne!(first[0].lease.token, second[0].lease.token);

    let stale = h
        .store()
        .settle(first[0].lease, Settlement::Sent, later)
        .await
        .unwrap();
    assert!(!stale, "the expired holder cannot settle");
    assert_eq!(h.store().stats().await.unwrap().sent, 0);
    let settled = h
        .store()
        .settle(second[0].lease, Settlement::Sent, later)
        .await
        .unwrap();
    assert!(settled);
    let row = h.store().get(&staged[0]).await.unwrap().unwrap();
    assert_eq!(row.state().as_str(), "sent");
    assert!(
        lease_now(&h, later + LEASE * 4).await.is_empty(),
        "sent is final"
    );
}

/// Messages with one ordering key go in staging order: a later one waits while an
/// earlier one fails and is retried, and messages of other keys flow meanwhile.
pub async fn check_outbox_ordering_key_holds_order_across_a_failure<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let key = key("evt_outbox_order");
    let mut staged = Vec::new();
    h.store()
        .process_once(&key, async |conn| {
            let mut outbox = h.store().outbox(&key, "crm");
            for (name, order) in [("first", "cus_1"), ("second", "cus_1"), ("other", "cus_2")] {
                let message = Message::new("crm", name).with_ordering_key(order);
                staged.push(outbox.stage(conn, message).await?);
            }
            Ok(())
        })
        .await
        .unwrap();
    let [first, second, other] = <[MessageId; 3]>::try_from(staged).unwrap();

    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let round = lease_now(&h, now).await;
    assert_eq!(ids(&round), vec![first.clone(), other.clone()]);
    for leased in &round {
        let settlement = if leased.message.id == first {
            Settlement::Retry {
                error: "503 from the CRM",
                at: now,
            }
        } else {
            Settlement::Sent
        };
        assert!(
            h.store()
                .settle(leased.lease, settlement, now)
                .await
                .unwrap()
        );
    }

    let retry = lease_now(&h, now).await;
    assert_eq!(
        ids(&retry),
        vec![first.clone()],
        "the second waits for the first"
    );
    assert_eq!(retry[0].message.attempts, 2);
    assert_eq!(
        retry[0].message.last_error.as_deref(),
        Some("503 from the CRM")
    );
    assert!(
        h.store()
            .settle(retry[0].lease, Settlement::Sent, now)
            .await
            .unwrap()
    );
    let last = lease_now(&h, now).await;
    assert_eq!(ids(&last), vec![second], "then the second goes");
}

/// A dead message is never leased again, stays visible to the operator, does not
/// hold back later messages of its ordering key, and comes back on retry.
pub async fn check_outbox_dead_letter_is_kept_and_retried_on_request<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let key = key("evt_outbox_dead");
    let mut staged = Vec::new();
    h.store()
        .process_once(&key, async |conn| {
            let mut outbox = h.store().outbox(&key, "crm");
            for name in ["poison", "after"] {
                let message = Message::new("crm", name).with_ordering_key("cus_9");
                staged.push(outbox.stage(conn, message).await?);
            }
            Ok(())
        })
        .await
        .unwrap();
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let round = lease_now(&h, now).await;
    assert_eq!(ids(&round), vec![staged[0].clone()]);
    let dead = Settlement::Dead {
        error: "422 from the CRM",
    };
    assert!(h.store().settle(round[0].lease, dead, now).await.unwrap());

    let next = lease_now(&h, now).await;
    assert_eq!(
        ids(&next),
        vec![staged[1].clone()],
        "a dead letter blocks nobody"
    );
    assert!(
        h.store()
            .settle(next[0].lease, Settlement::Sent, now)
            .await
            .unwrap()
    );
    assert!(lease_now(&h, now + LEASE * 4).await.is_empty());

    let stats = h.store().stats().await.unwrap();
    assert_eq!((stats.pending, stats.sent, stats.dead), (0, 1, 1));
    let listed = h.store().list(OutboxFilter::dead(), 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, staged[0]);
    assert_eq!(listed[0].last_error.as_deref(), Some("422 from the CRM"));
    assert_eq!(listed[0].state().as_str(), "dead");

    for filter in [OutboxFilter::pending(), OutboxFilter::sent()] {
        assert_eq!(
            h.store().replay_matching(filter.clone()).await.unwrap(),
            0,
            "{filter:?} selects no dead message"
        );
    }
    assert_eq!(h.store().stats().await.unwrap(), stats, "nothing changed");

    assert!(h.store().replay(&staged[0]).await.unwrap());
    assert!(
        !h.store().replay(&staged[0]).await.unwrap(),
        "pending already"
    );
    let later = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let again = lease_now(&h, later).await;
    assert_eq!(ids(&again), vec![staged[0].clone()]);
    assert_eq!(again[0].message.attempts, 1, "a replay resets the attempts");
    let unknown = MessageId::from_stored("0".repeat(32));
    assert!(!h.store().replay(&unknown).await.unwrap());

    // dead again: every dead message among those the filter selects is replayed
    assert!(h.store().settle(again[0].lease, dead, later).await.unwrap());
    for filter in [OutboxFilter::dead(), OutboxFilter::all()] {
        assert_eq!(h.store().replay_matching(filter).await.unwrap(), 1);
        let stats = h.store().stats().await.unwrap();
        assert_eq!((stats.pending, stats.sent, stats.dead), (1, 1, 0));
        let round = lease_now(&h, later + Duration::from_secs(1)).await;
        assert_eq!(ids(&round), vec![staged[0].clone()]);
        assert_eq!(round[0].message.attempts, 1);
        assert!(h.store().settle(round[0].lease, dead, later).await.unwrap());
    }
}

/// The purge deletes sent messages past their retention and keeps pending and dead
/// ones however old.
pub async fn check_outbox_purge_keeps_unsent_and_dead<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let (result, staged) = stage_receipts(&h, &key("evt_outbox_purge"), 3, false).await;
    result.unwrap();
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let round = lease_now(&h, now).await;
    assert_eq!(round.len(), 3);
    for leased in &round {
        let settlement = if leased.message.id == staged[0] {
            Settlement::Sent
        } else if leased.message.id == staged[1] {
            Settlement::Dead { error: "gone" }
        } else {
            Settlement::Retry {
                error: "later",
                at: now + Duration::from_secs(3600),
            }
        };
        assert!(
            h.store()
                .settle(leased.lease, settlement, now)
                .await
                .unwrap()
        );
    }
    assert_eq!(
        OutboxAdmin::purge(h.store(), now).await.unwrap(),
        0,
        "within retention"
    );
    let far = now + Duration::from_secs(400 * 24 * 3600);
    let purged = Purge::purge(h.store(), far).await.unwrap();
    assert_eq!(purged.outbox_messages, 1, "only the sent message goes");
    let left: Vec<_> = all_messages(&h)
        .await
        .into_iter()
        .map(|m| (m.id.clone(), m.state().as_str()))
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&(staged[1].clone(), "dead")));
    assert!(left.contains(&(staged[2].clone(), "pending")));
}

/// A message reads back exactly as staged: payload bytes, headers (a value that is
/// not UTF-8 included), ordering key, sink, and the delivery and handler it came
/// from, tenant and all.
pub async fn check_outbox_messages_read_back_exactly<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let payload = Bytes::from_static(b"\x00\xffbinary \"payload\"");
    let latin1 = HeaderValue::from_bytes(b"caf\xe9").unwrap();
    let key = key("evt_outbox_exact");
    h.store()
        .process_once(&key, async |conn| {
            let message = Message::new("audit", payload.clone())
                .with_ordering_key("tenant-7")
                .with_header(HeaderName::from_static("x-legacy"), latin1.clone())
                .with_header(
                    HeaderName::from_static("x-tenant"),
                    HeaderValue::from_static("7"),
                );
            h.store()
                .outbox(&key, "audit-log")
                .stage(conn, message)
                .await?;
            Ok(())
        })
        .await
        .unwrap();

    let rows = all_messages(&h).await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.key, key);
    assert_eq!(row.id, MessageId::derive(&row.key, "audit-log", 0));
    assert_eq!(row.handler, "audit-log");
    assert_eq!(row.sequence, 0);
    assert_eq!(row.sink, "audit");
    assert_eq!(row.ordering_key.as_deref(), Some("tenant-7"));
    assert_eq!(row.payload, payload);
    assert_eq!(row.headers.get("x-legacy"), Some(&latin1));
    assert_eq!(row.headers.get("x-tenant").unwrap(), "7");
    assert_eq!((row.attempts, row.sent_at, row.dead_at), (0, None, None));
    assert_eq!(h.store().get(&row.id).await.unwrap().as_ref(), Some(row));

    // a tenant-scoped key reads back with its tenant
    let scoped = DedupeKey::new("shops", "shopify", "wh_1").with_tenant("shop-1.myshopify.com");
    h.store()
        .process_once(&scoped, async |conn| {
            h.store()
                .outbox(&scoped, "receipts")
                .stage(conn, Message::new("email", "hi"))
                .await?;
            Ok(())
        })
        .await
        .unwrap();
    let id = MessageId::derive(&scoped, "receipts", 0);
    let back = h.store().get(&id).await.unwrap().unwrap();
    assert_eq!(back.key, scoped);
    let lease = Lease {
        seq: back.seq,
        token: 0,
    };
    assert!(
        !h.store()
            .settle(lease, Settlement::Sent, OffsetDateTime::now_utc())
            .await
            .unwrap(),
        "an unleased message cannot be settled"
    );
}

/// [`OutboxStore::settle_many`] records each outcome of a batch as
/// [`OutboxStore::settle`] would, reports a lease that is no longer held as `false`,
/// and a [`Settlement::Release`] gives the lease's attempt back.
pub async fn check_outbox_settle_many_records_each_outcome<H: Harness>() {
    let h = H::setup(Default::default()).await;
    let key = key("evt_outbox_settle_many");
    let (result, staged) = stage_receipts(&h, &key, 5, false).await;
    result.unwrap();
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let round = lease_now(&h, now).await;
    assert_eq!(ids(&round), staged);
    let stale = Lease {
        seq: round[4].lease.seq,
        token: round[4].lease.token.wrapping_add(1),
    };
    let batch = [
        (round[0].lease, Settlement::Sent),
        (
            round[1].lease,
            Settlement::Retry {
                error: "503",
                at: now,
            },
        ),
        (round[2].lease, Settlement::Dead { error: "422" }),
        (
            round[3].lease,
            Settlement::Release {
                error: "no sink named `email`",
                at: now,
            },
        ),
        (stale, Settlement::Sent),
    ];
    let settled = h.store().settle_many(&batch, now).await.unwrap();
    assert_eq!(settled, vec![true, true, true, true, false]);
    assert!(h.store().settle_many(&[], now).await.unwrap().is_empty());

    let h = &h;
    let state = |id: &MessageId| {
        let id = id.clone();
        async move { h.store().get(&id).await.unwrap().unwrap() }
    };
    assert_eq!(state(&staged[0]).await.state().as_str(), "sent");
    let retried = state(&staged[1]).await;
    assert_eq!((retried.state().as_str(), retried.attempts), ("pending", 1));
    assert_eq!(retried.last_error.as_deref(), Some("503"));
    assert_eq!(state(&staged[2]).await.state().as_str(), "dead");
    let released = state(&staged[3]).await;
    assert_eq!(
        (released.state().as_str(), released.attempts),
        ("pending", 0),
        "a release gives its attempt back"
    );
    assert_eq!(
        released.last_error.as_deref(),
        Some("no sink named `email`")
    );
    // the stale token changed nothing: the message is still leased
    let still = state(&staged[4]).await;
    assert_eq!((still.state().as_str(), still.attempts), ("pending", 1));
    let again = lease_now(h, now).await;
    assert_eq!(ids(&again), vec![staged[1].clone(), staged[3].clone()]);
}
