//! Pre-keyed HMAC-SHA256 and comparing a delivery's signatures with every key.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::encoding::{MacEncoding, MacText};
use crate::{Secrets, VerifyError};

/// An HMAC-SHA256 key with its key schedule computed once, at configuration time:
/// the inner and outer hash states after absorbing the padded key, so signing costs
/// only the message's blocks and two finalizations.
#[derive(Clone)]
pub struct HmacKey(Hmac<Sha256>);

impl HmacKey {
    /// Prepares `key` for repeated use.
    pub fn new(key: &[u8]) -> Self {
        // HMAC hashes long keys and pads short ones, so every length is valid
        Self(<Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length"))
    }

    /// Computes the MAC over the concatenation of `parts`, without copying them.
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.0.clone();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// Computes the MAC over `parts` and writes it as the provider does.
    pub fn sign_text(&self, parts: &[&[u8]], encoding: MacEncoding) -> MacText {
        MacText::encode(&self.sign(parts), encoding)
    }

    /// Starts a MAC to be fed in pieces, for a caller that reads the same bytes for
    /// another purpose as it hashes them (one pass over the body instead of two).
    #[inline]
    pub fn start(&self) -> HmacState {
        HmacState(self.0.clone())
    }
}

/// A MAC being computed piece by piece; see [`HmacKey::start`].
#[derive(Clone)]
pub struct HmacState(Hmac<Sha256>);

impl HmacState {
    /// Feeds the next piece of the signed content.
    #[inline]
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    /// Finishes the MAC and writes it as the provider does.
    #[inline]
    pub fn finish_text(self, encoding: MacEncoding) -> MacText {
        MacText::encode(&self.0.finalize().into_bytes().into(), encoding)
    }
}

impl std::fmt::Debug for HmacState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacState(<redacted>)")
    }
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacKey(<redacted>)")
    }
}

/// Prepares one [`HmacKey`] per secret, using each secret's text as the key bytes
/// (Stripe, Shopify, GitHub).
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when no secret is configured or one is blank: a blank
/// secret is an unset environment variable, never a real key.
pub fn text_hmac_keys(secrets: &Secrets) -> Result<Vec<HmacKey>, VerifyError> {
    if secrets.is_empty() {
        return Err(VerifyError::invalid_secret("no secret configured"));
    }
    secrets
        .iter()
        .map(|secret| text_hmac_key(secret.expose()))
        .collect()
}

/// Prepares the [`HmacKey`] of one secret's text, as [`text_hmac_keys`] does: for a
/// test signer that signs with one secret.
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when the secret is blank.
pub fn text_hmac_key(secret: &str) -> Result<HmacKey, VerifyError> {
    if secret.trim().is_empty() {
        return Err(VerifyError::invalid_secret(
            "the secret is blank; copy the endpoint's signing secret from the provider's dashboard",
        ));
    }
    Ok(HmacKey::new(secret.as_bytes()))
}

/// Returns `true` when any key's MAC over `parts`, written in `encoding`, is exactly
/// one of the texts `received()` yields.
///
/// Each key's MAC is computed once; `received` is called once per key, so it can walk
/// the header again instead of collecting the signatures. Every comparison is
/// constant-time, and all of one key's comparisons run (which signature matched is
/// not leaked).
pub fn any_key_matches<'r, I>(
    keys: &[HmacKey],
    parts: &[&[u8]],
    encoding: MacEncoding,
    received: impl Fn() -> I,
) -> bool
where
    I: Iterator<Item = &'r str>,
{
    keys.iter().any(|key| {
        let expected = key.sign_text(parts, encoding);
        received().fold(false, |found, text| found | expected.matches(text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_key_matches_every_key_and_signature() {
        let keys = [HmacKey::new(b"old"), HmacKey::new(b"new")];
        let parts: [&[u8]; 2] = [b"t.", b"body"];
        let new = keys[1].sign_text(&parts, MacEncoding::LowerHex);
        let new = std::str::from_utf8(new.as_bytes()).unwrap().to_string();
        let other = "0".repeat(64);
        let sigs = [other.as_str(), new.as_str()];
        assert!(any_key_matches(
            &keys,
            &parts,
            MacEncoding::LowerHex,
            || sigs.iter().copied()
        ));
        assert!(!any_key_matches(
            &keys[..1],
            &parts,
            MacEncoding::LowerHex,
            || sigs.iter().copied()
        ));
        assert!(!any_key_matches(&keys, &parts, MacEncoding::Base64, || {
            sigs.iter().copied()
        }));
        let upper = new.to_uppercase();
        assert!(!any_key_matches(
            &keys,
            &parts,
            MacEncoding::LowerHex,
            || std::iter::once(upper.as_str())
        ));
    }
}
