//! Standard Webhooks for hookbox, and the scheme that `hookbox-svix` reuses.
//!
//! | fact | value | source |
//! |---|---|---|
//! | headers | `webhook-id`, `webhook-timestamp` (Unix seconds), `webhook-signature` | [Standard Webhooks spec, "Webhook headers"](https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#webhook-headers-sending-metadata-to-consumers) |
//! | signature list | space-separated `version,<base64>` entries, several during a key rotation | same section |
//! | signed content | `"{webhook-id}.{webhook-timestamp}.{raw body}"`, id and timestamp exactly as sent | [spec, "Signature scheme"](https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#signature-scheme) |
//! | `v1` | HMAC-SHA256, keyed with the base64-decoded part of `whsec_<base64>` | same section |
//! | `v1a` | ed25519 signature (64 bytes), verified with `whpk_<base64 public key>`; signed by the sender's `whsk_` key | same section |
//! | dedupe key | `webhook-id`: "remains the same no matter how many times a webhook that has failed is retried" | [spec, "Webhook metadata"](https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#webhook-metadata) |
//! | tolerance | 300 s both ways ([`VerifyOptions`](hookbox_core::VerifyOptions)); the spec asks for "some allowable tolerance" | [spec, "Verifying signatures"](https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#verifying-signatures) |
//! | retention minimum | 75 h 35 min: the spec's example retry schedule | [spec, "Deliverability and reliability"](https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#deliverability-and-reliability) |
//!
//! A secret without the `whsec_` prefix is base64-decoded whole, as the official
//! libraries do. The body is never parsed to verify, so deliveries carry no event type.
//!
//! Signatures must be canonical base64 (standard alphabet, `=` padding, zero trailing
//! bits): `v1` is compared as text, as the official libraries do, and `v1a` is
//! decoded only from that spelling. Another spelling of a signature never matches
//! (a [`VerifyError::SignatureMismatch`](hookbox_core::VerifyError::SignatureMismatch) whose hint names the spelling); text that is
//! no signature in any spelling is skipped, and a list of nothing else is a
//! [`VerifyError::MalformedHeader`](hookbox_core::VerifyError::MalformedHeader).
//!
//! Svix sends the same scheme under `svix-*` header names. Everything that differs
//! between senders (header names, retention, whether `v1a` is accepted) is data in a
//! [`Scheme`]: [`Standard::with_scheme`] and [`StandardSigner::with_scheme`] take one,
//! and `hookbox-svix` is this crate with Svix's scheme.
//!
//! # Examples
//! The published example delivery verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_standard::Standard;
//!
//! let standard = Standard::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let mut headers = HeaderMap::new();
//! headers.insert("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".parse()?);
//! headers.insert("webhook-timestamp", "1614265330".parse()?);
//! headers.insert("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".parse()?);
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_614_265_330)?;
//! let delivery = standard.verify(&headers, r#"{"test": 2432232314}"#.into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "msg_p5jXN8AQM9LWM0D4loKWxJek");
//! assert_eq!(delivery.signed_at(), Some(now));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`StandardSigner`], here with an HMAC secret and
//! an ed25519 signing key at once; the receiver holds the public key only:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_standard::{Standard, StandardSigner, public_key};
//!
//! let signing_key = "whsk_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
//! let signer = StandardSigner::new(["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", signing_key])?;
//! let now = OffsetDateTime::now_utc();
//! let body = br#"{"type":"user.created"}"#;
//! let signed = signer.sign("msg_1", now.unix_timestamp(), body);
//! assert!(signed.get("webhook-signature").is_some_and(|s| s.starts_with("v1,") && s.contains(" v1a,")));
//!
//! let receiver = Standard::new(public_key(signing_key)?)?;
//! let delivery = receiver.verify(&signed.to_header_map(), body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "msg_1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod keys;
mod scheme;
mod signature;
mod signer;
mod verifier;

use hookbox_core::Retention;
use hookbox_core::support::HeaderSpec;

pub use keys::public_key;
pub use scheme::Scheme;
pub use signature::MAX_ED25519_SIGNATURES;
pub use signer::StandardSigner;
pub use verifier::Standard;

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "standard";

/// Keys must outlive the spec's example retry schedule.
///
/// The schedule's delays (immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h,
/// 24 h) put the last attempt 75 h 35 min 5 s after the first; the floor is that
/// figure to the minute, as hookbox's provider table states it. The schedule is an
/// example, and each delay starts after the previous attempt failed (so timeouts add
/// up): when a sender's real schedule is unknown, keep keys comfortably longer.
pub const MIN_RETENTION: Retention = Retention::from_secs(75 * 3600 + 35 * 60);

/// `webhook-id`: the message id, kept on every retry; the dedupe key.
pub const ID: HeaderSpec = HeaderSpec::new("webhook-id", "webhook-id");
/// `webhook-timestamp`: the attempt's Unix time in seconds, signed.
pub const TIMESTAMP: HeaderSpec = HeaderSpec::new("webhook-timestamp", "webhook-timestamp");
/// `webhook-signature`: space-separated `v1,<base64>` and `v1a,<base64>` entries.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("webhook-signature", "webhook-signature");

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a scheme's `&'static`
// lists must point at statics, not at consts
static ID_HEADER: HeaderSpec = ID;
static TIMESTAMP_HEADER: HeaderSpec = TIMESTAMP;
static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;

/// The Standard Webhooks scheme: `webhook-*` headers, `v1` and `v1a` signatures.
pub const SCHEME: Scheme = Scheme {
    name: NAME,
    id: &[&ID_HEADER],
    timestamp: &[&TIMESTAMP_HEADER],
    signature: &[&SIGNATURE_HEADER],
    min_retention: MIN_RETENTION,
    ed25519: true,
};
