//! A private MariaDB (or MySQL) server for one test: its own data directory in a
//! temp dir and a free port, TLS on with test certificates when asked, killed and
//! removed when dropped (also when the test panics). It can be killed and started
//! again on the same data, as a crashed and restarted server is.
//!
//! It needs `mariadb-install-db` and `mariadbd` (or `mysql_install_db` and
//! `mysqld`), and `openssl` for TLS; without them the test skips, or fails under
//! `HOOKBOX_REQUIRE_SERVICES=1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_testkit::tls::TestCertificates;

fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints and returns `None`) or, when services are required, panics.
pub fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "HOOKBOX_REQUIRE_SERVICES=1 but {why}");
    println!("skipped: {why}");
    None
}

/// The first of `names` found in `/usr/sbin`, `/usr/bin` or on `PATH`.
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

/// A private server (see the module docs).
pub struct PrivateServer {
    child: Option<Child>,
    program: PathBuf,
    args: Vec<String>,
    /// The port it listens on, the same after a restart.
    pub port: u16,
    /// The test certificates, when TLS is on.
    pub certs: Option<TestCertificates>,
    // dropped last: the server is stopped first
    dir: Scratch,
}

impl PrivateServer {
    /// Starts a server, with TLS on and a certificate for `tls_names`
    /// (`"DNS:localhost"`) when given; `None` when the test must skip.
    pub async fn start(tls_names: Option<&[&str]>) -> Option<Self> {
        let Some(install) = program(&["mariadb-install-db", "mysql_install_db"]) else {
            return skip("no mariadb-install-db or mysql_install_db");
        };
        let Some(server) = program(&["mariadbd", "mysqld"]) else {
            return skip("no mariadbd or mysqld");
        };
        if tls_names.is_some() && program(&["openssl"]).is_none() {
            return skip("no openssl");
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
            .unwrap();
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

    /// The URL of `database` at `host`, with `params` (`"?ssl-mode=…"`) appended.
    pub fn url(&self, host: &str, database: &str, params: &str) -> String {
        format!("mysql://root@{host}:{}/{database}{params}", self.port)
    }

    /// Kills the server (SIGKILL: no shutdown, as a crash) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on its data and port, and waits until it accepts
    /// a connection.
    pub async fn restart(&mut self) {
        self.kill();
        let log = std::fs::File::create(self.dir.0.join("server.log")).unwrap();
        self.child = Some(
            Command::new(&self.program)
                .args(&self.args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = self.url("127.0.0.1", "mysql", "?ssl-mode=DISABLED");
        loop {
            let ready = MysqlStore::connect(
                &url,
                MysqlOptions::new().with_pool_timeout(Duration::from_secs(2)),
            )
            .await;
            match ready {
                Ok(_) => return,
                Err(err) if Instant::now() > deadline => panic!(
                    "the server did not start: {err}\n{}",
                    std::fs::read_to_string(self.dir.0.join("server.log")).unwrap_or_default()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
