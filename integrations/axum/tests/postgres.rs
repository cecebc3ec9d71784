//! The database down, for real: the Postgres store reaches the server through a TCP
//! proxy that the test cuts (every live connection closed, new ones refused) and
//! restores. Reads `HOOKBOX_PG_URL`; skips without it unless
//! `HOOKBOX_REQUIRE_SERVICES=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{HttpClient, body, github, serve, signed};
use diesel::sql_types::{BigInt, Text};
use diesel_async::SimpleAsyncConnection as _;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use hookbox_axum::{Webhook, health_router};
use hookbox_core::{Delivery, HandlerError, Inbox, RetryPolicy, Worked};
use hookbox_diesel_pg::{PgOptions, PgStore, diesel, diesel_async};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use hookbox_diesel_pg::testing::pg_url;

/// Splits `postgres://user@host:port/db` around `host:port`.
fn split_url(url: &str) -> (&str, &str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let start = url[after_scheme..]
        .find('@')
        .map_or(after_scheme, |i| after_scheme + i + 1);
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    (&url[..start], &url[start..end], &url[end..])
}

/// A TCP proxy to the database that can be cut and restored; stopped when dropped.
struct Proxy {
    addr: std::net::SocketAddr,
    up: Arc<AtomicBool>,
    // bumped on every cut: each live connection watches it and closes
    cuts: watch::Sender<u64>,
    // the live connections' tasks, awaited by `cut` so that no byte crosses after it
    live: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0);
        let live = Arc::new(std::sync::Mutex::new(Vec::new()));
        let task = {
            let (up, cuts, live) = (Arc::clone(&up), cuts.clone(), Arc::clone(&live));
            tokio::spawn(async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    // subscribed before the check: a cut after it still closes this one
                    let mut cut = cuts.subscribe();
                    if !AtomicBool::load(&up, Ordering::SeqCst) {
                        // the database is down: the connection is refused at once
                        continue;
                    }
                    let upstream = upstream.clone();
                    let connection = tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(&upstream).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut.changed() => {}
                        }
                    });
                    live.lock().unwrap().push(connection);
                }
            })
        };
        Self {
            addr,
            up,
            cuts,
            live,
            task,
        }
    }

    /// Closes every live connection and refuses new ones; returns once every
    /// connection is closed, so a request sent afterwards cannot reach the database
    /// (without the wait, a statement already in flight could commit while its answer
    /// is lost, and the retry would rightly be a duplicate).
    async fn cut(&self) {
        self.signal_cut();
        let connections = std::mem::take(&mut *self.live.lock().unwrap());
        for connection in connections {
            let _ = connection.await;
        }
    }

    fn signal_cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.signal_cut();
        self.task.abort();
    }
}

/// A schema of its own, dropped at the end of the test (pass or fail).
struct Schema {
    url: String,
    name: String,
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // from a thread of its own: `drop` cannot await on the test's runtime
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(mut conn) = AsyncPgConnection::establish(&url).await {
                    let _ = conn
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

async fn credit(conn: &mut AsyncPgConnection, delivery: &Delivery) -> Result<(), HandlerError> {
    let json: serde_json::Value = delivery.parse()?;
    diesel::sql_query(
        "INSERT INTO ledger (account, balance) VALUES ($1, $2) \
         ON CONFLICT (account) DO UPDATE SET balance = ledger.balance + EXCLUDED.balance",
    )
    .bind::<Text, _>(json["account"].as_str().unwrap_or("unknown"))
    .bind::<BigInt, _>(json["amount"].as_i64().unwrap_or(0))
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Total {
    #[diesel(sql_type = BigInt)]
    total: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_is_5xx_and_unready_and_the_retry_is_stored_and_applied_once() {
    let Some(url) = pg_url().await else { return };
    let schema = Schema {
        url: url.clone(),
        name: format!("hb_axum_{:016x}", fastrand::u64(..)),
    };
    let mut admin = AsyncPgConnection::establish(&url).await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA \"{0}\"; CREATE TABLE \"{0}\".ledger \
             (account TEXT PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0)",
            schema.name
        ))
        .await
        .unwrap();

    let (head, upstream, tail) = split_url(&url);
    let proxy = Proxy::start(upstream.to_string()).await;
    let proxied = format!("{head}{}{tail}", proxy.addr);
    let options = PgOptions::new()
        .with_schema(schema.name.clone())
        .with_pool_timeout(Duration::from_secs(2))
        .with_retry(RetryPolicy {
            max_attempts: 3,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        });
    let store = PgStore::connect(&proxied, options).await.unwrap();
    store.migrate().await.unwrap();

    let router = Webhook::inbox(github(), store.clone())
        .into_router("/github")
        .merge(health_router(store.clone()));
    let server = serve(router).await;
    let ready = format!("{}/readyz", server.url);
    let client = HttpClient::new();
    let endpoint = format!("{}/github", server.url);
    let body = body("acct_1");
    let headers = signed("d-pg-down", &body);

    // a delivery before the outage, so the pool holds a live connection to cut
    let before = signed("d-pg-before", &body);
    assert_eq!(
        client.post(&endpoint, &before, body.clone()).await.status,
        200
    );

    assert_eq!(
        client.get(&ready).await.status,
        200,
        "ready before the outage"
    );
    proxy.cut().await;
    let unready = client.get(&ready).await;
    assert_eq!(
        (unready.status, unready.what()),
        (503, "store_unavailable"),
        "not ready while Postgres is unreachable: {unready:?}"
    );
    // the pooled connection dies under the first request and the next ones cannot
    // connect: each is a transient failure, so 503 and the sender retries
    for _ in 0..3 {
        let answer = client.post(&endpoint, &headers, body.clone()).await;
        assert_eq!(
            (answer.status, answer.what()),
            (503, "store_unavailable"),
            "{answer:?}"
        );
    }

    proxy.restore();
    assert_eq!(client.get(&ready).await.status, 200, "ready again after it");
    let retry = client.post(&endpoint, &headers, body.clone()).await;
    assert_eq!((retry.status, retry.what()), (200, "stored"), "{retry:?}");
    let again = client.post(&endpoint, &headers, body.clone()).await;
    assert_eq!((again.status, again.what()), (200, "duplicate"));

    let mut processed = 0;
    for _ in 0..100 {
        match store.work_one(&credit).await.unwrap() {
            Worked::Idle => break,
            Worked::Processed { .. } => processed += 1,
            Worked::Failed { .. } => panic!("the credit failed"),
        }
    }
    assert_eq!(
        processed, 2,
        "the delivery before the outage and the retried one"
    );
    let total = diesel::sql_query(format!(
        "SELECT COALESCE(SUM(balance), 0)::BIGINT AS total FROM \"{}\".ledger",
        schema.name
    ))
    .get_result::<Total>(&mut admin)
    .await
    .unwrap()
    .total;
    assert_eq!(total, 200, "each delivery applied exactly once");
}
