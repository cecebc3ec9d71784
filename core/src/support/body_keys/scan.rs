//! The scan: one token per turn on the paths to the fields read, skipped values
//! followed to their end, and the stop once every field is settled.

use std::borrow::Cow;

use super::BodyValue;
use super::lex::{
    Malformed, NOT_AN_OBJECT, Span, WHITESPACE, container_marks, number, skip_string, string_end,
    unescape,
};
use super::paths::{MAX_DEPTH, MAX_FIELDS, Paths, Target};

/// The values read, by field.
pub(super) type Values<'a> = [Option<BodyValue<'a>>; MAX_FIELDS];

/// Reads the fields of `paths` from `body`, stopping once all are settled.
pub(super) fn read<'a>(paths: &Paths, body: &'a [u8]) -> Result<Values<'a>, Malformed> {
    let mut scanner = Scanner::new(paths, body);
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
    /// Nothing: every field is settled and the rest is not read.
    Done,
}

/// What the value being parsed is to the paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Nothing: skipped.
    Other,
    /// The whole body (node 0).
    Top,
    /// An object on the paths, when it is one.
    Node(u8),
    /// A field that is read.
    Leaf(u8),
}

/// The scan of one body.
struct Scanner<'p, 'a> {
    paths: &'p Paths,
    body: &'a [u8],
    at: usize,
    expect: Expect,
    /// The nodes of the open objects on the paths.
    roles: [u8; MAX_DEPTH],
    depth: usize,
    /// How many containers are open inside the value being skipped.
    skipped: usize,
    /// Whether the skip is of the rest of the innermost object on the path, which
    /// closes that object when it ends.
    closing: bool,
    /// What the value being parsed or skipped is.
    field: Field,
    /// The steps seen so far (the first copy of a key counts).
    seen: u32,
    /// The fields read or known to be absent.
    settled: u16,
    /// Every field.
    all: u16,
    values: Values<'a>,
}

impl<'p, 'a> Scanner<'p, 'a> {
    fn new(paths: &'p Paths, body: &'a [u8]) -> Self {
        Self {
            paths,
            body,
            at: 0,
            expect: Expect::Value,
            roles: [0; MAX_DEPTH],
            depth: 0,
            skipped: 0,
            closing: false,
            field: Field::Top,
            seen: 0,
            settled: 0,
            all: paths.leaves(0),
            values: Default::default(),
        }
    }

    /// Returns the values once the scan has ended, or why the body ended too soon.
    fn finish(self) -> Result<Values<'a>, Malformed> {
        match self.expect {
            Expect::Done | Expect::End => Ok(self.values),
            Expect::Value if self.depth == 0 => Err(Malformed {
                reason: NOT_AN_OBJECT,
                at: self.at,
            }),
            _ => Err(Malformed {
                reason: "the body ends inside an object or array",
                at: self.at,
            }),
        }
    }

    /// The fields a value of `field` settles once it is complete without opening an
    /// object on the paths: the field itself, or every field under a node whose value
    /// is not an object.
    #[inline]
    fn settles(&self, field: Field) -> u16 {
        match field {
            Field::Leaf(i) => 1 << i,
            Field::Node(node) => self.paths.leaves(node),
            Field::Other | Field::Top => 0,
        }
    }

    /// The scan loop: one token per turn, the position in a local, until every
    /// field is settled or the body ends.
    fn scan(&mut self) -> Result<(), Malformed> {
        let body = self.body;
        let mut at = self.at;
        let fail = |reason, at| Malformed { reason, at };
        if self.all == 0 {
            // nothing to read: the body must still open an object
            while body.get(at).is_some_and(|&b| WHITESPACE[usize::from(b)]) {
                at += 1;
            }
            return match body.get(at) {
                Some(b'{') => {
                    self.expect = Expect::Done;
                    Ok(())
                }
                _ => Err(fail(NOT_AN_OBJECT, at)),
            };
        }
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
                Expect::Value if self.field == Field::Top && byte != b'{' => {
                    return Err(fail(NOT_AN_OBJECT, at));
                }
                Expect::Value => match byte {
                    b'"' if matches!(self.field, Field::Leaf(_)) => {
                        let span = string_end(body, at + 1)?;
                        self.read_string(span)?;
                        at = span.end + 1;
                        self.after_value(self.settles(self.field));
                    }
                    b'"' => {
                        at = skip_string(body, at + 1)? + 1;
                        self.after_value(self.settles(self.field));
                    }
                    b'{' => {
                        at += 1;
                        match self.field {
                            Field::Top => self.open_object(0),
                            Field::Node(node) => self.open_object(node),
                            Field::Other | Field::Leaf(_) => self.start_skip(),
                        }
                    }
                    b'[' => {
                        at += 1;
                        self.start_skip();
                    }
                    b'-' | b'0'..=b'9' => {
                        let end = number(body, at)?;
                        if let Field::Leaf(i) = self.field {
                            // `number` checked the grammar: ASCII digits and signs
                            let text = std::str::from_utf8(&body[at..end]).unwrap_or_default();
                            self.values[usize::from(i)] = Some(BodyValue::Number(text));
                        }
                        at = end;
                        self.after_value(self.settles(self.field));
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
                        self.after_value(self.settles(self.field));
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
            self.after_value(self.settles(self.field));
        }
        end
    }

    #[inline]
    fn start_skip(&mut self) {
        self.skipped = 1;
        self.expect = Expect::Skip;
    }

    /// Records the end of a value that `settles` fields, and stops the scan once all
    /// are settled.
    #[inline]
    fn after_value(&mut self, settles: u16) {
        self.settled |= settles;
        self.expect = if self.settled == self.all {
            Expect::Done
        } else if self.depth == 0 {
            Expect::End
        } else if self.paths.leaves(self.roles[self.depth - 1]) & !self.settled == 0 {
            // nothing more to read in this object: its other members are skipped to
            // its end
            self.skipped = 1;
            self.closing = true;
            Expect::Skip
        } else {
            Expect::CommaOrClose
        };
    }

    /// Opens an object on the paths.
    #[inline]
    fn open_object(&mut self, node: u8) {
        self.roles[self.depth] = node;
        self.depth += 1;
        self.expect = Expect::KeyOrClose;
    }

    /// Closes the innermost object on the paths (at its closing brace): every field
    /// under it that was not read is absent. The body's own close settles nothing,
    /// so what follows it is still checked.
    #[inline]
    fn close_object(&mut self) {
        self.depth -= 1;
        let node = self.roles[self.depth];
        let settles = if node == 0 {
            0
        } else {
            self.paths.leaves(node)
        };
        self.after_value(settles);
    }

    /// Returns what the value of `key` is, in an object on the paths.
    #[inline(never)]
    fn key_field(&mut self, key: Span) -> Result<Field, Malformed> {
        let node = self.roles[self.depth - 1];
        // a key is compared decoded, as `serde_json` compares field names
        let decoded;
        let text: &[u8] = if key.escaped {
            decoded = unescape(self.body, key)?;
            decoded.as_bytes()
        } else {
            &self.body[key.start..key.end]
        };
        let Some((target, step)) = self.paths.step(node, text) else {
            return Ok(Field::Other);
        };
        let bit = 1u32 << step;
        if self.seen & bit != 0 {
            // a later copy of a key on the paths is skipped
            return Ok(Field::Other);
        }
        self.seen |= bit;
        Ok(match target {
            Target::Node(node) => Field::Node(node),
            Target::Leaf(i) => Field::Leaf(i),
        })
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
        if let Field::Leaf(i) = self.field {
            self.values[usize::from(i)] = Some(BodyValue::Text(text));
        }
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
