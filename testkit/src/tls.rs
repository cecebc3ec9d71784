//! Certificates for tests of TLS against a real server: [`TestCertificates`] makes a
//! test CA, a server certificate it signed for the host names and IP addresses a test
//! connects to, and a second CA that signed nothing.
//!
//! A test starts its server (PostgreSQL with `ssl = on`, `redis-server --tls-port`, …)
//! with [`server_cert`](TestCertificates::server_cert) and
//! [`server_key`](TestCertificates::server_key), then connects trusting
//! [`ca`](TestCertificates::ca) (the handshake succeeds) or
//! [`other_ca`](TestCertificates::other_ca) (the server's certificate must be
//! refused), or to a host name the certificate does not name (refused as well).
//!
//! The files are made by the `openssl` command-line tool, which must be on `PATH`;
//! a test that should skip without it checks for it first (`openssl version`). Keys
//! are EC P-256; every certificate is valid for 2 days from now.
//!
//! # Example
//! ```no_run
//! use hookbox_testkit::tls::TestCertificates;
//!
//! let dir = std::env::temp_dir().join("my-tls-test");
//! let certs = TestCertificates::generate(&dir, &["DNS:localhost", "IP:127.0.0.1"]);
//! // e.g. `redis-server --tls-cert-file <server_cert> --tls-key-file <server_key> …`,
//! // then a client trusting `certs.ca` connects to `localhost` or 127.0.0.1
//! let ca_pem = std::fs::read(&certs.ca).unwrap();
//! assert!(ca_pem.starts_with(b"-----BEGIN CERTIFICATE-----"));
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A test CA, a server certificate it signed, and a second CA that signed nothing:
/// PEM files in one directory, made by [`TestCertificates::generate`].
///
/// The files are `ca.crt` and `ca.key` (the CA, subject `CN=hookbox test CA`),
/// `other-ca.crt` and `other-ca.key` (`CN=hookbox other CA`), and `server.crt` and
/// `server.key` (the server; its request `server.csr` and extensions `server.ext`
/// are left beside them). They live as long as the directory: remove it when the
/// test ends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TestCertificates {
    /// The CA that signed the server's certificate (`ca.crt`): trusting it, a client
    /// accepts the server at a host name or address the certificate names.
    pub ca: PathBuf,
    /// A second CA (`other-ca.crt`) that signed nothing: trusting only it, a client
    /// must refuse the server (an unknown issuer).
    pub other_ca: PathBuf,
    /// The server's certificate (`server.crt`), signed by [`ca`](Self::ca), for the
    /// subject alternative names given to [`generate`](Self::generate).
    pub server_cert: PathBuf,
    /// The server certificate's private key (`server.key`), unencrypted PKCS#8 PEM.
    /// Its file mode is `openssl`'s default: a server that insists on `0600` (as
    /// PostgreSQL does) needs it set.
    pub server_key: PathBuf,
}

impl TestCertificates {
    /// Makes the certificates in `dir` (created if missing), overwriting any files of
    /// the same names there, and returns their paths.
    ///
    /// `subject_alt_names` are the server certificate's subject alternative names in
    /// `openssl`'s form: `"DNS:localhost"`, `"IP:127.0.0.1"`. The certificate names
    /// only these, so a client connecting by any other name or address refuses it.
    /// Its subject is `CN=` the first name's value (`CN=localhost` for
    /// `"DNS:localhost"`); clients check the alternative names, not the subject.
    ///
    /// Every key is EC P-256 (prime256v1), unencrypted; every certificate is valid
    /// for 2 days. The CAs are self-signed with `basicConstraints=critical,CA:TRUE`
    /// and `keyUsage=critical,keyCertSign,cRLSign`; the server's certificate has
    /// `basicConstraints=critical,CA:FALSE`, `keyUsage=critical,digitalSignature`,
    /// `extendedKeyUsage=serverAuth` and a random serial number.
    ///
    /// # Panics
    /// When `subject_alt_names` is empty, `dir` cannot be created or written, or
    /// the `openssl` binary cannot be run or fails (the message names the step and
    /// carries `openssl`'s output): this is test code, and a panic fails the test.
    pub fn generate(dir: &Path, subject_alt_names: &[&str]) -> Self {
        let first = subject_alt_names.first().unwrap_or_else(|| {
            panic!("TestCertificates::generate: give at least one subject alternative name")
        });
        let server_subject = format!(
            "/CN={}",
            first.split_once(':').map_or(*first, |(_, value)| value)
        );
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|err| panic!("creating {}: {err}", dir.display()));
        let openssl = |args: &[&str], what: &str| {
            check(
                Command::new("openssl").args(args).current_dir(dir).output(),
                what,
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for (name, cn) in [("ca", "hookbox test CA"), ("other-ca", "hookbox other CA")] {
            let (key, crt, subject) = (
                format!("{name}.key"),
                format!("{name}.crt"),
                format!("/CN={cn}"),
            );
            let mut args = vec!["req", "-x509", "-new"];
            args.extend(ec);
            args.extend([
                "-keyout",
                &key,
                "-out",
                &crt,
                "-days",
                "2",
                "-subj",
                &subject,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
            openssl(&args, "openssl: a CA certificate");
        }
        let mut args = vec!["req", "-new"];
        args.extend(ec);
        args.extend([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            &server_subject,
        ]);
        openssl(&args, "openssl: the server's request");
        let extensions = dir.join("server.ext");
        std::fs::write(
            &extensions,
            format!(
                "subjectAltName = {}\n\
                 basicConstraints = critical, CA:FALSE\n\
                 keyUsage = critical, digitalSignature\n\
                 extendedKeyUsage = serverAuth\n",
                subject_alt_names.join(", ")
            ),
        )
        .unwrap_or_else(|err| panic!("writing {}: {err}", extensions.display()));
        let serial = format!("0x{:x}", fastrand::u64(1..));
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-set_serial",
                &serial,
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.crt",
            ],
            "openssl: the server's certificate",
        );
        Self {
            ca: dir.join("ca.crt"),
            other_ca: dir.join("other-ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
        }
    }
}

/// Panics, naming `what`, when `openssl` could not be run or failed.
fn check(output: std::io::Result<Output>, what: &str) {
    let output = output.unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openssl(args: &[&str], dir: &Path) -> Output {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs")
    }

    /// The server's certificate chains to the CA, not to the other CA, and names
    /// exactly the alternative names asked for.
    #[test]
    fn the_server_certificate_chains_to_the_ca_only_for_its_names() {
        if Command::new("openssl").arg("version").output().is_err() {
            assert!(
                !std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1"),
                "the openssl CLI is not installed and HOOKBOX_REQUIRE_SERVICES=1"
            );
            println!("skipped: the openssl CLI is not installed");
            return;
        }
        let dir = std::env::temp_dir().join(crate::unique("hookbox-testkit-tls"));
        let certs = TestCertificates::generate(&dir, &["DNS:localhost", "IP:127.0.0.1"]);
        let path = |p: &PathBuf| p.to_str().expect("a UTF-8 temp dir").to_owned();
        let verify = |ca: &PathBuf, host: &[&str]| {
            let (ca, cert) = (path(ca), path(&certs.server_cert));
            let mut args = vec!["verify", "-CAfile", &ca, "-purpose", "sslserver"];
            args.extend(host);
            args.push(&cert);
            openssl(&args, &dir).status.success()
        };
        assert!(verify(&certs.ca, &[]));
        assert!(verify(&certs.ca, &["-verify_hostname", "localhost"]));
        assert!(verify(&certs.ca, &["-verify_ip", "127.0.0.1"]));
        assert!(!verify(&certs.ca, &["-verify_hostname", "example.com"]));
        assert!(!verify(&certs.other_ca, &[]));
        let text = openssl(
            &["x509", "-noout", "-text", "-in", &path(&certs.server_cert)],
            &dir,
        );
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("Subject: CN = localhost"), "{text}");
        assert!(text.contains("prime256v1"), "{text}");
        assert!(
            text.contains("DNS:localhost, IP Address:127.0.0.1"),
            "{text}"
        );
        assert!(std::fs::metadata(&certs.server_key).is_ok_and(|m| m.len() > 0));

        let only_localhost = TestCertificates::generate(&dir, &["DNS:localhost"]);
        assert!(!verify(&only_localhost.ca, &["-verify_ip", "127.0.0.1"]));
        assert!(verify(
            &only_localhost.ca,
            &["-verify_hostname", "localhost"]
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
