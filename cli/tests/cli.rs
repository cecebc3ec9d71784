//! The `hookbox` binary against its command-line contract: published vectors, `sign`
//! piped into `verify` for every provider, every error kind and the usage errors.
// the helpers below are test code too: a failed unwrap is a failed test
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_BODY: &[u8] = b"Hello, World!";
const GITHUB_SIGNATURE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
const GITHUB_DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const STANDARD_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const STANDARD_TIMESTAMP: i64 = 1_614_265_330;
const STANDARD_BODY: &[u8] = br#"{"test": 2432232314}"#;
const STANDARD_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

const STRIPE_BODY: &[u8] = br#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1"}}}"#;

/// A file under the temp dir, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(contents: &[u8]) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("hookbox-cli-test-{}-{n}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn hookbox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `hookbox verify` and returns its exit code and its one JSON line.
fn verify(
    provider: &str,
    secrets: &[&str],
    headers: &[&str],
    body: &[u8],
    extra: &[&str],
) -> (i32, Value) {
    let body = TempFile::new(body);
    let mut args = vec!["verify", "--provider", provider, "--body-file", body.path()];
    for secret in secrets {
        args.extend(["--secret", secret]);
    }
    for header in headers {
        args.extend(["--header", header]);
    }
    args.extend(extra);
    let out = hookbox(&args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.matches('\n').count(),
        1,
        "one line on stdout: {stdout:?} (stderr {:?})",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(&stdout).unwrap();
    (out.status.code().unwrap(), json)
}

/// Asserts a rejection of `kind` with exit 1 and returns its message.
fn assert_rejected((code, json): (i32, Value), kind: &str) -> String {
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["ok"], false, "{json}");
    assert_eq!(json["error"], kind, "{json}");
    let message = json["message"].as_str().unwrap().to_string();
    assert!(!message.is_empty());
    message
}

fn assert_verified((code, json): (i32, Value)) -> Value {
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["ok"], true, "{json}");
    json
}

/// Runs `hookbox sign` and returns the header lines it printed.
fn sign(provider: &str, secrets: &[&str], body: &[u8], extra: &[&str]) -> Vec<String> {
    let body = TempFile::new(body);
    let mut args = vec!["sign", "--provider", provider, "--body-file", body.path()];
    for secret in secrets {
        args.extend(["--secret", secret]);
    }
    args.extend(extra);
    let out = hookbox(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn refs(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

fn github_headers(signature_header: &str) -> Vec<String> {
    vec![
        format!("{signature_header}: {GITHUB_SIGNATURE}"),
        format!("X-GitHub-Delivery: {GITHUB_DELIVERY}"),
        "X-GitHub-Event: issues".to_string(),
    ]
}

fn standard_headers(prefix: &str) -> Vec<String> {
    vec![
        format!("{prefix}-id: {STANDARD_ID}"),
        format!("{prefix}-timestamp: {STANDARD_TIMESTAMP}"),
        format!("{prefix}-signature: {STANDARD_SIGNATURE}"),
    ]
}

#[test]
fn github_docs_vector_verifies_with_every_field_reported() {
    let headers = github_headers("X-Hub-Signature-256");
    let json = assert_verified(verify(
        "github",
        &[GITHUB_SECRET],
        &refs(&headers),
        GITHUB_BODY,
        &[],
    ));
    assert_eq!(
        json,
        serde_json::json!({
            "ok": true,
            "provider": "github",
            "dedupe_key": GITHUB_DELIVERY,
            "source": "github",
            "tenant": null,
            "scope": "github",
            "event_type": "issues",
            "correlation_id": null,
            "signed_at": null,
            "body_bytes": GITHUB_BODY.len(),
        })
    );
}

#[test]
fn header_names_are_case_insensitive_and_optional_whitespace_is_stripped() {
    let mut lower = github_headers("x-hub-signature-256");
    // tabs and spaces around the value are HTTP's optional whitespace
    lower[0] = format!("x-hub-signature-256:\t {GITHUB_SIGNATURE} \t");
    assert_verified(verify(
        "github",
        &[GITHUB_SECRET],
        &refs(&lower),
        GITHUB_BODY,
        &[],
    ));

    let mut upper = github_headers("X-HUB-SIGNATURE-256");
    upper[0] = format!("X-HUB-SIGNATURE-256:{GITHUB_SIGNATURE}");
    assert_verified(verify(
        "github",
        &[GITHUB_SECRET],
        &refs(&upper),
        GITHUB_BODY,
        &[],
    ));
}

#[test]
fn any_of_several_secrets_may_match() {
    let headers = github_headers("X-Hub-Signature-256");
    let secrets = ["the-old-secret", GITHUB_SECRET];
    assert_verified(verify(
        "github",
        &secrets,
        &refs(&headers),
        GITHUB_BODY,
        &[],
    ));
}

#[test]
fn now_is_accepted_but_ignored_where_nothing_is_signed_with_a_timestamp() {
    let headers = github_headers("X-Hub-Signature-256");
    let extra = ["--now", "-1", "--tolerance", "0"];
    assert_verified(verify(
        "github",
        &[GITHUB_SECRET],
        &refs(&headers),
        GITHUB_BODY,
        &extra,
    ));
}

#[test]
fn standard_webhooks_vector_and_its_window_edges() {
    let headers = standard_headers("webhook");
    let run = |now: i64| {
        let now = now.to_string();
        verify(
            "standard",
            &[STANDARD_SECRET],
            &refs(&headers),
            STANDARD_BODY,
            &["--now", &now],
        )
    };
    let json = assert_verified(run(STANDARD_TIMESTAMP));
    assert_eq!(json["provider"], "standard");
    assert_eq!(json["dedupe_key"], STANDARD_ID);
    assert_eq!(json["signed_at"], STANDARD_TIMESTAMP);
    assert_eq!(json["body_bytes"], STANDARD_BODY.len());

    // inclusive at exactly 300 s in both directions, one second more fails
    assert_verified(run(STANDARD_TIMESTAMP + 300));
    assert_verified(run(STANDARD_TIMESTAMP - 300));
    assert_rejected(run(STANDARD_TIMESTAMP + 301), "timestamp_too_old");
    assert_rejected(run(STANDARD_TIMESTAMP - 301), "timestamp_in_future");
}

#[test]
fn tolerance_widens_the_window() {
    let headers = standard_headers("webhook");
    let extra = ["--now", "1614265631", "--tolerance", "301"];
    assert_verified(verify(
        "standard",
        &[STANDARD_SECRET],
        &refs(&headers),
        STANDARD_BODY,
        &extra,
    ));
}

#[test]
fn svix_verifies_the_same_vector_under_both_header_families() {
    for prefix in ["svix", "webhook"] {
        let headers = standard_headers(prefix);
        let json = assert_verified(verify(
            "svix",
            &[STANDARD_SECRET],
            &refs(&headers),
            STANDARD_BODY,
            &["--now", "1614265330"],
        ));
        assert_eq!(json["provider"], "svix");
        assert_eq!(json["dedupe_key"], STANDARD_ID);
    }
    let headers = standard_headers("svix");
    let stale = verify(
        "svix",
        &[STANDARD_SECRET],
        &refs(&headers),
        STANDARD_BODY,
        &["--now", "1614265631"],
    );
    assert_rejected(stale, "timestamp_too_old");
}

#[test]
fn sign_output_verifies_for_every_provider_and_a_changed_byte_does_not() {
    let cases: [(&str, &str, &[&str]); 5] = [
        ("stripe", "whsec_test_secret", &[]),
        (
            "shopify",
            "shopify-client-secret",
            &[
                "--event",
                "orders/create",
                "--shop-domain",
                "shop.myshopify.com",
            ],
        ),
        (
            "github",
            GITHUB_SECRET,
            &["--event", "push", "--id", GITHUB_DELIVERY],
        ),
        ("svix", STANDARD_SECRET, &[]),
        ("standard", STANDARD_SECRET, &[]),
    ];
    for (provider, secret, extra) in cases {
        // default timestamp (now) on one side, default clock on the other
        let headers = sign(provider, &[secret], STRIPE_BODY, extra);
        let json = assert_verified(verify(
            provider,
            &[secret],
            &refs(&headers),
            STRIPE_BODY,
            &[],
        ));
        assert_eq!(json["provider"], provider);
        let key = json["dedupe_key"].as_str().unwrap();
        match provider {
            "stripe" => assert_eq!(key, "evt_1NG8Du2eZvKYlo2CUI79vXWy"),
            "github" => assert_eq!(key, GITHUB_DELIVERY),
            "svix" | "standard" => assert!(key.starts_with("msg_"), "{key}"),
            _ => assert_eq!(key.len(), 36, "a UUID: {key}"),
        }
        if provider == "shopify" {
            assert_eq!(json["tenant"], "shop.myshopify.com");
            assert_eq!(json["event_type"], "orders/create");
        }

        let mut tampered = STRIPE_BODY.to_vec();
        tampered[10] ^= 1;
        let rejected = verify(provider, &[secret], &refs(&headers), &tampered, &[]);
        assert_rejected(rejected, "signature_mismatch");
    }
}

#[test]
fn sign_is_deterministic_given_id_and_timestamp() {
    let extra = ["--timestamp", "1614265330"];
    let first = sign("svix", &[STANDARD_SECRET], STANDARD_BODY, &extra);
    assert_eq!(
        first,
        sign("svix", &[STANDARD_SECRET], STANDARD_BODY, &extra)
    );
    assert!(first.iter().all(|line| line.contains(": ")), "{first:?}");
}

#[test]
fn stripe_signs_with_every_secret_and_verifies_with_any() {
    let headers = sign("stripe", &["whsec_old", "whsec_new"], STRIPE_BODY, &[]);
    let json = assert_verified(verify(
        "stripe",
        &["whsec_new"],
        &refs(&headers),
        STRIPE_BODY,
        &[],
    ));
    assert!(json["signed_at"].as_i64().is_some(), "{json}");
}

#[test]
fn stripe_body_errors_come_after_the_signature() {
    let no_id = br#"{"object":"event","type":"charge.succeeded"}"#;
    let headers = sign("stripe", &["whsec_test_secret"], no_id, &[]);
    let rejected = verify(
        "stripe",
        &["whsec_test_secret"],
        &refs(&headers),
        no_id,
        &[],
    );
    assert_rejected(rejected, "missing_dedupe_key");

    let not_json = b"not json at all";
    let headers = sign("stripe", &["whsec_test_secret"], not_json, &[]);
    let rejected = verify(
        "stripe",
        &["whsec_test_secret"],
        &refs(&headers),
        not_json,
        &[],
    );
    assert_rejected(rejected, "malformed_body");
}

#[test]
fn header_shape_errors() {
    let secret = &[GITHUB_SECRET];
    let delivery = format!("X-GitHub-Delivery: {GITHUB_DELIVERY}");
    let signature = format!("X-Hub-Signature-256: {GITHUB_SIGNATURE}");

    let absent = verify("github", secret, &[&delivery], GITHUB_BODY, &[]);
    let message = assert_rejected(absent, "missing_header");
    assert!(message.contains("X-Hub-Signature-256"), "{message}");

    let empty = verify(
        "github",
        secret,
        &[&signature, "X-GitHub-Delivery:"],
        GITHUB_BODY,
        &[],
    );
    assert_rejected(empty, "missing_header");

    let sha1 = "X-Hub-Signature-256: sha1=0123456789abcdef0123456789abcdef01234567";
    let wrong_scheme = verify("github", secret, &[sha1, &delivery], GITHUB_BODY, &[]);
    assert_rejected(wrong_scheme, "malformed_header");

    let twice = verify(
        "github",
        secret,
        &[&signature, &delivery, &delivery],
        GITHUB_BODY,
        &[],
    );
    assert_rejected(twice, "malformed_header");

    // a non-ASCII value reaches the provider instead of failing as a usage error
    let non_ascii = verify(
        "github",
        secret,
        &[&signature, "X-GitHub-Delivery: café"],
        GITHUB_BODY,
        &[],
    );
    assert_rejected(non_ascii, "malformed_header");
}

#[test]
fn invalid_secrets_are_reported_as_json() {
    let headers = github_headers("X-Hub-Signature-256");
    assert_rejected(
        verify("github", &[""], &refs(&headers), GITHUB_BODY, &[]),
        "invalid_secret",
    );

    let headers = standard_headers("svix");
    let not_base64 = verify(
        "svix",
        &["whsec_!!!not-base64"],
        &refs(&headers),
        STANDARD_BODY,
        &[],
    );
    assert_rejected(not_base64, "invalid_secret");
}

#[test]
fn mismatch_messages_name_the_likely_cause() {
    let headers = github_headers("X-Hub-Signature-256");
    let newline_secret = format!("{GITHUB_SECRET}\n");
    let rejected = verify(
        "github",
        &[&newline_secret],
        &refs(&headers),
        GITHUB_BODY,
        &[],
    );
    let message = assert_rejected(rejected, "signature_mismatch");
    assert!(message.contains("whitespace"), "{message}");

    // the body file is used byte for byte: a trailing newline is not trimmed away
    let rejected = verify(
        "github",
        &[GITHUB_SECRET],
        &refs(&headers),
        b"Hello, World!\n",
        &[],
    );
    let message = assert_rejected(rejected, "signature_mismatch");
    assert!(message.contains("trailing whitespace"), "{message}");
}

fn assert_usage_error(args: &[&str]) {
    let out = hookbox(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(!out.stderr.is_empty(), "{args:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"ok\""),
        "{args:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let body = TempFile::new(GITHUB_BODY);
    let missing = format!("{}.does-not-exist", body.path());
    let verify_with = |provider: &str, body_file: &str, more: &[&str]| {
        let mut args = vec!["verify", "--provider", provider, "--secret", "s"];
        args.extend(["--body-file", body_file]);
        args.extend(more);
        assert_usage_error(&args);
    };
    verify_with("paypal", body.path(), &[]);
    verify_with("github", &missing, &[]);
    verify_with("github", body.path(), &["--header", "no colon"]);
    verify_with("github", body.path(), &["--header", "Bad Name: v"]);
    verify_with("github", body.path(), &["--header", "X-GitHub-Event: a\nb"]);
    verify_with("github", body.path(), &["--now", "yesterday"]);
    verify_with("github", body.path(), &["--tolerance", "-5"]);
    assert_usage_error(&["verify", "--provider", "github", "--secret", "s"]);
}

#[test]
fn help_exits_0() {
    let out = hookbox(&["verify", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--provider"));
}

#[test]
fn sign_refuses_two_secrets_for_a_single_signature_provider() {
    let body = TempFile::new(GITHUB_BODY);
    let out = hookbox(&[
        "sign",
        "--provider",
        "github",
        "--secret",
        "a",
        "--secret",
        "b",
        "--body-file",
        body.path(),
    ]);
    assert_eq!(out.status.code(), Some(2));

    let out = hookbox(&[
        "sign",
        "--provider",
        "stripe",
        "--secret",
        " ",
        "--body-file",
        body.path(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a blank secret is the provider's error"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid secret"));
}
