//! Svix webhooks for hookbox.
//!
//! Svix signs with the Standard Webhooks scheme under its own header names; this crate
//! is [`hookbox_standard`] with Svix's [`SCHEME`].
//!
//! | fact | value | source |
//! |---|---|---|
//! | headers | `svix-id`, `svix-timestamp` (Unix seconds), `svix-signature` (space-separated `v1,<base64>` entries) | [Verifying manually](https://docs.svix.com/receiving/verifying-payloads/how-manual) |
//! | also accepted | `webhook-id`, `webhook-timestamp`, `webhook-signature`, each looked up after its `svix-*` spelling, as Svix's libraries do | [svix-webhooks `rust/src/webhooks.rs`](https://github.com/svix/svix-webhooks/blob/main/rust/src/webhooks.rs) |
//! | signed content | `"{svix-id}.{svix-timestamp}.{raw body}"`, HMAC-SHA256 keyed with the base64-decoded part after `whsec_`, base64 | [Verifying manually](https://docs.svix.com/receiving/verifying-payloads/how-manual) |
//! | dedupe key | `svix-id`: "the same when the same webhook is being resent" | same page |
//! | tolerance | 300 s both ways ([`hookbox_core::VerifyOptions`]), as Svix's libraries | same library |
//! | retention minimum | 27 h 35 min: the last of Svix's automatic attempts | [Retry schedule](https://docs.svix.com/retries) |
//!
//! Only `v1` (HMAC) signatures exist at Svix: a `v1a` entry is an unknown version and
//! `whpk_`/`whsk_` keys are refused. A secret without the `whsec_` prefix is
//! base64-decoded whole, as Svix's libraries do.
//!
//! # Examples
//! Svix's published example verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_svix::Svix;
//!
//! let svix = Svix::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let mut headers = HeaderMap::new();
//! headers.insert("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".parse()?);
//! headers.insert("svix-timestamp", "1614265330".parse()?);
//! headers.insert("svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".parse()?);
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_614_265_330)?;
//! let delivery = svix.verify(&headers, r#"{"test": 2432232314}"#.into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "msg_p5jXN8AQM9LWM0D4loKWxJek");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`SvixSigner`]:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_svix::{Svix, SvixSigner};
//!
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! let now = OffsetDateTime::now_utc();
//! let body = br#"{"type":"invoice.paid"}"#;
//! let headers = SvixSigner::new(secret)?.sign("msg_1", now.unix_timestamp(), body);
//! assert!(headers.get("svix-signature").is_some());
//! let delivery = Svix::new(secret)?.verify(&headers.to_header_map(), body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().to_string(), "svix/svix/msg_1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::HeaderSpec;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Provider, Retention, Secrets, SignedHeaders, Signer, VerifiedDelivery, VerifyError,
    VerifyOptions,
};
use hookbox_standard::{Scheme, Standard, StandardSigner};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "svix";

/// Keys must outlive Svix's retry schedule: attempts immediately, then after 5 s,
/// 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, the last 27 h 35 min 5 s after the first
/// (here to the minute, as hookbox's provider table states it). Each delay starts after
/// the previous attempt failed, and manual resends from the Svix portal have no limit,
/// so keep keys longer when you can.
pub const MIN_RETENTION: Retention = Retention::from_secs(27 * 3600 + 35 * 60);

/// `svix-id`: the message id, the same on every resend; the dedupe key.
pub const ID: HeaderSpec = HeaderSpec::new("svix-id", "svix-id");
/// `svix-timestamp`: the attempt's Unix time in seconds, signed.
pub const TIMESTAMP: HeaderSpec = HeaderSpec::new("svix-timestamp", "svix-timestamp");
/// `svix-signature`: space-separated `v1,<base64>` entries.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("svix-signature", "svix-signature");

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a scheme's `&'static`
// lists must point at statics, not at consts
static SVIX_ID: HeaderSpec = ID;
static SVIX_TIMESTAMP: HeaderSpec = TIMESTAMP;
static SVIX_SIGNATURE: HeaderSpec = SIGNATURE;
static WEBHOOK_ID: HeaderSpec = hookbox_standard::ID;
static WEBHOOK_TIMESTAMP: HeaderSpec = hookbox_standard::TIMESTAMP;
static WEBHOOK_SIGNATURE: HeaderSpec = hookbox_standard::SIGNATURE;

/// Svix's scheme: `svix-*` headers, then `webhook-*`; `v1` signatures only.
pub const SCHEME: Scheme = Scheme {
    name: NAME,
    id: &[&SVIX_ID, &WEBHOOK_ID],
    timestamp: &[&SVIX_TIMESTAMP, &WEBHOOK_TIMESTAMP],
    signature: &[&SVIX_SIGNATURE, &WEBHOOK_SIGNATURE],
    min_retention: MIN_RETENTION,
    ed25519: false,
};

/// Verifies Svix deliveries.
#[derive(Debug, Clone)]
pub struct Svix(Standard);

impl Svix {
    /// Accepts deliveries signed with any of `secrets` (`whsec_…`, several during a
    /// rotation).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given, or one is blank,
    /// contains whitespace, is not base64 after `whsec_` or decodes to nothing, or is a
    /// `whpk_`/`whsk_` key.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Standard::with_scheme(SCHEME, secrets).map(Self)
    }

    /// Replaces the default options (tolerance, body limit, source name).
    pub fn with_options(self, options: VerifyOptions) -> Self {
        Self(self.0.with_options(options))
    }
}

impl Provider for Svix {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn min_retention(&self) -> Retention {
        self.0.min_retention()
    }

    fn options(&self) -> &VerifyOptions {
        self.0.options()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.0.verify(headers, body, now)
    }
}

/// Signs deliveries exactly as Svix does (`svix-*` headers), for tests.
#[derive(Debug, Clone)]
pub struct SvixSigner(StandardSigner);

impl SvixSigner {
    /// Signs with every one of `secrets`, one `v1` entry each, as Svix does while an
    /// endpoint's secret is being rotated.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] as for [`Svix::new`].
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        StandardSigner::with_scheme(SCHEME, secrets).map(Self)
    }
}

impl Signer for SvixSigner {
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        self.0.sign(id, timestamp, body)
    }
}
