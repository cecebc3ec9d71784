//! What a provider hands over after verification.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::DeliveryText;
use crate::headers::KeptHeaders;

/// The key a delivery is deduplicated on: the provider's stable delivery id, scoped
/// by the source (the receiving endpoint) and, where the provider names one, the
/// tenant (Shopify's shop domain).
///
/// Never a signature or a signed timestamp: both change on every retry.
///
/// # Examples
/// ```
/// use hookbox_core::DedupeKey;
/// let key = DedupeKey::new("shopify", "shopify", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
///     .with_tenant("shop.myshopify.com");
/// assert_eq!(key.scope(), "shopify/shop.myshopify.com");
/// assert_eq!(key.to_string(), "shopify/shop.myshopify.com/shopify/b54557e4-bdd9-4b37-8a5f-bf7d70bcd043");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupeKey {
    source: DeliveryText,
    tenant: Option<DeliveryText>,
    provider: Cow<'static, str>,
    delivery_id: DeliveryText,
}

impl DedupeKey {
    /// A key for `delivery_id` from `provider`, received at `source`. Short texts are
    /// kept inline ([`DeliveryText`]), so a provider builds a key without allocating.
    #[inline(always)]
    pub fn new(
        source: impl Into<DeliveryText>,
        provider: impl Into<Cow<'static, str>>,
        delivery_id: impl Into<DeliveryText>,
    ) -> Self {
        Self {
            source: source.into(),
            tenant: None,
            provider: provider.into(),
            delivery_id: delivery_id.into(),
        }
    }

    /// Scopes the key to a tenant inside the source.
    #[inline(always)]
    pub fn with_tenant(self, tenant: impl Into<DeliveryText>) -> Self {
        Self {
            tenant: Some(tenant.into()),
            ..self
        }
    }

    /// Returns the receiving endpoint's name.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Returns the tenant, where the provider names one.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Returns the provider's name (`"stripe"`, `"shopify"`, …).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Returns the provider's stable delivery id.
    pub fn delivery_id(&self) -> &str {
        &self.delivery_id
    }

    /// Returns `source` or `source/tenant`: the first column of a store's unique key.
    pub fn scope(&self) -> String {
        match &self.tenant {
            Some(tenant) => format!("{}/{tenant}", self.source),
            None => self.source.to_string(),
        }
    }
}

impl fmt::Display for DedupeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(tenant) = &self.tenant {
            write!(f, "/{tenant}")?;
        }
        write!(f, "/{}/{}", self.provider, self.delivery_id)
    }
}

/// Everything a provider hands over about a delivery it verified, for
/// [`VerifiedDelivery::from_parts`].
#[derive(Debug, Clone)]
pub struct DeliveryParts {
    /// The key to deduplicate on.
    pub key: DedupeKey,
    /// The raw body exactly as it was signed.
    pub body: Bytes,
    /// The headers needed to verify the body again.
    pub headers: KeptHeaders,
    /// The provider's event type (`payment_intent.succeeded`, `orders/create`, …).
    pub event_type: Option<DeliveryText>,
    /// The id that ties several deliveries of one change together.
    pub correlation_id: Option<DeliveryText>,
    /// The timestamp the provider signed.
    pub signed_at: Option<OffsetDateTime>,
}

/// A delivery whose signature verified over its raw bytes.
///
/// It keeps the exact bytes that were signed and the headers needed to verify them
/// again (an inbox stores both), plus what the provider says about the event. The
/// body is parsed only when asked ([`VerifiedDelivery::json`]): verification never
/// depends on the payload's shape, so a new event type or API version still verifies.
pub struct VerifiedDelivery {
    key: DedupeKey,
    correlation_id: Option<DeliveryText>,
    event_type: Option<DeliveryText>,
    signed_at: Option<OffsetDateTime>,
    body: Bytes,
    headers: KeptHeaders,
    json: OnceLock<Option<serde_json::Value>>,
}

impl VerifiedDelivery {
    /// Assembles a delivery. For [`Provider`](crate::Provider) implementations:
    /// building one by hand skips verification.
    #[inline(always)]
    pub fn new(key: DedupeKey, body: Bytes, headers: KeptHeaders) -> Self {
        Self::from_parts(DeliveryParts {
            key,
            body,
            headers,
            event_type: None,
            correlation_id: None,
            signed_at: None,
        })
    }

    /// Assembles a delivery from everything its provider read, in one step. For
    /// [`Provider`](crate::Provider) implementations, as [`VerifiedDelivery::new`]:
    /// where `new` and the `with_*` methods move the whole delivery once per call
    /// (several hundred bytes, freshly written), this builds it in place.
    #[inline(always)]
    pub fn from_parts(parts: DeliveryParts) -> Self {
        Self {
            key: parts.key,
            correlation_id: parts.correlation_id,
            event_type: parts.event_type,
            signed_at: parts.signed_at,
            body: parts.body,
            headers: parts.headers,
            json: OnceLock::new(),
        }
    }

    /// Sets the id that ties several deliveries of one change together.
    #[inline(always)]
    pub fn with_correlation_id(self, id: Option<impl Into<DeliveryText>>) -> Self {
        Self {
            correlation_id: id.map(Into::into),
            ..self
        }
    }

    /// Sets the provider's event type (`payment_intent.succeeded`, `orders/create`, …).
    #[inline(always)]
    pub fn with_event_type(self, event_type: Option<impl Into<DeliveryText>>) -> Self {
        Self {
            event_type: event_type.map(Into::into),
            ..self
        }
    }

    /// Sets the timestamp the provider signed.
    #[inline(always)]
    pub fn with_signed_at(self, at: Option<OffsetDateTime>) -> Self {
        Self {
            signed_at: at,
            ..self
        }
    }

    /// Returns the provider's name.
    pub fn provider(&self) -> &str {
        self.key.provider()
    }

    /// Returns the key to deduplicate on.
    pub fn dedupe_key(&self) -> &DedupeKey {
        &self.key
    }

    /// Returns the id shared by deliveries of one change, where the provider has one:
    /// Shopify's `X-Shopify-Event-Id`, Stripe's `data.object.id:type`.
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// Returns the provider's event type, where it sends one outside the payload or
    /// in a field verification already read.
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    /// Returns the signed timestamp, for providers that sign one.
    pub fn signed_at(&self) -> Option<OffsetDateTime> {
        self.signed_at
    }

    /// Returns the raw body exactly as it was signed.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Returns the headers needed to verify the body again.
    pub fn headers(&self) -> &KeptHeaders {
        &self.headers
    }

    /// Returns the body parsed as JSON, parsing it on first use; `None` when the body
    /// is not JSON (the delivery is still verified; [`VerifiedDelivery::parse`] says why).
    pub fn json(&self) -> Option<&serde_json::Value> {
        self.json
            .get_or_init(|| serde_json::from_slice(&self.body).ok())
            .as_ref()
    }

    /// Deserializes the body into your own type.
    ///
    /// # Errors
    /// The body does not match `T`; the delivery is still verified.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

impl Clone for VerifiedDelivery {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            correlation_id: self.correlation_id.clone(),
            event_type: self.event_type.clone(),
            signed_at: self.signed_at,
            body: self.body.clone(),
            headers: self.headers.clone(),
            json: self.json.clone(),
        }
    }
}

impl fmt::Debug for VerifiedDelivery {
    // the body may hold personal data; print its length, not its bytes
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedDelivery")
            .field("key", &self.key)
            .field("correlation_id", &self.correlation_id)
            .field("event_type", &self.event_type)
            .field("signed_at", &self.signed_at)
            .field("body_len", &self.body.len())
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A delivery as a handler sees it, inline or from the inbox: one view, so one
/// handler function serves both modes.
///
/// Inline, it is the [`VerifiedDelivery`] just verified; from the inbox, the stored
/// row (the same bytes, headers and facts, kept at receipt). Cheap to clone: the body
/// is reference-counted.
#[derive(Clone)]
pub struct Delivery {
    key: DedupeKey,
    event_type: Option<DeliveryText>,
    correlation_id: Option<DeliveryText>,
    signed_at: Option<OffsetDateTime>,
    received_at: OffsetDateTime,
    attempt: u32,
    body: Bytes,
    headers: KeptHeaders,
}

impl Delivery {
    /// The view of an inbox row: what was kept at receipt, on the row's next attempt.
    pub(crate) fn of_row(row: &crate::StoredDelivery) -> Self {
        Self {
            key: row.key.clone(),
            event_type: row.event_type.as_deref().map(DeliveryText::from),
            correlation_id: row.correlation_id.as_deref().map(DeliveryText::from),
            signed_at: row.signed_at,
            received_at: row.received_at,
            attempt: row.attempts.saturating_add(1),
            body: row.body.clone(),
            headers: row.headers.clone(),
        }
    }

    /// The view of a delivery verified just now, on its first attempt (inline mode).
    pub fn received_now(delivery: VerifiedDelivery, now: OffsetDateTime) -> Self {
        Self {
            key: delivery.key,
            event_type: delivery.event_type,
            correlation_id: delivery.correlation_id,
            signed_at: delivery.signed_at,
            received_at: now,
            attempt: 1,
            body: delivery.body,
            headers: delivery.headers,
        }
    }

    /// Returns the provider's name.
    pub fn provider(&self) -> &str {
        self.key.provider()
    }

    /// Returns the key the delivery was deduplicated on.
    pub fn dedupe_key(&self) -> &DedupeKey {
        &self.key
    }

    /// Returns the provider's stable delivery id (the last part of the dedupe key).
    pub fn delivery_id(&self) -> &str {
        self.key.delivery_id()
    }

    /// Returns the provider's event type, where verification read one.
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    /// Returns the id shared by deliveries of one change, where the provider has one.
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// Returns when the event occurred as far as hookbox knows: the timestamp the
    /// provider signed, or else when hookbox received it. Not an ordering signal: use
    /// a version from the payload and [`VersionGuard`](crate::VersionGuard).
    pub fn occurred_at(&self) -> OffsetDateTime {
        self.signed_at.unwrap_or(self.received_at)
    }

    /// Returns the timestamp the provider signed, for providers that sign one.
    pub fn signed_at(&self) -> Option<OffsetDateTime> {
        self.signed_at
    }

    /// Returns when hookbox received the delivery.
    pub fn received_at(&self) -> OffsetDateTime {
        self.received_at
    }

    /// Returns which attempt this is: 1 inline and on a worker's first try, one more
    /// after each failure.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Returns the headers it was verified with.
    pub fn headers(&self) -> &KeptHeaders {
        &self.headers
    }

    /// Returns the raw body exactly as it was signed.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Deserializes the body into your own type.
    ///
    /// # Errors
    /// The body does not match `T`; the delivery is still verified.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

impl fmt::Debug for Delivery {
    // the body may hold personal data; print its length, not its bytes
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("key", &self.key)
            .field("event_type", &self.event_type)
            .field("correlation_id", &self.correlation_id)
            .field("signed_at", &self.signed_at)
            .field("received_at", &self.received_at)
            .field("attempt", &self.attempt)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use http::{HeaderName, HeaderValue};

    use super::*;

    fn kept(n: usize) -> KeptHeaders {
        (0..n)
            .map(|i| {
                (
                    HeaderName::from_bytes(format!("x-h{i}").as_bytes()).unwrap(),
                    HeaderValue::from_str(&i.to_string()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn kept_headers_keep_their_order_past_the_inline_ones() {
        for n in 0..10 {
            let headers = kept(n);
            assert_eq!(headers.len(), n);
            assert_eq!(headers.is_empty(), n == 0);
            let values: Vec<String> = headers
                .iter()
                .map(|(_, v)| v.to_str().unwrap().to_string())
                .collect();
            let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            assert_eq!(values, expected);
            for i in 0..n {
                assert_eq!(headers.get(&format!("X-H{i}")).unwrap(), &i.to_string());
            }
            assert_eq!(headers.to_header_map().len(), n);
            let mut built = KeptHeaders::with_capacity(n);
            for (name, value) in headers.iter() {
                built.push(name.clone(), value.clone());
            }
            assert_eq!(built, headers);
            assert_ne!(kept(n + 1), headers);
            assert_eq!(
                format!("{headers:?}"),
                format!("KeptHeaders({:?})", headers.iter().collect::<Vec<_>>())
            );
        }
    }

    #[test]
    fn a_key_compares_by_its_texts() {
        let long = "e".repeat(100);
        let a = DedupeKey::new("src", "stripe", long.as_str()).with_tenant("shop");
        let b = DedupeKey::new("src".to_string(), "stripe", long.clone())
            .with_tenant("shop".to_string());
        assert_eq!(a, b);
        assert_eq!(a.delivery_id(), long);
        assert_eq!(a.to_string(), format!("src/shop/stripe/{long}"));
        assert_eq!(a.scope(), "src/shop");
    }
}
