//! The SSL mode: [`SslMode`], libpq's `sslmode` as this crate reads it, and its
//! parsing from a connection string's value.
//!
//! A leaf: this file imports nothing else from the crate, so the store's error type
//! can name a mode (`PgError::TlsNotSupported`) without importing the rest of the
//! TLS code. A wrong value is an [`UnknownSslMode`]; `SslMode`'s `FromStr` (in
//! `error.rs`, beside `PgError`, whose error it returns) turns it into
//! `PgError::InvalidSslMode`.

use std::fmt;

/// How a connection uses TLS: libpq's `sslmode`, read from the connection string
/// (`?sslmode=verify-full`, or `sslmode=verify-full` in the key/value form).
///
/// | mode | TLS | the server's certificate |
/// |---|---|---|
/// | `disable` | never | not looked at |
/// | `prefer` (the default) | when the server offers it; plain text when it does not, or when the handshake fails | not verified |
/// | `require` | always: a server without TLS is refused | not verified, unless a root certificate is given: then verified as `verify-ca` (as libpq does) |
/// | `verify-ca` | always | signed by a trusted root; the host name is not checked |
/// | `verify-full` | always | signed by a trusted root and valid for the host name connected to |
///
/// The trusted roots are `sslrootcert`'s file, else
/// [`PgOptions::with_tls_root_certificates_pem`](crate::PgOptions::with_tls_root_certificates_pem),
/// else the compiled-in Mozilla set (`webpki-roots`). libpq's `allow` is not
/// supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it, without verifying its certificate; plain text
    /// otherwise (libpq's default).
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is verified only when a root
    /// certificate is given (then as [`SslMode::VerifyCa`]).
    Require,
    /// TLS with the certificate chain verified against the trusted roots, whatever
    /// host name it was issued for.
    VerifyCa,
    /// TLS with the certificate chain verified and valid for the host connected to.
    VerifyFull,
}

impl SslMode {
    /// The values `sslmode` accepts, for error messages.
    pub const ALLOWED: &'static str = "disable, prefer, require, verify-ca or verify-full";

    /// Returns the mode as written in a connection string (`"verify-full"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// `true` when a connection in this mode is never plain text.
    pub(crate) fn requires_tls(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }

    /// Parses a connection string's value: exactly one of the names
    /// [`as_str`](Self::as_str) gives, else [`UnknownSslMode`] (`allow` included).
    pub(crate) fn from_name(value: &str) -> Result<Self, UnknownSslMode> {
        match value {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            _ => Err(UnknownSslMode {
                value: value.to_string(),
            }),
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `sslmode` value that names none of the modes: the parse error of
/// [`SslMode::from_name`], which the store reports as `PgError::InvalidSslMode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownSslMode {
    /// The rejected value, as written.
    pub(crate) value: String,
}

impl fmt::Display for UnknownSslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid sslmode {:?}: use {}",
            self.value,
            SslMode::ALLOWED
        )
    }
}

impl std::error::Error for UnknownSslMode {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_back_as_written() {
        for mode in [
            SslMode::Disable,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert_eq!(SslMode::from_name(mode.as_str()), Ok(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(SslMode::default(), SslMode::Prefer);
        assert!(!SslMode::Prefer.requires_tls());
        assert!(SslMode::Require.requires_tls());
    }

    #[test]
    fn an_unknown_mode_names_the_allowed_values() {
        for bad in ["verify_full", "allow", "", "REQUIRE"] {
            let err = SslMode::from_name(bad).unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(SslMode::ALLOWED), "{err}");
        }
    }
}
