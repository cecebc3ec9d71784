//! hookbox-twilio: the published examples of Twilio's SDK test suites (form and JSON,
//! with and without the default port, repeated names, credentials in the URL), the
//! SHA-256 settings header, tampering, rotation, every malformed shape, the public
//! URL's configuration and a signer round trip.
//!
//! The expected signatures are the SDKs' own: `twilio-python`
//! `tests/unit/test_request_validator.py`, `twilio-node` `spec/validation.spec.js`,
//! `twilio-java` `RequestValidatorTest` (token `12345`, URL
//! `https://mycompany.com/myapp.php?foo=1&bar=2`). The HMAC-SHA256 ones were computed
//! once with Python's `hmac` over the same signed strings.
#![allow(clippy::unwrap_used)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_twilio::{Twilio, TwilioSigner, body_sha256_query};
use proptest::prelude::*;

const TOKEN: &str = "12345";
const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
/// The SDKs' parameters (`CallSid`, `Caller`, `Digits`, `From`, `To`) as Twilio posts
/// them.
const FORM: &str = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212";
/// The SDKs' signature of `URL` and `FORM`.
const SIGNATURE: &str = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
/// The SDKs' JSON body and its `bodySHA256`.
const JSON: &str = r#"{"property": "value", "boolean": true}"#;
const JSON_HASH: &str = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
const ID: &str = "idem-7c8d7a4e-2c77-4b2f";
const FORM_TYPE: &str = "application/x-www-form-urlencoded";
const JSON_TYPE: &str = "application/json";

fn headers(signature: &str, content_type: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("X-Twilio-Signature", signature.parse().unwrap());
    headers.insert("Content-Type", content_type.parse().unwrap());
    headers.insert("I-Twilio-Idempotency-Token", ID.parse().unwrap());
    headers
}

fn verify_with(
    twilio: &Twilio,
    headers: &HeaderMap,
    body: &str,
) -> Result<VerifiedDelivery, VerifyError> {
    twilio.verify(
        headers,
        Bytes::copy_from_slice(body.as_bytes()),
        OffsetDateTime::now_utc(),
    )
}

fn verify_at(
    url: &str,
    signature: &str,
    content_type: &str,
    body: &str,
) -> Result<VerifiedDelivery, VerifyError> {
    verify_with(
        &Twilio::new(TOKEN, url).unwrap(),
        &headers(signature, content_type),
        body,
    )
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

/// The hint of a signature mismatch, or a panic naming what came back instead.
fn mismatch_hint(result: Result<VerifiedDelivery, VerifyError>) -> String {
    match result {
        Err(VerifyError::SignatureMismatch { hint }) => hint,
        other => panic!("expected a signature mismatch, got {other:?}"),
    }
}

#[test]
fn the_sdk_form_example_verifies_and_the_signer_reproduces_it() {
    let delivery = verify_at(URL, SIGNATURE, FORM_TYPE, FORM).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), ID);
    assert_eq!(delivery.provider(), "twilio");
    assert_eq!(delivery.event_type(), None);
    assert_eq!(delivery.signed_at(), None);
    assert_eq!(delivery.body().as_ref(), FORM.as_bytes());
    for header in [
        "x-twilio-signature",
        "content-type",
        "i-twilio-idempotency-token",
    ] {
        assert!(delivery.headers().get(header).is_some(), "{header} kept");
    }

    let signed = TwilioSigner::new(TOKEN, URL)
        .unwrap()
        .sign(ID, 0, FORM.as_bytes());
    assert_eq!(signed.get("X-Twilio-Signature"), Some(SIGNATURE));
    assert_eq!(signed.get("Content-Type"), Some(FORM_TYPE));
    assert_eq!(signed.get("I-Twilio-Idempotency-Token"), Some(ID));
    assert_eq!(signed.get("X-Twilio-Webhooks-Signature-Settings"), None);
    assert_eq!(signed.to_header_map(), headers(SIGNATURE, FORM_TYPE));
}

#[test]
fn parameters_are_decoded_and_sorted_whatever_their_order_in_the_body() {
    // reversed, `+` written `%2B`, the form's media type with a charset and in capitals
    let reordered = "To=%2B18005551212&From=%2B14158675309&Digits=1234&Caller=%2b14158675309&CallSid=CA1234567890ABCDE";
    for content_type in [
        FORM_TYPE,
        "application/x-www-form-urlencoded; charset=utf-8",
        "Application/X-WWW-Form-Urlencoded",
    ] {
        assert_eq!(
            kind(verify_at(URL, SIGNATURE, content_type, reordered)),
            "ok"
        );
    }
    // `+` is a space, not a plus
    let plus_as_space = FORM.replace("%2B", "+");
    assert_eq!(
        kind(verify_at(URL, SIGNATURE, FORM_TYPE, &plus_as_space)),
        "signature_mismatch"
    );
}

#[test]
fn repeated_names_are_sorted_by_value_and_identical_pairs_count_once() {
    // twilio-python's MultiDict and QueryDict test: 5678, 1234, 1234
    let body = "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234";
    assert_eq!(
        kind(verify_at(
            URL,
            "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
            FORM_TYPE,
            body
        )),
        "ok"
    );
    // twilio-node's array parameter, in either order
    for body in [
        "MessagingBinding.Address=%2B1325xxxxxxx&MessagingBinding.Address=%2B1415xxxxxxx",
        "MessagingBinding.Address=%2B1415xxxxxxx&MessagingBinding.Address=%2B1325xxxxxxx",
    ] {
        assert_eq!(
            kind(verify_at(
                URL,
                "83O6e2vORAoJHUNzJjDWN1jz+BA=",
                FORM_TYPE,
                body
            )),
            "ok"
        );
    }
}

#[test]
fn the_default_port_verifies_with_and_without_it() {
    // twilio-java and twilio-python: a signature over `…:443…` for a URL without a port
    assert_eq!(
        kind(verify_at(
            URL,
            "kvajT1Ptam85bY51eRf/AJRuM3w=",
            FORM_TYPE,
            FORM
        )),
        "ok"
    );
    // the reverse: configured with `:443`, signed without it
    let with_port = URL.replace(".com", ".com:443");
    assert_eq!(
        kind(verify_at(&with_port, SIGNATURE, FORM_TYPE, FORM)),
        "ok"
    );
    // `:80` for http
    let http = URL.replace("https", "http");
    assert_eq!(
        kind(verify_at(
            &http,
            "0ZXoZLH/DfblKGATFgpif+LLRf4=",
            FORM_TYPE,
            FORM
        )),
        "ok"
    );
    // another port is signed as it is ("hash of http uri with port 1234") …
    let other_port = http.replace(".com", ".com:1234");
    assert_eq!(
        kind(verify_at(
            &other_port,
            "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=",
            FORM_TYPE,
            FORM
        )),
        "ok"
    );
    // … and, unlike twilio-python and twilio-node, never dropped: a signature for the
    // URL without `:1234` belongs to another endpoint
    let https_other_port = URL.replace(".com", ".com:1234");
    assert_eq!(
        kind(verify_at(&https_other_port, SIGNATURE, FORM_TYPE, FORM)),
        "signature_mismatch"
    );
}

#[test]
fn credentials_and_a_missing_query_are_part_of_the_url() {
    // twilio-node: "should validate urls with credentials", with and without `:443`
    let with_credentials = "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2";
    for signature in [
        "CukzLTc1tT5dXEDIHm/tKBanW10=",
        "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI=",
    ] {
        assert_eq!(
            kind(verify_at(with_credentials, signature, FORM_TYPE, FORM)),
            "ok"
        );
    }
    // twilio-java: "testValidateWithNoQueryParams" and "testValidateWithEmptyParams"
    assert_eq!(
        kind(verify_at(
            "https://mycompany.com/myapp.php",
            "1xaxFBvyzXYvWplzNOSs28HWO94=",
            FORM_TYPE,
            FORM
        )),
        "ok"
    );
    assert_eq!(
        kind(verify_at(
            URL,
            "zYQTYrRWXE7LtzbG4PfP7/bkkGo=",
            FORM_TYPE,
            ""
        )),
        "ok"
    );
    // a fragment (connection overrides) is never sent, so never signed
    assert_eq!(
        kind(verify_at(
            &format!("{URL}#rc=3&rp=all"),
            SIGNATURE,
            FORM_TYPE,
            FORM
        )),
        "ok"
    );
}

#[test]
fn a_json_body_is_signed_through_body_sha256_appended_to_the_url() {
    assert_eq!(
        body_sha256_query(JSON.as_bytes()),
        format!("bodySHA256={JSON_HASH}")
    );
    // the SDKs' `uriWithBody`: the configured URL, `&bodySHA256=<hash>`
    let delivery = verify_at(URL, "a9nBmqA0ju/hNViExpshrM61xv4=", JSON_TYPE, JSON).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), ID);
    assert_eq!(delivery.body().as_ref(), JSON.as_bytes());
    // twilio-java "testValidateWithNoOtherParameters": `?bodySHA256=<hash>`
    assert_eq!(
        kind(verify_at(
            "https://mycompany.com/myapp.php",
            "y77kIzt2vzLz71DgmJGsen2scGs=",
            "application/json; charset=utf-8",
            JSON
        )),
        "ok"
    );
    // twilio-node "should validate request body when empty": `{}`, signed with `:443`
    assert_eq!(
        kind(verify_at(
            URL,
            "Ldidvp12m26NI7eqEvxnEpkd9Hc=",
            JSON_TYPE,
            "{}"
        )),
        "ok"
    );

    let signed =
        TwilioSigner::new(TOKEN, URL)
            .unwrap()
            .sign(ID, 0, format!("\n {JSON}").as_bytes());
    assert_eq!(signed.get("Content-Type"), Some(JSON_TYPE));
    let signed = TwilioSigner::new(TOKEN, URL)
        .unwrap()
        .sign(ID, 0, JSON.as_bytes());
    assert_eq!(
        signed.get("X-Twilio-Signature"),
        Some("a9nBmqA0ju/hNViExpshrM61xv4=")
    );
}

#[test]
fn a_changed_json_body_no_longer_matches_its_body_sha256() {
    let changed = JSON.replace("value", "valve");
    let hint = mismatch_hint(verify_at(
        URL,
        "a9nBmqA0ju/hNViExpshrM61xv4=",
        JSON_TYPE,
        &changed,
    ));
    assert!(hint.contains("bodySHA256"), "{hint}");
    assert!(hint.contains("(1 tried)"), "{hint}");
}

#[test]
fn a_json_body_signed_without_body_sha256_is_explained() {
    // the SDKs' signature of the URL alone ("hash of URL only"), sent with a JSON body
    let hint = mismatch_hint(verify_at(
        URL,
        "zYQTYrRWXE7LtzbG4PfP7/bkkGo=",
        JSON_TYPE,
        JSON,
    ));
    assert!(hint.contains("without `bodySHA256=`"), "{hint}");
    // and a JSON signature sent as a form
    let hint = mismatch_hint(verify_at(
        URL,
        "a9nBmqA0ju/hNViExpshrM61xv4=",
        FORM_TYPE,
        JSON,
    ));
    assert!(hint.contains("as for a JSON body"), "{hint}");
}

#[test]
fn the_settings_header_selects_hmac_sha256() {
    let sha256 = "key=KS0123456789abcdef,algorithm=HMAC_SHA256";
    let mut form = headers("033hgUJA9M/hXIZsYjwkerEP/DBm35nEri5FhCYjA5s=", FORM_TYPE);
    form.insert(
        "X-Twilio-Webhooks-Signature-Settings",
        sha256.parse().unwrap(),
    );
    let twilio = Twilio::new(TOKEN, URL).unwrap();
    let delivery = verify_with(&twilio, &form, FORM).unwrap();
    assert!(
        delivery
            .headers()
            .get("x-twilio-webhooks-signature-settings")
            .is_some()
    );
    let mut json = headers("+UOCWf84gdgo/5Hpg4m5/EgKnJA2/TbOw5sPNVr3bPk=", JSON_TYPE);
    json.insert(
        "X-Twilio-Webhooks-Signature-Settings",
        sha256.parse().unwrap(),
    );
    assert_eq!(kind(verify_with(&twilio, &json, JSON)), "ok");

    // the signer writes the same
    let signed = TwilioSigner::new(TOKEN, URL)
        .unwrap()
        .with_sha256()
        .sign(ID, 0, FORM.as_bytes());
    assert_eq!(
        signed.get("X-Twilio-Signature"),
        Some("033hgUJA9M/hXIZsYjwkerEP/DBm35nEri5FhCYjA5s=")
    );
    assert!(
        signed
            .get("X-Twilio-Webhooks-Signature-Settings")
            .unwrap()
            .ends_with(",algorithm=HMAC_SHA256")
    );

    // `algorithm=HMAC_SHA1` names the default explicitly
    let mut sha1 = headers(SIGNATURE, FORM_TYPE);
    sha1.insert(
        "X-Twilio-Webhooks-Signature-Settings",
        "key=KS1,algorithm=HMAC_SHA1".parse().unwrap(),
    );
    assert_eq!(kind(verify_with(&twilio, &sha1, FORM)), "ok");

    // an SHA-256 MAC whose settings header a proxy dropped, and the reverse
    let err = verify_at(
        URL,
        "033hgUJA9M/hXIZsYjwkerEP/DBm35nEri5FhCYjA5s=",
        FORM_TYPE,
        FORM,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "malformed_header");
    assert!(err.to_string().contains("HMAC-SHA256"), "{err}");
    let mut mislabelled = headers(SIGNATURE, FORM_TYPE);
    mislabelled.insert(
        "X-Twilio-Webhooks-Signature-Settings",
        sha256.parse().unwrap(),
    );
    let err = verify_with(&twilio, &mislabelled, FORM).unwrap_err();
    assert_eq!(err.kind(), "malformed_header");
    assert!(err.to_string().contains("HMAC-SHA1"), "{err}");
}

#[test]
fn an_unknown_algorithm_is_refused_before_any_mac() {
    for (settings, says) in [
        (
            "key=KS1,algorithm=HMAC_SHA512",
            "`HMAC_SHA512` is not one Twilio signs with",
        ),
        ("key=KS1", "no `algorithm=`"),
        (
            "algorithm=HMAC_SHA256,algorithm=HMAC_SHA1",
            "more than one `algorithm=`",
        ),
    ] {
        let mut request = headers(SIGNATURE, FORM_TYPE);
        request.insert(
            "X-Twilio-Webhooks-Signature-Settings",
            settings.parse().unwrap(),
        );
        let err = verify_with(&Twilio::new(TOKEN, URL).unwrap(), &request, FORM).unwrap_err();
        assert_eq!(err.kind(), "malformed_header", "{settings}");
        let text = err.to_string();
        assert!(
            text.contains("X-Twilio-Webhooks-Signature-Settings"),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
    }
}

#[test]
fn tampering_with_a_parameter_the_body_or_the_url_fails() {
    for body in [
        FORM.replace("Digits=1234", "Digits=1235"),
        format!("{FORM}&Extra=1"),
        FORM.replace("&To=%2B18005551212", ""),
        FORM.replace("Caller=", "Callers="),
    ] {
        assert_eq!(
            kind(verify_at(URL, SIGNATURE, FORM_TYPE, &body)),
            "signature_mismatch",
            "{body}"
        );
    }
    for url in [
        "https://mycompany.com/myapp.php?foo=1&bar=3",
        "https://mycompany.com/other.php?foo=1&bar=2",
        "https://evil.example/myapp.php?foo=1&bar=2",
    ] {
        assert_eq!(
            kind(verify_at(url, SIGNATURE, FORM_TYPE, FORM)),
            "signature_mismatch",
            "{url}"
        );
    }
}

#[test]
fn a_public_url_that_differs_as_usual_is_named() {
    for (configured, change) in [
        (
            "http://mycompany.com/myapp.php?foo=1&bar=2",
            "with `https://` instead of `http://`",
        ),
        (
            "https://mycompany.com/myapp.php/?foo=1&bar=2",
            "without its trailing `/`",
        ),
    ] {
        let hint = mismatch_hint(verify_at(configured, SIGNATURE, FORM_TYPE, FORM));
        assert!(hint.contains(change), "{hint}");
        assert!(hint.contains("Twilio console"), "{hint}");
    }
    let signature = TwilioSigner::new(TOKEN, "https://mycompany.com/myapp.php")
        .unwrap()
        .sign(ID, 0, FORM.as_bytes());
    let hint = mismatch_hint(verify_with(
        &Twilio::new(TOKEN, URL).unwrap(),
        &signature.to_header_map(),
        FORM,
    ));
    assert!(hint.contains("without its query string"), "{hint}");
}

#[test]
fn a_wrong_token_fails_and_any_configured_token_passes() {
    let err = verify_with(
        &Twilio::new("not-the-token", URL).unwrap(),
        &headers(SIGNATURE, FORM_TYPE),
        FORM,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "signature_mismatch");
    assert_eq!(err.http_status(), 401);
    let text = err.to_string();
    assert!(
        text.contains("no configured auth token (1 tried)"),
        "{text}"
    );
    assert!(
        !text.contains("not-the-token"),
        "never echo a secret: {text}"
    );

    // a rotation: the secondary token and the primary one
    let both = Twilio::new(["secondary-token", TOKEN], URL).unwrap();
    assert_eq!(
        kind(verify_with(&both, &headers(SIGNATURE, FORM_TYPE), FORM)),
        "ok"
    );
    let signed_by_secondary = TwilioSigner::new("secondary-token", URL)
        .unwrap()
        .sign(ID, 0, FORM.as_bytes())
        .to_header_map();
    assert_eq!(kind(verify_with(&both, &signed_by_secondary, FORM)), "ok");
    let neither = Twilio::new(["old-token", "new-token"], URL).unwrap();
    let hint = mismatch_hint(verify_with(&neither, &headers(SIGNATURE, FORM_TYPE), FORM));
    assert!(hint.contains("(2 tried)"), "{hint}");

    let newline = Twilio::new(format!("{TOKEN}\n"), URL).unwrap();
    let hint = mismatch_hint(verify_with(&newline, &headers(SIGNATURE, FORM_TYPE), FORM));
    assert!(hint.contains("whitespace"), "{hint}");
}

#[test]
fn every_malformed_header_is_a_typed_error() {
    let twilio = Twilio::new(TOKEN, URL).unwrap();
    let check = |request: &HeaderMap, expected: &str, says: &str| {
        let result = verify_with(&twilio, request, FORM);
        let text = result
            .as_ref()
            .map_or_else(ToString::to_string, |_| String::new());
        assert_eq!(kind(result), expected, "{text}");
        assert!(text.contains(says), "{text}");
    };

    let mut missing = headers(SIGNATURE, FORM_TYPE);
    missing.remove("x-twilio-signature");
    check(&missing, "missing_header", "X-Twilio-Signature");

    let mut twice = headers(SIGNATURE, FORM_TYPE);
    twice.append("x-twilio-signature", SIGNATURE.parse().unwrap());
    check(&twice, "malformed_header", "more than once");

    check(
        &headers("not base64!", FORM_TYPE),
        "malformed_header",
        "28 characters",
    );
    check(
        &headers(&SIGNATURE.replace("=", ""), FORM_TYPE),
        "signature_mismatch",
        "padding",
    );
    check(
        &headers(&SIGNATURE.replace("/", "_"), FORM_TYPE),
        "signature_mismatch",
        "URL-safe",
    );

    let mut no_type = headers(SIGNATURE, FORM_TYPE);
    no_type.remove("content-type");
    check(&no_type, "missing_header", "Content-Type");
    check(
        &headers(SIGNATURE, "text/plain"),
        "malformed_header",
        "`text/plain` is neither form nor JSON",
    );
}

#[test]
fn a_genuine_request_without_an_idempotency_token_has_no_dedupe_key() {
    let mut request = headers(SIGNATURE, FORM_TYPE);
    request.remove("i-twilio-idempotency-token");
    let err = verify_at_headers(&request, FORM).unwrap_err();
    assert_eq!(err.kind(), "missing_dedupe_key");
    assert!(
        err.to_string().contains("I-Twilio-Idempotency-Token"),
        "{err}"
    );
    // the signature is checked first: a forgery without a token is a forgery
    request.insert(
        "x-twilio-signature",
        "kvajT1Ptam85bY51eRf/AJRu000=".parse().unwrap(),
    );
    assert_eq!(
        kind(verify_at_headers(&request, FORM)),
        "signature_mismatch"
    );
    // a token sent twice is ambiguous
    let mut twice = headers(SIGNATURE, FORM_TYPE);
    twice.append("i-twilio-idempotency-token", "other".parse().unwrap());
    assert_eq!(kind(verify_at_headers(&twice, FORM)), "malformed_header");
}

fn verify_at_headers(request: &HeaderMap, body: &str) -> Result<VerifiedDelivery, VerifyError> {
    verify_with(&Twilio::new(TOKEN, URL).unwrap(), request, body)
}

#[test]
fn the_public_url_must_be_an_absolute_http_url() {
    for (url, says) in [
        ("", "is empty"),
        ("mycompany.com/myapp.php", "is not absolute"),
        ("/webhooks/twilio", "is not absolute"),
        (
            "ftp://mycompany.com/myapp.php",
            "not an `https://` or `http://` URL",
        ),
        ("https:///myapp.php", "has no host"),
        ("https://user:hunter2@/myapp.php", "has no host"),
        ("https://mycompany.com:99999/x", "port"),
        ("https://mycompany.com:https/x", "port"),
        ("https://my company.com/x", "whitespace"),
        ("https://[::1/x", "IPv6"),
        (
            "https://mycompany.com/x?bodySHA256=0a1f",
            "already has a `bodySHA256`",
        ),
    ] {
        let err = Twilio::new(TOKEN, url).unwrap_err();
        assert_eq!(err.kind(), "invalid_config", "{url}");
        assert_eq!(err.http_status(), 500);
        let text = err.to_string();
        assert!(text.contains(says), "{url}: {text}");
        assert!(!text.contains("hunter2"), "never echo a password: {text}");
        assert_eq!(
            TwilioSigner::new(TOKEN, url).unwrap_err().kind(),
            "invalid_config"
        );
    }
    for tokens in [vec![], vec![" \n"], vec![TOKEN, ""]] {
        assert_eq!(
            Twilio::new(tokens, URL).unwrap_err().kind(),
            "invalid_secret"
        );
    }
    assert_eq!(
        TwilioSigner::new("", URL).unwrap_err().kind(),
        "invalid_secret"
    );
    let twilio = Twilio::new(TOKEN, " https://user:hunter2@mycompany.com/x#rc=2\n").unwrap();
    assert_eq!(twilio.public_url(), "https://user:hunter2@mycompany.com/x");
    let debug = format!("{twilio:?}");
    assert!(
        !debug.contains("hunter2") && !debug.contains(TOKEN),
        "{debug}"
    );
}

#[test]
fn the_body_limit_comes_first() {
    let twilio = Twilio::new(TOKEN, URL)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(16));
    assert_eq!(
        kind(verify_with(&twilio, &HeaderMap::new(), FORM)),
        "body_too_large"
    );
    let scoped = Twilio::new(TOKEN, URL)
        .unwrap()
        .with_options(VerifyOptions::default().source("sms"));
    let delivery = verify_with(&scoped, &headers(SIGNATURE, FORM_TYPE), FORM).unwrap();
    assert_eq!(delivery.dedupe_key().source(), "sms");
}

/// A form body of `pairs`, encoded as Twilio encodes it.
fn encode(pairs: &[(String, String)]) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        form.append_pair(name, value);
    }
    form.finish()
}

proptest! {
    #[test]
    fn what_the_signer_signs_verifies(
        pairs in prop::collection::vec(("[A-Za-z][A-Za-z0-9.]{0,12}", "\\PC{0,16}"), 0..12),
        json in prop::option::of("\\PC{0,64}"),
        sha256 in any::<bool>(),
        url in prop::sample::select(vec![
            "https://public.example/webhooks/twilio",
            "http://public.example:8080/t?tenant=a&x=%20y",
            "https://user:pass@public.example:443/",
        ]),
        token in "[0-9a-f]{32}",
        id in "[A-Za-z0-9-]{1,40}",
    ) {
        let is_form = json.is_none();
        let body = match json {
            Some(text) => serde_json_string(&text),
            None => encode(&pairs),
        };
        let mut signer = TwilioSigner::new(&token, url).unwrap();
        if sha256 {
            signer = signer.with_sha256();
        }
        let headers = signer.sign(&id, 0, body.as_bytes()).to_header_map();
        let twilio = Twilio::new(["another-token", token.as_str()], url).unwrap();
        let delivery = twilio
            .verify(&headers, Bytes::from(body.clone()), OffsetDateTime::now_utc())
            .unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), id.as_str());
        prop_assert_eq!(delivery.body().as_ref(), body.as_bytes());
        // the same parameters in another order verify too
        if is_form && !pairs.is_empty() {
            let mut reversed = pairs.clone();
            reversed.reverse();
            let reordered = encode(&reversed);
            let result = twilio.verify(&headers, Bytes::from(reordered), OffsetDateTime::now_utc());
            prop_assert_eq!(kind(result), "ok");
        }
    }

    #[test]
    fn any_one_byte_change_to_a_json_body_fails(
        at_index in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let headers = TwilioSigner::new(TOKEN, URL).unwrap().sign(ID, 0, JSON.as_bytes()).to_header_map();
        let mut body = JSON.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Twilio::new(TOKEN, URL).unwrap().verify(&headers, Bytes::from(body), OffsetDateTime::now_utc());
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(
        signature in "[ -~]{0,60}",
        settings in "[ -~]{0,60}",
        content_type in "[ -~]{0,40}",
        body in "[ -~]{0,80}",
    ) {
        let mut request = HeaderMap::new();
        for (name, value) in [
            ("x-twilio-signature", &signature),
            ("x-twilio-webhooks-signature-settings", &settings),
            ("content-type", &content_type),
            ("i-twilio-idempotency-token", &signature),
        ] {
            if let Ok(value) = value.parse() {
                request.insert(name, value);
            }
        }
        let _ = verify_at_headers(&request, &body);
    }

    #[test]
    fn arbitrary_public_urls_never_panic(url in "\\PC{0,60}") {
        if let Ok(twilio) = Twilio::new(TOKEN, &url) {
            let _ = verify_with(&twilio, &headers(SIGNATURE, FORM_TYPE), FORM);
        }
    }
}

/// `text` as a JSON object `{"text": …}`, escaped by hand (no JSON crate needed).
fn serde_json_string(text: &str) -> String {
    let mut json = String::from(r#"{"text":""#);
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if c < ' ' => json.push_str(&format!("\\u{:04x}", c as u32)),
            c => json.push(c),
        }
    }
    json.push_str("\"}");
    json
}
