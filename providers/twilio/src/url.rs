//! The configured public URL: its checks, its spellings with and without the default port, and the URL Twilio calls for a JSON body.

use std::borrow::Cow;

use hookbox_core::VerifyError;
use sha2::{Digest as _, Sha256};

use crate::consts::BODY_SHA256;

/// Returns the `bodySHA256=<lower-case hex SHA-256 of body>` pair Twilio appends to the
/// URL of a JSON request, for a sender that requests what Twilio would.
///
/// # Examples
/// ```
/// assert_eq!(
///     hookbox_twilio::body_sha256_query(br#"{"property": "value", "boolean": true}"#),
///     "bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
/// );
/// ```
pub fn body_sha256_query(body: &[u8]) -> String {
    let hex = body_hash_hex(body);
    format!(
        "{BODY_SHA256}={}",
        std::str::from_utf8(&hex).expect("hex is ASCII")
    )
}

/// The lower-case hex SHA-256 of `body`.
pub(crate) fn body_hash_hex(body: &[u8]) -> [u8; 64] {
    let mut hex = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(body), &mut hex).expect("64 digits hold 32 bytes");
    hex
}

/// The public URL checked: the text Twilio signs and the same URL written the other
/// way around its scheme's default port.
#[derive(Clone)]
pub(crate) struct PublicUrl {
    /// As configured, without its fragment.
    pub(crate) url: String,
    /// With the default port added or removed; `None` for another port.
    other_port: Option<String>,
}

impl PublicUrl {
    pub(crate) fn parse(url: &str) -> Result<Self, VerifyError> {
        let invalid = |reason: &str| {
            VerifyError::invalid_config(format!(
                "the Twilio public URL {reason}; give the full URL Twilio calls, as entered in the Twilio console (for example `https://example.com/webhooks/twilio`)"
            ))
        };
        let url = url.trim();
        if url.is_empty() {
            return Err(invalid("is empty"));
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid("contains whitespace or control characters"));
        }
        let url = url.split_once('#').map_or(url, |(url, _fragment)| url);
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid(
                "is not absolute: it has no `https://` or `http://`",
            ));
        };
        let default_port = if scheme.eq_ignore_ascii_case("https") {
            443
        } else if scheme.eq_ignore_ascii_case("http") {
            80
        } else {
            return Err(invalid("is not an `https://` or `http://` URL"));
        };
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        let host_port = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            let Some((ipv6, after)) = bracketed.split_once(']') else {
                return Err(invalid("has an IPv6 host without its closing `]`"));
            };
            let port = match after {
                "" => None,
                _ => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| invalid("has text after its IPv6 host"))?,
                ),
            };
            (ipv6, port)
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return Err(invalid("has no host"));
        }
        let port = match port {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(number) if number > 0 && port.bytes().all(|b| b.is_ascii_digit()) => {
                    Some(number)
                }
                _ => return Err(invalid("has a port that is not a number from 1 to 65535")),
            },
        };
        let query = url.split_once('?').map(|(_, query)| query);
        if query.is_some_and(|query| {
            query
                .split('&')
                .any(|pair| pair.split('=').next() == Some(BODY_SHA256))
        }) {
            return Err(VerifyError::invalid_config(format!(
                "the Twilio public URL already has a `{BODY_SHA256}` query parameter, which Twilio appends to the URL of a JSON request; give the URL as entered in the Twilio console, without it"
            )));
        }
        // offsets into `url`: the authority starts after `scheme://`
        let authority_end = scheme.len() + 3 + authority.len();
        let host_port_start = authority_end - host_port.len();
        let other_port = match port {
            None => Some(format!(
                "{}:{default_port}{}",
                &url[..authority_end],
                &url[authority_end..]
            )),
            Some(port) if port == default_port => {
                let host_end = host_port_start + host_port.rfind(':').expect("a port follows `:`");
                Some(format!("{}{}", &url[..host_end], &url[authority_end..]))
            }
            Some(_) => None,
        };
        Ok(Self {
            url: url.to_string(),
            other_port,
        })
    }

    /// The URL's spellings Twilio may have signed, as configured first.
    pub(crate) fn spellings(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.url.as_str()).chain(self.other_port.as_deref())
    }

    /// The URL without any `user:password@`, for `Debug`.
    pub(crate) fn redacted(&self) -> Cow<'_, str> {
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return Cow::Borrowed(&self.url);
        };
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        match authority.rsplit_once('@') {
            Some((_, host)) => Cow::Owned(format!(
                "{scheme}://<redacted>@{host}{}",
                &rest[authority.len()..]
            )),
            None => Cow::Borrowed(&self.url),
        }
    }
}

/// The usual mistakes in a public URL, each with the change that makes it: the other
/// scheme, a trailing `/` added or removed, the query dropped.
pub(crate) fn url_variants(url: &str) -> Vec<(String, &'static str)> {
    let mut variants = Vec::with_capacity(3);
    if let Some(rest) = url.strip_prefix("https://") {
        variants.push((
            format!("http://{rest}"),
            "with `http://` instead of `https://`",
        ));
    } else if let Some(rest) = url.strip_prefix("http://") {
        variants.push((
            format!("https://{rest}"),
            "with `https://` instead of `http://`",
        ));
    }
    let (path, query) = url
        .split_once('?')
        .map_or((url, None), |(p, q)| (p, Some(q)));
    let query_part = query.map(|q| format!("?{q}")).unwrap_or_default();
    match path.strip_suffix('/') {
        Some(trimmed) if !trimmed.ends_with('/') => {
            variants.push((format!("{trimmed}{query_part}"), "without its trailing `/`"));
        }
        Some(_) => {}
        None => variants.push((format!("{path}/{query_part}"), "with a trailing `/`")),
    }
    if query.is_some() {
        variants.push((path.to_string(), "without its query string"));
    }
    variants
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_port_is_added_or_removed() {
        for (url, other) in [
            (
                "https://a.example/p?q=1",
                Some("https://a.example:443/p?q=1"),
            ),
            ("https://a.example:443/p", Some("https://a.example/p")),
            ("http://u:p@a.example", Some("http://u:p@a.example:80")),
            ("http://a.example:80?x", Some("http://a.example?x")),
            ("HTTPS://[::1]/p", Some("HTTPS://[::1]:443/p")),
            ("https://[::1]:443/p", Some("https://[::1]/p")),
            ("https://a.example:8443/p", None),
            ("http://a.example:443/p", None),
        ] {
            let parsed = PublicUrl::parse(url).unwrap();
            assert_eq!(parsed.url, url);
            assert_eq!(parsed.other_port.as_deref(), other, "{url}");
        }
        let parsed = PublicUrl::parse(" https://a.example/p?x=1#rc=3&rp=all\n").unwrap();
        assert_eq!(parsed.url, "https://a.example/p?x=1");
        assert_eq!(
            PublicUrl::parse("https://user:secret@a.example/p")
                .unwrap()
                .redacted(),
            "https://<redacted>@a.example/p"
        );
    }

    #[test]
    fn variants_name_the_change() {
        let variants = url_variants("https://a.example/p/?x=1");
        let urls: Vec<&str> = variants.iter().map(|(url, _)| url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://a.example/p/?x=1",
                "https://a.example/p?x=1",
                "https://a.example/p/"
            ]
        );
        let variants = url_variants("http://a.example");
        let urls: Vec<&str> = variants.iter().map(|(url, _)| url.as_str()).collect();
        assert_eq!(urls, ["https://a.example", "http://a.example/"]);
    }
}
