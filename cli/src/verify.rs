//! `hookbox verify`: one delivery in, one JSON line out.
#![allow(clippy::print_stdout)] // the JSON line on stdout is the command's output

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::ArgPredicate;
use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    HandshakeReply, Secrets, Verified, VerifiedDelivery, VerifyError, VerifyOptions,
};
use serde::Serialize;

use crate::providers::{self, ProviderConfig, ProviderName};
use crate::sign::read_scheme;
use crate::{UsageError, read_body};

pub(crate) const AFTER_HELP: &str = "\
Output: one JSON line on stdout.
  verified: {\"ok\":true,\"provider\":…,\"dedupe_key\":…,\"source\":…,\"tenant\":…,\"scope\":…,
             \"event_type\":…,\"correlation_id\":…,\"signed_at\":…,\"body_bytes\":…}
  handshake: {\"ok\":true,\"provider\":…,\"handshake\":true,\"kind\":…,
             \"reply\":{\"status\":…,\"content_type\":…,\"body\":…}}
             (verified; the answer an edge sends, nothing stored)
  rejected: {\"ok\":false,\"error\":\"<kind>\",\"message\":\"<what to fix>\"}
  kinds: missing_header, malformed_header, invalid_secret, invalid_config, signature_mismatch,
         timestamp_too_old, timestamp_in_future, missing_dedupe_key, malformed_body

Exit status: 0 verified, 1 rejected, 2 usage error (message on stderr).

Example:
  hookbox verify --provider github --secret \"$SECRET\" --body-file body.json \\
    --header 'X-Hub-Signature-256: sha256=757107ea…' --header 'X-GitHub-Delivery: 72d3…'";

/// Arguments of `hookbox verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The sender whose signature scheme to check (`custom` with --scheme, which
    /// implies it).
    #[arg(
        long,
        value_enum,
        required = false,
        required_unless_present = "scheme",
        default_value_if("scheme", ArgPredicate::IsPresent, "custom")
    )]
    provider: ProviderName,

    /// A TOML file describing a provider hookbox has no crate for (see
    /// `hookbox_custom::Scheme::from_toml`); implies `--provider custom`.
    #[arg(long, value_name = "PATH")]
    scheme: Option<PathBuf>,

    /// The URL the provider signed, for Twilio and Square: the URL configured at the
    /// provider, with its query string, whatever address the request reached.
    #[arg(long, visible_alias = "public-url", value_name = "URL")]
    url: Option<String>,

    /// A signing secret, used exactly as given (no trimming). Repeat it during a
    /// rotation: any secret matching any signature passes.
    #[arg(
        long = "secret",
        value_name = "SECRET",
        required = true,
        allow_hyphen_values = true
    )]
    secrets: Vec<String>,

    /// A request header as 'Name: value'. Repeatable; names are case-insensitive and a
    /// repeated name is sent twice.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<OsString>,

    /// The file holding the raw request body, byte for byte.
    #[arg(long, value_name = "PATH")]
    body_file: PathBuf,

    /// The time to verify at, in Unix seconds [default: this machine's clock].
    #[arg(long, value_name = "UNIX_SECONDS", value_parser = parse_now, allow_negative_numbers = true)]
    now: Option<OffsetDateTime>,

    /// How far a signed timestamp may be from now, in seconds, in either direction
    /// [default: the provider's: 300; Twitch 600, Paddle 5, Linear 60; a scheme's own].
    /// Ignored by providers that
    /// sign no timestamp (GitHub, Shopify).
    #[arg(long, value_name = "SECONDS")]
    tolerance: Option<u64>,
}

/// Verifies the delivery and prints the verdict.
///
/// # Errors
/// [`UsageError`] when a header is not valid HTTP or the body file cannot be read.
pub(crate) fn run(args: &VerifyArgs) -> Result<ExitCode, UsageError> {
    let headers = header_map(&args.headers)?;
    let scheme = args.scheme.as_deref().map(read_scheme).transpose()?;
    let body = read_body(&args.body_file)?;
    let now = args.now.unwrap_or_else(OffsetDateTime::now_utc);
    // a local file is not an attack surface: the edge's body limit does not apply
    let options = VerifyOptions::default()
        .tolerance(args.tolerance.map_or_else(
            || args.provider.default_tolerance(scheme.as_ref()),
            Duration::from_secs,
        ))
        .max_body_bytes(usize::MAX);

    let config = ProviderConfig {
        public_url: args.url.as_deref(),
        scheme: scheme.as_ref(),
    };
    let verdict = providers::provider(
        args.provider,
        Secrets::from(args.secrets.clone()),
        options,
        &config,
    )
    .and_then(|provider| {
        let verified = provider.verify_request(&headers, body, now)?;
        Ok((provider.name(), verified))
    });
    let (line, status) = match &verdict {
        Ok((_, Verified::Event(delivery))) => (
            serde_json::to_string(&Event::new(delivery)),
            ExitCode::SUCCESS,
        ),
        Ok((provider, Verified::Handshake(reply))) => (
            serde_json::to_string(&Handshake::new(provider, reply)),
            ExitCode::SUCCESS,
        ),
        Err(err) => (
            serde_json::to_string(&Rejected::new(err)),
            ExitCode::FAILURE,
        ),
    };
    // serializing strings and integers cannot fail; if it ever did, say so rather
    // than print half a line
    let line = line.map_err(|err| UsageError(format!("cannot print the result: {err}")))?;
    println!("{line}");
    Ok(status)
}

/// The success line of an event.
#[derive(Debug, Serialize)]
struct Event<'a> {
    ok: bool,
    provider: &'a str,
    dedupe_key: &'a str,
    source: &'a str,
    tenant: Option<&'a str>,
    scope: String,
    event_type: Option<&'a str>,
    correlation_id: Option<&'a str>,
    signed_at: Option<i64>,
    body_bytes: usize,
}

impl<'a> Event<'a> {
    fn new(delivery: &'a VerifiedDelivery) -> Self {
        let key = delivery.dedupe_key();
        Self {
            ok: true,
            provider: delivery.provider(),
            dedupe_key: key.delivery_id(),
            source: key.source(),
            tenant: key.tenant(),
            scope: key.scope(),
            event_type: delivery.event_type(),
            correlation_id: delivery.correlation_id(),
            signed_at: delivery.signed_at().map(OffsetDateTime::unix_timestamp),
            body_bytes: delivery.body().len(),
        }
    }
}

/// The success line of a handshake: verified, and the answer an edge sends.
#[derive(Debug, Serialize)]
struct Handshake<'a> {
    ok: bool,
    provider: &'a str,
    handshake: bool,
    kind: &'a str,
    reply: Reply,
}

/// A handshake's reply as the edge sends it.
#[derive(Debug, Serialize)]
struct Reply {
    status: u16,
    content_type: Option<&'static str>,
    /// The body as text (every provider's reply is text); bytes that are not UTF-8
    /// would print as U+FFFD.
    body: String,
}

impl<'a> Handshake<'a> {
    fn new(provider: &'a str, reply: &'a HandshakeReply) -> Self {
        Self {
            ok: true,
            provider,
            handshake: true,
            kind: reply.kind(),
            reply: Reply {
                status: reply.status().as_u16(),
                content_type: reply.content_type(),
                body: String::from_utf8_lossy(reply.body()).into_owned(),
            },
        }
    }
}

/// The failure line.
#[derive(Debug, Serialize)]
struct Rejected {
    ok: bool,
    error: &'static str,
    message: String,
}

impl Rejected {
    fn new(err: &VerifyError) -> Self {
        Self {
            ok: false,
            error: err.kind(),
            message: err.to_string(),
        }
    }
}

/// Parses `--now`: Unix seconds within the range a date can hold.
fn parse_now(text: &str) -> Result<OffsetDateTime, String> {
    let secs: i64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of Unix seconds"))?;
    OffsetDateTime::from_unix_timestamp(secs)
        .map_err(|_| format!("{secs} is outside the range of dates (years -9999 to 9999)"))
}

/// Builds the request headers from the `--header` arguments, appending repeated names.
fn header_map(args: &[OsString]) -> Result<HeaderMap, UsageError> {
    let mut headers = HeaderMap::with_capacity(args.len());
    for arg in args {
        // raw bytes, not UTF-8: a header with a stray non-ASCII byte must reach the
        // provider, which reports it as malformed_header
        let (name, value) = parse_header(arg.as_encoded_bytes())?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// Splits `Name: value` at the first colon and strips the optional whitespace around
/// the value, as an HTTP server does; nothing else is changed.
fn parse_header(arg: &[u8]) -> Result<(HeaderName, HeaderValue), UsageError> {
    let shown = String::from_utf8_lossy(arg);
    let mut parts = arg.splitn(2, |&b| b == b':');
    let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
        return Err(UsageError(format!(
            "--header `{shown}` has no colon; write it as 'Name: value'"
        )));
    };
    let name = HeaderName::from_bytes(name).map_err(|_| {
        UsageError(format!(
            "--header `{shown}`: `{}` is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only, no spaces)",
            String::from_utf8_lossy(name)
        ))
    })?;
    let value = HeaderValue::from_bytes(trim_optional_whitespace(value)).map_err(|_| {
        UsageError(format!(
            "--header `{}`: the value holds a control character (CR, LF, NUL, ...) that HTTP cannot carry",
            name.as_str()
        ))
    })?;
    Ok((name, value))
}

/// Strips the spaces and tabs HTTP allows around a field value (RFC 9110 §5.5).
fn trim_optional_whitespace(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_splits_at_the_first_colon_and_strips_only_spaces_and_tabs() {
        let (name, value) = parse_header(b"Stripe-Signature: \t t=1,v1=ab:cd \t").unwrap();
        assert_eq!(name, "stripe-signature");
        assert_eq!(value.as_bytes(), b"t=1,v1=ab:cd");
        let (_, value) = parse_header(b"X-Empty:").unwrap();
        assert!(value.is_empty());
    }

    #[test]
    fn header_keeps_non_ascii_bytes_for_the_provider() {
        let (_, value) = parse_header(b"X-GitHub-Delivery: caf\xc3\xa9 \xff").unwrap();
        assert_eq!(value.as_bytes(), b"caf\xc3\xa9 \xff");
    }

    #[test]
    fn header_rejects_what_http_cannot_carry() {
        for bad in [
            b"no colon".as_slice(),
            b": empty name",
            b"Bad Name: v",
            b"X-Test: a\nb",
            b"X-Test: a\rb",
            b"X-Test: a\0b",
        ] {
            assert!(
                parse_header(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
