//! Paddle Billing webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]`, one `h1` per secret while a secret is being rotated | [Verify webhook signatures](https://developer.paddle.com/webhooks/signature-verification) |
//! | signed content | `"{ts}:{raw body}"`, HMAC-SHA256 keyed with the notification destination's secret key (`pdl_ntfset_…`) as text, lower-case hex | same page; `paddle-node-sdk` `Webhooks.isSignatureValid`, `paddle-python-sdk` `Verifier` |
//! | timestamp | `ts`, Unix seconds; the SDKs allow 5 seconds (`MAX_VALID_TIME_DIFFERENCE = 5`), the default here, in both directions | same SDKs |
//! | dedupe key | the body's `event_id` (`evt_…`), the same on every retry of the event | [Handle webhook delivery](https://developer.paddle.com/webhooks/respond-to-webhooks) |
//! | retention minimum | 3 days: live notifications are retried 60 times over 3 days (sandbox: 3 times within 15 minutes) | same page |
//!
//! Verification checks, in order: the body size, the header's shape, the signature
//! over the raw bytes (every secret against every `h1`), the timestamp window, then
//! the body, which must be a JSON object ([`VerifyError::MalformedBody`] otherwise)
//! with a string `event_id` ([`VerifyError::MissingDedupeKey`] otherwise). The event
//! type is `event_type` (`transaction.completed`, …), the signed time `occurred_at` is
//! not used (the header's `ts` is).
//!
//! The 5-second default follows the SDKs: a receiver behind a slow queue or with a
//! drifting clock needs a wider [`VerifyOptions::tolerance`].
//!
//! # Examples
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_paddle::{Paddle, PaddleSigner};
//!
//! let secret = "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI";
//! let body = br#"{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed","occurred_at":"2023-08-21T11:57:47.390028Z","notification_id":"ntf_01h8bzam1z32agrxjwhjgqk8w6","data":{"id":"txn_01h8bz"}}"#;
//! let now = OffsetDateTime::now_utc();
//! let headers = PaddleSigner::new(secret)?.sign("", now.unix_timestamp(), body).to_header_map();
//! let delivery = Paddle::new(secret)?.verify(&headers, body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "evt_01h8bzakzx3hm2fmen703n5q45");
//! assert_eq!(delivery.event_type(), Some("transaction.completed"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, parse_unix_seconds,
    text_hmac_keys,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "paddle";

/// Keys must outlive Paddle's 3 days of retries.
pub const MIN_RETENTION: Retention = Retention::from_days(3);

/// The SDKs' window: 5 seconds.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5);

/// `Paddle-Signature`: `ts=<unix seconds>` and one `h1=<hex>` per secret.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("Paddle-Signature", "paddle-signature");

const MAC: MacFormat = MacFormat {
    provider: "Paddle",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "no `h1=` value is 64 hex digits",
};

/// Where the dedupe key lives.
const ID_FIELD: &str = "event_id";

/// The fields read from the body: `event_id`, `event_type`.
const BODY: BodyKeys = BodyKeys::new(&[&[ID_FIELD], &["event_type"]]);

/// Verifies Paddle Billing webhooks.
#[derive(Debug, Clone)]
pub struct Paddle {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Paddle {
    /// Accepts webhooks signed with any of `secrets`, each a notification
    /// destination's secret key (several during a rotation). The tolerance is
    /// [`DEFAULT_TOLERANCE`] (5 s).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default().tolerance(DEFAULT_TOLERANCE),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name); start from
    /// `VerifyOptions::default().tolerance(DEFAULT_TOLERANCE)` to keep the SDKs' window.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

/// Returns the `(name, value)` items of a header: split at `;`, trimmed, and split at
/// their first `=`; items without `=` are skipped.
fn items(value: &str) -> impl Iterator<Item = (&str, &str)> {
    value
        .split(';')
        .filter_map(|item| item.trim().split_once('='))
}

impl Provider for Paddle {
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
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.options.check_body(&body)?;
        let mut kept = KeptHeaders::with_capacity(1);
        let header = SIGNATURE.take_required(headers, &mut kept)?;
        let malformed = |reason: &str| VerifyError::malformed(SIGNATURE.label(), reason);
        let mut timestamp = None;
        let mut h1_entries = 0_usize;
        for (name, value) in items(header) {
            match name {
                "ts" if timestamp.is_some() => {
                    return Err(malformed(
                        "more than one `ts=` timestamp; Paddle sends exactly one",
                    ));
                }
                "ts" => timestamp = Some((value, parse_unix_seconds(SIGNATURE.label(), value)?)),
                "h1" => h1_entries += 1,
                _ => {}
            }
        }
        let Some((ts_text, ts)) = timestamp else {
            return Err(malformed(
                "no `ts=` timestamp; expected `ts=<unix seconds>;h1=<hex>`",
            ));
        };
        if h1_entries == 0 {
            return Err(malformed("no `h1=` signature"));
        }
        self.keys.verify(
            SIGNATURE.label(),
            &[ts_text.as_bytes(), b":"],
            &body,
            || {
                items(header)
                    .filter(|(name, _)| *name == "h1")
                    .map(|(_, value)| value)
            },
        )?;
        let signed_at = self.options.check_timestamp(ts, now)?;

        let fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!("the body is not a JSON object ({err}); Paddle sends JSON events"),
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
            signed_at: Some(signed_at),
        }))
    }
}

/// Signs webhooks exactly as Paddle does, for tests.
#[derive(Debug, Clone)]
pub struct PaddleSigner {
    keys: Vec<HmacKey>,
}

impl PaddleSigner {
    /// Signs with every one of `secrets`: one `h1=` per secret, as during a rotation.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: text_hmac_keys(&secrets.into())?,
        })
    }
}

impl Signer for PaddleSigner {
    /// Signs `body` at `timestamp`; `id` is unused because Paddle's `event_id` is in
    /// the body.
    fn sign(&self, _id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let ts = timestamp.to_string();
        let mut value = format!("ts={ts}");
        for key in &self.keys {
            value.push_str(";h1=");
            value.push_str(
                key.sign_text(&[ts.as_bytes(), b":", body], MAC.encoding)
                    .as_str(),
            );
        }
        let mut headers = SignedHeaders::default();
        headers.push(SIGNATURE.label(), value);
        headers
    }
}
