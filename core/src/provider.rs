//! The `Provider` trait and the options every provider shares.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use time::OffsetDateTime;

use crate::{Retention, Verified, VerifiedDelivery, VerifyError};

/// The default signed-timestamp tolerance: 300 s, in both directions, as Stripe's and
/// Svix's libraries use.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The default body size limit: 1 MiB. Stripe, Shopify, GitHub and Svix payloads are
/// far smaller (GitHub caps its own at 25 MB, but a receiver rarely wants those).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// A webhook sender's signature scheme and delivery-id rules.
///
/// Verification is synchronous (pure CPU) and takes `now` as an argument so that
/// timestamp checks are deterministic in tests. The trait is dyn-compatible: a router
/// can hold `Box<dyn Provider>` for several endpoints.
///
/// Implementations check, in this order: the body size limit, the header shapes, the
/// signature over the raw bytes (in constant time, every secret against every
/// signature), the timestamp window, then the body where the dedupe key lives in it.
pub trait Provider: Send + Sync {
    /// Returns the provider's name: `"stripe"`, `"shopify"`, `"github"`, `"svix"`,
    /// `"standard"`.
    fn name(&self) -> &'static str;

    /// Returns how long this provider can resend a delivery, the floor for how long
    /// a store keeps its dedupe keys.
    fn min_retention(&self) -> Retention;

    /// Returns the options this provider verifies with.
    fn options(&self) -> &VerifyOptions;

    /// Verifies `body` (the raw bytes as received) against `headers` at time `now`.
    ///
    /// # Errors
    /// A [`VerifyError`] naming what the sender (or the receiver's configuration) got
    /// wrong; nothing about the delivery should be stored.
    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError>;

    /// Verifies a request that may be a handshake rather than an event.
    ///
    /// Providers that send handshakes (Slack, Twitch, Zoom, Discord) implement it and
    /// answer [`Verified::Handshake`] with the reply the provider expects; their
    /// [`Provider::verify`] refuses a handshake with [`VerifyError::Handshake`]. An
    /// edge calls this method: it answers a handshake at once, stores nothing and runs
    /// no handler. The default wraps [`Provider::verify`], for providers that send
    /// only events.
    ///
    /// # Errors
    /// As [`Provider::verify`]; a handshake is verified like an event where the
    /// provider signs it.
    fn verify_request(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<Verified, VerifyError> {
        self.verify(headers, body, now).map(Verified::Event)
    }
}

/// Options shared by every provider.
///
/// # Examples
/// ```
/// use hookbox_core::VerifyOptions;
/// use std::time::Duration;
/// let options = VerifyOptions::default()
///     .tolerance(Duration::from_secs(600))
///     .max_body_bytes(256 * 1024)
///     .source("billing");
/// assert_eq!(options.tolerance_duration(), Duration::from_secs(600));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    tolerance: Duration,
    max_body_bytes: usize,
    source: Option<String>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            source: None,
        }
    }
}

impl VerifyOptions {
    /// Sets how far a signed timestamp may be from `now`, in either direction.
    /// Ignored by providers that sign no timestamp (Shopify, GitHub).
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Sets the largest body accepted, in bytes.
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body_bytes = limit;
        self
    }

    /// Names the receiving endpoint; dedupe keys are scoped by it. Defaults to the
    /// provider's name. Give each endpoint its own source when one service receives
    /// from several accounts of one provider.
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Returns the timestamp tolerance.
    pub fn tolerance_duration(&self) -> Duration {
        self.tolerance
    }

    /// Returns the body size limit in bytes.
    pub fn body_limit(&self) -> usize {
        self.max_body_bytes
    }

    /// Returns the configured source, or `default` (the provider's name).
    pub fn source_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.source.as_deref().unwrap_or(default)
    }

    /// Rejects a body over the limit.
    ///
    /// # Errors
    /// [`VerifyError::BodyTooLarge`].
    pub fn check_body(&self, body: &[u8]) -> Result<(), VerifyError> {
        if body.len() > self.max_body_bytes {
            return Err(VerifyError::BodyTooLarge {
                len: body.len(),
                limit: self.max_body_bytes,
            });
        }
        Ok(())
    }

    /// Rejects a signed Unix time outside the tolerance of `now` (inclusive window).
    ///
    /// # Errors
    /// [`VerifyError::TimestampTooOld`] or [`VerifyError::TimestampInFuture`].
    pub fn check_timestamp(
        &self,
        signed_unix: i64,
        now: OffsetDateTime,
    ) -> Result<OffsetDateTime, VerifyError> {
        if let Some(err) =
            VerifyError::outside_window(signed_unix, now.unix_timestamp(), self.tolerance)
        {
            return Err(err);
        }
        // inside the window means within `tolerance` of a valid `now`, so in range;
        // a tolerance of centuries could still overflow, so keep the error typed
        OffsetDateTime::from_unix_timestamp(signed_unix)
            .map_err(|_| VerifyError::malformed("timestamp", "timestamp is out of range"))
    }
}

/// Forwards to the boxed provider, so a provider chosen at run time
/// (`Box<dyn Provider>`) goes wherever a concrete one does.
impl<P: Provider + ?Sized> Provider for Box<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn min_retention(&self) -> Retention {
        (**self).min_retention()
    }

    fn options(&self) -> &VerifyOptions {
        (**self).options()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        (**self).verify(headers, body, now)
    }

    fn verify_request(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify_request(headers, body, now)
    }
}

/// Forwards to the shared provider.
impl<P: Provider + ?Sized> Provider for std::sync::Arc<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn min_retention(&self) -> Retention {
        (**self).min_retention()
    }

    fn options(&self) -> &VerifyOptions {
        (**self).options()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        (**self).verify(headers, body, now)
    }

    fn verify_request(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify_request(headers, body, now)
    }
}
