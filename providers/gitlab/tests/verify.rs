//! hookbox-gitlab: GitLab's documented delivery headers, secret tokens (several, wrong,
//! malformed), signing tokens on the Standard Webhooks vector (tampering, the window,
//! a request without signature), the dedupe key's precedence and round trips.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_gitlab::{GitLab, GitLabSigner, MIN_RETENTION, NAME};
use proptest::prelude::*;

const TOKEN: &str = "8c1f4a6e-gitlab-secret-token";

/// The request headers of the first event in the example response of "Get a list of
/// project webhook events" (docs.gitlab.com/api/project_webhooks), whose token GitLab
/// shows as `[REDACTED]`: [`TOKEN`] stands in for it.
const DOCUMENTED: &[(&str, &str)] = &[
    ("Content-Type", "application/json"),
    ("User-Agent", "GitLab/17.1.0-pre"),
    ("Idempotency-Key", "3a427872-00df-429c-9bc9-a9475de2efe4"),
    ("X-Gitlab-Event", "Push Hook"),
    (
        "X-Gitlab-Webhook-UUID",
        "3c5c0404-c866-44bc-a5f6-452bb1bfc76e",
    ),
    ("X-Gitlab-Instance", "https://gitlab.example.com"),
    (
        "X-Gitlab-Event-UUID",
        "9cebe914-4827-408f-b014-cfa23a47a35f",
    ),
    ("X-Gitlab-Token", TOKEN),
];

/// The same page's second event: the same push, another delivery.
const DOCUMENTED_SECOND: &[(&str, &str)] = &[
    ("Idempotency-Key", "7c6e0583-49f2-4dc5-a50b-4c0bcf3c1b27"),
    ("X-Gitlab-Event", "Push Hook"),
    (
        "X-Gitlab-Webhook-UUID",
        "a753eedb-1d72-4549-9ca7-eac8ea8e50dd",
    ),
    ("X-Gitlab-Instance", "https://gitlab.example.com"),
    (
        "X-Gitlab-Event-UUID",
        "842d7c3e-3114-4396-8a95-66c084d53cb1",
    ),
    ("X-Gitlab-Token", TOKEN),
];

/// A push body in the shape of that example's `request_data` (abridged).
const PUSH: &str = r#"{"object_kind":"push","event_name":"push","before":"468abc807a2b2572f43e72c743b76cee6db24025","after":"f15b32277d2c55c6c595845a87109b09c913c556","ref":"refs/heads/master","ref_protected":true,"checkout_sha":"f15b32277d2c55c6c595845a87109b09c913c556","user_id":1,"user_username":"root","project_id":7,"project":{"id":7,"name":"Flight","path_with_namespace":"flightjs/Flight"},"commits":[],"total_commits_count":3}"#;

// The Standard Webhooks specification's published example (the vector the
// hookbox-standard tests verify): a GitLab signing token signs the same way.
const SIGNING_TOKEN: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SIGNED_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS: i64 = 1_614_265_330;
const SIGNED_BODY: &str = r#"{"test": 2432232314}"#;
const V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const OTHER_SIGNING_TOKEN: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            hookbox_core::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// The published vector's three signing headers, as a signed GitLab push carries them.
fn published(signature: &str) -> HeaderMap {
    headers(&[
        ("Idempotency-Key", SIGNED_ID),
        ("X-Gitlab-Event", "Push Hook"),
        (
            "X-Gitlab-Event-UUID",
            "13792a34-cac6-4fda-95a8-c58e00a3954e",
        ),
        ("webhook-id", SIGNED_ID),
        ("webhook-timestamp", "1614265330"),
        ("webhook-signature", signature),
    ])
}

fn verify_with(
    gitlab: &GitLab,
    headers: &HeaderMap,
    body: &str,
    now: i64,
) -> Result<VerifiedDelivery, VerifyError> {
    gitlab.verify(headers, Bytes::copy_from_slice(body.as_bytes()), at(now))
}

fn token_only() -> GitLab {
    GitLab::new(TOKEN).unwrap()
}

fn signed_only() -> GitLab {
    GitLab::signed(SIGNING_TOKEN).unwrap()
}

fn both() -> GitLab {
    GitLab::new(TOKEN)
        .unwrap()
        .with_signing_secrets(SIGNING_TOKEN)
        .unwrap()
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

fn hint(result: Result<VerifiedDelivery, VerifyError>) -> String {
    match result {
        Err(VerifyError::SignatureMismatch { hint }) => hint,
        other => panic!("expected a signature mismatch, got {other:?}"),
    }
}

fn kept_names(delivery: &VerifiedDelivery) -> Vec<String> {
    delivery
        .headers()
        .iter()
        .map(|(name, _)| name.as_str().to_string())
        .collect()
}

#[test]
fn the_documented_push_delivery_verifies_and_keys_on_its_idempotency_key() {
    let delivery = verify_with(&token_only(), &headers(DOCUMENTED), PUSH, TS).unwrap();
    assert_eq!(delivery.provider(), NAME);
    assert_eq!(
        delivery.dedupe_key().delivery_id(),
        "3a427872-00df-429c-9bc9-a9475de2efe4"
    );
    assert_eq!(delivery.event_type(), Some("Push Hook"));
    assert_eq!(delivery.signed_at(), None);
    assert_eq!(delivery.body().as_ref(), PUSH.as_bytes());
    // the token is the secret itself: never kept beside the body
    assert_eq!(kept_names(&delivery), ["idempotency-key"]);

    let second = verify_with(&token_only(), &headers(DOCUMENTED_SECOND), PUSH, TS).unwrap();
    assert_eq!(
        second.dedupe_key().delivery_id(),
        "7c6e0583-49f2-4dc5-a50b-4c0bcf3c1b27",
        "two deliveries of one push body are two keys"
    );
}

#[test]
fn provider_facts() {
    let gitlab = token_only();
    assert_eq!(gitlab.name(), "gitlab");
    assert_eq!(gitlab.min_retention(), MIN_RETENTION);
    assert_eq!(
        MIN_RETENTION.as_duration(),
        Duration::from_secs(7 * 24 * 3600)
    );
    assert!(!gitlab.requires_signature());
    assert!(both().requires_signature());
    assert!(signed_only().requires_signature());
}

#[test]
fn the_signer_sends_what_gitlab_sends() {
    let signed = GitLabSigner::new(TOKEN)
        .unwrap()
        .event("Merge Request Hook")
        .sign("3a427872-00df-429c-9bc9-a9475de2efe4", TS, PUSH.as_bytes());
    let pairs: Vec<(&str, &str)> = signed.iter().collect();
    assert_eq!(
        pairs,
        [
            ("Idempotency-Key", "3a427872-00df-429c-9bc9-a9475de2efe4"),
            ("X-Gitlab-Event", "Merge Request Hook"),
            ("X-Gitlab-Token", TOKEN),
            (
                "X-Gitlab-Event-UUID",
                "3a427872-00df-429c-9bc9-a9475de2efe4"
            ),
        ]
    );
    assert_eq!(
        kind(verify_with(
            &token_only(),
            &signed.to_header_map(),
            PUSH,
            TS
        )),
        "ok"
    );
    // the signer's Debug never prints the token
    let debug = format!("{:?}", GitLabSigner::new(TOKEN).unwrap());
    assert!(!debug.contains(TOKEN), "{debug}");
    let debug = format!("{:?}", both());
    assert!(
        !debug.contains(TOKEN) && !debug.contains("MfKQ9r8"),
        "{debug}"
    );
}

#[test]
fn a_wrong_token_is_a_mismatch_that_echoes_no_token() {
    let mut forged = headers(DOCUMENTED);
    forged.insert("x-gitlab-token", HeaderValue::from_static("guessed-token"));
    let result = verify_with(&token_only(), &forged, PUSH, TS);
    let err = result.as_ref().unwrap_err().clone();
    assert_eq!(err.http_status(), 401);
    let hint = hint(result);
    assert!(hint.contains("1 configured secret token"), "{hint}");
    assert!(hint.contains("resets its secret token"), "{hint}");
    for secret in [TOKEN, "guessed-token"] {
        assert!(!err.to_string().contains(secret), "{err}");
    }

    // a token that is a prefix, or the token plus a character, is no match
    for near in [
        TOKEN[..TOKEN.len() - 1].to_string(),
        format!("{TOKEN}x"),
        TOKEN.to_uppercase(),
    ] {
        let mut forged = headers(DOCUMENTED);
        forged.insert("x-gitlab-token", HeaderValue::from_str(&near).unwrap());
        assert_eq!(
            kind(verify_with(&token_only(), &forged, PUSH, TS)),
            "signature_mismatch",
            "{near}"
        );
    }
}

#[test]
fn any_of_several_tokens_passes_during_a_rotation() {
    let rotating = GitLab::new(["old-token", TOKEN]).unwrap();
    assert_eq!(
        kind(verify_with(&rotating, &headers(DOCUMENTED), PUSH, TS)),
        "ok"
    );
    let mut old = headers(DOCUMENTED);
    old.insert("x-gitlab-token", HeaderValue::from_static("old-token"));
    assert_eq!(kind(verify_with(&rotating, &old, PUSH, TS)), "ok");
    let mut other = headers(DOCUMENTED);
    other.insert("x-gitlab-token", HeaderValue::from_static("third-token"));
    let hint = hint(verify_with(&rotating, &other, PUSH, TS));
    assert!(hint.contains("none of the 2 configured"), "{hint}");
}

#[test]
fn a_signing_token_configured_as_a_secret_token_is_named() {
    let confused = GitLab::new(SIGNING_TOKEN).unwrap();
    let hint = hint(verify_with(&confused, &headers(DOCUMENTED), PUSH, TS));
    assert!(hint.contains("starts with `whsec_`"), "{hint}");
    assert!(!hint.contains(SIGNING_TOKEN), "{hint}");
}

fn invalid_reason(tokens: Vec<&str>) -> String {
    match GitLab::new(tokens).unwrap_err() {
        VerifyError::InvalidSecret { reason } => reason,
        other => panic!("{other:?}"),
    }
}

#[test]
fn tokens_that_could_never_arrive_are_refused_when_built() {
    let reason = invalid_reason;
    assert!(reason(vec![]).contains("no secret token configured"));
    for (token, expected) in [
        ("", "blank"),
        ("  ", "blank"),
        ("s3cr3t-from-a-file\n", "line break"),
        ("s3\r\ncr3t", "line break"),
        (" s3cr3t", "whitespace"),
        ("s3cr3t\t", "whitespace"),
        ("s3crét", "printable ASCII"),
        ("s3c\u{7f}r3t", "printable ASCII"),
    ] {
        let single = reason(vec![token]);
        assert!(single.starts_with("the secret token"), "{single}");
        assert!(single.contains(expected), "{token:?}: {single}");
        if !token.trim().is_empty() {
            assert!(!single.contains(token.trim()), "echoes the token: {single}");
        }
        let second = reason(vec!["fine", token]);
        assert!(second.starts_with("secret token #2"), "{second}");
    }
    // spaces inside are printable and arrive unchanged
    let spaced = GitLab::new("two words").unwrap();
    let mut request = headers(DOCUMENTED);
    request.insert("x-gitlab-token", HeaderValue::from_static("two words"));
    assert_eq!(kind(verify_with(&spaced, &request, PUSH, TS)), "ok");
    assert_eq!(
        GitLabSigner::new(" x").unwrap_err().kind(),
        "invalid_secret"
    );
}

#[test]
fn the_published_vector_verifies_as_a_signed_gitlab_delivery() {
    let delivery = verify_with(&signed_only(), &published(V1), SIGNED_BODY, TS).unwrap();
    assert_eq!(delivery.provider(), NAME);
    assert_eq!(delivery.dedupe_key().delivery_id(), SIGNED_ID);
    assert_eq!(delivery.event_type(), Some("Push Hook"));
    assert_eq!(delivery.signed_at(), Some(at(TS)));
    assert_eq!(
        kept_names(&delivery),
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
    );
    // the kept headers verify the stored delivery again
    let again = verify_with(
        &signed_only(),
        &delivery.headers().to_header_map(),
        SIGNED_BODY,
        TS,
    )
    .unwrap();
    assert_eq!(again.dedupe_key(), delivery.dedupe_key());

    // the signer reproduces the published signature
    let signed =
        GitLabSigner::signed(SIGNING_TOKEN)
            .unwrap()
            .sign(SIGNED_ID, TS, SIGNED_BODY.as_bytes());
    assert_eq!(signed.get("webhook-signature"), Some(V1));
    assert_eq!(signed.get("webhook-id"), Some(SIGNED_ID));
    assert_eq!(signed.get("webhook-timestamp"), Some("1614265330"));
    assert_eq!(signed.get("x-gitlab-token"), None);
}

#[test]
fn signing_required_but_absent_is_refused_even_with_the_right_token() {
    let unsigned = headers(DOCUMENTED);
    for gitlab in [both(), signed_only()] {
        let result = verify_with(&gitlab, &unsigned, PUSH, TS);
        assert_eq!(result.as_ref().unwrap_err().http_status(), 401);
        let hint = hint(result);
        assert!(hint.contains("verifies GitLab signing tokens"), "{hint}");
        assert!(hint.contains("leaked secret token"), "{hint}");
    }
    // empty signing headers are no signature either
    let mut empty = headers(DOCUMENTED);
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        empty.insert(name, HeaderValue::from_static(""));
    }
    assert_eq!(
        kind(verify_with(&both(), &empty, PUSH, TS)),
        "signature_mismatch"
    );
    // some but not all: the missing one is named
    for missing in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        let mut partial = published(V1);
        partial.remove(missing);
        match verify_with(&signed_only(), &partial, SIGNED_BODY, TS) {
            Err(VerifyError::MissingHeader { header }) => assert_eq!(header, missing),
            other => panic!("{missing}: {other:?}"),
        }
    }
}

#[test]
fn a_tampered_signature_or_body_fails() {
    let gitlab = signed_only();
    let tampered = V1.replace("g0hM", "g0hN");
    assert_eq!(
        kind(verify_with(&gitlab, &published(&tampered), SIGNED_BODY, TS)),
        "signature_mismatch"
    );
    assert_eq!(
        kind(verify_with(
            &gitlab,
            &published(V1),
            r#"{"test": 2432232315}"#,
            TS
        )),
        "signature_mismatch"
    );
    // another signing token, or a changed signed id
    let other = GitLab::signed(OTHER_SIGNING_TOKEN).unwrap();
    assert_eq!(
        kind(verify_with(&other, &published(V1), SIGNED_BODY, TS)),
        "signature_mismatch"
    );
    let mut renamed = published(V1);
    renamed.insert("webhook-id", HeaderValue::from_static("msg_another"));
    assert_eq!(
        kind(verify_with(&gitlab, &renamed, SIGNED_BODY, TS)),
        "signature_mismatch"
    );
    // during a rotation either signing token verifies
    let rotating = GitLab::signed([OTHER_SIGNING_TOKEN, SIGNING_TOKEN]).unwrap();
    assert_eq!(
        kind(verify_with(&rotating, &published(V1), SIGNED_BODY, TS)),
        "ok"
    );
    // a GitLab signing token never signs with ed25519
    assert_eq!(
        kind(verify_with(
            &gitlab,
            &published(&format!("v1a,{}", "A".repeat(86) + "==")),
            SIGNED_BODY,
            TS
        )),
        "malformed_header"
    );
}

#[test]
fn the_window_applies_to_signed_deliveries_in_both_directions() {
    let gitlab = signed_only();
    let request = published(V1);
    assert_eq!(
        kind(verify_with(&gitlab, &request, SIGNED_BODY, TS + 300)),
        "ok"
    );
    assert_eq!(
        kind(verify_with(&gitlab, &request, SIGNED_BODY, TS - 300)),
        "ok"
    );
    assert_eq!(
        kind(verify_with(&gitlab, &request, SIGNED_BODY, TS + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(verify_with(&gitlab, &request, SIGNED_BODY, TS - 301)),
        "timestamp_in_future"
    );
    // the tolerance is the options', set before or after the signing tokens
    let wide = VerifyOptions::default().tolerance(Duration::from_secs(3600));
    for gitlab in [
        signed_only().with_options(wide.clone()),
        GitLab::new(TOKEN)
            .unwrap()
            .with_options(wide.clone())
            .with_signing_secrets(SIGNING_TOKEN)
            .unwrap(),
    ] {
        let mut request = published(V1);
        request.insert("x-gitlab-token", HeaderValue::from_static(TOKEN));
        assert_eq!(
            kind(verify_with(&gitlab, &request, SIGNED_BODY, TS + 3600)),
            "ok"
        );
        assert_eq!(
            kind(verify_with(&gitlab, &request, SIGNED_BODY, TS + 3601)),
            "timestamp_too_old"
        );
    }
}

#[test]
fn a_secret_token_alone_has_no_window() {
    for now in [0, TS, i64::from(i32::MAX), 253_402_300_799] {
        assert_eq!(
            kind(verify_with(&token_only(), &headers(DOCUMENTED), PUSH, now)),
            "ok"
        );
    }
}

#[test]
fn a_token_only_receiver_checks_the_token_and_ignores_signing_headers() {
    let mut request = published("v1,bm90IGEgc2lnbmF0dXJlIG9mIHRoaXMgYm9keQ==");
    request.insert("x-gitlab-token", HeaderValue::from_static(TOKEN));
    let delivery = verify_with(&token_only(), &request, SIGNED_BODY, 0).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), SIGNED_ID);
    assert_eq!(delivery.signed_at(), None);
    assert_eq!(kept_names(&delivery), ["idempotency-key"]);
    // but its token still counts
    request.insert("x-gitlab-token", HeaderValue::from_static("wrong"));
    assert_eq!(
        kind(verify_with(&token_only(), &request, SIGNED_BODY, TS)),
        "signature_mismatch"
    );
}

#[test]
fn with_both_configured_both_must_pass() {
    let mut request = published(V1);
    request.insert("x-gitlab-token", HeaderValue::from_static(TOKEN));
    let delivery = verify_with(&both(), &request, SIGNED_BODY, TS).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), SIGNED_ID);
    assert_eq!(delivery.signed_at(), Some(at(TS)));

    request.insert("x-gitlab-token", HeaderValue::from_static("wrong"));
    assert_eq!(
        kind(verify_with(&both(), &request, SIGNED_BODY, TS)),
        "signature_mismatch"
    );
    request.remove("x-gitlab-token");
    match verify_with(&both(), &request, SIGNED_BODY, TS) {
        Err(VerifyError::MissingHeader { header }) => assert_eq!(header, "X-Gitlab-Token"),
        other => panic!("{other:?}"),
    }
    let mut tampered = published(&V1.replace("g0hM", "g0hN"));
    tampered.insert("x-gitlab-token", HeaderValue::from_static(TOKEN));
    assert_eq!(
        kind(verify_with(&both(), &tampered, SIGNED_BODY, TS)),
        "signature_mismatch"
    );
    // a signing-only receiver does not read the secret token at all
    request.insert("x-gitlab-token", HeaderValue::from_static("anything"));
    assert_eq!(
        kind(verify_with(&signed_only(), &request, SIGNED_BODY, TS)),
        "ok"
    );
}

/// The dedupe key of a token-verified push with `pairs` as its other headers.
fn key(pairs: &[(&str, &str)]) -> Result<String, VerifyError> {
    let mut all = vec![("X-Gitlab-Token", TOKEN), ("X-Gitlab-Event", "Push Hook")];
    all.extend_from_slice(pairs);
    verify_with(&token_only(), &headers(&all), PUSH, TS)
        .map(|delivery| delivery.dedupe_key().delivery_id().to_string())
}

#[test]
fn the_idempotency_key_comes_before_the_event_uuid_and_the_webhook_uuid_never_counts() {
    let gitlab = token_only();
    assert_eq!(
        key(&[
            ("Idempotency-Key", "idem-1"),
            ("X-Gitlab-Event-UUID", "event-1")
        ])
        .unwrap(),
        "idem-1"
    );
    assert_eq!(
        key(&[("X-Gitlab-Event-UUID", "event-1")]).unwrap(),
        "event-1"
    );
    // an empty Idempotency-Key is absent
    assert_eq!(
        key(&[("Idempotency-Key", ""), ("X-Gitlab-Event-UUID", "event-1")]).unwrap(),
        "event-1"
    );
    // two attempts of one event: a new Webhook-UUID each, one key
    for ids in [
        vec![("Idempotency-Key", "idem-1")],
        vec![("X-Gitlab-Event-UUID", "event-1")],
    ] {
        let mut first = ids.clone();
        first.push((
            "X-Gitlab-Webhook-UUID",
            "3c5c0404-c866-44bc-a5f6-452bb1bfc76e",
        ));
        let mut retry = ids.clone();
        retry.push((
            "X-Gitlab-Webhook-UUID",
            "a753eedb-1d72-4549-9ca7-eac8ea8e50dd",
        ));
        assert_eq!(key(&first).unwrap(), key(&retry).unwrap());
    }
    // the Webhook-UUID alone is no key
    for pairs in [
        &[(
            "X-Gitlab-Webhook-UUID",
            "3c5c0404-c866-44bc-a5f6-452bb1bfc76e",
        )][..],
        &[][..],
    ] {
        match key(pairs) {
            Err(VerifyError::MissingDedupeKey { field }) => {
                assert!(field.contains("`Idempotency-Key`"), "{field}");
                assert!(field.contains("`X-Gitlab-Event-UUID`"), "{field}");
            }
            other => panic!("{other:?}"),
        }
    }
    // the key's header is kept, the other not
    let delivery = verify_with(
        &gitlab,
        &headers(&[
            ("X-Gitlab-Token", TOKEN),
            ("X-Gitlab-Event-UUID", "event-1"),
        ]),
        PUSH,
        TS,
    )
    .unwrap();
    assert_eq!(kept_names(&delivery), ["x-gitlab-event-uuid"]);
    assert_eq!(delivery.event_type(), None);
}

#[test]
fn a_signed_delivery_keys_on_the_signed_webhook_id() {
    // GitLab sets webhook-id to the Idempotency-Key; the unsigned copy is not trusted
    let mut request = published(V1);
    request.insert(
        "idempotency-key",
        HeaderValue::from_static("rewritten-by-a-replay"),
    );
    let delivery = verify_with(&signed_only(), &request, SIGNED_BODY, TS).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), SIGNED_ID);
}

#[test]
fn missing_repeated_and_non_ascii_headers_are_typed_errors() {
    let gitlab = token_only();
    let without = |name: &str| {
        let mut request = headers(DOCUMENTED);
        request.remove(name);
        verify_with(&gitlab, &request, PUSH, TS)
    };
    match without("x-gitlab-token") {
        Err(VerifyError::MissingHeader { header }) => assert_eq!(header, "X-Gitlab-Token"),
        other => panic!("{other:?}"),
    }
    // the event type is optional
    assert_eq!(without("x-gitlab-event").unwrap().event_type(), None);

    let mut empty = headers(DOCUMENTED);
    empty.insert("x-gitlab-token", HeaderValue::from_static(""));
    assert_eq!(
        kind(verify_with(&gitlab, &empty, PUSH, TS)),
        "missing_header"
    );

    for name in ["x-gitlab-token", "x-gitlab-event", "idempotency-key"] {
        let mut repeated = headers(DOCUMENTED);
        repeated.append(name, HeaderValue::from_static("another"));
        assert_eq!(
            kind(verify_with(&gitlab, &repeated, PUSH, TS)),
            "malformed_header",
            "{name}"
        );
        let mut non_ascii = headers(DOCUMENTED);
        non_ascii.insert(name, HeaderValue::from_bytes("Pûsh".as_bytes()).unwrap());
        assert_eq!(
            kind(verify_with(&gitlab, &non_ascii, PUSH, TS)),
            "malformed_header",
            "{name}"
        );
    }
    // a repeated signing header is the signature verifier's malformed header
    let mut repeated = published(V1);
    repeated.append("webhook-signature", HeaderValue::from_static(V1));
    assert_eq!(
        kind(verify_with(&signed_only(), &repeated, SIGNED_BODY, TS)),
        "malformed_header"
    );
}

#[test]
fn the_body_limit_comes_before_everything_else() {
    let gitlab = token_only().with_options(VerifyOptions::default().max_body_bytes(8));
    assert_eq!(
        kind(verify_with(&gitlab, &HeaderMap::new(), PUSH, TS)),
        "body_too_large"
    );
    let gitlab = signed_only().with_options(VerifyOptions::default().max_body_bytes(8));
    assert_eq!(
        kind(verify_with(&gitlab, &HeaderMap::new(), SIGNED_BODY, TS)),
        "body_too_large"
    );
}

#[test]
fn the_source_option_scopes_the_key_in_both_modes() {
    let options = VerifyOptions::default().source("gitlab-ops");
    let delivery = verify_with(
        &token_only().with_options(options.clone()),
        &headers(DOCUMENTED),
        PUSH,
        TS,
    )
    .unwrap();
    assert_eq!(delivery.dedupe_key().source(), "gitlab-ops");
    let delivery = verify_with(
        &signed_only().with_options(options),
        &published(V1),
        SIGNED_BODY,
        TS,
    )
    .unwrap();
    assert_eq!(delivery.dedupe_key().source(), "gitlab-ops");
    assert_eq!(delivery.dedupe_key().provider(), NAME);
}

#[test]
fn unusable_signing_tokens_are_refused_when_built() {
    for tokens in [
        vec![],
        vec![""],
        vec!["whsec_"],
        vec!["whsec_not base64"],
        vec!["whpk_GX9rI+FshTLGq8g4+s1ep4m+DHaykgM0A5v6iz02jWE="],
        vec!["whsk_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio="],
    ] {
        for result in [
            GitLab::signed(tokens.clone()).map(|_| ()),
            GitLab::new(TOKEN)
                .unwrap()
                .with_signing_secrets(tokens.clone())
                .map(|_| ()),
            GitLabSigner::signed(tokens.clone()).map(|_| ()),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), "invalid_secret", "{tokens:?}");
            for token in &tokens {
                if token.len() > 6 {
                    assert!(!err.to_string().contains(token), "{err}");
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn token_deliveries_round_trip(
        token in "[!-~]([ -~]{0,40}[!-~])?",
        id in "[A-Za-z0-9-]{1,64}",
        event in "[A-Z][a-z]{0,12}( [A-Z][a-z]{0,12})? Hook",
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let headers = GitLabSigner::new(&token).unwrap().event(event.clone()).sign(&id, 0, &body);
        let delivery = GitLab::new(token.as_str()).unwrap()
            .verify(&headers.to_header_map(), Bytes::from(body.clone()), at(TS))
            .unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.event_type(), Some(event.as_str()));
        prop_assert_eq!(delivery.body().as_ref(), body.as_slice());
    }

    #[test]
    fn signed_deliveries_round_trip(
        id in "[A-Za-z0-9-]{1,64}",
        skew in -300i64..=300,
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let signer = GitLabSigner::new(TOKEN).unwrap().with_signing_secrets(SIGNING_TOKEN).unwrap();
        let headers = signer.sign(&id, TS, &body).to_header_map();
        let delivery = both().verify(&headers, Bytes::from(body.clone()), at(TS + skew)).unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.signed_at(), Some(at(TS)));
        prop_assert_eq!(delivery.body().as_ref(), body.as_slice());
    }

    #[test]
    fn any_one_byte_change_to_a_signed_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let mut body = PUSH.as_bytes().to_vec();
        let headers = GitLabSigner::signed(SIGNING_TOKEN).unwrap().sign("idem-1", TS, &body).to_header_map();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = signed_only().verify(&headers, Bytes::from(body), at(TS));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(
        name in prop::sample::select(vec![
            "x-gitlab-token", "x-gitlab-event", "idempotency-key", "x-gitlab-event-uuid",
            "webhook-id", "webhook-timestamp", "webhook-signature",
        ]),
        value in "[ -~]{0,120}",
    ) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            let mut request = published(V1);
            request.insert("x-gitlab-token", HeaderValue::from_static(TOKEN));
            request.insert(name, value);
            for gitlab in [token_only(), signed_only(), both()] {
                let _ = verify_with(&gitlab, &request, SIGNED_BODY, TS);
            }
        }
    }
}
