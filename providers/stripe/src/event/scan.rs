//! The resumable scan: one token per turn, the open containers, and the path to the
//! fields read.

use std::borrow::Cow;

use super::fields::{Event, Field, Role};
use super::lex::{Malformed, Span, WHITESPACE, check_range, number, string_end, unescape};

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
        let role = self.field.object_role();
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
        let (field, seen) = Field::of_key(role, text);
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
        self.event.keep(self.field, text);
        Ok(())
    }
}
