//! Twitch EventSub webhook messages for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `Twitch-Eventsub-Message-Signature: sha256=<hex>` | [Verifying the event message](https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message) |
//! | signed content | `Twitch-Eventsub-Message-Id` + `Twitch-Eventsub-Message-Timestamp` + raw body, concatenated, HMAC-SHA256 keyed with the subscription's secret as text, lower-case hex | same section |
//! | timestamp | `Twitch-Eventsub-Message-Timestamp`, RFC 3339 with nanoseconds; Twitch says to refuse messages older than 10 minutes; 600 s in both directions here | [Guarding against replay attacks](https://dev.twitch.tv/docs/eventsub/#guarding-against-replay-attacks) |
//! | dedupe key | `Twitch-Eventsub-Message-Id` ("if Twitch resends the message, the message ID will be the same") | [Handling duplicate events](https://dev.twitch.tv/docs/eventsub/#handling-duplicate-events) |
//! | message types | `Twitch-Eventsub-Message-Type`: `notification`, `webhook_callback_verification`, `revocation` | [Handling webhook events](https://dev.twitch.tv/docs/eventsub/handling-webhook-events/) |
//! | handshake | `webhook_callback_verification`: answered 200 `text/plain` with the body's `challenge` | [Responding to a challenge request](https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request) |
//! | retention minimum | 1 day: Twitch documents no resend window; a day covers any resend a receiver answered late, and a replay older than 10 minutes is refused anyway | (a choice, see `docs/providers.md`) |
//!
//! Verification checks, in order: the body size, the headers' shapes (the message
//! type is required; a timestamp that is not RFC 3339 is
//! [`VerifyError::MalformedHeader`]), the signature over the raw bytes, the timestamp
//! window, then:
//! - `webhook_callback_verification` is a handshake ([`Verified::Handshake`]): the
//!   reply is the body's `challenge` as `text/plain` (a body that is not a JSON object
//!   with a string `challenge` is [`VerifyError::MalformedBody`]); never stored;
//! - `notification` is an event whose type is `Twitch-Eventsub-Subscription-Type`
//!   (`channel.follow`, …);
//! - `revocation` is stored as an event whose type is `revocation` (Twitch revoked
//!   the subscription; the body says why), and any other message type as an event of
//!   that type.
//!
//! The body of an event is not parsed to verify.
//!
//! # Examples
//! ```
//! use hookbox_core::{Provider, Signer, Verified, time::OffsetDateTime};
//! use hookbox_twitch::{Twitch, TwitchSigner};
//!
//! let twitch = Twitch::new("s3cRe7-s3cRe7")?;
//! let now = OffsetDateTime::now_utc();
//! let body = br#"{"subscription":{"type":"channel.follow"},"event":{"user_id":"1234"}}"#;
//! let signer = TwitchSigner::new("s3cRe7-s3cRe7")?.subscription_type("channel.follow");
//! let headers = signer.sign("befa7b53-d79d-478f-86b9-120f112b044e", now.unix_timestamp(), body);
//! let delivery = twitch.verify(&headers.to_header_map(), body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "befa7b53-d79d-478f-86b9-120f112b044e");
//! assert_eq!(delivery.event_type(), Some("channel.follow"));
//!
//! let challenge = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{}}"#;
//! let signer = TwitchSigner::new("s3cRe7-s3cRe7")?.message_type("webhook_callback_verification");
//! let headers = signer.sign("e76c6bd4", now.unix_timestamp(), challenge).to_header_map();
//! let Verified::Handshake(reply) = twitch.verify_request(&headers, challenge.as_slice().into(), now)? else {
//!     panic!("a handshake");
//! };
//! assert_eq!(&reply.body()[..], b"pogchamp-kappa-360noscope-vohiyo");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, scan, text_hmac_key,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, HandshakeReply, KeptHeaders, Provider, Retention,
    Secrets, SignedHeaders, Signer, Verified, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "twitch";

/// Twitch documents no resend window: a day, a choice (see the crate docs).
pub const MIN_RETENTION: Retention = Retention::from_days(1);

/// Twitch's replay window: "reject any message that is older than 10 minutes".
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(600);

/// `Twitch-Eventsub-Message-Id`: the dedupe key.
pub const MESSAGE_ID: HeaderSpec =
    HeaderSpec::new("Twitch-Eventsub-Message-Id", "twitch-eventsub-message-id");
/// `Twitch-Eventsub-Message-Timestamp`: RFC 3339, signed.
pub const TIMESTAMP: HeaderSpec = HeaderSpec::new(
    "Twitch-Eventsub-Message-Timestamp",
    "twitch-eventsub-message-timestamp",
);
/// `Twitch-Eventsub-Message-Signature`: `sha256=` and the hex HMAC-SHA256.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new(
    "Twitch-Eventsub-Message-Signature",
    "twitch-eventsub-message-signature",
);
/// `Twitch-Eventsub-Message-Type`: `notification`, `webhook_callback_verification`,
/// `revocation`.
pub const MESSAGE_TYPE: HeaderSpec = HeaderSpec::new(
    "Twitch-Eventsub-Message-Type",
    "twitch-eventsub-message-type",
);
/// `Twitch-Eventsub-Message-Retry`: how many times Twitch sent it before.
pub const RETRY: HeaderSpec = HeaderSpec::new(
    "Twitch-Eventsub-Message-Retry",
    "twitch-eventsub-message-retry",
);
/// `Twitch-Eventsub-Subscription-Type`: the event type (`channel.follow`, …).
pub const SUBSCRIPTION_TYPE: HeaderSpec = HeaderSpec::new(
    "Twitch-Eventsub-Subscription-Type",
    "twitch-eventsub-subscription-type",
);

const SCHEME: &str = "sha256=";

const MAC: MacFormat = MacFormat {
    provider: "Twitch",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "the value after `sha256=` is not 64 hex digits",
};

const HANDSHAKE: &str = "webhook_callback_verification";
const NOTIFICATION: &str = "notification";

/// The challenge of a `webhook_callback_verification`.
const CHALLENGE: BodyKeys = BodyKeys::new(&[&["challenge"]]);

static MESSAGE_ID_HEADER: HeaderSpec = MESSAGE_ID;
static TIMESTAMP_HEADER: HeaderSpec = TIMESTAMP;
static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static MESSAGE_TYPE_HEADER: HeaderSpec = MESSAGE_TYPE;
static RETRY_HEADER: HeaderSpec = RETRY;
static SUBSCRIPTION_TYPE_HEADER: HeaderSpec = SUBSCRIPTION_TYPE;

/// Verifies Twitch EventSub webhook messages and answers their challenge.
#[derive(Debug, Clone)]
pub struct Twitch {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Twitch {
    /// Accepts messages signed with any of `secrets`, each the `secret` given when
    /// subscribing (several while subscriptions move to a new one). The tolerance is
    /// [`DEFAULT_TOLERANCE`] (600 s).
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
    /// `VerifyOptions::default().tolerance(DEFAULT_TOLERANCE)` to keep Twitch's window.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

impl Provider for Twitch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    /// Verifies an event; a challenge is [`VerifyError::Handshake`] (use
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
        let [
            id,
            timestamp,
            signature,
            message_type,
            retry,
            subscription_type,
        ] = scan(
            headers,
            [
                &MESSAGE_ID_HEADER,
                &TIMESTAMP_HEADER,
                &SIGNATURE_HEADER,
                &MESSAGE_TYPE_HEADER,
                &RETRY_HEADER,
                &SUBSCRIPTION_TYPE_HEADER,
            ],
        );
        let mut kept = KeptHeaders::with_capacity(6);
        let signature = signature.take_required(&mut kept)?;
        let id = id.take_required(&mut kept)?;
        let timestamp_text = timestamp.take_required(&mut kept)?;
        let message_type = message_type.take_required(&mut kept)?;
        retry.take(&mut kept)?;
        let subscription_type = subscription_type.take(&mut kept)?;

        let hex = signature.strip_prefix(SCHEME).ok_or_else(|| {
            VerifyError::malformed(SIGNATURE.label(), "expected `sha256=<64 hex digits>`")
        })?;
        let signed_at = OffsetDateTime::parse(timestamp_text, &Rfc3339).map_err(|_| {
            VerifyError::malformed(
                TIMESTAMP.label(),
                "the timestamp is not RFC 3339 (Twitch sends `2023-07-19T10:11:12.634234626Z`)",
            )
        })?;
        self.keys.verify(
            SIGNATURE.label(),
            &[id.as_bytes(), timestamp_text.as_bytes()],
            &body,
            || std::iter::once(hex),
        )?;
        self.options
            .check_timestamp(signed_at.unix_timestamp(), now)?;

        let event_type = match message_type {
            HANDSHAKE => {
                let mut fields =
                    CHALLENGE
                        .read(&body)
                        .map_err(|err| VerifyError::MalformedBody {
                            reason: format!(
                                "a challenge request whose body is not a JSON object ({err})"
                            ),
                        })?;
                let Some(challenge) = fields.take_text(0) else {
                    return Err(VerifyError::MalformedBody {
                        reason: "a challenge request without a string `challenge`".to_string(),
                    });
                };
                return Ok(Verified::Handshake(HandshakeReply::text(
                    HANDSHAKE,
                    Bytes::copy_from_slice(challenge.as_bytes()),
                )));
            }
            NOTIFICATION => subscription_type,
            other => Some(other),
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, id);
        Ok(Verified::Event(VerifiedDelivery::from_parts(
            DeliveryParts {
                key,
                body,
                headers: kept,
                event_type: event_type.map(DeliveryText::from),
                correlation_id: None,
                signed_at: Some(signed_at),
            },
        )))
    }
}

/// Signs messages exactly as Twitch does, for tests.
#[derive(Debug, Clone)]
pub struct TwitchSigner {
    key: HmacKey,
    message_type: String,
    subscription_type: String,
}

impl TwitchSigner {
    /// Signs with `secret` as `notification` messages of `channel.follow`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank.
    pub fn new(secret: &str) -> Result<Self, VerifyError> {
        Ok(Self {
            key: text_hmac_key(secret)?,
            message_type: NOTIFICATION.to_string(),
            subscription_type: "channel.follow".to_string(),
        })
    }

    /// Sets `Twitch-Eventsub-Message-Type` (`notification`,
    /// `webhook_callback_verification`, `revocation`).
    pub fn message_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = message_type.into();
        self
    }

    /// Sets `Twitch-Eventsub-Subscription-Type`.
    pub fn subscription_type(mut self, subscription_type: impl Into<String>) -> Self {
        self.subscription_type = subscription_type.into();
        self
    }
}

impl Signer for TwitchSigner {
    /// Signs `body` as message `id` at `timestamp` (written in RFC 3339, as Twitch
    /// does; a timestamp out of the range of dates is written as the Unix epoch).
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let at = OffsetDateTime::from_unix_timestamp(timestamp)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
            .format(&Rfc3339)
            .unwrap_or_default();
        let mac = self
            .key
            .sign_text(&[id.as_bytes(), at.as_bytes(), body], MAC.encoding);
        let mut headers = SignedHeaders::default();
        headers.push(MESSAGE_ID.label(), id);
        headers.push(RETRY.label(), "0");
        headers.push(MESSAGE_TYPE.label(), self.message_type.clone());
        headers.push(SIGNATURE.label(), format!("{SCHEME}{}", mac.as_str()));
        headers.push(TIMESTAMP.label(), at);
        headers.push(SUBSCRIPTION_TYPE.label(), self.subscription_type.clone());
        headers.push("Twitch-Eventsub-Subscription-Version", "1");
        headers
    }
}
