//! The JSON grammar's tokens: strings that are read (eight bytes at a time while they
//! are plain ASCII, then checked in full), strings and containers that are skipped
//! (followed only to their end), escapes, numbers, and the errors that name where a
//! body stops being JSON.

use std::fmt;

/// Why a body is not a JSON object with the fields a [`BodyKeys`](super::BodyKeys)
/// reads, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub(super) reason: &'static str,
    pub(super) at: usize,
}

impl Malformed {
    /// Returns what is wrong, in a few words.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// Returns `true` when the body does not start with an object (it may still be
    /// some other JSON value: an array, a string, a number).
    pub fn is_not_an_object(&self) -> bool {
        self.reason == NOT_AN_OBJECT
    }

    /// Returns the offset in the body where it went wrong.
    pub fn offset(&self) -> usize {
        self.at
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.at)
    }
}

impl std::error::Error for Malformed {}

/// The reason given for a body that does not start with an object.
pub(super) const NOT_AN_OBJECT: &str = "expected a JSON object";

pub(super) const WHITESPACE: [bool; 256] = {
    let mut table = [false; 256];
    table[b' ' as usize] = true;
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Marks (high bit) the bytes of `x` that end a run of plain ASCII string
/// characters: `"`, `\`, the control characters below 0x20, and any byte above 0x7f.
///
/// The usual "has a zero byte" arithmetic can mark a byte after a marked one too (a
/// borrow carries upward), never one before it, so the lowest mark is exact: that is
/// the only one used.
#[inline(always)]
fn string_stops(x: u64) -> u64 {
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    let low = quote.wrapping_sub(ONES) | backslash.wrapping_sub(ONES) | x.wrapping_sub(ONES * 0x20);
    ((low & !x) | x) & HIGHS
}

/// A string's position in the body, between its quotes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) escaped: bool,
}

/// Finds the end of the string whose contents start at `start`: eight bytes at a
/// time while they are plain ASCII, the rest (escapes, UTF-8, the last few bytes)
/// in [`string_slow`].
#[inline(always)]
pub(super) fn string_end(body: &[u8], start: usize) -> Result<Span, Malformed> {
    let mut at = start;
    while let Some(chunk) = body.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let stops = string_stops(x);
        if stops != 0 {
            at += (stops.trailing_zeros() / 8) as usize;
            if body[at] == b'"' {
                return Ok(Span {
                    start,
                    end: at,
                    escaped: false,
                });
            }
            break;
        }
        at += 8;
    }
    string_slow(body, start, at)
}

/// Finishes a string from `at`: checks escapes and control characters, and that a
/// string with bytes above 0x7f is UTF-8.
#[inline(never)]
fn string_slow(body: &[u8], start: usize, mut at: usize) -> Result<Span, Malformed> {
    let mut escaped = false;
    let mut non_ascii = false;
    loop {
        if let Some(chunk) = body.get(at..at + 8) {
            let stops = string_stops(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            if stops == 0 {
                at += 8;
                continue;
            }
            at += (stops.trailing_zeros() / 8) as usize;
        }
        let Some(&byte) = body.get(at) else {
            return Err(Malformed {
                reason: "the string never ends",
                at: start - 1,
            });
        };
        match byte {
            b'"' => break,
            b'\\' => {
                escaped = true;
                at = escape(body, at)?;
            }
            0..0x20 => {
                return Err(Malformed {
                    reason: "a control character inside a string",
                    at,
                });
            }
            0x80.. => {
                non_ascii = true;
                at += 1;
            }
            _ => at += 1,
        }
    }
    if non_ascii && std::str::from_utf8(&body[start..at]).is_err() {
        return Err(Malformed {
            reason: "a string that is not UTF-8",
            at: start,
        });
    }
    Ok(Span {
        start,
        end: at,
        escaped,
    })
}

/// Checks the escape at `at` (a backslash) and returns the offset after it.
fn escape(body: &[u8], at: usize) -> Result<usize, Malformed> {
    match body.get(at + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
        Some(b'u') => match body.get(at + 2..at + 6) {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => Ok(at + 6),
            _ => Err(Malformed {
                reason: "a `\\u` escape without four hex digits",
                at,
            }),
        },
        _ => Err(Malformed {
            reason: "an invalid escape in a string",
            at,
        }),
    }
}

/// Returns the offset of the quote that ends the skipped string whose contents start
/// at `at`: only quotes and backslash escapes are followed (what a string holds is
/// not checked). The first bytes are searched eight at a time, the rest of a long
/// string by `memchr2` (which pays a call for its vector loop).
#[inline]
pub(super) fn skip_string(body: &[u8], mut at: usize) -> Result<usize, Malformed> {
    let start = at;
    let mut short = 2;
    loop {
        let found = match body.get(at..at + 8) {
            Some(chunk) if short > 0 => {
                short -= 1;
                let marks = string_marks(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
                if marks == 0 {
                    at += 8;
                    continue;
                }
                Some((marks.trailing_zeros() / 8) as usize)
            }
            _ => body
                .get(at..)
                .and_then(|rest| memchr::memchr2(b'"', b'\\', rest)),
        };
        let Some(found) = found else {
            return Err(Malformed {
                reason: "the string never ends",
                at: start - 1,
            });
        };
        at += found;
        if body[at] == b'"' {
            return Ok(at);
        }
        // the escaped byte is never the end, whatever it is
        at += 2;
    }
}

/// Marks (high bit) the bytes of `x` that are zero, and possibly bytes above a zero
/// one (a borrow carries upward): callers look at each marked byte.
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x
}

/// Marks the quotes and backslashes of `x` (and perhaps bytes after them).
#[inline(always)]
fn string_marks(x: u64) -> u64 {
    (zero_bytes(x ^ (ONES * u64::from(b'"'))) | zero_bytes(x ^ (ONES * u64::from(b'\\')))) & HIGHS
}

/// Marks (high bit) exactly the bytes of `x` that are quotes.
#[inline(always)]
fn exact_quotes(x: u64) -> u64 {
    const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let y = x ^ (ONES * u64::from(b'"'));
    !(((y & LOWS) + LOWS) | y) & HIGHS
}

/// Splits the bytes of `x` that matter in a skipped container: exactly its quotes,
/// and its backslashes, `{`, `}`, `[` and `]` (perhaps with bytes after one of
/// those, which callers tell apart by looking at each).
#[inline(always)]
pub(super) fn container_marks(x: u64) -> (u64, u64) {
    // `[` and `]` are `{` and `}` without 0x20
    let upper = x & (ONES * 0xdf);
    let others = zero_bytes(x ^ (ONES * u64::from(b'\\')))
        | zero_bytes(upper ^ (ONES * u64::from(b'[')))
        | zero_bytes(upper ^ (ONES * u64::from(b']')));
    (exact_quotes(x), others & HIGHS)
}

/// Returns the offset after the digits at `at`.
#[inline(always)]
fn digits(body: &[u8], mut at: usize) -> usize {
    while body.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    at
}

/// Checks a number's grammar at `start`, `-? (0 | [1-9][0-9]*) (. [0-9]+)?
/// ([eE] [+-]? [0-9]+)?`, and returns the offset after it.
#[inline(always)]
pub(super) fn number(body: &[u8], start: usize) -> Result<usize, Malformed> {
    let fail = |reason, at| Err(Malformed { reason, at });
    let mut at = start;
    if body.get(at) == Some(&b'-') {
        at += 1;
    }
    match body.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at = digits(body, at + 1),
        _ => return fail("expected a digit in a number", at),
    }
    if body.get(at) == Some(&b'.') {
        let after = digits(body, at + 1);
        if after == at + 1 {
            return fail("expected a digit after the decimal point", after);
        }
        at = after;
    }
    if matches!(body.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(body.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let after = digits(body, at);
        if after == at {
            return fail("expected a digit in the exponent", after);
        }
        at = after;
    }
    Ok(at)
}

/// Decodes a string's escapes the way `serde_json` decodes a string it deserializes:
/// a `\u` escape of a surrogate must be a high one followed by a low one.
#[cold]
pub(super) fn unescape(body: &[u8], span: Span) -> Result<String, Malformed> {
    let raw = &body[span.start..span.end];
    let lone = || Malformed {
        reason: "an unpaired surrogate in a `\\u` escape",
        at: span.start,
    };
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(backslash) = rest.iter().position(|&b| b == b'\\') {
        // the text between escapes is UTF-8: `string_end` checked, and escapes are ASCII
        out.push_str(std::str::from_utf8(&rest[..backslash]).map_err(|_| lone())?);
        let escape = rest[backslash + 1];
        rest = &rest[backslash + 2..];
        let decoded = match escape {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            _ => {
                let unit = hex4(&rest[..4]);
                rest = &rest[4..];
                let code = match unit {
                    0xd800..=0xdbff => {
                        let low = match rest {
                            [b'\\', b'u', a, b, c, d, ..] => hex4(&[*a, *b, *c, *d]),
                            _ => return Err(lone()),
                        };
                        if !(0xdc00..=0xdfff).contains(&low) {
                            return Err(lone());
                        }
                        rest = &rest[6..];
                        0x1_0000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(low) - 0xdc00)
                    }
                    0xdc00..=0xdfff => return Err(lone()),
                    unit => u32::from(unit),
                };
                char::from_u32(code).ok_or_else(lone)?
            }
        };
        out.push(decoded);
    }
    out.push_str(std::str::from_utf8(rest).map_err(|_| lone())?);
    Ok(out)
}

/// Decodes four hex digits (already checked by [`escape`]).
fn hex4(digits: &[u8]) -> u16 {
    digits.iter().fold(0, |n, &d| {
        let value = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d.wrapping_sub(b'A').wrapping_add(10),
        };
        (n << 4) | u16::from(value & 0x0f)
    })
}
