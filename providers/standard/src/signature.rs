//! Parsing the space-separated signature list.

use ed25519_dalek::Signature;
use hookbox_core::VerifyError;
use hookbox_core::support::{Spelling, base64_spelling, decode_base64_canonical};

/// The most `v1a` (ed25519) signatures tried per delivery; later ones count as not
/// matching.
///
/// An ed25519 verification costs tens of microseconds, against well under one for a
/// `v1` comparison, so a hostile header of thousands of `v1a` entries must not
/// multiply it. A sender lists one signature per active key, a handful at most.
pub const MAX_ED25519_SIGNATURES: usize = 32;

/// A signature list: the `v1` entries are read from the header text again for each
/// key (they are compared as text, so nothing is decoded or collected), the `v1a`
/// entries are decoded once.
#[derive(Debug)]
pub(crate) struct Received<'h> {
    list: &'h str,
    /// The `v1a` signatures in canonical base64 (at most [`MAX_ED25519_SIGNATURES`]).
    pub(crate) v1a: Vec<Signature>,
    /// How the first `v1a` entry that was not canonical base64 of 64 bytes was spelled,
    /// when it was a signature in another spelling.
    v1a_non_canonical: Option<&'static str>,
}

/// Returns the `(version, signature)` entries of a list; entries without a comma are
/// skipped.
fn entries(list: &str) -> impl Iterator<Item = (&str, &str)> {
    list.split(' ')
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| entry.split_once(','))
}

impl<'h> Received<'h> {
    /// Returns the text of every `v1` entry, in order.
    pub(crate) fn v1(&self) -> impl Iterator<Item = &'h str> + use<'h> {
        entries(self.list)
            .filter(|(version, _)| *version == "v1")
            .map(|(_, signature)| signature)
    }

    /// After no key matched: how the entries are spelled. Returns whether any `v1`
    /// entry is canonical base64 of 32 bytes, whether any entry is a signature at all
    /// (canonical or not), and the first non-canonical spelling seen.
    fn spellings(&self) -> Spellings {
        let mut spellings = Spellings {
            v1_canonical: false,
            v1_any: false,
            non_canonical: self.v1a_non_canonical,
        };
        for text in self.v1() {
            match base64_spelling(text, 32) {
                Spelling::Canonical => {
                    spellings.v1_canonical = true;
                    spellings.v1_any = true;
                }
                Spelling::NonCanonical(spelling) => {
                    spellings.v1_any = true;
                    spellings.non_canonical.get_or_insert(spelling);
                }
                Spelling::Invalid => {}
            }
        }
        spellings
    }
}

/// How a list's entries are spelled; computed only after a mismatch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spellings {
    /// A `v1` entry is canonical base64 of 32 bytes.
    pub(crate) v1_canonical: bool,
    /// A `v1` entry is a 32-byte MAC in some spelling.
    pub(crate) v1_any: bool,
    /// The first non-canonical spelling of a signature.
    pub(crate) non_canonical: Option<&'static str>,
}

/// Parses `value`, the signature list sent in header `label`.
///
/// Entries without a comma and unknown versions are ignored, as the spec asks for
/// forward compatibility.
///
/// # Errors
/// [`VerifyError::MalformedHeader`] when no entry has a supported version.
pub(crate) fn parse<'h>(
    label: &str,
    value: &'h str,
    ed25519: bool,
) -> Result<Received<'h>, VerifyError> {
    let mut received = Received {
        list: value,
        v1a: Vec::new(),
        v1a_non_canonical: None,
    };
    let mut supported = false;
    for (version, signature) in entries(value) {
        match version {
            "v1" => supported = true,
            "v1a" if ed25519 => {
                supported = true;
                match decode_base64_canonical::<64>(signature) {
                    Ok(bytes) if received.v1a.len() < MAX_ED25519_SIGNATURES => {
                        received.v1a.push(Signature::from_bytes(&bytes));
                    }
                    Ok(_) => {}
                    Err(spelling) => {
                        if let Spelling::NonCanonical(spelling) = spelling {
                            received.v1a_non_canonical.get_or_insert(spelling);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if !supported {
        let (versions, entries) = versions(ed25519);
        return Err(VerifyError::malformed(
            label,
            format!(
                "no {versions} signature in the list; expected space-separated {entries} entries"
            ),
        ));
    }
    Ok(received)
}

/// After no key matched: returns how the entries are spelled.
///
/// # Errors
/// [`VerifyError::MalformedHeader`] when no entry of a supported version is a
/// signature in any spelling (so the list could never have matched).
pub(crate) fn check_spellings(
    label: &str,
    received: &Received<'_>,
    ed25519: bool,
) -> Result<Spellings, VerifyError> {
    let spellings = received.spellings();
    if !spellings.v1_any && received.v1a.is_empty() && spellings.non_canonical.is_none() {
        let (versions, _) = versions(ed25519);
        let contents = if ed25519 {
            "`v1` must be the base64 of a 32-byte HMAC-SHA256, `v1a` of a 64-byte ed25519 signature"
        } else {
            "`v1` must be the base64 of a 32-byte HMAC-SHA256"
        };
        return Err(VerifyError::malformed(
            label,
            format!("no {versions} signature in the list decodes: {contents}"),
        ));
    }
    Ok(spellings)
}

fn versions(ed25519: bool) -> (&'static str, &'static str) {
    if ed25519 {
        ("`v1,` or `v1a,`", "`v1,<base64>` or `v1a,<base64>`")
    } else {
        ("`v1,`", "`v1,<base64>`")
    }
}
