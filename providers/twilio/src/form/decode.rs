//! Form names and values as sent, and decoding their percent-escapes as they are read.

use std::cmp::Ordering;

/// A name or a value exactly as sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part<'b> {
    pub(crate) raw: &'b [u8],
    /// Whether `raw` holds `+` or `%`, so that its decoded bytes differ from it.
    pub(crate) encoded: bool,
}

impl Part<'_> {
    /// Compares the decoded bytes (which, for UTF-8, is Unicode code point order).
    #[inline]
    pub(crate) fn cmp_decoded(&self, other: &Self) -> Ordering {
        if !self.encoded && !other.encoded {
            return self.raw.cmp(other.raw);
        }
        // equal bytes decode equally: decode from the first difference, or from a `%`
        // just before it whose escape reaches into it (a `%` always starts an escape,
        // as no hex digit is a `%`)
        let (a, b) = (self.raw, other.raw);
        let differ = common_prefix(a, b);
        let from = (differ.saturating_sub(2)..differ)
            .find(|&at| a[at] == b'%')
            .unwrap_or(differ);
        Decoded(&a[from..]).cmp(Decoded(&b[from..]))
    }
}

/// The length of the longest common prefix of `a` and `b`, eight bytes at a time.
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let words = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .take_while(|(x, y)| x == y)
        .count();
    let at = 8 * words;
    at + a[at..]
        .iter()
        .zip(&b[at..])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The value of a hex digit.
fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Decodes the escape at the start of `escaped` (which starts with `+` or `%`): the
/// byte it stands for and how many bytes it takes. A `%` not followed by two hex
/// digits is itself, as form decoders read it.
pub(crate) fn unescape(escaped: &[u8]) -> (u8, usize) {
    match escaped {
        [b'+', ..] => (b' ', 1),
        [b'%', high, low, ..] => match (hex_digit(*high), hex_digit(*low)) {
            (Some(high), Some(low)) => ((high << 4) | low, 3),
            _ => (b'%', 1),
        },
        _ => (escaped[0], 1),
    }
}

/// The decoded bytes of a name or a value, one at a time: for comparisons, which
/// usually stop within a few bytes.
#[derive(Clone, Copy)]
pub(crate) struct Decoded<'b>(pub(crate) &'b [u8]);

impl Iterator for Decoded<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        let first = *self.0.first()?;
        let (byte, used) = match first {
            b'+' | b'%' => unescape(self.0),
            _ => (first, 1),
        };
        self.0 = &self.0[used..];
        Some(byte)
    }
}
