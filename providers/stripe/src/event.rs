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
            let (word, bit) = ((level - 64) / 64, 1u64 << ((level - 64) % 64));
            if word == self.deeper.len() {
                self.deeper.push(0);
            }
            let slot = &mut self.deeper[word];
            *slot = if object { *slot | bit } else { *slot & !bit };
        }
    }

    /// Whether the innermost open container is an object (`false` when none is open).
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
const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Marks (high bit) every zero byte of `x`, exactly: no false positives from borrows.
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOWS) + LOWS) | x) & HIGHS
}

/// Marks every byte of `x` that ends a run of plain string characters: `"`, `\` and
/// the control characters below 0x20.
#[inline(always)]
fn string_stops(x: u64) -> u64 {
    let quote = zero_bytes(x ^ (ONES * u64::from(b'"')));
    let backslash = zero_bytes(x ^ (ONES * u64::from(b'\\')));
    // a byte below 0x80 whose low seven bits stay below 0x80 after adding 0x60
    let control = !(((x & LOWS) + ONES * 0x60) | x) & HIGHS;
    quote | backslash | control
}

/// A string's position in the body, between its quotes.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
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
        if self.error.is_some() {
            return;
        }
        let limit = limit.min(self.body.len());
        while self.at < limit {
            if let Err(error) = self.step() {
                self.error = Some(error);
                return;
            }
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
            return Err(self.fail(if self.nesting.depth == 0 {
                "expected a JSON value"
            } else {
                "the body ends inside an object or array"
            }));
        }
        Ok(self.event)
    }

    fn fail(&self, reason: &'static str) -> Malformed {
        Malformed {
            reason,
            at: self.at,
        }
    }

    /// Skips whitespace and returns the next byte, if any.
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        while let Some(&byte) = self.body.get(self.at) {
            if !WHITESPACE[usize::from(byte)] {
                return Some(byte);
            }
            self.at += 1;
        }
        None
    }

    /// Consumes one token (or whitespace up to the end of the body).
    fn step(&mut self) -> Result<(), Malformed> {
        let Some(byte) = self.peek() else {
            return Ok(());
        };
        match self.expect {
            Expect::Value => self.value(byte),
            Expect::KeyOrClose if byte == b'}' => self.close(),
            Expect::KeyOrClose => self.member(byte),
            Expect::ValueOrClose if byte == b']' => self.close(),
            Expect::ValueOrClose => self.value(byte),
            Expect::CommaOrClose => match byte {
                b',' => {
                    self.at += 1;
                    if self.nesting.in_object() {
                        let byte = self.peek().ok_or_else(|| self.fail("expected a key"))?;
                        self.member(byte)
                    } else {
                        self.field = Field::Other;
                        self.expect = Expect::Value;
                        Ok(())
                    }
                }
                b'}' if self.nesting.in_object() => self.close(),
                b']' if !self.nesting.in_object() => self.close(),
                _ => Err(self.fail(if self.nesting.in_object() {
                    "expected `,` or `}` after an object member"
                } else {
                    "expected `,` or `]` after an array element"
                })),
            },
            Expect::End => Err(self.fail("trailing characters after the JSON value")),
        }
    }

    /// Returns the role of the innermost open object.
    fn role(&self) -> Role {
        match self.nesting.depth {
            0 => Role::Skipped,
            depth if depth <= self.path => self.roles[depth - 1],
            _ => Role::Skipped,
        }
    }

    /// Parses one `"key": ` (at `byte`, the key's opening quote) and sets up its value.
    fn member(&mut self, byte: u8) -> Result<(), Malformed> {
        if byte != b'"' {
            return Err(self.fail("expected a string key"));
        }
        let role = self.role();
        let key = self.string()?;
        self.field = if role == Role::Skipped {
            Field::Other
        } else {
            // serde_json decodes the keys of every map it deserializes
            let decoded;
            let text: &[u8] = if key.escaped {
                decoded = self.unescape(key)?;
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
            field
        };
        if self.peek() != Some(b':') {
            return Err(self.fail("expected `:` after an object key"));
        }
        self.at += 1;
        self.expect = Expect::Value;
        Ok(())
    }

    /// Parses a value starting at `byte`, or opens the container it starts.
    fn value(&mut self, byte: u8) -> Result<(), Malformed> {
        match byte {
            b'{' => {
                self.at += 1;
                let role = match self.field {
                    Field::Top => Role::Event,
                    Field::Data => Role::Data,
                    Field::Object => Role::Changed,
                    Field::Id | Field::Type | Field::ObjectId => Role::Visited,
                    Field::Other => Role::Skipped,
                };
                self.nesting.push(true);
                if role != Role::Skipped {
                    // only a value read from an object on the path has a role, so the
                    // path ends just above
                    self.roles[self.nesting.depth - 1] = role;
                    self.path = self.nesting.depth;
                }
                self.expect = Expect::KeyOrClose;
                return Ok(());
            }
            b'[' => {
                self.at += 1;
                self.nesting.push(false);
                self.field = Field::Other;
                self.expect = Expect::ValueOrClose;
                return Ok(());
            }
            b'"' => {
                let span = self.string()?;
                if self.field.is_read() {
                    let text = if span.escaped {
                        Cow::Owned(self.unescape(span)?)
                    } else {
                        // the whole body is checked to be UTF-8 string by string
                        Cow::Borrowed(self.text(span))
                    };
                    match self.field {
                        Field::Id => self.event.id = Some(text),
                        Field::Type => self.event.kind = Some(text),
                        Field::ObjectId => self.event.object_id = Some(text),
                        Field::Other | Field::Top | Field::Data | Field::Object => {}
                    }
                }
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(self.fail("expected a JSON value")),
        }
        self.after_value();
        Ok(())
    }

    fn after_value(&mut self) {
        self.expect = if self.nesting.depth == 0 {
            Expect::End
        } else {
            Expect::CommaOrClose
        };
    }

    /// Closes the innermost container (at its closing bracket).
    fn close(&mut self) -> Result<(), Malformed> {
        self.at += 1;
        if self.nesting.depth == self.path {
            self.path -= 1;
        }
        self.nesting.depth -= 1;
        self.after_value();
        Ok(())
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), Malformed> {
        if self.body[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(self.fail("expected `true`, `false` or `null`"))
        }
    }

    /// Checks a number's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Result<(), Malformed> {
        let body = self.body;
        let start = self.at;
        let mut at = start;
        let digits = |at: &mut usize| {
            let from = *at;
            while body.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - from
        };
        if body.get(at) == Some(&b'-') {
            at += 1;
        }
        match body.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => {
                digits(&mut at);
            }
            _ => return Err(self.fail_at("expected a digit in a number", at)),
        }
        if body.get(at) == Some(&b'.') {
            at += 1;
            if digits(&mut at) == 0 {
                return Err(self.fail_at("expected a digit after the decimal point", at));
            }
        }
        if matches!(body.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(body.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            if digits(&mut at) == 0 {
                return Err(self.fail_at("expected a digit in the exponent", at));
            }
        }
        // a number that serde_json would deserialize must fit an f64; ask it, so the
        // limit is exactly its own (this runs only where a field that is read holds a
        // number, which no real event has)
        if self.field.is_read() {
            let text = std::str::from_utf8(&body[start..at]).unwrap_or_default();
            if serde_json::from_str::<serde_json::Number>(text).is_err() {
                return Err(self.fail_at("the number is out of range", start));
            }
        }
        self.at = at;
        Ok(())
    }

    fn fail_at(&self, reason: &'static str, at: usize) -> Malformed {
        Malformed { reason, at }
    }

    /// Scans a string (at its opening quote) and returns where its contents are.
    ///
    /// Eight bytes at a time up to the next quote, backslash or control character;
    /// escapes must be well-formed, and a string with bytes above 0x7f must be UTF-8.
    #[inline(always)]
    fn string(&mut self) -> Result<Span, Malformed> {
        let body = self.body;
        let start = self.at + 1;
        let mut at = start;
        let mut high = 0u64;
        let mut escaped = false;
        loop {
            while let Some(chunk) = body.get(at..at + 8) {
                let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                let stops = string_stops(x);
                if stops != 0 {
                    // only the bytes before the stop belong to the string
                    let before = (stops.trailing_zeros() / 8) as usize;
                    high |= x & HIGHS & ((1u64 << (before * 8)) - 1);
                    at += before;
                    break;
                }
                high |= x & HIGHS;
                at += 8;
            }
            let Some(&byte) = body.get(at) else {
                return Err(self.fail_at("the string never ends", start - 1));
            };
            match byte {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    at = self.escape(at)?;
                }
                0..0x20 => {
                    return Err(self.fail_at("a control character inside a string", at));
                }
                _ => {
                    // fewer than eight bytes are left: one at a time
                    high |= u64::from(byte & 0x80);
                    at += 1;
                }
            }
        }
        if high != 0 && std::str::from_utf8(&body[start..at]).is_err() {
            return Err(self.fail_at("a string that is not UTF-8", start));
        }
        self.at = at + 1;
        Ok(Span {
            start,
            end: at,
            escaped,
        })
    }

    /// Checks the escape at `at` (a backslash) and returns the offset after it.
    fn escape(&self, at: usize) -> Result<usize, Malformed> {
        match self.body.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
            Some(b'u') => match self.body.get(at + 2..at + 6) {
                Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => Ok(at + 6),
                _ => Err(self.fail_at("a `\\u` escape without four hex digits", at)),
            },
            _ => Err(self.fail_at("an invalid escape in a string", at)),
        }
    }

    /// Returns a string's contents as text: unescaped strings only (they are UTF-8,
    /// [`Scanner::string`] checked).
    fn text(&self, span: Span) -> &'a str {
        std::str::from_utf8(&self.body[span.start..span.end]).unwrap_or_default()
    }

    /// Decodes a string's escapes the way `serde_json` decodes a string it
    /// deserializes: a `\u` escape of a surrogate must be a high one followed by a low
    /// one.
    fn unescape(&self, span: Span) -> Result<String, Malformed> {
        let raw = &self.body[span.start..span.end];
        let lone = || self.fail_at("an unpaired surrogate in a `\\u` escape", span.start);
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        while let Some(backslash) = rest.iter().position(|&b| b == b'\\') {
            // the text between escapes is UTF-8: `string` checked, and escapes are ASCII
            out.push_str(std::str::from_utf8(&rest[..backslash]).map_err(|_| lone())?);
            let escape = rest[backslash + 1];
            rest = &rest[backslash + 2..];
            let simple = match escape {
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
            out.push(simple);
        }
        out.push_str(std::str::from_utf8(rest).map_err(|_| lone())?);
        Ok(out)
    }
}

/// Decodes four hex digits (already checked by [`Scanner::escape`]).
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
        assert_eq!(id(br#"{"id":"evt_\u0031\"x"}"#).as_deref(), Some("evt_1\"x"));
        assert_eq!(id(br#"{"i\u0064":"evt_2"}"#).as_deref(), Some("evt_2"));
        assert_eq!(id(br#"{"id":"\ud83d\ude00 \u00e9\n"}"#).as_deref(), Some("\u{1f600} \u{e9}\n"));
        assert_eq!(id("{\"id\":\"caf\u{e9} \\t\"}".as_bytes()).as_deref(), Some("caf\u{e9} \t"));
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
            assert_eq!(id(body).as_deref(), Some("evt_1"), "{}", String::from_utf8_lossy(body));
        }
        // duplicates of other keys are fine, as is a second `object` outside `data`
        assert_eq!(id(br#"{"a":1,"a":2,"object":1,"object":2,"id":"e"}"#).as_deref(), Some("e"));
        // an object where the id belongs: its keys are decoded, duplicates allowed
        assert!(parse(br#"{"id":{"a":1,"a":2}}"#).unwrap().id.is_none());
        assert!(parse(br#"{"id":{"\ud800":1}}"#).is_err());
    }

    #[test]
    fn deep_nesting_is_fine() {
        for depth in [63, 64, 65, 127, 128, 129, 1000, 5000] {
            let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert!(parse(body.as_bytes()).is_ok(), "{depth}");
            let body = format!("{{\"id\":\"e\",\"x\":{}{}}}", "{\"a\":".repeat(depth), "}".repeat(depth).replacen('}', "1}", 1));
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
