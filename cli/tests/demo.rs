//! `hookbox demo` as a user runs it: the built binary, a small stream, the printed
//! table read back. On SQLite always; on Postgres when `HOOKBOX_PG_URL` is set and on
//! MySQL or MariaDB when `HOOKBOX_MYSQL_URL` is (each skipped without its variable
//! unless `HOOKBOX_REQUIRE_SERVICES=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::process::{Command, Output};

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use hookbox_diesel_mysql::testing::mysql_url;
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::{diesel, diesel_async};

mod common;

use common::{TempDir, pg_url};

/// Fails with the command's output unless it exited 0.
fn assert_succeeded(output: &Output) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One table row: the count, and the value it must have where the table says one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    count: i64,
    must_be: Option<i64>,
}

/// The run's table, by label.
struct Table {
    stdout: String,
    rows: HashMap<&'static str, Row>,
}

const LABELS: [&str; 7] = [
    "deliveries sent",
    "events applied once",
    "events applied more than once",
    "events never applied",
    "forgeries rejected (401)",
    "forgeries stored",
    "ledger",
];

impl Table {
    fn parse(output: &Output) -> Self {
        let stdout = String::from_utf8(output.stdout.clone()).unwrap();
        let mut rows = HashMap::new();
        for line in stdout.lines() {
            for label in LABELS {
                let Some(rest) = line.strip_prefix(label) else {
                    continue;
                };
                let numbers: Vec<i64> = rest
                    .split_whitespace()
                    .map(|n| n.parse().unwrap())
                    .collect();
                if let Some((&count, must_be)) = numbers.split_first() {
                    let must_be = must_be.first().copied();
                    rows.insert(label, Row { count, must_be });
                }
            }
        }
        Self { stdout, rows }
    }

    fn row(&self, label: &str) -> Row {
        *self
            .rows
            .get(label)
            .unwrap_or_else(|| panic!("no `{label}` row in:\n{}", self.stdout))
    }

    /// Checks what the demo promises: the ledger equals the expected total, no event
    /// applied twice or lost, forgeries sent and every one refused, none stored.
    fn assert_exactly_once(&self, events: i64) {
        let ledger = self.row("ledger");
        assert_eq!(Some(ledger.count), ledger.must_be, "{}", self.stdout);
        assert!(ledger.count > 0, "{}", self.stdout);
        assert_eq!(self.row("events applied once").count, events);
        assert_eq!(self.row("events applied more than once").count, 0);
        assert_eq!(self.row("events never applied").count, 0);
        let forged = self.row("forgeries rejected (401)");
        assert!(forged.count > 0, "no forgery sent:\n{}", self.stdout);
        assert_eq!(Some(forged.count), forged.must_be, "{}", self.stdout);
        assert_eq!(self.row("forgeries stored").count, 0);
        // the faults make more deliveries than events
        assert!(self.row("deliveries sent").count > events);
        assert!(self.stdout.contains("\nok: "), "{}", self.stdout);
    }
}

fn demo(args: &[&str], tmpdir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .arg("demo")
        .args(args)
        // the temporary SQLite file goes here, so the test can see it removed
        .env("TMPDIR", tmpdir)
        .output()
        .unwrap()
}

#[test]
fn the_demo_on_sqlite_applies_every_event_exactly_once_and_leaves_nothing_behind() {
    let dir = TempDir::new("demo");
    let output = demo(&["--events", "300"], &dir.0);
    assert_succeeded(&output);
    Table::parse(&output).assert_exactly_once(300);
    // stderr is not a terminal here: no progress bar, no noise
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
    assert!(left.is_empty(), "the temporary database was left: {left:?}");
}

#[test]
fn every_provider_runs_the_demo_with_a_store_file_the_operator_can_open() {
    let dir = TempDir::new("demo");
    for provider in ["stripe", "shopify", "github", "svix"] {
        let db = dir.0.join(format!("{provider}.db"));
        let db = db.to_str().unwrap();
        let output = demo(
            &[
                "--events",
                "200",
                "--provider",
                provider,
                "--store",
                db,
                "--seed",
                "7",
            ],
            &dir.0,
        );
        assert_eq!(output.status.code(), Some(0), "{provider}");
        Table::parse(&output).assert_exactly_once(200);

        // the file is kept, drained, for `hookbox inbox`
        let stats = Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(["inbox", "--store", db, "stats"])
            .output()
            .unwrap();
        let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
        assert_eq!(stats["pending"], 0, "{provider}");
        assert_eq!(stats["processed"], 200, "{provider}");
    }
}

#[test]
fn an_existing_store_file_is_refused_and_left_alone() {
    let dir = TempDir::new("demo");
    let db = dir.0.join("mine.db");
    std::fs::write(&db, b"not yours").unwrap();
    let output = demo(&["--events", "10", "--store", db.to_str().unwrap()], &dir.0);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("the file exists"));
    assert_eq!(std::fs::read(&db).unwrap(), b"not yours");
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_postgres_applies_every_event_exactly_once_and_drops_its_schema() {
    let Some(url) = pg_url().await else { return };
    let dir = TempDir::new("demo");
    let output = demo(&["--events", "300", "--store", &url], &dir.0);
    assert_succeeded(&output);
    let table = Table::parse(&output);
    table.assert_exactly_once(300);

    let schema = demo_namespace(&table);
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    let left = diesel::sql_query("SELECT COUNT(*) AS n FROM pg_namespace WHERE nspname = $1")
        .bind::<Text, _>(schema)
        .get_result::<Count>(&mut conn)
        .await
        .unwrap();
    assert_eq!(left.n, 0, "schema {schema} was not dropped");
}

/// The name the heading gives the schema or database the demo ran in.
fn demo_namespace(table: &Table) -> &str {
    table
        .stdout
        .split_whitespace()
        .find(|word| word.starts_with("hookbox_demo_"))
        .expect("the heading names the schema or database")
        .trim_end_matches([',', ')'])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_mysql_applies_every_event_exactly_once_and_drops_its_database() {
    let Some(url) = mysql_url().await else { return };
    let dir = TempDir::new("demo");
    let output = demo(&["--events", "300", "--store", &url], &dir.0);
    assert_succeeded(&output);
    let table = Table::parse(&output);
    table.assert_exactly_once(300);
    assert!(
        table.stdout.contains("store MySQL (database "),
        "{}",
        table.stdout
    );

    let database = demo_namespace(&table);
    let store = MysqlStore::connect(&url, MysqlOptions::new().with_max_connections(1))
        .await
        .unwrap();
    let mut conn = store.connection().await.unwrap();
    let left = diesel::sql_query(
        "SELECT COUNT(*) AS n FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
    )
    .bind::<Text, _>(database)
    .get_result::<Count>(&mut *conn)
    .await
    .unwrap();
    assert_eq!(left.n, 0, "database {database} was not dropped");
}
