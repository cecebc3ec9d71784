//! What the checks share: keys and deliveries in the suite's own scope, the
//! credit side effect and handler, draining an inbox, and the facts both handler
//! modes must agree on.

use bytes::Bytes;
use time::OffsetDateTime;

use super::Harness;
use crate::{
    DedupeKey, Delivery, Handler, HandlerError, IdempotencyStore, Inbox, InboxAdmin, KeptHeaders,
    ProcessResult, Processed, SideEffect, StoredDelivery, VerifiedDelivery, Worked,
};

/// A key in a test's own scope.
pub fn key(id: &str) -> DedupeKey {
    DedupeKey::new("conformance", "standard", id)
}

/// A delivery as a provider would hand it over (verification is the providers'
/// concern; the suite tests what stores do with one).
pub fn delivery(id: &str, body: &str) -> VerifiedDelivery {
    let mut headers = KeptHeaders::default();
    headers.push(
        http::HeaderName::from_static("webhook-id"),
        http::HeaderValue::from_str(id).unwrap(),
    );
    VerifiedDelivery::new(key(id), Bytes::from(body.to_string()), headers)
        .with_event_type(Some("credit".to_string()))
}

/// [`delivery`] with every fact a provider may add: a correlation id and a signed
/// timestamp (whole seconds, as providers sign them), and a second header.
pub fn delivery_with_facts(id: &str, body: &str) -> VerifiedDelivery {
    let original = delivery(id, body);
    let mut headers = original.headers().clone();
    headers.push(
        http::HeaderName::from_static("webhook-timestamp"),
        http::HeaderValue::from_static("1790000039"),
    );
    VerifiedDelivery::new(
        original.dedupe_key().clone(),
        original.body().clone(),
        headers,
    )
    .with_event_type(Some("credit.facts".to_string()))
    .with_correlation_id(Some(format!("obj_{id}:credit.facts")))
    .with_signed_at(Some(
        OffsetDateTime::from_unix_timestamp(1_790_000_039).unwrap(),
    ))
}

/// Runs `process_once` with a 100-credit side effect on `account`.
pub async fn credit_once<H: Harness>(
    h: &H,
    key: &DedupeKey,
    account: &str,
) -> ProcessResult<(), H::Error> {
    h.store()
        .process_once(key, async |conn| {
            H::credit(conn, account, 100).await?;
            Ok(())
        })
        .await
}

/// Runs `side_effect` inside a `process_once` transaction under a fresh key and
/// returns its value, for checks that need a connection inside a transaction.
pub(super) async fn in_transaction<'a, H, T, F>(h: &'a H, k: &'a DedupeKey, side_effect: F) -> T
where
    H: Harness,
    T: Send + 'a,
    F: SideEffect<H::Conn, T> + 'a,
{
    match h.store().process_once(k, side_effect).await {
        Ok(Processed::Applied(value)) => value,
        Ok(Processed::Duplicate) => panic!("a fresh key was reported as a duplicate"),
        Err(err) => panic!("transaction failed: {err:?}"),
    }
}

/// The handler the inbox checks use: credits 100 to the account named in the body,
/// or fails when the body says `poison`.
///
/// # Errors
/// The body says `poison`, or the credit failed.
pub async fn credit_handler<H: Harness>(
    conn: &mut H::Conn,
    delivery: &Delivery,
) -> Result<(), HandlerError> {
    let body = String::from_utf8_lossy(delivery.body()).into_owned();
    if body.contains("poison") {
        return Err(format!("cannot handle {}: poison", delivery.delivery_id()).into());
    }
    let account = if body.contains("acct_b") {
        "acct_b"
    } else {
        "acct"
    };
    H::credit(conn, account, 100).await?;
    Ok(())
}

/// Runs `work_one` with `handler` until the inbox is idle; returns how many rows
/// were processed.
pub async fn drain<H, F>(h: &H, handler: &F) -> u64
where
    H: Harness,
    F: Handler<H::Conn> + 'static,
{
    let mut processed = 0;
    for _ in 0..10_000 {
        match h.store().work_one(handler).await.unwrap() {
            Worked::Idle => return processed,
            Worked::Processed { .. } => processed += 1,
            Worked::Failed { .. } => {}
        }
    }
    panic!("the inbox never became idle");
}

pub(super) async fn find_by_key<H: Harness>(h: &H, id: &str) -> StoredDelivery {
    for row_id in 1..1000 {
        if let Some(row) = h.store().get(row_id).await.unwrap()
            && row.key.delivery_id() == id
        {
            return row;
        }
    }
    panic!("no inbox row for {id}");
}

/// What a handler can read from a [`Delivery`] that does not depend on when or how
/// often it ran: what both modes must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFacts {
    pub provider: String,
    pub dedupe_key: DedupeKey,
    pub delivery_id: String,
    pub event_type: Option<String>,
    pub correlation_id: Option<String>,
    pub signed_at: Option<OffsetDateTime>,
    pub occurred_at: OffsetDateTime,
    pub attempt: u32,
    pub body: Bytes,
    pub headers: KeptHeaders,
}

impl DeliveryFacts {
    /// Reads the facts off `delivery`.
    pub fn of(delivery: &Delivery) -> Self {
        Self {
            provider: delivery.provider().to_string(),
            dedupe_key: delivery.dedupe_key().clone(),
            delivery_id: delivery.delivery_id().to_string(),
            event_type: delivery.event_type().map(str::to_string),
            correlation_id: delivery.correlation_id().map(str::to_string),
            signed_at: delivery.signed_at(),
            occurred_at: delivery.occurred_at(),
            attempt: delivery.attempt(),
            body: delivery.body().clone(),
            headers: delivery.headers().clone(),
        }
    }
}
