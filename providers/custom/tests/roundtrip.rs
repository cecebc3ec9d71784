//! Whatever a valid scheme says, what `CustomSigner` signs `Custom` verifies, and a
//! change to the body or to a signed header is refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Retention, Signer};
use hookbox_custom::{Algorithm, Custom, CustomSigner, Encoding, Scheme, Source, Unit};
use proptest::prelude::*;

const T: i64 = 1_700_000_000;

/// A random scheme, with the id, timestamp and event type in headers or in the body.
#[derive(Debug, Clone)]
struct Case {
    algorithm: Algorithm,
    encoding: Encoding,
    prefix: Option<String>,
    separator: Option<char>,
    /// Literal text around the placeholders.
    literals: [String; 3],
    id_in_header: bool,
    /// `None`: no timestamp; `Some(true)`: a header.
    timestamp_in_header: Option<bool>,
    unit: Unit,
    event_in_header: Option<bool>,
    /// Sign `{id}` / `{timestamp}` / `{url}` where the sources allow.
    sign_id: bool,
    sign_timestamp: bool,
    sign_url: bool,
    secrets: Vec<String>,
    id: String,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            prop_oneof![
                Just(Algorithm::Sha1),
                Just(Algorithm::Sha256),
                Just(Algorithm::Sha512)
            ],
            prop_oneof![Just(Encoding::Hex), Just(Encoding::Base64)],
            proptest::option::of("[a-z0-9]{1,6}[=:]"),
            proptest::option::of(prop_oneof![Just(','), Just(' '), Just(';')]),
            proptest::array::uniform3("[ -z|~]{0,4}"),
        ),
        (
            any::<bool>(),
            proptest::option::of(any::<bool>()),
            prop_oneof![Just(Unit::Seconds), Just(Unit::Milliseconds)],
            proptest::option::of(any::<bool>()),
            any::<(bool, bool, bool)>(),
            proptest::collection::vec("[!-~]{1,24}", 1..4),
            "[A-Za-z0-9_-]{1,30}",
        ),
    )
        .prop_map(
            |(
                (algorithm, encoding, prefix, separator, literals),
                (id_in_header, timestamp_in_header, unit, event_in_header, signs, secrets, id),
            )| Case {
                algorithm,
                encoding,
                prefix,
                separator,
                literals,
                id_in_header,
                timestamp_in_header,
                unit,
                event_in_header,
                sign_id: signs.0,
                sign_timestamp: signs.1,
                sign_url: signs.2,
                secrets,
                id,
            },
        )
}

impl Case {
    fn scheme(&self) -> Scheme {
        let source = |in_header: bool, header: &str, field: &str| {
            if in_header {
                Source::header(header)
            } else {
                Source::field(field)
            }
        };
        let [a, b, c] = &self.literals;
        let mut template = String::new();
        if self.sign_url {
            template.push_str("{url}");
        }
        template.push_str(a);
        if self.sign_id && self.id_in_header {
            template.push_str("{id}");
        }
        template.push_str(b);
        if self.sign_timestamp && self.timestamp_in_header == Some(true) {
            template.push_str("{timestamp}");
        }
        template.push_str(c);
        template.push_str("{body}");
        // literal braces are placeholders' delimiters, so the strategy avoids `{`
        let mut builder = Scheme::builder("roundtrip")
            .signature("X-Rt-Signature", self.algorithm, self.encoding)
            .signed(template)
            .id(source(self.id_in_header, "X-Rt-Id", "rt_id"))
            .retention(Retention::from_hours(6));
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix.clone());
        }
        if let Some(separator) = self.separator {
            builder = builder.separator(separator);
        }
        if let Some(in_header) = self.timestamp_in_header {
            builder = builder
                .timestamp(source(in_header, "X-Rt-Timestamp", "rt_ts"), self.unit)
                .tolerance(Duration::from_secs(60));
        }
        if let Some(in_header) = self.event_in_header {
            builder = builder.event_type(source(in_header, "X-Rt-Event", "rt_event"));
        }
        if self.sign_url {
            builder = builder.url("https://example.com/hooks?x=1");
        }
        builder.build().unwrap()
    }

    /// The secrets a signer takes: one unless the header holds several.
    fn signing_secrets(&self) -> Vec<String> {
        if self.separator.is_some() {
            self.secrets.clone()
        } else {
            self.secrets[..1].to_vec()
        }
    }

    /// A body holding the values the scheme reads from it.
    fn body(&self) -> String {
        let ts = match self.unit {
            Unit::Seconds => T.to_string(),
            Unit::Milliseconds => format!("{T}123"),
        };
        format!(
            r#"{{"rt_id":"{}","rt_ts":{ts},"rt_event":"thing.happened","data":{{"n":[1,2,3]}}}}"#,
            self.id
        )
    }
}

fn verify(scheme: &Scheme, secrets: &[String], headers: &HeaderMap, body: &str) -> &'static str {
    Custom::new(scheme.clone(), secrets.to_vec())
        .unwrap()
        .verify(
            headers,
            Bytes::copy_from_slice(body.as_bytes()),
            OffsetDateTime::from_unix_timestamp(T).unwrap(),
        )
        .map_or_else(|err| err.kind(), |_| "ok")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn what_the_signer_signs_the_verifier_accepts(case in case()) {
        let scheme = case.scheme();
        let body = case.body();
        let signer = CustomSigner::new(scheme.clone(), case.signing_secrets())
            .unwrap()
            .event_type("thing.happened");
        let headers = signer.sign(&case.id, T, body.as_bytes()).to_header_map();

        // every secret the verifier holds is tried; any one of them signed
        let provider = Custom::new(scheme.clone(), case.secrets.clone()).unwrap();
        let delivery = provider
            .verify(&headers, Bytes::from(body.clone()), OffsetDateTime::from_unix_timestamp(T).unwrap())
            .unwrap();
        prop_assert_eq!(delivery.dedupe_key().delivery_id(), case.id.as_str());
        prop_assert_eq!(delivery.dedupe_key().provider(), "roundtrip");
        prop_assert_eq!(provider.name(), "roundtrip");
        let event = case.event_in_header.map(|_| "thing.happened");
        prop_assert_eq!(delivery.event_type(), event);
        let signed_at = case.timestamp_in_header.map(|_| T);
        prop_assert_eq!(delivery.signed_at().map(|t| t.unix_timestamp()), signed_at);

        // a verifier with only the last secret accepts a header that carries it
        let last = &case.secrets[case.secrets.len() - 1..];
        let signed_with_last = case.separator.is_some() || last[0] == case.secrets[0];
        let expected = if signed_with_last { "ok" } else { "signature_mismatch" };
        prop_assert_eq!(verify(&scheme, last, &headers, &body), expected);

        // another body, or another value in a signed header, is refused
        let tampered = body.replace("[1,2,3]", "[1,2,4]");
        prop_assert_eq!(verify(&scheme, &case.secrets, &headers, &tampered), "signature_mismatch");
        if case.sign_id && case.id_in_header {
            let mut other = headers.clone();
            other.insert("x-rt-id", format!("{}x", case.id).parse().unwrap());
            prop_assert_eq!(verify(&scheme, &case.secrets, &other, &body), "signature_mismatch");
        }
        if case.sign_timestamp && case.timestamp_in_header == Some(true) {
            let mut other = headers.clone();
            let moved = headers["x-rt-timestamp"].to_str().unwrap().replacen('1', "2", 1);
            other.insert("x-rt-timestamp", moved.parse().unwrap());
            prop_assert_eq!(verify(&scheme, &case.secrets, &other, &body), "signature_mismatch");
        }
    }
}
