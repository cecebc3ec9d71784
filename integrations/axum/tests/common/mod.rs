//! Shared test setup: a SQLite store with a ledger in a temp file (from
//! `hookbox_sqlite::testing`), a real HTTP server on a random loopback port, an
//! HTTP/1 client, and the handlers that credit the ledger.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use diesel::Connection as _;
use diesel::connection::SimpleConnection as _;
use hookbox_axum::axum;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, Request};
use hookbox_core::{Delivery, HandlerError, Inbox, RetryPolicy, Signer, Worked};
use hookbox_github::{GitHub, GitHubSigner};
use hookbox_sqlite::testing::credit_query as credit;
// not every test binary uses every one
#[allow(unused_imports)]
pub use hookbox_sqlite::testing::{TempDir, open, total as ledger_total};
use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore, diesel};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub const SECRET: &str = "it's a secret to the tests";

/// The store options the tests use: failed rows are due again at once, and three
/// failures make a dead letter.
pub fn options() -> SqliteOptions {
    SqliteOptions::default().retry(RetryPolicy {
        max_attempts: 3,
        base: Duration::ZERO,
        cap: Duration::ZERO,
    })
}

/// A delivery body: credit 100 to `account`; a body containing `poison` fails.
pub fn body(account: &str) -> String {
    format!(r#"{{"account":"{account}","amount":100}}"#)
}

/// Reads the account and amount a body asks for.
fn order(raw: &[u8]) -> Result<(String, i64), String> {
    let text = String::from_utf8_lossy(raw);
    if text.contains("poison") {
        return Err("cannot apply this event: poison".to_string());
    }
    let json: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    let account = json["account"].as_str().ok_or("no account")?.to_string();
    let amount = json["amount"].as_i64().ok_or("no amount")?;
    Ok((account, amount))
}

/// The handler, inline and in the worker alike: credits what the body asks for, on
/// the claim's (or the inbox row's) transaction.
pub async fn apply(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let (account, amount) = order(delivery.body())?;
    credit(conn, &account, amount).await?;
    Ok(())
}

/// Runs `work_one` until the inbox is idle; returns (processed, failed, dead).
pub async fn drain(store: &SqliteStore) -> (u64, u64, u64) {
    let (mut processed, mut failed, mut dead) = (0, 0, 0);
    for _ in 0..1000 {
        match store.work_one(&apply).await.unwrap() {
            Worked::Idle => return (processed, failed, dead),
            Worked::Processed { .. } => processed += 1,
            Worked::Failed { dead: is_dead, .. } => {
                failed += 1;
                dead += u64::from(is_dead);
            }
        }
    }
    panic!("the inbox never became idle");
}

/// The GitHub provider the tests verify with.
pub fn github() -> GitHub {
    GitHub::new(SECRET).unwrap()
}

/// Signs `body` as GitHub would for delivery `id`.
pub fn signed(id: &str, body: &str) -> HeaderMap {
    GitHubSigner::new(SECRET)
        .unwrap()
        .event("push")
        .sign(id, 0, body.as_bytes())
        .to_header_map()
}

/// A server on a random loopback port, stopped when dropped.
pub struct Server {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on `127.0.0.1:0`.
pub async fn serve(router: axum::Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    Server {
        url: format!("http://{addr}"),
        task,
    }
}

/// What the server answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub json: serde_json::Value,
}

impl Answer {
    /// The `outcome` of a 2xx, or the `error` kind of a refusal.
    pub fn what(&self) -> &str {
        self.json["outcome"]
            .as_str()
            .or_else(|| self.json["error"].as_str())
            .unwrap_or("")
    }

    pub fn message(&self) -> &str {
        self.json["message"].as_str().unwrap_or("")
    }
}

/// An HTTP/1 client over plain TCP.
#[derive(Clone)]
pub struct HttpClient(Client<HttpConnector, Full<Bytes>>);

impl HttpClient {
    pub fn new() -> Self {
        Self(Client::builder(TokioExecutor::new()).build_http())
    }

    /// POSTs `body` with `headers` to `url` and reads the JSON answer.
    pub async fn post(&self, url: &str, headers: &HeaderMap, body: impl Into<Bytes>) -> Answer {
        let mut request = Request::post(url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        let response = self.0.request(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
        Answer { status, json }
    }
}

impl HttpClient {
    /// GETs `url` and reads the JSON answer.
    pub async fn get(&self, url: &str) -> Answer {
        let request = Request::get(url).body(Full::new(Bytes::new())).unwrap();
        let response = self.0.request(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
        Answer { status, json }
    }
}

/// Holds SQLite's write lock from another connection, as a long writer or a stuck
/// process would: the store cannot write until it is released.
pub struct WriteLock(diesel::SqliteConnection);

impl WriteLock {
    pub fn take(path: &std::path::Path) -> Self {
        let mut conn = diesel::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
        conn.batch_execute("BEGIN IMMEDIATE").unwrap();
        Self(conn)
    }

    pub fn release(mut self) {
        self.0.batch_execute("ROLLBACK").unwrap();
    }
}
