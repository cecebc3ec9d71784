//! TLS against real servers: a private PostgreSQL instance started for each test in
//! a temp dir (TLS on with a CA and certificates made by the `openssl` CLI for the
//! test, or TLS off), stopped and removed when the test ends; and the shared server
//! of `HOOKBOX_PG_URL`, which is only connected to, never changed.
//!
//! Each test skips (prints "skipped: …") without `initdb`/`pg_ctl`, `openssl` or,
//! when running as root, `runuser` and a `postgres` user; with
//! `HOOKBOX_REQUIRE_SERVICES=1` it panics instead.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod common;

use std::error::Error as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use diesel::sql_types::{Bool, Text};
use diesel_async::RunQueryDsl;
use hookbox_core::{DedupeKey, IdempotencyStore, Processed, StoreError};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, SslMode, diesel, diesel_async};
use hookbox_testkit::tls::TestCertificates;

fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints and returns `None`) or, when services are required, panics.
fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "HOOKBOX_REQUIRE_SERVICES=1 but {why}");
    println!("skipped: {why}");
    None
}

fn runs(program: impl AsRef<std::ffi::OsStr>, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn check(output: std::io::Result<Output>, what: &str) {
    let output = output.unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory of `initdb` and `pg_ctl`: the newest `/usr/lib/postgresql/*/bin`,
/// else whatever `PATH` has (`None`: not installed).
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    (runs("initdb", "--version") && runs("pg_ctl", "--version")).then(PathBuf::new)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "hookbox-{what}-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a private server speaks TLS.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ServerTls {
    /// `ssl = on`: only `hostssl` connections accepted, and a SCRAM-only `scram_user`.
    On,
    /// `ssl = off`: the server answers "no" to every TLS request.
    Off,
    /// `ssl = on` with TLS 1.0 and 1.1 only, which rustls does not speak: every
    /// handshake fails; plain text is accepted.
    Tls11Only,
}

/// A private PostgreSQL instance on 127.0.0.1 and a free port, in a temp dir; stopped
/// and removed when dropped (also when the test panics).
struct PgServer {
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
    certs: Option<TestCertificates>,
    // dropped after the server is stopped (fields drop after `drop` runs)
    scratch: Scratch,
}

impl PgServer {
    /// Starts one, or skips.
    fn start(tls: ServerTls) -> Option<Self> {
        let Some(bin) = postgres_bin() else {
            return skip("PostgreSQL's initdb and pg_ctl are not installed");
        };
        if !runs("openssl", "version") {
            return skip("the openssl CLI is not installed");
        }
        let as_postgres = is_root();
        if as_postgres
            && !(runs("runuser", "--version")
                && Command::new("id")
                    .args(["-u", "postgres"])
                    .output()
                    .is_ok_and(|out| out.status.success()))
        {
            return skip("running as root without runuser and a postgres user to run initdb");
        }
        let scratch = Scratch::new("pg-tls");
        let dir = scratch.0.clone();
        // a CA, a server certificate it signed for `localhost` and 127.0.0.1, and a
        // second CA that signed nothing
        let certs = (tls != ServerTls::Off)
            .then(|| TestCertificates::generate(&dir, &["DNS:localhost", "IP:127.0.0.1"]));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self {
            bin,
            as_postgres,
            port,
            certs,
            scratch,
        };
        if as_postgres {
            check(
                Command::new("chown")
                    .args(["-R", "postgres:"])
                    .arg(&dir)
                    .output(),
                "chown the server's directory",
            );
        }
        if let Some(certs) = &server.certs {
            use std::os::unix::fs::PermissionsExt;
            // the server refuses a key others may read
            std::fs::set_permissions(&certs.server_key, std::fs::Permissions::from_mode(0o600))
                .unwrap();
        }
        let data = dir.join("data");
        check(
            server
                .pg_command("initdb")
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "--no-sync"])
                .args(["-E", "UTF8", "--locale=C"])
                .output(),
            "initdb",
        );
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {port}\n\
             unix_socket_directories = '{}'\nfsync = off\nmax_connections = 40\n\
             shared_buffers = 16MB\n",
            dir.display()
        );
        if let Some(certs) = &server.certs {
            conf.push_str(&format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                certs.server_cert.display(),
                certs.server_key.display()
            ));
        }
        let hba = match tls {
            ServerTls::On => {
                "local all all trust\n\
                 hostssl all scram_user 127.0.0.1/32 scram-sha-256\n\
                 hostssl all all 127.0.0.1/32 trust\n\
                 hostnossl all all 127.0.0.1/32 reject\n"
            }
            ServerTls::Off => {
                conf.push_str("ssl = off\n");
                "local all all trust\nhost all all 127.0.0.1/32 trust\n"
            }
            ServerTls::Tls11Only => {
                conf.push_str(
                    "ssl_min_protocol_version = 'TLSv1'\nssl_max_protocol_version = 'TLSv1.1'\n",
                );
                "local all all trust\nhost all all 127.0.0.1/32 trust\n"
            }
        };
        let mut postgresql_conf = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        postgresql_conf.push_str(&conf);
        std::fs::write(data.join("postgresql.conf"), postgresql_conf).unwrap();
        std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
        let started = server
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-t", "60", "start"])
            .output();
        if !started.as_ref().is_ok_and(|out| out.status.success()) {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            panic!("the private postgres did not start: {started:?}\n{log}");
        }
        Some(server)
    }

    /// A command running `program` of the server's binaries, as the `postgres` user
    /// when this runs as root (PostgreSQL refuses to run as root).
    fn pg_command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.current_dir(&self.scratch.0);
        command
    }

    fn certs(&self) -> &TestCertificates {
        self.certs.as_ref().expect("a TLS server")
    }

    /// `postgres://postgres@{host}:{port}/postgres?{params}`.
    fn url(&self, host: &str, params: &str) -> String {
        let url = format!("postgres://postgres@{host}:{}/postgres", self.port);
        if params.is_empty() {
            url
        } else {
            format!("{url}?{params}")
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.scratch.0.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Quick to fail: these tests are about refusals, not about waiting for a server.
fn options() -> PgOptions {
    PgOptions::new()
        .with_max_connections(2)
        .with_pool_timeout(Duration::from_secs(10))
}

async fn connect(url: &str, options: PgOptions) -> Result<PgStore, PgError> {
    PgStore::connect(url, options).await
}

#[derive(diesel::QueryableByName)]
struct Ssl {
    #[diesel(sql_type = Bool)]
    ssl: bool,
}

/// Whether the store's connection to the server is encrypted, as the server sees it.
async fn encrypted(store: &PgStore) -> bool {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .get_result::<Ssl>(&mut *conn)
        .await
        .unwrap()
        .ssl
}

#[derive(diesel::QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    setting: String,
}

async fn setting(store: &PgStore, name: &str) -> String {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query("SELECT current_setting($1) AS setting")
        .bind::<Text, _>(name)
        .get_result::<Setting>(&mut *conn)
        .await
        .unwrap()
        .setting
}

/// A connection refused for its certificate, with the reason in the message.
#[track_caller]
fn assert_certificate_refused(result: Result<PgStore, PgError>, host: &str, reason: &str) {
    match result {
        Err(err @ PgError::TlsCertificate { .. }) => {
            let message = err.to_string();
            println!("refused as expected: {message}");
            assert!(message.contains(reason), "{message}");
            assert!(!err.is_transient(), "{err:?}");
            let PgError::TlsCertificate {
                host: refused_for, ..
            } = &err
            else {
                unreachable!()
            };
            assert_eq!(refused_for, host);
        }
        Err(other) => panic!("expected a refused certificate, got {other:?}"),
        Ok(_) => panic!("expected a refused certificate, but it connected"),
    }
}

/// `verify-full` with the server's CA and the name in its certificate: the store
/// connects over TLS, keeps its per-connection setup, migrates and claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verify_full_with_the_right_ca_migrates_and_claims() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let ca = path(&server.certs().ca);
    let url = server.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let store = connect(
        &url,
        options().with_lock_timeout(Duration::from_millis(1500)),
    )
    .await
    .unwrap();
    assert!(encrypted(&store).await);
    // the store's own setup runs on TLS connections as on plain ones
    assert_eq!(setting(&store, "lock_timeout").await, "1500ms");
    assert_eq!(setting(&store, "lc_messages").await, "C");
    assert_eq!(store.migrate().await.unwrap(), 4);
    let key = DedupeKey::new("tls", "standard", "evt_tls");
    let first = store
        .process_once(&key, async |_conn| Ok(()))
        .await
        .unwrap();
    assert_eq!(first, Processed::Applied(()));
    let again = store
        .process_once(&key, async |_conn| Ok(()))
        .await
        .unwrap();
    assert_eq!(again, Processed::Duplicate);

    // the certificate names 127.0.0.1 too; and the key/value form reads the same
    let by_ip = server.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert!(encrypted(&connect(&by_ip, options()).await.unwrap()).await);
    let key_value = format!(
        "host=localhost port={} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{ca}'",
        server.port
    );
    assert!(encrypted(&connect(&key_value, options()).await.unwrap()).await);
}

/// `verify-full` checks the host name: a name the certificate does not carry is
/// refused, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verify_full_refuses_a_host_name_not_in_the_certificate() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let ca = path(&server.certs().ca);
    // the TCP connection goes to 127.0.0.1; TLS checks the name `wrong.example`
    let url = server.url(
        "wrong.example",
        &format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={ca}"),
    );
    assert_certificate_refused(
        connect(&url, options()).await,
        "wrong.example",
        "certificate not valid for host \"wrong.example\"",
    );
}

/// `verify-full` checks the chain: a certificate signed by a CA other than the one
/// given, or by none of the compiled-in roots, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verify_full_refuses_a_certificate_from_another_ca() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let other = path(&server.certs().other_ca);
    let url = server.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={other}"),
    );
    assert_certificate_refused(
        connect(&url, options()).await,
        "localhost",
        "not signed by a trusted root",
    );
    // no root given: the Mozilla roots, which do not know the test CA
    let url = server.url("localhost", "sslmode=verify-full");
    assert_certificate_refused(
        connect(&url, options()).await,
        "localhost",
        "not signed by a trusted root",
    );
}

/// `verify-ca` verifies the chain but not the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verify_ca_checks_the_chain_but_not_the_host_name() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let certs = server.certs();
    let (ca, other) = (path(&certs.ca), path(&certs.other_ca));
    let url = server.url(
        "wrong.example",
        &format!("hostaddr=127.0.0.1&sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert!(encrypted(&connect(&url, options()).await.unwrap()).await);
    let url = server.url(
        "wrong.example",
        &format!("hostaddr=127.0.0.1&sslmode=verify-ca&sslrootcert={other}"),
    );
    assert_certificate_refused(
        connect(&url, options()).await,
        "wrong.example",
        "not signed by a trusted root",
    );
}

/// `require` encrypts without verifying; given a root certificate it verifies the
/// chain as `verify-ca` does (libpq's rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_require_verifies_only_with_a_root_certificate() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let certs = server.certs();
    let url = server.url("wrong.example", "hostaddr=127.0.0.1&sslmode=require");
    assert!(encrypted(&connect(&url, options()).await.unwrap()).await);

    let other = path(&certs.other_ca);
    let url = server.url("localhost", &format!("sslmode=require&sslrootcert={other}"));
    assert_certificate_refused(
        connect(&url, options()).await,
        "localhost",
        "not signed by a trusted root",
    );
    // the right root and a name not in the certificate: the chain is all that counts
    let ca = std::fs::read(&certs.ca).unwrap();
    let store = connect(
        &server.url("wrong.example", "hostaddr=127.0.0.1&sslmode=require"),
        options().with_tls_root_certificates_pem(ca),
    )
    .await
    .unwrap();
    assert!(encrypted(&store).await);
}

/// A root certificate given in the options is trusted for `verify-full`; the URL's
/// `sslrootcert` takes precedence over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_root_certificates_from_the_options() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let certs = server.certs();
    let ca = std::fs::read(&certs.ca).unwrap();
    let other = std::fs::read(&certs.other_ca).unwrap();
    let url = server.url("localhost", "sslmode=verify-full");
    let store = connect(&url, options().with_tls_root_certificates_pem(ca.clone()))
        .await
        .unwrap();
    assert!(encrypted(&store).await);
    assert_certificate_refused(
        connect(
            &url,
            options().with_tls_root_certificates_pem(other.clone()),
        )
        .await,
        "localhost",
        "not signed by a trusted root",
    );
    let with_file = server.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", path(&certs.ca)),
    );
    let store = connect(&with_file, options().with_tls_root_certificates_pem(other))
        .await
        .unwrap();
    assert!(encrypted(&store).await);
}

/// A server without TLS is refused when the URL requires TLS, never used in plain
/// text; `prefer` (also the default) falls back to plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_required_against_a_plain_text_server_is_refused() {
    let Some(server) = PgServer::start(ServerTls::Off) else {
        return;
    };
    for mode in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
        let url = server.url("localhost", &format!("sslmode={mode}"));
        match connect(&url, options()).await {
            Err(err @ PgError::TlsNotSupported { sslmode }) => {
                assert_eq!(sslmode, mode);
                assert_eq!(
                    err.to_string(),
                    format!("the server does not support TLS but sslmode={mode}")
                );
                assert!(!err.is_transient());
            }
            Err(other) => panic!("{mode}: expected TlsNotSupported, got {other:?}"),
            Ok(_) => panic!("{mode}: connected to a plain-text server"),
        }
    }
    for url in [
        server.url("localhost", "sslmode=prefer"),
        server.url("localhost", ""),
        server.url("localhost", "sslmode=disable"),
    ] {
        let store = connect(&url, options()).await.unwrap();
        assert!(!encrypted(&store).await, "{url}");
    }
}

/// `disable` never uses TLS (a server that accepts only TLS refuses it); `prefer` and
/// no `sslmode` use TLS when the server offers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_disable_is_plain_text_and_prefer_takes_tls_when_offered() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let err = connect(&server.url("localhost", "sslmode=disable"), options())
        .await
        .unwrap_err();
    let PgError::Connect(cause) = &err else {
        panic!("expected the server's refusal, got {err:?}");
    };
    // pg_hba.conf's `hostnossl … reject`
    assert!(cause.to_string().contains("no encryption"), "{cause}");
    assert!(!err.is_transient(), "{err:?}");
    for url in [
        server.url("localhost", "sslmode=prefer"),
        server.url("localhost", ""),
    ] {
        let store = connect(&url, options()).await.unwrap();
        assert!(encrypted(&store).await, "{url}");
    }
}

/// SCRAM over TLS binds the login to the server's certificate: with
/// `channel_binding=require` the login succeeds only through SCRAM-SHA-256-PLUS,
/// which needs the `tls-server-end-point` hash the client computes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_scram_login_binds_to_the_server_certificate() {
    let Some(server) = PgServer::start(ServerTls::On) else {
        return;
    };
    let ca = path(&server.certs().ca);
    let admin = connect(
        &server.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        options(),
    )
    .await
    .unwrap();
    {
        use diesel_async::SimpleAsyncConnection;
        let mut conn = admin.connection().await.unwrap();
        conn.batch_execute(
            "SET password_encryption = 'scram-sha-256'; \
             CREATE ROLE scram_user LOGIN PASSWORD 'tls-test-secret'",
        )
        .await
        .unwrap();
    }
    for mode in ["require", "verify-full"] {
        let url = format!(
            "postgres://scram_user:tls-test-secret@localhost:{}/postgres?sslmode={mode}&sslrootcert={ca}&channel_binding=require",
            server.port
        );
        let store = connect(&url, options()).await.unwrap();
        assert!(encrypted(&store).await, "{mode}");
    }
    let wrong = format!(
        "postgres://scram_user:wrong@localhost:{}/postgres?sslmode=require&channel_binding=require",
        server.port
    );
    let err = connect(&wrong, options()).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
}

/// The shared server is only connected to: `sslmode=disable` is plain text, and a
/// URL without `sslmode` (prefer) still connects, with or without TLS there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_disable_and_no_sslmode_still_work_on_the_shared_server() {
    let Some(url) = common::pg_url().await else {
        return;
    };
    let separator = if url.contains('?') { '&' } else { '?' };
    let plain = connect(&format!("{url}{separator}sslmode=disable"), options())
        .await
        .unwrap();
    assert!(!encrypted(&plain).await);
    let started = Instant::now();
    let default = connect(&url, options()).await.unwrap();
    println!(
        "the shared server with no sslmode: TLS {}, connected in {:?}",
        encrypted(&default).await,
        started.elapsed()
    );
}

/// A handshake that fails (here: a server offering only TLS 1.1, which rustls does
/// not speak) is an error when TLS is required, and retried in plain text with
/// `prefer`, as libpq does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_failure_is_typed_and_prefer_retries_in_plain_text() {
    let Some(server) = PgServer::start(ServerTls::Tls11Only) else {
        return;
    };
    match connect(&server.url("localhost", "sslmode=require"), options()).await {
        Err(err @ PgError::TlsHandshake { .. }) => {
            println!("refused as expected: {err}: {}", err.source().unwrap());
            assert!(!err.is_transient());
        }
        Err(other) => panic!("expected TlsHandshake, got {other:?}"),
        Ok(_) => panic!("a TLS 1.1 handshake succeeded"),
    }
    for url in [
        server.url("localhost", "sslmode=prefer"),
        server.url("localhost", ""),
    ] {
        let store = connect(&url, options()).await.unwrap();
        assert!(!encrypted(&store).await, "{url}");
    }
}
