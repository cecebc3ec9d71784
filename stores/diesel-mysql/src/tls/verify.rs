//! The trusted roots: `ssl-ca`'s PEM file, else
//! [`MysqlOptions::with_tls_root_certificates_pem`], else none given (the
//! compiled-in Mozilla set), read and checked before any connection opens.

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::MysqlError;
use crate::options::MysqlOptions;

/// The PEM of the root certificates given by `ssl-ca` (a file) or else by the
/// options; `None` when neither gives any. Every certificate is checked here, so a
/// bad file fails [`MysqlStore::connect`](crate::MysqlStore::connect) rather than
/// each connection.
pub(super) fn given_roots(
    ssl_ca: Option<&str>,
    options: &MysqlOptions,
) -> Result<Option<Vec<u8>>, MysqlError> {
    match ssl_ca {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|err| MysqlError::TlsSettings {
                reason: format!("could not read ssl-ca={path}"),
                source: Some(Box::new(err)),
            })?;
            check_roots(&pem, &format!("ssl-ca={path}"))?;
            Ok(Some(pem))
        }
        None => options
            .tls_root_certificates_pem()
            .map(|pem| {
                check_roots(pem, "MysqlOptions::with_tls_root_certificates_pem")?;
                Ok(pem.to_vec())
            })
            .transpose(),
    }
}

/// Checks that `pem` (from `origin`, for errors) holds at least one certificate and
/// that each is a valid CA certificate.
fn check_roots(pem: &[u8], origin: &str) -> Result<(), MysqlError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|err| MysqlError::TlsSettings {
            reason: format!("the root certificates of {origin} are not valid PEM"),
            source: Some(Box::new(err)),
        })?;
        roots.add(cert).map_err(|err| MysqlError::TlsSettings {
            reason: format!("a root certificate of {origin} is not a valid CA certificate"),
            source: Some(Box::new(err)),
        })?;
    }
    if roots.is_empty() {
        return Err(MysqlError::TlsSettings {
            reason: format!(
                "{origin} holds no certificate (expected PEM blocks \"-----BEGIN CERTIFICATE-----\")"
            ),
            source: None,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_without_a_certificate_are_refused() {
        let options = MysqlOptions::new().with_tls_root_certificates_pem("not a certificate");
        let err = given_roots(None, &options).unwrap_err();
        assert!(err.to_string().contains("holds no certificate"), "{err}");
        let err = given_roots(Some("/nonexistent/ca.pem"), &options).unwrap_err();
        assert!(
            err.to_string()
                .contains("could not read ssl-ca=/nonexistent/ca.pem"),
            "{err}"
        );
        assert_eq!(given_roots(None, &MysqlOptions::new()).ok(), Some(None));
    }
}
