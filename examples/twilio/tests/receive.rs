//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): a status callback signed for the
//! public URL is stored once although it reaches the bound address, a retry is
//! answered 200 and stored nothing, a tampered or forged copy is refused.

use hookbox_core::Signer as _;
use hookbox_testkit::{Backend, Sandbox, unique};
use hookbox_twilio::TwilioSigner;

const BIN: &str = env!("CARGO_BIN_EXE_example-twilio");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/twilio";
/// The example's documented demo token.
const TOKEN: &str = "hookbox_demo_auth_token";
/// The URL Twilio would call: a proxy in front of the example, which it never sees.
const PUBLIC_URL: &str = "https://public.example/webhooks/twilio";

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

/// A message status callback as Twilio posts it.
fn status_callback(sid: &str, status: &str) -> String {
    format!(
        "SmsSid={sid}&SmsStatus={status}&MessageStatus={status}&To=%2B14155550100\
         &MessageSid={sid}&AccountSid=AC0123456789abcdef0123456789abcdef\
         &From=%2B14155552671&ApiVersion=2010-04-01"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_signed_for_the_public_url_is_applied_once() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start_with(BIN, &[], &[("PUBLIC_URL", PUBLIC_URL)]);
    let signer = TwilioSigner::new(TOKEN, PUBLIC_URL).unwrap();
    let sid = unique("SM");
    let id = unique("idem");
    let body = status_callback(&sid, "delivered");

    let first = example.send(PATH, &signer, &id, body.as_bytes()).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &signer, &id, body.as_bytes()).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );

    // the right token, the wrong URL: signed for the address the request reached
    let bound = TwilioSigner::new(TOKEN, format!("{}{PATH}", example.url())).unwrap();
    let misdirected = example
        .send(PATH, &bound, &unique("idem"), body.as_bytes())
        .await;
    assert_eq!(
        (misdirected.status, misdirected.outcome().as_str()),
        (401, "signature_mismatch"),
        "{misdirected:?}"
    );

    // a parameter changed after signing
    let headers = signer.sign(&unique("idem"), 0, body.as_bytes());
    let tampered = body.replace("MessageStatus=delivered", "MessageStatus=failed");
    let tampered = example.post(PATH, &headers, tampered.as_bytes()).await;
    assert_eq!(
        (tampered.status, tampered.outcome().as_str()),
        (401, "signature_mismatch"),
        "{tampered:?}"
    );

    let forger = TwilioSigner::new("not_the_auth_token", PUBLIC_URL).unwrap();
    let forged = example
        .send(PATH, &forger, &unique("idem"), body.as_bytes())
        .await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(
        stats.processed, 1,
        "one row: the duplicate and the refused copies were not stored"
    );
    let lines = format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}' \
         AND sid = '{sid}' AND status = 'delivered'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1, "applied exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_public_url_the_bound_address_is_signed() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let signer = TwilioSigner::new(TOKEN, format!("{}{PATH}", example.url())).unwrap();
    let (sid, id) = (unique("SM"), unique("idem"));
    let body = status_callback(&sid, "sent");
    let answer = example.send(PATH, &signer, &id, body.as_bytes()).await;
    assert_eq!(
        (answer.status, answer.outcome().as_str()),
        (200, "stored"),
        "{answer:?}"
    );
    assert!(
        example.log().contains("PUBLIC_URL is unset"),
        "the warning is logged:\n{}",
        example.log()
    );
    sandbox.wait_processed(1).await;
    let lines = format!(
        "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id = '{id}' AND status = 'sent'"
    );
    assert_eq!(sandbox.query_i64(&lines).await, 1);
}
