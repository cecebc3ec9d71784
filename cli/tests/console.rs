//! `hookbox console` against a real SQLite file and a real Postgres schema: it
//! refuses to start without a token from the environment, prints its address
//! first, answers 401 without credentials and serves the pages to a bearer token.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use hookbox_core::testing::delivery;
use hookbox_core::{Delivery, HandlerError, Inbox, RetryPolicy, Worked};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::{SqliteOptions, SqliteStore};

mod common;

use common::{TempDir, pg_url};

const ADMIN: &str = "console-admin-token-0123456789";
const READ_ONLY: &str = "console-read-only-token-0123456";

async fn fail_on_poison<C>(_conn: &mut C, delivery: &Delivery) -> Result<(), HandlerError> {
    if delivery.body().as_ref() == b"poison" {
        Err("cannot parse: poison".into())
    } else {
        Ok(())
    }
}

fn one_try() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    }
}

/// Stores one delivery that is processed and one that becomes a dead letter.
async fn populate<S: Inbox>(store: &S)
where
    S::Conn: 'static,
{
    store.receive(&delivery("evt_ok", "{}")).await.unwrap();
    store
        .receive(&delivery("evt_poison", "poison"))
        .await
        .unwrap();
    while store.work_one(&fail_on_poison::<S::Conn>).await.unwrap() != Worked::Idle {}
}

fn console(store: &str, env: &[(&str, &str)]) -> Command {
    console_with(&["--store", store], env)
}

fn console_with(store: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookbox"));
    command
        .arg("console")
        .args(store)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("HOOKBOX_CONSOLE_TOKEN")
        .env_remove("HOOKBOX_CONSOLE_ADMIN_TOKEN")
        .env_remove("HOOKBOX_STORE");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// The console process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 GET; returns the status code and the whole answer.
fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    (status, answer)
}

#[test]
fn it_refuses_to_start_without_a_token_from_the_environment() {
    let dir = TempDir::new("console-no-token");
    let db = dir.0.join("hookbox.db");
    let output = console(db.to_str().unwrap(), &[]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("HOOKBOX_CONSOLE_TOKEN"), "{stderr}");
    assert!(output.stdout.is_empty());

    let short = console(
        db.to_str().unwrap(),
        &[("HOOKBOX_CONSOLE_ADMIN_TOKEN", "short")],
    )
    .output()
    .unwrap();
    assert_eq!(short.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 16 bytes"));

    // no token flag exists: a token on the command line is a usage error
    let flag = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["console", "--store", "x.db", "--token", ADMIN])
        .output()
        .unwrap();
    assert_eq!(flag.status.code(), Some(2));

    let missing = console(
        dir.0.join("absent.db").to_str().unwrap(),
        &[("HOOKBOX_CONSOLE_ADMIN_TOKEN", ADMIN)],
    )
    .output()
    .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no SQLite file"));
}

/// Starts `hookbox console` on `store_args` and checks its pages.
async fn serves(store_args: &[&str]) {
    let child = console_with(
        store_args,
        &[
            ("HOOKBOX_CONSOLE_ADMIN_TOKEN", ADMIN),
            ("HOOKBOX_CONSOLE_TOKEN", READ_ONLY),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut running = Running(child);
    let mut line = String::new();
    BufReader::new(running.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();

    tokio::task::spawn_blocking(move || {
        let (status, answer) = get(&addr, "/overview", None);
        assert_eq!(status, 401, "{answer}");
        let (status, _) = get(&addr, "/deliveries", Some("wrong-token-0000000000000"));
        assert_eq!(status, 401);
        let (status, answer) = get(&addr, "/login", None);
        assert_eq!(status, 200);
        assert!(
            answer.contains("content-security-policy: default-src 'none'"),
            "{answer}"
        );

        let (status, overview) = get(&addr, "/overview", Some(READ_ONLY));
        assert_eq!(status, 200, "{overview}");
        assert!(overview.contains("id=\"total-dead\">1<"), "{overview}");
        let (status, dead) = get(&addr, "/deliveries?state=dead", Some(ADMIN));
        assert_eq!(status, 200);
        assert_eq!(dead.matches("class=\"row-link\"").count(), 1);
        assert!(dead.contains("evt_poison"));
        assert!(dead.contains("id=\"replay-matching\""));
    })
    .await
    .unwrap();
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_prints_its_address_first_and_serves_a_sqlite_store() {
    let dir = TempDir::new("console-serve");
    let db = dir.0.join("hookbox.db");
    let store = SqliteStore::open(&db, SqliteOptions::default().with_retry(one_try()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    populate(&store).await;
    drop(store);
    serves(&["--store", db.to_str().unwrap()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_serves_a_postgres_store() {
    let Some(url) = pg_url().await else { return };
    let schema = format!("hb_cli_console_{:016x}", fastrand::u64(..));
    let mut admin = AsyncPgConnection::establish(&url).await.unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .unwrap();
    let options = PgOptions::new()
        .with_schema(schema.clone())
        .with_retry(one_try());
    let store = PgStore::connect(&url, options).await.unwrap();
    store.migrate().await.unwrap();
    populate(&store).await;
    drop(store);
    let outcome = tokio::spawn({
        let (url, schema) = (url.clone(), schema.clone());
        async move { serves(&["--store", &url, "--schema", &schema]).await }
    })
    .await;
    admin
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
    if let Err(err) = outcome {
        std::panic::resume_unwind(err.into_panic());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_serves_a_mysql_store() {
    let Some(url) = hookbox_diesel_mysql::testing::mysql_url().await else {
        return;
    };
    // a database of its own: MySQL's schemas are databases, named in the URL
    let database = format!("hb_cli_console_{:016x}", fastrand::u64(..));
    let server = MysqlStore::connect(&url, MysqlOptions::new())
        .await
        .unwrap();
    let run = |sql: String| {
        let server = &server;
        async move {
            let mut conn = server.connection().await.unwrap();
            conn.batch_execute(&sql).await.unwrap();
        }
    };
    run(format!("CREATE DATABASE {database}")).await;
    let (base, _) = url
        .split_once('?')
        .map_or((url.as_str(), ""), |(b, q)| (b, q));
    let (server_url, _) = base.rsplit_once('/').unwrap();
    let store_url = format!("{server_url}/{database}");
    let store = MysqlStore::connect(&store_url, MysqlOptions::new().with_retry(one_try()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    populate(&store).await;
    drop(store);
    let outcome = tokio::spawn({
        let store_url = store_url.clone();
        async move { serves(&["--store", &store_url]).await }
    })
    .await;
    run(format!("DROP DATABASE {database}")).await;
    if let Err(err) = outcome {
        std::panic::resume_unwind(err.into_panic());
    }
}
