//! Shopify webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `X-Shopify-Hmac-Sha256: <base64>`; Events deliveries send `shopify-hmac-sha256` | [Verify webhook deliveries](https://shopify.dev/docs/apps/build/webhooks/verify-deliveries), [Verify Events deliveries](https://shopify.dev/docs/apps/build/events/verify-deliveries) |
//! | signed content | the raw body, HMAC-SHA256 keyed with the app's client secret, base64 | same pages |
//! | dedupe key | `X-Shopify-Webhook-Id` (Events: `shopify-webhook-id`), one per delivery to one subscription | same pages |
//! | correlation | `X-Shopify-Event-Id`, shared by every delivery that one merchant action caused | [Delivery structure](https://shopify.dev/docs/apps/build/webhooks/delivery-structure#headers) |
//! | tenant, event type | `X-Shopify-Shop-Domain`, `X-Shopify-Topic` | same page |
//! | timestamp | none signed; `X-Shopify-Triggered-At` is informational, so there is no replay window to check | same page |
//! | rotation | after the client secret is rotated, Shopify may sign with the old one for up to an hour: configure both | [Verify webhook deliveries](https://shopify.dev/docs/apps/build/webhooks/verify-deliveries) |
//! | retention minimum | 4 hours: a failed delivery is retried "8 times over the next 4 hours" | [Troubleshooting webhooks](https://shopify.dev/docs/apps/build/webhooks/troubleshooting-webhooks) |
//!
//! Both header families are accepted (header names are case-insensitive): the classic
//! `X-Shopify-*` names and the unprefixed `shopify-*` names of the newer Events
//! deliveries. When a delivery carries both, the classic one is used.
//!
//! The HMAC is compared as canonical base64 text (standard alphabet, `=` padding),
//! as Shopify's libraries compare it: the same MAC unpadded, URL-safe or with
//! non-zero trailing bits is a [`VerifyError::SignatureMismatch`] whose hint says so;
//! a value that is not base64 of 32 bytes is a [`VerifyError::MalformedHeader`].
//!
//! # Deduplicate on the webhook id, not the event id
//! With two subscriptions to one topic, each delivery has its own
//! `X-Shopify-Webhook-Id` but both share one `X-Shopify-Event-Id`. Deduplicating on the
//! event id (as an older Shopify page suggests) silently drops the second
//! subscription's deliveries, so the dedupe key here is the webhook id, scoped by the
//! shop domain; the event id is the [correlation id](VerifiedDelivery::correlation_id)
//! that ties those deliveries together.
//!
//! Shopify gives an endpoint 5 seconds and deletes a subscription created through the
//! Admin API after 8 consecutive failures: acknowledge fast and never answer 5xx for a
//! payload you cannot handle.
//!
//! # Examples
//! A delivery whose HMAC was computed once with Python's `hmac` verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_shopify::Shopify;
//!
//! let shopify = Shopify::new("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")?;
//! let body = r#"{"id":820982911946154508,"email":"jon@example.com","total_price":"199.00"}"#;
//! let mut headers = HeaderMap::new();
//! headers.insert("X-Shopify-Hmac-Sha256", "R7lMh77oHXBotms/UVq2zJca4BPBqkW3FqfsNprj4wg=".parse()?);
//! headers.insert("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043".parse()?);
//! headers.insert("X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5".parse()?);
//! headers.insert("X-Shopify-Shop-Domain", "shop.myshopify.com".parse()?);
//! headers.insert("X-Shopify-Topic", "orders/create".parse()?);
//!
//! let delivery = shopify.verify(&headers, body.into(), OffsetDateTime::now_utc())?;
//! assert_eq!(
//!     delivery.dedupe_key().to_string(),
//!     "shopify/shop.myshopify.com/shopify/b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
//! );
//! assert_eq!(delivery.correlation_id(), Some("98880550-7158-44d4-b7cd-2c97c8a091b5"));
//! assert_eq!(delivery.event_type(), Some("orders/create"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`ShopifySigner`], in either header family:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_shopify::{Shopify, ShopifySigner};
//!
//! let signer = ShopifySigner::new("test-secret")?
//!     .topic("products/update")
//!     .shop_domain("test-shop.myshopify.com")
//!     .events_family(true);
//! let body = br#"{"id":9554194432293}"#;
//! let headers = signer.sign("a-webhook-id", 1_790_000_000, body);
//! assert_eq!(headers.get("shopify-triggered-at"), Some("2026-09-21T14:13:20Z"));
//! let delivery = Shopify::new("test-secret")?
//!     .verify(&headers.to_header_map(), body.as_slice().into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().tenant(), Some("test-shop.myshopify.com"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    Found, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, first_found, scan, text_hmac_key,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "shopify";

/// Keys must outlive Shopify's retries: 8 of them over 4 hours.
pub const MIN_RETENTION: Retention = Retention::from_hours(4);

/// The API version [`ShopifySigner`] puts in its headers unless told otherwise.
pub const DEFAULT_API_VERSION: &str = "2025-10";

/// The HMAC header's value: canonical base64, compared as text as Shopify's libraries
/// compare it.
const MAC: MacFormat = MacFormat {
    provider: "Shopify",
    encoding: MacEncoding::Base64,
    not_a_mac: "expected the base64 HMAC-SHA256 of the body (44 characters ending in `=`)",
};

/// The names of the headers Shopify sends, in one of its two families.
#[derive(Debug, Clone)]
pub struct HeaderFamily {
    /// The base64 HMAC-SHA256 of the body.
    pub hmac: HeaderSpec,
    /// The delivery's id, one per subscription: the dedupe key.
    pub webhook_id: HeaderSpec,
    /// The id shared by all deliveries of one merchant action: the correlation id.
    pub event_id: HeaderSpec,
    /// The shop (`example.myshopify.com`): the dedupe key's tenant.
    pub shop_domain: HeaderSpec,
    /// The topic (`orders/create`, …): the event type.
    pub topic: HeaderSpec,
    /// When the event happened (RFC 3339); not signed.
    pub triggered_at: HeaderSpec,
    /// The Admin API version the payload is serialized with.
    pub api_version: HeaderSpec,
}

/// The classic `X-Shopify-*` headers of webhook deliveries.
pub static CLASSIC: HeaderFamily = HeaderFamily {
    hmac: HeaderSpec::new("X-Shopify-Hmac-Sha256", "x-shopify-hmac-sha256"),
    webhook_id: HeaderSpec::new("X-Shopify-Webhook-Id", "x-shopify-webhook-id"),
    event_id: HeaderSpec::new("X-Shopify-Event-Id", "x-shopify-event-id"),
    shop_domain: HeaderSpec::new("X-Shopify-Shop-Domain", "x-shopify-shop-domain"),
    topic: HeaderSpec::new("X-Shopify-Topic", "x-shopify-topic"),
    triggered_at: HeaderSpec::new("X-Shopify-Triggered-At", "x-shopify-triggered-at"),
    api_version: HeaderSpec::new("X-Shopify-API-Version", "x-shopify-api-version"),
};

/// The unprefixed `shopify-*` headers of Events deliveries.
pub static EVENTS: HeaderFamily = HeaderFamily {
    hmac: HeaderSpec::new("shopify-hmac-sha256", "shopify-hmac-sha256"),
    webhook_id: HeaderSpec::new("shopify-webhook-id", "shopify-webhook-id"),
    event_id: HeaderSpec::new("shopify-event-id", "shopify-event-id"),
    shop_domain: HeaderSpec::new("shopify-shop-domain", "shopify-shop-domain"),
    topic: HeaderSpec::new("shopify-topic", "shopify-topic"),
    triggered_at: HeaderSpec::new("shopify-triggered-at", "shopify-triggered-at"),
    api_version: HeaderSpec::new("shopify-api-version", "shopify-api-version"),
};

/// Verifies Shopify deliveries.
#[derive(Debug, Clone)]
pub struct Shopify {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Shopify {
    /// Accepts deliveries signed with any of `secrets`, each an app's client secret
    /// (several during a rotation, or for several apps behind one endpoint).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (body limit, source name); the tolerance is unused
    /// because Shopify signs no timestamp.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

/// Returns one header from either family, the classic name first, with the spelling
/// that matched, keeping a copy in `kept`.
fn either<'h>(
    classic: Found<'h, 'static>,
    events: Found<'h, 'static>,
    kept: &mut KeptHeaders,
) -> Result<Option<(&'static HeaderSpec, &'h str)>, VerifyError> {
    first_found(&[classic, events], kept)
}

impl Provider for Shopify {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        _now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.options.check_body(&body)?;
        let (c, e) = (&CLASSIC, &EVENTS);
        let [
            hmac,
            webhook_id,
            event_id,
            shop_domain,
            topic,
            api_version,
            triggered_at,
            hmac_e,
            webhook_id_e,
            event_id_e,
            shop_domain_e,
            topic_e,
            api_version_e,
            triggered_at_e,
        ] = scan(
            headers,
            [
                &c.hmac,
                &c.webhook_id,
                &c.event_id,
                &c.shop_domain,
                &c.topic,
                &c.api_version,
                &c.triggered_at,
                &e.hmac,
                &e.webhook_id,
                &e.event_id,
                &e.shop_domain,
                &e.topic,
                &e.api_version,
                &e.triggered_at,
            ],
        );
        let mut kept = KeptHeaders::with_capacity(7);
        let (hmac_spec, hmac) =
            either(hmac, hmac_e, &mut kept)?.ok_or_else(|| CLASSIC.hmac.missing())?;
        let (_, webhook_id) = either(webhook_id, webhook_id_e, &mut kept)?
            .ok_or_else(|| CLASSIC.webhook_id.missing())?;
        let event_id = either(event_id, event_id_e, &mut kept)?.map(|(_, text)| text);
        let shop_domain = either(shop_domain, shop_domain_e, &mut kept)?.map(|(_, text)| text);
        let topic = either(topic, topic_e, &mut kept)?.map(|(_, text)| text);
        // kept for the handler: the payload's shape depends on the API version, and
        // Shopify suggests the trigger time to order updates
        either(api_version, api_version_e, &mut kept)?;
        either(triggered_at, triggered_at_e, &mut kept)?;

        // an error names the header the way this delivery spelled it
        self.keys
            .verify(hmac_spec.label(), &[], &body, || std::iter::once(hmac))?;
        if body.is_empty() {
            return Err(VerifyError::MalformedBody {
                reason: "the body is empty; Shopify always sends a payload".to_string(),
            });
        }

        let mut key = DedupeKey::new(self.options.source_or(NAME), NAME, webhook_id);
        if let Some(shop) = shop_domain {
            key = key.with_tenant(shop);
        }
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body,
            headers: kept,
            event_type: topic.map(DeliveryText::from),
            correlation_id: event_id.map(DeliveryText::from),
            signed_at: None,
        }))
    }
}

/// Signs deliveries exactly as Shopify does, for tests.
#[derive(Debug, Clone)]
pub struct ShopifySigner {
    key: HmacKey,
    topic: String,
    shop_domain: String,
    event_id: Option<String>,
    api_version: String,
    events_family: bool,
}

impl ShopifySigner {
    /// Signs with the app's client secret `secret`; the topic defaults to
    /// `orders/create` and the shop to `example.myshopify.com`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank.
    pub fn new(secret: &str) -> Result<Self, VerifyError> {
        Ok(Self {
            key: text_hmac_key(secret)?,
            topic: "orders/create".to_string(),
            shop_domain: "example.myshopify.com".to_string(),
            event_id: None,
            api_version: DEFAULT_API_VERSION.to_string(),
            events_family: false,
        })
    }

    /// Sets the topic header.
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = topic.into();
        self
    }

    /// Sets the shop domain header.
    pub fn shop_domain(mut self, domain: impl Into<String>) -> Self {
        self.shop_domain = domain.into();
        self
    }

    /// Sets the event id header; by default it equals the webhook id passed to
    /// [`Signer::sign`]. Give two signers one event id to imitate two subscriptions
    /// receiving one merchant action.
    pub fn event_id(mut self, id: impl Into<String>) -> Self {
        self.event_id = Some(id.into());
        self
    }

    /// Sets the API version header (default [`DEFAULT_API_VERSION`]).
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// Emits the unprefixed `shopify-*` names of Events deliveries instead of the
    /// classic `X-Shopify-*` ones.
    pub fn events_family(mut self, events: bool) -> Self {
        self.events_family = events;
        self
    }
}

impl Signer for ShopifySigner {
    /// Signs `body` as webhook `id`; `timestamp` only fills the unsigned triggered-at
    /// header (left out when it is not a representable time).
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let family = if self.events_family {
            &EVENTS
        } else {
            &CLASSIC
        };
        let mut headers = SignedHeaders::default();
        headers.push(family.topic.label(), self.topic.clone());
        headers.push(
            family.hmac.label(),
            self.key.sign_text(&[body], MAC.encoding).as_str(),
        );
        headers.push(family.shop_domain.label(), self.shop_domain.clone());
        headers.push(family.api_version.label(), self.api_version.clone());
        headers.push(family.webhook_id.label(), id);
        let triggered_at = OffsetDateTime::from_unix_timestamp(timestamp)
            .ok()
            .and_then(|at| at.format(&Rfc3339).ok());
        if let Some(at) = triggered_at {
            headers.push(family.triggered_at.label(), at);
        }
        headers.push(
            family.event_id.label(),
            self.event_id.as_deref().unwrap_or(id),
        );
        headers
    }
}
