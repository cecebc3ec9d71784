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
    SqliteOptions::default().with_retry(RetryPolicy {
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

/// A server run by `hookbox_axum::serve` on a random loopback port, with its
/// shutdown signal at hand; aborted when dropped.
pub struct Edge {
    pub url: String,
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Edge {
    /// Completes the shutdown future given to `serve`.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Whether `serve` has returned.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits up to `within` for `serve` to return; whether it did.
    pub async fn finished_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, &mut self.task).await.is_ok()
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` with `hookbox_axum::serve` and `limits` on `127.0.0.1:0`.
pub async fn serve_edge(router: axum::Router, limits: hookbox_axum::EdgeLimits) -> Edge {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(hookbox_axum::serve(listener, router, limits, async {
        let _ = stopped.await;
    }));
    Edge {
        url: format!("http://{addr}"),
        addr,
        stop: Some(stop),
        task,
    }
}

/// What a raw connection saw in [`trickle`].
#[derive(Debug)]
pub struct Trickled {
    /// When the server closed the connection (EOF or a reset), from the first byte
    /// sent; `None` if it was still open at the deadline.
    pub closed_after: Option<Duration>,
    /// How many bytes of `slow` went out before the server answered or closed.
    pub slow_sent: usize,
    /// Everything the server sent back.
    pub received: Vec<u8>,
}

impl Trickled {
    /// The status code of the answer received, if any.
    pub fn status(&self) -> Option<u16> {
        let text = String::from_utf8_lossy(&self.received);
        text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
    }

    /// The value of header `name` in the answer received.
    pub fn header(&self, name: &str) -> Option<String> {
        let text = String::from_utf8_lossy(&self.received);
        let head = text.split("\r\n\r\n").next()?;
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }

    /// The JSON body of the answer received.
    pub fn json(&self) -> serde_json::Value {
        let text = String::from_utf8_lossy(&self.received);
        let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {text}"))
    }
}

/// Opens a raw TCP connection to `addr`, sends `fast` at once, then `slow` one byte
/// every `every`, as a slow or malicious client would, and reads whatever comes
/// back. Stops sending once the server answers; returns when the server closes the
/// connection or `deadline` passes.
pub async fn trickle(
    addr: std::net::SocketAddr,
    fast: &[u8],
    slow: &[u8],
    every: Duration,
    deadline: Duration,
) -> Trickled {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut read, mut write) = stream.into_split();
    let started = tokio::time::Instant::now();
    let mut received = Vec::new();
    let mut slow_sent = 0;
    let mut writing = true;
    if !fast.is_empty() && write.write_all(fast).await.is_err() {
        writing = false;
    }
    let mut tick = tokio::time::interval(every);
    let end = tokio::time::sleep(deadline);
    tokio::pin!(end);
    let closed_after = loop {
        tokio::select! {
            read = read.read_buf(&mut received) => match read {
                Ok(0) | Err(_) => break Some(started.elapsed()),
                // an answer: stop sending, read it to the end
                Ok(_) => writing = false,
            },
            _ = tick.tick(), if writing && slow_sent < slow.len() => {
                if write.write_all(&slow[slow_sent..=slow_sent]).await.is_ok() {
                    slow_sent += 1;
                } else {
                    writing = false;
                }
            }
            () = &mut end => break None,
        }
    };
    Trickled {
        closed_after,
        slow_sent,
        received,
    }
}

/// A request head for a raw connection: `POST path` with `headers` and a
/// `content-length` of `length`.
pub fn request_head(path: &str, headers: &HeaderMap, length: usize) -> Vec<u8> {
    let mut head =
        format!("POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {length}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// What the server answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
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
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
        Answer {
            status,
            headers,
            json,
        }
    }
}

impl HttpClient {
    /// POSTs `body` with `headers` to `url` and reads the answer as it is: the
    /// status, the headers and the body's bytes (a handshake's reply need not be JSON).
    pub async fn post_raw(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: impl Into<Bytes>,
    ) -> (u16, HeaderMap, Bytes) {
        let mut request = Request::post(url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        let response = self.0.request(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, bytes)
    }

    /// GETs `url` and reads the JSON answer.
    pub async fn get(&self, url: &str) -> Answer {
        let request = Request::get(url).body(Full::new(Bytes::new())).unwrap();
        let response = self.0.request(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
        Answer {
            status,
            headers,
            json,
        }
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
