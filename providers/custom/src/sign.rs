//! [`CustomSigner`]: signs deliveries as the provider a [`Scheme`] describes does.

use hookbox_core::{Secrets, SignedHeaders, Signer, VerifyError};

use crate::kinds::{Source, Unit};
use crate::mac::{Macs, Signed};
use crate::names::intern;
use crate::scheme::Scheme;

/// Signs deliveries exactly as the provider a [`Scheme`] describes does, for tests
/// and `hookbox sign`.
///
/// [`Signer::sign`] puts `id` in the id header and `timestamp` (Unix seconds,
/// written in the scheme's unit) in the timestamp header, when the scheme reads them
/// from headers. A value the scheme reads from the body cannot be put there: the
/// body must already hold it, and the `id` or `timestamp` argument is then unused.
/// With a separator, the header carries one signature per secret (as during a
/// rotation); without one, the signer takes exactly one secret.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_core::{Retention, Signer};
/// use hookbox_custom::{Algorithm, CustomSigner, Encoding, Scheme, Source, Unit};
///
/// let scheme = Scheme::builder("acme")
///     .signature("Acme-Signature", Algorithm::Sha256, Encoding::Hex)
///     .prefix("v1=")
///     .separator(',')
///     .signed("{timestamp}.{body}")
///     .id(Source::header("Acme-Delivery"))
///     .timestamp(Source::header("Acme-Timestamp"), Unit::Milliseconds)
///     .tolerance(Duration::from_secs(300))
///     .retention(Retention::from_days(3))
///     .build()?;
/// let signer = CustomSigner::new(scheme, ["old-secret", "new-secret"])?;
/// let headers = signer.sign("dlv_1", 1_700_000_000, b"{}");
/// assert_eq!(headers.get("acme-delivery"), Some("dlv_1"));
/// assert_eq!(headers.get("acme-timestamp"), Some("1700000000000"));
/// assert_eq!(headers.get("acme-signature").map(|v| v.matches("v1=").count()), Some(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CustomSigner {
    scheme: Scheme,
    signature: &'static str,
    id: Option<&'static str>,
    timestamp: Option<(&'static str, Unit)>,
    event_type: Option<(&'static str, String)>,
    macs: Macs,
}

impl CustomSigner {
    /// Signs with every one of `secrets` (each used as text).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank;
    /// [`VerifyError::InvalidConfig`] when several are given to a scheme without a
    /// separator, whose header carries one signature.
    pub fn new(scheme: Scheme, secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = secrets.into();
        let macs = Macs::new(&scheme, &secrets)?;
        if scheme.separator.is_none() && macs.len() > 1 {
            return Err(VerifyError::invalid_config(format!(
                "{} sends one signature per request (the scheme has no separator): sign with one secret",
                scheme.name
            )));
        }
        let header = |source: Option<&Source>| match source {
            Some(Source::Header(name)) => Some(intern(name)),
            _ => None,
        };
        Ok(Self {
            signature: intern(&scheme.signature_header),
            id: header(Some(&scheme.id)),
            timestamp: scheme
                .timestamp
                .as_ref()
                .and_then(|(source, unit)| Some((header(Some(source))?, *unit))),
            event_type: None,
            macs,
            scheme,
        })
    }

    /// Sends `event_type` in the event type header, when the scheme reads the event
    /// type from a header (otherwise the body holds it and this is unused).
    pub fn event_type(mut self, event_type: impl Into<String>) -> Self {
        if let Some(Source::Header(name)) = &self.scheme.event_type {
            self.event_type = Some((intern(name), event_type.into()));
        }
        self
    }
}

impl Signer for CustomSigner {
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let timestamp = match self.timestamp {
            Some((_, Unit::Milliseconds)) => timestamp.saturating_mul(1000).to_string(),
            _ => timestamp.to_string(),
        };
        let signed = Signed {
            body,
            timestamp: &timestamp,
            id,
        };
        let prefix = self.scheme.prefix.as_deref().unwrap_or_default();
        let mut value = String::new();
        for index in 0..self.macs.len() {
            if let (Some(separator), true) = (self.scheme.separator, index > 0) {
                value.push(separator);
            }
            value.push_str(prefix);
            value.push_str(self.macs.text(index, &signed).as_str());
        }
        let mut headers = SignedHeaders::default();
        if let Some(name) = self.id {
            headers.push(name, id);
        }
        if let Some((name, _)) = self.timestamp {
            headers.push(name, timestamp);
        }
        if let Some((name, event_type)) = &self.event_type {
            headers.push(name, event_type.clone());
        }
        headers.push(self.signature, value);
        headers
    }
}
