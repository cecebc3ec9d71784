//! Zoom webhook events for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `x-zm-signature: v0=<hex>` | [Verify webhook events](https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events) |
//! | signed content | `"v0:{x-zm-request-timestamp}:{raw body}"`, HMAC-SHA256 keyed with the app's webhook secret token as text, lower-case hex | same section |
//! | timestamp | `x-zm-request-timestamp`, Unix seconds; Zoom publishes no window, 300 s either way here | same section |
//! | dedupe key | Zoom sends no delivery id: `{event}:{event_ts}` from the body (`event_ts` is the event's time in milliseconds, the same on every retry) | [Webhook payload](https://developers.zoom.us/docs/api/webhooks/#webhook-structure) |
//! | handshake | `endpoint.url_validation` (on setup and every 72 hours): answered 200 JSON `{"plainToken":…,"encryptedToken":…}`, the encrypted token being the hex HMAC-SHA256 of the plain token keyed with the secret token | [Validate your webhook endpoint](https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint) |
//! | retention minimum | 2 hours: Zoom retries three times, 5, 20 and 60 minutes apart (85 minutes) | [Webhook delays](https://devsupport.zoom.us/hc/en-us/articles/360059893812-Webhook-delays) |
//!
//! Verification checks, in order: the body size, the headers' shapes, the signature
//! over the raw bytes (the validation request is signed too), the timestamp window,
//! then the body, which must be a JSON object ([`VerifyError::MalformedBody`]
//! otherwise):
//! - `event` `endpoint.url_validation` is a handshake ([`Verified::Handshake`]),
//!   answered with the secret that verified its signature (during a rotation, the one
//!   Zoom signs with); never stored;
//! - any other body is an event: without a string `event` and a number (or string)
//!   `event_ts` it is [`VerifyError::MissingDedupeKey`].
//!
//! # Examples
//! ```
//! use hookbox_core::{Provider, Signer, Verified, time::OffsetDateTime};
//! use hookbox_zoom::{Zoom, ZoomSigner};
//!
//! let zoom = Zoom::new("wXyWgWXUSDuaBJRUVEzYhg")?;
//! let signer = ZoomSigner::new("wXyWgWXUSDuaBJRUVEzYhg")?;
//! let now = OffsetDateTime::now_utc();
//!
//! let body = br#"{"event":"meeting.started","payload":{"object":{"id":"1234567890"}},"event_ts":1626230691572}"#;
//! let headers = signer.sign("", now.unix_timestamp(), body).to_header_map();
//! let delivery = zoom.verify(&headers, body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "meeting.started:1626230691572");
//!
//! let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
//! let headers = signer.sign("", now.unix_timestamp(), body).to_header_map();
//! let Verified::Handshake(reply) = zoom.verify_request(&headers, body.as_slice().into(), now)? else {
//!     panic!("a handshake");
//! };
//! let answer: serde_json::Value = serde_json::from_slice(reply.body())?;
//! assert_eq!(answer["plainToken"], "qgg8vlvZRS6UYooatFL8Aw");
//! assert_eq!(answer["encryptedToken"].as_str().map(str::len), Some(64));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, BodyValue, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, parse_unix_seconds,
    scan, text_hmac_key,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, HandshakeReply, KeptHeaders, Provider, Retention,
    Secrets, SignedHeaders, Signer, Verified, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "zoom";

/// Keys must outlive Zoom's three retries (85 minutes); two hours, with room.
pub const MIN_RETENTION: Retention = Retention::from_hours(2);

/// `x-zm-signature`: `v0=` and the hex HMAC-SHA256 of the signed content.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("x-zm-signature", "x-zm-signature");
/// `x-zm-request-timestamp`: Unix seconds, signed.
pub const TIMESTAMP: HeaderSpec =
    HeaderSpec::new("x-zm-request-timestamp", "x-zm-request-timestamp");

const SCHEME: &str = "v0=";

const MAC: MacFormat = MacFormat {
    provider: "Zoom",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "the value after `v0=` is not 64 hex digits",
};

const HANDSHAKE: &str = "endpoint.url_validation";

/// The fields read from the body: `event`, `event_ts`, `payload.plainToken`.
const BODY: BodyKeys = BodyKeys::new(&[&["event"], &["event_ts"], &["payload", "plainToken"]]);
const EVENT: usize = 0;
const EVENT_TS: usize = 1;
const PLAIN_TOKEN: usize = 2;

static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static TIMESTAMP_HEADER: HeaderSpec = TIMESTAMP;

/// Verifies Zoom webhook events and answers their URL validation.
#[derive(Debug, Clone)]
pub struct Zoom {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Zoom {
    /// Accepts events signed with any of `secrets`, each an app's webhook secret token
    /// (several during a rotation).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

impl Provider for Zoom {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    /// Verifies an event; a URL validation is [`VerifyError::Handshake`] (use
    /// [`Provider::verify_request`]).
    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        match self.verify_request(headers, body, now)? {
            Verified::Event(delivery) => Ok(delivery),
            Verified::Handshake(reply) => Err(VerifyError::Handshake {
                handshake: reply.kind().to_string(),
            }),
        }
    }

    fn verify_request(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<Verified, VerifyError> {
        self.options.check_body(&body)?;
        let [signature, timestamp] = scan(headers, [&SIGNATURE_HEADER, &TIMESTAMP_HEADER]);
        let mut kept = KeptHeaders::with_capacity(2);
        let signature = signature.take_required(&mut kept)?;
        let timestamp_text = timestamp.take_required(&mut kept)?;
        let hex = signature.strip_prefix(SCHEME).ok_or_else(|| {
            VerifyError::malformed(SIGNATURE.label(), "expected `v0=<64 hex digits>`")
        })?;
        let timestamp = parse_unix_seconds(TIMESTAMP.label(), timestamp_text)?;

        // the key that matched answers a URL validation: find it rather than ask
        // whether any matched
        let prefix = signed_prefix(timestamp_text);
        let matched = self.keys.keys().iter().find(|key| {
            let [v0, t, colon] = prefix;
            key.sign_text(&[v0, t, colon, &body], MAC.encoding)
                .matches(hex)
        });
        let Some(key) = matched else {
            return Err(self
                .keys
                .mismatch(SIGNATURE.label(), &prefix, &body, || std::iter::once(hex)));
        };
        let signed_at = self.options.check_timestamp(timestamp, now)?;

        let fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!("the body is not a JSON object ({err}); Zoom sends JSON events"),
        })?;
        let event = fields.text(EVENT);
        if event == Some(HANDSHAKE) {
            let Some(plain) = fields.text(PLAIN_TOKEN) else {
                return Err(VerifyError::MalformedBody {
                    reason: "an `endpoint.url_validation` without a string `payload.plainToken`"
                        .to_string(),
                });
            };
            let encrypted = key.sign_text(&[plain.as_bytes()], MacEncoding::LowerHex);
            let reply = serde_json::json!({
                "plainToken": plain,
                "encryptedToken": encrypted.as_str(),
            });
            return Ok(Verified::Handshake(HandshakeReply::json(
                HANDSHAKE,
                reply.to_string(),
            )));
        }
        let event_ts = fields.get(EVENT_TS).map(BodyValue::as_str);
        let (Some(event), Some(event_ts)) = (event.filter(|e| !e.is_empty()), event_ts) else {
            return Err(VerifyError::MissingDedupeKey {
                field: "event and event_ts".to_string(),
            });
        };
        let key = DedupeKey::new(
            self.options.source_or(NAME),
            NAME,
            DeliveryText::concat(&[event, ":", event_ts]),
        );
        Ok(Verified::Event(VerifiedDelivery::from_parts(
            DeliveryParts {
                key,
                body: body.clone(),
                headers: kept,
                event_type: Some(DeliveryText::from(event)),
                correlation_id: None,
                signed_at: Some(signed_at),
            },
        )))
    }
}

/// Returns what Zoom signs before the body, `"v0:{timestamp}:"`, with the timestamp
/// as sent.
fn signed_prefix(timestamp: &str) -> [&[u8]; 3] {
    [b"v0:", timestamp.as_bytes(), b":"]
}

/// Signs events exactly as Zoom does, for tests.
#[derive(Debug, Clone)]
pub struct ZoomSigner {
    key: HmacKey,
}

impl ZoomSigner {
    /// Signs with `secret`, an app's webhook secret token.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank.
    pub fn new(secret: &str) -> Result<Self, VerifyError> {
        Ok(Self {
            key: text_hmac_key(secret)?,
        })
    }
}

impl Signer for ZoomSigner {
    /// Signs `body` at `timestamp`; `id` is unused because Zoom sends none.
    fn sign(&self, _id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let t = timestamp.to_string();
        let [v0, t_bytes, colon] = signed_prefix(&t);
        let mac = self
            .key
            .sign_text(&[v0, t_bytes, colon, body], MAC.encoding);
        let mut headers = SignedHeaders::default();
        headers.push(TIMESTAMP.label(), t.clone());
        headers.push(SIGNATURE.label(), format!("{SCHEME}{}", mac.as_str()));
        headers
    }
}
