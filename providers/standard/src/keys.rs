//! Turning `whsec_`, `whpk_` and `whsk_` secrets into keys.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{SigningKey, VerifyingKey};
use hookbox_core::support::{BASE64_LENIENT, HmacKey};
use hookbox_core::{Secrets, VerifyError};

use crate::Scheme;

const HMAC_PREFIX: &str = "whsec_";
const PUBLIC_PREFIX: &str = "whpk_";
const SIGNING_PREFIX: &str = "whsk_";

/// One configured secret, decoded.
pub(crate) enum Key {
    /// `v1`: an HMAC-SHA256 key.
    Hmac(HmacKey),
    /// `v1a`, receiving side: an ed25519 public key.
    Public(VerifyingKey),
    /// `v1a`, sending side: an ed25519 signing key.
    Signing(SigningKey),
}

/// Whether a secret is configured to verify or to sign.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Verify,
    Sign,
}

/// The keys a receiver verifies with, by signature version.
#[derive(Debug, Clone, Default)]
pub(crate) struct VerifyKeys {
    pub(crate) hmac: Vec<HmacKey>,
    pub(crate) ed25519: Vec<VerifyingKey>,
}

impl VerifyKeys {
    /// Decodes every secret for verification.
    pub(crate) fn new(scheme: &Scheme, secrets: &Secrets) -> Result<Self, VerifyError> {
        let mut keys = Self::default();
        for key in decode_all(scheme, secrets, Role::Verify)? {
            match key {
                Key::Hmac(key) => keys.hmac.push(key),
                Key::Public(key) => keys.ed25519.push(key),
                // `decode` refuses a signing key when verifying
                Key::Signing(_) => {}
            }
        }
        Ok(keys)
    }
}

/// Decodes every secret, naming the culprit's position when there are several.
pub(crate) fn decode_all(
    scheme: &Scheme,
    secrets: &Secrets,
    role: Role,
) -> Result<Vec<Key>, VerifyError> {
    if secrets.is_empty() {
        return Err(VerifyError::invalid_secret("no secret configured"));
    }
    secrets
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            decode(scheme, secret.expose(), role).map_err(|reason| {
                if secrets.len() > 1 {
                    VerifyError::invalid_secret(format!("secret #{}: {reason}", i + 1))
                } else {
                    VerifyError::invalid_secret(reason)
                }
            })
        })
        .collect()
}

/// Decodes one secret's text; the error is the reason shown to the user.
pub(crate) fn decode(scheme: &Scheme, text: &str, role: Role) -> Result<Key, String> {
    if text.trim().is_empty() {
        return Err("the secret is blank; copy the endpoint's signing secret (`whsec_…`) from the sender's dashboard".into());
    }
    // base64 never contains whitespace, so this is a copy-paste or env-file accident
    if text.chars().any(char::is_whitespace) {
        return Err("the secret contains whitespace (a trailing newline from a file or an environment variable?); remove it".into());
    }
    let name = scheme.name;
    if let Some(encoded) = text.strip_prefix(PUBLIC_PREFIX) {
        if !scheme.ed25519 {
            return Err(format!(
                "`whpk_` public keys verify `v1a` (ed25519) signatures, which {name} does not send; use the endpoint's `whsec_` secret"
            ));
        }
        if role == Role::Sign {
            return Err(
                "a `whpk_` public key cannot sign; sign with the matching `whsk_` key".into(),
            );
        }
        let bytes: [u8; 32] = decode_base64(PUBLIC_PREFIX, encoded)?
            .try_into()
            .map_err(|_| {
                "the part after `whpk_` is not a 32-byte ed25519 public key".to_string()
            })?;
        let key = VerifyingKey::from_bytes(&bytes)
            .map_err(|_| "the part after `whpk_` is not a valid ed25519 public key".to_string())?;
        if key.is_weak() {
            return Err("the `whpk_` key is a small-order point, which proves nothing".into());
        }
        return Ok(Key::Public(key));
    }
    if let Some(encoded) = text.strip_prefix(SIGNING_PREFIX) {
        if !scheme.ed25519 {
            return Err(format!(
                "`whsk_` keys sign `v1a` (ed25519) deliveries, which {name} does not send; use a `whsec_` secret"
            ));
        }
        if role == Role::Verify {
            return Err("`whsk_` is the sender's private signing key; configure the receiver with its `whpk_` public key instead".into());
        }
        return signing_key(encoded).map(Key::Signing);
    }
    let key = match text.strip_prefix(HMAC_PREFIX) {
        Some(encoded) => decode_base64(HMAC_PREFIX, encoded)?,
        // official libraries decode an unprefixed secret whole
        None => BASE64_LENIENT.decode(text).map_err(|_| {
            "the secret has no `whsec_` prefix and is not valid base64 (standard alphabet); copy the whole `whsec_…` value from the sender's dashboard".to_string()
        })?,
    };
    if key.is_empty() {
        return Err("the secret decodes to an empty key".into());
    }
    Ok(Key::Hmac(HmacKey::new(&key)))
}

/// Decodes the base64 after `prefix`, refusing an empty key.
fn decode_base64(prefix: &str, encoded: &str) -> Result<Vec<u8>, String> {
    let bytes = BASE64_LENIENT.decode(encoded).map_err(|_| {
        format!("the part after `{prefix}` is not valid base64 (standard alphabet); copy the whole secret from the sender's dashboard")
    })?;
    if bytes.is_empty() {
        return Err(format!("the part after `{prefix}` is empty"));
    }
    Ok(bytes)
}

/// Decodes a `whsk_` key: a 32-byte seed, or the 64-byte seed and public key that
/// libsodium-style tools export.
fn signing_key(encoded: &str) -> Result<SigningKey, String> {
    let bytes = decode_base64(SIGNING_PREFIX, encoded)?;
    if let Ok(seed) = <[u8; 32]>::try_from(bytes.as_slice()) {
        return Ok(SigningKey::from_bytes(&seed));
    }
    let pair = <[u8; 64]>::try_from(bytes.as_slice()).map_err(|_| {
        "the part after `whsk_` is neither a 32-byte ed25519 seed nor a 64-byte key pair"
            .to_string()
    })?;
    SigningKey::from_keypair_bytes(&pair)
        .map_err(|_| "the `whsk_` key pair's public half does not match its seed".to_string())
}

/// Returns the `whpk_` public key a receiver configures for a sender's `whsk_`
/// signing key.
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when `whsk` is not a `whsk_` key holding a 32-byte
/// seed or a 64-byte key pair.
///
/// # Examples
/// ```
/// let whpk = hookbox_standard::public_key("whsk_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=")?;
/// assert!(whpk.starts_with("whpk_"));
/// # Ok::<(), hookbox_core::VerifyError>(())
/// ```
pub fn public_key(whsk: &str) -> Result<String, VerifyError> {
    if !whsk.starts_with(SIGNING_PREFIX) {
        return Err(VerifyError::invalid_secret(
            "expected a `whsk_` signing key",
        ));
    }
    match decode(&crate::SCHEME, whsk, Role::Sign).map_err(VerifyError::invalid_secret)? {
        Key::Signing(key) => Ok(format!(
            "{PUBLIC_PREFIX}{}",
            BASE64.encode(key.verifying_key().as_bytes())
        )),
        Key::Hmac(_) | Key::Public(_) => Err(VerifyError::invalid_secret(
            "expected a `whsk_` signing key",
        )),
    }
}
