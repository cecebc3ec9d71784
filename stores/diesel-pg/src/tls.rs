//! TLS for the pool's connections: libpq's `sslmode` and `sslrootcert` read from the
//! connection string (and taken out of it: tokio-postgres knows neither `verify-ca`,
//! `verify-full` nor `sslrootcert`), rustls on the ring provider under tokio-postgres's
//! TLS hook, and the failures of a TLS connection as typed [`PgError`]s.
//!
//! The trust store, when no root certificate is given, is the Mozilla set compiled in
//! by `webpki-roots` rather than the operating system's: the same set whatever the
//! machine or container (many slim images carry no CA bundle), no file read at each
//! connection, and the same choice as the outbox's HTTP sink (reqwest's
//! `rustls-tls`). Managed databases that sign with a private CA (RDS, Cloud SQL,
//! Azure) need their CA given anyway, with `sslrootcert` or
//! [`PgOptions::tls_root_certificates_pem`].

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};

use diesel::ConnectionError;
use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error as DieselError};
use diesel_async::AsyncPgConnection;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use sha2::Digest as _;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, SslNegotiation};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, NoTls, TlsConnect, TlsStream};
use tokio_postgres::{Config, Socket};

use crate::error::PgError;
use crate::options::PgOptions;

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
/// [`PgOptions::tls_root_certificates_pem`], else the compiled-in Mozilla set
/// (`webpki-roots`). libpq's `allow` is not supported.
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
    fn requires_tls(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = PgError;

    /// Parses a connection string's value: [`PgError::InvalidSslMode`] names the
    /// allowed values for anything else (`allow` included).
    fn from_str(value: &str) -> Result<Self, PgError> {
        match value {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            _ => Err(PgError::InvalidSslMode {
                value: value.to_string(),
            }),
        }
    }
}

/// The parameters this module handles, as found in a connection string.
#[derive(Debug, Default, PartialEq, Eq)]
struct TlsParams {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
}

/// Opens the store's connections: the connection string parsed once, with the TLS
/// configuration it and the options ask for.
pub(crate) struct Connector {
    /// What tokio-postgres is given: `sslmode` translated to the three modes it
    /// knows (`verify-*` become `require`; the verification is the rustls config's).
    config: Config,
    /// `prefer` only: the same without TLS, for libpq's retry in plain text after a
    /// failed handshake.
    plain_retry: Option<Config>,
    mode: SslMode,
    /// `None` when no connection uses TLS (`disable`, or only Unix sockets).
    tls: Option<Arc<ClientConfig>>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio-postgres's Config hides the password in its Debug output
        f.debug_struct("Connector")
            .field("config", &self.config)
            .field("mode", &self.mode)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Connector {
    /// Parses `url` (a `postgres://` URL or a `key=value` string) and builds the TLS
    /// configuration its `sslmode` and `sslrootcert` and `options` ask for.
    pub(crate) fn new(url: &str, options: &PgOptions) -> Result<Self, PgError> {
        let (rest, params) = split_params(url)?;
        let mut config: Config = rest
            .parse()
            .map_err(|err: tokio_postgres::Error| invalid_url(&err))?;
        let system_roots = params.sslrootcert.as_deref() == Some("system");
        let mode = match params.sslmode.as_deref() {
            Some(value) => value.parse()?,
            // libpq: `sslrootcert=system` makes verify-full the default
            None if system_roots => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if system_roots && mode != SslMode::VerifyFull {
            return Err(PgError::TlsSettings {
                reason: format!(
                    "sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode={mode}"
                ),
                source: None,
            });
        }
        if config.get_ssl_negotiation() == SslNegotiation::Direct && !mode.requires_tls() {
            return Err(PgError::TlsSettings {
                reason: format!(
                    "sslnegotiation=direct needs sslmode=require, verify-ca or verify-full, not sslmode={mode}"
                ),
                source: None,
            });
        }
        // libpq: sslmode is ignored on Unix-domain sockets (the server never offers TLS there)
        let unix_only = config.get_hostaddrs().is_empty()
            && !config.get_hosts().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|host| !matches!(host, Host::Tcp(_)));
        let mode = if unix_only { SslMode::Disable } else { mode };

        let roots = if mode == SslMode::Disable {
            None
        } else {
            given_roots(params.sslrootcert.as_deref(), options)?
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Option<Arc<dyn ServerCertVerifier>> = match (mode, roots) {
            (SslMode::Disable, _) => None,
            // prefer never verifies: it falls back to plain text on any TLS failure,
            // so a verification would only turn a bad certificate into plain text
            (SslMode::Prefer, _) | (SslMode::Require, None) => {
                Some(Arc::new(NoVerification { algorithms }))
            }
            (SslMode::Require | SslMode::VerifyCa, roots) => Some(Arc::new(ChainOnly {
                roots: Arc::new(roots.unwrap_or_else(webpki_roots)),
                algorithms,
            })),
            (SslMode::VerifyFull, roots) => {
                let roots = Arc::new(roots.unwrap_or_else(webpki_roots));
                let verifier =
                    WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                        .build()
                        .map_err(|err| PgError::TlsSettings {
                            reason: "the certificate verifier could not be built".into(),
                            source: Some(Box::new(err)),
                        })?;
                Some(verifier)
            }
        };
        let tls = verifier
            .map(|verifier| client_config(provider, verifier))
            .transpose()?;

        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        let plain_retry = (mode == SslMode::Prefer).then(|| {
            let mut plain = config.clone();
            plain.ssl_mode(tokio_postgres::config::SslMode::Disable);
            plain
        });
        Ok(Self {
            config,
            plain_retry,
            mode,
            tls: tls.map(Arc::new),
        })
    }

    /// Opens one connection. TLS failures come back as a [`ConnectionError`] that
    /// [`connect_error`] turns into their typed [`PgError`].
    pub(crate) async fn establish(&self) -> Result<AsyncPgConnection, ConnectionError> {
        match self.connect(&self.config, self.tls.as_ref()).await {
            // libpq's prefer: a failed handshake is retried once in plain text
            Err(Failure::Handshake(_)) if self.plain_retry.is_some() => {
                let plain = self.plain_retry.as_ref().expect("checked by the guard");
                self.connect(plain, None)
                    .await
                    .map_err(|failure| failure.into_connection_error(self.mode))
            }
            result => result.map_err(|failure| failure.into_connection_error(self.mode)),
        }
    }

    async fn connect(
        &self,
        config: &Config,
        tls: Option<&Arc<ClientConfig>>,
    ) -> Result<AsyncPgConnection, Failure> {
        match tls {
            Some(tls) => {
                let (client, connection) = config
                    .connect(MakeRustls(Arc::clone(tls)))
                    .await
                    .map_err(Failure::classify)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection)
                    .await
                    .map_err(Failure::Setup)
            }
            None => {
                let (client, connection) =
                    config.connect(NoTls).await.map_err(Failure::classify)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection)
                    .await
                    .map_err(Failure::Setup)
            }
        }
    }
}

/// Builds the rustls client configuration: the ring provider installed on this
/// configuration only (never a process-wide default), TLS 1.2 and 1.3, `verifier`.
fn client_config(
    provider: Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
) -> Result<ClientConfig, PgError> {
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| PgError::TlsSettings {
            reason: "the TLS client configuration could not be built".into(),
            source: Some(Box::new(err)),
        })?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(config)
}

fn webpki_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// The root certificates given by `sslrootcert` (a PEM file; `system` means the
/// compiled-in set, so `None` here) or else by the options.
fn given_roots(
    sslrootcert: Option<&str>,
    options: &PgOptions,
) -> Result<Option<RootCertStore>, PgError> {
    match sslrootcert {
        Some("system") => Ok(None),
        Some(path) => {
            let pem = std::fs::read(path).map_err(|err| PgError::TlsSettings {
                reason: format!("could not read sslrootcert={path}"),
                source: Some(Box::new(err)),
            })?;
            root_store(&pem, &format!("sslrootcert={path}")).map(Some)
        }
        None => options
            .get_tls_root_certificates_pem()
            .map(|pem| root_store(pem, "PgOptions::tls_root_certificates_pem"))
            .transpose(),
    }
}

/// Parses the PEM certificates of `pem` (from `origin`, for errors) into a store:
/// at least one, all valid.
fn root_store(pem: &[u8], origin: &str) -> Result<RootCertStore, PgError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|err| PgError::TlsSettings {
            reason: format!("the root certificates of {origin} are not valid PEM"),
            source: Some(Box::new(err)),
        })?;
        roots.add(cert).map_err(|err| PgError::TlsSettings {
            reason: format!("a root certificate of {origin} is not a valid CA certificate"),
            source: Some(Box::new(err)),
        })?;
    }
    if roots.is_empty() {
        return Err(PgError::TlsSettings {
            reason: format!(
                "{origin} holds no certificate (expected PEM blocks \"-----BEGIN CERTIFICATE-----\")"
            ),
            source: None,
        });
    }
    Ok(roots)
}

/// Takes `sslmode` and `sslrootcert` out of a connection string, leaving the rest
/// for tokio-postgres. A string this cannot take apart is returned unchanged, for
/// tokio-postgres to report.
fn split_params(conn: &str) -> Result<(String, TlsParams), PgError> {
    let url = ["postgres://", "postgresql://"]
        .iter()
        .any(|prefix| conn.starts_with(prefix));
    if url {
        split_url(conn)
    } else {
        Ok(split_key_value(conn).unwrap_or_else(|| (conn.to_string(), TlsParams::default())))
    }
}

fn take(params: &mut TlsParams, key: &str, value: String) -> bool {
    match key {
        "sslmode" => params.sslmode = Some(value),
        "sslrootcert" => params.sslrootcert = Some(value),
        _ => return false,
    }
    true
}

/// The URL form: `postgres://…?sslmode=verify-full&sslrootcert=/etc/ca.pem&…`.
fn split_url(url: &str) -> Result<(String, TlsParams), PgError> {
    let mut params = TlsParams::default();
    // tokio-postgres reads everything up to the first `@` as user and password, so
    // the query starts at the first `?` after it
    let authority = url.find('@').map_or(0, |at| at + 1);
    let Some(at) = url[authority..].find('?').map(|at| authority + at) else {
        return Ok((url.to_string(), params));
    };
    let (base, query) = (&url[..at], &url[at + 1..]);
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let handled = match pair.split_once('=') {
            Some((key, value)) => {
                let key = percent_decode(key)?;
                let value = percent_decode(value)?;
                take(&mut params, &key, value)
            }
            None => false,
        };
        if !handled {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, params))
}

/// Decodes `%XX` escapes (an invalid escape stays as written, as tokio-postgres
/// reads it).
fn percent_decode(text: &str) -> Result<String, PgError> {
    fn hex(byte: Option<&u8>) -> Option<u8> {
        byte.and_then(|&b| char::from(b).to_digit(16))
            .and_then(|digit| u8::try_from(digit).ok())
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        match (byte, hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi << 4) | lo);
                i += 3;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        PgError::Connect(ConnectionError::InvalidConnectionUrl(format!(
            "a parameter of the connection URL is not UTF-8 once decoded: {text:?}"
        )))
    })
}

/// The key/value form: `host=db.internal sslmode=verify-full sslrootcert='/etc/ca.pem'`,
/// with tokio-postgres's quoting (`'…'`, backslash escapes). `None` when it cannot
/// be taken apart.
fn split_key_value(conn: &str) -> Option<(String, TlsParams)> {
    let mut params = TlsParams::default();
    let mut kept = Vec::new();
    let mut chars = conn.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        chars.next_if(|(_, c)| *c == '=')?;
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next()? {
                    (_, '\'') => break,
                    (_, '\\') => value.push(chars.next()?.1),
                    (_, c) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next()?.1);
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(conn.len(), |&(i, _)| i);
        if !take(&mut params, &key, value) {
            // as written: tokio-postgres reads the quoting again
            kept.push(&conn[start..end]);
        }
    }
    Some((kept.join(" "), params))
}

fn invalid_url(err: &tokio_postgres::Error) -> PgError {
    // tokio-postgres's message names the bad part ("invalid value for option `port`")
    let detail = err.source().map_or_else(String::new, |s| format!(": {s}"));
    PgError::Connect(ConnectionError::InvalidConnectionUrl(format!(
        "invalid connection string{detail}"
    )))
}

/// Why one connection attempt failed.
enum Failure {
    /// The TLS handshake itself (ours, in [`RustlsConnect`]).
    Handshake(HandshakeError),
    /// The server answered the TLS request with "no" and TLS was required.
    NotSupported,
    /// Anything else tokio-postgres reported: the socket, authentication, the server.
    Postgres(tokio_postgres::Error),
    /// diesel-async's setup of a connected client.
    Setup(ConnectionError),
}

impl Failure {
    fn classify(err: tokio_postgres::Error) -> Self {
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

    fn into_connection_error(self, mode: SslMode) -> ConnectionError {
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
             (give the server's CA with sslrootcert=<file> or PgOptions::tls_root_certificates_pem)"
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

/// The TLS handshake failed: the host it was for and why (rustls's error when it
/// was one, else the I/O error's message).
#[derive(Debug)]
struct HandshakeError {
    host: String,
    rustls: Option<rustls::Error>,
    message: String,
}

impl HandshakeError {
    fn new(host: String, err: &io::Error) -> Self {
        let rustls = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .cloned();
        Self {
            host,
            rustls,
            message: err.to_string(),
        }
    }

    fn clone_parts(&self) -> Self {
        Self {
            host: self.host.clone(),
            rustls: self.rustls.clone(),
            message: self.message.clone(),
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the TLS handshake with {:?} failed: {}",
            self.host, self.message
        )
    }
}

impl StdError for HandshakeError {}

/// tokio-postgres's TLS hook: one [`RustlsConnect`] per host it connects to.
struct MakeRustls(Arc<ClientConfig>);

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        // called before the server says whether it speaks TLS, also for a Unix
        // socket (with an empty name): a bad name fails the handshake, if any
        let name = ServerName::try_from(domain.to_string())
            .map_err(|err| format!("{domain:?} is not a host name TLS can verify: {err}"));
        Ok(RustlsConnect {
            config: Arc::clone(&self.0),
            host: domain.to_string(),
            name,
        })
    }
}

struct RustlsConnect {
    config: Arc<ClientConfig>,
    host: String,
    name: Result<ServerName<'static>, String>,
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = HandshakeError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream, HandshakeError>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let name = self.name.map_err(|reason| {
                HandshakeError::new(
                    self.host.clone(),
                    &io::Error::new(io::ErrorKind::InvalidInput, reason),
                )
            })?;
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(name, stream)
                .await
                .map_err(|err| HandshakeError::new(self.host, &err))?;
            Ok(RustlsStream(stream))
        })
    }
}

/// A TLS connection to the server, with the channel binding SCRAM asks for.
struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| tls_server_end_point(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// RFC 5929's `tls-server-end-point`: the server certificate hashed with its
/// signature's hash (SHA-256 for MD5 and SHA-1), for SCRAM-SHA-256-PLUS. `None`
/// for a signature without one hash (Ed25519, RSASSA-PSS): SCRAM then runs without
/// channel binding, as the server would offer.
fn tls_server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
    let (certificate, _) = der_element(cert, 0x30)?;
    let (_tbs, rest) = der_element(certificate, 0x30)?;
    let (algorithm, _) = der_element(rest, 0x30)?;
    let (oid, _) = der_element(algorithm, 0x06)?;
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04];
    enum Hash {
        Sha256,
        Sha384,
        Sha512,
    }
    let hash = match oid {
        // md5WithRSAEncryption, sha1WithRSAEncryption, sha256WithRSAEncryption
        [rsa @ .., 0x04 | 0x05 | 0x0b] if rsa == RSA => Hash::Sha256,
        [rsa @ .., 0x0c] if rsa == RSA => Hash::Sha384,
        [rsa @ .., 0x0d] if rsa == RSA => Hash::Sha512,
        // ecdsa-with-SHA1
        [ecdsa @ .., 0x01] if ecdsa == ECDSA => Hash::Sha256,
        // ecdsa-with-SHA256, -SHA384, -SHA512
        [ecdsa @ .., 0x03, 0x02] if ecdsa == ECDSA => Hash::Sha256,
        [ecdsa @ .., 0x03, 0x03] if ecdsa == ECDSA => Hash::Sha384,
        [ecdsa @ .., 0x03, 0x04] if ecdsa == ECDSA => Hash::Sha512,
        _ => return None,
    };
    Some(match hash {
        Hash::Sha256 => sha2::Sha256::digest(cert).to_vec(),
        Hash::Sha384 => sha2::Sha384::digest(cert).to_vec(),
        Hash::Sha512 => sha2::Sha512::digest(cert).to_vec(),
    })
}

/// Splits the DER element with `tag` at the start of `input` into its contents and
/// what follows it.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&found, rest) = input.split_first()?;
    if found != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        let len = bytes
            .iter()
            .fold(0usize, |len, &byte| (len << 8) | usize::from(byte));
        (len, rest)
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// `require` and `prefer` without a root certificate: any certificate, but the
/// handshake's signatures are still checked against it (so the SCRAM channel
/// binding stands for the key the server holds).
#[derive(Debug)]
struct NoVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `verify-ca` (and `require` with a root certificate): the chain must lead to a
/// trusted root; the names in the certificate are not compared with the host.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::StoreError;

    fn split(conn: &str) -> (String, TlsParams) {
        split_params(conn).unwrap_or_else(|err| panic!("{conn}: {err}"))
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_url() {
        let (rest, params) = split(
            "postgres://app:pw@db.internal:5433/app?application_name=hb&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20file.pem&connect_timeout=3",
        );
        assert_eq!(
            rest,
            "postgres://app:pw@db.internal:5433/app?application_name=hb&connect_timeout=3"
        );
        assert_eq!(params.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(params.sslrootcert.as_deref(), Some("/etc/ca file.pem"));

        let (rest, params) = split("postgresql://app@localhost/app?sslmode=require");
        assert_eq!(rest, "postgresql://app@localhost/app");
        assert_eq!(params.sslmode.as_deref(), Some("require"));

        let (rest, params) = split("postgres://app@localhost/app");
        assert_eq!(rest, "postgres://app@localhost/app");
        assert_eq!(params, TlsParams::default());

        // a `?` in the password is the password's
        let (rest, params) = split("postgres://app:p?sslmode=x@localhost/app?sslmode=disable");
        assert_eq!(rest, "postgres://app:p?sslmode=x@localhost/app");
        assert_eq!(params.sslmode.as_deref(), Some("disable"));
        // bad escapes stay as written; a decoded value must be UTF-8
        assert_eq!(percent_decode("a%2x%41%").ok().as_deref(), Some("a%2xA%"));
        assert!(split_params("postgres://a@h/d?sslrootcert=%ff").is_err());
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_key_value_string() {
        let (rest, params) = split(
            "host=db.internal sslmode = verify-ca  user=app sslrootcert='/etc/my ca\\'s.pem' dbname=app",
        );
        assert_eq!(rest, "host=db.internal user=app dbname=app");
        assert_eq!(params.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(params.sslrootcert.as_deref(), Some("/etc/my ca's.pem"));
        // what tokio-postgres accepts is left as it was
        let parsed: Config = rest.parse().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(parsed.get_user(), Some("app"));

        let (rest, params) = split("host=/run/postgresql user=app");
        assert_eq!(rest, "host=/run/postgresql user=app");
        assert_eq!(params, TlsParams::default());
    }

    #[test]
    fn a_wrong_sslmode_names_the_allowed_values() {
        for bad in ["verify_full", "allow", "", "REQUIRE"] {
            let err = Connector::new(
                &format!("postgres://app@localhost/app?sslmode={bad}"),
                &PgOptions::new(),
            )
            .unwrap_err();
            assert!(matches!(&err, PgError::InvalidSslMode { value } if value == bad));
            let message = err.to_string();
            assert!(
                message.contains("disable, prefer, require, verify-ca or verify-full"),
                "{message}"
            );
            assert!(!err.is_transient());
        }
        for good in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            let mode: SslMode = good.parse().unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(mode.as_str(), good);
            assert!(
                Connector::new(
                    &format!("postgres://app@localhost/app?sslmode={good}"),
                    &PgOptions::new()
                )
                .is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn modes_translate_to_what_tokio_postgres_knows() {
        use tokio_postgres::config::SslMode as Tp;
        let mode = |url: &str| {
            let connector =
                Connector::new(url, &PgOptions::new()).unwrap_or_else(|err| panic!("{err}"));
            (
                connector.mode,
                connector.config.get_ssl_mode(),
                connector.tls.is_some(),
                connector.plain_retry.is_some(),
            )
        };
        let base = "postgres://app@localhost/app";
        assert_eq!(mode(base), (SslMode::Prefer, Tp::Prefer, true, true));
        assert_eq!(
            mode(&format!("{base}?sslmode=disable")),
            (SslMode::Disable, Tp::Disable, false, false)
        );
        assert_eq!(
            mode(&format!("{base}?sslmode=verify-full")),
            (SslMode::VerifyFull, Tp::Require, true, false)
        );
        assert_eq!(
            mode(&format!("{base}?sslrootcert=system")),
            (SslMode::VerifyFull, Tp::Require, true, false)
        );
        // libpq ignores sslmode on a Unix socket
        assert_eq!(
            mode("host=/run/postgresql user=app sslmode=require"),
            (SslMode::Disable, Tp::Disable, false, false)
        );
    }

    #[test]
    fn unusable_tls_settings_are_refused_up_front() {
        let cases = [
            (
                "postgres://a@localhost/a?sslmode=require&sslrootcert=system",
                "sslrootcert=system needs sslmode=verify-full",
            ),
            (
                "postgres://a@localhost/a?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
                "could not read sslrootcert=/nonexistent/ca.pem",
            ),
            (
                "postgres://a@localhost/a?sslnegotiation=direct",
                "sslnegotiation=direct needs",
            ),
        ];
        for (url, expected) in cases {
            let err = Connector::new(url, &PgOptions::new()).unwrap_err();
            assert!(matches!(err, PgError::TlsSettings { .. }), "{url}: {err:?}");
            assert!(err.to_string().contains(expected), "{url}: {err}");
            assert!(!err.is_transient());
        }
        let err = Connector::new(
            "postgres://a@localhost/a?sslmode=verify-full",
            &PgOptions::new().tls_root_certificates_pem("not a certificate"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("holds no certificate"), "{err}");
        // a wrong URL is reported before any connection, as not transient
        let err =
            Connector::new("postgres://a@localhost:notaport/a", &PgOptions::new()).unwrap_err();
        assert!(
            matches!(
                err,
                PgError::Connect(ConnectionError::InvalidConnectionUrl(_))
            ),
            "{err:?}"
        );
        assert!(!err.is_transient());
    }

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

    /// A certificate's skeleton: the signature algorithm is what matters.
    fn fake_certificate(oid: &[u8]) -> Vec<u8> {
        let mut algorithm = vec![0x06, u8::try_from(oid.len()).unwrap_or(0)];
        algorithm.extend_from_slice(oid);
        algorithm.extend_from_slice(&[0x05, 0x00]);
        let mut body = vec![0x30, 0x03, 0x02, 0x01, 0x02]; // tbsCertificate
        body.push(0x30);
        body.push(u8::try_from(algorithm.len()).unwrap_or(0));
        body.extend_from_slice(&algorithm);
        body.extend_from_slice(&[0x03, 0x02, 0x00, 0xff]); // signature
        let mut cert = vec![0x30, 0x81, u8::try_from(body.len()).unwrap_or(0)];
        cert.extend_from_slice(&body);
        cert
    }

    #[test]
    fn channel_binding_hashes_with_the_signature_hash() {
        let rsa = |last: u8| {
            let mut oid = vec![0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
            oid.push(last);
            oid
        };
        let ecdsa = |tail: &[u8]| {
            let mut oid = vec![0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04];
            oid.extend_from_slice(tail);
            oid
        };
        for (oid, len) in [
            (rsa(0x05), 32),
            (rsa(0x0b), 32),
            (rsa(0x0c), 48),
            (rsa(0x0d), 64),
            (ecdsa(&[0x01]), 32),
            (ecdsa(&[0x03, 0x02]), 32),
            (ecdsa(&[0x03, 0x03]), 48),
            (ecdsa(&[0x03, 0x04]), 64),
        ] {
            let cert = fake_certificate(&oid);
            let binding = tls_server_end_point(&cert).unwrap_or_else(|| panic!("{oid:02x?}"));
            assert_eq!(binding.len(), len, "{oid:02x?}");
        }
        let sha256 = fake_certificate(&rsa(0x0b));
        assert_eq!(
            tls_server_end_point(&sha256),
            Some(sha2::Sha256::digest(&sha256).to_vec())
        );
        // Ed25519 (1.3.101.112) and RSASSA-PSS have no single hash: no binding
        assert_eq!(
            tls_server_end_point(&fake_certificate(&[0x2b, 0x65, 0x70])),
            None
        );
        assert_eq!(tls_server_end_point(&fake_certificate(&rsa(0x0a))), None);
        // truncated or not DER at all
        assert_eq!(tls_server_end_point(&sha256[..sha256.len() - 3]), None);
        assert_eq!(tls_server_end_point(b"not der"), None);
    }
}
