//! Short text a delivery owns, kept inline so that verifying allocates nothing for it.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// How many bytes a [`DeliveryText`] keeps inline: every delivery id, source name and
/// event type the built-in providers meet, and Stripe's `data.object.id:type` for all
/// but the longest event types, so that the value is 64 bytes in all.
const INLINE: usize = 62;

/// A string a delivery owns: a delivery id, a source, a tenant, an event type or a
/// correlation id.
///
/// Up to 62 bytes are kept inline and longer text on the heap. Verification copies
/// these few short strings out of the request, and a heap allocation for each cost
/// more than a tenth of a 1 KiB verification; inline they cost a copy. Reading one
/// back ([`DeliveryText::as_str`]) checks the inline bytes are UTF-8 again, which safe
/// code cannot skip and which, for text this short, takes a few nanoseconds.
///
/// Equality, ordering, hashing and formatting are those of the text.
///
/// # Examples
/// ```
/// use hookbox_core::DeliveryText;
/// let id = DeliveryText::from("evt_1NG8Du2eZvKYlo2CUI79vXWy");
/// assert_eq!(id.as_str(), "evt_1NG8Du2eZvKYlo2CUI79vXWy");
/// let correlation = DeliveryText::concat(&["pi_1", ":", "payment_intent.succeeded"]);
/// assert_eq!(correlation, DeliveryText::from("pi_1:payment_intent.succeeded".to_string()));
/// ```
#[derive(Clone)]
pub struct DeliveryText(Repr);

#[derive(Clone)]
enum Repr {
    /// `len` bytes of `bytes`, copied whole from `str`s, so always UTF-8.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl DeliveryText {
    /// Joins `parts` into one text without a temporary `String`: a provider that
    /// derives an id from several fields (Stripe's `object:type`) builds it in place.
    pub fn concat(parts: &[&str]) -> Self {
        let total: usize = parts.iter().map(|part| part.len()).sum();
        if total > INLINE {
            return Self(Repr::Heap(parts.concat().into_boxed_str()));
        }
        let mut bytes = [0u8; INLINE];
        let mut len = 0;
        for part in parts {
            bytes[len..len + part.len()].copy_from_slice(part.as_bytes());
            len += part.len();
        }
        Self(Repr::Inline {
            // at most INLINE, which is below 256
            len: len as u8,
            bytes,
        })
    }

    /// Returns the text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => std::str::from_utf8(&bytes[..usize::from(*len)])
                .expect("inline text is copied whole from `str`s"),
            Repr::Heap(text) => text,
        }
    }
}

impl From<&str> for DeliveryText {
    #[inline]
    fn from(text: &str) -> Self {
        if text.len() > INLINE {
            return Self(Repr::Heap(text.into()));
        }
        let mut bytes = [0u8; INLINE];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Self(Repr::Inline {
            // at most INLINE, which is below 256
            len: text.len() as u8,
            bytes,
        })
    }
}

impl From<&String> for DeliveryText {
    fn from(text: &String) -> Self {
        Self::from(text.as_str())
    }
}

impl From<String> for DeliveryText {
    /// Keeps a long string's buffer; copies a short one inline (and frees it).
    fn from(text: String) -> Self {
        if text.len() > INLINE {
            Self(Repr::Heap(text.into_boxed_str()))
        } else {
            Self::from(text.as_str())
        }
    }
}

impl From<Box<str>> for DeliveryText {
    fn from(text: Box<str>) -> Self {
        if text.len() > INLINE {
            Self(Repr::Heap(text))
        } else {
            Self::from(&*text)
        }
    }
}

impl Deref for DeliveryText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for DeliveryText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for DeliveryText {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for DeliveryText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for DeliveryText {}

impl PartialEq<str> for DeliveryText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DeliveryText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for DeliveryText {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DeliveryText {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for DeliveryText {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for DeliveryText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for DeliveryText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use super::*;

    fn hash(value: &impl Hash) -> u64 {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn short_and_long_text_read_back_alike() {
        for len in [0, 1, 36, INLINE - 1, INLINE, INLINE + 1, 300] {
            let text: String = "é".repeat(len / 2) + &"x".repeat(len % 2);
            let from_str = DeliveryText::from(text.as_str());
            let from_string = DeliveryText::from(text.clone());
            let from_box = DeliveryText::from(text.clone().into_boxed_str());
            let joined = DeliveryText::concat(&[&text[..len / 2 * 2], &text[len / 2 * 2..]]);
            for value in [&from_str, &from_string, &from_box, &joined] {
                assert_eq!(value.as_str(), text);
                assert_eq!(value, &from_str);
                assert_eq!(hash(value), hash(&from_str));
                assert_eq!(value.to_string(), text);
                assert_eq!(format!("{value:?}"), format!("{text:?}"));
            }
        }
    }

    #[test]
    fn ordering_is_the_texts() {
        let a = DeliveryText::from("a");
        let long = DeliveryText::from("b".repeat(100));
        assert!(a < long);
        assert_eq!(a.cmp(&a.clone()), Ordering::Equal);
        assert_eq!(std::mem::size_of::<DeliveryText>(), 64);
    }
}
