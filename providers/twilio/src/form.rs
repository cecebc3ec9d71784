//! A form body's parameters as Twilio signs them: decoded (`+` is a space, `%XX` a
//! byte), sorted by name and then value, identical pairs once, and fed to a MAC
//! without a decoded copy of the body.
//!
//! Parsing borrows every name and value from the body and only notes whether it holds
//! `+` or `%`; sorting compares the sent bytes when neither side needs decoding (the
//! usual case: Twilio's names are plain) and decodes on the fly otherwise; feeding
//! decodes into a small stage that also gathers the many short pieces into few MAC
//! updates. The body is scanned eight bytes at a time for `&`, `=`, `+` and `%`, and
//! a long value is skipped with a vectorized search.

mod decode;
mod stage;
mod word;

use std::cmp::Ordering;

use hmac::Mac;

#[cfg(test)]
use self::decode::Decoded;
use self::decode::Part;
use self::stage::{STAGE, Staged};
use self::word::{bytes_equal, load};

/// One `name=value`.
#[derive(Debug, Clone, Copy)]
struct Param<'b> {
    name: Part<'b>,
    value: Part<'b>,
    /// The name's first eight bytes as a big-endian number, zeros past its end: names
    /// order as these numbers do wherever they differ, which decides most comparisons
    /// in one step.
    key: u64,
}

impl Param<'_> {
    #[inline]
    fn cmp_decoded(&self, other: &Self) -> Ordering {
        let names = if self.name.encoded || other.name.encoded {
            self.name.cmp_decoded(&other.name)
        } else {
            // equal keys (a tie, or a zero byte against the padding) compare in full
            self.key
                .cmp(&other.key)
                .then_with(|| self.name.raw.cmp(other.name.raw))
        };
        names.then_with(|| self.value.cmp_decoded(&other.value))
    }
}

/// A form body's parameters in the order Twilio signs them.
#[derive(Debug, Default)]
pub(crate) struct Params<'b>(Vec<Param<'b>>);

impl<'b> Params<'b> {
    /// Splits `body` at `&` and each piece at its first `=` (a piece without one is a
    /// name with an empty value; empty pieces are skipped, as form decoders skip
    /// them), then sorts and removes identical pairs.
    pub(crate) fn parse(body: &'b [u8]) -> Self {
        let mut params = Vec::new();
        let mut piece = Piece::default();
        let mut at = 0;
        // whether the last word held none of the four bytes
        let mut quiet = false;
        while at < body.len() {
            if piece.equals.is_some() {
                // inside a value: once it holds an escape only the next `&` matters,
                // and after a word without any of the four bytes, only `&`, `+`, `%`
                let skip = if piece.value_encoded {
                    memchr::memchr(b'&', &body[at..])
                } else if quiet {
                    memchr::memchr3(b'&', b'+', b'%', &body[at..])
                } else {
                    Some(0)
                };
                match skip {
                    Some(skip) => at += skip,
                    None => break,
                }
            }
            let word = load(body, at);
            let amps = bytes_equal(word, b'&');
            let equals = bytes_equal(word, b'=');
            let mut hits = amps | equals | bytes_equal(word, b'+') | bytes_equal(word, b'%');
            quiet = hits == 0;
            while hits != 0 {
                let bit = hits & hits.wrapping_neg();
                let found = at + (bit.trailing_zeros() / 8) as usize;
                if amps & bit != 0 {
                    piece.push_to(&mut params, body, found);
                    piece = Piece {
                        start: found + 1,
                        ..Piece::default()
                    };
                } else if equals & bit != 0 {
                    piece.equals.get_or_insert(found);
                } else if piece.equals.is_none() {
                    piece.name_encoded = true;
                } else {
                    piece.value_encoded = true;
                }
                hits ^= bit;
            }
            at += 8;
        }
        piece.push_to(&mut params, body, body.len());
        // stable and run-adaptive: cheap when a sender already orders its parameters
        params.sort_by(Param::cmp_decoded);
        params.dedup_by(|a, b| a.cmp_decoded(b) == Ordering::Equal);
        Self(params)
    }

    /// Feeds every name and then its value, decoded, to `mac`.
    pub(crate) fn feed(&self, mac: &mut impl Mac) {
        let mut staged = Staged {
            mac,
            stage: [0; STAGE + 8],
            len: 0,
        };
        for param in &self.0 {
            staged.push_decoded(param.name);
            staged.push_decoded(param.value);
        }
        staged.flush();
    }

    /// The decoded pairs, for tests.
    #[cfg(test)]
    fn decoded(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.0
            .iter()
            .map(|param| {
                (
                    Decoded(param.name.raw).collect(),
                    Decoded(param.value.raw).collect(),
                )
            })
            .collect()
    }
}

/// The piece of the body being read: where it starts, its first `=`, and whether its
/// name or value holds an escape.
#[derive(Debug, Default)]
struct Piece {
    start: usize,
    equals: Option<usize>,
    name_encoded: bool,
    value_encoded: bool,
}

impl Piece {
    /// Adds the piece, which ends at `end`, to `params`; an empty one is skipped.
    fn push_to<'b>(&self, params: &mut Vec<Param<'b>>, body: &'b [u8], end: usize) {
        if self.start >= end {
            return;
        }
        let (name, value) = match self.equals {
            Some(eq) => (&body[self.start..eq], &body[eq + 1..end]),
            None => (&body[self.start..end], &body[end..end]),
        };
        // eight bytes from the name's start, then only the name's
        let word = load(body, self.start).swap_bytes();
        let key = match name.len() {
            0 => 0,
            len @ 1..8 => word & !(u64::MAX >> (8 * len)),
            _ => word,
        };
        params.push(Param {
            name: Part {
                raw: name,
                encoded: self.name_encoded,
            },
            value: Part {
                raw: value,
                encoded: self.value_encoded,
            },
            key,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a form decoder makes of `body`, in Twilio's order.
    fn reference(body: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = form_urlencoded::parse(body)
            .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs
    }

    #[test]
    fn parameters_are_decoded_sorted_and_counted_once() {
        let params = Params::parse(b"b=2&a=x+y%21&&c&a=x%20y!&=v&d=%zz%4");
        let expected: Vec<(Vec<u8>, Vec<u8>)> = [
            ("", "v"),
            ("a", "x y!"),
            ("b", "2"),
            ("c", ""),
            ("d", "%zz%4"),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        assert_eq!(params.decoded(), expected);
    }

    #[test]
    fn encoded_parts_compare_as_decoded() {
        let part = |raw: &'static str| Part {
            raw: raw.as_bytes(),
            encoded: raw.contains(['+', '%']),
        };
        for (a, b) in [
            ("x%41", "x%42"),
            ("x%41b", "xAc"),
            ("x+a", "x b"),
            ("ab%4", "ab%41"),
            ("ab%%41", "ab%A"),
            ("%2B1415", "%2B1325"),
            ("same%20text", "same+text"),
            ("a%zz", "a%z"),
            ("", "%00"),
        ] {
            let (pa, pb) = (part(a), part(b));
            let expected = Decoded(pa.raw).cmp(Decoded(pb.raw));
            assert_eq!(pa.cmp_decoded(&pb), expected, "{a} {b}");
            assert_eq!(pb.cmp_decoded(&pa), expected.reverse(), "{b} {a}");
        }
    }

    #[test]
    fn long_pieces_bypass_the_stage() {
        let body = format!("b={}&a={}", "y+%41".repeat(300), "x".repeat(600));
        let params = Params::parse(body.as_bytes());
        let mut fed = Recorder(Vec::new());
        params.feed(&mut fed);
        let expected = format!("a{}b{}", "x".repeat(600), "y A".repeat(300));
        assert_eq!(String::from_utf8(fed.0).unwrap(), expected);
    }

    #[test]
    fn a_word_flags_exactly_the_bytes_searched_for() {
        for byte in [b'&', b'=', b'+', b'%'] {
            for other in 0..=255u8 {
                for at in 0..8 {
                    let mut word = [b'a'; 8];
                    word[at] = other;
                    // the neighbours that a borrow would flag with the usual trick
                    if at < 7 {
                        word[at + 1] = byte ^ 1;
                    }
                    let hits = bytes_equal(u64::from_le_bytes(word), byte);
                    let expected = word
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| **b == byte)
                        .fold(0u64, |mask, (i, _)| mask | (0x80 << (8 * i)));
                    assert_eq!(hits, expected, "{byte} {other} {at}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn parsing_agrees_with_a_form_decoder(tokens in prop::collection::vec(
            prop::sample::select(vec![
                "a", "b", "B", "=", "&", "+", "%2F", "%41", "%4", "%", "%zz", "z", "0", " ", "~",
                "\u{e9}", "%C3%A9", "%e2%82%ac", "%FF", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            ]),
            0..60,
        )) {
            let body = tokens.concat().into_bytes();
            let params = Params::parse(&body);
            let decoded = params.decoded();
            // a form decoder replaces bytes that are not UTF-8; Twilio never sends them
            prop_assume!(decoded.iter().all(|(n, v)| std::str::from_utf8(n).is_ok() && std::str::from_utf8(v).is_ok()));
            prop_assert_eq!(&decoded, &reference(&body));

            // the MAC sees the decoded pairs, one after the other
            let mut fed = Recorder(Vec::new());
            params.feed(&mut fed);
            let concatenated: Vec<u8> = decoded.iter().flat_map(|(n, v)| n.iter().chain(v)).copied().collect();
            prop_assert_eq!(fed.0, concatenated);
        }
    }

    /// A MAC that keeps what it is fed, to check the stage.
    struct Recorder(Vec<u8>);

    impl hmac::digest::Update for Recorder {
        fn update(&mut self, data: &[u8]) {
            self.0.extend_from_slice(data);
        }
    }
    impl hmac::digest::OutputSizeUser for Recorder {
        type OutputSize = hmac::digest::consts::U1;
    }
    impl hmac::digest::FixedOutput for Recorder {
        fn finalize_into(self, out: &mut hmac::digest::Output<Self>) {
            out[0] = 0;
        }
    }
    impl hmac::digest::MacMarker for Recorder {}
}
