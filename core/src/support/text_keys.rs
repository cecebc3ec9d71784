//! The skeleton of a provider that keys HMAC-SHA256 with each secret's text and sends
//! its MAC as text in a header (Stripe, Shopify, GitHub): the keys prepared once, the
//! received texts compared with every key's MAC, and a mismatch explained.

use super::diagnose::{diagnose_mismatch, non_canonical_hint};
use super::encoding::{MacEncoding, Spelling};
use super::mac::{HmacKey, text_hmac_keys};
use crate::{Secrets, VerifyError};

/// How a provider writes its MAC in its signature header: what a verifier compares
/// the received text with, and how it explains a mismatch.
///
/// # Examples
/// ```
/// use hookbox_core::support::{MacEncoding, MacFormat};
///
/// const MAC: MacFormat = MacFormat {
///     provider: "Acme",
///     encoding: MacEncoding::LowerHex,
///     not_a_mac: "the value is not 64 hex digits",
/// };
/// assert_eq!(MAC.encoding.canonical(), "lower-case hex");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacFormat {
    /// The provider as its documentation spells it, for hints (`"GitHub"`).
    pub provider: &'static str,
    /// The MAC's one spelling.
    pub encoding: MacEncoding,
    /// Why the header is malformed when no text in it is a MAC in any spelling.
    pub not_a_mac: &'static str,
}

/// A provider's secrets with one [`HmacKey`] per secret, its text as the key bytes,
/// and the [`MacFormat`] the provider writes their MACs in.
///
/// The keys verify; the secrets' texts are kept only to explain a mismatch.
///
/// # Examples
/// ```
/// use hookbox_core::support::{MacEncoding, MacFormat, TextKeys};
///
/// const MAC: MacFormat = MacFormat {
///     provider: "Acme",
///     encoding: MacEncoding::LowerHex,
///     not_a_mac: "the value is not 64 hex digits",
/// };
/// let keys = TextKeys::new(MAC, ["old-secret", "new-secret"])?;
/// let body = b"{}";
/// let sent = keys.keys()[1].sign_text(&[b"t=1.", body], MAC.encoding);
/// keys.verify("Acme-Signature", &[b"t=1."], body, || std::iter::once(sent.as_str()))?;
///
/// let err = keys
///     .verify("Acme-Signature", &[], body, || std::iter::once("not hex"))
///     .unwrap_err();
/// assert_eq!(err.kind(), "malformed_header");
/// # Ok::<(), hookbox_core::VerifyError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TextKeys {
    format: MacFormat,
    secrets: Secrets,
    keys: Vec<HmacKey>,
}

impl TextKeys {
    /// Prepares one key per secret (several during a rotation), for MACs written as
    /// `format` says.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank, as
    /// [`text_hmac_keys`].
    pub fn new(format: MacFormat, secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = secrets.into();
        Ok(Self {
            format,
            keys: text_hmac_keys(&secrets)?,
            secrets,
        })
    }

    /// Returns the keys, one per secret, in the order configured.
    pub fn keys(&self) -> &[HmacKey] {
        &self.keys
    }

    /// Checks that some key's MAC over `prefix` and then `body`, in its format's
    /// encoding, is exactly one of the texts `received()` yields.
    ///
    /// Each key's MAC is computed once and `received` is called once per key, as in
    /// [`any_key_matches`](super::any_key_matches); every comparison is constant-time.
    ///
    /// # Errors
    /// As [`TextKeys::mismatch`] when no key's MAC is among them.
    pub fn verify<'r, I>(
        &self,
        header: &str,
        prefix: &[&[u8]],
        body: &[u8],
        received: impl Fn() -> I,
    ) -> Result<(), VerifyError>
    where
        I: Iterator<Item = &'r str>,
    {
        let matched = self
            .keys
            .iter()
            .any(|key| key_matches(key, prefix, body, self.format.encoding, &received));
        if matched {
            Ok(())
        } else {
            Err(self.mismatch(header, prefix, body, received))
        }
    }

    /// Explains why no key's MAC over `prefix` and `body` is among the texts
    /// `received()` yields; runs only on the failure path.
    ///
    /// Returns [`VerifyError::MalformedHeader`] naming `header` when no text is a MAC
    /// in any spelling (the format's `not_a_mac` says why), and otherwise a
    /// [`VerifyError::SignatureMismatch`] whose hint names the spelling when every MAC
    /// was written in another one, or the likely cause found by
    /// [`diagnose_mismatch`].
    pub fn mismatch<'r, I>(
        &self,
        header: &str,
        prefix: &[&[u8]],
        body: &[u8],
        received: impl Fn() -> I,
    ) -> VerifyError
    where
        I: Iterator<Item = &'r str>,
    {
        let format = &self.format;
        let (mut canonical, mut non_canonical) = (false, None);
        for text in received() {
            match format.encoding.spelling(text, 32) {
                Spelling::Canonical => canonical = true,
                Spelling::NonCanonical(spelling) => {
                    non_canonical.get_or_insert(spelling);
                }
                Spelling::Invalid => {}
            }
        }
        let hint = match non_canonical {
            None if !canonical => return VerifyError::malformed(header, format.not_a_mac),
            Some(spelling) if !canonical => {
                non_canonical_hint(format.provider, spelling, format.encoding.canonical())
            }
            _ => diagnose_mismatch(&self.secrets, body, |secret, body| {
                let key = HmacKey::new(secret.as_bytes());
                key_matches(&key, prefix, body, format.encoding, &received)
            }),
        };
        VerifyError::SignatureMismatch { hint }
    }
}

/// Returns `true` when `key`'s MAC over `prefix` and then `body` is exactly one of
/// the texts `received()` yields; all of the comparisons run.
fn key_matches<'r, I>(
    key: &HmacKey,
    prefix: &[&[u8]],
    body: &[u8],
    encoding: MacEncoding,
    received: &impl Fn() -> I,
) -> bool
where
    I: Iterator<Item = &'r str>,
{
    let mut mac = key.start();
    for part in prefix {
        mac.update(part);
    }
    mac.update(body);
    let expected = mac.finish_text(encoding);
    received().fold(false, |found, text| found | expected.matches(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: MacFormat = MacFormat {
        provider: "Acme",
        encoding: MacEncoding::LowerHex,
        not_a_mac: "not 64 hex digits",
    };

    fn sent(secret: &str, prefix: &[&[u8]], body: &[u8]) -> String {
        let parts: Vec<&[u8]> = prefix.iter().copied().chain([body]).collect();
        HmacKey::new(secret.as_bytes())
            .sign_text(&parts, HEX.encoding)
            .as_str()
            .to_string()
    }

    #[test]
    fn any_key_verifies_the_prefix_and_the_body() {
        let keys = TextKeys::new(HEX, ["old", "new"]).unwrap();
        let prefix: [&[u8]; 2] = [b"17", b"."];
        let text = sent("new", &prefix, b"body");
        let other = "0".repeat(64);
        let texts = [other.as_str(), text.as_str()];
        assert_eq!(
            keys.verify("X", &prefix, b"body", || texts.iter().copied()),
            Ok(())
        );
        let err = keys
            .verify("X", &[], b"body", || texts.iter().copied())
            .unwrap_err();
        assert_eq!(err.kind(), "signature_mismatch");
    }

    #[test]
    fn a_mismatch_is_explained_by_how_it_is_spelled() {
        let keys = TextKeys::new(HEX, "key").unwrap();
        let upper = sent("key", &[], b"{}").to_uppercase();
        let err = keys.mismatch("X", &[], b"{}", || std::iter::once(upper.as_str()));
        assert!(
            matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("upper-case hex") && hint.contains("Acme sends lower-case hex")),
            "{err:?}"
        );
        let err = keys.mismatch("X-Sig", &[], b"{}", || std::iter::once("zz"));
        assert_eq!(err, VerifyError::malformed("X-Sig", "not 64 hex digits"));
        let trimmed = sent("key", &[], b"{}\n");
        let err = keys.mismatch("X", &[], b"{}", || std::iter::once(trimmed.as_str()));
        assert!(
            matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("trailing newline")),
            "{err:?}"
        );
    }

    #[test]
    fn blank_secrets_are_refused() {
        for secrets in [Secrets::new(Vec::<String>::new()), Secrets::from(" \n")] {
            let err = TextKeys::new(HEX, secrets).unwrap_err();
            assert_eq!(err.kind(), "invalid_secret");
        }
    }
}
