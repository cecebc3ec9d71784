//! Reading the signature header's items, a timestamp and a body field's text.

use hookbox_core::support::{BodyFields, BodyValue};

use crate::kinds::Unit;

/// Returns the signatures in the header `value`: split at the separator, trimmed,
/// each without the prefix; items without the prefix are skipped.
pub(crate) fn signatures<'h>(
    value: &'h str,
    prefix: Option<&'h str>,
    separator: Option<char>,
) -> impl Iterator<Item = &'h str> {
    // a header value never holds NUL, so without a separator it is one item
    value
        .split(separator.unwrap_or('\0'))
        .map(|item| item.trim_matches([' ', '\t']))
        .filter_map(move |item| match prefix {
            Some(prefix) => item.strip_prefix(prefix),
            None => Some(item),
        })
        .filter(|text| !text.is_empty())
}

/// Parses a timestamp in `unit`: ASCII digits only, at most 19 of them. Returns Unix
/// seconds, or why the text is none.
pub(crate) fn parse_timestamp(text: &str, unit: Unit) -> Result<i64, &'static str> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(match unit {
            Unit::Seconds => "the timestamp is not a whole number of seconds since the Unix epoch",
            Unit::Milliseconds => {
                "the timestamp is not a whole number of milliseconds since the Unix epoch"
            }
        });
    }
    let value = text
        .parse::<i64>()
        .map_err(|_| "the timestamp is too large to be a Unix time")?;
    Ok(match unit {
        Unit::Seconds => value,
        Unit::Milliseconds => value / 1000,
    })
}

/// Returns field `index` of `fields` as text: a string, or a number as written.
pub(crate) fn field_text<'f>(fields: &'f BodyFields<'_>, index: usize) -> Option<&'f str> {
    fields.get(index).map(BodyValue::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_split_trim_and_strip() {
        let all =
            |value, prefix, separator| signatures(value, prefix, separator).collect::<Vec<_>>();
        assert_eq!(all("sha256=abc", Some("sha256="), None), ["abc"]);
        assert_eq!(all("abc", Some("sha256="), None), Vec::<&str>::new());
        assert_eq!(all("sha256=", Some("sha256="), None), Vec::<&str>::new());
        assert_eq!(all("v1=a, v0=b ,v1=c", Some("v1="), Some(',')), ["a", "c"]);
        assert_eq!(all("a b", None, Some(' ')), ["a", "b"]);
        assert_eq!(all("a b", None, None), ["a b"]);
    }

    #[test]
    fn timestamps_are_plain_digits() {
        assert_eq!(
            parse_timestamp("1700000000", Unit::Seconds),
            Ok(1_700_000_000)
        );
        assert_eq!(
            parse_timestamp("1700000000999", Unit::Milliseconds),
            Ok(1_700_000_000)
        );
        for bad in ["", "-1", "1.5", " 1", "1e9", "99999999999999999999"] {
            assert!(parse_timestamp(bad, Unit::Seconds).is_err(), "{bad:?}");
        }
    }
}
