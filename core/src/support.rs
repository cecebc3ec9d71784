//! Building blocks for [`Provider`](crate::Provider) implementations: header lookup
//! with typed errors, pre-keyed HMAC, tolerant signature decoding, and the diagnosis
//! of a signature mismatch.
//!
//! Users of a provider crate do not need this module.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::{KeptHeaders, Secrets, VerifyError};

/// A header as the provider documents it: the lowercase name used for lookup and
/// the spelling shown in error messages.
#[derive(Debug, Clone)]
pub struct HeaderSpec {
    name: HeaderName,
    label: &'static str,
}

impl HeaderSpec {
    /// A header looked up by `lowercase` (which must be lowercase) and reported as
    /// `label`.
    pub const fn new(label: &'static str, lowercase: &'static str) -> Self {
        Self {
            name: HeaderName::from_static(lowercase),
            label,
        }
    }

    /// Returns the name used for lookup.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }

    /// Returns the documented spelling.
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// Returns the header's value; `None` when it is absent or empty.
    ///
    /// # Errors
    /// [`VerifyError::MalformedHeader`] when it is sent more than once (a proxy or an
    /// attacker appended a copy; which one is real is unknowable) or holds bytes that
    /// are not visible ASCII.
    pub fn get<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.lookup(headers)?.map(|(_, text)| text))
    }

    /// Returns the header's value, as [`HeaderSpec::get`], and keeps a copy of it in
    /// `kept` so the delivery can be verified again later.
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn take<'h>(
        &self,
        headers: &'h HeaderMap,
        kept: &mut KeptHeaders,
    ) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.lookup(headers)?.map(|(value, text)| {
            kept.push(self.name.clone(), value.clone());
            text
        }))
    }

    /// Returns the header's value and keeps a copy, as [`HeaderSpec::take`].
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn take_required<'h>(
        &self,
        headers: &'h HeaderMap,
        kept: &mut KeptHeaders,
    ) -> Result<&'h str, VerifyError> {
        self.take(headers, kept)?.ok_or_else(|| self.missing())
    }

    /// Returns the header's value.
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn require<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, VerifyError> {
        self.get(headers)?.ok_or_else(|| self.missing())
    }

    /// Builds the [`VerifyError::MissingHeader`] that names this header.
    pub fn missing(&self) -> VerifyError {
        VerifyError::MissingHeader {
            header: self.label.to_string(),
        }
    }

    fn lookup<'h>(
        &self,
        headers: &'h HeaderMap,
    ) -> Result<Option<(&'h HeaderValue, &'h str)>, VerifyError> {
        let mut values = headers.get_all(&self.name).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(VerifyError::malformed(
                self.label,
                "sent more than once; the provider sends it once per request",
            ));
        }
        let text = value.to_str().map_err(|_| {
            VerifyError::malformed(self.label, "contains bytes that are not visible ASCII")
        })?;
        Ok((!text.is_empty()).then_some((value, text)))
    }
}

/// Returns the first of `specs` that is present (and not empty), with the spelling
/// that matched, keeping a copy in `kept`: for providers that accept two header
/// families (Svix's `svix-*` and `webhook-*`, Shopify's two).
///
/// # Errors
/// As [`HeaderSpec::get`] for the first header present.
pub fn first_present<'s, 'h>(
    headers: &'h HeaderMap,
    specs: &[&'s HeaderSpec],
    kept: &mut KeptHeaders,
) -> Result<Option<(&'s HeaderSpec, &'h str)>, VerifyError> {
    for spec in specs {
        if let Some(value) = spec.take(headers, kept)? {
            return Ok(Some((spec, value)));
        }
    }
    Ok(None)
}

/// Parses a signed Unix timestamp in seconds: ASCII digits only, at most 19 of them
/// (no sign, no fraction, no whitespace).
///
/// # Errors
/// [`VerifyError::MalformedHeader`] naming `header`.
pub fn parse_unix_seconds(header: &str, value: &str) -> Result<i64, VerifyError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::malformed(
            header,
            "the timestamp is not a whole number of seconds since the Unix epoch",
        ));
    }
    value
        .parse::<i64>()
        .map_err(|_| VerifyError::malformed(header, "the timestamp is too large to be a Unix time"))
}

/// An HMAC-SHA256 key with its key schedule computed once, at configuration time.
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
        .map(|secret| {
            if secret.expose().trim().is_empty() {
                Err(VerifyError::invalid_secret(
                    "the secret is blank; copy the endpoint's signing secret from the provider's dashboard",
                ))
            } else {
                Ok(HmacKey::new(secret.expose().as_bytes()))
            }
        })
        .collect()
}

/// Returns `true` when any key's MAC over `parts` equals any of `received`.
///
/// Each key's MAC is computed once; every comparison is constant-time.
pub fn any_key_matches(keys: &[HmacKey], parts: &[&[u8]], received: &[[u8; 32]]) -> bool {
    keys.iter().any(|key| {
        let expected = key.sign(parts);
        // no early exit across signatures: which one matched is not leaked
        received
            .iter()
            .fold(false, |found, sig| found | macs_equal(&expected, sig))
    })
}

/// Compares two MACs in constant time (lengths are public).
pub fn macs_equal(expected: &[u8], received: &[u8]) -> bool {
    expected.len() == received.len() && bool::from(expected.ct_eq(received))
}

/// Base64 as providers send it: standard alphabet, padding optional, and non-zero
/// trailing bits tolerated so that one edited character reads as a wrong signature
/// rather than as an encoding error.
pub const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes a base64 SHA-256 MAC; `None` when it is not base64 or not 32 bytes.
pub fn decode_base64_mac(value: &str) -> Option<[u8; 32]> {
    // 32 bytes are 44 base64 characters with padding; refuse anything far longer
    // before decoding so a hostile header costs nothing
    if value.len() > 64 {
        return None;
    }
    let mut out = [0u8; 48];
    let n = BASE64_LENIENT.decode_slice(value, &mut out).ok()?;
    out[..n].try_into().ok()
}

/// Decodes a hex SHA-256 MAC (either case); `None` when it is not 64 hex digits.
pub fn decode_hex_mac(value: &str) -> Option<[u8; 32]> {
    if value.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    // a table lookup per digit and one validity check at the end: the `hex` crate's
    // per-digit branching cost ~80 ns here, about a tenth of the HMAC itself
    let digits = value.as_bytes();
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (
            HEX_VALUE[usize::from(pair[0])],
            HEX_VALUE[usize::from(pair[1])],
        );
        invalid |= (high | low) & 0xf0;
        *byte = (high << 4) | (low & 0x0f);
    }
    (invalid == 0).then_some(out)
}

/// The value of each ASCII hex digit, `0xff` for any other byte.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Finds the likely cause of a signature mismatch by retrying the usual mistakes.
///
/// `matches(secret, body)` recomputes the provider's signature with a candidate
/// secret text and body and reports whether it equals a received signature. This runs
/// only on the failure path, so its extra MACs cost nothing on valid deliveries.
pub fn diagnose_mismatch(
    secrets: &Secrets,
    body: &[u8],
    matches: impl Fn(&str, &[u8]) -> bool,
) -> String {
    for (i, secret) in secrets.iter().enumerate() {
        let secret = secret.expose();
        let nth = if secrets.len() > 1 {
            format!("secret #{} ", i + 1)
        } else {
            "the secret ".to_string()
        };
        if secret.trim() != secret && matches(secret.trim(), body) {
            return format!(
                "{nth}has leading or trailing whitespace (a newline from a file or an environment variable?); remove it"
            );
        }
        if !secret.starts_with("whsec_") && matches(&format!("whsec_{}", secret.trim()), body) {
            return format!(
                "{nth}is missing its `whsec_` prefix; use the whole value the provider's dashboard shows"
            );
        }
    }
    let trimmed = body.trim_ascii_end();
    let body_hint = if trimmed.len() != body.len()
        && secrets.iter().any(|s| matches(s.expose(), trimmed))
    {
        Some(
            "the body gained trailing whitespace after it was signed; verify the raw bytes exactly as received",
        )
    } else if secrets.iter().any(|s| {
        let mut with_newline = body.to_vec();
        with_newline.push(b'\n');
        matches(s.expose(), &with_newline)
    }) {
        Some(
            "the body lost its trailing newline (was it trimmed?); verify the raw bytes exactly as received",
        )
    } else {
        None
    };
    if let Some(hint) = body_hint {
        return hint.to_string();
    }
    if looks_reserialized(body) {
        return "no configured secret matches; the body looks re-serialized by a JSON library (compact, no whitespace), which changes the signed bytes: verify the raw body before parsing it, or the secret belongs to another endpoint".to_string();
    }
    format!(
        "no configured secret ({} tried) matches any signature; the secret may belong to another endpoint or mode (test vs live), or the body was changed before verification (parsed and re-serialized, re-encoded, or trimmed)",
        secrets.len()
    )
}

/// Returns `true` when `body` is JSON exactly as `serde_json` would print it compactly:
/// a sign that a framework parsed and re-serialized the payload before verification.
fn looks_reserialized(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| serde_json::to_vec(&value).ok())
        .is_some_and(|compact| compact == body && body.len() > 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_base64_accepts_an_edited_last_character() {
        let good = "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert!(decode_base64_mac(good).is_some());
        assert!(decode_base64_mac("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=").is_some());
        assert!(decode_base64_mac("g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE").is_some());
        assert!(decode_base64_mac("not base64!").is_none());
        assert!(decode_base64_mac("YWJj").is_none(), "3 bytes is not a MAC");
        assert!(decode_base64_mac(&"A".repeat(10_000)).is_none());
    }

    #[test]
    fn hex_mac_needs_exactly_64_digits() {
        let hex64 = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let mac = decode_hex_mac(hex64).unwrap();
        assert_eq!(&mac[..4], &[0x75, 0x71, 0x07, 0xea]);
        assert_eq!(mac[31], 0x17);
        let every_digit = "0123456789abcdef".repeat(4);
        assert_eq!(
            &decode_hex_mac(&every_digit).unwrap()[..8],
            &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]
        );
        assert!(decode_hex_mac(&hex64.to_uppercase()).is_some());
        assert!(
            decode_hex_mac(&hex64.replace('7', "\u{e9}")[..64]).is_none(),
            "not ASCII"
        );
        assert!(decode_hex_mac(&hex64[1..]).is_none(), "odd length");
        assert!(
            decode_hex_mac(&hex64.replace('7', "g")).is_none(),
            "not hex"
        );
    }

    #[test]
    fn timestamps_are_plain_digits() {
        assert_eq!(parse_unix_seconds("t", "1614265330"), Ok(1_614_265_330));
        for bad in [
            "",
            "-5",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "abc",
            "99999999999999999999",
        ] {
            let err = parse_unix_seconds("t", bad).unwrap_err();
            assert_eq!(err.kind(), "malformed_header", "{bad:?}");
        }
    }

    #[test]
    fn diagnosis_names_whitespace_in_the_secret() {
        let secrets = Secrets::from("key\n");
        let hint = diagnose_mismatch(&secrets, b"{}", |s, _| s == "key");
        assert!(hint.contains("whitespace"), "{hint}");
    }

    #[test]
    fn diagnosis_names_a_trimmed_body() {
        let secrets = Secrets::from("key");
        let hint = diagnose_mismatch(&secrets, b"{}", |_, b| b == b"{}\n");
        assert!(hint.contains("trailing newline"), "{hint}");
    }

    #[test]
    fn header_spec_rejects_duplicates_and_non_ascii() {
        let spec = HeaderSpec::new("X-Test", "x-test");
        let mut headers = HeaderMap::new();
        assert_eq!(spec.get(&headers), Ok(None));
        assert_eq!(spec.require(&headers).unwrap_err().kind(), "missing_header");
        headers.insert("x-test", "".parse().unwrap());
        assert_eq!(spec.require(&headers).unwrap_err().kind(), "missing_header");
        headers.insert(
            "x-test",
            http::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert_eq!(spec.get(&headers).unwrap_err().kind(), "malformed_header");
        headers.insert("x-test", "a".parse().unwrap());
        headers.append("x-test", "b".parse().unwrap());
        assert_eq!(spec.get(&headers).unwrap_err().kind(), "malformed_header");
    }
}
