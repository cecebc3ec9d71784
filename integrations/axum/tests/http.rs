//! The edge over real HTTP: a server on a random loopback port, a SQLite inbox in a
//! temp file, signed deliveries from the providers' own signers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    HttpClient, TempDir, WriteLock, apply, body, drain, github, ledger_total, open, options, serve,
    signed,
};
use hookbox_axum::{Webhook, health_router};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{FixedClock, InboxAdmin, InboxFilter, Signer, VerifyOptions, run_worker};
use hookbox_github::GitHubSigner;
use hookbox_standard::{Standard, StandardSigner};

const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_sent_twice_is_stored_once_and_applied_once() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server = serve(Webhook::inbox(github(), store.clone()).into_router("/hooks/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/hooks/github", server.url);
    let body = body("acct_1");
    let headers = signed("d-twice", &body);

    let first = client.post(&url, &headers, body.clone()).await;
    assert_eq!((first.status, first.what()), (200, "stored"), "{first:?}");
    assert_eq!(first.json["ok"], true);
    let second = client.post(&url, &headers, body.clone()).await;
    assert_eq!((second.status, second.what()), (200, "duplicate"));
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed), (1, 0), "one inbox row");

    // the worker applies it once
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker_store = store.clone();
    let worker = tokio::spawn(async move {
        run_worker(&worker_store, apply, Duration::from_millis(10), async {
            let _ = stopped.await;
        })
        .await
    });
    for _ in 0..1000 {
        if store.stats().await.unwrap().processed == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // a third copy after processing is still a duplicate, and is not applied again
    let third = client.post(&url, &headers, body).await;
    assert_eq!((third.status, third.what()), (200, "duplicate"));
    stop.send(()).unwrap();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.processed, 1);
    assert_eq!(ledger_total(&store).await, 100);
    assert_eq!(store.stats().await.unwrap().pending, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_signature_is_401_and_nothing_is_stored() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server = serve(Webhook::inbox(github(), store.clone()).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);
    let body = body("acct_1");

    // the forger signs with a secret of their own
    let headers = GitHubSigner::new("not the secret")
        .unwrap()
        .sign("d-forged", 0, body.as_bytes())
        .to_header_map();
    let answer = client.post(&url, &headers, body.clone()).await;
    assert_eq!(
        (answer.status, answer.what()),
        (401, "signature_mismatch"),
        "{answer:?}"
    );
    assert_eq!(answer.json["ok"], false);

    // the right signature over other bytes is a forgery too
    let tampered = client
        .post(&url, &signed("d-forged", &body), body.replace("100", "900"))
        .await;
    assert_eq!(tampered.status, 401);

    let stats = store.stats().await.unwrap();
    assert_eq!((stats.pending, stats.processed, stats.dead), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_header_is_400_naming_the_header() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server = serve(Webhook::inbox(github(), store.clone()).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);
    let body = body("acct_1");

    for header in ["X-Hub-Signature-256", "X-GitHub-Delivery"] {
        let mut headers = signed("d-missing", &body);
        headers.remove(header);
        let answer = client.post(&url, &headers, body.clone()).await;
        assert_eq!((answer.status, answer.what()), (400, "missing_header"));
        assert!(answer.message().contains(header), "{answer:?}");
    }
    assert_eq!(store.stats().await.unwrap().pending, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_and_nothing_is_stored() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let limit = 1024;
    let provider = github().with_options(VerifyOptions::default().max_body_bytes(limit));
    let server = serve(Webhook::inbox(provider, store.clone()).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);

    // a validly signed body one byte over the limit, and one far over it
    for (id, len) in [("d-over-by-one", limit + 1), ("d-far-over", 256 * 1024)] {
        let big = format!(
            r#"{{"account":"acct_1","amount":100,"pad":"{}"}}"#,
            "x".repeat(len)
        );
        let big = &big[..len];
        let answer = client.post(&url, &signed(id, big), big.to_string()).await;
        assert_eq!(
            (answer.status, answer.what()),
            (413, "body_too_large"),
            "{answer:?}"
        );
        assert!(answer.message().contains("1024"), "{answer:?}");
    }
    assert_eq!(store.stats().await.unwrap().pending, 0);

    // exactly at the limit is accepted
    let body = format!(
        r#"{{"account":"acct_1","amount":100,"pad":"{}"}}"#,
        "x".repeat(limit)
    );
    let at_limit = format!("{}\"}}", &body[..limit - 2]);
    assert_eq!(at_limit.len(), limit);
    let answer = client
        .post(&url, &signed("d-at-limit", &at_limit), at_limit.clone())
        .await;
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_timestamp_is_401_and_the_clock_is_injectable() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let signer = StandardSigner::new(STANDARD_SECRET).unwrap();
    let client = HttpClient::new();
    let body = body("acct_1");

    // the system clock: signed an hour ago is outside the 300 s window
    let standard = Standard::new(STANDARD_SECRET).unwrap();
    let server = serve(Webhook::inbox(standard, store.clone()).into_router("/standard")).await;
    let url = format!("{}/standard", server.url);
    let hour_ago = OffsetDateTime::now_utc().unix_timestamp() - 3600;
    let headers = signer
        .sign("msg_stale", hour_ago, body.as_bytes())
        .to_header_map();
    let answer = client.post(&url, &headers, body.clone()).await;
    assert_eq!(
        (answer.status, answer.what()),
        (401, "timestamp_too_old"),
        "{answer:?}"
    );
    assert_eq!(store.stats().await.unwrap().pending, 0);

    // an injected clock decides `now`: the same kind of delivery, signed at a fixed
    // instant long ago, is inside the window of a clock stopped just after it
    let signed_at = 1_614_265_330;
    let clock = Arc::new(FixedClock::from_unix(signed_at + 10).unwrap());
    let standard = Standard::new(STANDARD_SECRET).unwrap();
    let fixed = serve(
        Webhook::inbox(standard, store.clone())
            .with_clock(clock)
            .into_router("/standard"),
    )
    .await;
    let headers = signer
        .sign("msg_fixed", signed_at, body.as_bytes())
        .to_header_map();
    let answer = client
        .post(&format!("{}/standard", fixed.url), &headers, body.clone())
        .await;
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_database_is_503_and_the_retry_is_stored_and_applied_once() {
    let dir = TempDir::new();
    // a short busy timeout, so the write gives up quickly while the lock is held
    let store = open(
        &dir.db(),
        options().with_busy_timeout(Duration::from_millis(100)),
    )
    .await;
    let server = serve(Webhook::inbox(github(), store.clone()).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);
    let body = body("acct_1");
    let headers = signed("d-down", &body);

    let lock = WriteLock::take(&dir.db());
    let answer = client.post(&url, &headers, body.clone()).await;
    assert_eq!(
        (answer.status, answer.what()),
        (503, "store_unavailable"),
        "{answer:?}"
    );
    assert!(
        !answer.message().contains("locked"),
        "internal errors stay in the log: {answer:?}"
    );
    assert_eq!(
        answer
            .headers
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1"),
        "a 503 tells the sender when to come back"
    );
    lock.release();
    assert_eq!(
        store.stats().await.unwrap().pending,
        0,
        "nothing was stored"
    );

    // the sender retries once the database is back
    let retry = client.post(&url, &headers, body.clone()).await;
    assert_eq!((retry.status, retry.what()), (200, "stored"), "{retry:?}");
    let again = client.post(&url, &headers, body).await;
    assert_eq!(again.what(), "duplicate");
    assert_eq!(drain(&store).await, (1, 0, 0));
    assert_eq!(ledger_total(&store).await, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_is_acknowledged_then_dead_lettered_while_others_flow() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server = serve(Webhook::inbox(github(), store.clone()).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);

    let poison = r#"{"account":"acct_1","amount":100,"kind":"poison"}"#;
    let answer = client.post(&url, &signed("d-poison", poison), poison).await;
    assert_eq!(
        (answer.status, answer.what()),
        (200, "stored"),
        "the sender did nothing wrong"
    );
    for i in 0..3 {
        let body = body("acct_1");
        let answer = client
            .post(&url, &signed(&format!("d-after-{i}"), &body), body.clone())
            .await;
        assert_eq!(answer.status, 200);
    }

    // three failures (the test policy's limit), one dead letter, the rest applied
    assert_eq!(drain(&store).await, (3, 3, 1));
    assert_eq!(ledger_total(&store).await, 300);
    let letters = store.list(InboxFilter::dead(), 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].key.delivery_id(), "d-poison");
    assert!(
        letters[0]
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("poison")
    );

    // the events after it keep flowing
    let body = body("acct_2");
    let answer = client
        .post(&url, &signed("d-later", &body), body.clone())
        .await;
    assert_eq!(answer.status, 200);
    assert_eq!(drain(&store).await, (1, 0, 0));
    assert_eq!(ledger_total(&store).await, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_applies_concurrent_copies_once() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server =
        serve(Webhook::inline(github(), store.clone(), apply).into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);
    let body = body("acct_1");
    let headers = signed("d-inline", &body);

    let copies: Vec<_> = (0..8)
        .map(|_| {
            let (client, url, headers, body) =
                (client.clone(), url.clone(), headers.clone(), body.clone());
            tokio::spawn(async move { client.post(&url, &headers, body).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for copy in copies {
        let answer = copy.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        outcomes.push(answer.what().to_string());
    }
    outcomes.sort();
    assert_eq!(outcomes[0], "applied");
    assert!(
        outcomes[1..].iter().all(|o| o == "duplicate"),
        "{outcomes:?}"
    );
    assert_eq!(ledger_total(&store).await, 100);
    assert_eq!(
        store.stats().await.unwrap().pending,
        0,
        "inline mode keeps no inbox rows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_answers_500_for_a_failing_side_effect_and_the_retry_applies_it() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    // fails on its first call (a downstream refusal), succeeds after
    let webhook = Webhook::inline(github(), store.clone(), async move |conn, delivery| {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        apply(conn, delivery).await?;
        if first {
            // after the write: the rollback must undo it
            return Err("downstream refused: token=abc123".into());
        }
        Ok(())
    });
    let server = serve(webhook.into_router("/github")).await;
    let client = HttpClient::new();
    let url = format!("{}/github", server.url);
    let body = body("acct_1");
    let headers = signed("d-fails-once", &body);

    let answer = client.post(&url, &headers, body.clone()).await;
    assert_eq!(
        (answer.status, answer.what()),
        (500, "side_effect_failed"),
        "{answer:?}"
    );
    assert!(!answer.message().contains("abc123"), "{answer:?}");
    assert_eq!(ledger_total(&store).await, 0, "its write rolled back");

    let retry = client.post(&url, &headers, body.clone()).await;
    assert_eq!((retry.status, retry.what()), (200, "applied"), "{retry:?}");
    let again = client.post(&url, &headers, body).await;
    assert_eq!((again.status, again.what()), (200, "duplicate"));
    assert_eq!(ledger_total(&store).await, 100);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the duplicate did not run it"
    );
}

/// One handler function, two modes: the worker applies what the inbox endpoint stored,
/// and an inline endpoint applies in the request, with the very same `apply`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_handler_serves_the_inline_endpoint_and_the_worker() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let handler = apply;
    let app = Webhook::inbox(github(), store.clone())
        .into_router("/inbox")
        .merge(Webhook::inline(github(), store.clone(), handler).into_router("/inline"));
    let server = serve(app).await;
    let client = HttpClient::new();

    let stored_body = body("acct_inbox");
    let stored = client
        .post(
            &format!("{}/inbox", server.url),
            &signed("d-inbox", &stored_body),
            stored_body,
        )
        .await;
    assert_eq!(
        (stored.status, stored.what()),
        (200, "stored"),
        "{stored:?}"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker_store = store.clone();
    let worker = tokio::spawn(async move {
        run_worker(&worker_store, handler, Duration::from_millis(10), async {
            let _ = stopped.await;
        })
        .await
    });

    let inline_body = body("acct_inline");
    let inline = client
        .post(
            &format!("{}/inline", server.url),
            &signed("d-inline", &inline_body),
            inline_body,
        )
        .await;
    assert_eq!(
        (inline.status, inline.what()),
        (200, "applied"),
        "{inline:?}"
    );
    for _ in 0..1000 {
        if store.stats().await.unwrap().processed == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    let report = worker.await.unwrap().unwrap();
    assert_eq!((report.processed, report.failed), (1, 0), "{report:?}");
    assert_eq!(
        ledger_total(&store).await,
        200,
        "each delivery credited once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_post_is_routed() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let server = serve(Webhook::inbox(github(), store).into_router("/github")).await;
    let url: hookbox_core::http::Uri = format!("{}/github", server.url).parse().unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<hookbox_core::bytes::Bytes>>();
    let response = client.get(url).await.unwrap();
    assert_eq!(response.status(), 405);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_flips_with_the_sqlite_file_and_liveness_stays_up() {
    let dir = TempDir::new();
    let store = open(&dir.db(), options()).await;
    let router = Webhook::inbox(github(), store.clone())
        .into_router("/github")
        .merge(health_router(store.clone()));
    let server = serve(router).await;
    let client = HttpClient::new();
    let ready = format!("{}/readyz", server.url);
    let live = format!("{}/livez", server.url);

    let answer = client.get(&ready).await;
    assert_eq!(
        (answer.status, &answer.json["ready"]),
        (200, &serde_json::json!(true))
    );

    // the file moved away (a volume unmounted, a cleanup gone wrong): open
    // connections still read the old inode, so only the path tells
    let moved = dir.path().join("moved.db");
    std::fs::rename(dir.db(), &moved).unwrap();
    let answer = client.get(&ready).await;
    assert_eq!(
        (answer.status, answer.what()),
        (503, "store_unavailable"),
        "{answer:?}"
    );
    assert_eq!(
        client.get(&live).await.status,
        200,
        "liveness does not depend on the store"
    );

    std::fs::rename(&moved, dir.db()).unwrap();
    assert_eq!(client.get(&ready).await.status, 200);
}
