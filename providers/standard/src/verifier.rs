//! The provider: verifying deliveries of one [`Scheme`].

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    MacEncoding, any_key_matches, diagnose_mismatch, non_canonical_hint, parse_unix_seconds,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, KeptHeaders, Provider, Retention, Secrets, VerifiedDelivery,
    VerifyError, VerifyOptions,
};

use crate::keys::{Key, Role, VerifyKeys, decode};
use crate::scheme::Present;
use crate::signature::{self, Received, Spellings};
use crate::{SCHEME, Scheme, scheme};

/// Verifies Standard Webhooks deliveries (or, built [`with_scheme`](Standard::with_scheme),
/// any sender of the scheme).
#[derive(Debug, Clone)]
pub struct Standard {
    scheme: Scheme,
    secrets: Secrets,
    keys: VerifyKeys,
    options: VerifyOptions,
}

impl Standard {
    /// Accepts deliveries signed with any of `secrets`: `whsec_` HMAC secrets (`v1`)
    /// and `whpk_` ed25519 public keys (`v1a`), mixed freely, several during a
    /// rotation.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given, or one is blank,
    /// contains whitespace, is not base64 after its prefix or decodes to nothing, or is
    /// a `whpk_` key that is not a valid 32-byte ed25519 public key.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Self::with_scheme(SCHEME, secrets)
    }

    /// Accepts deliveries of another sender of the scheme, such as Svix.
    ///
    /// # Errors
    /// As [`Standard::new`]; `whpk_` keys are refused when the scheme has no `v1a`.
    pub fn with_scheme(scheme: Scheme, secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = secrets.into();
        Ok(Self {
            keys: VerifyKeys::new(&scheme, &secrets)?,
            scheme,
            secrets,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }

    /// Returns the scheme this provider verifies.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// Explains why no key matched.
    fn mismatch_hint(
        &self,
        received: &Received<'_>,
        spellings: Spellings,
        id: &str,
        timestamp: &str,
        body: &[u8],
    ) -> String {
        if !spellings.v1_any && self.keys.ed25519.is_empty() {
            return "the list holds only `v1a` (ed25519) signatures and no `whpk_` public key is configured; add the sender's `whpk_` key".to_string();
        }
        if received.v1a.is_empty() && self.keys.hmac.is_empty() {
            return "the list holds only `v1` (HMAC) signatures and no `whsec_` secret is configured; add the endpoint's `whsec_` secret".to_string();
        }
        if let Some(spelling) = spellings.non_canonical
            && !spellings.v1_canonical
            && received.v1a.is_empty()
        {
            return non_canonical_hint(self.scheme.name, spelling, MAC.canonical());
        }
        // a secret with whitespace never gets here (it is an InvalidSecret when the
        // provider is built), so the hint is about the body or the wrong secret
        diagnose_mismatch(&self.secrets, body, |candidate, body| {
            let mut keys = VerifyKeys::default();
            match decode(&self.scheme, candidate, Role::Verify) {
                Ok(Key::Hmac(key)) => keys.hmac.push(key),
                Ok(Key::Public(key)) => keys.ed25519.push(key),
                Ok(Key::Signing(_)) | Err(_) => return false,
            }
            matches(&keys, received, id, timestamp, body)
        })
    }
}

/// How `v1` signatures are written: compared as canonical base64 text, as the official
/// libraries compare them.
const MAC: MacEncoding = MacEncoding::Base64;

/// Returns `true` when any key verifies any signature over `"{id}.{timestamp}.{body}"`.
fn matches(
    keys: &VerifyKeys,
    received: &Received<'_>,
    id: &str,
    timestamp: &str,
    body: &[u8],
) -> bool {
    // the id and timestamp are signed as the header text, never re-formatted
    let parts = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
    if any_key_matches(&keys.hmac, &parts, MAC, || received.v1()) {
        return true;
    }
    if keys.ed25519.is_empty() || received.v1a.is_empty() {
        return false;
    }
    // ed25519 signs one contiguous message; build it once for every key
    let message = parts.concat();
    keys.ed25519.iter().any(|key| {
        received
            .v1a
            .iter()
            .any(|signature| key.verify_strict(&message, signature).is_ok())
    })
}

impl Provider for Standard {
    fn name(&self) -> &'static str {
        self.scheme.name
    }

    fn min_retention(&self) -> Retention {
        self.scheme.min_retention
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.options.check_body(&body)?;
        self.scheme.scan(headers, |id, timestamp, signature| {
            let mut kept = KeptHeaders::with_capacity(3);
            let id = scheme::require(id, &mut kept)?;
            let timestamp = scheme::require(timestamp, &mut kept)?;
            let signature = scheme::require(signature, &mut kept)?;
            self.verify_found(body, now, kept, &id, &timestamp, &signature)
        })
    }
}

impl Standard {
    /// Verifies a delivery whose headers were found.
    fn verify_found(
        &self,
        body: Bytes,
        now: OffsetDateTime,
        kept: KeptHeaders,
        id: &Present<'_>,
        timestamp: &Present<'_>,
        signature: &Present<'_>,
    ) -> Result<VerifiedDelivery, VerifyError> {
        let signed_unix = parse_unix_seconds(timestamp.spec.label(), timestamp.value)?;
        let label = signature.spec.label();
        let received = signature::parse(label, signature.value, self.scheme.ed25519)?;

        if !matches(&self.keys, &received, id.value, timestamp.value, &body) {
            let spellings = signature::check_spellings(label, &received, self.scheme.ed25519)?;
            let hint = self.mismatch_hint(&received, spellings, id.value, timestamp.value, &body);
            return Err(VerifyError::SignatureMismatch { hint });
        }
        let signed_at = self.options.check_timestamp(signed_unix, now)?;

        let name = self.scheme.name;
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key: DedupeKey::new(self.options.source_or(name), name, id.value),
            body,
            headers: kept,
            event_type: None,
            correlation_id: None,
            signed_at: Some(signed_at),
        }))
    }
}
