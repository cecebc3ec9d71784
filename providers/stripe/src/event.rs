//! Reads the three fields verification needs from a Stripe event without building a
//! JSON tree: the event `id`, its `type`, and `data.object.id`.
//!
//! A single forward scan validates the whole body as JSON (RFC 8259, UTF-8) and
//! remembers where those three strings are; strings without escapes are borrowed
//! from the body, so a typical event costs no allocation beyond the `id` the dedupe
//! key keeps. The scan is resumable ([`Scanner::run`] up to a byte offset), so the
//! provider can hash and scan the body in one pass.
//!
//! It reads exactly what `serde_json` reads into a struct with those three fields
//! (every other field skipped as `serde::de::IgnoredAny`), and in addition requires
//! the whole body to be UTF-8: the tests and the `stripe_event` fuzz target compare
//! the two on arbitrary input. What that means in detail:
//! - a field of the wrong shape (a number where the id belongs) reads as absent, and
//!   a body that is JSON but not an object reads as an event without fields;
//! - a second `id`, `type` or `data` at the top, `object` in `data` or `id` in
//!   `data.object` is an error: which one would count is unknowable;
//! - keys at those levels, and those fields' string values, are decoded strictly
//!   (an unpaired surrogate escape such as `\ud800` is an error), strings elsewhere
//!   only need well-formed escapes, as `serde_json` skips them;
//! - a number at those positions must fit an `f64` (`1e400` is an error), numbers
//!   elsewhere only need to be well-formed;
//! - nesting is unbounded (a bit per level, on the heap past 64 levels).

use std::borrow::Cow;
use std::fmt;

/// The fields of a Stripe event that verification reads.
#[derive(Debug, Default)]
pub(crate) struct Event<'a> {
    /// The event id (`evt_…`): the dedupe key.
    pub(crate) id: Option<Cow<'a, str>>,
    /// The event type (`payment_intent.succeeded`, …).
    pub(crate) kind: Option<Cow<'a, str>>,
    /// `data.object.id`: the object the event is about.
    pub(crate) object_id: Option<Cow<'a, str>>,
}

/// Why a body is not a JSON event, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    reason: &'static str,
    at: usize,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.at)
    }
}

/// Parses `body` as a whole.
///
/// # Errors
/// The body is not JSON, or names one of the fields read here twice.
#[cfg(test)]
pub(crate) fn parse(body: &[u8]) -> Result<Event<'_>, Malformed> {
    let mut scanner = Scanner::new(body);
    scanner.run(body.len());
    scanner.finish()
}

/// The role of an object on the path to the fields that are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Skipped: keys and values only need to be well-formed.
    Skipped,
    /// The event itself (the top-level object).
    Event,
    /// The event's `data`.
    Data,
    /// `data.object`.
    Changed,
    /// An object where a string field was expected (`{"id": {…}}`): its keys are
    /// decoded strictly, as `serde_json` does when it skips a map through a visitor.
    Visited,
}

/// What the value being parsed is to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Nothing: skipped.
    Other,
    /// The whole body.
    Top,
    /// The event's `id`.
    Id,
    /// The event's `type`.
    Type,
    /// The event's `data`.
    Data,
    /// `data.object`.
    Object,
    /// `data.object.id`.
    ObjectId,
}

impl Field {
    /// Whether `serde_json` would deserialize this value rather than skip it: its
    /// strings are decoded strictly and its numbers must fit an `f64`.
    fn is_read(self) -> bool {
        self != Self::Other
    }
}

// which of the fields read has been seen, to refuse a second copy
const SEEN_ID: u8 = 1;
const SEEN_TYPE: u8 = 2;
const SEEN_DATA: u8 = 4;
const SEEN_OBJECT: u8 = 8;
const SEEN_OBJECT_ID: u8 = 16;

/// What the scanner expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (the body, an object member's value after `:`, an array element
    /// after `,`).
    Value,
    /// A key or `}` (just after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    /// A value or `]` (just after `[`).
    ValueOrClose,
    /// `,` or the container's closing bracket (after a value).
    CommaOrClose,
    /// Nothing but whitespace (after the top-level value).
    End,
}

/// One bit per open container, set for an object: 64 levels inline, deeper ones on
/// the heap (a body nested that deep is hostile, and pays for itself).
#[derive(Debug, Default)]
struct Nesting {
    depth: usize,
    inline: u64,
    deeper: Vec<u64>,
}

impl Nesting {
    #[inline]
    fn push(&mut self, object: bool) {
        let level = self.depth;
        self.depth += 1;
        if level < 64 {
            let bit = 1u64 << level;
            self.inline = if object {
                self.inline | bit
            } else {
                self.inline & !bit
            };
        } else {
            self.push_deep(level, object);
        }
    }

    #[cold]
    fn push_deep(&mut self, level: usize, object: bool) {
        let (word, bit) = ((level - 64) / 64, 1u64 << ((level - 64) % 64));
        if word == self.deeper.len() {
            self.deeper.push(0);
        }
        let slot = &mut self.deeper[word];
        *slot = if object { *slot | bit } else { *slot & !bit };
    }

    /// Whether the innermost open container is an object (`false` when none is open).
    #[inline]
    fn in_object(&self) -> bool {
        match self.depth.checked_sub(1) {
            None => false,
            Some(level) if level < 64 => self.inline & (1 << level) != 0,
            Some(level) => self.deeper[(level - 64) / 64] & (1 << ((level - 64) % 64)) != 0,
        }
    }
}

/// The resumable scan of one body.
pub(crate) struct Scanner<'a> {
    body: &'a [u8],
    at: usize,
    expect: Expect,
    nesting: Nesting,
    /// The roles of the objects at depths 1..=`path`, the path to the fields read;
    /// every container deeper than that is skipped.
    roles: [Role; 4],
    path: usize,
    /// What the next value is to the event.
    field: Field,
    seen: u8,
    event: Event<'a>,
    error: Option<Malformed>,
}

const WHITESPACE: [bool; 256] = {
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
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

/// Finds the end of the string whose contents start at `start`: eight bytes at a
/// time while they are plain ASCII, the rest (escapes, UTF-8, the last few bytes)
/// in [`string_slow`].
#[inline(always)]
fn string_end(body: &[u8], start: usize) -> Result<Span, Malformed> {
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
fn number(body: &[u8], start: usize) -> Result<usize, Malformed> {
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

impl<'a> Scanner<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Self {
        Self {
            body,
            at: 0,
            expect: Expect::Value,
            nesting: Nesting::default(),
            roles: [Role::Skipped; 4],
            path: 0,
            field: Field::Top,
            seen: 0,
            event: Event::default(),
            error: None,
        }
    }

    /// Scans until at least `limit` bytes are consumed, the body ends, or an error is
    /// found (later calls then do nothing).
    pub(crate) fn run(&mut self, limit: usize) {
        if self.error.is_none()
            && let Err(error) = self.scan(limit.min(self.body.len()))
        {
            self.error = Some(error);
        }
    }

    /// Scans whatever is left and returns the fields.
    ///
    /// # Errors
    /// The body is not JSON, or names one of the fields read here twice.
    pub(crate) fn finish(mut self) -> Result<Event<'a>, Malformed> {
        self.run(self.body.len());
        if let Some(error) = self.error {
            return Err(error);
        }
        if self.expect != Expect::End {
            return Err(Malformed {
                reason: if self.nesting.depth == 0 {
                    "expected a JSON value"
                } else {
                    "the body ends inside an object or array"
                },
                at: self.at,
            });
        }
        Ok(self.event)
    }

    /// The scan loop: one token per turn, the position in a local.
    fn scan(&mut self, limit: usize) -> Result<(), Malformed> {
        let body = self.body;
        let mut at = self.at;
        let fail = |reason, at| Malformed { reason, at };
        while at < limit {
            let byte = body[at];
            if WHITESPACE[usize::from(byte)] {
                at += 1;
                continue;
            }
            match self.expect {
                Expect::CommaOrClose => {
                    let in_object = self.nesting.in_object();
                    match byte {
                        b',' => {
                            at += 1;
                            if in_object {
                                self.expect = Expect::Key;
                            } else {
                                self.field = Field::Other;
                                self.expect = Expect::Value;
                            }
                        }
                        b'}' if in_object => at = self.close(at),
                        b']' if !in_object => at = self.close(at),
                        _ if in_object => {
                            return Err(fail("expected `,` or `}` after an object member", at));
                        }
                        _ => return Err(fail("expected `,` or `]` after an array element", at)),
                    }
                }
                Expect::Key | Expect::KeyOrClose => {
                    if byte == b'}' && self.expect == Expect::KeyOrClose {
                        at = self.close(at);
                        continue;
                    }
                    if byte != b'"' {
                        return Err(fail("expected a string key", at));
                    }
                    let key = string_end(body, at + 1)?;
                    self.field = if self.nesting.depth > self.path {
                        Field::Other
                    } else {
                        self.key_field(key)?
                    };
                    at = key.end + 1;
                    while body.get(at).is_some_and(|&b| WHITESPACE[usize::from(b)]) {
                        at += 1;
                    }
                    if body.get(at) != Some(&b':') {
                        return Err(fail("expected `:` after an object key", at));
                    }
                    at += 1;
                    self.expect = Expect::Value;
                }
                Expect::Value | Expect::ValueOrClose => match byte {
                    b'"' => {
                        let span = string_end(body, at + 1)?;
                        if self.field.is_read() {
                            self.read_string(span)?;
                        }
                        at = span.end + 1;
                        self.after_value();
                    }
                    b'{' => {
                        at += 1;
                        self.open_object();
                    }
                    b'[' => {
                        at += 1;
                        self.nesting.push(false);
                        self.field = Field::Other;
                        self.expect = Expect::ValueOrClose;
                    }
                    b']' if self.expect == Expect::ValueOrClose => at = self.close(at),
                    b'-' | b'0'..=b'9' => {
                        let end = number(body, at)?;
                        if self.field.is_read() {
                            check_range(body, at, end)?;
                        }
                        at = end;
                        self.after_value();
                    }
                    b't' | b'f' | b'n' => {
                        let word: &[u8] = match byte {
                            b't' => b"true",
                            b'f' => b"false",
                            _ => b"null",
                        };
                        if !body[at..].starts_with(word) {
                            return Err(fail("expected `true`, `false` or `null`", at));
                        }
                        at += word.len();
                        self.after_value();
                    }
                    _ => return Err(fail("expected a JSON value", at)),
                },
                Expect::End => {
                    return Err(fail("trailing characters after the JSON value", at));
                }
            }
        }
        self.at = at;
        Ok(())
    }

    #[inline]
    fn after_value(&mut self) {
        self.expect = if self.nesting.depth == 0 {
            Expect::End
        } else {
            Expect::CommaOrClose
        };
    }

    /// Closes the innermost container (at its closing bracket).
    #[inline]
    fn close(&mut self, at: usize) -> usize {
        if self.nesting.depth == self.path {
            self.path -= 1;
        }
        self.nesting.depth -= 1;
        self.after_value();
        at + 1
    }

    /// Opens an object, with a role when the path to the fields read goes through it.
    #[inline]
    fn open_object(&mut self) {
        let role = match self.field {
            Field::Top => Role::Event,
            Field::Data => Role::Data,
            Field::Object => Role::Changed,
            Field::Id | Field::Type | Field::ObjectId => Role::Visited,
            Field::Other => Role::Skipped,
        };
        self.nesting.push(true);
        if role != Role::Skipped {
            // only a value read from an object on the path has a role, so the path
            // ends just above
            self.roles[self.nesting.depth - 1] = role;
            self.path = self.nesting.depth;
        }
        self.expect = Expect::KeyOrClose;
    }

    /// Returns what the value of `key` is to the event, in an object on the path.
    #[inline(never)]
    fn key_field(&mut self, key: Span) -> Result<Field, Malformed> {
        let role = self.roles[self.nesting.depth - 1];
        // serde_json decodes the keys of every map it deserializes
        let decoded;
        let text: &[u8] = if key.escaped {
            decoded = unescape(self.body, key)?;
            decoded.as_bytes()
        } else {
            &self.body[key.start..key.end]
        };
        let (field, seen) = match (role, text) {
            (Role::Event, b"id") => (Field::Id, SEEN_ID),
            (Role::Event, b"type") => (Field::Type, SEEN_TYPE),
            (Role::Event, b"data") => (Field::Data, SEEN_DATA),
            (Role::Data, b"object") => (Field::Object, SEEN_OBJECT),
            (Role::Changed, b"id") => (Field::ObjectId, SEEN_OBJECT_ID),
            _ => (Field::Other, 0),
        };
        if self.seen & seen != 0 {
            return Err(Malformed {
                reason: "a field that identifies the event appears twice",
                at: key.start - 1,
            });
        }
        self.seen |= seen;
        Ok(field)
    }

    /// Keeps a string that is read (or checks it, where it is read but not kept).
    #[inline(never)]
    fn read_string(&mut self, span: Span) -> Result<(), Malformed> {
        let text = if span.escaped {
            Cow::Owned(unescape(self.body, span)?)
        } else {
            // `string_end` checked that it is UTF-8
            Cow::Borrowed(std::str::from_utf8(&self.body[span.start..span.end]).unwrap_or_default())
        };
        match self.field {
            Field::Id => self.event.id = Some(text),
            Field::Type => self.event.kind = Some(text),
            Field::ObjectId => self.event.object_id = Some(text),
            Field::Other | Field::Top | Field::Data | Field::Object => {}
        }
        Ok(())
    }
}

/// Checks that the number at `start..end`, in a field that is read, fits an `f64`:
/// `serde_json` refuses one that does not when it deserializes it, so it is asked,
/// and the limit is exactly its own (no real event has a number there).
#[cold]
fn check_range(body: &[u8], start: usize, end: usize) -> Result<(), Malformed> {
    let text = std::str::from_utf8(&body[start..end]).unwrap_or_default();
    match serde_json::from_str::<serde_json::Number>(text) {
        Ok(_) => Ok(()),
        Err(_) => Err(Malformed {
            reason: "the number is out of range",
            at: start,
        }),
    }
}

/// Decodes a string's escapes the way `serde_json` decodes a string it deserializes:
/// a `\u` escape of a surrogate must be a high one followed by a low one.
#[cold]
fn unescape(body: &[u8], span: Span) -> Result<String, Malformed> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(body: &[u8]) -> Option<String> {
        parse(body).unwrap().id.map(Cow::into_owned)
    }

    #[test]
    fn reads_the_three_fields_and_skips_the_rest() {
        let body = br#"{"id":"evt_1","object":"event","data":{"object":{"amount":5,"id":"pi_1","nested":{"id":"no"}},"previous_attributes":{}},"type":"charge.succeeded"}"#;
        let event = parse(body).unwrap();
        assert_eq!(event.id.as_deref(), Some("evt_1"));
        assert_eq!(event.kind.as_deref(), Some("charge.succeeded"));
        assert_eq!(event.object_id.as_deref(), Some("pi_1"));
        assert!(matches!(event.id, Some(Cow::Borrowed(_))), "no copy");
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        assert_eq!(
            id(br#"{"id":"evt_\u0031\"x"}"#).as_deref(),
            Some("evt_1\"x")
        );
        assert_eq!(id(br#"{"i\u0064":"evt_2"}"#).as_deref(), Some("evt_2"));
        assert_eq!(
            id(br#"{"id":"\ud83d\ude00 \u00e9\n"}"#).as_deref(),
            Some("\u{1f600} \u{e9}\n")
        );
        assert_eq!(
            id("{\"id\":\"caf\u{e9} \\t\"}".as_bytes()).as_deref(),
            Some("caf\u{e9} \t")
        );
    }

    #[test]
    fn values_of_the_wrong_shape_read_as_absent() {
        for body in [
            &br#"{"id":5,"type":null,"data":[{"object":{"id":"x"}}]}"#[..],
            br#"{"id":{"id":"x"},"type":["t"],"data":{"object":"pi_1"}}"#,
            br#"["evt_1","charge.succeeded"]"#,
            br#""evt_1""#,
            b"17",
            b"null",
            b" {} ",
        ] {
            let event = parse(body).unwrap();
            assert_eq!(event.id, None, "{}", String::from_utf8_lossy(body));
            assert_eq!(event.kind, None);
            assert_eq!(event.object_id, None);
        }
    }

    #[test]
    fn not_json_or_ambiguous_ids_are_errors() {
        for body in [
            &b""[..],
            b"   ",
            b"{",
            b"[1,2",
            b"{\"a\":1,}",
            b"[1,]",
            b"{\"a\" 1}",
            b"{1:2}",
            b"[01]",
            b"[1.]",
            b"[-]",
            b"[1e]",
            b"[tru]",
            b"[nul]",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12\"}",
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"\xff\"}",
            b"\xef\xbb\xbf{}",
            br#"{"id":"evt_1"} trailing"#,
            br#"{"id":"evt_1"} {}"#,
            br#"{"id":"evt_1","id":"evt_2"}"#,
            br#"{"id":1,"i\u0064":2}"#,
            br#"{"data":{"object":{"id":"a","id":"b"}}}"#,
            br#"{"data":{"object":1,"object":2}}"#,
            br#"{"type":"a","type":"b"}"#,
            br#"{"data":1,"data":2}"#,
            br#"{"id":"\ud800"}"#,
            br#"{"\udc00":1}"#,
            br#"{"id":1e400}"#,
            br#"{"data":{"object":{"id":-1e999}}}"#,
            b"1e400",
            b"\"\\ud800\"",
            b"{\"id\":\"evt_\xff\"}",
        ] {
            assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn skipped_strings_and_numbers_are_only_checked_for_form() {
        for body in [
            &br#"{"x":"\ud800","id":"evt_1"}"#[..],
            br#"{"x":{"\udc00":1e400},"id":"evt_1"}"#,
            br#"{"data":{"x":[1e400]},"id":"evt_1"}"#,
            br#"{"id":"evt_1","data":{"object":{"nested":{"id":"\ud800"}}}}"#,
        ] {
            assert_eq!(
                id(body).as_deref(),
                Some("evt_1"),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // duplicates of other keys are fine, as is a second `object` outside `data`
        assert_eq!(
            id(br#"{"a":1,"a":2,"object":1,"object":2,"id":"e"}"#).as_deref(),
            Some("e")
        );
        // an object where the id belongs: its keys are decoded, duplicates allowed
        assert!(parse(br#"{"id":{"a":1,"a":2}}"#).unwrap().id.is_none());
        assert!(parse(br#"{"id":{"\ud800":1}}"#).is_err());
    }

    #[test]
    fn deep_nesting_is_fine() {
        for depth in [63, 64, 65, 127, 128, 129, 1000, 5000] {
            let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert!(parse(body.as_bytes()).is_ok(), "{depth}");
            let body = format!(
                "{{\"id\":\"e\",\"x\":{}{}}}",
                "{\"a\":".repeat(depth),
                "}".repeat(depth).replacen('}', "1}", 1)
            );
            assert_eq!(id(body.as_bytes()).as_deref(), Some("e"), "{depth}");
            let unbalanced = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(parse(unbalanced.as_bytes()).is_err());
            let mismatched = format!("{}{}}}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(parse(mismatched.as_bytes()).is_err());
        }
    }

    #[test]
    fn a_resumed_scan_reads_the_same() {
        let body = br#"{"id":"evt_1","object":"event","data":{"object":{"id":"pi_1","s":"a\"b","n":[1,2.5e3,{"x":null}]}},"type":"t"}"#;
        for step in 1..body.len() {
            let mut scanner = Scanner::new(body);
            let mut at = 0;
            while at < body.len() {
                at += step;
                scanner.run(at);
            }
            let event = scanner.finish().unwrap();
            assert_eq!(event.id.as_deref(), Some("evt_1"));
            assert_eq!(event.object_id.as_deref(), Some("pi_1"));
            assert_eq!(event.kind.as_deref(), Some("t"));
        }
    }
}
