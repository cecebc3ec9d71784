//! The one error type of verification.

use std::time::Duration;

/// Why a delivery failed verification.
///
/// The first nine variants map one-to-one to the error kinds of the `hookbox verify`
/// command-line contract ([`VerifyError::kind`]); [`VerifyError::BodyTooLarge`] is the
/// edge's size limit, which the command line does not apply, and
/// [`VerifyError::Handshake`] is what `verify` says of a handshake, which
/// [`Provider::verify_request`](crate::Provider::verify_request) answers instead. Every variant is the
/// sender's fault or a configuration mistake, never a transient failure: retrying the
/// same bytes gives the same answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A header the provider always sends is absent (or empty).
    #[error(
        "missing header `{header}`: the provider always sends it; check that a proxy did not strip it"
    )]
    MissingHeader {
        /// The header name, as the provider documents it.
        header: String,
    },
    /// A header is present but cannot be parsed, or carries no signature of the
    /// supported scheme.
    #[error("malformed header `{header}`: {reason}")]
    MalformedHeader {
        /// The header name, as the provider documents it.
        header: String,
        /// What is wrong with the value and what the provider sends instead.
        reason: String,
    },
    /// A configured secret cannot be used (blank, or not the encoding the provider uses).
    #[error("invalid secret: {reason}")]
    InvalidSecret {
        /// What is wrong with the secret.
        reason: String,
    },
    /// The provider's configuration other than its secret cannot be used: a public
    /// URL that is not an absolute `http(s)://` URL (Twilio, Square), or a signature
    /// scheme that describes something impossible.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with the configuration.
        reason: String,
    },
    /// No configured secret produced any of the signatures in the request.
    #[error("signature mismatch: {hint}")]
    SignatureMismatch {
        /// The most likely cause, found by trying the usual mistakes.
        hint: String,
    },
    /// The signed timestamp is older than the tolerance allows.
    #[error(
        "timestamp too old: signed {age_secs} s ago, tolerance is {tolerance_secs} s; this is a replay of an old delivery or this machine's clock is {skew_secs} s ahead of the sender's"
    )]
    TimestampTooOld {
        /// How many seconds before `now` the delivery was signed.
        age_secs: u64,
        /// The configured tolerance in seconds.
        tolerance_secs: u64,
        /// How far outside the window the timestamp is.
        skew_secs: u64,
    },
    /// The signed timestamp is further in the future than the tolerance allows.
    #[error(
        "timestamp in the future: signed {ahead_secs} s after now, tolerance is {tolerance_secs} s; this machine's clock is {skew_secs} s behind the sender's (check NTP)"
    )]
    TimestampInFuture {
        /// How many seconds after `now` the delivery was signed.
        ahead_secs: u64,
        /// The configured tolerance in seconds.
        tolerance_secs: u64,
        /// How far outside the window the timestamp is.
        skew_secs: u64,
    },
    /// The delivery verified but carries no stable id to deduplicate on.
    #[error(
        "missing dedupe key: {field} is absent or not a string; without it retries cannot be recognised"
    )]
    MissingDedupeKey {
        /// Where the provider puts its delivery id.
        field: String,
    },
    /// The body is not what the provider sends (empty, or not JSON where JSON is required).
    #[error("malformed body: {reason}")]
    MalformedBody {
        /// What is wrong with the body.
        reason: String,
    },
    /// The request is a handshake (Slack's `url_verification`, Discord's `PING`, …),
    /// not an event: [`Provider::verify`](crate::Provider::verify) has no event to
    /// return. Call [`Provider::verify_request`](crate::Provider::verify_request),
    /// which returns the reply the provider expects.
    #[error(
        "the request is a `{handshake}` handshake, not an event; answer it through Provider::verify_request"
    )]
    Handshake {
        /// The provider's name for the handshake.
        handshake: String,
    },
    /// The body is larger than the configured limit; nothing was verified.
    #[error("body too large: {len} bytes, the limit is {limit} bytes")]
    BodyTooLarge {
        /// The body's length in bytes.
        len: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
}

impl VerifyError {
    /// Returns the stable, machine-readable kind used by `hookbox verify`.
    ///
    /// # Examples
    /// ```
    /// use hookbox_core::VerifyError;
    /// let err = VerifyError::MissingHeader { header: "Stripe-Signature".into() };
    /// assert_eq!(err.kind(), "missing_header");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MissingHeader { .. } => "missing_header",
            Self::MalformedHeader { .. } => "malformed_header",
            Self::InvalidSecret { .. } => "invalid_secret",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::SignatureMismatch { .. } => "signature_mismatch",
            Self::TimestampTooOld { .. } => "timestamp_too_old",
            Self::TimestampInFuture { .. } => "timestamp_in_future",
            Self::MissingDedupeKey { .. } => "missing_dedupe_key",
            Self::MalformedBody { .. } => "malformed_body",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::Handshake { .. } => "handshake",
        }
    }

    /// Returns the HTTP status an edge should answer with.
    ///
    /// The sender's mistakes are 4xx so that a provider never retries a bad request
    /// forever; [`VerifyError::InvalidSecret`] is the receiver's own misconfiguration,
    /// (as is [`VerifyError::InvalidConfig`]), so it is a 500: the delivery was not stored and the sender should retry once the
    /// secret is fixed.
    pub fn http_status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            Self::MissingHeader { .. }
            | Self::MalformedHeader { .. }
            | Self::MissingDedupeKey { .. }
            | Self::MalformedBody { .. }
            | Self::Handshake { .. } => StatusCode::BAD_REQUEST,
            Self::SignatureMismatch { .. }
            | Self::TimestampTooOld { .. }
            | Self::TimestampInFuture { .. } => StatusCode::UNAUTHORIZED,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::InvalidSecret { .. } | Self::InvalidConfig { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// Builds a [`VerifyError::MalformedHeader`].
    pub fn malformed(header: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::MalformedHeader {
            header: header.into(),
            reason: reason.into(),
        }
    }

    /// Builds a [`VerifyError::InvalidSecret`].
    pub fn invalid_secret(reason: impl Into<String>) -> Self {
        Self::InvalidSecret {
            reason: reason.into(),
        }
    }

    /// Builds a [`VerifyError::InvalidConfig`].
    pub fn invalid_config(reason: impl Into<String>) -> Self {
        Self::InvalidConfig {
            reason: reason.into(),
        }
    }

    /// Builds the timestamp error for a signed time outside `tolerance` of `now`,
    /// or returns `None` when it is inside (windows are inclusive at both ends).
    pub fn outside_window(signed_unix: i64, now_unix: i64, tolerance: Duration) -> Option<Self> {
        let tolerance_secs = tolerance.as_secs();
        // i128: a hostile timestamp near i64::MIN/MAX must not overflow
        let age = i128::from(now_unix) - i128::from(signed_unix);
        let clamp = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
        if age > i128::from(tolerance_secs) {
            let age_secs = clamp(age);
            Some(Self::TimestampTooOld {
                age_secs,
                tolerance_secs,
                skew_secs: age_secs - tolerance_secs,
            })
        } else if -age > i128::from(tolerance_secs) {
            let ahead_secs = clamp(-age);
            Some(Self::TimestampInFuture {
                ahead_secs,
                tolerance_secs,
                skew_secs: ahead_secs - tolerance_secs,
            })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_is_inclusive_in_both_directions() {
        let tol = Duration::from_secs(300);
        assert_eq!(VerifyError::outside_window(1000, 1300, tol), None);
        assert_eq!(VerifyError::outside_window(1300, 1000, tol), None);
        assert_eq!(
            VerifyError::outside_window(1000, 1301, tol).map(|e| e.kind()),
            Some("timestamp_too_old")
        );
        assert_eq!(
            VerifyError::outside_window(1301, 1000, tol).map(|e| e.kind()),
            Some("timestamp_in_future")
        );
    }

    #[test]
    fn extreme_timestamps_do_not_overflow() {
        let tol = Duration::from_secs(300);
        let err = VerifyError::outside_window(i64::MIN, i64::MAX, tol).unwrap();
        assert_eq!(err.kind(), "timestamp_too_old");
        let err = VerifyError::outside_window(i64::MAX, i64::MIN, tol).unwrap();
        assert_eq!(err.kind(), "timestamp_in_future");
    }

    #[test]
    fn skew_is_the_distance_outside_the_window() {
        let err = VerifyError::outside_window(0, 412, Duration::from_secs(300)).unwrap();
        assert!(err.to_string().contains("clock is 112 s ahead"), "{err}");
    }
}
