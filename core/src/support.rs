//! Building blocks for [`Provider`](crate::Provider) implementations: header lookup
//! with typed errors, pre-keyed HMAC, signatures compared in their canonical text, and
//! the diagnosis of a signature mismatch.
//!
//! Users of a provider crate do not need this module.
//!
//! # Canonical signatures
//! A signature has one spelling: lower-case hex (GitHub `sha256=`, Stripe `v1=`), or
//! standard-alphabet base64 with its `=` padding and zero trailing bits (Shopify,
//! Svix and Standard Webhooks `v1,`). The official libraries compute that text and
//! compare it with the header's text, so any other spelling of the same MAC is "no
//! matching signature" there; [`HmacKey::sign_text`] and [`MacText::matches`] do the
//! same here. [`hex_spelling`] and [`base64_spelling`] tell, after a mismatch, whether
//! the received text was a MAC in another spelling (a mismatch worth explaining) or
//! not a MAC at all (a malformed header).

use base64::Engine as _;
use base64::alphabet;
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
        self.lookup(headers).get()
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
        self.lookup(headers).take(kept)
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
        self.lookup(headers).take_required(kept)
    }

    /// Returns the header's value.
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn require<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, VerifyError> {
        self.lookup(headers).require()
    }

    /// Builds the [`VerifyError::MissingHeader`] that names this header.
    pub fn missing(&self) -> VerifyError {
        VerifyError::MissingHeader {
            header: self.label.to_string(),
        }
    }

    /// Looks the header up in `headers` (one hash lookup).
    fn lookup<'h, 's>(&'s self, headers: &'h HeaderMap) -> Found<'h, 's> {
        let mut values = headers.get_all(&self.name).iter();
        let slot = match (values.next(), values.next()) {
            (None, _) => Slot::Absent,
            (Some(value), None) => Slot::Once(value),
            (Some(_), Some(_)) => Slot::Repeated,
        };
        Found { spec: self, slot }
    }
}

/// What a scan found for one header.
#[derive(Debug, Clone, Copy)]
enum Slot<'h> {
    Absent,
    Once(&'h HeaderValue),
    Repeated,
}

/// One header of a [`scan`]: the spec it was looked up by and what the request held.
#[derive(Debug, Clone, Copy)]
pub struct Found<'h, 's> {
    spec: &'s HeaderSpec,
    slot: Slot<'h>,
}

impl<'h, 's> Found<'h, 's> {
    /// A header of `spec` not (yet) found: fill a buffer with these and pass it to
    /// [`scan_into`].
    pub fn absent(spec: &'s HeaderSpec) -> Self {
        Self {
            spec,
            slot: Slot::Absent,
        }
    }

    /// Returns the spec this header was looked up by.
    pub fn spec(&self) -> &'s HeaderSpec {
        self.spec
    }

    /// Returns the header's value; `None` when it is absent or empty.
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn get(&self) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.value()?.map(|(_, text)| text))
    }

    /// Returns the header's value and keeps a copy of it in `kept`, as
    /// [`HeaderSpec::take`].
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn take(&self, kept: &mut KeptHeaders) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.value()?.map(|(value, text)| {
            kept.push(self.spec.name.clone(), value.clone());
            text
        }))
    }

    /// Returns the header's value and keeps a copy, as [`HeaderSpec::take_required`].
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn take_required(&self, kept: &mut KeptHeaders) -> Result<&'h str, VerifyError> {
        self.take(kept)?.ok_or_else(|| self.spec.missing())
    }

    /// Returns the header's value.
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn require(&self) -> Result<&'h str, VerifyError> {
        self.get()?.ok_or_else(|| self.spec.missing())
    }

    fn value(&self) -> Result<Option<(&'h HeaderValue, &'h str)>, VerifyError> {
        let value = match self.slot {
            Slot::Absent => return Ok(None),
            Slot::Once(value) => value,
            Slot::Repeated => {
                return Err(VerifyError::malformed(
                    self.spec.label,
                    "sent more than once; the provider sends it once per request",
                ));
            }
        };
        let bytes = value.as_bytes();
        let text = visible_ascii(bytes)
            .then(|| std::str::from_utf8(bytes).ok())
            .flatten()
            .ok_or_else(|| {
                VerifyError::malformed(self.spec.label, "contains bytes that are not visible ASCII")
            })?;
        Ok((!text.is_empty()).then_some((value, text)))
    }
}

/// Returns `true` when every byte is visible ASCII or a tab, as
/// [`HeaderValue::to_str`] requires: eight bytes at a time.
fn visible_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // exact per-byte tests (no borrows cross bytes): the high bit of each byte is set
    // where the byte is zero
    let zero = |x: u64| !(((x & LOWS) + LOWS) | x) & HIGHS;
    let invalid = |x: u64| {
        // below 0x20: adding 0x60 to the low seven bits leaves the high bit clear
        let control = !(((x & LOWS) + ONES * 0x60) | x) & HIGHS;
        let tab = zero(x ^ (ONES * 0x09));
        let delete = zero(x ^ (ONES * 0x7f));
        (control & !tab) | delete | (x & HIGHS)
    };
    let mut chunks = bytes.chunks_exact(8);
    let bad = chunks.by_ref().fold(0, |bad, chunk| {
        bad | invalid(u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
    });
    bad == 0
        && chunks
            .remainder()
            .iter()
            .all(|&b| (b' '..=b'~').contains(&b) || b == b'\t')
}

/// Finds every header of `specs` in one pass over `headers`.
///
/// A [`HeaderMap`] lookup hashes the name and probes the table; a provider reads three
/// to fourteen names, most of which a request does not share a length with, so one
/// pass that compares lengths first costs a fraction of the lookups for the dozen or
/// so headers a webhook request carries.
///
/// # Examples
/// ```
/// use hookbox_core::support::{HeaderSpec, scan};
/// static ID: HeaderSpec = HeaderSpec::new("Acme-Id", "acme-id");
/// static EVENT: HeaderSpec = HeaderSpec::new("Acme-Event", "acme-event");
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("acme-id", "msg_1".parse()?);
/// let [id, event] = scan(&headers, [&ID, &EVENT]);
/// assert_eq!(id.require()?, "msg_1");
/// assert_eq!(event.get()?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scan<'h, 's, const N: usize>(
    headers: &'h HeaderMap,
    specs: [&'s HeaderSpec; N],
) -> [Found<'h, 's>; N] {
    let mut found = specs.map(Found::absent);
    scan_into(headers, &mut found);
    found
}

/// Fills `found` in one pass over `headers`, as [`scan`] does, for lists whose length
/// is known only at run time.
pub fn scan_into<'h>(headers: &'h HeaderMap, found: &mut [Found<'h, '_>]) {
    // one bit per wanted name length; a name of 128 bytes or more sets bit 127 and
    // so is compared whenever a header that long arrives
    let bit = |len: usize| 1u128 << len.min(127);
    let lengths = found
        .iter()
        .fold(0u128, |mask, f| mask | bit(f.spec.name.as_str().len()));
    for (name, value) in headers {
        let name = name.as_str();
        if lengths & bit(name.len()) == 0 {
            continue;
        }
        if let Some(f) = found.iter_mut().find(|f| f.spec.name.as_str() == name) {
            f.slot = match f.slot {
                Slot::Absent => Slot::Once(value),
                Slot::Once(_) | Slot::Repeated => Slot::Repeated,
            };
        }
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

/// Returns the first of `family` that is present (and not empty), as
/// [`first_present`] does, from headers already [scanned](scan).
///
/// # Errors
/// As [`HeaderSpec::get`] for the first header present.
pub fn first_found<'s, 'h>(
    family: &[Found<'h, 's>],
    kept: &mut KeptHeaders,
) -> Result<Option<(&'s HeaderSpec, &'h str)>, VerifyError> {
    for found in family {
        if let Some(value) = found.take(kept)? {
            return Ok(Some((found.spec, value)));
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
    pub fn start(&self) -> HmacState {
        HmacState(self.0.clone())
    }
}

/// A MAC being computed piece by piece; see [`HmacKey::start`].
#[derive(Clone)]
pub struct HmacState(Hmac<Sha256>);

impl HmacState {
    /// Feeds the next piece of the signed content.
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    /// Finishes the MAC and writes it as the provider does.
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

/// How a provider writes a MAC in its signature header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacEncoding {
    /// Lower-case hex, two digits per byte (GitHub, Stripe).
    LowerHex,
    /// Standard-alphabet base64 with `=` padding (Shopify, Svix, Standard Webhooks).
    Base64,
}

/// A 32-byte MAC in its canonical text, on the stack: what the provider would have
/// sent.
#[derive(Clone, Copy)]
pub struct MacText {
    text: [u8; 64],
    len: usize,
}

impl MacText {
    /// Writes `mac` in `encoding`.
    #[inline]
    pub fn encode(mac: &[u8; 32], encoding: MacEncoding) -> Self {
        let mut text = [0u8; 64];
        let len = match encoding {
            MacEncoding::LowerHex => {
                encode_lower_hex(mac, &mut text);
                64
            }
            MacEncoding::Base64 => encode_base64(mac, &mut text),
        };
        Self { text, len }
    }

    /// Returns the text's bytes (ASCII).
    pub fn as_bytes(&self) -> &[u8] {
        &self.text[..self.len]
    }

    /// Returns the text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("hex and base64 are ASCII")
    }

    /// Returns `true` when `received` is exactly this text, compared in constant time
    /// (lengths are public). Any other spelling of the same MAC does not match, as in
    /// the official libraries, which compare the text too.
    pub fn matches(&self, received: &str) -> bool {
        macs_equal(self.as_bytes(), received.as_bytes())
    }
}

impl std::fmt::Debug for MacText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MacText(<redacted>)")
    }
}

/// Writes the 64 lower-case hex digits of `mac`, four bytes at a time.
#[inline]
fn encode_lower_hex(mac: &[u8; 32], out: &mut [u8; 64]) {
    const LANES: u64 = 0x000f_000f_000f_000f;
    const BYTES: u64 = 0x0101_0101_0101_0101;
    for (chunk, out) in mac.chunks_exact(4).zip(out.chunks_exact_mut(8)) {
        let x = u64::from(u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
        // spread byte k into the low half of 16-bit lane k
        let mut t = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
        t = (t | (t << 8)) & 0x00ff_00ff_00ff_00ff;
        // lane k's high nibble into output byte 2k, its low nibble into byte 2k + 1
        let nibbles = ((t >> 4) & LANES) | ((t & LANES) << 8);
        // each byte is 0..=15: add '0', and 39 more for 10..=15 to land on 'a'..='f'
        let letters = ((nibbles + 6 * BYTES) >> 4) & BYTES;
        let ascii = nibbles + u64::from(b'0') * BYTES + letters * 39;
        out.copy_from_slice(&ascii.to_le_bytes());
    }
}

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Writes `mac` as padded standard base64 (44 characters) and returns the length.
#[inline]
fn encode_base64(mac: &[u8; 32], out: &mut [u8; 64]) -> usize {
    let symbol = |n: u32, shift: u32| BASE64_ALPHABET[((n >> shift) & 63) as usize];
    let mut groups = mac.chunks_exact(3);
    let mut len = 0;
    for group in groups.by_ref() {
        let n = (u32::from(group[0]) << 16) | (u32::from(group[1]) << 8) | u32::from(group[2]);
        out[len..len + 4].copy_from_slice(&[
            symbol(n, 18),
            symbol(n, 12),
            symbol(n, 6),
            symbol(n, 0),
        ]);
        len += 4;
    }
    // 32 = 3 * 10 + 2: the last two bytes are three symbols and one `=`
    let rest = groups.remainder();
    let n = (u32::from(rest[0]) << 16) | (u32::from(rest[1]) << 8);
    out[len..len + 4].copy_from_slice(&[symbol(n, 18), symbol(n, 12), symbol(n, 6), b'=']);
    len + 4
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

/// Compares two byte strings in constant time (lengths are public): eight bytes at a
/// time, folded into one word that [`subtle`] compares with zero.
pub fn macs_equal(expected: &[u8], received: &[u8]) -> bool {
    if expected.len() != received.len() {
        return false;
    }
    let word =
        |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("chunks_exact yields 8 bytes"));
    let mut expected_words = expected.chunks_exact(8);
    let mut received_words = received.chunks_exact(8);
    let mut diff = expected_words
        .by_ref()
        .zip(received_words.by_ref())
        .fold(0u64, |diff, (e, r)| diff | (word(e) ^ word(r)));
    for (e, r) in expected_words
        .remainder()
        .iter()
        .zip(received_words.remainder())
    {
        diff |= u64::from(e ^ r);
    }
    bool::from(diff.ct_eq(&0))
}

/// How a received signature's text is written, for explaining why it did not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// The canonical spelling of a MAC of the expected length: it simply differs.
    Canonical,
    /// A MAC of the expected length in a spelling the provider never sends; it is
    /// never compared. The text says which spelling (for example "upper-case hex").
    NonCanonical(&'static str),
    /// Not a MAC of the expected length in any spelling.
    Invalid,
}

/// Tells how `text` spells a `bytes`-byte MAC in hex: [`Spelling::Canonical`] for
/// lower-case digits, [`Spelling::NonCanonical`] when any digit is upper-case.
pub fn hex_spelling(text: &str, bytes: usize) -> Spelling {
    if text.len() != 2 * bytes || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Spelling::Invalid
    } else if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Spelling::NonCanonical("upper-case hex")
    } else {
        Spelling::Canonical
    }
}

/// Base64 as tolerantly as anyone writes it: padding optional, non-zero trailing bits
/// allowed. For secrets (`whsec_…`), and, with [`base64_spelling`], to recognise a
/// signature in a non-canonical spelling.
pub const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// [`BASE64_LENIENT`] over the URL-safe alphabet (`-` and `_` for `+` and `/`).
const BASE64_URL_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Standard-alphabet base64 exactly as encoders write it: padding required, trailing
/// bits zero. Every byte string has exactly one such spelling.
pub const BASE64_CANONICAL: GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Tells how `text` spells a `bytes`-byte MAC in base64: [`Spelling::Canonical`] for
/// the standard alphabet with padding and zero trailing bits, [`Spelling::NonCanonical`]
/// for the URL-safe alphabet, missing padding or non-zero trailing bits.
pub fn base64_spelling(text: &str, bytes: usize) -> Spelling {
    // refuse anything far longer than the MAC's text before decoding, so a hostile
    // header costs nothing
    if text.len() > 4 * bytes.div_ceil(3) + 8 {
        return Spelling::Invalid;
    }
    let decodes_to = |engine: &GeneralPurpose| {
        let mut out = [0u8; 96];
        engine
            .decode_slice(text, &mut out)
            .is_ok_and(|n| n == bytes)
    };
    if !decodes_to(&BASE64_LENIENT) {
        return if decodes_to(&BASE64_URL_LENIENT) {
            Spelling::NonCanonical("URL-safe base64 (`-` and `_` instead of `+` and `/`)")
        } else {
            Spelling::Invalid
        };
    }
    if decodes_to(&BASE64_CANONICAL) {
        Spelling::Canonical
    } else if text.len() != 4 * bytes.div_ceil(3) {
        Spelling::NonCanonical("base64 without its `=` padding")
    } else {
        Spelling::NonCanonical("base64 whose last character has non-zero trailing bits")
    }
}

/// Decodes a `N`-byte signature written in canonical base64 (as [`BASE64_CANONICAL`]);
/// otherwise says how it is spelled instead, as [`base64_spelling`].
///
/// # Errors
/// The [`Spelling`] of a text that is not canonical base64 of `N` bytes (never
/// [`Spelling::Canonical`]).
pub fn decode_base64_canonical<const N: usize>(text: &str) -> Result<[u8; N], Spelling> {
    let mut out = [0u8; N];
    // exactly the canonical length, so `decode_slice` needs no room to spare
    if text.len() == 4 * N.div_ceil(3) && BASE64_CANONICAL.decode_slice(text, &mut out) == Ok(N) {
        return Ok(out);
    }
    Err(match base64_spelling(text, N) {
        // the canonical text of N bytes always decodes above; keep the error typed
        Spelling::Canonical => Spelling::Invalid,
        other => other,
    })
}

/// Explains a mismatch whose only signatures were spelled non-canonically.
pub fn non_canonical_hint(provider: &str, spelling: &str, canonical: &str) -> String {
    format!(
        "the signature is written in {spelling}; {provider} sends {canonical} and its official libraries compare that text, so no other spelling matches: whatever rewrote the header (a proxy, a test helper) must pass it through unchanged"
    )
}

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

    const GOOD_B64: &str = "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn mac_text_is_the_canonical_spelling() {
        for seed in 0..=255u8 {
            let mac: [u8; 32] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 7));
            let hex = MacText::encode(&mac, MacEncoding::LowerHex);
            assert_eq!(hex.as_bytes(), hex_lower_reference(&mac).as_bytes());
            let b64 = MacText::encode(&mac, MacEncoding::Base64);
            assert_eq!(b64.as_bytes(), BASE64_CANONICAL.encode(mac).as_bytes());
            assert_eq!(
                hex_spelling(std::str::from_utf8(hex.as_bytes()).unwrap(), 32),
                Spelling::Canonical
            );
            assert_eq!(
                base64_spelling(std::str::from_utf8(b64.as_bytes()).unwrap(), 32),
                Spelling::Canonical
            );
        }
        let every_digit: [u8; 32] = std::array::from_fn(|i| (i as u8 % 8) * 0x22 + 0x01);
        let hex = MacText::encode(&every_digit, MacEncoding::LowerHex);
        assert!(hex.as_bytes().starts_with(b"0123456789abcdef"));
    }

    fn hex_lower_reference(mac: &[u8]) -> String {
        mac.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn only_the_exact_text_matches() {
        let mac = [0xabu8; 32];
        let hex = MacText::encode(&mac, MacEncoding::LowerHex);
        let lower = hex_lower_reference(&mac);
        assert!(hex.matches(&lower));
        assert!(!hex.matches(&lower.to_uppercase()));
        assert!(!hex.matches(&lower[..63]));
        assert!(!hex.matches(&format!("{lower}0")));
        assert!(!hex.matches(""));
    }

    #[test]
    fn constant_time_comparison_checks_every_byte() {
        let a: Vec<u8> = (0..45).collect();
        for len in [0, 1, 7, 8, 9, 32, 44, 45] {
            assert!(macs_equal(&a[..len], &a[..len]));
            for i in 0..len {
                let mut b = a[..len].to_vec();
                b[i] ^= 0x80;
                assert!(!macs_equal(&a[..len], &b), "len {len} byte {i}");
            }
        }
        assert!(!macs_equal(&a[..8], &a[..9]));
    }

    #[test]
    fn hex_spellings() {
        let hex64 = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(hex_spelling(hex64, 32), Spelling::Canonical);
        assert!(
            matches!(hex_spelling(&hex64.to_uppercase(), 32), Spelling::NonCanonical(s) if s.contains("upper-case"))
        );
        let mixed = format!("{}{}", &hex64[..10].to_uppercase(), &hex64[10..]);
        assert!(matches!(
            hex_spelling(&mixed, 32),
            Spelling::NonCanonical(_)
        ));
        assert_eq!(
            hex_spelling(&hex64[1..], 32),
            Spelling::Invalid,
            "odd length"
        );
        assert_eq!(
            hex_spelling(&hex64.replace('7', "g"), 32),
            Spelling::Invalid
        );
        assert_eq!(
            hex_spelling(&hex64.replace('7', "\u{e9}")[..64], 32),
            Spelling::Invalid
        );
        assert_eq!(hex_spelling("", 32), Spelling::Invalid);
    }

    #[test]
    fn base64_spellings() {
        assert_eq!(base64_spelling(GOOD_B64, 32), Spelling::Canonical);
        let unpadded = GOOD_B64.trim_end_matches('=');
        assert!(
            matches!(base64_spelling(unpadded, 32), Spelling::NonCanonical(s) if s.contains("padding"))
        );
        // `E` is 0b000100; `F` sets the lowest bit, which 32 bytes leave unused
        let trailing = GOOD_B64.replace("1OE=", "1OF=");
        assert!(
            matches!(base64_spelling(&trailing, 32), Spelling::NonCanonical(s) if s.contains("trailing bits"))
        );
        let url_safe = GOOD_B64.replace('+', "-").replace('/', "_");
        assert!(
            matches!(base64_spelling(&url_safe, 32), Spelling::NonCanonical(s) if s.contains("URL-safe"))
        );
        for invalid in [
            "",
            "not base64!",
            "YWJj",
            &"A".repeat(10_000),
            &format!("{GOOD_B64}AAAA"),
        ] {
            assert_eq!(base64_spelling(invalid, 32), Spelling::Invalid, "{invalid}");
        }
    }

    #[test]
    fn canonical_base64_decoding() {
        let bytes: [u8; 32] = decode_base64_canonical(GOOD_B64).unwrap();
        assert_eq!(BASE64_CANONICAL.encode(bytes), GOOD_B64);
        assert!(matches!(
            decode_base64_canonical::<32>(GOOD_B64.trim_end_matches('=')),
            Err(Spelling::NonCanonical(_))
        ));
        assert_eq!(
            decode_base64_canonical::<64>(GOOD_B64),
            Err(Spelling::Invalid)
        );
        let sig = BASE64_CANONICAL.encode([7u8; 64]);
        assert_eq!(decode_base64_canonical::<64>(&sig), Ok([7u8; 64]));
        assert!(matches!(
            decode_base64_canonical::<64>(sig.trim_end_matches('=')),
            Err(Spelling::NonCanonical(_))
        ));
    }

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

    #[test]
    fn the_visible_ascii_check_is_http_s() {
        let mut samples: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for b in 0..=255u8 {
            for at in [0, 5, 7, 8, 9, 15, 16, 20] {
                let mut value = b"sha256=0123456789abcdef0123".to_vec();
                value[at] = b;
                samples.push(value);
            }
        }
        for value in samples {
            if let Ok(header) = HeaderValue::from_bytes(&value) {
                assert_eq!(visible_ascii(&value), header.to_str().is_ok(), "{value:?}");
            }
        }
    }

    #[test]
    fn a_scan_finds_what_lookups_find() {
        static A: HeaderSpec = HeaderSpec::new("X-A", "x-a");
        static B: HeaderSpec = HeaderSpec::new("X-Bb", "x-bb");
        static C: HeaderSpec = HeaderSpec::new("X-Cc", "x-cc");
        let long = format!("x-{}", "l".repeat(200));
        let l = HeaderSpec {
            name: HeaderName::from_bytes(long.as_bytes()).unwrap(),
            label: "X-Long",
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-a", "1".parse().unwrap());
        headers.insert("x-bb", "".parse().unwrap());
        headers.insert("x-cc", "3".parse().unwrap());
        headers.append("x-cc", "4".parse().unwrap());
        headers.insert("content-type", "application/json".parse().unwrap());
        headers.insert("x-dd", "5".parse().unwrap());
        headers.insert(
            HeaderName::from_bytes(long.as_bytes()).unwrap(),
            "6".parse().unwrap(),
        );
        let other = format!("x-{}", "m".repeat(200));
        headers.insert(
            HeaderName::from_bytes(other.as_bytes()).unwrap(),
            "7".parse().unwrap(),
        );
        let [a, b, c, found_long] = scan(&headers, [&A, &B, &C, &l]);
        for (found, spec) in [(a, &A), (b, &B), (c, &C), (found_long, &l)] {
            assert_eq!(found.get(), spec.get(&headers), "{}", spec.label());
        }
        assert_eq!(a.get(), Ok(Some("1")));
        assert_eq!(b.get(), Ok(None));
        assert_eq!(c.get().unwrap_err().kind(), "malformed_header");
        assert_eq!(found_long.get(), Ok(Some("6")));

        let mut kept = KeptHeaders::default();
        let z = HeaderSpec::new("X-Z", "x-z");
        let [missing, present] = scan(&headers, [&z, &A]);
        let (spec, value) = first_found(&[missing, present], &mut kept)
            .unwrap()
            .unwrap();
        assert_eq!((spec.label(), value), ("X-A", "1"));
        assert_eq!(kept.len(), 1);
    }
}
