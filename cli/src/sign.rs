//! `hookbox sign`: the headers a provider would send with a body.
#![allow(clippy::print_stdout)] // the headers on stdout are the command's output

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::ArgPredicate;
use hookbox_core::SignedHeaders;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderValue;
use hookbox_core::time::OffsetDateTime;
use hookbox_custom::Scheme;
use sha2::{Digest, Sha256};

use crate::providers::{self, ProviderConfig, ProviderName, SignerSettings};
use crate::{UsageError, read_body};

pub(crate) const AFTER_HELP: &str = "\
Output: one 'Name: value' line per header, the form `curl -H` and
`hookbox verify --header` take unchanged.

Exit status: 0 signed, 1 the secret was rejected, 2 usage error.

Example:
  hookbox sign --provider github --secret \"$SECRET\" --body-file body.json > headers.txt
  curl -H @headers.txt --data-binary @body.json http://localhost:3000/webhooks";

/// Arguments of `hookbox sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The sender to imitate (`custom` with --scheme, which implies it).
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

    /// The URL the provider signs, for Twilio and Square: the public URL configured
    /// at the provider, whatever address the request is sent to.
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,

    /// A signing secret, used exactly as given. Stripe, Svix, Standard Webhooks and
    /// Paddle send one signature per secret when it is repeated; the others take one.
    /// For Discord it is the Ed25519 signing key's seed (64 hex digits).
    #[arg(
        long = "secret",
        value_name = "SECRET",
        required = true,
        allow_hyphen_values = true
    )]
    secrets: Vec<String>,

    /// The file holding the body to sign, byte for byte.
    #[arg(long, value_name = "PATH")]
    body_file: PathBuf,

    /// The delivery id [default: derived from the body's SHA-256, so signing the same
    /// body twice gives the same id]. Stripe takes its id from the body instead.
    #[arg(long)]
    id: Option<String>,

    /// The signed time in Unix seconds [default: now].
    #[arg(long, value_name = "UNIX_SECONDS", allow_negative_numbers = true)]
    timestamp: Option<i64>,

    /// GitHub's event (X-GitHub-Event), Shopify's topic, Twitch's subscription type,
    /// GitLab's X-Gitlab-Event or Linear's Linear-Event.
    #[arg(long)]
    event: Option<String>,

    /// Twitch's message type (`notification`, `webhook_callback_verification`,
    /// `revocation`) [default: notification].
    #[arg(long, value_name = "TYPE")]
    message_type: Option<String>,

    /// Shopify's shop domain (X-Shopify-Shop-Domain).
    #[arg(long, value_name = "DOMAIN")]
    shop_domain: Option<String>,
}

/// Signs the body and prints the headers.
///
/// # Errors
/// [`UsageError`] when the body file cannot be read, an option cannot be a header
/// value, or several secrets are given to a provider that sends one signature.
pub(crate) fn run(args: &SignArgs) -> Result<ExitCode, UsageError> {
    match sign_delivery(args, None)? {
        Ok(signed) => {
            print!("{}", signed.headers);
            Ok(ExitCode::SUCCESS)
        }
        Err(secret_error) => {
            eprintln!("error: {secret_error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// A body and the headers a provider would send with it.
pub(crate) struct Signed {
    /// The body, byte for byte as read (Linear's with its `webhookTimestamp` set).
    pub(crate) body: Bytes,
    /// The headers, in the provider's order and spelling.
    pub(crate) headers: SignedHeaders,
    /// A query pair the request URL must carry: Twilio's `bodySHA256=…` for a JSON
    /// body.
    pub(crate) query: Option<String>,
}

/// Reads the body and signs it as `args` say: the outer error is a usage error
/// (exit 2), the inner one a secret the provider rejects (exit 1). `sent_to` is the
/// URL the request goes to, the signed URL when `--public-url` is not given.
pub(crate) fn sign_delivery(
    args: &SignArgs,
    sent_to: Option<&str>,
) -> Result<Result<Signed, hookbox_core::VerifyError>, UsageError> {
    let name = args.provider;
    if args.secrets.len() > 1 && !name.signs_with_several_secrets() {
        return Err(UsageError(format!(
            "{} sends one signature per delivery; pass --secret once",
            name.as_str()
        )));
    }
    for (option, value) in [
        ("--id", &args.id),
        ("--event", &args.event),
        ("--shop-domain", &args.shop_domain),
        ("--message-type", &args.message_type),
    ] {
        if let Some(value) = value {
            check_header_value(option, value)?;
        }
    }
    warn_ignored(args);
    let body = read_body(&args.body_file)?;

    let scheme = args.scheme.as_deref().map(read_scheme).transpose()?;
    let settings = SignerSettings {
        event: args.event.as_deref(),
        shop_domain: args.shop_domain.as_deref(),
        message_type: args.message_type.as_deref(),
    };
    let config = ProviderConfig {
        public_url: args.public_url.as_deref().or(sent_to),
        scheme: scheme.as_ref(),
    };
    let signer = match providers::signer(name, &args.secrets, &settings, &config) {
        Ok(signer) => signer,
        Err(err) => return Ok(Err(err)),
    };
    let id = args.id.clone().unwrap_or_else(|| default_id(name, &body));
    let timestamp = args
        .timestamp
        .unwrap_or_else(|| OffsetDateTime::now_utc().unix_timestamp());
    // Linear's signed time is the body's `webhookTimestamp`: `send` sets it to the
    // signing time, or the receiver's 60 s window would refuse the body; `sign` prints
    // headers only, so it signs the file as it is
    let body = if name == ProviderName::Linear && sent_to.is_some() {
        match hookbox_linear::with_webhook_timestamp(&body, timestamp.saturating_mul(1000)) {
            Ok(stamped) => Bytes::from(stamped),
            Err(err) => {
                return Err(UsageError(format!("{}: {err}", args.body_file.display())));
            }
        }
    } else {
        body
    };
    let headers = signer.sign(&id, timestamp, &body);
    // Twilio signs a JSON body through the URL's `bodySHA256`, which the request
    // must then carry
    let query = (name == ProviderName::Twilio
        && headers
            .get("Content-Type")
            .is_some_and(|value| value.starts_with("application/json")))
    .then(|| hookbox_twilio::body_sha256_query(&body));
    Ok(Ok(Signed {
        body,
        headers,
        query,
    }))
}

/// Reads and validates a `--scheme` file.
///
/// # Errors
/// [`UsageError`] naming the file when it cannot be read or describes an impossible
/// scheme.
pub(crate) fn read_scheme(path: &std::path::Path) -> Result<Scheme, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| UsageError(format!("--scheme {}: {err}", path.display())))?;
    Scheme::from_toml(&text)
        .map_err(|err| UsageError(format!("--scheme {}: {err}", path.display())))
}

/// Refuses a value that would break the `Name: value` lines (a newline, say).
fn check_header_value(option: &str, value: &str) -> Result<(), UsageError> {
    HeaderValue::from_str(value).map(drop).map_err(|_| {
        UsageError(format!(
            "{option} holds a character a header value cannot carry (a newline or another control character)"
        ))
    })
}

/// Says on stderr which options this provider has no header for, so a typo'd
/// command does not silently sign something else.
fn warn_ignored(args: &SignArgs) {
    let name = args.provider;
    if args.id.is_some() && name.id_in_body() {
        eprintln!(
            "note: {} reads the delivery id from the body; --id is ignored",
            name.as_str()
        );
    }
    if args.message_type.is_some() && name != ProviderName::Twitch {
        eprintln!("note: only twitch sends a message type; --message-type is ignored");
    }
    if args.event.is_some()
        && !matches!(
            name,
            ProviderName::Github
                | ProviderName::Shopify
                | ProviderName::Twitch
                | ProviderName::Gitlab
                | ProviderName::Linear
        )
    {
        eprintln!(
            "note: {} sends the event type in the body; --event is ignored",
            name.as_str()
        );
    }
    if args.shop_domain.is_some() && name != ProviderName::Shopify {
        eprintln!("note: only shopify sends a shop domain; --shop-domain is ignored");
    }
    if args.public_url.is_some() && !name.signs_the_url() {
        eprintln!(
            "note: {} does not sign the URL; --public-url is ignored",
            name.as_str()
        );
    }
    if name == ProviderName::Linear {
        eprintln!(
            "note: linear's signed time is the body's webhookTimestamp (milliseconds): `hookbox sign` signs the file as it is, `hookbox send` sets it to --timestamp first"
        );
    }
    if args.scheme.is_some() && name != ProviderName::Custom {
        eprintln!(
            "note: --scheme describes a custom provider; it is ignored for {}",
            name.as_str()
        );
    }
}

/// Derives a delivery id from the body's SHA-256 in the provider's usual shape:
/// `msg_` and 24 hex digits for Svix and Standard Webhooks, a UUID elsewhere.
fn default_id(name: ProviderName, body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    match name {
        ProviderName::Svix | ProviderName::Standard => {
            format!("msg_{}", hex::encode(&digest[..12]))
        }
        ProviderName::Github
        | ProviderName::Shopify
        | ProviderName::Stripe
        | ProviderName::Twitch
        | ProviderName::Slack
        | ProviderName::Zoom
        | ProviderName::Discord
        | ProviderName::Paddle
        | ProviderName::Twilio
        | ProviderName::Square
        | ProviderName::Gitlab
        | ProviderName::Linear
        | ProviderName::Custom => {
            let mut uuid = [0u8; 16];
            uuid.copy_from_slice(&digest[..16]);
            // RFC 9562 version 8 (custom) with the standard variant, so UUID parsers accept it
            uuid[6] = (uuid[6] & 0x0f) | 0x80;
            uuid[8] = (uuid[8] & 0x3f) | 0x80;
            let h = hex::encode(uuid);
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ids_are_deterministic_and_shaped_like_the_providers() {
        let svix = default_id(ProviderName::Svix, b"{}");
        assert_eq!(svix, default_id(ProviderName::Svix, b"{}"));
        assert_ne!(svix, default_id(ProviderName::Svix, b"{ }"));
        assert!(svix.starts_with("msg_") && svix.len() == 28, "{svix}");

        let uuid = default_id(ProviderName::Github, b"{}");
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{uuid}");
        assert_eq!(uuid.as_bytes()[14], b'8', "version 8: {uuid}");
        assert!(
            matches!(uuid.as_bytes()[19], b'8'..=b'b'),
            "variant: {uuid}"
        );
    }
}
