//! The scan: one token per turn on the path to the fields read, skipped values
//! followed to their end, and the stop once the three fields are settled.

use std::borrow::Cow;

use super::fields::{Event, Field, Role, SETTLED_ALL};
use super::lex::{
    Malformed, Span, WHITESPACE, container_marks, number, skip_string, string_end, unescape,
};

/// Reads the event's `id`, `type` and `data.object.id` from `body`, stopping once the
/// three are settled.
///
/// # Errors
/// The body stops being JSON before the three fields are settled, or ends before
/// they are (a body without one of them is read to its end).
pub(crate) fn read(body: &[u8]) -> Result<Event<'_>, Malformed> {
    let mut scanner = Scanner::new(body);
    scanner.scan()?;
    scanner.finish()
}

/// What the scanner expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (the body, or an object member's value after `:`).
    Value,
    /// A key or `}` (just after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    /// `,` or `}` (after a member of an object on the path).
    CommaOrClose,
    /// The end of a skipped object or array.
    Skip,
    /// Nothing but whitespace (after the top-level value).
    End,
    /// Nothing: the three fields are settled and the rest is not read.
    Done,
}

/// The scan of one body.
struct Scanner<'a> {
    body: &'a [u8],
    at: usize,
    expect: Expect,
    /// The roles of the open objects on the path to the fields read (at most three:
    /// the event, `data`, `data.object`).
    roles: [Role; 3],
    depth: usize,
    /// How many containers are open inside the value being skipped.
    skipped: usize,
    /// Whether the skip is of the rest of the innermost object on the path, which
    /// closes that object when it ends.
    closing: bool,
    /// What the value being parsed or skipped is to the event.
    field: Field,
    /// The keys on the path seen so far (the first copy of each counts).
    seen: u8,
    /// The fields read or known to be absent; all three stop the scan.
    settled: u8,
    event: Event<'a>,
}

impl<'a> Scanner<'a> {
    fn new(body: &'a [u8]) -> Self {
        Self {
            body,
            at: 0,
            expect: Expect::Value,
            roles: [Role::Event; 3],
            depth: 0,
            skipped: 0,
            closing: false,
            field: Field::Top,
            seen: 0,
            settled: 0,
            event: Event::default(),
        }
    }

    /// Returns the fields once the scan has ended, or why the body ended too soon.
    fn finish(self) -> Result<Event<'a>, Malformed> {
        match self.expect {
            Expect::Done | Expect::End => Ok(self.event),
            Expect::Value if self.depth == 0 => Err(Malformed {
                reason: "expected a JSON value",
                at: self.at,
            }),
            _ => Err(Malformed {
                reason: "the body ends inside an object or array",
                at: self.at,
            }),
        }
    }

    /// The scan loop: one token per turn, the position in a local, until the three
    /// fields are settled or the body ends.
    fn scan(&mut self) -> Result<(), Malformed> {
        let body = self.body;
        let mut at = self.at;
        let fail = |reason, at| Malformed { reason, at };
        while at < body.len() {
            let byte = body[at];
            if self.expect != Expect::Skip && WHITESPACE[usize::from(byte)] {
                at += 1;
                continue;
            }
            match self.expect {
                Expect::Skip => at = self.skip(at),
                Expect::CommaOrClose => match byte {
                    b',' => {
                        at += 1;
                        self.expect = Expect::Key;
                    }
                    b'}' => {
                        at += 1;
                        self.close_object();
                    }
                    _ => return Err(fail("expected `,` or `}` after an object member", at)),
                },
                Expect::Key | Expect::KeyOrClose => {
                    if byte == b'}' && self.expect == Expect::KeyOrClose {
                        at += 1;
                        self.close_object();
                        continue;
                    }
                    if byte != b'"' {
                        return Err(fail("expected a string key", at));
                    }
                    let key = string_end(body, at + 1)?;
                    self.field = self.key_field(key)?;
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
                Expect::Value => match byte {
                    b'"' if self.field.is_kept() => {
                        let span = string_end(body, at + 1)?;
                        self.read_string(span)?;
                        at = span.end + 1;
                        self.after_value(self.field.settles());
                    }
                    b'"' => {
                        at = skip_string(body, at + 1)? + 1;
                        self.after_value(self.field.settles());
                    }
                    b'{' => {
                        at += 1;
                        match self.field.object_role() {
                            Some(role) => self.open_object(role),
                            None => self.start_skip(),
                        }
                    }
                    b'[' => {
                        at += 1;
                        self.start_skip();
                    }
                    b'-' | b'0'..=b'9' => {
                        at = number(body, at)?;
                        self.after_value(self.field.settles());
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
                        self.after_value(self.field.settles());
                    }
                    _ => return Err(fail("expected a JSON value", at)),
                },
                Expect::End => {
                    return Err(fail("trailing characters after the JSON value", at));
                }
                Expect::Done => break,
            }
        }
        self.at = at;
        Ok(())
    }

    /// Follows a skipped object or array from `at` to its end (or the body's):
    /// brackets outside strings, and quotes and backslash escapes, whatever lies
    /// between. Eight bytes at a time: a chunk of no bracket or backslash only counts
    /// its quotes, the marked bytes of any other are handled in turn, so a run of
    /// short strings costs no call per string.
    #[inline]
    fn skip(&mut self, mut at: usize) -> usize {
        let body = self.body;
        // the containers open in the skipped value, whether the skip is in a string,
        // and whether the next byte is escaped, in locals so they stay in registers
        let mut state = (self.skipped, false, false);
        loop {
            let Some(chunk) = body.get(at..at + 8) else {
                // fewer than eight bytes are left
                for (i, &byte) in body[at..].iter().enumerate() {
                    if skip_byte(byte, &mut state) {
                        return self.skipped_to(at + i + 1);
                    }
                }
                self.skipped = state.0;
                return body.len();
            };
            let (quotes, others) =
                container_marks(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            if others == 0 && !state.2 {
                // only quotes: each one enters or leaves a string (the product sums
                // the lanes into the top byte; `count_ones` is no instruction on the
                // baseline x86-64)
                state.1 ^= ((quotes >> 7).wrapping_mul(0x0101_0101_0101_0101) >> 56) & 1 == 1;
                at += 8;
                continue;
            }
            let mut marks = quotes | others;
            if state.2 {
                state.2 = false;
                marks &= !0x80;
            }
            while marks != 0 {
                let i = (marks.trailing_zeros() / 8) as usize;
                marks &= marks - 1;
                let byte = chunk[i];
                if state.1 && byte == b'\\' {
                    // the next byte is escaped: drop its mark, or carry it over
                    if i == 7 {
                        state.2 = true;
                    } else {
                        marks &= !(0x80 << (8 * (i + 1)));
                    }
                } else if skip_byte(byte, &mut state) {
                    return self.skipped_to(at + i + 1);
                }
            }
            at += 8;
        }
    }

    /// Ends a skip at `end`, after the skipped value.
    #[inline]
    fn skipped_to(&mut self, end: usize) -> usize {
        self.skipped = 0;
        if self.closing {
            self.closing = false;
            self.close_object();
        } else {
            self.after_value(self.field.settles());
        }
        end
    }

    #[inline]
    fn start_skip(&mut self) {
        self.skipped = 1;
        self.expect = Expect::Skip;
    }

    /// Records the end of a value that `settles` fields, and stops the scan once all
    /// three are settled.
    #[inline]
    fn after_value(&mut self, settles: u8) {
        self.settled |= settles;
        self.expect = if self.settled == SETTLED_ALL {
            Expect::Done
        } else if self.depth == 0 {
            Expect::End
        } else if self.roles[self.depth - 1].yields() & !self.settled == 0 {
            // nothing more to read in this object (`data` or `data.object` once
            // `data.object.id` is settled): its other members are skipped to its end
            self.skipped = 1;
            self.closing = true;
            Expect::Skip
        } else {
            Expect::CommaOrClose
        };
    }

    /// Opens an object on the path to the fields read.
    #[inline]
    fn open_object(&mut self, role: Role) {
        self.roles[self.depth] = role;
        self.depth += 1;
        self.expect = Expect::KeyOrClose;
    }

    /// Closes the innermost object on the path (at its closing brace).
    #[inline]
    fn close_object(&mut self) {
        self.depth -= 1;
        self.after_value(self.roles[self.depth].settles());
    }

    /// Returns what the value of `key` is to the event, in an object on the path.
    #[inline(never)]
    fn key_field(&mut self, key: Span) -> Result<Field, Malformed> {
        let role = self.roles[self.depth - 1];
        // a key is compared decoded, as `serde_json` compares field names
        let decoded;
        let text: &[u8] = if key.escaped {
            decoded = unescape(self.body, key)?;
            decoded.as_bytes()
        } else {
            &self.body[key.start..key.end]
        };
        let (field, seen) = Field::of_key(role, text, self.seen);
        self.seen = seen;
        Ok(field)
    }

    /// Keeps a string that is read.
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

/// Takes one byte of a skipped value, given the skip's state (the containers open in
/// it, whether it is in a string, whether the byte is escaped); returns whether the
/// value ended.
#[inline(always)]
fn skip_byte(byte: u8, (depth, in_string, escaped): &mut (usize, bool, bool)) -> bool {
    if *escaped {
        *escaped = false;
        return false;
    }
    if *in_string {
        match byte {
            b'"' => *in_string = false,
            b'\\' => *escaped = true,
            _ => {}
        }
        return false;
    }
    match byte {
        b'"' => *in_string = true,
        b'{' | b'[' => *depth += 1,
        b'}' | b']' => {
            *depth -= 1;
            return *depth == 0;
        }
        // a byte after a marked one: nothing
        _ => {}
    }
    false
}
