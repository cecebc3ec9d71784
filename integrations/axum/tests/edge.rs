//! `hookbox_axum::serve` under slow and excess clients, over real sockets: a server
//! on a random loopback port, raw TCP clients that trickle their bytes, a SQLite
//! inbox in a temp file.
//!
//! The timeouts are shortened to 500 ms; every bound a test waits for is ten times
//! that or more, so a loaded machine only makes the tests slower, never wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    HttpClient, TempDir, body, github, open, options, request_head, serve_edge, signed, trickle,
};
use hookbox_axum::axum::extract::Request;
use hookbox_axum::axum::middleware::{self, Next};
use hookbox_axum::{EdgeLimits, Webhook, axum, health_router};
use hookbox_core::InboxAdmin;
use tokio::sync::watch;

const SHORT: Duration = Duration::from_millis(500);
/// How often a slow client sends its next byte.
const BYTE_EVERY: Duration = Duration::from_millis(200);
/// How long a test waits for what should happen about `SHORT` in.
const GENEROUS: Duration = Duration::from_secs(5);

/// Holds every request at the door until opened, counting those that reached it: a
/// request counted here holds one of the edge's in-flight permits.
#[derive(Clone)]
struct Gate {
    entered: Arc<AtomicUsize>,
    open: Arc<watch::Sender<bool>>,
}

impl Gate {
    fn new() -> Self {
        Self {
            entered: Arc::new(AtomicUsize::new(0)),
            open: Arc::new(watch::channel(false).0),
        }
    }

    /// `router` behind the gate.
    fn around(&self, router: axum::Router) -> axum::Router {
        let gate = self.clone();
        router.layer(middleware::from_fn(move |request: Request, next: Next| {
            let gate = gate.clone();
            async move {
                gate.entered.fetch_add(1, Ordering::SeqCst);
                let mut open = gate.open.subscribe();
                let _ = open.wait_for(|&open| open).await;
                next.run(request).await
            }
        }))
    }

    /// Waits (up to `GENEROUS` twice over) until `n` requests are held.
    async fn wait_for(&self, n: usize) {
        let waited = tokio::time::timeout(GENEROUS * 2, async {
            while self.entered.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "only {} of {n} requests reached the handler",
            self.entered.load(Ordering::SeqCst)
        );
    }

    fn open(&self) {
        self.open.send_replace(true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_headers_one_byte_every_200ms_is_disconnected_after_the_header_timeout() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let app = Webhook::inbox(github(), store.clone()).into_router("/hooks/github");
    let edge = serve_edge(app, EdgeLimits::default().header_read_timeout(SHORT)).await;

    let head = request_head("/hooks/github", &signed("d-slow-head", "{}"), 2);
    let seen = trickle(edge.addr, b"", &head, BYTE_EVERY, GENEROUS * 2).await;

    let closed = seen
        .closed_after
        .unwrap_or_else(|| panic!("still open after {:?}: {seen:?}", GENEROUS * 2));
    assert!(
        closed >= SHORT - Duration::from_millis(50),
        "closed early: {closed:?}"
    );
    assert!(closed <= GENEROUS, "closed only after {closed:?}");
    assert!(
        seen.slow_sent < head.len(),
        "the headers never all went out"
    );
    assert!(
        seen.received.is_empty(),
        "no answer, only a close: {seen:?}"
    );
    assert_eq!(store.stats().await.unwrap().pending, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_180_slow_header_clients_are_cut_deliveries_are_still_stored() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let app = Webhook::inbox(github(), store.clone()).into_router("/hooks/github");
    let edge = serve_edge(app, EdgeLimits::default().header_read_timeout(SHORT)).await;

    // the attack from the report: 180 connections, a header byte every 200 ms
    let head = request_head("/hooks/github", &signed("d-attack", "{}"), 2);
    let attackers: Vec<_> = (0..180)
        .map(|_| {
            let head = head.clone();
            let addr = edge.addr;
            tokio::spawn(async move { trickle(addr, b"", &head, BYTE_EVERY, GENEROUS * 2).await })
        })
        .collect();

    // a provider's delivery goes through meanwhile
    let client = HttpClient::new();
    let url = format!("{}/hooks/github", edge.url);
    let body = body("acct_1");
    let answer = client.post(&url, &signed("d-real", &body), body).await;
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "{answer:?}"
    );

    for attacker in attackers {
        let seen = attacker.await.unwrap();
        let closed = seen
            .closed_after
            .unwrap_or_else(|| panic!("still open: {seen:?}"));
        assert!(closed <= GENEROUS * 2, "closed only after {closed:?}");
    }
    assert_eq!(store.stats().await.unwrap().pending, 1, "only the real one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let edge = serve_edge(
        health_router(store),
        EdgeLimits::default().header_read_timeout(SHORT),
    )
    .await;

    // one whole request, answered; then the connection sits idle
    let request = b"GET /livez HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
    let seen = trickle(edge.addr, request, b"", BYTE_EVERY, GENEROUS * 2).await;

    assert_eq!(seen.status(), Some(200), "{seen:?}");
    let closed = seen
        .closed_after
        .unwrap_or_else(|| panic!("still open: {seen:?}"));
    assert!(
        closed >= SHORT - Duration::from_millis(50),
        "closed early: {closed:?}"
    );
    assert!(closed <= GENEROUS, "closed only after {closed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_body_is_cut_with_408_and_nothing_is_stored() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let app = Webhook::inbox(github(), store.clone()).into_router("/hooks/github");
    let edge = serve_edge(app, EdgeLimits::default().body_read_timeout(SHORT)).await;

    // whole signed headers at once, then the body a byte at a time
    let body = body("acct_1");
    let headers = signed("d-slow-body", &body);
    let head = request_head("/hooks/github", &headers, body.len());
    let seen = trickle(edge.addr, &head, body.as_bytes(), BYTE_EVERY, GENEROUS * 2).await;

    assert_eq!(seen.status(), Some(408), "{seen:?}");
    assert_eq!(seen.json()["ok"], false);
    assert_eq!(seen.json()["error"], "body_timeout");
    assert_eq!(seen.header("connection").as_deref(), Some("close"));
    let closed = seen
        .closed_after
        .unwrap_or_else(|| panic!("still open: {seen:?}"));
    assert!(closed <= GENEROUS, "closed only after {closed:?}");
    assert!(seen.slow_sent < body.len(), "the body never all went out");
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed), (0, 0), "nothing stored");

    // the sender's retry, sent at a normal pace, is stored
    let client = HttpClient::new();
    let answer = client
        .post(&format!("{}/hooks/github", edge.url), &headers, body)
        .await;
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "{answer:?}"
    );
    assert_eq!(store.stats().await.unwrap().pending, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_in_flight_cap_a_request_gets_503_with_retry_after_and_none_in_flight_is_lost() {
    const CAP: usize = 3;
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let gate = Gate::new();
    let app = gate.around(Webhook::inbox(github(), store.clone()).into_router("/hooks/github"));
    let edge = serve_edge(app, EdgeLimits::default().max_in_flight(CAP)).await;
    let client = HttpClient::new();
    let url = format!("{}/hooks/github", edge.url);

    // CAP deliveries held in flight
    let held: Vec<_> = (0..CAP)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let body = body(&format!("acct_{i}"));
                client
                    .post(&url, &signed(&format!("d-held-{i}"), &body), body)
                    .await
            })
        })
        .collect();
    gate.wait_for(CAP).await;

    // one more: answered at once, not queued behind the gate
    let body_over = body("acct_over");
    let headers_over = signed("d-over", &body_over);
    let over = tokio::time::timeout(
        GENEROUS,
        client.post(&url, &headers_over, body_over.clone()),
    )
    .await
    .expect("the request past the cap waited instead of being answered");
    assert_eq!((over.status, over.what()), (503, "overloaded"), "{over:?}");
    assert_eq!(over.json["ok"], false);
    assert_eq!(over.headers["retry-after"], "1");
    assert_eq!(over.headers["content-type"], "application/json");
    assert_eq!(
        gate.entered.load(Ordering::SeqCst),
        CAP,
        "it never reached the route"
    );

    // released, every one held completes and is stored
    gate.open();
    for answer in held {
        let answer = tokio::time::timeout(GENEROUS, answer)
            .await
            .expect("a held request never completed")
            .unwrap();
        assert_eq!(
            (answer.status, answer.what()),
            (200, "stored"),
            "{answer:?}"
        );
    }
    assert_eq!(store.stats().await.unwrap().pending, CAP as u64);

    // the refused one's retry goes through once there is room
    let retry = client.post(&url, &headers_over, body_over).await;
    assert_eq!((retry.status, retry.what()), (200, "stored"), "{retry:?}");
    assert_eq!(store.stats().await.unwrap().pending, CAP as u64 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_refuses_new_connections_and_finishes_the_request_in_flight() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let gate = Gate::new();
    let app = gate.around(Webhook::inbox(github(), store.clone()).into_router("/hooks/github"));
    let mut edge = serve_edge(app, EdgeLimits::default()).await;
    let client = HttpClient::new();
    let url = format!("{}/hooks/github", edge.url);

    let held = tokio::spawn({
        let client = client.clone();
        async move {
            let body = body("acct_1");
            client.post(&url, &signed("d-shutdown", &body), body).await
        }
    });
    gate.wait_for(1).await;

    edge.stop();
    // the listener closes: a new connection is refused
    let refused = tokio::time::timeout(GENEROUS, async {
        while tokio::net::TcpStream::connect(edge.addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(refused.is_ok(), "still accepting after the shutdown signal");
    assert!(!edge.is_finished(), "returned with a request in flight");

    // the request in flight is answered and stored, then serve returns
    gate.open();
    let answer = tokio::time::timeout(GENEROUS, held)
        .await
        .expect("the request in flight never completed")
        .unwrap();
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "{answer:?}"
    );
    assert!(
        edge.finished_within(GENEROUS).await,
        "serve did not return after its last request"
    );
    assert_eq!(store.stats().await.unwrap().pending, 1);
}
