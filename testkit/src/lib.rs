#![doc = include_str!("../README.md")]
//!
//! # Reading an answer
//! ```
//! use hookbox_testkit::Answer;
//!
//! let answer = Answer { status: 401, body: r#"{"ok":false,"error":"signature_mismatch"}"#.into() };
//! assert_eq!(answer.outcome(), "signature_mismatch");
//! let stored = Answer { status: 200, body: r#"{"ok":true,"outcome":"stored"}"#.into() };
//! assert_eq!(stored.outcome(), "stored");
//! ```
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hookbox_core::bytes::Bytes;
use hookbox_core::http::Request;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Inbox as _, InboxFilter, InboxStats, SignedHeaders, Signer, StoredDelivery};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::diesel::QueryableByName;
use hookbox_sqlite::diesel::sql_types::BigInt;
use hookbox_sqlite::diesel_async::RunQueryDsl as _;
use hookbox_sqlite::{SqliteOptions, SqliteStore, diesel};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long any wait lasts before the test fails: generous, because CI machines are
/// slow and a deadline is only there so a broken example fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Returns a name no other test (in this run or an earlier one) uses, for delivery
/// and event ids: a Redis cache shared between runs must never see a repeated id.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:08x}",
        fastrand::u64(..),
        std::process::id()
    )
}

/// A temporary directory for example processes (their working directory and logs)
/// and the database they share: a SQLite file in the directory by default, or a
/// PostgreSQL schema ([`Sandbox::on_postgres`]). The directory is removed when
/// dropped (drop the [`Example`]s first).
#[derive(Debug)]
pub struct Sandbox {
    dir: PathBuf,
    postgres: Option<String>,
    logs: Mutex<Vec<PathBuf>>,
    // dropped after the directory is removed: the schema a `for_build` sandbox owns
    schema: Option<PgSchema>,
}

/// The sandbox's database, opened to read what the examples did.
enum Db {
    Sqlite(SqliteStore),
    Pg(PgStore),
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    /// Creates an empty directory under the system's temporary directory.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hookbox-example-{}-{}-{:08x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).expect("create the sandbox directory");
        Self {
            dir,
            postgres: None,
            logs: Mutex::new(Vec::new()),
            schema: None,
        }
    }

    /// Creates the sandbox the example binary under test needs: a SQLite file, or,
    /// with `postgres` (pass `cfg!(feature = "postgres")`: each build of an example
    /// speaks one backend), a PostgreSQL schema of its own, dropped with the sandbox.
    ///
    /// Returns `None` after printing `skipped: …` when `postgres` is set and
    /// `HOOKBOX_PG_URL` is unset or unreachable, unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// As [`Sandbox::new`] and [`PgSchema::create`].
    pub async fn for_build(postgres: bool) -> Option<Self> {
        if !postgres {
            return Some(Self::new());
        }
        let schema = PgSchema::create().await?;
        let mut sandbox = Self::on_postgres(&schema);
        sandbox.schema = Some(schema);
        Some(sandbox)
    }

    /// Creates a sandbox whose examples use the PostgreSQL `schema` instead of a
    /// SQLite file.
    pub fn on_postgres(schema: &PgSchema) -> Self {
        let mut sandbox = Self::new();
        sandbox.postgres = Some(schema.url());
        sandbox
    }

    /// Returns the store the examples started here use (`HOOKBOX_STORE`): the SQLite
    /// file, or the PostgreSQL URL.
    pub fn store_url(&self) -> String {
        self.postgres
            .clone()
            .unwrap_or_else(|| self.dir.join("hookbox.db").to_string_lossy().into_owned())
    }

    /// Starts `bin` (pass `env!("CARGO_BIN_EXE_<name>")`) with `args` and waits for the
    /// `listening on http://…` line it prints first on stdout.
    ///
    /// The child runs in this sandbox with `PORT=0` (a random port),
    /// `HOOKBOX_STORE` set to [`Sandbox::store_url`], its demo `WEBHOOK_SECRET` (the variable
    /// is removed) and no Redis (`HOOKBOX_REDIS_URL` removed); its stderr goes to a
    /// log file that failures print.
    ///
    /// # Panics
    /// When the binary cannot be started, or exits or prints something else before
    /// the line, or prints nothing within [`DEADLINE`].
    pub fn start(&self, bin: &str, args: &[&str]) -> Example {
        self.start_with(bin, args, &[])
    }

    /// Starts `bin` as [`Sandbox::start`] does, with the extra environment `env`
    /// (for example `HOOKBOX_REDIS_URL`, or a `HOOKBOX_STORE` that is not the file).
    ///
    /// # Panics
    /// As [`Sandbox::start`].
    pub fn start_with(&self, bin: &str, args: &[&str], env: &[(&str, &str)]) -> Example {
        let mut example = self.spawn_with(bin, args, env);
        let line = example.lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "{bin} printed no line within {DEADLINE:?} or exited\n{}",
                self.logs()
            )
        });
        let url = line
            .strip_prefix("listening on ")
            .filter(|url| url.starts_with("http://"))
            .unwrap_or_else(|| {
                panic!(
                    "{bin}'s first line is {line:?}, not `listening on http://…`\n{}",
                    self.logs()
                )
            });
        example.url = Some(url.trim_end_matches('/').to_owned());
        example
    }

    /// Starts `bin` with `args` in the same environment as [`Sandbox::start`] without
    /// waiting for anything: for a process that serves no HTTP (a worker).
    ///
    /// # Panics
    /// When the binary cannot be started.
    pub fn spawn(&self, bin: &str, args: &[&str]) -> Example {
        self.spawn_with(bin, args, &[])
    }

    /// Starts `bin` as [`Sandbox::spawn`] does, with the extra environment `env`.
    ///
    /// # Panics
    /// When the binary cannot be started.
    pub fn spawn_with(&self, bin: &str, args: &[&str], env: &[(&str, &str)]) -> Example {
        let log = {
            let mut logs = self.logs.lock().expect("the log list");
            let name = Path::new(bin)
                .file_name()
                .map_or_else(|| "example".into(), |name| name.to_string_lossy());
            let log = self.dir.join(format!("{}-{name}.log", logs.len()));
            logs.push(log.clone());
            log
        };
        let stderr = File::create(&log).expect("create the child's log file");
        let mut child = Command::new(bin)
            .args(args)
            .current_dir(&self.dir)
            .env("PORT", "0")
            .env("HOOKBOX_STORE", self.store_url())
            .env_remove("WEBHOOK_SECRET")
            .env_remove("HOOKBOX_REDIS_URL")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {bin}: {err}"));
        // read stdout on a thread: the first line is the address, and the rest is
        // drained so the child never blocks on a full pipe
        let stdout = child.stdout.take().expect("a piped stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Example {
            child,
            lines,
            url: None,
            log,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Opens the sandbox's database with the store the examples use.
    async fn open(&self) -> Db {
        let url = self.store_url();
        let db = match &self.postgres {
            Some(url) => PgStore::connect(url, PgOptions::new())
                .await
                .map(Db::Pg)
                .map_err(|e| e.to_string()),
            None => SqliteStore::open(&url, SqliteOptions::default())
                .await
                .map(Db::Sqlite)
                .map_err(|e| e.to_string()),
        };
        // start an example first: it creates and migrates the database
        db.unwrap_or_else(|err| panic!("cannot open {url}: {err}\n{}", self.logs()))
    }

    /// Returns the inbox's counts.
    ///
    /// # Panics
    /// When the database cannot be read.
    pub async fn stats(&self) -> InboxStats {
        self.open().await.stats(self).await
    }

    /// Returns every inbox row, the newest first.
    ///
    /// # Panics
    /// When the database cannot be read.
    pub async fn rows(&self) -> Vec<StoredDelivery> {
        let rows = match self.open().await {
            Db::Sqlite(store) => store
                .list(InboxFilter::All, 1000)
                .await
                .map_err(|e| e.to_string()),
            Db::Pg(store) => store
                .list(InboxFilter::All, 1000)
                .await
                .map_err(|e| e.to_string()),
        };
        rows.unwrap_or_else(|err| panic!("cannot list the inbox: {err}\n{}", self.logs()))
    }

    /// Waits until the inbox shows at least `processed` processed rows and nothing
    /// pending, polling until [`DEADLINE`]; returns the counts then.
    ///
    /// # Panics
    /// When that does not happen in time, or a row became a dead letter (the
    /// example's worker failed on it five times).
    pub async fn wait_processed(&self, processed: u64) -> InboxStats {
        let db = self.open().await;
        let started = Instant::now();
        loop {
            let stats = db.stats(self).await;
            assert_eq!(
                stats.dead,
                0,
                "a delivery became a dead letter\n{}",
                self.logs()
            );
            if stats.processed >= processed && stats.pending == 0 {
                return stats;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "the inbox never showed {processed} processed rows within {DEADLINE:?}: {stats:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `sql`, a query returning one row with one integer column named `n`
    /// (`SELECT COUNT(*) AS n FROM …`), on the sandbox's database: to read the side
    /// effect an example applied.
    ///
    /// # Panics
    /// When the query fails or returns no row.
    pub async fn query_i64(&self, sql: &str) -> i64 {
        #[derive(QueryableByName)]
        struct N {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let query = diesel::sql_query(sql);
        let row = match self.open().await {
            Db::Sqlite(store) => match store.connection().await {
                Ok(mut conn) => query
                    .get_result::<N>(&mut *conn)
                    .await
                    .map_err(|e| e.to_string()),
                Err(err) => Err(err.to_string()),
            },
            Db::Pg(store) => match store.connection().await {
                Ok(mut conn) => query
                    .get_result::<N>(&mut *conn)
                    .await
                    .map_err(|e| e.to_string()),
                Err(err) => Err(err.to_string()),
            },
        };
        row.unwrap_or_else(|err| panic!("{sql}: {err}\n{}", self.logs()))
            .n
    }

    /// Returns every child's log, for a failure message.
    pub fn logs(&self) -> String {
        let logs = self
            .logs
            .lock()
            .map(|logs| logs.clone())
            .unwrap_or_default();
        logs.iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                format!("--- {}\n{text}", path.display())
            })
            .collect()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // a failing test shows what the examples logged
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Db {
    async fn stats(&self, sandbox: &Sandbox) -> InboxStats {
        let stats = match self {
            Self::Sqlite(store) => store.stats().await.map_err(|e| e.to_string()),
            Self::Pg(store) => store.stats().await.map_err(|e| e.to_string()),
        };
        stats.unwrap_or_else(|err| panic!("cannot read the inbox: {err}\n{}", sandbox.logs()))
    }
}

/// Returns `true` when a test must fail rather than skip without a service
/// (`HOOKBOX_REQUIRE_SERVICES=1`, as in CI).
fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints `skipped: …` and returns `None`) or, when services are required,
/// panics.
#[allow(clippy::print_stdout)] // the skip rule: the test says why it did not run
fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "{why} and HOOKBOX_REQUIRE_SERVICES=1");
    println!("skipped: {why}");
    None
}

/// Returns `HOOKBOX_REDIS_URL` when a Redis server answers there.
///
/// Returns `None` after printing `skipped: …` when it is unset or nothing listens,
/// unless `HOOKBOX_REQUIRE_SERVICES=1`.
///
/// # Panics
/// When the service is missing and `HOOKBOX_REQUIRE_SERVICES=1`.
pub fn redis_url() -> Option<String> {
    let Some(url) = std::env::var("HOOKBOX_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        return skip("HOOKBOX_REDIS_URL not set");
    };
    // host:port between the scheme (and any credentials) and the database number
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let addr = rest.split(['/', '?']).next().unwrap_or_default();
    let addr = if addr.contains(':') {
        addr.to_owned()
    } else {
        format!("{addr}:6379")
    };
    match std::net::TcpStream::connect(&addr) {
        Ok(_) => Some(url),
        Err(err) => skip(&format!("HOOKBOX_REDIS_URL unreachable: {err}")),
    }
}

/// A PostgreSQL schema of its own for one test, on the server at `HOOKBOX_PG_URL`;
/// dropped with everything in it when the value is dropped.
#[derive(Debug)]
pub struct PgSchema {
    base: String,
    name: String,
}

impl PgSchema {
    /// Creates a fresh schema.
    ///
    /// Returns `None` after printing `skipped: …` when `HOOKBOX_PG_URL` is unset or the
    /// server unreachable, unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// When the service is missing and `HOOKBOX_REQUIRE_SERVICES=1`, or the schema
    /// cannot be created.
    pub async fn create() -> Option<Self> {
        let Some(base) = std::env::var("HOOKBOX_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            return skip("HOOKBOX_PG_URL not set");
        };
        let mut conn = match AsyncPgConnection::establish(&base).await {
            Ok(conn) => conn,
            Err(err) => return skip(&format!("HOOKBOX_PG_URL unreachable: {err}")),
        };
        let name = format!("hb_example_{:016x}", fastrand::u64(..));
        conn.batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap_or_else(|err| panic!("CREATE SCHEMA {name}: {err}"));
        Some(Self { base, name })
    }

    /// Returns a URL whose connections work in this schema (its `search_path`), for
    /// `HOOKBOX_STORE`.
    pub fn url(&self) -> String {
        let separator = if self.base.contains('?') { '&' } else { '?' };
        format!(
            "{}{separator}options=-csearch_path%3D{}",
            self.base, self.name
        )
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        // a runtime of its own on a thread of its own: `drop` cannot await, and it may
        // run inside the test's runtime
        let (base, name) = (self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut conn) = AsyncPgConnection::establish(&base).await {
                    let _ = conn
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// The POST of `body` with `headers` to `path` on `base`.
fn signed_post(
    base: &str,
    path: &str,
    headers: &SignedHeaders,
    body: &[u8],
) -> Request<Full<Bytes>> {
    let mut request = Request::post(format!("{base}{path}"));
    for (name, value) in headers.iter() {
        request = request.header(name, value);
    }
    request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("a valid request")
}

/// Sends `request` and reads the whole answer, within [`DEADLINE`].
async fn exchange(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<Answer, String> {
    let answer = tokio::time::timeout(DEADLINE, async {
        let response = client.request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
    })
    .await;
    match answer {
        Ok(Ok((status, body))) => Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {DEADLINE:?}")),
    }
}

/// Sends signed deliveries to a running example from any task
/// ([`Example::sender`]).
#[derive(Debug, Clone)]
pub struct Sender {
    url: String,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Sender {
    /// [`Example::send`] that returns the failure instead of panicking: a request
    /// to a process that is being killed gets no answer.
    ///
    /// # Errors
    /// No answer came (the connection was refused or cut), or none within
    /// [`DEADLINE`].
    pub async fn try_send(
        &self,
        path: &str,
        signer: &dyn Signer,
        id: &str,
        body: &[u8],
    ) -> Result<Answer, String> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let headers = signer.sign(id, now, body);
        exchange(&self.client, signed_post(&self.url, path, &headers, body)).await
    }
}

/// A running example process, killed when dropped.
#[derive(Debug)]
pub struct Example {
    child: Child,
    lines: mpsc::Receiver<String>,
    url: Option<String>,
    log: PathBuf,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Example {
    /// Returns the base URL the example listens on (`http://127.0.0.1:<port>`).
    ///
    /// # Panics
    /// For a process started with [`Sandbox::spawn`], which serves no HTTP.
    pub fn url(&self) -> &str {
        self.url.as_deref().expect("started with Sandbox::start")
    }

    /// Returns the process's stderr so far (its logs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Signs `body` with `signer` as delivery `id`, timestamped now, and POSTs it to
    /// `path`.
    ///
    /// # Panics
    /// As [`Example::post`].
    pub async fn send(&self, path: &str, signer: &dyn Signer, id: &str, body: &[u8]) -> Answer {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        self.post(path, &signer.sign(id, now, body), body).await
    }

    /// POSTs `body` with `headers` to `path` and reads the answer.
    ///
    /// # Panics
    /// When the request cannot be built or no answer comes within [`DEADLINE`].
    pub async fn post(&self, path: &str, headers: &SignedHeaders, body: &[u8]) -> Answer {
        exchange(&self.client, signed_post(self.url(), path, headers, body))
            .await
            .unwrap_or_else(|err| panic!("POST {path}: {err}\n{}", self.log()))
    }

    /// Returns the next line the process prints on stdout after the address line
    /// (for example a second listener's address), waiting up to [`DEADLINE`].
    ///
    /// # Panics
    /// When no line comes in time.
    pub fn next_line(&self) -> String {
        self.lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("no further line within {DEADLINE:?}\n{}", self.log()))
    }

    /// GETs an absolute `url` (a path on [`Example::url`] when it starts with `/`)
    /// and reads the answer.
    ///
    /// # Panics
    /// When no answer comes within [`DEADLINE`].
    pub async fn get(&self, url: &str) -> Answer {
        let url = if url.starts_with('/') {
            format!("{}{url}", self.url())
        } else {
            url.to_string()
        };
        let request = Request::get(&url)
            .body(Full::new(Bytes::new()))
            .expect("a valid request");
        exchange(&self.client, request)
            .await
            .unwrap_or_else(|err| panic!("GET {url}: {err}\n{}", self.log()))
    }

    /// Returns a sender for this example that tasks can share: it keeps the
    /// address and a client, not the process.
    pub fn sender(&self) -> Sender {
        Sender {
            url: self.url().to_string(),
            client: self.client.clone(),
        }
    }

    /// Sends the process SIGKILL (`kill -9 <pid>`): no destructor, no graceful
    /// shutdown, as a crash or an OOM kill stops it.
    ///
    /// # Panics
    /// When `kill` cannot be run.
    pub fn kill_now(&self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap_or_else(|err| panic!("cannot run kill: {err}"));
    }

    /// Sends the process SIGTERM (`kill -TERM <pid>`, what orchestrators send to stop
    /// a process) and waits for it to exit; returns its exit status.
    ///
    /// # Panics
    /// When `kill` cannot be run or fails, or the process is still running
    /// [`DEADLINE`] after the signal.
    pub async fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap_or_else(|err| panic!("cannot run kill: {err}"));
        assert!(kill.success(), "kill -TERM {pid}: {kill}\n{}", self.log());
        self.exited().await
    }

    /// Waits for the process to exit on its own; returns its exit status.
    ///
    /// # Panics
    /// When it is still running after [`DEADLINE`].
    pub async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) => {}
                Err(err) => panic!("cannot wait for the process: {err}\n{}", self.log()),
            }
            assert!(
                started.elapsed() < DEADLINE,
                "still running after {DEADLINE:?}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What an example answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

impl Answer {
    /// Returns the body's `outcome` (`stored`, `duplicate`) for a 2xx, or its `error`
    /// kind (`signature_mismatch`, …) for a refusal; empty when the body has neither.
    pub fn outcome(&self) -> String {
        let json: serde_json::Value = serde_json::from_str(&self.body).unwrap_or_default();
        json["outcome"]
            .as_str()
            .or_else(|| json["error"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}
