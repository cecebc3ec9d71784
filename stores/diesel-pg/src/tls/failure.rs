//! Why a connection failed: a failed attempt classified ([`Failure`]), a refused
//! certificate explained in a line, and the typed TLS [`PgError`]s carried through
//! diesel-async's pool (which only passes a [`ConnectionError`] on) and taken out
//! again by [`connect_error`].

use std::error::Error as StdError;

use diesel::ConnectionError;
use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error as DieselError};
use rustls::CertificateError;

use super::mode::SslMode;
use super::stream::HandshakeError;
use crate::error::PgError;

/// Why one connection attempt failed.
pub(super) enum Failure {
    /// The TLS handshake itself (ours, in [`RustlsConnect`](super::stream::RustlsConnect)).
    Handshake(HandshakeError),
    /// The server answered the TLS request with "no" and TLS was required.
    NotSupported,
    /// Anything else tokio-postgres reported: the socket, authentication, the server.
    Postgres(tokio_postgres::Error),
    /// diesel-async's setup of a connected client.
    Setup(ConnectionError),
}

impl Failure {
    pub(super) fn classify(err: tokio_postgres::Error) -> Self {
        let source = err.source();
        if let Some(handshake) = source.and_then(|s| s.downcast_ref::<HandshakeError>()) {
            return Self::Handshake(handshake.clone_parts());
        }
        // tokio-postgres's own words when the server answers 'N' to the SSLRequest
        if source.is_some_and(|s| s.to_string() == "server does not support TLS") {
            return Self::NotSupported;
        }
        Self::Postgres(err)
    }

    pub(super) fn into_connection_error(self, mode: SslMode) -> ConnectionError {
        match self {
            Self::Handshake(handshake) => match handshake.rustls {
                Some(rustls::Error::InvalidCertificate(cert)) => {
                    tls_failure(PgError::TlsCertificate {
                        reason: certificate_reason(&cert, &handshake.host),
                        host: handshake.host,
                        sslmode: mode,
                        source: Box::new(rustls::Error::InvalidCertificate(cert)),
                    })
                }
                Some(err) => tls_failure(PgError::TlsHandshake {
                    host: handshake.host,
                    source: Box::new(err),
                }),
                // the socket failed mid-handshake (reset, closed): a connection
                // failure like any other, transient
                None => ConnectionError::CouldntSetupConfiguration(DieselError::DatabaseError(
                    DatabaseErrorKind::UnableToSendCommand,
                    Box::new(format!(
                        "the TLS handshake with {:?} failed: {}",
                        handshake.host, handshake.message
                    )),
                )),
            },
            Self::NotSupported => tls_failure(PgError::TlsNotSupported { sslmode: mode }),
            Self::Postgres(err) => postgres_connection_error(&err),
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
             (give the server's CA with sslrootcert=<file> or PgOptions::with_tls_root_certificates_pem)"
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
fn tls_failure(err: PgError) -> ConnectionError {
    ConnectionError::CouldntSetupConfiguration(DieselError::QueryBuilderError(Box::new(err)))
}

/// The store's error for a connection that could not be opened: the typed TLS
/// failure it carries (see [`tls_failure`]), or [`PgError::Connect`].
pub(crate) fn connect_error(err: ConnectionError) -> PgError {
    match err {
        ConnectionError::CouldntSetupConfiguration(DieselError::QueryBuilderError(boxed))
            if boxed.is::<PgError>() =>
        {
            match boxed.downcast::<PgError>() {
                Ok(err) => *err,
                Err(boxed) => PgError::Connect(ConnectionError::CouldntSetupConfiguration(
                    DieselError::QueryBuilderError(boxed),
                )),
            }
        }
        other => PgError::Connect(other),
    }
}

/// What diesel-async's own `establish` makes of a tokio-postgres error, so the
/// store classifies a failed connection the same with or without TLS: a server
/// error keeps its message and SQLSTATE, anything else (refused, reset, closed)
/// reads as an unsent command (transient).
fn postgres_connection_error(err: &tokio_postgres::Error) -> ConnectionError {
    use tokio_postgres::error::SqlState;
    let diesel = match err.as_db_error() {
        Some(db) => {
            let kind = match *db.code() {
                SqlState::UNIQUE_VIOLATION => DatabaseErrorKind::UniqueViolation,
                SqlState::FOREIGN_KEY_VIOLATION => DatabaseErrorKind::ForeignKeyViolation,
                SqlState::RESTRICT_VIOLATION => DatabaseErrorKind::RestrictViolation,
                SqlState::EXCLUSION_VIOLATION => DatabaseErrorKind::ExclusionViolation,
                SqlState::T_R_SERIALIZATION_FAILURE => DatabaseErrorKind::SerializationFailure,
                SqlState::READ_ONLY_SQL_TRANSACTION => DatabaseErrorKind::ReadOnlyTransaction,
                SqlState::NOT_NULL_VIOLATION => DatabaseErrorKind::NotNullViolation,
                SqlState::CHECK_VIOLATION => DatabaseErrorKind::CheckViolation,
                _ => DatabaseErrorKind::Unknown,
            };
            DieselError::DatabaseError(kind, Box::new(ServerError(db.clone())))
        }
        None => DieselError::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand,
            Box::new(err.to_string()),
        ),
    };
    ConnectionError::CouldntSetupConfiguration(diesel)
}

/// A server's error report, as diesel reads one.
struct ServerError(tokio_postgres::error::DbError);

impl DatabaseErrorInformation for ServerError {
    fn message(&self) -> &str {
        self.0.message()
    }
    fn details(&self) -> Option<&str> {
        self.0.detail()
    }
    fn hint(&self) -> Option<&str> {
        self.0.hint()
    }
    fn table_name(&self) -> Option<&str> {
        self.0.table()
    }
    fn column_name(&self) -> Option<&str> {
        self.0.column()
    }
    fn constraint_name(&self) -> Option<&str> {
        self.0.constraint()
    }
    fn statement_position(&self) -> Option<i32> {
        use tokio_postgres::error::ErrorPosition;
        self.0.position().and_then(|position| match *position {
            ErrorPosition::Original(at) | ErrorPosition::Internal { position: at, .. } => {
                at.try_into().ok()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::StoreError;
    use rustls::pki_types::ServerName;

    #[test]
    fn a_tls_failure_survives_the_trip_through_the_pool() {
        let carried = tls_failure(PgError::TlsNotSupported {
            sslmode: SslMode::VerifyFull,
        });
        let err = connect_error(carried);
        assert!(
            matches!(
                err,
                PgError::TlsNotSupported {
                    sslmode: SslMode::VerifyFull
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "the server does not support TLS but sslmode=verify-full"
        );
        assert!(!err.is_transient());
        // anything else stays a connection error
        let other = connect_error(ConnectionError::BadConnection("refused".into()));
        assert!(matches!(other, PgError::Connect(_)));
    }

    #[test]
    fn certificate_failures_read_clearly() {
        let reason = certificate_reason(
            &CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("wrong.example").unwrap_or_else(|e| panic!("{e}")),
                presented: vec![
                    "DnsName(\"localhost\")".into(),
                    "IpAddress(127.0.0.1)".into(),
                    "Other".into(),
                ],
            },
            "wrong.example",
        );
        assert_eq!(
            reason,
            "certificate not valid for host \"wrong.example\"; it is valid for localhost, 127.0.0.1, Other"
        );
        assert!(
            certificate_reason(&CertificateError::UnknownIssuer, "db").contains("trusted root")
        );
    }
}
