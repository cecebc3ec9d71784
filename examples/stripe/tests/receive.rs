//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): a signed delivery sent twice is
//! stored once and credited once; a forged copy is refused; SIGTERM stops it cleanly;
//! a SQLite build refuses a Postgres URL.

use hookbox_stripe::StripeSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-stripe");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/stripe";
/// The example's documented demo secret.
const SECRET: &str = "whsec_hookbox_stripe_demo";

fn payment(event: &str, customer: &str, amount: i64) -> Vec<u8> {
    format!(
        r#"{{"id":"{event}","object":"event","type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_1","object":"payment_intent","amount":{amount},"currency":"usd","customer":"{customer}"}}}}}}"#
    )
    .into_bytes()
}

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_sent_twice_is_credited_once_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_alice", 2000);

    // Stripe takes the event id from the body; the id argument is unused
    let first = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    let forger = StripeSigner::new("whsec_not_the_endpoint_secret").unwrap();
    let forged = example
        .send(
            PATH,
            &forger,
            "",
            &payment(&unique("evt"), "cus_alice", 1_000_000),
        )
        .await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(
        stats.processed, 1,
        "one row: the duplicate and the forgery were not stored"
    );
    let balance = sandbox
        .query_i64("SELECT balance AS n FROM balances WHERE account = 'cus_alice'")
        .await;
    assert_eq!(balance, 2000, "credited exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_and_exits_with_status_0() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &[]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_carol", 700);
    let stored = example.send(PATH, &stripe, "", &body).await;
    assert_eq!(stored.outcome(), "stored", "{stored:?}");
    sandbox.wait_processed(1).await;

    let status = example.terminate().await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        example.log()
    );
    assert!(
        example.log().contains("stopped"),
        "the worker returned its report:\n{}",
        example.log()
    );
}

#[cfg(not(any(feature = "postgres", feature = "mysql")))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_build_refuses_a_postgres_url_and_says_which_build_to_use() {
    let sandbox = Sandbox::new();
    let mut example = sandbox.spawn_with(
        BIN,
        &[],
        &[("HOOKBOX_STORE", "postgres://postgres@127.0.0.1:5432/test")],
    );
    let status = example.exited().await;
    assert!(!status.success(), "{status}\n{}", example.log());
    assert!(
        example.log().contains("--features postgres"),
        "the error names the build that speaks Postgres:\n{}",
        example.log()
    );
}

// the receipts go to an HTTP endpoint: a build whose relay has the `http` sink
#[cfg(feature = "http")]
/// A one-route HTTP sink on a raw socket: answers 200 to every request and sends
/// each request's head (the request line and headers, lower-cased) and body.
async fn receipt_sink() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!(
        "http://{}/receipts",
        listener.local_addr().expect("its address")
    );
    let (send, receive) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let send = send.clone();
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(read) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    bytes.extend_from_slice(&chunk[..read]);
                    let text = String::from_utf8_lossy(&bytes).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let head = head.to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length: "))
                        .and_then(|n| n.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() < length {
                        continue;
                    }
                    let _ = send.send((head, body.to_string()));
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (url, receive)
}

// the receipts go to an HTTP endpoint: a build whose relay has the `http` sink
#[cfg(feature = "http")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_emails_one_receipt_through_the_outbox_with_an_idempotency_key() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let (sink, mut requests) = receipt_sink().await;
    let example = sandbox.start_with(BIN, &[], &[("RECEIPT_SINK_URL", &sink)]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_dora", 4200);
    for _ in 0..2 {
        let answer = example.send(PATH, &stripe, "", &body).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    sandbox.wait_processed(1).await;

    let (head, payload) = tokio::time::timeout(std::time::Duration::from_secs(20), requests.recv())
        .await
        .expect("the relay posted the receipt")
        .unwrap();
    assert!(head.starts_with("post /receipts "), "{head}");
    let key = head
        .lines()
        .find_map(|line| line.strip_prefix("idempotency-key: "))
        .expect("an Idempotency-Key header");
    assert_eq!(key.len(), 32, "{key}");
    assert!(payload.contains(r#""customer":"cus_dora""#), "{payload}");
    assert!(payload.contains(r#""amount":4200"#), "{payload}");

    // the resent payment staged nothing: one receipt, sent once
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert!(requests.try_recv().is_err(), "a second receipt was sent");
    let sent = sandbox
        .query_i64("SELECT COUNT(*) AS n FROM hookbox_outbox WHERE sent_at IS NOT NULL")
        .await;
    assert_eq!(sent, 1);
}

// the receipts go to an HTTP endpoint: a build whose relay has the `http` sink
#[cfg(feature = "http")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sink_url_receipts_stay_pending_and_a_relay_refuses_to_start() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    // split mode: the receiver, and a worker that does not relay
    let receiver = sandbox.start(BIN, &["serve", "--no-worker"]);
    let worker = sandbox.spawn(BIN, &["worker", "--no-relay"]);
    assert_eq!(worker.next_line(), "worker ready");
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = payment(&unique("evt"), "cus_erin", 900);
    assert_eq!(receiver.send(PATH, &stripe, "", &body).await.status, 200);
    sandbox.wait_processed(1).await;
    let count = |sql: &'static str| sandbox.query_i64(sql);
    assert_eq!(
        count("SELECT COUNT(*) AS n FROM hookbox_outbox WHERE sent_at IS NULL").await,
        1,
        "the receipt is staged and waits"
    );

    // a relay or a relaying worker without RECEIPT_SINK_URL stops at once and says why
    for mode in [&["relay"][..], &["worker"][..]] {
        let mut refused = sandbox.spawn(BIN, mode);
        let status = refused.exited().await;
        assert_eq!(status.code(), Some(2), "{mode:?}\n{}", refused.log());
        assert!(
            refused.log().contains("RECEIPT_SINK_URL is not set"),
            "{}",
            refused.log()
        );
    }
    assert_eq!(
        count("SELECT COUNT(*) AS n FROM hookbox_outbox WHERE sent_at IS NOT NULL").await,
        0,
        "nothing was marked sent"
    );

    // a relay of its own with a sink sends it, once
    let (sink, mut requests) = receipt_sink().await;
    let relay = sandbox.spawn_with(
        BIN,
        &["relay"],
        &[("RECEIPT_SINK_URL", &sink), ("RELAY_LEASE_SECS", "5")],
    );
    assert_eq!(relay.next_line(), "relay ready");
    let (_, payload) = tokio::time::timeout(std::time::Duration::from_secs(20), requests.recv())
        .await
        .expect("the relay posted the receipt")
        .unwrap();
    assert!(payload.contains(r#""customer":"cus_erin""#), "{payload}");
    for _ in 0..100 {
        if count("SELECT COUNT(*) AS n FROM hookbox_outbox WHERE sent_at IS NOT NULL").await == 1 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the receipt was not marked sent\n{}", relay.log());
}

/// A build whose relay lacks the `http` sink (a `hookbox new --outbox nats` project)
/// refuses an `http://` `RECEIPT_SINK_URL` at start, naming the sinks it has.
#[cfg(not(feature = "http"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_without_the_http_sink_refuses_an_http_url() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut relay = sandbox.spawn_with(
        BIN,
        &["relay"],
        &[("RECEIPT_SINK_URL", "http://127.0.0.1:9/receipts")],
    );
    let status = relay.exited().await;
    assert_eq!(status.code(), Some(1), "{status}");
    assert!(
        relay.log().contains("no sink for `http://` in this build"),
        "{}",
        relay.log()
    );
}
