//! GitHub verification: the published vector, rotation, and every header shape.

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Secrets, Signer, VerifyError, VerifyOptions};
use hookbox_github::{GitHub, GitHubSigner, MIN_RETENTION};
use proptest::prelude::*;

const DOC_SECRET: &str = "It's a Secret to Everybody";
const DOC_BODY: &str = "Hello, World!";
const DOC_SIGNATURE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
const DELIVERY_ID: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

fn now() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH
}

fn doc_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "X-Hub-Signature-256",
        HeaderValue::from_static(DOC_SIGNATURE),
    );
    headers.insert("X-GitHub-Delivery", HeaderValue::from_static(DELIVERY_ID));
    headers.insert("X-GitHub-Event", HeaderValue::from_static("issues"));
    headers.insert("X-GitHub-Hook-ID", HeaderValue::from_static("292430182"));
    headers
}

fn verify(github: &GitHub, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    github
        .verify(headers, Bytes::copy_from_slice(body), now())
        .map(|_| ())
}

fn kind(result: Result<(), VerifyError>) -> &'static str {
    result.err().map_or("ok", |e| e.kind())
}

#[test]
fn githubs_documentation_example_verifies() {
    let github = GitHub::new(DOC_SECRET).unwrap();
    let delivery = github
        .verify(
            &doc_headers(),
            Bytes::from_static(DOC_BODY.as_bytes()),
            now(),
        )
        .unwrap();
    assert_eq!(delivery.provider(), "github");
    assert_eq!(delivery.dedupe_key().delivery_id(), DELIVERY_ID);
    assert_eq!(delivery.dedupe_key().source(), "github");
    assert_eq!(delivery.event_type(), Some("issues"));
    assert_eq!(delivery.correlation_id(), Some("292430182"));
    assert_eq!(delivery.signed_at(), None);
    assert_eq!(delivery.body().as_ref(), DOC_BODY.as_bytes());
    assert_eq!(delivery.headers().len(), 4);
    assert_eq!(github.min_retention(), MIN_RETENTION);
}

#[test]
fn header_names_are_case_insensitive_and_values_lower_case_hex_only() {
    let github = GitHub::new(DOC_SECRET).unwrap();
    let with_signature = |name: &'static str, value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers.insert("x-github-delivery", HeaderValue::from_static(DELIVERY_ID));
        verify(&github, &headers, DOC_BODY.as_bytes())
    };
    // the name in any case
    assert_eq!(
        kind(with_signature("X-HUB-SIGNATURE-256", DOC_SIGNATURE)),
        "ok"
    );
    // the value only as GitHub writes it: octokit/webhooks-methods compares the
    // `sha256=<lower-case hex>` text (src/node/verify.ts), so upper- or mixed-case hex
    // is a signature that does not match
    let hex = DOC_SIGNATURE.trim_start_matches("sha256=");
    let mixed = format!("{}{}", &hex[..10].to_uppercase(), &hex[10..]);
    for value in [
        format!("sha256={}", hex.to_uppercase()),
        format!("sha256={mixed}"),
    ] {
        let err = with_signature("x-hub-signature-256", &value).unwrap_err();
        assert_eq!(err.kind(), "signature_mismatch", "{value}");
        assert!(err.to_string().contains("upper-case hex"), "{err}");
    }
    // so is an upper-case scheme prefix: there is no `sha256=` then
    assert_eq!(
        kind(with_signature(
            "x-hub-signature-256",
            &DOC_SIGNATURE.to_uppercase()
        )),
        "malformed_header"
    );
}

#[test]
fn either_secret_verifies_during_rotation() {
    let github = GitHub::new(["the-new-secret", DOC_SECRET]).unwrap();
    assert_eq!(
        kind(verify(&github, &doc_headers(), DOC_BODY.as_bytes())),
        "ok"
    );
    let github = GitHub::new([DOC_SECRET, "the-new-secret"]).unwrap();
    assert_eq!(
        kind(verify(&github, &doc_headers(), DOC_BODY.as_bytes())),
        "ok"
    );
}

#[test]
fn a_wrong_secret_or_changed_body_is_a_mismatch() {
    let github = GitHub::new("another endpoint's secret").unwrap();
    assert_eq!(
        kind(verify(&github, &doc_headers(), DOC_BODY.as_bytes())),
        "signature_mismatch"
    );
    let github = GitHub::new(DOC_SECRET).unwrap();
    assert_eq!(
        kind(verify(&github, &doc_headers(), b"Hello, World?")),
        "signature_mismatch"
    );
}

#[test]
fn the_mismatch_message_names_the_likely_cause() {
    let github = GitHub::new(format!("{DOC_SECRET}\n")).unwrap();
    let err = verify(&github, &doc_headers(), DOC_BODY.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("whitespace"), "{err}");

    let github = GitHub::new(DOC_SECRET).unwrap();
    let err = verify(&github, &doc_headers(), b"Hello, World!\n").unwrap_err();
    assert!(err.to_string().contains("trailing whitespace"), "{err}");
    let err = verify(&github, &doc_headers(), b"Hello, World").unwrap_err();
    assert!(err.to_string().contains("another endpoint"), "{err}");
}

#[test]
fn every_malformed_header_shape_is_a_typed_error() {
    let github = GitHub::new(DOC_SECRET).unwrap();
    let body = DOC_BODY.as_bytes();
    let with_signature = |value: &[u8]| {
        let mut headers = doc_headers();
        headers.insert(
            "X-Hub-Signature-256",
            HeaderValue::from_bytes(value).unwrap(),
        );
        kind(verify(&github, &headers, body))
    };
    assert_eq!(with_signature(b""), "missing_header");
    assert_eq!(
        with_signature(b"sha1=0123456789abcdef0123456789abcdef01234567"),
        "malformed_header"
    );
    assert_eq!(
        with_signature(&DOC_SIGNATURE.as_bytes()[7..]),
        "malformed_header"
    );
    assert_eq!(
        with_signature(&DOC_SIGNATURE.as_bytes()[..70]),
        "malformed_header"
    );
    assert_eq!(
        with_signature(DOC_SIGNATURE.replace('e', "g").as_bytes()),
        "malformed_header"
    );
    assert_eq!(with_signature("sha256=é".as_bytes()), "malformed_header");
    assert_eq!(
        with_signature("sha256=".repeat(5000).as_bytes()),
        "malformed_header"
    );

    let mut headers = doc_headers();
    headers.remove("X-Hub-Signature-256");
    assert_eq!(kind(verify(&github, &headers, body)), "missing_header");

    let mut headers = doc_headers();
    headers.remove("X-GitHub-Delivery");
    let err = verify(&github, &headers, body).unwrap_err();
    assert_eq!(err.kind(), "missing_header");
    assert!(err.to_string().contains("X-GitHub-Delivery"), "{err}");

    let mut headers = doc_headers();
    headers.append(
        "X-Hub-Signature-256",
        HeaderValue::from_static(DOC_SIGNATURE),
    );
    assert_eq!(kind(verify(&github, &headers, body)), "malformed_header");
}

#[test]
fn blank_secrets_are_refused_when_configured() {
    for secrets in [Secrets::from(""), Secrets::from("  \n"), Secrets::default()] {
        assert_eq!(GitHub::new(secrets).unwrap_err().kind(), "invalid_secret");
    }
    assert_eq!(GitHubSigner::new("").unwrap_err().kind(), "invalid_secret");
}

#[test]
fn a_body_over_the_limit_is_refused_before_anything_else() {
    let github = GitHub::new(DOC_SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(12));
    let err = verify(&github, &HeaderMap::new(), DOC_BODY.as_bytes()).unwrap_err();
    assert_eq!(err, VerifyError::BodyTooLarge { len: 13, limit: 12 });
    assert_eq!(err.http_status(), 413);
}

#[test]
fn the_source_option_scopes_the_dedupe_key() {
    let github = GitHub::new(DOC_SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().source("org-acme"));
    let delivery = github
        .verify(
            &doc_headers(),
            Bytes::from_static(DOC_BODY.as_bytes()),
            now(),
        )
        .unwrap();
    assert_eq!(delivery.dedupe_key().scope(), "org-acme");
}

#[test]
fn the_signer_reproduces_the_documentation_signature() {
    let headers = GitHubSigner::new(DOC_SECRET).unwrap().event("issues").sign(
        DELIVERY_ID,
        0,
        DOC_BODY.as_bytes(),
    );
    assert_eq!(headers.get("x-hub-signature-256"), Some(DOC_SIGNATURE));
    assert_eq!(headers.get("X-GitHub-Delivery"), Some(DELIVERY_ID));
    assert_eq!(headers.get("X-GitHub-Event"), Some("issues"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn signed_deliveries_verify_and_any_changed_byte_fails(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        id in "[A-Za-z0-9-]{1,40}",
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let github = GitHub::new("secret").unwrap();
        let headers = GitHubSigner::new("secret").unwrap().sign(&id, 0, &body).to_header_map();
        let delivery = github.verify(&headers, Bytes::from(body.clone()), now()).unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());

        if !body.is_empty() {
            let mut tampered = body.clone();
            tampered[flip.index(body.len())] ^= 1 << bit;
            prop_assert_eq!(kind(verify(&github, &headers, &tampered)), "signature_mismatch");
        }

        // the same MAC with any letter digit upper-cased never verifies
        let signature = headers.get("x-hub-signature-256").unwrap().to_str().unwrap();
        if let Some(at) = signature[7..].find(|c: char| c.is_ascii_lowercase()) {
            let mut upper = signature.to_string();
            upper[7 + at..8 + at].make_ascii_uppercase();
            let mut changed = headers.clone();
            changed.insert("x-hub-signature-256", HeaderValue::from_str(&upper).unwrap());
            prop_assert_eq!(kind(verify(&github, &changed, &body)), "signature_mismatch");
        }
    }

    #[test]
    fn arbitrary_header_values_never_panic(
        signature in proptest::collection::vec(any::<u8>(), 0..200),
        delivery in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let github = GitHub::new("secret").unwrap();
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_bytes(&signature) {
            headers.insert("X-Hub-Signature-256", value);
        }
        if let Ok(value) = HeaderValue::from_bytes(&delivery) {
            headers.insert("X-GitHub-Delivery", value);
        }
        let _ = verify(&github, &headers, b"{}");
    }
}
