//! `hookbox sign` and `hookbox verify` for the providers that shake hands and for
//! Paddle: every event round-trips, every handshake verifies with `"handshake":true`
//! and the reply an edge would send, and the providers' own windows are the defaults.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// RFC 8032 section 7.1, test 1: a signing seed and its public key.
const DISCORD_SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const DISCORD_PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

struct TempFile(PathBuf);

impl TempFile {
    fn new(contents: &[u8]) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("hookbox-cli-handshake-{}-{n}", std::process::id()));
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

/// Signs `body` as `provider` at `timestamp` and verifies it at `now`; returns the
/// exit code and the JSON line.
fn round_trip(
    provider: &str,
    sign_secret: &str,
    verify_secret: &str,
    body: &[u8],
    timestamp: i64,
    now: i64,
    extra: &[&str],
) -> (i32, Value) {
    let file = TempFile::new(body);
    let ts = timestamp.to_string();
    let mut args = vec![
        "sign",
        "--provider",
        provider,
        "--secret",
        sign_secret,
        "--body-file",
        file.path(),
        "--timestamp",
        &ts,
        "--id",
        "8ba2a7c0-0a8f-4a40-9a7a-1f1f0e0e0e0e",
    ];
    args.extend(extra);
    let out = hookbox(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let headers: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let now = now.to_string();
    let mut args = vec![
        "verify",
        "--provider",
        provider,
        "--secret",
        verify_secret,
        "--body-file",
        file.path(),
        "--now",
        &now,
    ];
    for header in &headers {
        args.extend(["--header", header]);
    }
    let out = hookbox(&args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches('\n').count(), 1, "{stdout:?}");
    (
        out.status.code().unwrap(),
        serde_json::from_str(&stdout).unwrap(),
    )
}

const T: i64 = 1_700_000_000;

#[test]
fn events_round_trip_for_every_new_provider() {
    let cases: [(&str, &str, &str, &str, &[&str], &str); 5] = [
        (
            "slack",
            "slack-secret",
            "slack-secret",
            r#"{"type":"event_callback","event":{"type":"message"},"event_id":"Ev1"}"#,
            &[],
            "Ev1",
        ),
        (
            "twitch",
            "twitch-secret",
            "twitch-secret",
            r#"{"event":{}}"#,
            &["--event", "stream.online"],
            "8ba2a7c0-0a8f-4a40-9a7a-1f1f0e0e0e0e",
        ),
        (
            "zoom",
            "zoom-token",
            "zoom-token",
            r#"{"event":"meeting.ended","event_ts":1700000000123}"#,
            &[],
            "meeting.ended:1700000000123",
        ),
        (
            "discord",
            DISCORD_SEED,
            DISCORD_PUBLIC,
            r#"{"type":2,"id":"786008729715212338"}"#,
            &[],
            "786008729715212338",
        ),
        (
            "paddle",
            "pdl_ntfset_secret",
            "pdl_ntfset_secret",
            r#"{"event_id":"evt_01","event_type":"transaction.paid"}"#,
            &[],
            "evt_01",
        ),
    ];
    for (provider, sign_secret, verify_secret, body, extra, key) in cases {
        let (code, json) = round_trip(
            provider,
            sign_secret,
            verify_secret,
            body.as_bytes(),
            T,
            T,
            extra,
        );
        assert_eq!(code, 0, "{provider}: {json}");
        assert_eq!(json["provider"], provider);
        assert_eq!(json["dedupe_key"], key, "{provider}");
        assert!(json.get("handshake").is_none(), "{json}");
    }
}

#[test]
fn handshakes_verify_and_print_the_reply() {
    let cases: [(&str, &str, &str, &str, &[&str], (u16, Option<&str>, &str)); 5] = [
        (
            "slack",
            "s",
            "s",
            r#"{"token":"t","challenge":"abc123","type":"url_verification"}"#,
            &[],
            (200, Some("text/plain"), "abc123"),
        ),
        (
            "twitch",
            "twitch-secret",
            "twitch-secret",
            r#"{"challenge":"pogchamp"}"#,
            &["--message-type", "webhook_callback_verification"],
            (200, Some("text/plain"), "pogchamp"),
        ),
        (
            "zoom",
            "wXyWgWXUSDuaBJRUVEzYhg",
            "wXyWgWXUSDuaBJRUVEzYhg",
            r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#,
            &[],
            (
                200,
                Some("application/json"),
                r#"{"encryptedToken":"27d9f8fb74e64dd8c85f805718dabf4e57e24a14fdd346d94aaed5381d77683e","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}"#,
            ),
        ),
        (
            "discord",
            DISCORD_SEED,
            DISCORD_PUBLIC,
            r#"{"type":1,"id":"1"}"#,
            &[],
            (200, Some("application/json"), r#"{"type":1}"#),
        ),
        (
            "discord",
            DISCORD_SEED,
            DISCORD_PUBLIC,
            r#"{"version":1,"type":0}"#,
            &[],
            (204, None, ""),
        ),
    ];
    for (provider, sign_secret, verify_secret, body, extra, (status, content_type, reply)) in cases
    {
        let (code, json) = round_trip(
            provider,
            sign_secret,
            verify_secret,
            body.as_bytes(),
            T,
            T,
            extra,
        );
        assert_eq!(code, 0, "{provider}: {json}");
        assert_eq!(json["ok"], true);
        assert_eq!(json["handshake"], true, "{json}");
        assert_eq!(json["provider"], provider);
        assert_eq!(json["reply"]["status"], status, "{json}");
        assert_eq!(
            json["reply"]["content_type"].as_str(),
            content_type,
            "{json}"
        );
        assert_eq!(json["reply"]["body"], reply, "{json}");
        assert!(json.get("dedupe_key").is_none(), "{json}");
        // a handshake signed with another secret is rejected like an event
        if provider != "discord" {
            let (code, json) = round_trip(
                provider,
                "another secret",
                verify_secret,
                body.as_bytes(),
                T,
                T,
                extra,
            );
            assert_eq!(
                (code, json["error"].as_str()),
                (1, Some("signature_mismatch")),
                "{json}"
            );
        }
    }
}

#[test]
fn each_provider_has_its_own_default_window() {
    let twitch: &[&str] = &["--message-type", "revocation"];
    // Twitch: 600 s
    assert_eq!(
        round_trip("twitch", "t", "t", b"{}", T, T + 600, twitch).0,
        0
    );
    let (code, json) = round_trip("twitch", "t", "t", b"{}", T, T + 601, twitch);
    assert_eq!(
        (code, json["error"].as_str()),
        (1, Some("timestamp_too_old"))
    );
    // Paddle: 5 s, in both directions
    let body = br#"{"event_id":"evt_01"}"#;
    assert_eq!(round_trip("paddle", "p", "p", body, T, T - 5, &[]).0, 0);
    let (code, json) = round_trip("paddle", "p", "p", body, T, T - 6, &[]);
    assert_eq!(
        (code, json["error"].as_str()),
        (1, Some("timestamp_in_future"))
    );
    // Slack and Zoom: 300 s
    let body = br#"{"event_id":"Ev1"}"#;
    let (code, json) = round_trip("slack", "s", "s", body, T, T + 301, &[]);
    assert_eq!(
        (code, json["error"].as_str()),
        (1, Some("timestamp_too_old"))
    );
}
