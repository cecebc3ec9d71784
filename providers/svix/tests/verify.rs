//! Behaviour of the Svix provider and signer.

use std::time::Duration;

use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer, VerifiedDelivery, VerifyError, VerifyOptions};
use hookbox_svix::{MIN_RETENTION, NAME, Svix, SvixSigner};

// Svix's published example
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS: &str = "1614265330";
const NOW: i64 = 1_614_265_330;
const BODY: &[u8] = br#"{"test": 2432232314}"#;
const V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

const OTHER: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const WRONG_V1: &str = "v1,R3PTzyfHASBKHH98a7yexTwaJ4yNIcGhFQc1yuN+BPU=";

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).expect("in range")
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("valid name"),
            HeaderValue::from_str(value).expect("valid value"),
        );
    }
    map
}

/// The published delivery with its headers named `{prefix}-id` and so on.
fn published(prefix: &str, signature: &str) -> HeaderMap {
    headers(&[
        (&format!("{prefix}-id"), ID),
        (&format!("{prefix}-timestamp"), TS),
        (&format!("{prefix}-signature"), signature),
    ])
}

fn verify(provider: &Svix, headers: &HeaderMap, now: i64) -> Result<VerifiedDelivery, VerifyError> {
    provider.verify(headers, BODY.into(), at(now))
}

fn svix() -> Svix {
    Svix::new(SECRET).expect("valid secret")
}

#[test]
fn published_vector_verifies_under_svix_names() {
    let delivery = verify(&svix(), &published("svix", V1), NOW).unwrap();
    assert_eq!(delivery.provider(), "svix");
    assert_eq!(delivery.dedupe_key().to_string(), format!("svix/svix/{ID}"));
    assert_eq!(delivery.signed_at(), Some(at(NOW)));
    assert_eq!(delivery.event_type(), None);
    let mut kept: Vec<_> = delivery.headers().iter().map(|(k, _)| k.as_str()).collect();
    kept.sort_unstable();
    assert_eq!(kept, ["svix-id", "svix-signature", "svix-timestamp"]);
}

#[test]
fn published_vector_verifies_under_webhook_names() {
    let delivery = verify(&svix(), &published("webhook", V1), NOW).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), ID);
    let mut kept: Vec<_> = delivery.headers().iter().map(|(k, _)| k.as_str()).collect();
    kept.sort_unstable();
    assert_eq!(
        kept,
        ["webhook-id", "webhook-signature", "webhook-timestamp"]
    );
}

#[test]
fn each_header_is_looked_up_on_its_own() {
    let map = headers(&[
        ("svix-id", ID),
        ("webhook-timestamp", TS),
        ("Svix-Signature", V1),
    ]);
    let delivery = verify(&svix(), &map, NOW).unwrap();
    let mut kept: Vec<_> = delivery.headers().iter().map(|(k, _)| k.as_str()).collect();
    kept.sort_unstable();
    assert_eq!(kept, ["svix-id", "svix-signature", "webhook-timestamp"]);
}

#[test]
fn svix_names_win_over_webhook_names() {
    // the webhook-* copy is ignored when the svix-* header is there
    let mut map = published("svix", V1);
    map.insert("webhook-id", HeaderValue::from_static("msg_other"));
    map.insert("webhook-signature", HeaderValue::from_static("garbage"));
    let delivery = verify(&svix(), &map, NOW).unwrap();
    assert_eq!(delivery.dedupe_key().delivery_id(), ID);

    let mut map = published("webhook", V1);
    map.insert("svix-signature", HeaderValue::from_static(WRONG_V1));
    assert_eq!(
        verify(&svix(), &map, NOW).unwrap_err().kind(),
        "signature_mismatch"
    );
}

#[test]
fn missing_headers_are_named_with_the_svix_spelling() {
    for prefix in ["svix", "webhook"] {
        for (suffix, label) in [
            ("id", "svix-id"),
            ("timestamp", "svix-timestamp"),
            ("signature", "svix-signature"),
        ] {
            let mut map = published(prefix, V1);
            map.remove(format!("{prefix}-{suffix}").as_str());
            assert_eq!(
                verify(&svix(), &map, NOW).unwrap_err(),
                VerifyError::MissingHeader {
                    header: label.into()
                },
                "{prefix}-{suffix}"
            );
            // an empty value counts as absent
            map.insert(
                HeaderName::from_bytes(format!("{prefix}-{suffix}").as_bytes()).unwrap(),
                HeaderValue::from_static(""),
            );
            assert_eq!(
                verify(&svix(), &map, NOW).unwrap_err().kind(),
                "missing_header"
            );
        }
    }
}

#[test]
fn duplicated_or_non_ascii_headers_are_malformed() {
    for name in ["svix-id", "svix-timestamp", "svix-signature"] {
        let mut map = published("svix", V1);
        let value = map.get(name).unwrap().clone();
        map.append(HeaderName::from_static(name), value);
        let error = verify(&svix(), &map, NOW).unwrap_err();
        assert!(
            matches!(&error, VerifyError::MalformedHeader { header, .. } if header == name),
            "{error:?}"
        );

        let mut map = published("svix", V1);
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_bytes(b"\xe2\x9c\x93").unwrap(),
        );
        let error = verify(&svix(), &map, NOW).unwrap_err();
        assert!(
            matches!(&error, VerifyError::MalformedHeader { header, .. } if header == name),
            "{error:?}"
        );
    }
}

#[test]
fn malformed_signature_lists() {
    let v1a = "v1a,85l/pHBeSTHHHDwyBwzb9zzYzj9uOxJiLOr/40rmRkYQL5N/KbzIoQge1+0SHJX9QgZA47AQlldocsWRwbWcBw==";
    for list in [
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        v1a, // Svix has no v1a: an unknown version
        "v1,",
        "v1,%%%",
        "v1,YWJj",
        "v1,!!! v1,YWJj",
    ] {
        let error = verify(&svix(), &published("svix", list), NOW).unwrap_err();
        assert!(
            matches!(&error, VerifyError::MalformedHeader { header, .. } if header == "svix-signature"),
            "{list}: {error:?}"
        );
    }
    let error = verify(&svix(), &published("svix", "v2,abc"), NOW).unwrap_err();
    assert!(error.to_string().contains("no `v1,` signature"), "{error}");
}

#[test]
fn malformed_timestamps() {
    for value in ["now", "-1614265330", "1614265330.0", "99999999999999999999"] {
        let mut map = published("svix", V1);
        map.insert("svix-timestamp", HeaderValue::from_str(value).unwrap());
        let error = verify(&svix(), &map, NOW).unwrap_err();
        assert!(
            matches!(&error, VerifyError::MalformedHeader { header, .. } if header == "svix-timestamp"),
            "{value}: {error:?}"
        );
    }
}

#[test]
fn tolerance_edges_are_inclusive_in_both_directions() {
    let map = published("svix", V1);
    assert!(verify(&svix(), &map, NOW + 300).is_ok());
    assert!(verify(&svix(), &map, NOW - 300).is_ok());
    assert_eq!(
        verify(&svix(), &map, NOW + 301).unwrap_err().kind(),
        "timestamp_too_old"
    );
    assert_eq!(
        verify(&svix(), &map, NOW - 301).unwrap_err().kind(),
        "timestamp_in_future"
    );
}

#[test]
fn signature_is_checked_before_the_window() {
    let error = verify(&svix(), &published("svix", WRONG_V1), NOW + 10_000).unwrap_err();
    assert_eq!(error.kind(), "signature_mismatch");
}

#[test]
fn rotation_accepts_either_secret_and_either_signature() {
    let both = Svix::new([OTHER, SECRET]).unwrap();
    assert!(verify(&both, &published("svix", V1), NOW).is_ok());
    let list = format!("{WRONG_V1} {V1}");
    assert!(verify(&svix(), &published("svix", &list), NOW).is_ok());
    assert_eq!(
        verify(&Svix::new(OTHER).unwrap(), &published("svix", V1), NOW)
            .unwrap_err()
            .kind(),
        "signature_mismatch"
    );
}

#[test]
fn body_over_the_limit_is_refused_first() {
    let provider = svix().with_options(VerifyOptions::default().max_body_bytes(4));
    assert_eq!(
        verify(&provider, &HeaderMap::new(), NOW)
            .unwrap_err()
            .kind(),
        "body_too_large"
    );
}

#[test]
fn provider_facts() {
    let provider = svix();
    assert_eq!(provider.name(), NAME);
    assert_eq!(NAME, "svix");
    assert_eq!(
        MIN_RETENTION.as_duration(),
        Duration::from_secs(27 * 3600 + 35 * 60)
    );
    assert_eq!(provider.min_retention(), MIN_RETENTION);
    assert_eq!(
        provider.options().tolerance_duration(),
        Duration::from_secs(300)
    );
}

#[test]
fn secrets() {
    assert!(
        verify(
            &Svix::new("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
            &published("svix", V1),
            NOW
        )
        .is_ok()
    );
    let whpk = "whpk_GX9rI+FshTLGq8g4+s1ep4m+DHaykgM0A5v6iz02jWE=";
    let whsk = "whsk_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
    for (secret, needle) in [
        ("whsec_", "empty"),
        ("whsec_***", "base64"),
        ("", "blank"),
        ("  ", "blank"),
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", "whitespace"),
        (whpk, "svix does not send"),
        (whsk, "svix does not send"),
    ] {
        match Svix::new(secret) {
            Err(VerifyError::InvalidSecret { reason }) => {
                assert!(reason.contains(needle), "{secret:?}: {reason}")
            }
            other => panic!("{secret:?}: expected an invalid secret, got {other:?}"),
        }
        assert_eq!(
            SvixSigner::new(secret).unwrap_err().kind(),
            "invalid_secret",
            "{secret:?}"
        );
    }
    assert_eq!(
        Svix::new(Vec::<String>::new()).unwrap_err().kind(),
        "invalid_secret"
    );
}

#[test]
fn signer_emits_svix_headers_and_the_published_signature() {
    let ts: i64 = TS.parse().unwrap();
    let signed = SvixSigner::new(SECRET).unwrap().sign(ID, ts, BODY);
    let names: Vec<_> = signed.iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["svix-id", "svix-timestamp", "svix-signature"]);
    assert_eq!(signed.get("svix-timestamp"), Some(TS));
    assert_eq!(signed.get("svix-signature"), Some(V1));

    let rotating = SvixSigner::new([OTHER, SECRET]).unwrap().sign(ID, ts, BODY);
    let list = rotating.get("svix-signature").unwrap();
    assert_eq!(list.split(' ').count(), 2);
    assert!(list.ends_with(V1), "{list}");
    assert!(verify(&svix(), &rotating.to_header_map(), NOW).is_ok());
}

#[test]
fn non_utf8_body_round_trips() {
    let body = b"\x00\xff\xc3(\n";
    let signed = SvixSigner::new(SECRET).unwrap().sign("msg_bin", NOW, body);
    let delivery = svix()
        .verify(&signed.to_header_map(), body.as_slice().into(), at(NOW))
        .unwrap();
    assert_eq!(delivery.body().as_ref(), body);
}

#[test]
fn five_thousand_entries_with_the_valid_one_last() {
    let mut entries = vec![WRONG_V1; 4_999];
    entries.push(V1);
    assert!(verify(&svix(), &published("svix", &entries.join(" ")), NOW).is_ok());
}

#[test]
fn mismatch_hint_names_a_reserialized_body() {
    let signed = SvixSigner::new(SECRET)
        .unwrap()
        .sign(ID, NOW, b"{ \"a\": 1 }");
    let error = svix()
        .verify(
            &signed.to_header_map(),
            b"{\"a\":1}".as_slice().into(),
            at(NOW),
        )
        .unwrap_err();
    assert!(error.to_string().contains("re-serialized"), "{error}");
}

#[test]
fn only_canonical_base64_matches_as_in_svixs_libraries() {
    // svix-webhooks computes `v1,<base64>` and compares the text byte for byte
    // (rust/src/webhooks.rs `verify_inner`, go/webhook.go `hmac.Equal` on the
    // encoded strings), so another spelling of the same MAC is a mismatch
    let mac = V1.trim_start_matches("v1,");
    for (spelled, spelling) in [
        (mac.trim_end_matches('=').to_string(), "padding"),
        (mac.replace('+', "-").replace('/', "_"), "URL-safe"),
        // `E` is 0b000100; `F` sets a bit that 32 bytes leave unused
        (mac.replace("1OE=", "1OF="), "trailing bits"),
    ] {
        for prefix in ["svix", "webhook"] {
            let list = format!("v1,{spelled}");
            let error = verify(&svix(), &published(prefix, &list), NOW).unwrap_err();
            assert_eq!(error.kind(), "signature_mismatch", "{list}");
            assert!(error.to_string().contains(spelling), "{list}: {error}");
        }
    }
    assert!(verify(&svix(), &published("svix", V1), NOW).is_ok());
}
