//! [`KeptHeaders`], the headers a delivery was verified with, and the one text form
//! of them that every store writes and reads back (see [`KeptHeaders::to_json`]).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::header::{InvalidHeaderName, InvalidHeaderValue};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// How many kept headers live inline in [`KeptHeaders`]: as many as Stripe, GitHub,
/// Svix and Standard Webhooks keep (one to four).
const KEPT_INLINE: usize = 4;

/// The headers a delivery was verified with, in the order they were read, so that it
/// can be verified again later (an inbox stores them beside the body).
///
/// A small list rather than a [`HeaderMap`]: a provider keeps one to seven headers.
/// The first four are stored inline, so that a provider keeping no more allocates
/// nothing for them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeptHeaders {
    /// The first headers, filled in order (a `None` is never followed by a `Some`).
    inline: [Option<(HeaderName, HeaderValue)>; KEPT_INLINE],
    /// The headers after the inline ones.
    more: Vec<(HeaderName, HeaderValue)>,
}

impl KeptHeaders {
    /// An empty list with room for `capacity` headers.
    #[inline(always)]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            inline: Default::default(),
            more: Vec::with_capacity(capacity.saturating_sub(KEPT_INLINE)),
        }
    }

    /// Appends a header.
    #[inline(always)]
    pub fn push(&mut self, name: HeaderName, value: HeaderValue) {
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some((name, value)),
            None => self.more.push((name, value)),
        }
    }

    /// Returns the value of `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&HeaderValue> {
        self.iter()
            .find(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Returns the headers as `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.inline
            .iter()
            .map_while(Option::as_ref)
            .chain(&self.more)
            .map(|(n, v)| (n, v))
    }

    /// Returns how many headers are kept.
    pub fn len(&self) -> usize {
        self.inline.iter().take_while(|slot| slot.is_some()).count() + self.more.len()
    }

    /// Returns `true` when no header is kept.
    pub fn is_empty(&self) -> bool {
        self.inline[0].is_none()
    }

    /// Builds a [`HeaderMap`], to verify the delivery again with a [`Provider`](crate::Provider).
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.len());
        for (name, value) in self.iter() {
            map.append(name.clone(), value.clone());
        }
        map
    }
}

impl fmt::Debug for KeptHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KeptHeaders")
            .field(&DebugList(self))
            .finish()
    }
}

/// Prints the kept headers as one list of `(name, value)` pairs.
struct DebugList<'a>(&'a KeptHeaders);

impl fmt::Debug for DebugList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl FromIterator<(HeaderName, HeaderValue)> for KeptHeaders {
    fn from_iter<I: IntoIterator<Item = (HeaderName, HeaderValue)>>(iter: I) -> Self {
        let mut headers = Self::default();
        for (name, value) in iter {
            headers.push(name, value);
        }
        headers
    }
}

/// The key of a value written as base64.
const BASE64: &str = "base64";

/// How a store wrote a header value beyond ASCII as a JSON string before
/// [`KeptHeaders::to_json`] existed: what a JSON string with a character beyond
/// ASCII means when [`KeptHeaders::from_json`] meets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyText {
    /// One character per byte, of the same number (hookbox-sqlite): read back
    /// exactly.
    Latin1,
    /// The value's bytes as UTF-8 (hookbox-diesel-pg). A value that was not UTF-8
    /// had its invalid bytes replaced by U+FFFD when it was written, and reads back
    /// as written.
    Utf8,
}

/// Why stored headers could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeadersJsonError {
    /// The text is not JSON.
    #[error("the stored headers are not json")]
    Json(#[source] serde_json::Error),
    /// The JSON is not an array of `[name, value]` pairs.
    #[error("the stored headers are not an array of [name, value] pairs (at header {index})")]
    Shape {
        /// The position of the first pair that is wrong (0 when the whole text is).
        index: usize,
    },
    /// A name is not a valid header name.
    #[error("stored header {index} has an invalid name")]
    Name {
        /// The pair's position.
        index: usize,
        /// Why `http` refused it.
        #[source]
        source: InvalidHeaderName,
    },
    /// A value's base64 does not decode.
    #[error("stored header {index} has a value that is not valid base64")]
    Base64 {
        /// The pair's position.
        index: usize,
        /// Why it did not decode.
        #[source]
        source: base64::DecodeError,
    },
    /// A legacy Latin-1 string holds a character beyond U+00FF, which no byte is.
    #[error("stored header {index} has a character that is not latin-1")]
    NotLatin1 {
        /// The pair's position.
        index: usize,
    },
    /// The value's bytes are not a valid header value (a control character).
    #[error("stored header {index} has an invalid value")]
    Value {
        /// The pair's position.
        index: usize,
        /// Why `http` refused it.
        #[source]
        source: InvalidHeaderValue,
    },
}

impl KeptHeaders {
    /// Returns the headers in the text form every store writes: a JSON array of
    /// `[name, value]` pairs, lossless for every byte string a [`HeaderValue`] can
    /// hold, and the same in every store.
    ///
    /// - A value of visible ASCII (with spaces and tabs), which is what every
    ///   provider sends, is a JSON string: an operator reads it as it came.
    /// - Any other value is `{"base64": "…"}`, the standard alphabet with padding.
    ///   A header value may hold obs-text, the bytes 0x80 to 0xFF, which need not
    ///   form UTF-8, so no JSON string can carry them as they are.
    ///
    /// UTF-8 text beyond ASCII is written as base64 too, so that a JSON string
    /// holding a character beyond ASCII can only come from a row written before this
    /// form existed. Those rows are still read: hookbox-sqlite wrote each byte as the
    /// character of the same number (Latin-1), and hookbox-diesel-pg wrote the bytes
    /// through `String::from_utf8_lossy`; [`KeptHeaders::from_json`] takes the
    /// store's old form as a [`LegacyText`]. A row in the current form reads the same
    /// under either.
    ///
    /// # Examples
    /// ```
    /// use hookbox_core::KeptHeaders;
    /// use hookbox_core::http::{HeaderName, HeaderValue};
    ///
    /// let mut headers = KeptHeaders::default();
    /// headers.push(HeaderName::from_static("webhook-id"), HeaderValue::from_static("msg_1"));
    /// headers.push(
    ///     HeaderName::from_static("x-legacy"),
    ///     HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    /// );
    /// assert_eq!(
    ///     headers.to_json(),
    ///     r#"[["webhook-id","msg_1"],["x-legacy",{"base64":"Y2Fm6Q=="}]]"#
    /// );
    /// ```
    pub fn to_json(&self) -> String {
        let pairs = self
            .iter()
            .map(|(name, value)| {
                // visible ASCII, SP and HTAB: `to_str` accepts exactly these
                let value = match value.to_str() {
                    Ok(text) => Value::from(text),
                    Err(_) => {
                        let mut object = Map::with_capacity(1);
                        object.insert(BASE64.into(), STANDARD.encode(value.as_bytes()).into());
                        Value::Object(object)
                    }
                };
                Value::Array(vec![Value::from(name.as_str()), value])
            })
            .collect();
        Value::Array(pairs).to_string()
    }

    /// Reads headers back from [`KeptHeaders::to_json`]'s form, or from a row an
    /// older version of the store wrote in `legacy`'s form.
    ///
    /// # Errors
    /// The text is not such an array, or a name or value in it is not valid.
    ///
    /// # Examples
    /// ```
    /// use hookbox_core::KeptHeaders;
    /// use hookbox_core::spi::LegacyText;
    ///
    /// let headers =
    ///     KeptHeaders::from_json(r#"[["x-legacy",{"base64":"Y2Fm6Q=="}]]"#, LegacyText::Utf8)?;
    /// assert_eq!(headers.get("x-legacy").unwrap().as_bytes(), b"caf\xe9");
    /// // a row hookbox-sqlite wrote before: one character per byte
    /// let old = KeptHeaders::from_json(r#"[["x-legacy","café"]]"#, LegacyText::Latin1)?;
    /// assert_eq!(old, headers);
    /// # Ok::<(), hookbox_core::spi::HeadersJsonError>(())
    /// ```
    pub fn from_json(text: &str, legacy: LegacyText) -> Result<Self, HeadersJsonError> {
        let json: Value = serde_json::from_str(text).map_err(HeadersJsonError::Json)?;
        let Value::Array(pairs) = json else {
            return Err(HeadersJsonError::Shape { index: 0 });
        };
        let mut headers = Self::with_capacity(pairs.len());
        for (index, pair) in pairs.into_iter().enumerate() {
            let Value::Array(pair) = pair else {
                return Err(HeadersJsonError::Shape { index });
            };
            let Ok([Value::String(name), value]) = <[Value; 2]>::try_from(pair) else {
                return Err(HeadersJsonError::Shape { index });
            };
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|source| HeadersJsonError::Name { index, source })?;
            let bytes = value_bytes(value, index, legacy)?;
            let value = HeaderValue::from_bytes(&bytes)
                .map_err(|source| HeadersJsonError::Value { index, source })?;
            headers.push(name, value);
        }
        Ok(headers)
    }
}

/// Returns the bytes of one stored value: a string (ASCII now, `legacy` before) or
/// `{"base64": …}`.
fn value_bytes(
    value: Value,
    index: usize,
    legacy: LegacyText,
) -> Result<Vec<u8>, HeadersJsonError> {
    match value {
        Value::String(text) if text.is_ascii() => Ok(text.into_bytes()),
        Value::String(text) => match legacy {
            LegacyText::Utf8 => Ok(text.into_bytes()),
            LegacyText::Latin1 => text
                .chars()
                .map(|c| u8::try_from(u32::from(c)).ok())
                .collect::<Option<Vec<u8>>>()
                .ok_or(HeadersJsonError::NotLatin1 { index }),
        },
        Value::Object(object) if object.len() == 1 => match object.get(BASE64) {
            Some(Value::String(encoded)) => STANDARD
                .decode(encoded)
                .map_err(|source| HeadersJsonError::Base64 { index, source }),
            _ => Err(HeadersJsonError::Shape { index }),
        },
        _ => Err(HeadersJsonError::Shape { index }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> KeptHeaders {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_bytes(value).unwrap(),
                )
            })
            .collect()
    }

    /// Every byte a header value may hold: HTAB, visible ASCII with SP, obs-text.
    fn allowed_bytes() -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
            .collect()
    }

    #[test]
    fn visible_ascii_stays_readable_and_the_rest_is_base64() {
        let kept = headers(&[
            ("webhook-id", b"msg_1"),
            ("webhook-signature", b"v1,abc= v1,\"quoted\"\t\\"),
            ("x-latin1", b"caf\xe9"),
            ("x-utf8", "café".as_bytes()),
            ("x-empty", b""),
        ]);
        let json = kept.to_json();
        assert_eq!(
            json,
            r#"[["webhook-id","msg_1"],["webhook-signature","v1,abc= v1,\"quoted\"\t\\"],["x-latin1",{"base64":"Y2Fm6Q=="}],["x-utf8",{"base64":"Y2Fmw6k="}],["x-empty",""]]"#
        );
        for legacy in [LegacyText::Latin1, LegacyText::Utf8] {
            assert_eq!(KeptHeaders::from_json(&json, legacy).unwrap(), kept);
        }
    }

    #[test]
    fn every_byte_string_a_header_value_holds_round_trips() {
        let allowed = allowed_bytes();
        // each byte alone, then random strings of allowed bytes
        let mut values: Vec<Vec<u8>> = allowed.iter().map(|&b| vec![b]).collect();
        let mut rng = fastrand::Rng::with_seed(14);
        for _ in 0..2000 {
            let len = rng.usize(0..40);
            values.push(
                (0..len)
                    .map(|_| allowed[rng.usize(..allowed.len())])
                    .collect(),
            );
        }
        for value in values {
            let kept: KeptHeaders = [(
                HeaderName::from_static("x-any"),
                HeaderValue::from_bytes(&value).unwrap(),
            )]
            .into_iter()
            .collect();
            for legacy in [LegacyText::Latin1, LegacyText::Utf8] {
                let back = KeptHeaders::from_json(&kept.to_json(), legacy).unwrap();
                assert_eq!(back.get("x-any").unwrap().as_bytes(), value.as_slice());
            }
        }
    }

    #[test]
    fn old_rows_read_back_in_their_stores_form() {
        // hookbox-sqlite: one character per byte
        let sqlite = r#"[["x-odd","caf\u00e9 \"q\""],["webhook-id","msg_1"]]"#;
        let read = KeptHeaders::from_json(sqlite, LegacyText::Latin1).unwrap();
        assert_eq!(
            read,
            headers(&[("x-odd", b"caf\xe9 \"q\""), ("webhook-id", b"msg_1")])
        );
        // hookbox-diesel-pg: the UTF-8 of the (lossy) string
        let pg = r#"[["x-odd","café"],["x-lossy","caf\ufffd"]]"#;
        let read = KeptHeaders::from_json(pg, LegacyText::Utf8).unwrap();
        assert_eq!(
            read,
            headers(&[
                ("x-odd", "café".as_bytes()),
                ("x-lossy", "caf\u{fffd}".as_bytes())
            ])
        );
        // U+FFFD is no Latin-1 byte
        assert!(matches!(
            KeptHeaders::from_json(pg, LegacyText::Latin1),
            Err(HeadersJsonError::NotLatin1 { index: 1 })
        ));
    }

    #[test]
    fn malformed_text_is_refused_with_the_position() {
        let utf8 = LegacyText::Utf8;
        assert!(matches!(
            KeptHeaders::from_json("not json", utf8),
            Err(HeadersJsonError::Json(_))
        ));
        for (text, at) in [
            (r#"{"a":"b"}"#, 0),
            (r#"[["a","b"],["c"]]"#, 1),
            (r#"[["a","b","c"]]"#, 0),
            (r#"[[1,"b"]]"#, 0),
            (r#"[["a",{"hex":"00"}]]"#, 0),
            (r#"[["a",{"base64":"AA==","x":1}]]"#, 0),
            (r#"[["a",7]]"#, 0),
        ] {
            match KeptHeaders::from_json(text, utf8) {
                Err(HeadersJsonError::Shape { index }) => assert_eq!(index, at, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            KeptHeaders::from_json(r#"[["a b","c"]]"#, utf8),
            Err(HeadersJsonError::Name { index: 0, .. })
        ));
        assert!(matches!(
            KeptHeaders::from_json(r#"[["a",{"base64":"!!"}]]"#, utf8),
            Err(HeadersJsonError::Base64 { index: 0, .. })
        ));
        // a control character is no header value, however it was written
        assert!(matches!(
            KeptHeaders::from_json(r#"[["a",{"base64":"AA=="}]]"#, utf8),
            Err(HeadersJsonError::Value { index: 0, .. })
        ));
        assert!(matches!(
            KeptHeaders::from_json(r#"[["a","\n"]]"#, utf8),
            Err(HeadersJsonError::Value { index: 0, .. })
        ));
    }
}
