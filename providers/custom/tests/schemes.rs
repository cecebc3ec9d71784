//! The shipped schemes (`schemes/*.toml`) against their providers' published
//! samples, and against the same scheme built in code.
#![cfg(feature = "toml")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Retention, Signer, VerifiedDelivery, VerifyError};
use hookbox_custom::{Algorithm, Custom, CustomSigner, Encoding, Scheme, Source};

fn razorpay() -> Scheme {
    Scheme::from_toml(include_str!("../schemes/razorpay.toml")).unwrap()
}

fn typeform() -> Scheme {
    Scheme::from_toml(include_str!("../schemes/typeform.toml")).unwrap()
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, value.parse().unwrap());
    }
    map
}

fn verify(
    provider: &Custom,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<VerifiedDelivery, VerifyError> {
    provider.verify(headers, Bytes::copy_from_slice(body), now())
}

fn kind(result: Result<VerifiedDelivery, VerifyError>) -> &'static str {
    result.map_or_else(|err| err.kind(), |_| "ok")
}

/// razorpay-python's `tests/mocks/fake_payment_authorized_webhook.json`, byte for
/// byte (two-space indents, a trailing newline): `mock_file` reads it whole.
const RAZORPAY_BODY: &str = r#"{
  "event": "payment.authorized",
  "entity": "event",
  "contains": [
    "payment"
  ],
  "payload": {
    "payment": {
      "entity": {
        "id": "pay_6koWN7bvxujzxM",
        "entity": "payment",
        "amount": 1000000,
        "currency": "INR",
        "status": "captured",
        "order_id": "order_100000000order",
        "international": false,
        "method": "card",
        "amount_refunded": 0,
        "refund_status": null,
        "captured": true,
        "description": "random description",
        "card_id": "card_6koWNAT6LASUqy",
        "bank": null,
        "wallet": null,
        "vpa": null,
        "email": "a@b.com",
        "contact": "+919999999999",
        "notes": {
          "merchant_order_id": "random order id"
        },
        "fee": 23000,
        "service_tax": 3000,
        "error_code": null,
        "error_description": null,
        "created_at": 1479978483
      }
    }
  },
  "created_at": 1400826760
}
"#;
/// razorpay-python's `tests/test_client_utility.py`, `test_verify_webhook_signature`:
/// the client's key secret `key_secret` (`tests/helpers.py`) signs the body above.
const RAZORPAY_SECRET: &str = "key_secret";
const RAZORPAY_SIGNATURE: &str = "d60e67fd884556c045e9be7dad57903e33efc7172c17c6e3ef77db42d2b366e9";
/// Any id: the SDK's sample has no headers, and Razorpay does not sign this one.
const RAZORPAY_EVENT: &str = "Fv3WQrQ1fGnh6r";

fn razorpay_headers(signature: &str) -> HeaderMap {
    headers(&[
        ("x-razorpay-signature", signature),
        ("x-razorpay-event-id", RAZORPAY_EVENT),
    ])
}

#[test]
fn the_razorpay_file_is_the_scheme_in_code() {
    let in_code = Scheme::builder("razorpay")
        .signature("X-Razorpay-Signature", Algorithm::Sha256, Encoding::Hex)
        .signed("{body}")
        .id(Source::header("X-Razorpay-Event-Id"))
        .event_type(Source::field("event"))
        .retention(Retention::from_days(15))
        .build()
        .unwrap();
    assert_eq!(razorpay(), in_code);
}

#[test]
fn razorpay_s_published_sample_verifies() {
    let provider = Custom::new(razorpay(), RAZORPAY_SECRET).unwrap();
    let delivery = verify(
        &provider,
        &razorpay_headers(RAZORPAY_SIGNATURE),
        RAZORPAY_BODY.as_bytes(),
    )
    .unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), RAZORPAY_EVENT);
    assert_eq!(delivery.dedupe_key().provider(), "razorpay");
    assert_eq!(delivery.dedupe_key().source(), "razorpay");
    assert_eq!(delivery.event_type(), Some("payment.authorized"));
    assert_eq!(delivery.signed_at(), None);
    assert_eq!(provider.name(), "razorpay");
    assert_eq!(provider.min_retention(), Retention::from_days(15));

    // the signer writes exactly the published header
    let signed = CustomSigner::new(razorpay(), RAZORPAY_SECRET)
        .unwrap()
        .sign(RAZORPAY_EVENT, 0, RAZORPAY_BODY.as_bytes());
    assert_eq!(signed.to_header_map(), razorpay_headers(RAZORPAY_SIGNATURE));

    // during a rotation, the old secret still verifies older events
    let both = Custom::new(razorpay(), ["a-new-secret", RAZORPAY_SECRET]).unwrap();
    assert_eq!(
        kind(verify(
            &both,
            &razorpay_headers(RAZORPAY_SIGNATURE),
            RAZORPAY_BODY.as_bytes()
        )),
        "ok"
    );
}

#[test]
fn razorpay_tampering_is_refused_and_explained() {
    let provider = Custom::new(razorpay(), RAZORPAY_SECRET).unwrap();
    let good = razorpay_headers(RAZORPAY_SIGNATURE);
    let tampered = RAZORPAY_BODY.replace("1000000", "9000000");
    assert_eq!(
        kind(verify(&provider, &good, tampered.as_bytes())),
        "signature_mismatch"
    );

    // the body trimmed by a framework: the hint says so
    let err = verify(&provider, &good, RAZORPAY_BODY.trim_end().as_bytes()).unwrap_err();
    assert!(
        matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("trailing newline")),
        "{err}"
    );

    // the same MAC in upper-case hex is not what Razorpay sends
    let upper = razorpay_headers(&RAZORPAY_SIGNATURE.to_uppercase());
    let err = verify(&provider, &upper, RAZORPAY_BODY.as_bytes()).unwrap_err();
    assert!(
        matches!(&err, VerifyError::SignatureMismatch { hint } if hint.contains("upper-case hex")),
        "{err}"
    );

    // the SDK's negative case: a value that is no MAC at all
    let err = verify(
        &provider,
        &razorpay_headers("test_signature"),
        RAZORPAY_BODY.as_bytes(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "malformed_header", "{err}");
    assert!(err.to_string().contains("X-Razorpay-Signature"), "{err}");

    let wrong = Custom::new(razorpay(), "not-the-secret").unwrap();
    assert_eq!(
        kind(verify(&wrong, &good, RAZORPAY_BODY.as_bytes())),
        "signature_mismatch"
    );
    let no_id = headers(&[("x-razorpay-signature", RAZORPAY_SIGNATURE)]);
    let err = verify(&provider, &no_id, RAZORPAY_BODY.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::MissingHeader {
            header: "X-Razorpay-Event-Id".into()
        }
    );
}

/// Typeform's js-api-client, `tests/unit/verify-signature.test.ts`: `verifySignature`
/// accepts this header for `JSON.stringify({ foo: 'bar' })` and this secret.
const TYPEFORM_SECRET: &str = "my-webook-secret";
const TYPEFORM_BODY: &str = r#"{"foo":"bar"}"#;
const TYPEFORM_SIGNATURE: &str = "sha256=X2b3nUhiGjaWHxmPO/YQzUvHXBNac4gPjZ5/bjXrhQY=";

/// A payload shaped as Typeform's example payload (its first keys, shortened).
const TYPEFORM_EVENT: &str = r#"{"event_id":"LtWXD3crgy","event_type":"form_response","form_response":{"form_id":"lT4Z3j","token":"a3a12ec67a1365927098a606107fac15","submitted_at":"2018-01-18T18:17:02Z","answers":[]}}"#;

#[test]
fn the_typeform_file_is_the_scheme_in_code() {
    let in_code = Scheme::builder("typeform")
        .signature("Typeform-Signature", Algorithm::Sha256, Encoding::Base64)
        .prefix("sha256=")
        .signed("{body}")
        .id(Source::field("event_id"))
        .event_type(Source::field("event_type"))
        .retention(Retention::from_days(1))
        .build()
        .unwrap();
    assert_eq!(typeform(), in_code);
}

#[test]
fn typeform_s_published_sample_verifies() {
    let provider = Custom::new(typeform(), TYPEFORM_SECRET).unwrap();
    let sample = headers(&[("typeform-signature", TYPEFORM_SIGNATURE)]);
    // the signature matches; the sample's body then has no `event_id` to dedupe on
    let err = verify(&provider, &sample, TYPEFORM_BODY.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::MissingDedupeKey {
            field: "event_id".into()
        }
    );
    let signed = CustomSigner::new(typeform(), TYPEFORM_SECRET)
        .unwrap()
        .sign("", 0, TYPEFORM_BODY.as_bytes());
    assert_eq!(signed.to_header_map(), sample);

    // the SDK's negative case
    let err = verify(
        &provider,
        &headers(&[("typeform-signature", "sha256=foobar123")]),
        TYPEFORM_BODY.as_bytes(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "malformed_header", "{err}");

    // a real payload, signed as Typeform signs it
    let signed = CustomSigner::new(typeform(), TYPEFORM_SECRET)
        .unwrap()
        .sign("ignored", 0, TYPEFORM_EVENT.as_bytes())
        .to_header_map();
    let delivery = verify(&provider, &signed, TYPEFORM_EVENT.as_bytes()).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), "LtWXD3crgy");
    assert_eq!(delivery.dedupe_key().provider(), "typeform");
    assert_eq!(delivery.event_type(), Some("form_response"));
}

#[test]
fn typeform_tampering_and_other_spellings_are_refused() {
    let provider = Custom::new(typeform(), TYPEFORM_SECRET).unwrap();
    let good = headers(&[("typeform-signature", TYPEFORM_SIGNATURE)]);
    assert_eq!(
        kind(verify(&provider, &good, br#"{"foo":"baz"}"#)),
        "signature_mismatch"
    );
    let mac = TYPEFORM_SIGNATURE.strip_prefix("sha256=").unwrap();
    for (value, expected) in [
        // no prefix: Typeform always sends it
        (mac.to_string(), "malformed_header"),
        (format!("sha1={mac}"), "malformed_header"),
        // unpadded or URL-safe base64: the right MAC, the wrong spelling
        (
            format!("sha256={}", mac.trim_end_matches('=')),
            "signature_mismatch",
        ),
        (
            format!("sha256={}", mac.replace('/', "_")),
            "signature_mismatch",
        ),
    ] {
        let result = verify(
            &provider,
            &headers(&[("typeform-signature", &value)]),
            TYPEFORM_BODY.as_bytes(),
        );
        assert_eq!(kind(result), expected, "{value}");
    }
    let err = verify(
        &provider,
        &headers(&[(
            "typeform-signature",
            &format!("sha256={}", mac.trim_end_matches('=')),
        )]),
        TYPEFORM_BODY.as_bytes(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("padding"), "{err}");
}

#[test]
fn the_shipped_schemes_have_no_timestamp() {
    for scheme in [razorpay(), typeform()] {
        assert_eq!(scheme.timestamp(), None, "{}", scheme.name());
        assert_eq!(scheme.tolerance(), None::<Duration>, "{}", scheme.name());
    }
}
