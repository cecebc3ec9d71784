//! The MAC over a scheme's signed content: keyed once per secret at construction,
//! fed piece by piece (no copy of the body), written in the scheme's encoding and
//! compared as text in constant time.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use hookbox_core::support::{BASE64_CANONICAL, MacEncoding, MacText, macs_equal};
use hookbox_core::{Secrets, VerifyError};
use sha1::Sha1;
use sha2::{Sha256, Sha512};

use crate::kinds::{Algorithm, Encoding};
use crate::scheme::Scheme;
use crate::template::Piece;

/// An HMAC in progress, for one of the three hash functions.
#[derive(Clone)]
enum State {
    Sha1(Hmac<Sha1>),
    Sha256(Hmac<Sha256>),
    Sha512(Hmac<Sha512>),
}

impl State {
    fn new(algorithm: Algorithm, key: &[u8]) -> Self {
        // HMAC hashes long keys and pads short ones, so every length is valid
        const ANY_LENGTH: &str = "HMAC takes keys of any length";
        match algorithm {
            Algorithm::Sha1 => Self::Sha1(Hmac::new_from_slice(key).expect(ANY_LENGTH)),
            Algorithm::Sha256 => Self::Sha256(Hmac::new_from_slice(key).expect(ANY_LENGTH)),
            Algorithm::Sha512 => Self::Sha512(Hmac::new_from_slice(key).expect(ANY_LENGTH)),
        }
    }

    #[inline]
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha1(mac) => mac.update(bytes),
            Self::Sha256(mac) => mac.update(bytes),
            Self::Sha512(mac) => mac.update(bytes),
        }
    }

    #[inline]
    fn finish(self, encoding: Encoding) -> Text {
        match self {
            Self::Sha1(mac) => Text::encode(&mac.finalize().into_bytes(), encoding),
            Self::Sha256(mac) => {
                // core's writer of a 32-byte MAC, the common case
                let mac: [u8; 32] = mac.finalize().into_bytes().into();
                let core = match encoding {
                    Encoding::Hex => MacEncoding::LowerHex,
                    Encoding::Base64 => MacEncoding::Base64,
                };
                Text::copy(MacText::encode(&mac, core).as_bytes())
            }
            Self::Sha512(mac) => Text::encode(&mac.finalize().into_bytes(), encoding),
        }
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("State(<redacted>)")
    }
}

/// A MAC's text (up to 64 bytes in hex, 128 digits), on the stack.
#[derive(Clone, Copy)]
pub(crate) struct Text {
    bytes: [u8; 128],
    len: usize,
}

impl Text {
    fn encode(mac: &[u8], encoding: Encoding) -> Self {
        let mut bytes = [0u8; 128];
        let len = match encoding {
            Encoding::Hex => {
                let len = 2 * mac.len();
                hex::encode_to_slice(mac, &mut bytes[..len]).expect("the slice is twice the MAC");
                len
            }
            Encoding::Base64 => BASE64_CANONICAL
                .encode_slice(mac, &mut bytes)
                .expect("a 64-byte MAC is 88 characters in base64"),
        };
        Self { bytes, len }
    }

    fn copy(text: &[u8]) -> Self {
        let mut bytes = [0u8; 128];
        bytes[..text.len()].copy_from_slice(text);
        Self {
            bytes,
            len: text.len(),
        }
    }

    /// Returns the text.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).expect("hex and base64 are ASCII")
    }

    /// Returns `true` when `received` is exactly this text, compared in constant time.
    #[inline]
    pub(crate) fn matches(&self, received: &str) -> bool {
        macs_equal(&self.bytes[..self.len], received.as_bytes())
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Text(<redacted>)")
    }
}

/// The values of one delivery that the template signs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signed<'a> {
    pub(crate) body: &'a [u8],
    /// The timestamp header as sent; empty when the template does not sign it.
    pub(crate) timestamp: &'a str,
    /// The id header as sent; empty when the template does not sign it.
    pub(crate) id: &'a str,
}

/// A piece of the template after its constant head.
#[derive(Debug, Clone)]
enum Part {
    Body,
    Timestamp,
    Id,
    /// Literal text and the URL, merged.
    Bytes(Box<[u8]>),
}

/// A scheme's keys, one per secret, and its template.
#[derive(Debug, Clone)]
pub(crate) struct Macs {
    algorithm: Algorithm,
    encoding: Encoding,
    /// The template's leading constant bytes (`POST`, the URL, …).
    head: Box<[u8]>,
    /// The rest of the template.
    parts: Vec<Part>,
    /// One state per secret, keyed and fed `head` already: a MAC clones one and
    /// hashes only the delivery's bytes.
    prepared: Vec<State>,
}

impl Macs {
    /// Keys `scheme`'s MAC with each of `secrets`' text.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub(crate) fn new(scheme: &Scheme, secrets: &Secrets) -> Result<Self, VerifyError> {
        if secrets.is_empty() {
            return Err(VerifyError::invalid_secret("no secret configured"));
        }
        if secrets
            .iter()
            .any(|secret| secret.expose().trim().is_empty())
        {
            return Err(VerifyError::invalid_secret(
                "the secret is blank; copy the webhook's signing secret from the provider's dashboard",
            ));
        }
        let (head, parts) = compile(scheme);
        let prepared = secrets
            .iter()
            .map(|secret| {
                let mut state = State::new(scheme.algorithm, secret.expose().as_bytes());
                state.update(&head);
                state
            })
            .collect();
        Ok(Self {
            algorithm: scheme.algorithm,
            encoding: scheme.encoding,
            head,
            parts,
            prepared,
        })
    }

    /// Returns how many keys there are.
    pub(crate) fn len(&self) -> usize {
        self.prepared.len()
    }

    /// Returns key `index`'s MAC over `signed`, as text.
    pub(crate) fn text(&self, index: usize, signed: &Signed<'_>) -> Text {
        let mut state = self.prepared[index].clone();
        self.feed(&mut state, signed);
        state.finish(self.encoding)
    }

    /// Returns `true` when some key's MAC over `signed` is exactly one of the texts
    /// `received()` yields. Each key's MAC is computed once; all of its comparisons
    /// run, so which text matched is not leaked.
    #[inline]
    pub(crate) fn any_matches<'r, I>(&self, signed: &Signed<'_>, received: impl Fn() -> I) -> bool
    where
        I: Iterator<Item = &'r str>,
    {
        (0..self.len()).any(|index| {
            let expected = self.text(index, signed);
            received().fold(false, |found, text| found | expected.matches(text))
        })
    }

    /// As [`Macs::any_matches`], for one candidate secret's text: the failure path
    /// retries the usual mistakes with it.
    pub(crate) fn matches_with<'r, I>(
        &self,
        secret: &str,
        signed: &Signed<'_>,
        received: impl Fn() -> I,
    ) -> bool
    where
        I: Iterator<Item = &'r str>,
    {
        let mut state = State::new(self.algorithm, secret.as_bytes());
        state.update(&self.head);
        self.feed(&mut state, signed);
        let expected = state.finish(self.encoding);
        received().fold(false, |found, text| found | expected.matches(text))
    }

    #[inline]
    fn feed(&self, state: &mut State, signed: &Signed<'_>) {
        for part in &self.parts {
            state.update(match part {
                Part::Body => signed.body,
                Part::Timestamp => signed.timestamp.as_bytes(),
                Part::Id => signed.id.as_bytes(),
                Part::Bytes(bytes) => bytes,
            });
        }
    }
}

/// Splits the template into its leading constant bytes and the rest, with the URL
/// written in and neighbouring constants merged.
fn compile(scheme: &Scheme) -> (Box<[u8]>, Vec<Part>) {
    let mut parts: Vec<Part> = Vec::new();
    for piece in &scheme.pieces {
        let constant = match piece {
            Piece::Body => {
                parts.push(Part::Body);
                continue;
            }
            Piece::Timestamp => {
                parts.push(Part::Timestamp);
                continue;
            }
            Piece::Id => {
                parts.push(Part::Id);
                continue;
            }
            Piece::Url => scheme.url.as_deref().unwrap_or_default(),
            Piece::Literal(text) => text,
        };
        if let Some(Part::Bytes(previous)) = parts.last_mut() {
            *previous = [&previous[..], constant.as_bytes()].concat().into();
        } else {
            parts.push(Part::Bytes(constant.as_bytes().into()));
        }
    }
    match parts.first() {
        Some(Part::Bytes(head)) => {
            let head = head.clone();
            parts.remove(0);
            (head, parts)
        }
        _ => (Box::default(), parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2 (HMAC-SHA256, HMAC-SHA512) and RFC 2202 test case 2
    /// (HMAC-SHA1): key "Jefe", data "what do ya want for nothing?".
    #[test]
    fn the_rfc_vectors() {
        let data = b"what do ya want for nothing?";
        for (algorithm, hex) in [
            (Algorithm::Sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
            (
                Algorithm::Sha256,
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                Algorithm::Sha512,
                "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            ),
        ] {
            let mut state = State::new(algorithm, b"Jefe");
            state.update(&data[..5]);
            state.update(&data[5..]);
            let text = state.clone().finish(Encoding::Hex);
            assert_eq!(text.as_str(), hex, "{algorithm}");
            let bytes = hex::decode(hex).unwrap();
            assert_eq!(
                state.finish(Encoding::Base64).as_str(),
                BASE64_CANONICAL.encode(bytes),
                "{algorithm}"
            );
        }
    }
}
