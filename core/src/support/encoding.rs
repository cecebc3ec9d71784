//! A MAC's canonical text (lower-case hex, padded standard base64), compared in
//! constant time, and how a received text that is not canonical is spelled instead.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use subtle::ConstantTimeEq;

/// How a provider writes a MAC in its signature header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacEncoding {
    /// Lower-case hex, two digits per byte (GitHub, Stripe).
    LowerHex,
    /// Standard-alphabet base64 with `=` padding (Shopify, Svix, Standard Webhooks).
    Base64,
}

impl MacEncoding {
    /// Tells how `text` spells a `bytes`-byte MAC in this encoding, as
    /// [`hex_spelling`] or [`base64_spelling`] does.
    pub fn spelling(self, text: &str, bytes: usize) -> Spelling {
        match self {
            Self::LowerHex => hex_spelling(text, bytes),
            Self::Base64 => base64_spelling(text, bytes),
        }
    }

    /// Names the one spelling a provider sends in this encoding, for the hint that
    /// explains a mismatch.
    pub fn canonical(self) -> &'static str {
        match self {
            Self::LowerHex => "lower-case hex",
            Self::Base64 => "standard base64 with its `=` padding",
        }
    }
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
}
