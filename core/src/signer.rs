//! Signing deliveries the way a provider does, for tests and `hookbox sign`.

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};

/// Produces the headers a provider would send with a body.
///
/// Each provider crate implements it, so tests (yours and ours) can build deliveries
/// that verify exactly as real ones do. Providers that sign no timestamp ignore
/// `timestamp`; Stripe ignores `id` (its event id lives in the body).
pub trait Signer: Send + Sync {
    /// Signs `body` as delivery `id` sent at Unix time `timestamp`.
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders;
}

/// Headers in the order and spelling a provider sends them.
///
/// `Display` prints one `Name: value` per line, the form `curl -H` and
/// `hookbox verify --header` take unchanged.
///
/// # Examples
/// ```
/// use hookbox_core::SignedHeaders;
/// let mut headers = SignedHeaders::default();
/// headers.push("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958");
/// assert_eq!(headers.to_string(), "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958\n");
/// assert_eq!(headers.to_header_map().len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignedHeaders(Vec<(&'static str, String)>);

impl SignedHeaders {
    /// Appends a header.
    pub fn push(&mut self, name: &'static str, value: impl Into<String>) {
        self.0.push((name, value.into()));
    }

    /// Returns the headers as `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(name, value)| (*name, value.as_str()))
    }

    /// Returns the value of `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Converts to a [`HeaderMap`] for [`Provider::verify`](crate::Provider::verify).
    /// Pairs that are not valid HTTP (which no signer produces) are skipped.
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.0.len());
        for (name, value) in &self.0 {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                map.append(name, value);
            }
        }
        map
    }
}

impl fmt::Display for SignedHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in &self.0 {
            writeln!(f, "{name}: {value}")?;
        }
        Ok(())
    }
}
