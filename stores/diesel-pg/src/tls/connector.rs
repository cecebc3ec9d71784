//! Opening connections: [`Connector`] parses the connection string once, builds
//! the rustls configuration its `sslmode` and `sslrootcert` (and the options) ask
//! for, and opens each connection, retrying a failed handshake in plain text under
//! `prefer` as libpq does.

use std::fmt;
use std::sync::Arc;

use diesel::ConnectionError;
use diesel_async::AsyncPgConnection;
use rustls::ClientConfig;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use tokio_postgres::Config;
use tokio_postgres::config::{Host, SslNegotiation};
use tokio_postgres::tls::NoTls;

use super::failure::Failure;
use super::mode::SslMode;
use super::params::{invalid_url, split_params};
use super::stream::MakeRustls;
use super::verify::{NoHostNameCheck, given_roots, webpki_roots};
use crate::error::PgError;
use crate::options::PgOptions;

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
            (SslMode::Prefer, _) | (SslMode::Require, None) => Some(Arc::new(NoHostNameCheck {
                roots: None,
                algorithms,
            })),
            (SslMode::Require | SslMode::VerifyCa, roots) => Some(Arc::new(NoHostNameCheck {
                roots: Some(Arc::new(roots.unwrap_or_else(webpki_roots))),
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
    /// [`connect_error`](super::failure::connect_error) turns into their typed [`PgError`].
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

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::StoreError;

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
            &PgOptions::new().with_tls_root_certificates_pem("not a certificate"),
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
}
