//! hookbox-custom's verification on hand-built schemes: timestamps in headers and
//! in the body (both directions of the window), several signatures, the URL, every
//! algorithm, and every malformed shape.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Retention, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_custom::{
    Algorithm, Custom, CustomSigner, Encoding, Scheme, SchemeBuilder, Source, Unit,
};
use proptest::prelude::*;

const SECRET: &str = "acme-test-secret";
const T: i64 = 1_700_000_000;
const BODY: &str = r#"{"id":"evt_1","type":"invoice.paid","created":1700000000}"#;

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

/// Acme: `Acme-Signature: v1=<hex>`, signing `{timestamp}.{body}`, a timestamp and an
/// id header, a 300-second window.
fn acme() -> SchemeBuilder {
    Scheme::builder("acme")
        .signature("Acme-Signature", Algorithm::Sha256, Encoding::Hex)
        .prefix("v1=")
        .signed("{timestamp}.{body}")
        .id(Source::header("Acme-Delivery"))
        .event_type(Source::header("Acme-Event"))
        .timestamp(Source::header("Acme-Timestamp"), Unit::Seconds)
        .tolerance(Duration::from_secs(300))
        .retention(Retention::from_days(3))
}

fn sign(scheme: &Scheme, id: &str, t: i64, body: &str) -> HeaderMap {
    CustomSigner::new(scheme.clone(), SECRET)
        .unwrap()
        .event_type("invoice.paid")
        .sign(id, t, body.as_bytes())
        .to_header_map()
}

fn verify(
    scheme: &Scheme,
    headers: &HeaderMap,
    body: &str,
    now: i64,
) -> Result<VerifiedDelivery, VerifyError> {
    Custom::new(scheme.clone(), SECRET).unwrap().verify(
        headers,
        Bytes::copy_from_slice(body.as_bytes()),
        at(now),
    )
}

fn with(headers: &HeaderMap, name: &'static str, value: &str) -> HeaderMap {
    let mut headers = headers.clone();
    headers.insert(name, value.parse().unwrap());
    headers
}

#[test]
fn a_header_timestamped_delivery_verifies_and_is_keyed_by_the_scheme() {
    let scheme = acme().build().unwrap();
    let headers = sign(&scheme, "dlv_1", T, BODY);
    assert_eq!(headers["acme-timestamp"], T.to_string().as_str());
    let delivery = verify(&scheme, &headers, BODY, T).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "dlv_1");
    assert_eq!(delivery.dedupe_key().provider(), "acme");
    assert_eq!(delivery.dedupe_key().source(), "acme");
    assert_eq!(delivery.event_type(), Some("invoice.paid"));
    assert_eq!(delivery.signed_at(), Some(at(T)));
    // the headers read are kept, to verify the delivery again later
    let kept: Vec<_> = delivery.headers().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        kept,
        [
            "acme-signature",
            "acme-delivery",
            "acme-timestamp",
            "acme-event"
        ]
    );

    let billing = Custom::new(scheme, SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().source("billing"));
    let delivery = billing
        .verify(&headers, Bytes::from_static(BODY.as_bytes()), at(T))
        .unwrap();
    assert_eq!(delivery.dedupe_key().source(), "billing");
    assert_eq!(delivery.dedupe_key().provider(), "acme");
    assert_eq!(billing.name(), "acme");
}

#[test]
fn the_window_is_inclusive_in_both_directions() {
    let scheme = acme().build().unwrap();
    let headers = sign(&scheme, "dlv_1", T, BODY);
    assert_eq!(kind(verify(&scheme, &headers, BODY, T + 300)), "ok");
    assert_eq!(kind(verify(&scheme, &headers, BODY, T - 300)), "ok");
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T - 301)),
        "timestamp_in_future"
    );
    // the timestamp is signed: moving it breaks the signature, not the window
    let moved = with(&headers, "acme-timestamp", &(T + 1).to_string());
    assert_eq!(kind(verify(&scheme, &moved, BODY, T)), "signature_mismatch");
}

#[test]
fn millisecond_timestamps_are_checked_to_the_second() {
    let scheme = acme()
        .timestamp(Source::header("Acme-Timestamp"), Unit::Milliseconds)
        .build()
        .unwrap();
    let headers = sign(&scheme, "dlv_1", T, BODY);
    assert_eq!(headers["acme-timestamp"], format!("{T}000").as_str());
    assert_eq!(kind(verify(&scheme, &headers, BODY, T + 300)), "ok");
    assert_eq!(kind(verify(&scheme, &headers, BODY, T - 300)), "ok");
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T + 301)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T - 301)),
        "timestamp_in_future"
    );
    let err = verify(
        &scheme,
        &with(&headers, "acme-timestamp", "1700000000.5"),
        BODY,
        T,
    )
    .unwrap_err();
    assert!(
        matches!(&err, VerifyError::MalformedHeader { header, reason } if header == "Acme-Timestamp" && reason.contains("milliseconds")),
        "{err}"
    );
}

#[test]
fn a_body_timestamp_is_checked_after_the_signature() {
    let scheme = Scheme::builder("acme")
        .signature("Acme-Signature", Algorithm::Sha512, Encoding::Base64)
        .signed("{body}")
        .id(Source::field("id"))
        .event_type(Source::field("type"))
        .timestamp(Source::field("created"), Unit::Seconds)
        .tolerance(Duration::from_secs(60))
        .retention(Retention::from_hours(12))
        .build()
        .unwrap();
    let headers = sign(&scheme, "unused", 0, BODY);
    let delivery = verify(&scheme, &headers, BODY, T + 60).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "evt_1");
    assert_eq!(delivery.event_type(), Some("invoice.paid"));
    assert_eq!(delivery.signed_at(), Some(at(T)));
    assert_eq!(kind(verify(&scheme, &headers, BODY, T - 60)), "ok");
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T + 61)),
        "timestamp_too_old"
    );
    assert_eq!(
        kind(verify(&scheme, &headers, BODY, T - 61)),
        "timestamp_in_future"
    );
    // a forged body is refused before anything in it is read
    let forged = r#"{"id":"evt_1","created":"soon"}"#;
    assert_eq!(
        kind(verify(&scheme, &headers, forged, T)),
        "signature_mismatch"
    );
    for (body, expected, says) in [
        (r#"{"id":"evt_1"}"#, "malformed_body", "no `created`"),
        (
            r#"{"id":"evt_1","created":-5}"#,
            "malformed_body",
            "`created`",
        ),
        (r#"{"id":"evt_1","created":"1700000000"}"#, "ok", ""),
        (
            r#"{"id":"evt_1","created":1.7e9}"#,
            "malformed_body",
            "`created`",
        ),
        ("[1]", "malformed_body", "not a JSON object"),
        (
            r#"{"created":1700000000}"#,
            "missing_dedupe_key",
            "id is absent",
        ),
    ] {
        let result = verify(&scheme, &sign(&scheme, "", 0, body), body, T);
        assert_eq!(kind(result.clone()), expected, "{body}");
        if let Err(err) = result {
            assert!(err.to_string().contains(says), "{body}: {err}");
        }
    }
}

#[test]
fn several_signatures_during_a_rotation() {
    let scheme = acme().separator(',').build().unwrap();
    let signer = CustomSigner::new(scheme.clone(), ["old-secret", SECRET]).unwrap();
    let headers = signer.sign("dlv_1", T, BODY.as_bytes()).to_header_map();
    let value = headers["acme-signature"].to_str().unwrap().to_string();
    assert_eq!(value.matches("v1=").count(), 2, "{value}");
    assert_eq!(kind(verify(&scheme, &headers, BODY, T)), "ok");

    let (first, second) = value.split_once(',').unwrap();
    for (header, expected) in [
        (second.to_string(), "ok"),
        (first.to_string(), "signature_mismatch"),
        (format!("v0=abc, {second} ,v2=x"), "ok"),
        (format!("{first},v1=zz"), "signature_mismatch"),
        ("v0=abc,v2=x".to_string(), "malformed_header"),
        ("v1=zz,v1=yy".to_string(), "malformed_header"),
    ] {
        let result = verify(&scheme, &with(&headers, "acme-signature", &header), BODY, T);
        assert_eq!(kind(result), expected, "{header}");
    }
    // without a separator, the header is one signature and a signer takes one secret
    let one = acme().build().unwrap();
    let err = CustomSigner::new(one.clone(), ["a", "b"]).unwrap_err();
    assert_eq!(err.kind(), "invalid_config");
    let both = with(&headers, "acme-signature", &value);
    assert_eq!(kind(verify(&one, &both, BODY, T)), "malformed_header");
}

#[test]
fn the_id_and_the_url_are_signed_where_the_template_says() {
    let url = "https://example.com/hooks/acme?account=7";
    let scheme = acme()
        .signed("{url}|{id}|{timestamp}|{body}")
        .url(url)
        .build()
        .unwrap();
    let headers = sign(&scheme, "dlv_1", T, BODY);
    assert_eq!(kind(verify(&scheme, &headers, BODY, T)), "ok");
    let other_id = with(&headers, "acme-delivery", "dlv_2");
    assert_eq!(
        kind(verify(&scheme, &other_id, BODY, T)),
        "signature_mismatch"
    );
    let elsewhere = acme()
        .signed("{url}|{id}|{timestamp}|{body}")
        .url("https://example.com/hooks/acme")
        .build()
        .unwrap();
    let err = verify(&elsewhere, &headers, BODY, T).unwrap_err();
    assert!(
        matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("also signs the URL")),
        "{err}"
    );
}

#[test]
fn every_algorithm_matches_the_rfc_vectors() {
    // RFC 2202 and RFC 4231, test case 2: key "Jefe"
    let body = "what do ya want for nothing?";
    for (algorithm, hex) in [
        (Algorithm::Sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        (
            Algorithm::Sha256,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            Algorithm::Sha512,
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
        ),
    ] {
        let scheme = Scheme::builder("rfc")
            .signature("X-Signature", algorithm, Encoding::Hex)
            .signed("{body}")
            .id(Source::header("X-Id"))
            .retention(Retention::from_days(1))
            .build()
            .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-signature", hex.parse().unwrap());
        headers.insert("x-id", "1".parse().unwrap());
        let provider = Custom::new(scheme.clone(), "Jefe").unwrap();
        let result = provider.verify(&headers, Bytes::from_static(body.as_bytes()), at(T));
        assert_eq!(kind(result), "ok", "{algorithm}");
        let signed = CustomSigner::new(scheme, "Jefe")
            .unwrap()
            .sign("1", 0, body.as_bytes());
        assert_eq!(signed.get("x-signature"), Some(hex), "{algorithm}");
        // a MAC of another length is no MAC of this algorithm
        let short = &hex[..hex.len() - 2];
        headers.insert("x-signature", short.parse().unwrap());
        let result = provider.verify(&headers, Bytes::from_static(body.as_bytes()), at(T));
        assert_eq!(kind(result), "malformed_header", "{algorithm}");
    }
}

#[test]
fn every_malformed_header_is_a_typed_error() {
    let scheme = acme().build().unwrap();
    let good = sign(&scheme, "dlv_1", T, BODY);
    let value = good["acme-signature"].to_str().unwrap().to_string();
    let mut repeated = good.clone();
    repeated.append("acme-signature", value.parse().unwrap());
    assert_eq!(
        kind(verify(&scheme, &repeated, BODY, T)),
        "malformed_header"
    );
    for (name, expected) in [
        ("acme-signature", "missing_header"),
        ("acme-delivery", "missing_header"),
        ("acme-timestamp", "missing_header"),
        ("acme-event", "ok"),
    ] {
        let mut headers = good.clone();
        headers.remove(name);
        assert_eq!(kind(verify(&scheme, &headers, BODY, T)), expected, "{name}");
    }
    for (name, header, expected) in [
        ("acme-signature", "v1=", "malformed_header"),
        ("acme-signature", "v1=nothex", "malformed_header"),
        (
            "acme-signature",
            &value.to_uppercase().replace("V1=", "v1="),
            "signature_mismatch",
        ),
        (
            "acme-signature",
            &value.replace("v1=", "v2="),
            "malformed_header",
        ),
        ("acme-signature", &format!(" {value} "), "ok"),
        ("acme-timestamp", "soon", "malformed_header"),
        ("acme-timestamp", "-1700000000", "malformed_header"),
        ("acme-timestamp", "99999999999999999999", "malformed_header"),
        ("acme-delivery", "", "missing_header"),
    ] {
        let headers = with(&good, name, header);
        assert_eq!(
            kind(verify(&scheme, &headers, BODY, T)),
            expected,
            "{name}: {header}"
        );
    }
    let too_big = Custom::new(scheme, SECRET)
        .unwrap()
        .with_options(VerifyOptions::default().max_body_bytes(8));
    let result = too_big.verify(&good, Bytes::from_static(BODY.as_bytes()), at(T));
    assert_eq!(kind(result), "body_too_large");
}

#[test]
fn ids_in_the_body_may_be_numbers_and_share_their_field() {
    let scheme = Scheme::builder("numbers")
        .signature("X-Signature", Algorithm::Sha256, Encoding::Base64)
        .signed("{body}")
        .id(Source::field("id"))
        .event_type(Source::field("id"))
        .retention(Retention::from_days(1))
        .build()
        .unwrap();
    for (body, expected) in [
        (r#"{"id":4012}"#, Ok("4012")),
        (r#"{"id":"abc"}"#, Ok("abc")),
        (r#"{"id":""}"#, Err("missing_dedupe_key")),
        (r#"{"id":null}"#, Err("missing_dedupe_key")),
        (r#"{"id":{"n":1}}"#, Err("missing_dedupe_key")),
        ("not json", Err("malformed_body")),
    ] {
        let result = verify(&scheme, &sign(&scheme, "", 0, body), body, T);
        let got = result
            .as_ref()
            .map(|d| d.dedupe_key().delivery_id())
            .map_err(VerifyError::kind);
        assert_eq!(got, expected, "{body}");
        if let Ok(delivery) = result {
            assert_eq!(delivery.event_type(), expected.ok(), "{body}");
        }
    }
}

#[test]
fn secrets_must_be_given() {
    let scheme = acme().build().unwrap();
    for secrets in [Vec::<&str>::new(), vec![" \n"], vec!["ok", ""]] {
        let err = Custom::new(scheme.clone(), secrets.clone()).unwrap_err();
        assert_eq!(err.kind(), "invalid_secret", "{secrets:?}");
        let err = CustomSigner::new(scheme.clone(), secrets.clone()).unwrap_err();
        assert_eq!(err.kind(), "invalid_secret", "{secrets:?}");
    }
    // a secret with a newline from a file: the hint says so
    let scheme = acme().build().unwrap();
    let headers = sign(&scheme, "dlv_1", T, BODY);
    let err = Custom::new(scheme, format!("{SECRET}\n"))
        .unwrap()
        .verify(&headers, Bytes::from_static(BODY.as_bytes()), at(T))
        .unwrap_err();
    assert!(err.to_string().contains("whitespace"), "{err}");
}

proptest! {
    #[test]
    fn any_one_byte_change_to_the_body_fails(at_index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let scheme = acme().build().unwrap();
        let headers = sign(&scheme, "dlv_1", T, BODY);
        let mut body = BODY.as_bytes().to_vec();
        let i = at_index.index(body.len());
        body[i] ^= flip;
        let result = Custom::new(scheme, SECRET).unwrap().verify(&headers, Bytes::from(body), at(T));
        prop_assert_eq!(kind(result), "signature_mismatch");
    }

    #[test]
    fn arbitrary_header_values_never_panic(
        signature in "[ -~]{0,200}",
        timestamp in "[ -~]{0,24}",
        id in "[ -~]{0,40}",
    ) {
        let scheme = acme().separator(',').build().unwrap();
        let mut headers = HeaderMap::new();
        for (name, value) in [("acme-signature", signature), ("acme-timestamp", timestamp), ("acme-delivery", id)] {
            if let Ok(value) = value.parse() {
                headers.insert(name, value);
            }
        }
        let _ = verify(&scheme, &headers, BODY, T);
    }
}
