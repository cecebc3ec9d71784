//! Admin checks: the filters select by state, provider, event type, time, delivery
//! id and body text; pages follow one another; the verbs that act on every match
//! ignore the page cursor; only dead letters are replayed or deleted by a filter;
//! the overview and the per-sink counts add up.

use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;

use super::fixtures::{credit_handler, drain};
use super::{Harness, SuiteConfig};
use crate::{
    DedupeKey, DeliveryState, IdempotencyStore, Inbox, InboxAdmin, InboxFilter, KeptHeaders,
    Message, MessageState, OutboxAdmin, OutboxFilter, OutboxStore, Received, RetryPolicy,
    StoredDelivery, VerifiedDelivery,
};

/// A delivery of `provider` in the suite's scope.
fn delivery_of(provider: &'static str, id: &str, event: &str, body: &str) -> VerifiedDelivery {
    VerifiedDelivery::new(
        DedupeKey::new("conformance", provider, id),
        Bytes::from(body.to_string()),
        KeptHeaders::default(),
    )
    .with_event_type(Some(event.to_string()))
}

async fn ids<H: Harness>(h: &H, filter: InboxFilter, limit: u32) -> Vec<String> {
    let rows: Vec<StoredDelivery> = InboxAdmin::list(h.store(), filter, limit).await.unwrap();
    rows.iter()
        .map(|r| r.key.delivery_id().to_string())
        .collect()
}

/// Failed rows wait an hour before their next try, so a drain leaves them failed.
fn slow_retries() -> SuiteConfig {
    SuiteConfig {
        retry: RetryPolicy {
            max_attempts: 5,
            base: Duration::from_secs(3600),
            cap: Duration::from_secs(3600),
        },
        ..SuiteConfig::default()
    }
}

/// Every condition of an [`InboxFilter`] selects what it says, rows come newest
/// first, pages follow one another through `before_id`, and `count` ignores the
/// cursor.
pub async fn check_admin_filters_select_and_page_rows<H: Harness>() {
    let h = H::setup(slow_retries()).await;
    let rows = [
        ("standard", "a", "contact.created", "{}"),
        ("standard", "b", "contact.created", "poison"),
        ("stripe", "c", "invoice.paid", r#"{"needle":1}"#),
        ("stripe", "d", "charge.failed", "poison"),
    ];
    for (provider, id, event, body) in rows {
        let delivery = delivery_of(provider, id, event, body);
        assert_eq!(
            h.store().receive(&delivery).await.unwrap(),
            Received::Stored
        );
    }
    assert_eq!(drain(&h, &credit_handler::<H>).await, 2);
    let late = delivery_of("standard", "e", "contact.created", "{}");
    h.store().receive(&late).await.unwrap();

    assert_eq!(
        ids(&h, InboxFilter::all(), 10).await,
        ["e", "d", "c", "b", "a"]
    );
    assert_eq!(ids(&h, InboxFilter::pending(), 10).await, ["e", "d", "b"]);
    assert_eq!(ids(&h, InboxFilter::failed(), 10).await, ["d", "b"]);
    assert_eq!(ids(&h, InboxFilter::processed(), 10).await, ["c", "a"]);
    assert!(ids(&h, InboxFilter::dead(), 10).await.is_empty());
    let all = InboxAdmin::list(h.store(), InboxFilter::all(), 10)
        .await
        .unwrap();
    let states: Vec<_> = all.iter().map(StoredDelivery::state).collect();
    assert_eq!(
        states,
        [
            DeliveryState::Pending,
            DeliveryState::Failed,
            DeliveryState::Processed,
            DeliveryState::Failed,
            DeliveryState::Processed
        ]
    );

    let stripe = InboxFilter::all().with_provider("stripe");
    assert_eq!(ids(&h, stripe.clone(), 10).await, ["d", "c"]);
    assert_eq!(
        ids(&h, stripe.with_event_type("invoice.paid"), 10).await,
        ["c"]
    );
    assert_eq!(
        ids(&h, InboxFilter::all().with_delivery_id("b"), 10).await,
        ["b"]
    );
    let key = DedupeKey::new("conformance", "stripe", "c");
    assert_eq!(ids(&h, InboxFilter::all().with_key(&key), 10).await, ["c"]);
    let elsewhere = DedupeKey::new("elsewhere", "stripe", "c");
    assert!(
        ids(&h, InboxFilter::all().with_key(&elsewhere), 10)
            .await
            .is_empty()
    );
    let scope = InboxFilter::all().with_source("conformance");
    assert_eq!(ids(&h, scope, 10).await.len(), 5);
    assert!(
        ids(&h, InboxFilter::all().with_delivery_id("B"), 10)
            .await
            .is_empty()
    );
    let needle = InboxFilter::all().with_body_contains("needle");
    assert_eq!(ids(&h, needle, 10).await, ["c"]);
    let poison = InboxFilter::failed()
        .with_provider("standard")
        .with_body_contains("poison");
    assert_eq!(ids(&h, poison, 10).await, ["b"]);
    let no_match = InboxFilter::all().with_body_contains("not in any body");
    assert!(ids(&h, no_match, 10).await.is_empty());

    // received_since is inclusive, received_before exclusive
    let first = all.last().unwrap().received_at;
    let since_first = InboxFilter::all().with_received_since(first);
    assert_eq!(ids(&h, since_first, 10).await.len(), 5);
    assert!(
        ids(&h, InboxFilter::all().with_received_before(first), 10)
            .await
            .is_empty()
    );
    let tomorrow = OffsetDateTime::now_utc() + Duration::from_secs(86_400);
    let until_tomorrow = InboxFilter::all().with_received_before(tomorrow);
    assert_eq!(ids(&h, until_tomorrow, 10).await.len(), 5);
    let from_tomorrow = InboxFilter::all().with_received_since(tomorrow);
    assert!(ids(&h, from_tomorrow, 10).await.is_empty());

    // keyset pages: each starts after the previous page's last id
    let mut pages = Vec::new();
    let mut filter = InboxFilter::all();
    loop {
        let page = InboxAdmin::list(h.store(), filter.clone(), 2)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        filter = filter.with_before_id(last.id);
        pages.push(
            page.iter()
                .map(|r| r.key.delivery_id().to_string())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(pages, [vec!["e", "d"], vec!["c", "b"], vec!["a"]]);

    let count = |filter| InboxAdmin::count(h.store(), filter);
    assert_eq!(count(InboxFilter::all()).await.unwrap(), 5);
    assert_eq!(
        count(InboxFilter::pending().with_before_id(1))
            .await
            .unwrap(),
        3
    );
    assert_eq!(count(InboxFilter::failed()).await.unwrap(), 2);
    let stripe_failed = InboxFilter::failed().with_provider("stripe");
    assert_eq!(count(stripe_failed).await.unwrap(), 1);

    // none of them is a dead letter: nothing to replay or delete
    assert_eq!(
        InboxAdmin::replay_matching(h.store(), InboxFilter::all())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        h.store().purge_matching(InboxFilter::all()).await.unwrap(),
        0
    );
    assert_eq!(count(InboxFilter::all()).await.unwrap(), 5);
}

/// The overview counts each provider's rows by state and each minute's receipts
/// and completions; its minutes run from `since` to now without gaps.
pub async fn check_admin_overview_counts_per_provider_and_minute<H: Harness>() {
    let h = H::setup(slow_retries()).await;
    let since = OffsetDateTime::now_utc() - Duration::from_secs(600);
    for (provider, id, body) in [
        ("standard", "a", "{}"),
        ("standard", "b", "poison"),
        ("stripe", "c", "{}"),
    ] {
        let delivery = delivery_of(provider, id, "e", body);
        h.store().receive(&delivery).await.unwrap();
    }
    assert_eq!(drain(&h, &credit_handler::<H>).await, 2);
    h.store()
        .receive(&delivery_of("stripe", "d", "e", "{}"))
        .await
        .unwrap();

    let overview = InboxAdmin::overview(h.store(), since).await.unwrap();
    let counts: Vec<_> = overview
        .providers
        .iter()
        .map(|p| {
            (
                p.provider.as_str(),
                p.pending,
                p.failed,
                p.processed,
                p.dead,
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("standard", 1, 1, 1, 0), ("stripe", 1, 0, 1, 0)],
        "per provider: pending (failed included), failed, processed, dead"
    );
    assert!(
        overview
            .providers
            .iter()
            .all(|p| p.oldest_pending.is_some())
    );
    assert_eq!(overview.providers[0].received(), 2);

    assert!(
        (10..=12).contains(&overview.minutes.len()),
        "one entry per minute from `since` to now: {}",
        overview.minutes.len()
    );
    assert!(
        overview
            .minutes
            .windows(2)
            .all(|w| w[0].minute < w[1].minute)
    );
    let received: u64 = overview.minutes.iter().map(|m| m.received).sum();
    let processed: u64 = overview.minutes.iter().map(|m| m.processed).sum();
    assert_eq!((received, processed), (4, 2));

    let later = InboxAdmin::overview(
        h.store(),
        OffsetDateTime::now_utc() + Duration::from_secs(120),
    );
    let later = later.await.unwrap();
    assert_eq!(later.minutes.iter().map(|m| m.received).sum::<u64>(), 0);
}

/// `replay_matching` and `purge_matching` act on the dead letters the filter
/// selects and on nothing else; a deleted dead letter's delivery is new again.
pub async fn check_admin_matching_verbs_touch_dead_letters_only<H: Harness>() {
    let h = H::setup(SuiteConfig::with_max_attempts(1)).await;
    for (provider, id, body) in [
        ("standard", "a", "{}"),
        ("standard", "b", "poison"),
        ("stripe", "c", "poison"),
        ("stripe", "d", "poison"),
    ] {
        let delivery = delivery_of(provider, id, "e", body);
        h.store().receive(&delivery).await.unwrap();
    }
    assert_eq!(drain(&h, &credit_handler::<H>).await, 1);
    let dead = InboxFilter::dead();
    assert_eq!(InboxAdmin::count(h.store(), dead.clone()).await.unwrap(), 3);

    let elsewhere = dead.clone().with_provider("github");
    assert_eq!(
        InboxAdmin::replay_matching(h.store(), elsewhere.clone())
            .await
            .unwrap(),
        0
    );
    assert_eq!(h.store().purge_matching(elsewhere).await.unwrap(), 0);

    // one dead letter by its delivery id: replayed, the others stay dead
    let d = InboxFilter::all().with_delivery_id("d");
    assert_eq!(InboxAdmin::replay_matching(h.store(), d).await.unwrap(), 1);
    assert_eq!(ids(&h, InboxFilter::dead(), 10).await, ["c", "b"]);
    assert_eq!(ids(&h, InboxFilter::pending(), 10).await, ["d"]);

    // purge the standard dead letters: b goes, a (processed) stays
    let standard = InboxFilter::all().with_provider("standard");
    assert_eq!(h.store().purge_matching(standard).await.unwrap(), 1);
    assert_eq!(ids(&h, InboxFilter::all(), 10).await, ["d", "c", "a"]);
    // everything else: only c is a dead letter; pending d and processed a stay
    assert_eq!(
        h.store().purge_matching(InboxFilter::all()).await.unwrap(),
        1
    );
    assert_eq!(ids(&h, InboxFilter::all(), 10).await, ["d", "a"]);

    // the provider sends b again: it is stored as new; a is still a duplicate
    let b = delivery_of("standard", "b", "e", "{}");
    assert_eq!(h.store().receive(&b).await.unwrap(), Received::Stored);
    let a = delivery_of("standard", "a", "e", "{}");
    assert_eq!(h.store().receive(&a).await.unwrap(), Received::Duplicate);
}

/// The outbox filters select by state, sink and the delivery that staged the
/// messages; pages follow one another; `sinks` counts per sink.
pub async fn check_admin_outbox_filters_and_counts_per_sink<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let first = DedupeKey::new("conformance", "standard", "first");
    let second = DedupeKey::new("conformance", "stripe", "second");
    for (key, sinks) in [(&first, ["email", "crm"]), (&second, ["email", "email"])] {
        h.store()
            .process_once(key, async |conn| {
                let mut outbox = h.store().outbox(key, "notify");
                for sink in sinks {
                    outbox.stage(conn, Message::new(sink, "hello")).await?;
                }
                Ok(())
            })
            .await
            .unwrap();
    }
    let list = async |filter: OutboxFilter, limit| {
        let messages = OutboxAdmin::list(h.store(), filter, limit).await.unwrap();
        messages
            .into_iter()
            .map(|m| (m.key.delivery_id().to_string(), m.sink))
            .collect::<Vec<_>>()
    };
    let named = |rows: &[(&str, &str)]| {
        rows.iter()
            .map(|(id, sink)| ((*id).to_string(), (*sink).to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(OutboxFilter::all(), 10).await,
        named(&[
            ("second", "email"),
            ("second", "email"),
            ("first", "crm"),
            ("first", "email")
        ]),
        "newest first"
    );
    assert_eq!(
        list(OutboxFilter::all().with_key(first.clone()), 10).await,
        named(&[("first", "crm"), ("first", "email")])
    );
    assert_eq!(
        list(OutboxFilter::pending().with_sink("crm"), 10).await,
        named(&[("first", "crm")])
    );
    assert!(list(OutboxFilter::sent(), 10).await.is_empty());

    let page = OutboxAdmin::list(h.store(), OutboxFilter::all(), 3)
        .await
        .unwrap();
    let rest = OutboxFilter::all().with_before_seq(page[2].seq);
    assert_eq!(list(rest.clone(), 10).await, named(&[("first", "email")]));
    assert_eq!(OutboxAdmin::count(h.store(), rest).await.unwrap(), 4);
    let email = OutboxFilter::all().with_sink("email");
    assert_eq!(OutboxAdmin::count(h.store(), email).await.unwrap(), 3);

    // one email sent: the per-sink counts follow
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let leased = h
        .store()
        .lease(16, Duration::from_secs(30), now)
        .await
        .unwrap();
    let email = leased.iter().find(|l| l.message.sink == "email").unwrap();
    let sent = crate::spi::Settlement::Sent;
    assert!(h.store().settle(email.lease, sent, now).await.unwrap());
    let sinks: Vec<_> = OutboxAdmin::sinks(h.store())
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.sink, s.pending, s.sent, s.dead))
        .collect();
    assert_eq!(
        sinks,
        [("crm".to_string(), 1, 0, 0), ("email".to_string(), 2, 1, 0)]
    );
    let sent = OutboxAdmin::list(h.store(), OutboxFilter::sent(), 10)
        .await
        .unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].state(), MessageState::Sent);
}
