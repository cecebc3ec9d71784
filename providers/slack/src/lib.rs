//! Slack Events API requests for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `X-Slack-Signature: v0=<hex>` | [Verifying requests from Slack](https://api.slack.com/authentication/verifying-requests-from-slack) |
//! | signed content | `"v0:{X-Slack-Request-Timestamp}:{raw body}"`, HMAC-SHA256 keyed with the app's signing secret as text, lower-case hex | same page; `slack_sdk.signature.SignatureVerifier` |
//! | timestamp | `X-Slack-Request-Timestamp`, Unix seconds; the official verifier refuses more than 5 minutes either way (`abs(now - timestamp) > 60 * 5`), the default here | same page, same verifier |
//! | dedupe key | the body's `event_id` ("a unique identifier for this specific event, globally unique across all workspaces") | [Events API: callback fields](https://api.slack.com/apis/events-api#callback-field) |
//! | retries | `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`, kept on the delivery; three retries: nearly immediately, after 1 minute, after 5 minutes | [Events API: error handling](https://api.slack.com/apis/events-api#retries) |
//! | handshake | `{"type":"url_verification","challenge":…}`, answered 200 `text/plain` with the challenge | [`url_verification`](https://api.slack.com/events/url_verification) |
//! | retention minimum | 1 hour: covers the three retries (about 6 minutes) with room to spare; Slack has no manual resend | same section |
//!
//! Verification checks, in order: the body size, the headers' shapes, the signature
//! over the raw bytes, the timestamp window, then the body, which must be a JSON
//! object ([`VerifyError::MalformedBody`] otherwise):
//! - `type` `url_verification` is a handshake ([`Verified::Handshake`]): the reply is
//!   the `challenge`, as `text/plain`; it is never stored;
//! - `type` `app_rate_limited` (Slack telling the app it is over its event limit,
//!   which has no `event_id`) is acknowledged with an empty 200 and not stored;
//! - anything else is an event: a body without a string `event_id` is
//!   [`VerifyError::MissingDedupeKey`]; the event type is `event.type` (`message`,
//!   `app_mention`, …), or the top-level `type` when there is none.
//!
//! The signature is compared as `v0=<lower-case hex>` text, as the official verifier
//! compares it. Slash commands and interactivity payloads (form-encoded bodies) are
//! not Events API requests: they verify, then fail as a malformed body.
//!
//! # Examples
//! Sign a test event with [`SlackSigner`] and verify it; a `url_verification` comes
//! back as the handshake's reply:
//! ```
//! use hookbox_core::{Provider, Signer, Verified, time::OffsetDateTime};
//! use hookbox_slack::{Slack, SlackSigner};
//!
//! let slack = Slack::new("8f742231b10e8888abcd99yyyzzz85a5")?;
//! let signer = SlackSigner::new("8f742231b10e8888abcd99yyyzzz85a5")?;
//! let now = OffsetDateTime::now_utc();
//!
//! let body = br#"{"type":"event_callback","event":{"type":"app_mention","text":"hi"},"event_id":"Ev08MFMKH6"}"#;
//! let headers = signer.sign("", now.unix_timestamp(), body).to_header_map();
//! let delivery = slack.verify(&headers, body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "Ev08MFMKH6");
//! assert_eq!(delivery.event_type(), Some("app_mention"));
//!
//! let body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
//! let headers = signer.sign("", now.unix_timestamp(), body).to_header_map();
//! let Verified::Handshake(reply) = slack.verify_request(&headers, body.as_slice().into(), now)? else {
//!     panic!("a handshake");
//! };
//! assert_eq!(reply.content_type(), Some("text/plain"));
//! assert_eq!(&reply.body()[..], b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, StatusCode};
use hookbox_core::support::{
    BodyKeys, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, parse_unix_seconds, scan,
    text_hmac_key,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, HandshakeReply, KeptHeaders, Provider, Retention,
    Secrets, SignedHeaders, Signer, Verified, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "slack";

/// Keys must outlive Slack's three retries (about 6 minutes); an hour, with room.
pub const MIN_RETENTION: Retention = Retention::from_hours(1);

/// `X-Slack-Signature`: `v0=` and the hex HMAC-SHA256 of the signed content.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("X-Slack-Signature", "x-slack-signature");
/// `X-Slack-Request-Timestamp`: Unix seconds, signed.
pub const TIMESTAMP: HeaderSpec =
    HeaderSpec::new("X-Slack-Request-Timestamp", "x-slack-request-timestamp");
/// `X-Slack-Retry-Num`: which retry this is (absent on the first attempt).
pub const RETRY_NUM: HeaderSpec = HeaderSpec::new("X-Slack-Retry-Num", "x-slack-retry-num");
/// `X-Slack-Retry-Reason`: why Slack retried (`http_timeout`, `http_error`, …).
pub const RETRY_REASON: HeaderSpec =
    HeaderSpec::new("X-Slack-Retry-Reason", "x-slack-retry-reason");

const SCHEME: &str = "v0=";

/// The MAC after `v0=`: lower-case hex, compared as text as the official verifier does.
const MAC: MacFormat = MacFormat {
    provider: "Slack",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "the value after `v0=` is not 64 hex digits",
};

/// Where the dedupe key lives.
const ID_FIELD: &str = "event_id";

/// The fields read from the body: `type`, `challenge`, `event_id`, `event.type`.
const BODY: BodyKeys = BodyKeys::new(&[&["type"], &["challenge"], &[ID_FIELD], &["event", "type"]]);
const TYPE: usize = 0;
const CHALLENGE: usize = 1;
const EVENT_ID: usize = 2;
const EVENT_TYPE: usize = 3;

static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static TIMESTAMP_HEADER: HeaderSpec = TIMESTAMP;
static RETRY_NUM_HEADER: HeaderSpec = RETRY_NUM;
static RETRY_REASON_HEADER: HeaderSpec = RETRY_REASON;

/// Verifies Slack Events API requests and answers their `url_verification`.
#[derive(Debug, Clone)]
pub struct Slack {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Slack {
    /// Accepts requests signed with any of `secrets`, each an app's signing secret
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

impl Provider for Slack {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    /// Verifies an event; a handshake is [`VerifyError::Handshake`] (use
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
        let [signature, timestamp, retry_num, retry_reason] = scan(
            headers,
            [
                &SIGNATURE_HEADER,
                &TIMESTAMP_HEADER,
                &RETRY_NUM_HEADER,
                &RETRY_REASON_HEADER,
            ],
        );
        let mut kept = KeptHeaders::with_capacity(4);
        let signature = signature.take_required(&mut kept)?;
        let timestamp_text = timestamp.take_required(&mut kept)?;
        retry_num.take(&mut kept)?;
        retry_reason.take(&mut kept)?;

        let hex = signature.strip_prefix(SCHEME).ok_or_else(|| {
            VerifyError::malformed(SIGNATURE.label(), "expected `v0=<64 hex digits>`")
        })?;
        let timestamp = parse_unix_seconds(TIMESTAMP.label(), timestamp_text)?;
        self.keys.verify(
            SIGNATURE.label(),
            &signed_prefix(timestamp_text),
            &body,
            || std::iter::once(hex),
        )?;
        let signed_at = self.options.check_timestamp(timestamp, now)?;

        // only authenticated bytes are read
        let mut fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!(
                "the body is not a JSON object ({err}); the Events API sends JSON (slash commands and interactivity are not Events API requests)"
            ),
        })?;
        match fields.text(TYPE) {
            Some("url_verification") => {
                let Some(challenge) = fields.take_text(CHALLENGE) else {
                    return Err(VerifyError::MalformedBody {
                        reason: "a `url_verification` without a string `challenge`".to_string(),
                    });
                };
                return Ok(Verified::Handshake(HandshakeReply::text(
                    "url_verification",
                    Bytes::copy_from_slice(challenge.as_bytes()),
                )));
            }
            Some("app_rate_limited") => {
                return Ok(Verified::Handshake(HandshakeReply::new(
                    "app_rate_limited",
                    StatusCode::OK,
                    None,
                    Bytes::new(),
                )));
            }
            _ => {}
        }
        // an empty id would make every such event a duplicate of the first
        let Some(id) = fields.text(EVENT_ID).filter(|id| !id.is_empty()) else {
            return Err(VerifyError::MissingDedupeKey {
                field: ID_FIELD.to_string(),
            });
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, id);
        let event_type = fields
            .text(EVENT_TYPE)
            .or_else(|| fields.text(TYPE))
            .map(DeliveryText::from);
        Ok(Verified::Event(VerifiedDelivery::from_parts(
            DeliveryParts {
                key,
                body,
                headers: kept,
                event_type,
                correlation_id: None,
                signed_at: Some(signed_at),
            },
        )))
    }
}

/// Returns what Slack signs before the body, `"v0:{timestamp}:"`, with the timestamp
/// as sent.
fn signed_prefix(timestamp: &str) -> [&[u8]; 3] {
    [b"v0:", timestamp.as_bytes(), b":"]
}

/// Signs requests exactly as Slack does, for tests.
#[derive(Debug, Clone)]
pub struct SlackSigner {
    key: HmacKey,
}

impl SlackSigner {
    /// Signs with `secret`, an app's signing secret.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank.
    pub fn new(secret: &str) -> Result<Self, VerifyError> {
        Ok(Self {
            key: text_hmac_key(secret)?,
        })
    }
}

impl Signer for SlackSigner {
    /// Signs `body` at `timestamp`; `id` is unused because Slack's `event_id` is in
    /// the body.
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
