//! A provider's signature scheme as data: what is signed, how, and where the delivery
//! id and the timestamp are; validated once, when it is built.

use std::time::Duration;

use hookbox_core::Retention;

#[cfg(doc)]
use crate::error::SchemeError;
use crate::kinds::{Algorithm, Encoding, Source, Unit};
use crate::template::Piece;

/// A provider's signature scheme: an HMAC over a text assembled from the body, a
/// timestamp header, an id header, the URL and literal text, sent in one header
/// (hex or base64, with or without a prefix, one or several signatures), plus where
/// the delivery id, the event type and the timestamp are, and how long the provider
/// resends.
///
/// Built by [`Scheme::builder`] (or `Scheme::from_toml` with the `toml` feature),
/// which refuses a scheme that cannot work, with a [`SchemeError`] saying why. A
/// `Scheme` that exists is valid; [`Custom`](crate::Custom) verifies with it and
/// [`CustomSigner`](crate::CustomSigner) signs with it.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_core::Retention;
/// use hookbox_custom::{Algorithm, Encoding, Scheme, SchemeError, Source, Unit};
///
/// let scheme = Scheme::builder("acme")
///     .signature("Acme-Signature", Algorithm::Sha256, Encoding::Hex)
///     .prefix("v1=")
///     .signed("{id}.{timestamp}.{body}")
///     .id(Source::header("Acme-Delivery"))
///     .timestamp(Source::header("Acme-Timestamp"), Unit::Seconds)
///     .tolerance(Duration::from_secs(300))
///     .retention(Retention::from_days(3))
///     .build()?;
/// assert_eq!(scheme.name(), "acme");
///
/// // the body would not be authenticated
/// let err = Scheme::builder("acme")
///     .signature("Acme-Signature", Algorithm::Sha256, Encoding::Hex)
///     .signed("{id}")
///     .id(Source::header("Acme-Delivery"))
///     .retention(Retention::from_days(3))
///     .build()
///     .unwrap_err();
/// assert_eq!(err, SchemeError::TemplateWithoutBody);
/// # Ok::<(), SchemeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheme {
    pub(crate) name: String,
    pub(crate) signature_header: String,
    pub(crate) algorithm: Algorithm,
    pub(crate) encoding: Encoding,
    pub(crate) prefix: Option<String>,
    pub(crate) separator: Option<char>,
    pub(crate) signed: String,
    pub(crate) pieces: Vec<Piece>,
    pub(crate) id: Source,
    pub(crate) event_type: Option<Source>,
    pub(crate) timestamp: Option<(Source, Unit)>,
    pub(crate) tolerance: Option<Duration>,
    pub(crate) url: Option<String>,
    pub(crate) retention: Retention,
}

impl Scheme {
    /// Returns the provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the signature header's name, as configured.
    pub fn signature_header(&self) -> &str {
        &self.signature_header
    }

    /// Returns the HMAC's hash function.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Returns how the MAC is written.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Returns the text before each MAC (`sha256=`), if any.
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// Returns the character between several signatures in the header, if the
    /// provider sends several.
    pub fn separator(&self) -> Option<char> {
        self.separator
    }

    /// Returns the signed-content template as written (`{timestamp}.{body}`).
    pub fn signed(&self) -> &str {
        &self.signed
    }

    /// Returns where the delivery id (the dedupe key) is read.
    pub fn id(&self) -> &Source {
        &self.id
    }

    /// Returns where the event type is read, if anywhere.
    pub fn event_type(&self) -> Option<&Source> {
        self.event_type.as_ref()
    }

    /// Returns where the timestamp is read and its unit, if the provider sends one.
    pub fn timestamp(&self) -> Option<(&Source, Unit)> {
        self.timestamp
            .as_ref()
            .map(|(source, unit)| (source, *unit))
    }

    /// Returns how far the timestamp may be from now, in either direction; set
    /// exactly when there is a timestamp.
    pub fn tolerance(&self) -> Option<Duration> {
        self.tolerance
    }

    /// Returns the URL the provider signs, set exactly when the template has `{url}`.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Returns how long the provider can resend a delivery: the floor for how long
    /// its dedupe keys are kept.
    pub fn retention(&self) -> Retention {
        self.retention
    }
}
