//! The algorithm the settings header selects, the content type, and what is signed after the URL (the sorted form parameters or the body's SHA-256).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use hookbox_core::VerifyError;
use hookbox_core::support::{
    BASE64_CANONICAL, MacEncoding, Spelling, base64_spelling, macs_equal, non_canonical_hint,
};
use sha1::Sha1;
use sha2::Sha256;

use crate::consts::{BODY_SHA256, CONTENT_TYPE, FORM, JSON, SIGNATURE, SIGNATURE_SETTINGS};
use crate::form::Params;
use crate::url::body_hash_hex;

/// The MAC Twilio computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    HmacSha1,
    HmacSha256,
}

impl Algorithm {
    /// Reads `X-Twilio-Webhooks-Signature-Settings`: its `algorithm=`, or HMAC-SHA1
    /// when the header is absent.
    pub(crate) fn from_settings(settings: Option<&str>) -> Result<Self, VerifyError> {
        let Some(settings) = settings else {
            return Ok(Self::HmacSha1);
        };
        let malformed = |reason: String| VerifyError::malformed(SIGNATURE_SETTINGS.label(), reason);
        let mut algorithm = None;
        for item in settings.split(',') {
            let Some((name, value)) = item.split_once('=') else {
                continue;
            };
            if name.trim() != "algorithm" {
                continue;
            }
            if algorithm.is_some() {
                return Err(malformed(
                    "more than one `algorithm=`; Twilio sends exactly one".to_string(),
                ));
            }
            algorithm = Some(value.trim());
        }
        match algorithm {
            Some("HMAC_SHA256") => Ok(Self::HmacSha256),
            Some("HMAC_SHA1") => Ok(Self::HmacSha1),
            Some(other) => Err(malformed(format!(
                "the algorithm `{}` is not one Twilio signs with: `HMAC_SHA1` or `HMAC_SHA256`",
                shorten(other)
            ))),
            None => Err(malformed(
                "no `algorithm=`; Twilio sends `key=<SharedKey>,algorithm=HMAC_SHA256`".to_string(),
            )),
        }
    }

    /// The MAC's length in bytes.
    pub(crate) fn len(self) -> usize {
        match self {
            Self::HmacSha1 => 20,
            Self::HmacSha256 => 32,
        }
    }

    /// Why a signature that is no MAC of this algorithm's length is malformed.
    fn not_a_mac(self, signature: &str) -> &'static str {
        let other = match self {
            Self::HmacSha1 => Self::HmacSha256,
            Self::HmacSha256 => Self::HmacSha1,
        };
        let is_other = base64_spelling(signature, other.len()) != Spelling::Invalid;
        match (self, is_other) {
            (Self::HmacSha1, true) => {
                "the value is the base64 of 32 bytes, an HMAC-SHA256, but no `X-Twilio-Webhooks-Signature-Settings: …,algorithm=HMAC_SHA256` came with it (did a proxy drop that header?)"
            }
            (Self::HmacSha256, true) => {
                "the value is the base64 of 20 bytes, an HMAC-SHA1, but `X-Twilio-Webhooks-Signature-Settings` says `algorithm=HMAC_SHA256`"
            }
            (Self::HmacSha1, false) => {
                "the value is not the base64 of a 20-byte HMAC-SHA1; Twilio sends 28 characters of standard base64"
            }
            (Self::HmacSha256, false) => {
                "the value is not the base64 of a 32-byte HMAC-SHA256; Twilio sends 44 characters of standard base64"
            }
        }
    }
}

/// Why `signature` is no canonical base64 MAC of `algorithm`: a mismatch whose hint
/// names its spelling when it is the MAC in another spelling, a malformed header
/// otherwise.
pub(crate) fn signature_shape(algorithm: Algorithm, signature: &str) -> VerifyError {
    match base64_spelling(signature, algorithm.len()) {
        Spelling::NonCanonical(spelling) => VerifyError::SignatureMismatch {
            hint: non_canonical_hint("Twilio", spelling, MacEncoding::Base64.canonical()),
        },
        Spelling::Canonical | Spelling::Invalid => {
            VerifyError::malformed(SIGNATURE.label(), algorithm.not_a_mac(signature))
        }
    }
}

/// At most 40 characters of a received value, for an error message.
fn shorten(value: &str) -> String {
    match value.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_string(),
    }
}

/// What the `Content-Type` says the body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Form,
    Json,
}

impl Kind {
    /// Reads the media type, ignoring its parameters and case.
    pub(crate) fn from_content_type(value: &str) -> Result<Self, VerifyError> {
        let media = value.split(';').next().unwrap_or_default().trim();
        if media.eq_ignore_ascii_case(FORM) {
            Ok(Self::Form)
        } else if media.eq_ignore_ascii_case(JSON) {
            Ok(Self::Json)
        } else {
            Err(VerifyError::malformed(
                CONTENT_TYPE.label(),
                format!(
                    "`{}` is neither form nor JSON; Twilio sends `{FORM}` (the parameters are signed) or `{JSON}` (signed through `{BODY_SHA256}`)",
                    shorten(media)
                ),
            ))
        }
    }

    /// The kind a test signer gives `body`: JSON when it starts with `{` or `[` after
    /// whitespace, a form otherwise.
    pub(crate) fn of_body(body: &[u8]) -> Self {
        match body.trim_ascii_start().first() {
            Some(b'{' | b'[') => Self::Json,
            _ => Self::Form,
        }
    }
}

/// What is signed after the URL.
pub(crate) enum Content<'b> {
    /// The form's parameters, sorted, identical pairs once.
    Form(Params<'b>),
    /// The hex SHA-256 of a JSON body, the value of `bodySHA256=`.
    Json([u8; 64]),
}

impl<'b> Content<'b> {
    /// Reads `body` as `kind`: the parameters borrow from it where they need no
    /// decoding.
    pub(crate) fn read(kind: Kind, body: &'b [u8]) -> Self {
        match kind {
            Kind::Form => Self::Form(Params::parse(body)),
            Kind::Json => Self::Json(body_hash_hex(body)),
        }
    }

    /// Feeds the content after the URL (and, for JSON, `bodySHA256=`) to `mac`.
    fn feed(&self, mac: &mut impl Mac) {
        match self {
            Self::Form(params) => params.feed(mac),
            Self::Json(hex) => mac.update(hex),
        }
    }
}

/// A MAC as Twilio writes it: standard base64 with padding, on the stack.
pub(crate) struct MacText {
    text: [u8; 44],
    len: usize,
}

impl MacText {
    fn encode(mac: &[u8]) -> Self {
        let mut text = [0u8; 44];
        let len = BASE64_CANONICAL
            .encode_slice(mac, &mut text)
            .expect("44 characters hold the base64 of 32 bytes");
        Self { text, len }
    }

    /// Returns `true` when `received` is exactly this text, compared in constant time.
    pub(crate) fn matches(&self, received: &str) -> bool {
        macs_equal(&self.text[..self.len], received.as_bytes())
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.text[..self.len]).expect("base64 is ASCII")
    }
}

/// One secret's HMAC states with one spelling of the URL already absorbed: for a form
/// (the URL) and for JSON (the URL, `?` or `&`, `bodySHA256=`), in both algorithms.
#[derive(Clone)]
pub(crate) struct Prepared {
    form_sha1: Hmac<Sha1>,
    form_sha256: Hmac<Sha256>,
    json_sha1: Hmac<Sha1>,
    json_sha256: Hmac<Sha256>,
}

impl Prepared {
    pub(crate) fn new(secret: &[u8], url: &str) -> Self {
        let separator: &[u8] = if url.contains('?') { b"&" } else { b"?" };
        let mut form_sha1 =
            <Hmac<Sha1> as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length");
        let mut form_sha256 =
            <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length");
        form_sha1.update(url.as_bytes());
        form_sha256.update(url.as_bytes());
        let (mut json_sha1, mut json_sha256) = (form_sha1.clone(), form_sha256.clone());
        for piece in [separator, BODY_SHA256.as_bytes(), b"="] {
            json_sha1.update(piece);
            json_sha256.update(piece);
        }
        Self {
            form_sha1,
            form_sha256,
            json_sha1,
            json_sha256,
        }
    }

    /// The MAC over this URL and `content`, as Twilio writes it.
    pub(crate) fn sign(&self, algorithm: Algorithm, content: &Content<'_>) -> MacText {
        fn finish<M: Mac + Clone>(start: &M, content: &Content<'_>) -> MacText {
            let mut mac = start.clone();
            content.feed(&mut mac);
            MacText::encode(&mac.finalize().into_bytes())
        }
        match (algorithm, content) {
            (Algorithm::HmacSha1, Content::Form(_)) => finish(&self.form_sha1, content),
            (Algorithm::HmacSha256, Content::Form(_)) => finish(&self.form_sha256, content),
            (Algorithm::HmacSha1, Content::Json(_)) => finish(&self.json_sha1, content),
            (Algorithm::HmacSha256, Content::Json(_)) => finish(&self.json_sha256, content),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_name_the_algorithm() {
        assert_eq!(Algorithm::from_settings(None), Ok(Algorithm::HmacSha1));
        assert_eq!(
            Algorithm::from_settings(Some("key=KS1, algorithm=HMAC_SHA256")),
            Ok(Algorithm::HmacSha256)
        );
        assert_eq!(
            Algorithm::from_settings(Some("algorithm=HMAC_SHA1,key=KS1")),
            Ok(Algorithm::HmacSha1)
        );
        for bad in [
            "key=KS1",
            "key=KS1,algorithm=HMAC_SHA512",
            "algorithm=HMAC_SHA256,algorithm=HMAC_SHA256",
        ] {
            let err = Algorithm::from_settings(Some(bad)).unwrap_err();
            assert_eq!(err.kind(), "malformed_header", "{bad}");
        }
    }
}
