//! `SchemeBuilder`: a scheme described piece by piece and validated once, when built.

use std::time::Duration;

use hookbox_core::Retention;
use hookbox_core::http::HeaderName;

use crate::error::{Role, SchemeError};
use crate::kinds::{Algorithm, Encoding, Source, Unit};
use crate::scheme::Scheme;
use crate::template::{Piece, parse_template};

/// The names of hookbox's provider crates: a scheme under one of them would share
/// that crate's dedupe keys and retention rules.
const RESERVED: [&str; 14] = [
    "stripe", "shopify", "github", "svix", "standard", "slack", "twitch", "zoom", "discord",
    "paddle", "twilio", "square", "gitlab", "linear",
];

/// The longest scheme name: it is a label in metrics and a part of every dedupe key.
const MAX_NAME: usize = 64;

/// The longest retention accepted, 100 years: anything longer is a typo.
const MAX_RETENTION_DAYS: u64 = 36_500;

impl Scheme {
    /// Starts a scheme for the provider `name` (lower-case letters, digits, `-` and
    /// `_`, starting with a letter): the provider's name in dedupe keys, retention
    /// rules, metrics and errors.
    pub fn builder(name: impl Into<String>) -> SchemeBuilder {
        SchemeBuilder {
            name: name.into(),
            ..SchemeBuilder::default()
        }
    }
}

/// Builds a [`Scheme`]; see [`Scheme::builder`]. Every setting is checked by
/// [`SchemeBuilder::build`], so the order of the calls does not matter.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SchemeBuilder {
    name: String,
    signature: Option<(String, Algorithm, Encoding)>,
    prefix: Option<String>,
    separator: Option<char>,
    signed: Option<String>,
    id: Option<Source>,
    event_type: Option<Source>,
    timestamp: Option<(Source, Unit)>,
    tolerance: Option<Duration>,
    url: Option<String>,
    retention: Option<Retention>,
}

impl SchemeBuilder {
    /// Sets the signature header and how its MAC is computed and written (required).
    pub fn signature(
        mut self,
        header: impl Into<String>,
        algorithm: Algorithm,
        encoding: Encoding,
    ) -> Self {
        self.signature = Some((header.into(), algorithm, encoding));
        self
    }

    /// Sets the text before each MAC (`sha256=`, `v1=`); an empty prefix is none.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.prefix = (!prefix.is_empty()).then_some(prefix);
        self
    }

    /// Accepts several signatures in the header, separated by `separator` (`,` or a
    /// space), each with the prefix; items without the prefix are skipped. Signers
    /// then send one signature per secret.
    pub fn separator(mut self, separator: char) -> Self {
        self.separator = Some(separator);
        self
    }

    /// Sets the signed-content template (required): literal text and the
    /// placeholders `{body}` (required), `{timestamp}`, `{id}` and `{url}`, such as
    /// `{timestamp}.{body}`.
    pub fn signed(mut self, template: impl Into<String>) -> Self {
        self.signed = Some(template.into());
        self
    }

    /// Sets where the delivery id, the dedupe key, is read (required). It must stay
    /// the same on every retry of a delivery.
    pub fn id(mut self, source: Source) -> Self {
        self.id = Some(source);
        self
    }

    /// Sets where the event type is read; an absent value is no event type.
    pub fn event_type(mut self, source: Source) -> Self {
        self.event_type = Some(source);
        self
    }

    /// Sets where the timestamp is read and its unit; requires a
    /// [`tolerance`](SchemeBuilder::tolerance).
    pub fn timestamp(mut self, source: Source, unit: Unit) -> Self {
        self.timestamp = Some((source, unit));
        self
    }

    /// Sets how far the timestamp may be from now, in either direction.
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = Some(tolerance);
        self
    }

    /// Sets the URL the provider signs, for a template with `{url}`: the webhook's
    /// URL exactly as configured at the provider.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Sets how long the provider can resend a delivery (required): dedupe keys are
    /// kept at least this long.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Checks the settings and returns the scheme.
    ///
    /// # Errors
    /// A [`SchemeError`] naming the first setting that is missing, malformed or
    /// impossible together with another.
    pub fn build(self) -> Result<Scheme, SchemeError> {
        check_name(&self.name)?;
        let (signature_header, algorithm, encoding) =
            self.signature.ok_or(SchemeError::MissingSignature)?;
        check_header(Role::Signature, &signature_header)?;
        if let Some(prefix) = &self.prefix {
            check_prefix(prefix)?;
        }
        if let Some(separator) = self.separator {
            check_separator(separator, encoding, self.prefix.as_deref())?;
        }
        let signed = self.signed.ok_or(SchemeError::MissingTemplate)?;
        let pieces = parse_template(&signed)?;
        let id = self.id.ok_or(SchemeError::MissingId)?;
        check_source(Role::Id, &id)?;
        if let Some(source) = &self.event_type {
            check_source(Role::EventType, source)?;
        }
        if let Some((source, _)) = &self.timestamp {
            check_source(Role::Timestamp, source)?;
        }
        check_headers_distinct(
            &signature_header,
            [
                (Role::Id, Some(&id)),
                (
                    Role::Timestamp,
                    self.timestamp.as_ref().map(|(source, _)| source),
                ),
                (Role::EventType, self.event_type.as_ref()),
            ],
        )?;

        if pieces.contains(&Piece::Timestamp) {
            match &self.timestamp {
                None => return Err(SchemeError::TimestampWithoutSource),
                Some((Source::Field(field), _)) => {
                    return Err(SchemeError::SignedFieldTimestamp {
                        field: field.clone(),
                    });
                }
                Some((Source::Header(_), _)) => {}
            }
        }
        if let (true, Source::Field(field)) = (pieces.contains(&Piece::Id), &id) {
            return Err(SchemeError::SignedFieldId {
                field: field.clone(),
            });
        }
        match (pieces.contains(&Piece::Url), &self.url) {
            (true, None) => return Err(SchemeError::UrlWithoutUrl),
            (false, Some(_)) => return Err(SchemeError::UrlNotSigned),
            (true, Some(url)) => check_url(url)?,
            (false, None) => {}
        }
        match (&self.timestamp, self.tolerance) {
            (Some(_), None) => return Err(SchemeError::TimestampWithoutTolerance),
            (None, Some(_)) => return Err(SchemeError::ToleranceWithoutTimestamp),
            (Some(_), Some(tolerance)) if tolerance.is_zero() => {
                return Err(SchemeError::ZeroTolerance);
            }
            _ => {}
        }
        let retention = self.retention.ok_or(SchemeError::MissingRetention)?;
        if retention.as_duration().is_zero() {
            return Err(SchemeError::InvalidRetention {
                reason: "it is zero: a retry would be applied again",
            });
        }
        if retention.as_duration() > Duration::from_secs(MAX_RETENTION_DAYS * 86_400) {
            return Err(SchemeError::InvalidRetention {
                reason: "it is over 100 years",
            });
        }

        Ok(Scheme {
            name: self.name,
            signature_header,
            algorithm,
            encoding,
            prefix: self.prefix,
            separator: self.separator,
            signed,
            pieces,
            id,
            event_type: self.event_type,
            timestamp: self.timestamp,
            tolerance: self.tolerance,
            url: self.url,
            retention,
        })
    }
}

/// Checks `retention_days` from a file before it is multiplied into seconds.
#[cfg(feature = "toml")]
pub(crate) fn retention_days(days: u64) -> Result<Retention, SchemeError> {
    if days > MAX_RETENTION_DAYS {
        return Err(SchemeError::InvalidRetention {
            reason: "it is over 100 years",
        });
    }
    Ok(Retention::from_days(days))
}

fn check_name(name: &str) -> Result<(), SchemeError> {
    let invalid = |reason| SchemeError::InvalidName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("it is empty"));
    }
    if name.len() > MAX_NAME {
        return Err(invalid("it is longer than 64 characters"));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid("it does not start with a lower-case letter"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err(invalid(
            "it has characters other than lower-case letters, digits, `-` and `_`",
        ));
    }
    if RESERVED.contains(&name) {
        return Err(SchemeError::ReservedName {
            name: name.to_string(),
        });
    }
    Ok(())
}

fn check_header(role: Role, header: &str) -> Result<(), SchemeError> {
    if header.is_empty() {
        return Err(SchemeError::EmptyHeaderName { role });
    }
    if HeaderName::from_bytes(header.as_bytes()).is_err() {
        return Err(SchemeError::InvalidHeaderName {
            role,
            header: header.to_string(),
        });
    }
    Ok(())
}

fn check_source(role: Role, source: &Source) -> Result<(), SchemeError> {
    match source {
        Source::Header(header) => check_header(role, header),
        Source::Field(field) if field.is_empty() => Err(SchemeError::EmptyFieldName { role }),
        Source::Field(field) if field.contains('.') => Err(SchemeError::NestedField {
            role,
            field: field.clone(),
        }),
        Source::Field(_) => Ok(()),
    }
}

/// Refuses a header used for two purposes: the signature header holds no id, and an
/// id that is also the timestamp is a mistake.
fn check_headers_distinct(
    signature: &str,
    others: [(Role, Option<&Source>); 3],
) -> Result<(), SchemeError> {
    let mut seen = vec![(Role::Signature, signature)];
    for (role, source) in others {
        let Some(Source::Header(header)) = source else {
            continue;
        };
        if let Some((first, _)) = seen.iter().find(|(_, h)| h.eq_ignore_ascii_case(header)) {
            return Err(SchemeError::HeaderReused {
                header: header.clone(),
                first: *first,
                second: role,
            });
        }
        seen.push((role, header));
    }
    Ok(())
}

fn check_prefix(prefix: &str) -> Result<(), SchemeError> {
    if !prefix.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SchemeError::InvalidPrefix {
            prefix: prefix.to_string(),
            reason: "it has characters other than visible ASCII (no spaces)",
        });
    }
    Ok(())
}

fn check_separator(
    separator: char,
    encoding: Encoding,
    prefix: Option<&str>,
) -> Result<(), SchemeError> {
    let invalid = |reason| SchemeError::InvalidSeparator { separator, reason };
    if separator != ' ' && !separator.is_ascii_punctuation() {
        return Err(invalid("it is not ASCII punctuation or a space"));
    }
    if encoding == Encoding::Base64 && matches!(separator, '+' | '/' | '=') {
        return Err(invalid("it appears inside base64 MACs"));
    }
    if prefix.is_some_and(|prefix| prefix.contains(separator)) {
        return Err(invalid("it appears in the prefix"));
    }
    Ok(())
}

/// Checks that `url` is an absolute `http(s)://` URL with a host and no whitespace.
/// The errors never repeat the value: a secret pasted in its place must not reach a
/// log.
fn check_url(url: &str) -> Result<(), SchemeError> {
    let invalid = |reason| SchemeError::InvalidUrl { reason };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            "it contains whitespace or control characters (a newline from a file?)",
        ));
    }
    let rest = ["https://", "http://"]
        .into_iter()
        .find_map(|scheme| {
            url.get(..scheme.len())
                .filter(|head| head.eq_ignore_ascii_case(scheme))
                .map(|_| &url[scheme.len()..])
        })
        .ok_or(invalid("it does not start with `https://` or `http://`"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(invalid("it has no host"));
    }
    Ok(())
}
