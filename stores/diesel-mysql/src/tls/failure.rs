//! Why a connection failed: a failed attempt classified ([`Failure`]), a refused
//! certificate explained in a line, and the typed TLS [`MysqlError`]s carried
//! through diesel-async's pool (which only passes a [`ConnectionError`] on) and
//! taken out again by [`connect_error`].

use std::error::Error as StdError;

use diesel::ConnectionError;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use mysql_async::{DriverError, IoError};
use rustls::CertificateError;

use super::mode::SslMode;
use crate::error::MysqlError;

/// Why one connection attempt failed.
pub(super) enum Failure {
    /// The TLS handshake itself: rustls refused the server or its certificate.
    Handshake(rustls::Error),
    /// The server does not offer TLS and TLS was asked for.
    NotSupported,
    /// Anything else mysql_async reported: the socket, authentication, the server.
    Mysql(mysql_async::Error),
    /// diesel-async's setup of a connected client.
    Setup(ConnectionError),
}

impl Failure {
    pub(super) fn classify(err: mysql_async::Error) -> Self {
        match err {
            mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer) => {
                Self::NotSupported
            }
            mysql_async::Error::Io(IoError::Tls(mysql_async::TlsError::Tls(err))) => {
                Self::Handshake(err)
            }
            mysql_async::Error::Io(IoError::Io(io))
                if io
                    .get_ref()
                    .is_some_and(|inner| inner.is::<rustls::Error>()) =>
            {
                match io
                    .into_inner()
                    .map(|inner| inner.downcast::<rustls::Error>())
                {
                    Some(Ok(err)) => Self::Handshake(*err),
                    // checked by the guard
                    _ => Self::Setup(ConnectionError::BadConnection(
                        "the TLS handshake failed".into(),
                    )),
                }
            }
            other => Self::Mysql(other),
        }
    }

    pub(super) fn into_connection_error(self, mode: SslMode, host: &str) -> ConnectionError {
        match self {
            Self::Handshake(rustls::Error::InvalidCertificate(cert)) => {
                tls_failure(MysqlError::TlsCertificate {
                    reason: certificate_reason(&cert, host),
                    host: host.to_string(),
                    ssl_mode: mode,
                    source: Box::new(rustls::Error::InvalidCertificate(cert)),
                })
            }
            Self::Handshake(err) => tls_failure(MysqlError::TlsHandshake {
                host: host.to_string(),
                source: Box::new(err),
            }),
            Self::NotSupported => tls_failure(MysqlError::TlsNotSupported { ssl_mode: mode }),
            Self::Mysql(err) => mysql_connection_error(err),
            Self::Setup(err) => err,
        }
    }
}

/// Explains a refused certificate in a line.
fn certificate_reason(err: &CertificateError, host: &str) -> String {
    match err {
        CertificateError::NotValidForName => format!("certificate not valid for host {host:?}"),
        CertificateError::NotValidForNameContext { presented, .. } if presented.is_empty() => {
            format!("certificate not valid for host {host:?}; it names no host")
        }
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "certificate not valid for host {host:?}; it is valid for {}",
            presented
                .iter()
                .map(|name| plain_name(name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        CertificateError::UnknownIssuer => "certificate not signed by a trusted root \
             (give the server's CA with ssl-ca=<file> or MysqlOptions::with_tls_root_certificates_pem)"
            .to_string(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "certificate expired".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "certificate not valid yet".to_string()
        }
        other => format!("certificate refused: {other}"),
    }
}

/// `localhost` for webpki's `DnsName("localhost")`, `127.0.0.1` for
/// `IpAddress(127.0.0.1)`; anything else as it is.
fn plain_name(name: &str) -> &str {
    name.strip_prefix("DnsName(\"")
        .and_then(|rest| rest.strip_suffix("\")"))
        .or_else(|| {
            name.strip_prefix("IpAddress(")
                .and_then(|rest| rest.strip_suffix(')'))
        })
        .unwrap_or(name)
}

/// Carries a typed TLS failure through diesel-async's pool, which only passes a
/// [`ConnectionError`] on: [`connect_error`] takes it out again. The variant is
/// diesel's one with a boxed error of any type; nothing outside this crate sees it.
fn tls_failure(err: MysqlError) -> ConnectionError {
    ConnectionError::CouldntSetupConfiguration(DieselError::QueryBuilderError(Box::new(err)))
}

/// The store's error for a connection that could not be opened: the typed TLS
/// failure it carries (see [`tls_failure`]), or [`MysqlError::Connect`].
pub(crate) fn connect_error(err: ConnectionError) -> MysqlError {
    match err {
        ConnectionError::CouldntSetupConfiguration(DieselError::QueryBuilderError(boxed))
            if boxed.is::<MysqlError>() =>
        {
            match boxed.downcast::<MysqlError>() {
                Ok(err) => *err,
                Err(boxed) => MysqlError::Connect(ConnectionError::CouldntSetupConfiguration(
                    DieselError::QueryBuilderError(boxed),
                )),
            }
        }
        other => MysqlError::Connect(other),
    }
}

/// What diesel-async's own `establish` makes of a mysql_async error, so the store
/// classifies a failed connection the same with or without TLS: a server error
/// keeps its message, a URL error is an invalid URL, anything else (refused, reset,
/// closed) a bad connection (transient).
fn mysql_connection_error(err: mysql_async::Error) -> ConnectionError {
    match err {
        mysql_async::Error::Server(server) => {
            let kind = match server.code {
                1062 | 1586 | 1859 => DatabaseErrorKind::UniqueViolation,
                1792 => DatabaseErrorKind::ReadOnlyTransaction,
                _ => DatabaseErrorKind::Unknown,
            };
            ConnectionError::CouldntSetupConfiguration(DieselError::DatabaseError(
                kind,
                Box::new(server.message),
            ))
        }
        mysql_async::Error::Url(url) => ConnectionError::InvalidConnectionUrl(url.to_string()),
        other => {
            // the driver's error and its causes, in a line
            let mut text = other.to_string();
            let mut cause = other.source();
            while let Some(err) = cause {
                let next = err.to_string();
                if !text.contains(&next) {
                    text.push_str(": ");
                    text.push_str(&next);
                }
                cause = err.source();
            }
            ConnectionError::BadConnection(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::StoreError;
    use rustls::pki_types::ServerName;

    #[test]
    fn a_tls_failure_survives_the_trip_through_the_pool() {
        let carried = Failure::classify(mysql_async::Error::Driver(
            DriverError::NoClientSslFlagFromServer,
        ))
        .into_connection_error(SslMode::Required, "db");
        let err = connect_error(carried);
        assert!(
            matches!(
                err,
                MysqlError::TlsNotSupported {
                    ssl_mode: SslMode::Required
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "the server does not support TLS but ssl-mode=REQUIRED"
        );
        assert!(!err.is_transient());
        // anything else stays a connection error
        let other = connect_error(ConnectionError::BadConnection("refused".into()));
        assert!(matches!(other, MysqlError::Connect(_)));
        assert!(other.is_transient());
    }

    #[test]
    fn a_handshake_error_inside_an_io_error_is_typed() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let failure = Failure::classify(mysql_async::Error::Io(IoError::Io(io)));
        let err = connect_error(failure.into_connection_error(SslMode::VerifyCa, "db"));
        assert!(
            matches!(&err, MysqlError::TlsCertificate { host, .. } if host == "db"),
            "{err:?}"
        );
        assert!(err.to_string().contains("trusted root"), "{err}");
    }

    #[test]
    fn certificate_failures_read_clearly() {
        let reason = certificate_reason(
            &CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("wrong.example").unwrap_or_else(|e| panic!("{e}")),
                presented: vec![
                    "DnsName(\"localhost\")".into(),
                    "IpAddress(127.0.0.1)".into(),
                ],
            },
            "wrong.example",
        );
        assert_eq!(
            reason,
            "certificate not valid for host \"wrong.example\"; it is valid for localhost, 127.0.0.1"
        );
    }
}
