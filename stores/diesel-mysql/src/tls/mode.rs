//! The SSL mode: [`SslMode`], the `ssl-mode` of MySQL's own clients as this crate
//! reads it, and its parsing from a URL's value.
//!
//! A leaf: this file imports nothing else from the crate, so the store's error type
//! can name a mode (`MysqlError::TlsNotSupported`) without importing the rest of the
//! TLS code. A wrong value is an [`UnknownSslMode`]; `SslMode`'s `FromStr` (in
//! `error.rs`, beside `MysqlError`, whose error it returns) turns it into
//! `MysqlError::InvalidSslMode`.

use std::fmt;

/// How a connection uses TLS: the `ssl-mode` of the `mysql` client and the MySQL
/// connectors, read from the URL (`mysql://app@db/app?ssl-mode=VERIFY_IDENTITY`),
/// in any case.
///
/// | mode | TLS | the server's certificate |
/// |---|---|---|
/// | `DISABLED` | never | not looked at |
/// | `PREFERRED` (the default) | when the server offers it; plain text when it does not, or when the handshake fails | not verified |
/// | `REQUIRED` | always: a server without TLS is refused | not verified, unless a CA is given (`ssl-ca`): then verified as `VERIFY_CA`, as the `mysql` client does |
/// | `VERIFY_CA` | always | signed by a trusted root |
/// | `VERIFY_IDENTITY` | always | signed by a trusted root and valid for the host name connected to |
///
/// The trusted roots are `ssl-ca`'s PEM file, else
/// [`MysqlOptions::with_tls_root_certificates_pem`](crate::MysqlOptions::with_tls_root_certificates_pem),
/// else the compiled-in Mozilla set (`webpki-roots`).
///
/// # `VERIFY_CA` checks the host name too
/// mysql_async 0.36, the driver under diesel-async 0.9, skips the host-name check
/// by matching an error text that rustls 0.23 no longer writes, so a certificate
/// valid for another name is refused under `VERIFY_CA` (and `REQUIRED` with a CA)
/// as under `VERIFY_IDENTITY`: stricter than MySQL's clients, never weaker. Connect
/// by a name the certificate holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain text only.
    Disabled,
    /// TLS when the server offers it, without verifying its certificate; plain text
    /// otherwise (the `mysql` client's default).
    #[default]
    Preferred,
    /// TLS or no connection; the certificate is verified only when a CA is given
    /// (then as [`SslMode::VerifyCa`]).
    Required,
    /// TLS with the certificate chain verified against the trusted roots (and, with
    /// this driver, the host name: see the type's docs).
    VerifyCa,
    /// TLS with the certificate chain verified and valid for the host connected to.
    VerifyIdentity,
}

impl SslMode {
    /// The values `ssl-mode` accepts, for error messages.
    pub const ALLOWED: &'static str = "DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY";

    /// Returns the mode as MySQL's documentation writes it (`"VERIFY_IDENTITY"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "DISABLED",
            Self::Preferred => "PREFERRED",
            Self::Required => "REQUIRED",
            Self::VerifyCa => "VERIFY_CA",
            Self::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }

    /// Parses a URL's value: one of the names [`as_str`](Self::as_str) gives, in
    /// any ASCII case (as the `mysql` client reads it), else [`UnknownSslMode`].
    pub(crate) fn from_name(value: &str) -> Result<Self, UnknownSslMode> {
        [
            Self::Disabled,
            Self::Preferred,
            Self::Required,
            Self::VerifyCa,
            Self::VerifyIdentity,
        ]
        .into_iter()
        .find(|mode| mode.as_str().eq_ignore_ascii_case(value))
        .ok_or_else(|| UnknownSslMode {
            value: value.to_string(),
        })
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `ssl-mode` value that names none of the modes: the parse error of
/// [`SslMode::from_name`], which the store reports as `MysqlError::InvalidSslMode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownSslMode {
    /// The rejected value, as written.
    pub(crate) value: String,
}

impl fmt::Display for UnknownSslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid ssl-mode {:?}: use {}",
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
    fn modes_read_back_as_written_in_any_case() {
        for mode in [
            SslMode::Disabled,
            SslMode::Preferred,
            SslMode::Required,
            SslMode::VerifyCa,
            SslMode::VerifyIdentity,
        ] {
            assert_eq!(SslMode::from_name(mode.as_str()), Ok(mode));
            assert_eq!(
                SslMode::from_name(&mode.as_str().to_ascii_lowercase()),
                Ok(mode)
            );
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(SslMode::default(), SslMode::Preferred);
    }

    #[test]
    fn an_unknown_mode_names_the_allowed_values() {
        for bad in ["verify-full", "VERIFY-CA", "", "require", "true"] {
            let err = SslMode::from_name(bad).unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(SslMode::ALLOWED), "{err}");
        }
    }
}
