//! Discord interactions and webhook events for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `X-Signature-Ed25519: <hex>`, an Ed25519 signature (128 lower-case hex digits) | [Security and authorization](https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers); `discord-interactions` `verifyKey` |
//! | signed content | `X-Signature-Timestamp` followed by the raw body, checked with the application's public key (64 hex digits, from the developer portal) | same |
//! | timestamp | `X-Signature-Timestamp`, Unix seconds; Discord's libraries check none, 300 s either way here | (a choice, see `docs/providers.md`) |
//! | dedupe key | an interaction's `id`; a webhook event has none: `{event.type}:{event.timestamp}` | [Interaction object](https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object), [Webhook events](https://discord.com/developers/docs/events/webhook-events#webhook-event-payloads) |
//! | handshakes | an interaction `PING` (`"type":1`) answered 200 `{"type":1}`; a webhook-events `PING` (`"type":0`) answered 204 without a body | same pages |
//! | retention minimum | 1 day: Discord documents no resend window (an interaction is never resent) | (a choice) |
//!
//! Verification checks, in order: the body size, the headers' shapes, the signature
//! over the timestamp and the raw bytes (with every configured key; Ed25519 checked
//! strictly, `verify_strict`), the timestamp window, then the body, which must be a
//! JSON object ([`VerifyError::MalformedBody`] otherwise):
//! - `"type":1` without an `event` is an interaction `PING`, `"type":0` a webhook-events
//!   `PING`: handshakes ([`Verified::Handshake`]), never stored;
//! - `"type":1` with an `event` is a webhook event, keyed `{event.type}:{event.timestamp}`
//!   and typed `event.type` (`APPLICATION_AUTHORIZED`, …);
//! - any other body is an interaction, keyed by its `id` and typed by its `type`
//!   (`APPLICATION_COMMAND`, `MESSAGE_COMPONENT`, …).
//!
//! A missing key is [`VerifyError::MissingDedupeKey`]. The edge answers a stored
//! interaction with its usual JSON, which is not an interaction response: receive
//! webhook events (or deferred interactions) through hookbox, and answer interactions
//! that need an immediate response yourself.
//!
//! # Examples
//! ```
//! use hookbox_core::{Provider, Signer, Verified, time::OffsetDateTime};
//! use hookbox_discord::{Discord, DiscordSigner};
//!
//! let signer = DiscordSigner::new(&"42".repeat(32))?;
//! let discord = Discord::new(signer.public_key_hex())?;
//! let now = OffsetDateTime::now_utc();
//!
//! let ping = br#"{"id":"1","application_id":"2","type":1,"token":"t","version":1}"#;
//! let headers = signer.sign("", now.unix_timestamp(), ping).to_header_map();
//! let Verified::Handshake(reply) = discord.verify_request(&headers, ping.as_slice().into(), now)? else {
//!     panic!("a handshake");
//! };
//! assert_eq!(&reply.body()[..], br#"{"type":1}"#);
//!
//! let command = br#"{"id":"786008729715212338","application_id":"2","type":2,"data":{"name":"blep"},"token":"t","version":1}"#;
//! let headers = signer.sign("", now.unix_timestamp(), command).to_header_map();
//! let delivery = discord.verify(&headers, command.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "786008729715212338");
//! assert_eq!(delivery.event_type(), Some("APPLICATION_COMMAND"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, StatusCode};
use hookbox_core::support::{
    BodyKeys, BodyValue, HeaderSpec, Spelling, hex_spelling, non_canonical_hint,
    parse_unix_seconds, scan,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, HandshakeReply, KeptHeaders, Provider, Retention,
    Secrets, SignedHeaders, Signer, Verified, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "discord";

/// Discord documents no resend window: a day, a choice.
pub const MIN_RETENTION: Retention = Retention::from_days(1);

/// `X-Signature-Ed25519`: the hex Ed25519 signature.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("X-Signature-Ed25519", "x-signature-ed25519");
/// `X-Signature-Timestamp`: Unix seconds, signed.
pub const TIMESTAMP: HeaderSpec = HeaderSpec::new("X-Signature-Timestamp", "x-signature-timestamp");

/// The fields read from the body: `type`, `id`, `event.type`, `event.timestamp`.
const BODY: BodyKeys = BodyKeys::new(&[
    &["type"],
    &["id"],
    &["event", "type"],
    &["event", "timestamp"],
]);
const TYPE: usize = 0;
const ID: usize = 1;
const EVENT_TYPE: usize = 2;
const EVENT_TIMESTAMP: usize = 3;

static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static TIMESTAMP_HEADER: HeaderSpec = TIMESTAMP;

/// Verifies Discord interactions and webhook events and answers their `PING`.
#[derive(Debug, Clone)]
pub struct Discord {
    keys: Vec<VerifyingKey>,
    options: VerifyOptions,
}

/// Decodes `N` bytes of lower-case hex.
fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// Writes bytes as lower-case hex.
fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Discord {
    /// Accepts requests signed by any of `public_keys`, each an application's public
    /// key as the developer portal shows it (64 hex digits).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no key is given, or one is not 64 hex
    /// digits or not a valid Ed25519 public key.
    pub fn new(public_keys: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = public_keys.into();
        if secrets.is_empty() {
            return Err(VerifyError::invalid_secret("no public key configured"));
        }
        let keys = secrets
            .iter()
            .map(|secret| {
                let bytes = decode_hex::<32>(&secret.expose().to_ascii_lowercase()).ok_or_else(|| {
                    VerifyError::invalid_secret(
                        "the public key is not 64 hex digits; copy the application's PUBLIC KEY from the developer portal (not the client secret or the bot token)",
                    )
                })?;
                VerifyingKey::from_bytes(&bytes).map_err(|_| {
                    VerifyError::invalid_secret("the public key is not a valid Ed25519 key")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            keys,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

/// The name of an interaction type, as Discord's documentation spells it.
fn interaction_type(number: &str) -> Option<&'static str> {
    Some(match number {
        "2" => "APPLICATION_COMMAND",
        "3" => "MESSAGE_COMPONENT",
        "4" => "APPLICATION_COMMAND_AUTOCOMPLETE",
        "5" => "MODAL_SUBMIT",
        _ => return None,
    })
}

impl Provider for Discord {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    /// Verifies an event; a `PING` is [`VerifyError::Handshake`] (use
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
        let signature_text = signature.take_required(&mut kept)?;
        let timestamp_text = timestamp.take_required(&mut kept)?;
        let signature = match decode_hex::<64>(signature_text) {
            Some(bytes) => Signature::from_bytes(&bytes),
            None => {
                return Err(match hex_spelling(signature_text, 64) {
                    Spelling::NonCanonical(spelling) => VerifyError::SignatureMismatch {
                        hint: non_canonical_hint("Discord", spelling, "lower-case hex"),
                    },
                    _ => VerifyError::malformed(
                        SIGNATURE.label(),
                        "the signature is not 128 hex digits",
                    ),
                });
            }
        };
        let timestamp = parse_unix_seconds(TIMESTAMP.label(), timestamp_text)?;
        let mut message = Vec::with_capacity(timestamp_text.len() + body.len());
        message.extend_from_slice(timestamp_text.as_bytes());
        message.extend_from_slice(&body);
        if !self
            .keys
            .iter()
            .any(|key| key.verify_strict(&message, &signature).is_ok())
        {
            return Err(VerifyError::SignatureMismatch {
                hint: format!(
                    "no configured public key ({} tried) verifies the signature; check the application's PUBLIC KEY in the developer portal, or the body was changed before verification (parsed and re-serialized, re-encoded, or trimmed)",
                    self.keys.len()
                ),
            });
        }
        let signed_at = self.options.check_timestamp(timestamp, now)?;

        let fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!("the body is not a JSON object ({err}); Discord sends JSON"),
        })?;
        let kind = match fields.get(TYPE) {
            Some(BodyValue::Number(number)) => Some(*number),
            _ => None,
        };
        let event_type = fields.text(EVENT_TYPE);
        let (delivery_id, event_type) = match (kind, event_type) {
            (Some("0"), _) => {
                return Ok(Verified::Handshake(HandshakeReply::new(
                    "PING",
                    StatusCode::NO_CONTENT,
                    None,
                    Bytes::new(),
                )));
            }
            (Some("1"), None) => {
                return Ok(Verified::Handshake(HandshakeReply::json(
                    "PING",
                    r#"{"type":1}"#,
                )));
            }
            (Some("1"), Some(event_type)) => {
                let Some(at) = fields.text(EVENT_TIMESTAMP).filter(|at| !at.is_empty()) else {
                    return Err(VerifyError::MissingDedupeKey {
                        field: "event.timestamp".to_string(),
                    });
                };
                (
                    DeliveryText::concat(&[event_type, ":", at]),
                    Some(event_type),
                )
            }
            (kind, _) => {
                let Some(id) = fields.text(ID).filter(|id| !id.is_empty()) else {
                    return Err(VerifyError::MissingDedupeKey {
                        field: "id".to_string(),
                    });
                };
                (DeliveryText::from(id), kind.and_then(interaction_type))
            }
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, delivery_id);
        Ok(Verified::Event(VerifiedDelivery::from_parts(
            DeliveryParts {
                key,
                body: body.clone(),
                headers: kept,
                event_type: event_type.map(DeliveryText::from),
                correlation_id: None,
                signed_at: Some(signed_at),
            },
        )))
    }
}

/// Signs requests exactly as Discord does, for tests.
#[derive(Debug, Clone)]
pub struct DiscordSigner {
    key: SigningKey,
}

impl DiscordSigner {
    /// Signs with the Ed25519 key whose 32-byte seed is `seed_hex` (64 hex digits).
    /// Give [`DiscordSigner::public_key_hex`] to the receiver.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the seed is not 64 hex digits.
    pub fn new(seed_hex: &str) -> Result<Self, VerifyError> {
        let seed = decode_hex::<32>(&seed_hex.to_ascii_lowercase()).ok_or_else(|| {
            VerifyError::invalid_secret("a Discord signing seed is 64 hex digits")
        })?;
        Ok(Self {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Returns the public key that verifies this signer's requests, as 64 hex digits.
    pub fn public_key_hex(&self) -> String {
        encode_hex(self.key.verifying_key().as_bytes())
    }
}

impl Signer for DiscordSigner {
    /// Signs `body` at `timestamp`; `id` is unused because Discord's ids are in the
    /// body.
    fn sign(&self, _id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let t = timestamp.to_string();
        let mut message = t.clone().into_bytes();
        message.extend_from_slice(body);
        let signature = self.key.sign(&message);
        let mut headers = SignedHeaders::default();
        headers.push(SIGNATURE.label(), encode_hex(&signature.to_bytes()));
        headers.push(TIMESTAMP.label(), t);
        headers
    }
}
