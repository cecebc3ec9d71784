//! Reads a few fields of a JSON object (the dedupe key, the event type, a handshake's
//! challenge) without building a JSON tree, for every provider whose facts live in
//! the body.
//!
//! A forward scan reads the body until every field asked for is settled (read, or
//! known to be absent) and stops there: the rest of the body is authenticated by the
//! signature, and is parsed (and so checked) when a handler reads it. Strings without
//! escapes are borrowed from the body, so a typical body costs no allocation.
//! Providers scan only after the signature matched, so only authenticated bytes are
//! ever read.
//!
//! On the paths to the fields (the members of the body and of the objects a path
//! goes through) every token is checked against the JSON grammar, keys are decoded (a
//! key spelled with escapes counts), and the strings read are decoded strictly (an
//! unpaired surrogate escape such as `\ud800` is an error). Every other value is
//! followed only to its end, eight bytes at a time: a skipped string up to its
//! closing quote (its escapes stepped over, its contents unchecked; `memchr2` takes
//! over past its first 16 bytes), a skipped object or array by its brackets, quotes
//! and escapes (brackets are counted, not matched). Once every field under an object
//! is settled, the rest of that object is skipped the same way. So:
//! - a body that is not a JSON object (an array, a string, a number) is refused;
//! - for a body that is a JSON object, the fields are exactly those `serde_json`
//!   reads into structs of those fields (the rest skipped as `serde::de::IgnoredAny`),
//!   except that a key repeated on a path counts once, the **first** copy (a derived
//!   struct refuses such a body, `serde_json::Value` keeps the last copy; providers
//!   never repeat a key, and no one else can sign a body);
//! - a string field is [`BodyValue::Text`], a number [`BodyValue::Number`] (its text
//!   as sent); any other value reads as absent, as does a path through a value that is
//!   not an object;
//! - a body that is not JSON is refused when the error lies on the path before the
//!   stop, or when the body ends before the stop; an error inside a skipped value, or
//!   after the stop, is not seen. A body without one of the fields is read to its end;
//! - nesting is unbounded: a skipped value counts its brackets.
//!
//! `core/tests/body_keys.rs` and the `body_keys` fuzz target compare the reader with
//! `serde_json`.
//!
//! # Examples
//! Stripe's event id, type and the id of the object it is about:
//! ```
//! use hookbox_core::support::BodyKeys;
//!
//! const EVENT: BodyKeys = BodyKeys::new(&[&["id"], &["type"], &["data", "object", "id"]]);
//! let body = br#"{"id":"evt_1","data":{"object":{"id":"pi_1","nested":{"id":"no"}}},"type":"payment_intent.succeeded"}"#;
//! let fields = EVENT.read(body)?;
//! assert_eq!(fields.text(0), Some("evt_1"));
//! assert_eq!(fields.text(1), Some("payment_intent.succeeded"));
//! assert_eq!(fields.text(2), Some("pi_1"));
//!
//! // not an object
//! assert!(EVENT.read(br#"["evt_1"]"#).is_err());
//! # Ok::<(), hookbox_core::support::Malformed>(())
//! ```

mod lex;
mod paths;
mod scan;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

pub use lex::Malformed;
use paths::{MAX_FIELDS, Paths};

/// The fields one provider reads from its bodies: up to eight paths of one to four
/// keys each, built at compile time.
#[derive(Debug, Clone, Copy)]
pub struct BodyKeys {
    paths: Paths,
}

impl BodyKeys {
    /// A reader of `paths`, each a list of keys from the body down to a field:
    /// `&["id"]`, `&["data", "object", "id"]`. [`BodyKeys::read`] returns the fields
    /// in this order.
    ///
    /// # Panics
    /// When there are more than eight paths, a path is empty or has more than four
    /// keys, two paths are the same, or one is the prefix of another. Build it in a
    /// `const`, and a mistake fails the build.
    pub const fn new(paths: &[&'static [&'static str]]) -> Self {
        Self {
            paths: Paths::new(paths),
        }
    }

    /// Reads the fields from `body`, a JSON object, stopping once every one is settled.
    ///
    /// # Errors
    /// [`Malformed`] when the body is not a JSON object, or stops being JSON before
    /// every field is settled.
    pub fn read<'a>(&self, body: &'a [u8]) -> Result<BodyFields<'a>, Malformed> {
        Ok(BodyFields {
            values: scan::read(&self.paths, body)?,
            len: self.paths.fields(),
        })
    }
}

/// Returns `true` when `body` is one JSON value (of any kind), checked in full by
/// `serde_json` without building it: for the failure path of a provider that tells
/// JSON that is not an object from a body that is not JSON.
pub fn is_json(body: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

/// A field's value, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyValue<'a> {
    /// A string, decoded (borrowed from the body when it has no escapes).
    Text(Cow<'a, str>),
    /// A number, as its text in the body (checked against the JSON grammar).
    Number(&'a str),
}

impl BodyValue<'_> {
    /// Returns the string, or `None` for a number.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            Self::Number(_) => None,
        }
    }

    /// Returns the value as text: a string decoded, a number as it was written.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Number(number) => number,
        }
    }
}

/// The fields a [`BodyKeys`] read, in the order of its paths.
#[derive(Debug, Clone)]
pub struct BodyFields<'a> {
    values: [Option<BodyValue<'a>>; MAX_FIELDS],
    len: usize,
}

impl<'a> BodyFields<'a> {
    /// Returns field `index`; `None` when it is absent, neither a string nor a
    /// number, or past the last path.
    pub fn get(&self, index: usize) -> Option<&BodyValue<'a>> {
        self.values.get(index)?.as_ref()
    }

    /// Returns field `index` when it is a string.
    pub fn text(&self, index: usize) -> Option<&str> {
        self.get(index)?.as_text()
    }

    /// Takes field `index` out when it is a string (keeping a borrowed string
    /// borrowed).
    pub fn take_text(&mut self, index: usize) -> Option<Cow<'a, str>> {
        match self.values.get_mut(index)?.take()? {
            BodyValue::Text(text) => Some(text),
            number @ BodyValue::Number(_) => {
                self.values[index] = Some(number);
                None
            }
        }
    }

    /// Returns how many fields were asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns `true` when no field was asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
