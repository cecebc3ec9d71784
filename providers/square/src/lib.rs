//! Square webhooks (event notifications) for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `x-square-hmacsha256-signature: <base64>`, one per notification | [Verify and validate an event notification](https://developer.squareup.com/docs/webhooks/step3validate) |
//! | signed content | the subscription's notification URL, exactly as configured there, followed by the raw body (no separator); HMAC-SHA256 keyed with the subscription's signature key as text (UTF-8); standard base64 with `=` padding, compared as text | same page; `WebhooksHelper.isValidWebhookEventSignature` in `square-java-sdk` and `square-nodejs-sdk` (`WebhooksHelper.verifySignature` in its newer releases), `is_valid_webhook_event_signature` (now `verify_signature`) in `square-python-sdk` |
//! | notification URL | set per subscription in the Developer Console; Square accepts only `https://` URLs there | [Subscribe to event notifications](https://developer.squareup.com/docs/webhooks/step2subscribe) |
//! | timestamp | none signed: `created_at` is only part of the signed body and `square-initial-delivery-timestamp` is an unsigned header, so there is no replay window to check | same page (the metadata headers) |
//! | dedupe key | the body's `event_id`: "a generated idempotency value … use this value to bypass processing if it's a repeated value" | [Manage webhook operations](https://developer.squareup.com/docs/webhooks/step4manage) |
//! | event type | the body's `type` (`payment.updated`, …) | [payment.updated](https://developer.squareup.com/reference/square/webhooks/payment.updated) |
//! | rotation | `UpdateWebhookSubscriptionSignatureKey` replaces a subscription's signature key; configure the old and the new key while switching | [Webhook Subscriptions API](https://developer.squareup.com/docs/webhooks/webhook-subscriptions-api) |
//! | retention minimum | 72 hours: unsuccessful deliveries "are retried for up to 72 hours after the originating event" (after 1, 2, 4, 8, 16 and 32 minutes, then hourly) | [Notification delivery SLA](https://developer.squareup.com/docs/webhooks-api/delivery-sla) |
//!
//! Verification checks, in order: the body size, the header, the signature over the
//! notification URL and the raw bytes (each key's MAC compared in constant time),
//! then the body, which must be a JSON object ([`VerifyError::MalformedBody`]
//! otherwise) with a string `event_id` ([`VerifyError::MissingDedupeKey`] otherwise).
//!
//! # The notification URL is configuration
//! Square signs the URL of the subscription, not the URL the request reaches: behind
//! a proxy, a load balancer or a tunnel, the URL this server sees
//! (`http://10.0.0.7:3000/…`) is not the one Square signed
//! (`https://shop.example.com/…`). So the URL is given to
//! [`Square::new`], and used byte for byte as Square signs it; a scheme, host, port,
//! path, query or trailing slash that differs is a [`VerifyError::SignatureMismatch`].
//! When the signature would match with the other scheme or the other trailing slash,
//! the mismatch's hint says so.
//!
//! # No replay window
//! Square signs no timestamp of its own: the body's `created_at` is covered by the
//! signature but is the time of the event, which a retry 72 hours later repeats, so it
//! is not a delivery time to hold a window against. A replayed notification verifies
//! again; its `event_id` is what makes it a duplicate. [`VerifyOptions::tolerance`] is
//! unused.
//!
//! The signature is compared as canonical base64 text, as the SDKs compare it: the
//! same MAC unpadded or URL-safe is a [`VerifyError::SignatureMismatch`] whose hint
//! says so; a value that is not base64 of 32 bytes is a
//! [`VerifyError::MalformedHeader`].
//!
//! # Examples
//! The test notification of Square's SDK test suites verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_square::Square;
//!
//! let square = Square::new(
//!     "Ibxx_5AKakO-3qeNVR61Dw",
//!     "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
//! )?;
//! let body = r#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
//! let mut headers = HeaderMap::new();
//! headers.insert(
//!     "x-square-hmacsha256-signature",
//!     "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=".parse()?,
//! );
//!
//! let delivery = square.verify(&headers, body.into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "ac3ac95b-f97d-458c-a6e6-18981597e05f");
//! assert_eq!(delivery.event_type(), Some("webhooks.test_notification"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test notifications with [`SquareSigner`]:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_square::{Square, SquareSigner};
//!
//! let url = "https://shop.example.com/webhooks/square";
//! let body = br#"{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc","data":{}}"#;
//! let headers = SquareSigner::new("test-signature-key", url)?.sign("", 0, body).to_header_map();
//! let delivery = Square::new("test-signature-key", url)?
//!     .verify(&headers, body.as_slice().into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.event_type(), Some("payment.updated"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, HeaderSpec, HmacState, MacEncoding, MacFormat, Spelling, TextKeys, text_hmac_keys,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "square";

/// Keys must outlive Square's retries: up to 72 hours after the event.
pub const MIN_RETENTION: Retention = Retention::from_hours(72);

/// `x-square-hmacsha256-signature`: the base64 HMAC-SHA256 of the notification URL
/// and the body.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new(
    "x-square-hmacsha256-signature",
    "x-square-hmacsha256-signature",
);

/// The signature's one spelling: canonical base64, compared as text as the SDKs do.
const MAC: MacFormat = MacFormat {
    provider: "Square",
    encoding: MacEncoding::Base64,
    not_a_mac: "expected the base64 HMAC-SHA256 of the notification URL and the body (44 characters ending in `=`)",
};

/// Where the dedupe key lives.
const ID_FIELD: &str = "event_id";

/// The fields read from the body: `event_id`, `type`.
const BODY: BodyKeys = BodyKeys::new(&[&[ID_FIELD], &["type"]]);

/// What a notification URL should look like, for configuration errors.
const EXPECTED_URL: &str = "expected the webhook subscription's notification URL exactly as the Developer Console shows it, such as `https://example.com/webhooks/square`";

/// Verifies Square event notifications.
#[derive(Debug, Clone)]
pub struct Square {
    keys: TextKeys,
    /// One MAC per key that has already absorbed the notification URL: a verification
    /// clones one and hashes only the body.
    prepared: Vec<HmacState>,
    notification_url: String,
    options: VerifyOptions,
}

impl Square {
    /// Accepts notifications signed with any of `signature_keys` (each a webhook
    /// subscription's signature key; several during a rotation) for
    /// `notification_url`, the subscription's notification URL exactly as Square
    /// shows it.
    ///
    /// The URL is used byte for byte: Square signs it as configured, whatever URL the
    /// request reaches this server by. `http://` is accepted for local tests; Square
    /// itself only sends to `https://` URLs.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no key is given or one is blank;
    /// [`VerifyError::InvalidConfig`] when `notification_url` is not an absolute
    /// `https://` or `http://` URL with a host, or has whitespace in it.
    pub fn new(
        signature_keys: impl Into<Secrets>,
        notification_url: impl AsRef<str>,
    ) -> Result<Self, VerifyError> {
        let notification_url = notification_url.as_ref();
        check_url(notification_url)?;
        let keys = TextKeys::new(MAC, signature_keys)?;
        let prepared = keys
            .keys()
            .iter()
            .map(|key| {
                let mut mac = key.start();
                mac.update(notification_url.as_bytes());
                mac
            })
            .collect();
        Ok(Self {
            keys,
            prepared,
            notification_url: notification_url.to_owned(),
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (body limit, source name); the tolerance is unused
    /// because Square signs no timestamp.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }

    /// Returns the notification URL the signatures are checked against.
    pub fn notification_url(&self) -> &str {
        &self.notification_url
    }

    /// Explains why no key's MAC over the URL and `body` is `received`; runs only on
    /// the failure path.
    fn mismatch(&self, received: &str, body: &[u8]) -> VerifyError {
        let url = self.notification_url.as_str();
        let err = self
            .keys
            .mismatch(SIGNATURE.label(), &[url.as_bytes()], body, || {
                std::iter::once(received)
            });
        // a malformed header, or a MAC in another spelling, is explained already
        if MAC.encoding.spelling(received, 32) != Spelling::Canonical {
            return err;
        }
        let VerifyError::SignatureMismatch { hint } = err else {
            return err;
        };
        for (variant, differs) in url_variants(url) {
            let matches = self.keys.keys().iter().any(|key| {
                key.sign_text(&[variant.as_bytes(), body], MAC.encoding)
                    .matches(received)
            });
            if matches {
                return VerifyError::SignatureMismatch {
                    hint: format!(
                        "the signature matches the notification URL `{variant}`, not the configured `{url}` (they differ {differs}): Square signs the subscription's URL exactly as configured there, so configure `{variant}`"
                    ),
                };
            }
        }
        // the generic hint blames the key or the body; with Square the URL is as likely
        let hint = if hint.starts_with("no configured secret") {
            format!(
                "{hint}. Square also signs the notification URL: check that `{url}` is exactly the subscription's notification URL (scheme, host, port, path, query and trailing slash), not the URL this server sees behind a proxy or load balancer"
            )
        } else {
            hint
        };
        VerifyError::SignatureMismatch { hint }
    }
}

/// Checks that `url` is an absolute `http(s)://` URL with a host and no whitespace.
/// The errors never repeat the value: a signature key passed in its place must not
/// reach a log.
fn check_url(url: &str) -> Result<(), VerifyError> {
    if url.is_empty() {
        return Err(VerifyError::invalid_config(format!(
            "the notification URL is empty; {EXPECTED_URL}"
        )));
    }
    if url.trim() != url {
        return Err(VerifyError::invalid_config(
            "the notification URL has leading or trailing whitespace (a newline from a file or an environment variable?); Square signs the URL without it, so remove it",
        ));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(VerifyError::invalid_config(format!(
            "the notification URL contains whitespace or control characters, which no URL has; {EXPECTED_URL}"
        )));
    }
    let Some((_, rest)) = split_scheme(url) else {
        return Err(VerifyError::invalid_config(format!(
            "the notification URL does not start with `https://` or `http://`; {EXPECTED_URL}"
        )));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(VerifyError::invalid_config(format!(
            "the notification URL has no host after its scheme; {EXPECTED_URL}"
        )));
    }
    Ok(())
}

/// Splits `url` after `https://` or `http://` (in any case): returns whether it was
/// `https`, and the rest.
fn split_scheme(url: &str) -> Option<(bool, &str)> {
    [("https://", true), ("http://", false)]
        .into_iter()
        .find_map(|(scheme, https)| {
            let head = url.get(..scheme.len())?;
            head.eq_ignore_ascii_case(scheme)
                .then(|| (https, &url[scheme.len()..]))
        })
}

/// The URLs a subscription most often has instead of the configured `url`: the other
/// scheme, the other trailing slash, and both; each with how it differs.
fn url_variants(url: &str) -> Vec<(String, &'static str)> {
    let Some((https, rest)) = split_scheme(url) else {
        return Vec::new();
    };
    let other_scheme = format!("{}{rest}", if https { "http://" } else { "https://" });
    let both = toggle_trailing_slash(&other_scheme);
    vec![
        (toggle_trailing_slash(url), "in the trailing slash"),
        (other_scheme, "in the scheme"),
        (both, "in the scheme and the trailing slash"),
    ]
}

/// Adds a `/` at the end of the URL's path, or removes the one there.
fn toggle_trailing_slash(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let (path, rest) = url.split_at(end);
    match path.strip_suffix('/') {
        Some(without) => format!("{without}{rest}"),
        None => format!("{path}/{rest}"),
    }
}

impl Provider for Square {
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
        let mut kept = KeptHeaders::with_capacity(1);
        let received = SIGNATURE.take_required(headers, &mut kept)?;
        // every key's MAC compared in constant time; the URL is hashed already
        let matched = self.prepared.iter().any(|prepared| {
            let mut mac = prepared.clone();
            mac.update(&body);
            mac.finish_text(MAC.encoding).matches(received)
        });
        if !matched {
            return Err(self.mismatch(received, &body));
        }

        let fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!("the body is not a JSON object ({err}); Square sends JSON events"),
        })?;
        let Some(id) = fields.text(0).filter(|id| !id.is_empty()) else {
            return Err(VerifyError::MissingDedupeKey {
                field: ID_FIELD.to_string(),
            });
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, id);
        let event_type = fields.text(1).map(DeliveryText::from);
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body: body.clone(),
            headers: kept,
            event_type,
            correlation_id: None,
            signed_at: None,
        }))
    }
}

/// Signs notifications exactly as Square does, for tests.
#[derive(Debug, Clone)]
pub struct SquareSigner {
    /// The first key's MAC, having absorbed the notification URL.
    prepared: HmacState,
}

impl SquareSigner {
    /// Signs for `notification_url` with the first of `signature_keys`: Square sends
    /// one signature, made with the subscription's current key. The other keys are
    /// checked but unused, so a receiver's key list can be passed as it is.
    ///
    /// # Errors
    /// As [`Square::new`].
    pub fn new(
        signature_keys: impl Into<Secrets>,
        notification_url: impl AsRef<str>,
    ) -> Result<Self, VerifyError> {
        let notification_url = notification_url.as_ref();
        check_url(notification_url)?;
        let keys = text_hmac_keys(&signature_keys.into())?;
        let first = keys
            .first()
            .ok_or_else(|| VerifyError::invalid_secret("no secret configured"))?;
        let mut prepared = first.start();
        prepared.update(notification_url.as_bytes());
        Ok(Self { prepared })
    }
}

impl Signer for SquareSigner {
    /// Signs `body`; `id` and `timestamp` are unused because Square's `event_id` is in
    /// the body and Square signs no time.
    fn sign(&self, _id: &str, _timestamp: i64, body: &[u8]) -> SignedHeaders {
        let mut mac = self.prepared.clone();
        mac.update(body);
        let mut headers = SignedHeaders::default();
        headers.push(SIGNATURE.label(), mac.finish_text(MAC.encoding).as_str());
        headers
    }
}
