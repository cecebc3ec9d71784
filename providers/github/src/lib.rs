//! GitHub webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `X-Hub-Signature-256: sha256=<hex>` | [Validating webhook deliveries](https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries) |
//! | signed content | the raw body, HMAC-SHA256 keyed with the webhook secret, hex | same page |
//! | dedupe key | `X-GitHub-Delivery` ("the same as in the original delivery" on redelivery) | [Redelivering webhooks](https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks) |
//! | event type | `X-GitHub-Event`; correlation: `X-GitHub-Hook-ID` | [Webhook events and payloads](https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers) |
//! | timestamp | none signed: there is no replay window to check | |
//! | retention minimum | 3 days: manual redelivery covers "deliveries that occurred in the past 3 days"; GitHub never retries on its own | same page |
//!
//! GitHub does not retry a failed delivery automatically: "if your server goes down,
//! you should redeliver missed webhooks once your server is back up". A receiver that
//! answers 5xx must arrange that redelivery itself.
//!
//! The legacy SHA-1 header `X-Hub-Signature` is ignored. The signature is compared as
//! `sha256=<lower-case hex>` text, as `@octokit/webhooks-methods` compares it: the
//! same MAC in upper- or mixed-case hex is a [`VerifyError::SignatureMismatch`] whose
//! hint says so, a value that is not 64 hex digits is a
//! [`VerifyError::MalformedHeader`].
//!
//! # Examples
//! GitHub's own documentation example verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_github::GitHub;
//!
//! let github = GitHub::new("It's a Secret to Everybody")?;
//! let mut headers = HeaderMap::new();
//! headers.insert(
//!     "X-Hub-Signature-256",
//!     "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".parse()?,
//! );
//! headers.insert("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958".parse()?);
//! headers.insert("X-GitHub-Event", "issues".parse()?);
//!
//! let delivery = github.verify(&headers, "Hello, World!".into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "72d3162e-cc78-11e3-81ab-4c9367dc0958");
//! assert_eq!(delivery.event_type(), Some("issues"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`GitHubSigner`]:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_github::{GitHub, GitHubSigner};
//!
//! let signer = GitHubSigner::new("test-secret")?.event("push");
//! let body = br#"{"ref":"refs/heads/main"}"#;
//! let headers = signer.sign("a-delivery-id", 0, body).to_header_map();
//! let delivery = GitHub::new("test-secret")?
//!     .verify(&headers, body.as_slice().into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.event_type(), Some("push"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, scan, text_hmac_key,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "github";

/// Keys must outlive GitHub's 3-day manual redelivery window.
pub const MIN_RETENTION: Retention = Retention::from_days(3);

/// `X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the body.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("X-Hub-Signature-256", "x-hub-signature-256");
/// `X-GitHub-Delivery`: a GUID kept on redelivery; the dedupe key.
pub const DELIVERY: HeaderSpec = HeaderSpec::new("X-GitHub-Delivery", "x-github-delivery");
/// `X-GitHub-Event`: the event name (`push`, `issues`, …).
pub const EVENT: HeaderSpec = HeaderSpec::new("X-GitHub-Event", "x-github-event");
/// `X-GitHub-Hook-ID`: the webhook's id.
pub const HOOK_ID: HeaderSpec = HeaderSpec::new("X-GitHub-Hook-ID", "x-github-hook-id");

const SCHEME: &str = "sha256=";

/// The MAC after `sha256=`: lower-case hex, compared as text as
/// `@octokit/webhooks-methods` compares it.
const MAC: MacFormat = MacFormat {
    provider: "GitHub",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "the value after `sha256=` is not 64 hex digits",
};

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a const is not promoted to
// a `'static` borrow: scans borrow these statics instead
static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static DELIVERY_HEADER: HeaderSpec = DELIVERY;
static EVENT_HEADER: HeaderSpec = EVENT;
static HOOK_ID_HEADER: HeaderSpec = HOOK_ID;

/// Verifies GitHub deliveries.
#[derive(Debug, Clone)]
pub struct GitHub {
    keys: TextKeys,
    options: VerifyOptions,
}

impl GitHub {
    /// Accepts deliveries signed with any of `secrets` (several during a rotation).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (body limit, source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

impl Provider for GitHub {
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
        let [signature, delivery, event, hook_id] = scan(
            headers,
            [
                &SIGNATURE_HEADER,
                &DELIVERY_HEADER,
                &EVENT_HEADER,
                &HOOK_ID_HEADER,
            ],
        );
        let mut kept = KeptHeaders::with_capacity(4);
        let signature = signature.take_required(&mut kept)?;
        let delivery_id = delivery.take_required(&mut kept)?;
        let event = event.take(&mut kept)?;
        let hook_id = hook_id.take(&mut kept)?;

        let hex = signature.strip_prefix(SCHEME).ok_or_else(|| {
            VerifyError::malformed(
                SIGNATURE.label(),
                "expected `sha256=<64 hex digits>`; the SHA-1 `sha1=` form is not accepted",
            )
        })?;
        // compared as text; only a failed comparison asks whether it was hex at all
        self.keys
            .verify(SIGNATURE.label(), &[], &body, || std::iter::once(hex))?;

        let key = DedupeKey::new(self.options.source_or(NAME), NAME, delivery_id);
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body,
            headers: kept,
            event_type: event.map(DeliveryText::from),
            correlation_id: hook_id.map(DeliveryText::from),
            signed_at: None,
        }))
    }
}

/// Signs deliveries exactly as GitHub does, for tests.
#[derive(Debug, Clone)]
pub struct GitHubSigner {
    key: HmacKey,
    event: String,
}

impl GitHubSigner {
    /// Signs with `secret`; the event defaults to `ping`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank.
    pub fn new(secret: &str) -> Result<Self, VerifyError> {
        Ok(Self {
            key: text_hmac_key(secret)?,
            event: "ping".to_string(),
        })
    }

    /// Sets the `X-GitHub-Event` value.
    pub fn event(mut self, event: impl Into<String>) -> Self {
        self.event = event.into();
        self
    }
}

impl Signer for GitHubSigner {
    fn sign(&self, id: &str, _timestamp: i64, body: &[u8]) -> SignedHeaders {
        let mut headers = SignedHeaders::default();
        headers.push(DELIVERY.label(), id);
        headers.push(EVENT.label(), self.event.clone());
        headers.push(
            SIGNATURE.label(),
            format!(
                "{SCHEME}{}",
                self.key.sign_text(&[body], MAC.encoding).as_str()
            ),
        );
        headers
    }
}
