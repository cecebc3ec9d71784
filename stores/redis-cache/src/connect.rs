//! Building the connection manager a [`Cached`](crate::Cached) store uses:
//! `redis://` in plain text, `rediss://` over rustls.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, TlsCertificates};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::CacheError;

/// Builds a Redis connection manager for [`Cached::new`](crate::Cached::new) without
/// connecting yet.
///
/// `redis://host:port/db` and `redis+unix:///path` are plain text;
/// `rediss://host:port/db` is TLS, trusting the Mozilla roots compiled in (a server
/// with a private CA needs [`connect_with_root_ca`]). The server's certificate must
/// chain to a trusted root and be valid for the URL's host.
///
/// The manager connects on first use and reconnects in the background after an
/// outage (connection attempts time out after 1 s and back off from 50 ms to 1 s),
/// so a receiver starts and keeps answering while Redis is down. A TLS failure (a
/// certificate refused, a server without TLS) is such an outage too: lookups miss
/// and the database decides. Call it inside a tokio runtime.
///
/// For `rediss://`, the redis crate builds its rustls configuration from rustls's
/// process-wide provider; when the process has none yet, this installs rustls's
/// ring provider as that default (what rustls itself would do on the first TLS
/// connection when ring is its only provider, and what keeps that connection from
/// panicking when several providers are compiled in). A process that wants another
/// provider installs it before calling this.
///
/// # Errors
/// [`CacheError::Redis`] when `url` is not a Redis URL; [`CacheError::InvalidOptions`]
/// for `rediss://…#insecure`, which would skip the certificate check (give the
/// server's CA to [`connect_with_root_ca`] instead).
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hookbox_redis_cache::CacheError> {
/// // nothing listens on port 1: building the manager still succeeds, and every
/// // lookup through it will fall through to the database
/// let redis = hookbox_redis_cache::connect("redis://127.0.0.1:1/")?;
/// let tls = hookbox_redis_cache::connect("rediss://cache.internal:6380/0")?;
/// # drop((redis, tls));
/// assert!(hookbox_redis_cache::connect("not a url").is_err());
/// # Ok(())
/// # }
/// ```
pub fn connect(url: &str) -> Result<ConnectionManager, CacheError> {
    let client = Client::open(url).map_err(CacheError::Redis)?;
    manager(client)
}

/// Builds a Redis connection manager for a `rediss://` URL whose server's certificate
/// chains to a CA of `root_ca_pem` (one or more `-----BEGIN CERTIFICATE-----` blocks),
/// trusted instead of the compiled-in roots; otherwise as [`connect`]. The certificate
/// must still be valid for the URL's host.
///
/// # Errors
/// [`CacheError::InvalidOptions`] when `url` is not a `rediss://` URL or ends in
/// `#insecure`; [`CacheError::InvalidRootCa`] when the PEM holds no certificate or
/// one that cannot be a root; [`CacheError::Redis`] when `url` is not a Redis URL.
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ca = std::fs::read("/etc/hookbox/redis-ca.pem")?;
/// let redis = hookbox_redis_cache::connect_with_root_ca("rediss://cache.internal:6380/0", &ca)?;
/// # drop(redis);
/// # Ok(())
/// # }
/// ```
pub fn connect_with_root_ca(
    url: &str,
    root_ca_pem: impl AsRef<[u8]>,
) -> Result<ConnectionManager, CacheError> {
    let info = url.into_connection_info().map_err(CacheError::Redis)?;
    if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
        return Err(CacheError::InvalidOptions(
            "a root CA is for TLS: connect_with_root_ca needs a rediss:// URL",
        ));
    }
    let pem = root_ca_pem.as_ref();
    check_root_ca(pem)?;
    let certificates = TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    };
    let client = Client::build_with_tls(info, certificates).map_err(CacheError::Redis)?;
    manager(client)
}

/// Checks now what the redis crate would otherwise find out at each connection
/// attempt (where a failure is only a miss): the PEM holds root certificates.
fn check_root_ca(pem: &[u8]) -> Result<(), CacheError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|err| CacheError::InvalidRootCa {
            reason: format!("not valid PEM: {err}"),
        })?;
        roots.add(cert).map_err(|err| CacheError::InvalidRootCa {
            reason: format!("a certificate cannot be a root: {err}"),
        })?;
    }
    if roots.is_empty() {
        return Err(CacheError::InvalidRootCa {
            reason: "no certificate (expected PEM blocks \"-----BEGIN CERTIFICATE-----\")"
                .to_string(),
        });
    }
    Ok(())
}

fn manager(client: Client) -> Result<ConnectionManager, CacheError> {
    if let ConnectionAddr::TcpTls { insecure, .. } = client.get_connection_info().addr() {
        if *insecure {
            return Err(CacheError::InvalidOptions(
                "rediss://…#insecure would skip the certificate check: give the server's CA to connect_with_root_ca instead",
            ));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // another thread may install one in between: then that one is used
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(1))
        // after these, the next command starts a fresh attempt: reconnection is
        // driven by traffic and never waited for (each call is bounded by the
        // cache's own timeout)
        .set_number_of_retries(3);
    ConnectionManager::new_lazy_with_config(client, config).map_err(CacheError::Redis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn rediss_urls_are_accepted_and_insecure_ones_refused() {
        assert!(connect("rediss://127.0.0.1:1/").is_ok());
        assert!(connect("redis://127.0.0.1:1/").is_ok());
        assert!(matches!(
            connect("rediss://127.0.0.1:1/#insecure"),
            Err(CacheError::InvalidOptions(_))
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_root_ca_needs_rediss_and_a_certificate() {
        let plain = connect_with_root_ca("redis://127.0.0.1:1/", b"").unwrap_err();
        assert!(
            plain.to_string().contains("needs a rediss:// URL"),
            "{plain}"
        );
        for pem in [
            &b""[..],
            b"not a certificate",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n",
        ] {
            let err = connect_with_root_ca("rediss://127.0.0.1:1/", pem).unwrap_err();
            assert!(matches!(err, CacheError::InvalidRootCa { .. }), "{err:?}");
        }
        // valid PEM around bytes that are no certificate
        let err = connect_with_root_ca(
            "rediss://127.0.0.1:1/",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("cannot be a root"), "{err}");
    }
}
