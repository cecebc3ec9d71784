//! A private MariaDB (or MySQL) server for one test ([`PrivateServer`]): for tests that
//! stop the database under a receiver (a crash, an outage) without disturbing the
//! shared server other tests use.
//!
//! It needs `mariadb-install-db` and `mariadbd` (or `mysql_install_db` and `mysqld`)
//! in `/usr/sbin`, `/usr/bin`, `/usr/local/{s,}bin` or on `PATH`, and `openssl` for
//! TLS; without them [`PrivateServer::start`] prints `skipped: …` and returns `None`,
//! or panics under `HOOKBOX_REQUIRE_SERVICES=1`.
//!
//! # Examples
//! ```no_run
//! use hookbox_testkit::MysqlDatabase;
//! use hookbox_testkit::mysql_server::PrivateServer;
//!
//! # async fn outage() {
//! let Some(mut server) = PrivateServer::start(None).await else {
//!     return; // skipped: no mariadbd here
//! };
//! let database = MysqlDatabase::create_on(&server.url("127.0.0.1", "mysql", "")).await;
//! // … a receiver on `database.url()` …
//! server.kill(); // the database is gone: the receiver answers 503
//! server.restart().await; // back, on the same data and port
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hookbox_diesel_mysql::diesel_async::{AsyncConnection as _, AsyncMysqlConnection};

use crate::common::DEADLINE;
use crate::services::skip;
use crate::tls::TestCertificates;

/// The first of `names` found in the usual directories or on `PATH`.
fn program(names: &[&str]) -> Option<PathBuf> {
    for name in names {
        for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"] {
            let path = Path::new(dir).join(name);
            if path.is_file() {
                return Some(path);
            }
        }
        let found = Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if found {
            return Some(PathBuf::from(name));
        }
    }
    None
}

/// A scratch directory, removed when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "hookbox-{what}-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|err| panic!("create {}: {err}", dir.display()));
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A private MariaDB (or MySQL) server: its own data directory in a temporary
/// directory and a free port, no authentication (`root`, no password, grant tables
/// skipped), TLS on with test certificates when asked. It is killed and its directory
/// removed when dropped (also when the test panics), and it can be killed and started
/// again on the same data and port, as a crashed and restarted server is.
#[derive(Debug)]
pub struct PrivateServer {
    child: Option<Child>,
    program: PathBuf,
    args: Vec<String>,
    /// The port it listens on on `127.0.0.1`, the same after a restart.
    pub port: u16,
    /// The test certificates, when TLS is on.
    pub certs: Option<TestCertificates>,
    // dropped last: the server is stopped first
    dir: Scratch,
}

impl PrivateServer {
    /// Initialises a data directory and starts a server on it, with TLS on and a
    /// server certificate for `tls_names` (such as `"DNS:localhost"`) when given;
    /// returns once it accepts connections.
    ///
    /// Returns `None` after printing `skipped: …` when the programs it needs are
    /// missing, unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// When the programs are missing and `HOOKBOX_REQUIRE_SERVICES=1`, or the data
    /// directory cannot be initialised, or the server does not start (as
    /// [`PrivateServer::restart`]).
    pub async fn start(tls_names: Option<&[&str]>) -> Option<Self> {
        let Some(install) = program(&["mariadb-install-db", "mysql_install_db"]) else {
            return skip("no mariadb-install-db or mysql_install_db for a private server");
        };
        let Some(server) = program(&["mariadbd", "mysqld"]) else {
            return skip("no mariadbd or mysqld for a private server");
        };
        if tls_names.is_some() && program(&["openssl"]).is_none() {
            return skip("no openssl for the private server's certificates");
        }
        let dir = Scratch::new("mysql");
        let certs = tls_names.map(|names| TestCertificates::generate(&dir.0.join("certs"), names));
        let data = dir.0.join("data");
        let installed = Command::new(&install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ])
            .output()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", install.display()));
        assert!(
            installed.status.success(),
            "{} failed: {}{}",
            install.display(),
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );
        let port = free_port();
        let mut args = vec![
            "--no-defaults".to_string(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", dir.0.join("sock").display()),
            format!("--pid-file={}", dir.0.join("pid").display()),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".to_string(),
            "--user=root".to_string(),
            "--skip-grant-tables".to_string(),
            "--skip-networking=0".to_string(),
            "--innodb-buffer-pool-size=16M".to_string(),
            "--innodb-log-file-size=16M".to_string(),
        ];
        if let Some(certs) = &certs {
            args.push(format!("--ssl-cert={}", certs.server_cert.display()));
            args.push(format!("--ssl-key={}", certs.server_key.display()));
            args.push(format!("--ssl-ca={}", certs.ca.display()));
        }
        let mut server = Self {
            child: None,
            program: server,
            args,
            port,
            certs,
            dir,
        };
        server.restart().await;
        Some(server)
    }

    /// Returns the URL of `database` on this server reached as `host` (`127.0.0.1`,
    /// or `localhost` for a certificate's name), with `params` (`"?ssl-mode=…"`, or
    /// `""`) appended.
    pub fn url(&self, host: &str, database: &str, params: &str) -> String {
        format!("mysql://root@{host}:{}/{database}{params}", self.port)
    }

    /// Returns the server's log (its stderr) so far, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("server.log")).unwrap_or_default()
    }

    /// Kills the server (SIGKILL: no shutdown, as a crash) and waits for it to exit;
    /// its connections drop, and new ones are refused until [`PrivateServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again, after killing it if it runs) on its data and port,
    /// and waits until it accepts a connection.
    ///
    /// # Panics
    /// When the server cannot be started or accepts no connection within
    /// [`DEADLINE`].
    pub async fn restart(&mut self) {
        self.kill();
        let log_path = self.dir.0.join("server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|err| panic!("create {}: {err}", log_path.display()));
        self.child = Some(
            Command::new(&self.program)
                .args(&self.args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|err| panic!("cannot start {}: {err}", self.program.display())),
        );
        let started = Instant::now();
        // without TLS options: the server accepts plain connections either way
        let url = self.url("127.0.0.1", "mysql", "");
        loop {
            match AsyncMysqlConnection::establish(&url).await {
                Ok(_) => return,
                Err(err) if started.elapsed() > DEADLINE => panic!(
                    "the private server did not start within {DEADLINE:?}: {err}\n{}",
                    self.log()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on now (the OS's pick for a listener dropped at once).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a bound address").port()
}
