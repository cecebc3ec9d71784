//! [`Scheme::from_toml`]: a scheme read from a small TOML file (feature `toml`).

use std::time::Duration;

use serde::Deserialize;

use crate::builder::retention_days;
use crate::error::{Role, SchemeError};
use crate::kinds::Source;
use crate::scheme::Scheme;

/// The file: every key the crate documentation lists, and no other.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    signature: Option<SignatureTable>,
    signed: Option<String>,
    id: Option<SourceTable>,
    event_type: Option<SourceTable>,
    timestamp: Option<TimestampTable>,
    url: Option<String>,
    retention_days: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureTable {
    header: String,
    algorithm: String,
    encoding: String,
    prefix: Option<String>,
    separator: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceTable {
    header: Option<String>,
    field: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimestampTable {
    header: Option<String>,
    field: Option<String>,
    unit: String,
    tolerance_secs: Option<u64>,
}

/// Returns the one source a table names.
fn source(
    role: Role,
    header: Option<String>,
    field: Option<String>,
) -> Result<Source, SchemeError> {
    match (header, field) {
        (Some(header), None) => Ok(Source::Header(header)),
        (None, Some(field)) => Ok(Source::Field(field)),
        _ => Err(SchemeError::AmbiguousSource { role }),
    }
}

impl Scheme {
    /// Reads a scheme from TOML text, in the format the
    /// [crate documentation](crate#the-toml-format) describes; unknown keys are
    /// errors. The scheme is checked as [`SchemeBuilder::build`](crate::SchemeBuilder::build)
    /// checks it.
    ///
    /// # Errors
    /// [`SchemeError::Toml`] when the text is not TOML, has an unknown key, lacks
    /// `name` or a key of a table, or has a value of the wrong type; the other
    /// [`SchemeError`]s as the builder returns them.
    pub fn from_toml(text: &str) -> Result<Self, SchemeError> {
        let file: File = ::toml::from_str(text).map_err(|err| SchemeError::Toml {
            message: err.to_string().trim_end().to_string(),
        })?;
        let mut builder = Scheme::builder(file.name);
        if let Some(signature) = file.signature {
            builder = builder.signature(
                signature.header,
                signature.algorithm.parse()?,
                signature.encoding.parse()?,
            );
            if let Some(prefix) = signature.prefix {
                builder = builder.prefix(prefix);
            }
            if let Some(separator) = signature.separator {
                let mut chars = separator.chars();
                let (Some(separator), None) = (chars.next(), chars.next()) else {
                    return Err(SchemeError::SeparatorNotOneCharacter);
                };
                builder = builder.separator(separator);
            }
        }
        if let Some(signed) = file.signed {
            builder = builder.signed(signed);
        }
        if let Some(id) = file.id {
            builder = builder.id(source(Role::Id, id.header, id.field)?);
        }
        if let Some(event_type) = file.event_type {
            builder = builder.event_type(source(
                Role::EventType,
                event_type.header,
                event_type.field,
            )?);
        }
        if let Some(timestamp) = file.timestamp {
            let unit = timestamp.unit.parse()?;
            builder = builder.timestamp(
                source(Role::Timestamp, timestamp.header, timestamp.field)?,
                unit,
            );
            if let Some(secs) = timestamp.tolerance_secs {
                builder = builder.tolerance(Duration::from_secs(secs));
            }
        }
        if let Some(url) = file.url {
            builder = builder.url(url);
        }
        if let Some(days) = file.retention_days {
            builder = builder.retention(retention_days(days)?);
        }
        builder.build()
    }
}
