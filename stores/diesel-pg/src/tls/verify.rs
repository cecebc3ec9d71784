//! Certificate verification and channel binding: the trusted roots (`sslrootcert`,
//! [`PgOptions::with_tls_root_certificates_pem`] or the compiled-in Mozilla set), the
//! verifier of `prefer`, `require` and `verify-ca` ([`NoHostNameCheck`]), and the `tls-server-end-point` hash of the server certificate
//! for SCRAM-SHA-256-PLUS.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore};
use sha2::Digest as _;

use crate::error::PgError;
use crate::options::PgOptions;

pub(super) fn webpki_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// The root certificates given by `sslrootcert` (a PEM file; `system` means the
/// compiled-in set, so `None` here) or else by the options.
pub(super) fn given_roots(
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
            .tls_root_certificates_pem()
            .map(|pem| root_store(pem, "PgOptions::with_tls_root_certificates_pem"))
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

/// RFC 5929's `tls-server-end-point`: the server certificate hashed with its
/// signature's hash (SHA-256 for MD5 and SHA-1), for SCRAM-SHA-256-PLUS. `None`
/// for a signature without one hash (Ed25519, RSASSA-PSS): SCRAM then runs without
/// channel binding, as the server would offer.
pub(super) fn tls_server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
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

/// The verifier of `prefer`, `require` and `verify-ca`: the handshake's signatures
/// are always checked against the server's certificate (so the SCRAM channel binding
/// stands for the key the server holds); with `roots`, the chain must also lead to
/// one of them, the names in the certificate not compared with the host. `prefer`,
/// and `require` without a root certificate, take any certificate (`roots: None`).
#[derive(Debug)]
pub(super) struct NoHostNameCheck {
    pub(super) roots: Option<Arc<RootCertStore>>,
    pub(super) algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoHostNameCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
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
