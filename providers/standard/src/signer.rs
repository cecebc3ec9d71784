//! Signing deliveries as a sender of the scheme does.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer as _;
use hookbox_core::{Secrets, SignedHeaders, Signer, VerifyError};

use crate::keys::{Key, Role, decode_all};
use crate::{SCHEME, Scheme, scheme};

/// Signs deliveries exactly as a Standard Webhooks sender does, for tests.
///
/// Every secret given signs, one entry each in one space-separated header, the way a
/// sender signs during a key rotation: `whsec_` secrets give `v1,<base64>` entries and
/// `whsk_` ed25519 signing keys give `v1a,<base64>` entries.
#[derive(Clone)]
pub struct StandardSigner {
    scheme: Scheme,
    keys: Vec<SignKey>,
}

#[derive(Clone)]
enum SignKey {
    Hmac(hookbox_core::support::HmacKey),
    Ed25519(ed25519_dalek::SigningKey),
}

impl StandardSigner {
    /// Signs with every one of `secrets`: `whsec_` HMAC secrets and `whsk_` ed25519
    /// signing keys (a 32-byte seed or a 64-byte seed and public key, base64).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given, or one is blank,
    /// contains whitespace, does not decode, or is a `whpk_` public key.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Self::with_scheme(SCHEME, secrets)
    }

    /// Signs as another sender of the scheme, with its header spellings.
    ///
    /// # Errors
    /// As [`StandardSigner::new`]; `whsk_` keys are refused when the scheme has no `v1a`.
    pub fn with_scheme(scheme: Scheme, secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let keys = decode_all(&scheme, &secrets.into(), Role::Sign)?
            .into_iter()
            .filter_map(|key| match key {
                Key::Hmac(key) => Some(SignKey::Hmac(key)),
                Key::Signing(key) => Some(SignKey::Ed25519(key)),
                // `decode` refuses a public key when signing
                Key::Public(_) => None,
            })
            .collect();
        Ok(Self { scheme, keys })
    }
}

impl Signer for StandardSigner {
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let timestamp = timestamp.to_string();
        let parts = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
        let entries: Vec<String> = self
            .keys
            .iter()
            .map(|key| match key {
                SignKey::Hmac(key) => format!("v1,{}", BASE64.encode(key.sign(&parts))),
                SignKey::Ed25519(key) => {
                    let signature = key.sign(&parts.concat());
                    format!("v1a,{}", BASE64.encode(signature.to_bytes()))
                }
            })
            .collect();

        let mut headers = SignedHeaders::default();
        for (family, value) in [
            (self.scheme.id, id.to_string()),
            (self.scheme.timestamp, timestamp),
            (self.scheme.signature, entries.join(" ")),
        ] {
            if !family.is_empty() {
                headers.push(scheme::label(family), value);
            }
        }
        headers
    }
}

impl fmt::Debug for StandardSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StandardSigner")
            .field("scheme", &self.scheme.name)
            .field("keys", &format_args!("[<redacted>; {}]", self.keys.len()))
            .finish()
    }
}
