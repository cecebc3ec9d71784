//! Handshakes over real HTTP: a provider that says a verified request is a handshake
//! gets its reply at once, in both modes; nothing is stored and no handler runs. A
//! handshake is verified like an event: a forged one is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{HttpClient, TempDir, apply, body, github, open, options, serve, signed};
use hookbox_axum::Webhook;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    HandshakeReply, InboxAdmin, Provider, Retention, Verified, VerifiedDelivery, VerifyError,
    VerifyOptions,
};
use hookbox_github::GitHub;

/// GitHub's scheme, where a delivery of the `ping` event is a handshake answered with
/// its body as `text/plain`: the shape of Twitch's challenge, on a signer the tests
/// already have.
struct PingIsHandshake(GitHub);

impl Provider for PingIsHandshake {
    fn name(&self) -> &'static str {
        "ping-handshake"
    }

    fn min_retention(&self) -> Retention {
        self.0.min_retention()
    }

    fn options(&self) -> &VerifyOptions {
        self.0.options()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        match self.verify_request(headers, body, now)? {
            Verified::Event(delivery) => Ok(delivery),
            Verified::Handshake(reply) => Err(VerifyError::Handshake {
                handshake: reply.kind().to_string(),
            }),
        }
    }

    fn verify_request(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<Verified, VerifyError> {
        let delivery = self.0.verify(headers, body, now)?;
        if headers.get("x-github-event").is_some_and(|v| v == "ping") {
            return Ok(Verified::Handshake(HandshakeReply::text(
                "ping",
                delivery.body().clone(),
            )));
        }
        Ok(Verified::Event(delivery))
    }
}

fn ping(id: &str, challenge: &str) -> HeaderMap {
    let mut headers = signed(id, challenge);
    headers.insert("x-github-event", "ping".parse().unwrap());
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_is_answered_at_once_and_nothing_is_stored_in_either_mode() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let handled = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&handled);
    let router = Webhook::inbox(PingIsHandshake(github()), store.clone())
        .into_router("/inbox")
        .merge(
            Webhook::inline(
                PingIsHandshake(github()),
                store.clone(),
                async move |conn: &mut hookbox_sqlite::Conn, delivery: &hookbox_core::Delivery| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    apply(conn, delivery).await
                },
            )
            .into_router("/inline"),
        );
    let server = serve(router).await;
    let client = HttpClient::new();

    for path in ["/inbox", "/inline"] {
        let challenge = format!("challenge-for-{path}");
        let url = format!("{}{path}", server.url);
        for _ in 0..2 {
            let (status, headers, reply) = client
                .post_raw(&url, &ping("d-ping", &challenge), challenge.clone())
                .await;
            assert_eq!(status, 200, "{path}: {reply:?}");
            assert_eq!(headers["content-type"], "text/plain", "{path}");
            assert_eq!(
                reply,
                challenge.as_bytes(),
                "{path}: the challenge, as sent"
            );
        }
    }
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.processed, stats.dead),
        (0, 0, 0),
        "no inbox row"
    );
    assert_eq!(handled.load(Ordering::SeqCst), 0, "no handler ran");

    // an event through the same endpoints is stored and applied as usual
    let event = body("acct_1");
    let stored = client
        .post(
            &format!("{}/inbox", server.url),
            &signed("d-1", &event),
            event.clone(),
        )
        .await;
    assert_eq!((stored.status, stored.what()), (200, "stored"));
    let applied = client
        .post(
            &format!("{}/inline", server.url),
            &signed("d-2", &event),
            event,
        )
        .await;
    assert_eq!((applied.status, applied.what()), (200, "applied"));
    assert_eq!(handled.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_handshake_is_refused_like_an_event() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server =
        serve(Webhook::inbox(PingIsHandshake(github()), store.clone()).into_router("/h")).await;
    let mut headers = ping("d-ping", "signed");
    let answer = HttpClient::new()
        .post(&format!("{}/h", server.url), &headers, "tampered")
        .await;
    assert_eq!((answer.status, answer.what()), (401, "signature_mismatch"));
    headers.remove("x-hub-signature-256");
    let answer = HttpClient::new()
        .post(&format!("{}/h", server.url), &headers, "signed")
        .await;
    assert_eq!((answer.status, answer.what()), (400, "missing_header"));
    assert_eq!(store.stats().await.unwrap().pending, 0);
}
