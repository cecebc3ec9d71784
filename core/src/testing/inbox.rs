//! The inbox as storage: one row per delivery, read back exactly as verified (the
//! bytes, every header byte, the facts a provider added), in the order an operator
//! lists it, and the same [`Delivery`] view inline and from the inbox.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use time::OffsetDateTime;

use super::fixtures::{
    DeliveryFacts, credit_handler, delivery, delivery_with_facts, drain, find_by_key,
};
use super::{Harness, SuiteConfig};
use crate::{
    DedupeKey, Delivery, Handler, HandlerError, IdempotencyStore, Inbox, InboxAdmin, InboxFilter,
    KeptHeaders, Processed, Received, StoredDelivery, VerifiedDelivery, Worked,
};

/// Inbox receive: one row per delivery, both outcomes durable.
pub async fn check_inbox_receive_dedupes<H: Harness>(copies: usize) {
    let h = Arc::new(H::setup(SuiteConfig::default()).await);
    let d = delivery("evt_inbox_copies", "{}");
    let tasks: Vec<_> = (0..copies)
        .map(|_| {
            let (h, d) = (Arc::clone(&h), d.clone());
            tokio::spawn(async move { h.store().receive(&d).await })
        })
        .collect();
    let mut stored = 0;
    for task in tasks {
        if task.await.unwrap().unwrap() == Received::Stored {
            stored += 1;
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(drain(&*h, &credit_handler::<H>).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// The inbox keeps the exact bytes and the headers to verify them again.
pub async fn check_inbox_keeps_raw_bytes_and_headers<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let body: Vec<u8> = vec![0xff, 0x00, b'{', 0x80, b'}', b'\n'];
    let original = delivery("evt_bytes", "");
    let d = VerifiedDelivery::new(
        original.dedupe_key().clone(),
        Bytes::from(body.clone()),
        original.headers().clone(),
    )
    .with_event_type(Some("bytes.test".to_string()));
    h.store().receive(&d).await.unwrap();
    let stats = h.store().stats().await.unwrap();
    assert_eq!(stats.pending, 1);
    assert!(stats.oldest_pending.is_some());
    let check_body = async |_: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if delivery.body().as_ref() == [0xff, 0x00, b'{', 0x80, b'}', b'\n'] {
            Ok(())
        } else {
            Err("body changed".into())
        }
    };
    assert_eq!(drain(&h, &check_body).await, 1);
    let row = find_by_key(&h, "evt_bytes").await;
    assert_eq!(row.body.as_ref(), body.as_slice());
    assert_eq!(row.headers, d.headers().clone());
    assert_eq!(row.event_type.as_deref(), Some("bytes.test"));
    assert_eq!(row.key, *d.dedupe_key());
    assert!(row.processed_at.is_some());
}

/// A header value that is not UTF-8 (obs-text, the bytes 0x80 to 0xFF
/// a `HeaderValue` may hold) reads back byte for byte, from the row and in the
/// handler's [`Delivery`], as do UTF-8 beyond ASCII, tabs, quotes and an empty value.
pub async fn check_inbox_keeps_non_utf8_header_values<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let values: [&[u8]; 7] = [
        b"caf\xe9",
        b"\x80\xff\xfe",
        b"\xc3\x28 not utf-8",
        "café ✓".as_bytes(),
        b"v1,abc= v1,\"quoted\"\t\\",
        b"",
        b"{\"base64\":\"AA==\"}",
    ];
    let original = delivery("evt_obs_text", "{}");
    let mut headers = original.headers().clone();
    for (i, value) in values.iter().enumerate() {
        headers.push(
            HeaderName::try_from(format!("x-value-{i}")).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    let d = VerifiedDelivery::new(
        original.dedupe_key().clone(),
        original.body().clone(),
        headers.clone(),
    );
    assert_eq!(h.store().receive(&d).await.unwrap(), Received::Stored);

    let row = find_by_key(&h, "evt_obs_text").await;
    assert_eq!(row.headers, headers);
    for (i, value) in values.iter().enumerate() {
        let name = format!("x-value-{i}");
        assert_eq!(row.headers.get(&name).unwrap().as_bytes(), *value, "{name}");
    }
    // the worker's handler sees the same bytes
    let expected = headers.clone();
    let check = async move |_: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
        if *delivery.headers() == expected {
            Ok(())
        } else {
            Err(format!("headers changed: {:?}", delivery.headers()).into())
        }
    };
    assert_eq!(drain(&h, &check).await, 1);
    assert_eq!(h.store().stats().await.unwrap().processed, 1);
}

/// The inbox keeps a delivery's correlation id and signed timestamp, reads them
/// back into the row and into the [`Delivery`] a handler gets, and keeps `None` as
/// `None` for providers that send neither.
pub async fn check_inbox_keeps_correlation_id_and_signed_at<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let with = delivery_with_facts("evt_facts", "{}");
    let without = delivery("evt_no_facts", "{}");
    assert_eq!(h.store().receive(&with).await.unwrap(), Received::Stored);
    assert_eq!(h.store().receive(&without).await.unwrap(), Received::Stored);

    let row = find_by_key(&h, "evt_facts").await;
    assert_eq!(row.correlation_id.as_deref(), with.correlation_id());
    assert_eq!(
        row.correlation_id.as_deref(),
        Some("obj_evt_facts:credit.facts")
    );
    assert_eq!(row.signed_at, with.signed_at());
    assert_eq!(
        row.signed_at,
        Some(OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap())
    );
    assert_eq!(row.event_type.as_deref(), Some("credit.facts"));
    let view = row.delivery();
    assert_eq!(view.correlation_id(), with.correlation_id());
    assert_eq!(view.signed_at(), with.signed_at());
    assert_eq!(
        Some(view.occurred_at()),
        with.signed_at(),
        "the signed time"
    );

    let bare = find_by_key(&h, "evt_no_facts").await;
    assert_eq!(bare.correlation_id, None);
    assert_eq!(bare.signed_at, None);
    assert_eq!(
        bare.delivery().occurred_at(),
        bare.received_at,
        "no signed time: when it was received"
    );

    // and the worker's handler sees them too
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = Arc::clone(&seen);
        async move |_: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
            seen.lock().unwrap().push((
                delivery.delivery_id().to_string(),
                delivery.correlation_id().map(str::to_string),
                delivery.signed_at(),
            ));
            Ok(())
        }
    };
    assert_eq!(drain(&h, &record).await, 2);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (
                "evt_facts".to_string(),
                with.correlation_id().map(str::to_string),
                with.signed_at()
            ),
            ("evt_no_facts".to_string(), None, None),
        ]
    );
}

/// A tenant-scoped key reads back as the same key (tenant apart from the source),
/// and a delivery with no facts and no headers reads back with none.
pub async fn check_tenant_keys_read_back_exactly<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let key = DedupeKey::new("shop/endpoint", "shopify", "b54557e4").with_tenant("a.myshopify.com");
    let d = VerifiedDelivery::new(
        key.clone(),
        Bytes::from_static(b"\x00\xff"),
        KeptHeaders::default(),
    );
    assert_eq!(h.store().receive(&d).await.unwrap(), Received::Stored);
    let row = find_by_key(&h, "b54557e4").await;
    assert_eq!(row.key, key);
    assert_eq!(row.key.tenant(), Some("a.myshopify.com"));
    assert_eq!(row.key.source(), "shop/endpoint");
    assert_eq!(row.body.as_ref(), b"\x00\xff");
    assert!(row.headers.is_empty());
    assert_eq!(row.event_type, None);
    assert_eq!((row.correlation_id, row.signed_at), (None, None));
    // and the tenant scopes the key: the same delivery id for another shop is new
    let other = VerifiedDelivery::new(
        DedupeKey::new("shop/endpoint", "shopify", "b54557e4").with_tenant("b.myshopify.com"),
        Bytes::from_static(b"{}"),
        KeptHeaders::default(),
    );
    assert_eq!(h.store().receive(&other).await.unwrap(), Received::Stored);
}

/// `list` filters rows by state, newest first, at most `limit`.
pub async fn check_list_filters_and_orders_rows<H: Harness>() {
    let h = H::setup(SuiteConfig::with_max_attempts(1)).await;
    for (id, body) in [("a", "{}"), ("b", "poison"), ("c", "{}")] {
        h.store().receive(&delivery(id, body)).await.unwrap();
    }
    while h.store().work_one(&credit_handler::<H>).await.unwrap() != Worked::Idle {}
    h.store().receive(&delivery("d", "{}")).await.unwrap();

    let list = async |filter, limit| {
        let rows: Vec<StoredDelivery> = h.store().list(filter, limit).await.unwrap();
        rows.iter()
            .map(|r| r.key.delivery_id().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(list(InboxFilter::pending(), 10).await, ["d"]);
    assert_eq!(list(InboxFilter::dead(), 10).await, ["b"]);
    let mut processed = list(InboxFilter::processed(), 10).await;
    processed.sort();
    assert_eq!(processed, ["a", "c"]);
    assert_eq!(list(InboxFilter::all(), 10).await, ["d", "c", "b", "a"]);
    assert_eq!(list(InboxFilter::all(), 2).await, ["d", "c"]);
    assert_eq!(
        h.store().list(InboxFilter::dead(), 10).await.unwrap().len(),
        1
    );
}

/// One handler serves both modes: the same handler value runs inline, wrapped in
/// `process_once` with [`Delivery::received_now`], and from the inbox through
/// `work_one`; it sees the same [`Delivery`] facts either way, and its writes
/// commit with the claim in one mode and with `processed_at` in the other.
pub async fn check_one_handler_serves_both_modes<H: Harness>() {
    let h = H::setup(SuiteConfig::default()).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    // an ordinary handler: reads the delivery, writes on the transaction's connection
    let handler = {
        let seen = Arc::clone(&seen);
        async move |conn: &mut H::Conn, delivery: &Delivery| -> Result<(), HandlerError> {
            seen.lock().unwrap().push(DeliveryFacts::of(delivery));
            H::credit(conn, "acct", 100).await?;
            Ok(())
        }
    };
    let verified = delivery_with_facts("evt_both_modes", r#"{"account":"acct"}"#);

    // inline: verified just now, handled inside the claim's transaction
    let key = verified.dedupe_key().clone();
    let inline = Delivery::received_now(verified.clone(), OffsetDateTime::now_utc());
    let outcome = h
        .store()
        .process_once(&key, async |conn| handler.handle(conn, &inline).await)
        .await
        .unwrap();
    assert_eq!(outcome, Processed::Applied(()));
    // a redelivery inline is a duplicate: the handler does not run again
    let again = h
        .store()
        .process_once(&key, async |conn| handler.handle(conn, &inline).await)
        .await
        .unwrap();
    assert_eq!(again, Processed::Duplicate);
    assert_eq!(h.balance("acct").await.unwrap(), 100);

    // from the inbox: the same delivery stored, then worked by the same handler
    assert_eq!(
        h.store().receive(&verified).await.unwrap(),
        Received::Stored
    );
    assert_eq!(drain(&h, &handler).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 200);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "once inline, once from the inbox");
    let (inline_facts, worker_facts) = (&seen[0], &seen[1]);
    assert_eq!(inline_facts, worker_facts, "one view in both modes");
    assert_eq!(inline_facts.dedupe_key, *verified.dedupe_key());
    assert_eq!(inline_facts.provider, verified.provider());
    assert_eq!(inline_facts.delivery_id, "evt_both_modes");
    assert_eq!(inline_facts.event_type.as_deref(), verified.event_type());
    assert_eq!(
        inline_facts.correlation_id.as_deref(),
        verified.correlation_id()
    );
    assert!(inline_facts.correlation_id.is_some());
    assert_eq!(inline_facts.signed_at, verified.signed_at());
    assert!(inline_facts.signed_at.is_some());
    assert_eq!(Some(inline_facts.occurred_at), verified.signed_at());
    assert_eq!(inline_facts.body, *verified.body());
    assert_eq!(inline_facts.headers, *verified.headers());
    assert_eq!(inline_facts.attempt, 1, "the first attempt in both modes");
}

/// Checklist 6: one delivery signed once with the old and once with the new secret
/// during a rotation verifies under both (with the provider of
/// [`Harness::rotation`]) and is one event.
pub async fn check_rotated_copies_are_one_event<H: Harness>() {
    let Some(rotation) = H::rotation() else {
        eprintln!("skipped: the harness names no provider to sign with (Harness::rotation)");
        return;
    };
    let (old, new) = rotation.copies("msg_rotated", br#"{"account":"acct"}"#);
    assert_eq!(old.dedupe_key(), new.dedupe_key());
    assert_ne!(
        old.headers(),
        new.headers(),
        "each copy carries its own signature"
    );
    let h = H::setup(SuiteConfig::default()).await;
    assert_eq!(h.store().receive(&old).await.unwrap(), Received::Stored);
    assert_eq!(h.store().receive(&new).await.unwrap(), Received::Duplicate);
    assert_eq!(drain(&h, &credit_handler::<H>).await, 1);
    assert_eq!(h.balance("acct").await.unwrap(), 100);
}

/// A burst of `copies` concurrent copies of each of `keys` deliveries, all at once
/// (so a group-committing store writes them in one or a few batches, copies of one
/// key in the same batch and across batches): each key is stored once, answered
/// `Stored` exactly once and `Duplicate` for every other copy.
pub async fn check_group_commit_stores_each_key_once_across_a_burst<H: Harness>(
    keys: usize,
    copies: usize,
) {
    let h = std::sync::Arc::new(H::setup(SuiteConfig::default()).await);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(keys * copies));
    let mut tasks = Vec::new();
    for k in 0..keys {
        for _ in 0..copies {
            let (h, barrier) = (h.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let copy = delivery(&format!("evt_burst_{k}"), "{}");
                barrier.wait().await;
                (k, h.store().receive(&copy).await.unwrap())
            }));
        }
    }
    let mut stored = vec![0; keys];
    for task in tasks {
        let (k, received) = task.await.unwrap();
        if received == Received::Stored {
            stored[k] += 1;
        }
    }
    assert_eq!(stored, vec![1; keys], "one Stored answer per key");
    let rows = h.store().list(InboxFilter::all(), 1_000).await.unwrap();
    assert_eq!(rows.len(), keys, "one row per key");
}

/// A burst of `senders` concurrent deliveries, one of which the database refuses:
/// the refused one gets an error and is not stored; every other one is stored and
/// answered `Stored`, the batch it shared with the refused row included.
pub async fn check_group_commit_refused_row_fails_only_its_caller<H: Harness>(senders: usize) {
    let h = std::sync::Arc::new(H::setup(SuiteConfig::default()).await);
    h.refuse_inbox_row("evt_refused").await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(senders));
    let mut tasks = Vec::new();
    for n in 0..senders {
        let (h, barrier) = (h.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let id = if n == senders / 2 {
                "evt_refused".to_string()
            } else {
                format!("evt_neighbour_{n}")
            };
            let copy = delivery(&id, "{}");
            barrier.wait().await;
            (
                id,
                h.store()
                    .receive(&copy)
                    .await
                    .map_err(|err| err.to_string()),
            )
        }));
    }
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            (id, Err(_)) => {
                assert_eq!(id, "evt_refused", "only the refused row fails");
                refused += 1;
            }
            (id, Ok(received)) => assert_eq!(received, Received::Stored, "{id}"),
        }
    }
    assert_eq!(refused, 1);
    let rows = h.store().list(InboxFilter::all(), 1_000).await.unwrap();
    assert_eq!(rows.len(), senders - 1);
    assert!(
        rows.iter()
            .all(|row| row.key.delivery_id() != "evt_refused")
    );
}
