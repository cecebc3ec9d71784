//! The [`Sandbox`]: the temporary directory and the store (a SQLite file, a
//! PostgreSQL schema or a MySQL database) example processes share, starting them
//! there, and reading what they left in the database; the [`Backend`] a build of an
//! example stores in.

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hookbox_core::{InboxAdmin as _, InboxFilter, InboxStats, StoredDelivery};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::diesel::QueryableByName;
use hookbox_sqlite::diesel::sql_types::BigInt;
use hookbox_sqlite::diesel_async::RunQueryDsl as _;
use hookbox_sqlite::{SqliteOptions, SqliteStore, diesel};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::common::DEADLINE;
use crate::example::Example;
use crate::services::{MysqlDatabase, PgSchema};

/// The database a build of an example stores in: each build speaks one, chosen by
/// its features (SQLite by default, `postgres`, or `mysql`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// A SQLite file (the default build).
    Sqlite,
    /// PostgreSQL (a `--features postgres` build), on `HOOKBOX_PG_URL`.
    Postgres,
    /// MySQL or MariaDB (a `--features mysql` build), on `HOOKBOX_MYSQL_URL`.
    Mysql,
}

impl Backend {
    /// Returns the backend of a build with the features `postgres` and `mysql` on or
    /// off: pass `cfg!(feature = "postgres"), cfg!(feature = "mysql")`. `mysql` wins
    /// when both are on (an example refuses to build with both).
    ///
    /// # Examples
    /// ```
    /// use hookbox_testkit::Backend;
    ///
    /// assert_eq!(Backend::from_features(false, false), Backend::Sqlite);
    /// assert_eq!(Backend::from_features(true, false), Backend::Postgres);
    /// assert_eq!(Backend::from_features(false, true), Backend::Mysql);
    /// ```
    pub const fn from_features(postgres: bool, mysql: bool) -> Self {
        match (postgres, mysql) {
            (_, true) => Self::Mysql,
            (true, false) => Self::Postgres,
            (false, false) => Self::Sqlite,
        }
    }
}

/// A temporary directory for example processes (their working directory and logs)
/// and the database they share: a SQLite file in the directory by default, a
/// PostgreSQL schema ([`Sandbox::on_postgres`]) or a MySQL database
/// ([`Sandbox::on_mysql`]). The directory is removed when dropped (drop the
/// [`Example`]s first).
#[derive(Debug)]
pub struct Sandbox {
    dir: PathBuf,
    /// The server and its URL, when the store is not the SQLite file.
    server: Option<(Backend, String)>,
    logs: Mutex<Vec<PathBuf>>,
    // dropped after the directory is removed: the schema or database a `for_build`
    // sandbox owns
    schema: Option<PgSchema>,
    database: Option<MysqlDatabase>,
}

/// The sandbox's database, opened to read what the examples did.
enum Db {
    Sqlite(SqliteStore),
    Pg(PgStore),
    Mysql(MysqlStore),
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
            server: None,
            logs: Mutex::new(Vec::new()),
            schema: None,
            database: None,
        }
    }

    /// Creates the sandbox the example binary under test needs for its `backend`
    /// (each build of an example speaks one: pass
    /// `Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"))`):
    /// a SQLite file, a PostgreSQL schema of its own or a MySQL database of its own,
    /// the schema or database dropped with the sandbox.
    ///
    /// Returns `None` after printing `skipped: …` when the backend's server is wanted
    /// and its URL (`HOOKBOX_PG_URL`, `HOOKBOX_MYSQL_URL`) is unset or unreachable,
    /// unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// As [`Sandbox::new`], [`PgSchema::create`] and [`MysqlDatabase::create`].
    pub async fn for_build(backend: Backend) -> Option<Self> {
        match backend {
            Backend::Sqlite => Some(Self::new()),
            Backend::Postgres => {
                let schema = PgSchema::create().await?;
                let mut sandbox = Self::on_postgres(&schema);
                sandbox.schema = Some(schema);
                Some(sandbox)
            }
            Backend::Mysql => {
                let database = MysqlDatabase::create().await?;
                let mut sandbox = Self::on_mysql(&database);
                sandbox.database = Some(database);
                Some(sandbox)
            }
        }
    }

    /// Creates a sandbox whose examples use the PostgreSQL `schema` instead of a
    /// SQLite file.
    pub fn on_postgres(schema: &PgSchema) -> Self {
        let mut sandbox = Self::new();
        sandbox.server = Some((Backend::Postgres, schema.url()));
        sandbox
    }

    /// Creates a sandbox whose examples use the MySQL `database` instead of a SQLite
    /// file.
    pub fn on_mysql(database: &MysqlDatabase) -> Self {
        let mut sandbox = Self::new();
        sandbox.server = Some((Backend::Mysql, database.url()));
        sandbox
    }

    /// Returns the backend the examples started here store in.
    pub fn backend(&self) -> Backend {
        self.server
            .as_ref()
            .map_or(Backend::Sqlite, |(backend, _)| *backend)
    }

    /// Returns the store the examples started here use (`HOOKBOX_STORE`): the SQLite
    /// file, or the PostgreSQL or MySQL URL.
    pub fn store_url(&self) -> String {
        self.server.as_ref().map_or_else(
            || self.dir.join("hookbox.db").to_string_lossy().into_owned(),
            |(_, url)| url.clone(),
        )
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
        let db = match self.backend() {
            Backend::Postgres => PgStore::connect(&url, PgOptions::new())
                .await
                .map(Db::Pg)
                .map_err(|e| e.to_string()),
            Backend::Mysql => MysqlStore::connect(&url, MysqlOptions::new())
                .await
                .map(Db::Mysql)
                .map_err(|e| e.to_string()),
            Backend::Sqlite => SqliteStore::open(&url, SqliteOptions::default())
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
                .list(InboxFilter::all(), 1000)
                .await
                .map_err(|e| e.to_string()),
            Db::Pg(store) => store
                .list(InboxFilter::all(), 1000)
                .await
                .map_err(|e| e.to_string()),
            Db::Mysql(store) => store
                .list(InboxFilter::all(), 1000)
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
    /// effect an example applied. The SQL is the [`Sandbox::backend`]'s dialect;
    /// plain `SELECT`s with single-quoted strings read the same on all three.
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
            Db::Mysql(store) => match store.connection().await {
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
            Self::Mysql(store) => store.stats().await.map_err(|e| e.to_string()),
        };
        stats.unwrap_or_else(|err| panic!("cannot read the inbox: {err}\n{}", sandbox.logs()))
    }
}
