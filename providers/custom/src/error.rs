//! Why a scheme cannot be built.

use std::fmt;

use hookbox_core::VerifyError;

/// A [`Scheme`](crate::Scheme) that cannot work: a required setting is missing, a
/// setting is malformed, or two settings contradict each other. Each message says
/// what is impossible and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemeError {
    /// The provider's name is empty, too long or has characters other than
    /// lower-case letters, digits, `-` and `_`.
    #[error(
        "invalid provider name `{name}`: {reason}; it is a part of every dedupe key, so use lower-case letters, digits, `-` and `_`, starting with a letter (`acme`, `acme-billing`)"
    )]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The name is one of hookbox's provider crates.
    #[error(
        "`{name}` is the name of the hookbox-{name} crate: a scheme under it would share that crate's dedupe keys and retention rules; use hookbox-{name}, or give the scheme another name"
    )]
    ReservedName {
        /// The name given.
        name: String,
    },
    /// No signature header, algorithm and encoding were given.
    #[error(
        "no signature header: say which header carries the MAC, its algorithm (sha1, sha256, sha512) and encoding (hex, base64)"
    )]
    MissingSignature,
    /// No signed-content template was given.
    #[error(
        "no signed-content template: say what the provider signs, such as `{{body}}` or `{{timestamp}}.{{body}}`"
    )]
    MissingTemplate,
    /// No source of the delivery id was given.
    #[error(
        "no delivery id: say which header or top-level body field holds an id that stays the same on every retry; without one, retries cannot be recognised"
    )]
    MissingId,
    /// No retention was given.
    #[error(
        "no retention: say how long the provider retries (`retention_days`); dedupe keys dropped earlier let a retry through as a new event"
    )]
    MissingRetention,
    /// The retention is zero or absurdly long.
    #[error("invalid retention: {reason}")]
    InvalidRetention {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A header name is empty.
    #[error("the {role} header name is empty")]
    EmptyHeaderName {
        /// What the header is for.
        role: Role,
    },
    /// A header name is not a valid HTTP header name.
    #[error(
        "`{header}` is not a valid HTTP header name (the {role} header): names are ASCII letters, digits and `!#$%&'*+-.^_|~`, without spaces or `:`"
    )]
    InvalidHeaderName {
        /// What the header is for.
        role: Role,
        /// The name given.
        header: String,
    },
    /// One header is configured for two purposes.
    #[error("the header `{header}` is configured as both the {first} and the {second} header")]
    HeaderReused {
        /// The header name given.
        header: String,
        /// The first purpose.
        first: Role,
        /// The second purpose.
        second: Role,
    },
    /// A body field name is empty.
    #[error("the {role} field name is empty")]
    EmptyFieldName {
        /// What the field is for.
        role: Role,
    },
    /// A body field name looks like a nested path.
    #[error(
        "the {role} field `{field}` looks like a nested path: only top-level fields of the body are read; use a header or a top-level field"
    )]
    NestedField {
        /// What the field is for.
        role: Role,
        /// The name given.
        field: String,
    },
    /// A signature prefix cannot appear in a header.
    #[error("invalid signature prefix `{prefix}`: {reason}")]
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A separator of several signatures cannot be told from the signatures.
    #[error("invalid signature separator `{separator}`: {reason}")]
    InvalidSeparator {
        /// The separator given.
        separator: char,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A separator in a TOML scheme is not one character.
    #[error("the signature separator must be exactly one character, such as `,` or ` `")]
    SeparatorNotOneCharacter,
    /// The template does not sign the body.
    #[error(
        "the signed-content template has no `{{body}}`: the body would not be authenticated, and anyone could change it; no provider signs without the body"
    )]
    TemplateWithoutBody,
    /// The template names an unknown placeholder.
    #[error(
        "unknown placeholder `{placeholder}` in the signed-content template: the placeholders are `{{body}}`, `{{timestamp}}`, `{{id}}` and `{{url}}`"
    )]
    UnknownPlaceholder {
        /// The placeholder, with its braces.
        placeholder: String,
    },
    /// A `{` in the template has no `}`.
    #[error(
        "the `{{` at byte {at} of the signed-content template is not closed: placeholders are written `{{body}}`, `{{timestamp}}`, `{{id}}` or `{{url}}`"
    )]
    UnterminatedPlaceholder {
        /// The byte offset of the `{`.
        at: usize,
    },
    /// The template signs `{timestamp}` but no timestamp is configured.
    #[error(
        "the signed-content template has `{{timestamp}}` but no timestamp is configured: say which header holds it"
    )]
    TimestampWithoutSource,
    /// The template signs `{timestamp}` but the timestamp is a body field.
    #[error(
        "the signed-content template has `{{timestamp}}` but the timestamp is the body field `{field}`: the body is read only once the signature is verified, so a signed timestamp must come from a header"
    )]
    SignedFieldTimestamp {
        /// The field given.
        field: String,
    },
    /// The template signs `{id}` but the id is a body field.
    #[error(
        "the signed-content template has `{{id}}` but the id is the body field `{field}`: the body is read only once the signature is verified, so a signed id must come from a header"
    )]
    SignedFieldId {
        /// The field given.
        field: String,
    },
    /// The template signs `{url}` but no URL is configured.
    #[error(
        "the signed-content template has `{{url}}` but no URL is configured: give the webhook URL exactly as configured at the provider"
    )]
    UrlWithoutUrl,
    /// A URL is configured but the template does not sign it.
    #[error(
        "a URL is configured but the signed-content template has no `{{url}}`: it would never be checked; remove it, or add `{{url}}` where the provider signs it"
    )]
    UrlNotSigned,
    /// The URL is not an absolute `http(s)://` URL.
    #[error("invalid URL: {reason}; give the webhook URL exactly as configured at the provider")]
    InvalidUrl {
        /// What is wrong with it (the URL itself is not repeated).
        reason: &'static str,
    },
    /// A timestamp is configured without a tolerance.
    #[error(
        "a timestamp is configured without a tolerance: say how far it may be from now (`tolerance_secs`, such as 300)"
    )]
    TimestampWithoutTolerance,
    /// A tolerance is configured without a timestamp.
    #[error("a tolerance is configured without a timestamp to check it against")]
    ToleranceWithoutTimestamp,
    /// The tolerance is zero.
    #[error("the tolerance is zero: every delivery that takes a second to arrive would be refused")]
    ZeroTolerance,
    /// An algorithm name is none of `sha1`, `sha256`, `sha512`.
    #[error("unknown algorithm `{name}`: use sha1, sha256 or sha512")]
    UnknownAlgorithm {
        /// The name given.
        name: String,
    },
    /// An encoding name is neither `hex` nor `base64`.
    #[error("unknown encoding `{name}`: use hex (lower-case) or base64 (standard, padded)")]
    UnknownEncoding {
        /// The name given.
        name: String,
    },
    /// A timestamp unit is neither `seconds` nor `milliseconds`.
    #[error("unknown timestamp unit `{name}`: use seconds or milliseconds")]
    UnknownUnit {
        /// The name given.
        name: String,
    },
    /// A TOML table has both `header` and `field`, or neither.
    #[error("the {role} table must have exactly one of `header` and `field`")]
    AmbiguousSource {
        /// What the table is for.
        role: Role,
    },
    /// The TOML text is not a scheme: a syntax error, an unknown key, a missing key or
    /// a value of the wrong type.
    #[error("not a scheme file: {message}")]
    Toml {
        /// The parser's message, with the line and column.
        message: String,
    },
}

/// A scheme that cannot work is the receiver's configuration mistake:
/// [`VerifyError::InvalidConfig`], which an edge answers with a 500.
impl From<SchemeError> for VerifyError {
    fn from(err: SchemeError) -> Self {
        VerifyError::invalid_config(err.to_string())
    }
}

/// What a header or a body field is used for, as [`SchemeError`]s name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The signature header.
    Signature,
    /// The delivery id, the dedupe key.
    Id,
    /// The timestamp.
    Timestamp,
    /// The event type.
    EventType,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Signature => "signature",
            Self::Id => "id",
            Self::Timestamp => "timestamp",
            Self::EventType => "event type",
        })
    }
}
