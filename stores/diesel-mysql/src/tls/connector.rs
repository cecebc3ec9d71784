//! Opening connections: [`Connector`] parses the URL once, builds the driver's
//! options with the TLS its `ssl-mode` and `ssl-ca` (and the store's options) ask
//! for, and opens each connection, retrying in plain text under `PREFERRED` when the
//! server offers no TLS or the handshake fails, as MySQL's clients do. The retry is a
//! second TCP connection (mysql_async gives up on a socket it asked TLS of), paid
//! once per pooled connection, never per statement: set `ssl-mode=DISABLED` for a
//! server known to have no TLS.

use std::fmt;

use diesel::ConnectionError;
use diesel_async::AsyncMysqlConnection;
use mysql_async::{Opts, OptsBuilder, SslOpts};

use super::failure::Failure;
use super::mode::SslMode;
use super::params::split_params;
use super::verify::given_roots;
use crate::error::MysqlError;
use crate::options::MysqlOptions;

/// Opens the store's connections: the URL parsed once, with the TLS configuration
/// it and the options ask for.
pub(crate) struct Connector {
    /// What mysql_async is given: TLS as the mode says (none for `DISABLED`).
    opts: Opts,
    /// `PREFERRED` only: the same without TLS, for the retry in plain text.
    plain_retry: Option<Opts>,
    mode: SslMode,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the options hold the password: show where and how only
        f.debug_struct("Connector")
            .field("host", &self.opts.ip_or_hostname())
            .field("port", &self.opts.tcp_port())
            .field("mode", &self.mode)
            .field("tls", &self.opts.ssl_opts().is_some())
            .finish()
    }
}

impl Connector {
    /// Parses `url` (a `mysql://` URL) and builds the driver's options with the TLS
    /// its `ssl-mode` and `ssl-ca` and `options` ask for.
    pub(crate) fn new(url: &str, options: &MysqlOptions) -> Result<Self, MysqlError> {
        let (rest, params) = split_params(url)?;
        let parsed = Opts::from_url(&rest).map_err(|err| {
            MysqlError::Connect(ConnectionError::InvalidConnectionUrl(format!(
                "invalid connection URL: {err}"
            )))
        })?;
        let mode = match params.ssl_mode.as_deref() {
            Some(value) => value.parse()?,
            None => SslMode::Preferred,
        };
        let roots = if mode == SslMode::Disabled {
            None
        } else {
            given_roots(params.ssl_ca.as_deref(), options)?
        };
        let mut builder = OptsBuilder::from_opts(parsed)
            // diesel-async keeps its own statement cache
            .stmt_cache_size(0)
            // as diesel-async's own `establish`: an UPDATE counts the rows it
            // matched, changed or not (the store's settle and replay read it so)
            .client_found_rows(true);
        if !params.prefer_socket {
            // the driver would otherwise reconnect through the server's Unix socket
            // when it runs on this host, opening every connection twice
            builder = builder.prefer_socket(false);
        }
        let plain = Opts::from(builder.clone());
        let tls = match (mode, roots) {
            (SslMode::Disabled, _) => None,
            // PREFERRED never verifies: it falls back to plain text on any TLS
            // failure, so a verification would only turn a bad certificate into plain
            // text; REQUIRED without a CA does not verify either (MySQL's clients)
            (SslMode::Preferred, _) | (SslMode::Required, None) => {
                Some(SslOpts::default().with_danger_accept_invalid_certs(true))
            }
            (SslMode::Required | SslMode::VerifyCa, roots) => {
                Some(with_roots(SslOpts::default(), roots).with_danger_skip_domain_validation(true))
            }
            (SslMode::VerifyIdentity, roots) => Some(with_roots(SslOpts::default(), roots)),
        };
        let opts = match tls {
            Some(tls) => Opts::from(builder.ssl_opts(tls)),
            None => plain.clone(),
        };
        Ok(Self {
            opts,
            plain_retry: (mode == SslMode::Preferred).then_some(plain),
            mode,
        })
    }

    /// Opens one connection. TLS failures come back as a [`ConnectionError`] that
    /// [`connect_error`](super::failure::connect_error) turns into their typed
    /// [`MysqlError`].
    pub(crate) async fn establish(&self) -> Result<AsyncMysqlConnection, ConnectionError> {
        let host = self.opts.ip_or_hostname();
        match self.connect(&self.opts).await {
            // PREFERRED: no TLS offered, or a failed handshake, is retried once in
            // plain text
            Err(Failure::NotSupported | Failure::Handshake(_)) if self.plain_retry.is_some() => {
                let plain = self.plain_retry.as_ref().expect("checked by the guard");
                self.connect(plain)
                    .await
                    .map_err(|failure| failure.into_connection_error(self.mode, host))
            }
            result => result.map_err(|failure| failure.into_connection_error(self.mode, host)),
        }
    }

    async fn connect(&self, opts: &Opts) -> Result<AsyncMysqlConnection, Failure> {
        let conn = mysql_async::Conn::new(opts.clone())
            .await
            .map_err(Failure::classify)?;
        AsyncMysqlConnection::try_from(conn)
            .await
            .map_err(Failure::Setup)
    }
}

/// Trusts only `roots` (PEM) when given, else the driver's compiled-in Mozilla set.
fn with_roots(ssl: SslOpts, roots: Option<Vec<u8>>) -> SslOpts {
    match roots {
        Some(pem) => ssl
            .with_root_certs(vec![pem.into()])
            .with_disable_built_in_roots(true),
        None => ssl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::StoreError;

    #[test]
    fn a_wrong_ssl_mode_names_the_allowed_values() {
        for bad in ["verify-full", "VERIFY-CA", "", "allow"] {
            let err = Connector::new(
                &format!("mysql://app@localhost/app?ssl-mode={bad}"),
                &MysqlOptions::new(),
            )
            .unwrap_err();
            assert!(matches!(&err, MysqlError::InvalidSslMode { value } if value == bad));
            let message = err.to_string();
            assert!(
                message.contains("DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"),
                "{message}"
            );
            assert!(!err.is_transient());
        }
    }

    #[test]
    fn modes_translate_to_the_drivers_tls_options() {
        let connector = |url: &str| {
            Connector::new(url, &MysqlOptions::new()).unwrap_or_else(|err| panic!("{err}"))
        };
        let base = "mysql://app@localhost/app";
        let default = connector(base);
        assert_eq!(default.mode, SslMode::Preferred);
        let tls = default.opts.ssl_opts().expect("PREFERRED asks for TLS");
        assert!(tls.accept_invalid_certs());
        assert!(default.plain_retry.is_some());
        assert!(!default.opts.prefer_socket());

        let disabled = connector(&format!("{base}?ssl-mode=DISABLED"));
        assert!(disabled.opts.ssl_opts().is_none());
        assert!(disabled.plain_retry.is_none());

        let required = connector(&format!("{base}?ssl-mode=required"));
        assert_eq!(required.mode, SslMode::Required);
        assert!(required.plain_retry.is_none());
        assert!(
            required
                .opts
                .ssl_opts()
                .is_some_and(SslOpts::accept_invalid_certs)
        );

        let ca = connector(&format!("{base}?ssl-mode=VERIFY_CA"));
        let tls = ca.opts.ssl_opts().expect("VERIFY_CA asks for TLS");
        assert!(!tls.accept_invalid_certs());
        assert!(tls.skip_domain_validation());

        let identity = connector(&format!("{base}?ssl-mode=VERIFY_IDENTITY"));
        let tls = identity
            .opts
            .ssl_opts()
            .expect("VERIFY_IDENTITY asks for TLS");
        assert!(!tls.accept_invalid_certs());
        assert!(!tls.skip_domain_validation());
        assert!(!tls.disable_built_in_roots());

        let socket = connector(&format!("{base}?prefer_socket=true"));
        assert!(socket.opts.prefer_socket());
    }

    #[test]
    fn unusable_settings_are_refused_up_front() {
        let cases = [
            (
                "mysql://a@localhost/a?ssl-mode=VERIFY_CA&ssl-ca=/nonexistent/ca.pem",
                "could not read ssl-ca=/nonexistent/ca.pem",
            ),
            (
                "mysql://a@localhost/a?require_ssl=true",
                "require_ssl is not supported",
            ),
        ];
        for (url, expected) in cases {
            let err = Connector::new(url, &MysqlOptions::new()).unwrap_err();
            assert!(
                matches!(err, MysqlError::TlsSettings { .. }),
                "{url}: {err:?}"
            );
            assert!(err.to_string().contains(expected), "{url}: {err}");
            assert!(!err.is_transient());
        }
        // a wrong URL is reported before any connection, as not transient
        let err =
            Connector::new("mysql://a@localhost:notaport/a", &MysqlOptions::new()).unwrap_err();
        assert!(
            matches!(
                err,
                MysqlError::Connect(ConnectionError::InvalidConnectionUrl(_))
            ),
            "{err:?}"
        );
        assert!(!err.is_transient());
    }
}
