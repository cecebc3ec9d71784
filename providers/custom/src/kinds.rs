//! The small vocabularies of a scheme: algorithm, encoding, time unit and where a value comes from.

use std::fmt;
use std::str::FromStr;

use crate::error::SchemeError;

/// The HMAC's hash function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// HMAC-SHA1 (20-byte MAC): older senders such as Vercel and Intercom.
    Sha1,
    /// HMAC-SHA256 (32-byte MAC): most senders.
    Sha256,
    /// HMAC-SHA512 (64-byte MAC).
    Sha512,
}

impl Algorithm {
    /// Returns the MAC's length in bytes.
    pub fn mac_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    /// Returns the name a TOML scheme uses: `sha1`, `sha256` or `sha512`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }
}

impl FromStr for Algorithm {
    type Err = SchemeError;

    fn from_str(name: &str) -> Result<Self, SchemeError> {
        [Self::Sha1, Self::Sha256, Self::Sha512]
            .into_iter()
            .find(|algorithm| algorithm.as_str() == name)
            .ok_or_else(|| SchemeError::UnknownAlgorithm {
                name: name.to_string(),
            })
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the MAC is written in the signature header. There is one spelling of each: the
/// MAC is compared as text, as the providers' own libraries compare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Lower-case hex, two digits per byte. The same MAC in upper-case hex does not
    /// match (the mismatch's hint says so).
    Hex,
    /// Standard-alphabet base64 with its `=` padding.
    Base64,
}

impl Encoding {
    /// Returns the name a TOML scheme uses: `hex` or `base64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hex => "hex",
            Self::Base64 => "base64",
        }
    }
}

impl FromStr for Encoding {
    type Err = SchemeError;

    fn from_str(name: &str) -> Result<Self, SchemeError> {
        [Self::Hex, Self::Base64]
            .into_iter()
            .find(|encoding| encoding.as_str() == name)
            .ok_or_else(|| SchemeError::UnknownEncoding {
                name: name.to_string(),
            })
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The unit of a timestamp: whole seconds or milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Seconds since the Unix epoch (`1700000000`).
    Seconds,
    /// Milliseconds since the Unix epoch (`1700000000000`); checked to the second.
    Milliseconds,
}

impl Unit {
    /// Returns the name a TOML scheme uses: `seconds` or `milliseconds`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Seconds => "seconds",
            Self::Milliseconds => "milliseconds",
        }
    }
}

impl FromStr for Unit {
    type Err = SchemeError;

    fn from_str(name: &str) -> Result<Self, SchemeError> {
        [Self::Seconds, Self::Milliseconds]
            .into_iter()
            .find(|unit| unit.as_str() == name)
            .ok_or_else(|| SchemeError::UnknownUnit {
                name: name.to_string(),
            })
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a value (the delivery id, the timestamp, the event type) is read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A request header, by name (any case).
    Header(String),
    /// A top-level field of the JSON body, by its exact key: a string, or a number
    /// as it is written. Nested paths are not supported.
    Field(String),
}

impl Source {
    /// A request header.
    pub fn header(name: impl Into<String>) -> Self {
        Self::Header(name.into())
    }

    /// A top-level field of the JSON body.
    pub fn field(key: impl Into<String>) -> Self {
        Self::Field(key.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for algorithm in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
            assert_eq!(algorithm.as_str().parse(), Ok(algorithm));
        }
        for encoding in [Encoding::Hex, Encoding::Base64] {
            assert_eq!(encoding.to_string().parse(), Ok(encoding));
        }
        for unit in [Unit::Seconds, Unit::Milliseconds] {
            assert_eq!(unit.to_string().parse(), Ok(unit));
        }
        assert!(matches!(
            "SHA256".parse::<Algorithm>(),
            Err(SchemeError::UnknownAlgorithm { .. })
        ));
    }
}
