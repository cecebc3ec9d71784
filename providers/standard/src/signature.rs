//! Parsing the space-separated signature list.

use base64::Engine as _;
use ed25519_dalek::Signature;
use hookbox_core::VerifyError;
use hookbox_core::support::{BASE64_LENIENT, decode_base64_mac};

/// The most `v1a` (ed25519) signatures tried per delivery; later ones count as not
/// matching.
///
/// An ed25519 verification costs tens of microseconds, against well under one for a
/// `v1` comparison, so a hostile header of thousands of `v1a` entries must not
/// multiply it. A sender lists one signature per active key, a handful at most.
pub const MAX_ED25519_SIGNATURES: usize = 32;

/// The decodable signatures of a list, by version.
#[derive(Debug, Default)]
pub(crate) struct Received {
    pub(crate) v1: Vec<[u8; 32]>,
    pub(crate) v1a: Vec<Signature>,
}

/// Parses `value`, the signature list sent in header `label`.
///
/// Entries without a comma and unknown versions are ignored, as the spec asks for
/// forward compatibility; an entry of a supported version that does not decode is
/// skipped as long as another one decodes.
///
/// # Errors
/// [`VerifyError::MalformedHeader`] when no entry has a supported version, or none of
/// those decodes.
pub(crate) fn parse(label: &str, value: &str, ed25519: bool) -> Result<Received, VerifyError> {
    let mut received = Received::default();
    let mut supported = false;
    let mut decoded = false;
    for entry in value.split(' ').filter(|entry| !entry.is_empty()) {
        let Some((version, signature)) = entry.split_once(',') else {
            continue;
        };
        match version {
            "v1" => {
                supported = true;
                if let Some(mac) = decode_base64_mac(signature) {
                    decoded = true;
                    received.v1.push(mac);
                }
            }
            "v1a" if ed25519 => {
                supported = true;
                if let Some(signature) = decode_ed25519(signature) {
                    decoded = true;
                    if received.v1a.len() < MAX_ED25519_SIGNATURES {
                        received.v1a.push(signature);
                    }
                }
            }
            _ => {}
        }
    }
    let (versions, entries, contents) = if ed25519 {
        (
            "`v1,` or `v1a,`",
            "`v1,<base64>` or `v1a,<base64>`",
            "`v1` must be the base64 of a 32-byte HMAC-SHA256, `v1a` of a 64-byte ed25519 signature",
        )
    } else {
        (
            "`v1,`",
            "`v1,<base64>`",
            "`v1` must be the base64 of a 32-byte HMAC-SHA256",
        )
    };
    if !supported {
        return Err(VerifyError::malformed(
            label,
            format!(
                "no {versions} signature in the list; expected space-separated {entries} entries"
            ),
        ));
    }
    if !decoded {
        return Err(VerifyError::malformed(
            label,
            format!("no {versions} signature in the list decodes: {contents}"),
        ));
    }
    Ok(received)
}

/// Decodes a base64 ed25519 signature; `None` when it is not base64 of 64 bytes.
fn decode_ed25519(value: &str) -> Option<Signature> {
    // 64 bytes are 88 base64 characters with padding; refuse anything far longer
    // before decoding so a hostile header costs nothing
    if value.len() > 100 {
        return None;
    }
    let mut out = [0u8; 80];
    let n = BASE64_LENIENT.decode_slice(value, &mut out).ok()?;
    let bytes: [u8; 64] = out.get(..n)?.try_into().ok()?;
    Some(Signature::from_bytes(&bytes))
}
