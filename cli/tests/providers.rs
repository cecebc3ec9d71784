//! `hookbox send`, `sign` and `verify` for the providers that sign the URL they call
//! (Twilio, Square), send a token (GitLab), keep their time in the body (Linear), and
//! for a provider described by a scheme file.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use hookbox_axum::Webhook;
use hookbox_core::{InboxAdmin as _, Provider};
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use serde_json::Value;

mod common;

use common::{TempDir, json_lines};

/// The URL the provider was told to call: not where the receiver listens.
const PUBLIC_URL: &str = "https://hooks.example.com/webhooks/inbound";

/// Starts an inbox receiver for `provider` on a random port; returns the URL it
/// listens on and its store.
async fn receiver(dir: &Path, provider: impl Provider + 'static) -> (String, SqliteStore) {
    std::fs::create_dir_all(dir).unwrap();
    let store = SqliteStore::open(dir.join("hookbox.db"), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let app = Webhook::inbox(provider, store.clone()).into_router("/behind/the/proxy");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { hookbox_axum::axum::serve(listener, app).await });
    (format!("http://{addr}/behind/the/proxy"), store)
}

/// Runs `hookbox <args>` off the runtime's threads; returns the exit code and the
/// JSON lines it printed.
async fn hookbox(args: Vec<String>) -> (i32, Vec<Value>) {
    tokio::task::spawn_blocking(move || {
        json_lines(
            Command::new(env!("CARGO_BIN_EXE_hookbox"))
                .args(&args)
                .output()
                .unwrap(),
        )
    })
    .await
    .unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(ToString::to_string).collect()
}

/// The outcomes of `hookbox send`'s answers, each of which must be a 200.
fn outcomes(answers: &[Value]) -> Vec<String> {
    answers
        .iter()
        .map(|answer| {
            assert_eq!(answer["status"], 200, "{answer}");
            let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
            body["outcome"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twilio_signed_for_the_public_url_is_stored_once_behind_another_address() {
    let tmp = TempDir::new("twilio-send");
    let dir = &tmp.0;
    let form = dir.join("status.form");
    std::fs::write(
        &form,
        "MessageSid=SM1f0e8ae6ade43cb3c0ce4525424e404f&MessageStatus=delivered&To=%2B15558675310",
    )
    .unwrap();
    let json = dir.join("event.json");
    std::fs::write(&json, r#"{"sid":"EV1","status":"delivered"}"#).unwrap();
    let twilio = hookbox_twilio::Twilio::new("twilio-auth-token", PUBLIC_URL).unwrap();
    let (url, store) = receiver(dir, twilio).await;
    let send = |body: &Path, id: &str, extra: &[&str]| {
        let mut args = strings(&[
            "send",
            "--provider",
            "twilio",
            "--secret",
            "twilio-auth-token",
            "--url",
            &url,
            "--body-file",
            body.to_str().unwrap(),
            "--id",
            id,
        ]);
        args.extend(strings(extra));
        hookbox(args)
    };

    // three concurrent copies of one form delivery: stored once
    let (code, answers) = send(
        &form,
        "idem-form-1",
        &["--public-url", PUBLIC_URL, "--copies", "3", "--concurrent"],
    )
    .await;
    assert_eq!(code, 0, "{answers:?}");
    let mut seen = outcomes(&answers);
    seen.sort();
    assert_eq!(seen, ["duplicate", "duplicate", "stored"]);

    // a JSON body: the request carries bodySHA256, which the signature covers
    let (code, answers) = send(&json, "idem-json-1", &["--public-url", PUBLIC_URL]).await;
    assert_eq!(code, 0, "{answers:?}");
    assert_eq!(outcomes(&answers), ["stored"]);

    // signed for the address it reached instead of the public URL: refused
    let (code, answers) = send(&form, "idem-form-2", &[]).await;
    assert_eq!(code, 1, "{answers:?}");
    assert_eq!(answers[0]["status"], 401);

    assert_eq!(store.stats().await.unwrap().pending, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn square_and_linear_copies_are_stored_once() {
    let tmp = TempDir::new("square-linear-send");
    let dir = &tmp.0;
    let square_body = dir.join("square.json");
    std::fs::write(
        &square_body,
        r#"{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","data":{}}"#,
    )
    .unwrap();
    let square = hookbox_square::Square::new("square-signature-key", PUBLIC_URL).unwrap();
    let (url, square_store) = receiver(&dir.join("square"), square).await;
    let (code, answers) = hookbox(strings(&[
        "send",
        "--provider",
        "square",
        "--secret",
        "square-signature-key",
        "--public-url",
        PUBLIC_URL,
        "--url",
        &url,
        "--body-file",
        square_body.to_str().unwrap(),
        "--copies",
        "2",
    ]))
    .await;
    assert_eq!(code, 0, "{answers:?}");
    assert_eq!(outcomes(&answers), ["stored", "duplicate"]);
    assert_eq!(square_store.stats().await.unwrap().pending, 1);

    // Linear's sample carries an old webhookTimestamp: `send` sets it to now, so the
    // 60 s window passes
    let linear_body = dir.join("linear.json");
    std::fs::write(
        &linear_body,
        r#"{"action":"create","type":"Issue","data":{"id":"2174add1"},"webhookTimestamp":1676056940508}"#,
    )
    .unwrap();
    let linear = hookbox_linear::Linear::new("lin_wh_secret").unwrap();
    let (url, linear_store) = receiver(&dir.join("linear"), linear).await;
    let (code, answers) = hookbox(strings(&[
        "send",
        "--provider",
        "linear",
        "--secret",
        "lin_wh_secret",
        "--url",
        &url,
        "--body-file",
        linear_body.to_str().unwrap(),
        "--id",
        "9a1bd6a5-2c3b-4a4c-8f1e-0d8b5e9d1c11",
        "--copies",
        "2",
    ]))
    .await;
    assert_eq!(code, 0, "{answers:?}");
    assert_eq!(outcomes(&answers), ["stored", "duplicate"]);
    assert_eq!(linear_store.stats().await.unwrap().pending, 1);
}

/// Signs with `hookbox sign` and verifies the headers with `hookbox verify`.
fn sign_then_verify(sign: &[&str], verify: &[&str], body: &Path) -> (i32, Value) {
    let body = body.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .arg("sign")
        .args(sign)
        .args(["--body-file", body])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = strings(&["verify"]);
    args.extend(strings(verify));
    args.extend(strings(&["--body-file", body]));
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        args.extend(["--header".to_string(), line.to_string()]);
    }
    let (code, mut lines) = json_lines(
        Command::new(env!("CARGO_BIN_EXE_hookbox"))
            .args(&args)
            .output()
            .unwrap(),
    );
    assert_eq!(lines.len(), 1, "{lines:?}");
    (code, lines.remove(0))
}

#[test]
fn gitlab_twilio_and_a_scheme_file_round_trip_through_sign_and_verify() {
    let tmp = TempDir::new("sign-verify");
    let dir = &tmp.0;
    let body = dir.join("push.json");
    std::fs::write(
        &body,
        r#"{"object_kind":"push","event_id":"evt_42","event_type":"form_response"}"#,
    )
    .unwrap();

    // GitLab: the token, and the event UUID as the dedupe key
    let id = "f6a7c2c8-4a7e-4d55-9a3e-0c7f2d7f6b10";
    let (code, line) = sign_then_verify(
        &["--provider", "gitlab", "--secret", "gl-token", "--id", id],
        &["--provider", "gitlab", "--secret", "gl-token"],
        &body,
    );
    assert_eq!(code, 0, "{line}");
    assert_eq!(line["dedupe_key"], id);
    let (code, line) = sign_then_verify(
        &["--provider", "gitlab", "--secret", "gl-token", "--id", id],
        &["--provider", "gitlab", "--secret", "another-token"],
        &body,
    );
    assert_eq!(
        (code, line["error"].as_str()),
        (1, Some("signature_mismatch")),
        "{line}"
    );

    // Twilio: `verify --url` is the URL the provider signed; without it, a clear
    // configuration error
    let twilio_sign = [
        "--provider",
        "twilio",
        "--secret",
        "tw-token",
        "--public-url",
        PUBLIC_URL,
        "--id",
        "idem-1",
    ];
    let (code, line) = sign_then_verify(
        &twilio_sign,
        &[
            "--provider",
            "twilio",
            "--secret",
            "tw-token",
            "--url",
            PUBLIC_URL,
        ],
        &body,
    );
    assert_eq!(code, 0, "{line}");
    assert_eq!(line["dedupe_key"], "idem-1");
    let (code, line) = sign_then_verify(
        &twilio_sign,
        &["--provider", "twilio", "--secret", "tw-token"],
        &body,
    );
    assert_eq!(
        (code, line["error"].as_str()),
        (1, Some("invalid_config")),
        "{line}"
    );

    // a scheme file: --scheme implies --provider custom
    let scheme =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers/custom/schemes/typeform.toml");
    let scheme = scheme.to_str().unwrap();
    let (code, line) = sign_then_verify(
        &["--scheme", scheme, "--secret", "tf-secret"],
        &["--scheme", scheme, "--secret", "tf-secret"],
        &body,
    );
    assert_eq!(code, 0, "{line}");
    assert_eq!(line["provider"], "typeform");
    assert_eq!(line["dedupe_key"], "evt_42");
    let (code, line) = sign_then_verify(
        &["--scheme", scheme, "--secret", "tf-secret"],
        &["--scheme", scheme, "--secret", "not-the-secret"],
        &body,
    );
    assert_eq!(
        (code, line["error"].as_str()),
        (1, Some("signature_mismatch")),
        "{line}"
    );
}

#[test]
fn an_impossible_scheme_file_is_a_usage_error_that_names_the_file() {
    let tmp = TempDir::new("bad-scheme");
    let scheme = tmp.0.join("scheme.toml");
    std::fs::write(
        &scheme,
        "name = \"acme\"\nsigned = \"{timestamp}\"\nretention_days = 1\n\
         [signature]\nheader = \"X-Acme-Signature\"\nalgorithm = \"sha256\"\nencoding = \"hex\"\n\
         [id]\nheader = \"X-Acme-Id\"\n",
    )
    .unwrap();
    let body = tmp.0.join("body.json");
    std::fs::write(&body, "{}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args([
            "sign",
            "--scheme",
            scheme.to_str().unwrap(),
            "--secret",
            "s",
        ])
        .args(["--body-file", body.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scheme.toml"), "{stderr}");
    assert!(stderr.contains("{body}"), "{stderr}");
}
