//! Every impossible scheme is refused when it is built, with a [`SchemeError`] a
//! caller can match on and a message that says what to write instead.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hookbox_core::{Retention, VerifyError};
use hookbox_custom::{Algorithm, Encoding, Role, Scheme, SchemeBuilder, SchemeError, Source, Unit};

/// A valid scheme that each case breaks in one way.
fn valid() -> SchemeBuilder {
    Scheme::builder("acme")
        .signature("Acme-Signature", Algorithm::Sha256, Encoding::Base64)
        .signed("{body}")
        .id(Source::header("Acme-Delivery"))
        .retention(Retention::from_days(1))
}

fn timestamped() -> SchemeBuilder {
    valid()
        .signed("{timestamp}.{body}")
        .timestamp(Source::header("Acme-Timestamp"), Unit::Seconds)
        .tolerance(Duration::from_secs(300))
}

#[test]
fn the_valid_schemes_build() {
    let scheme = valid().build().unwrap();
    assert_eq!(scheme.name(), "acme");
    assert_eq!(scheme.signature_header(), "Acme-Signature");
    assert_eq!(scheme.algorithm(), Algorithm::Sha256);
    assert_eq!(scheme.encoding(), Encoding::Base64);
    assert_eq!(scheme.prefix(), None);
    assert_eq!(scheme.separator(), None);
    assert_eq!(scheme.signed(), "{body}");
    assert_eq!(scheme.id(), &Source::header("Acme-Delivery"));
    assert_eq!(scheme.event_type(), None);
    assert_eq!(scheme.retention(), Retention::from_days(1));
    let scheme = timestamped().prefix("").build().unwrap();
    assert_eq!(scheme.prefix(), None);
    assert_eq!(
        scheme.timestamp(),
        Some((&Source::header("Acme-Timestamp"), Unit::Seconds))
    );
    assert_eq!(scheme.tolerance(), Some(Duration::from_secs(300)));
    let scheme = valid()
        .signed("{url}{body}")
        .url("https://example.com/hook")
        .build()
        .unwrap();
    assert_eq!(scheme.url(), Some("https://example.com/hook"));
}

#[test]
fn every_impossible_scheme_is_a_typed_error() {
    let cases: Vec<(SchemeBuilder, SchemeError, &str)> = vec![
        (
            valid().signed("{id}"),
            SchemeError::TemplateWithoutBody,
            "not be authenticated",
        ),
        (
            valid().signed("{timestamp}.{body}"),
            SchemeError::TimestampWithoutSource,
            "no timestamp is configured",
        ),
        (
            timestamped().timestamp(Source::field("ts"), Unit::Seconds),
            SchemeError::SignedFieldTimestamp { field: "ts".into() },
            "must come from a header",
        ),
        (
            valid().signed("{id}.{body}").id(Source::field("event_id")),
            SchemeError::SignedFieldId {
                field: "event_id".into(),
            },
            "must come from a header",
        ),
        (
            valid().signed("{url}{body}"),
            SchemeError::UrlWithoutUrl,
            "no URL is configured",
        ),
        (
            valid().url("https://example.com/hook"),
            SchemeError::UrlNotSigned,
            "never be checked",
        ),
        (
            valid().signed("{url}{body}").url("example.com/hook"),
            SchemeError::InvalidUrl {
                reason: "it does not start with `https://` or `http://`",
            },
            "https://",
        ),
        (
            valid().signed("{url}{body}").url("https:///hook"),
            SchemeError::InvalidUrl {
                reason: "it has no host",
            },
            "no host",
        ),
        (
            valid()
                .signed("{url}{body}")
                .url("https://example.com/hook\n"),
            SchemeError::InvalidUrl {
                reason: "it contains whitespace or control characters (a newline from a file?)",
            },
            "whitespace",
        ),
        (
            valid().timestamp(Source::header("Acme-Timestamp"), Unit::Seconds),
            SchemeError::TimestampWithoutTolerance,
            "tolerance_secs",
        ),
        (
            valid().tolerance(Duration::from_secs(300)),
            SchemeError::ToleranceWithoutTimestamp,
            "without a timestamp",
        ),
        (
            timestamped().tolerance(Duration::ZERO),
            SchemeError::ZeroTolerance,
            "zero",
        ),
        (
            valid().signature("", Algorithm::Sha256, Encoding::Hex),
            SchemeError::EmptyHeaderName {
                role: Role::Signature,
            },
            "signature header name is empty",
        ),
        (
            valid().signature("Acme Signature", Algorithm::Sha256, Encoding::Hex),
            SchemeError::InvalidHeaderName {
                role: Role::Signature,
                header: "Acme Signature".into(),
            },
            "not a valid HTTP header name",
        ),
        (
            valid().id(Source::header("")),
            SchemeError::EmptyHeaderName { role: Role::Id },
            "id header",
        ),
        (
            valid().event_type(Source::header("Acme:Event")),
            SchemeError::InvalidHeaderName {
                role: Role::EventType,
                header: "Acme:Event".into(),
            },
            "event type header",
        ),
        (
            valid().id(Source::field("")),
            SchemeError::EmptyFieldName { role: Role::Id },
            "id field name is empty",
        ),
        (
            valid().id(Source::field("data.id")),
            SchemeError::NestedField {
                role: Role::Id,
                field: "data.id".into(),
            },
            "top-level",
        ),
        (
            valid().id(Source::header("acme-signature")),
            SchemeError::HeaderReused {
                header: "acme-signature".into(),
                first: Role::Signature,
                second: Role::Id,
            },
            "both the signature and the id header",
        ),
        (
            timestamped().event_type(Source::header("Acme-Timestamp")),
            SchemeError::HeaderReused {
                header: "Acme-Timestamp".into(),
                first: Role::Timestamp,
                second: Role::EventType,
            },
            "both the timestamp and the event type header",
        ),
        (
            valid().prefix("sha256 ="),
            SchemeError::InvalidPrefix {
                prefix: "sha256 =".into(),
                reason: "it has characters other than visible ASCII (no spaces)",
            },
            "visible ASCII",
        ),
        (
            valid().separator('='),
            SchemeError::InvalidSeparator {
                separator: '=',
                reason: "it appears inside base64 MACs",
            },
            "base64",
        ),
        (
            valid().separator('a'),
            SchemeError::InvalidSeparator {
                separator: 'a',
                reason: "it is not ASCII punctuation or a space",
            },
            "punctuation",
        ),
        (
            valid().prefix("v1,").separator(','),
            SchemeError::InvalidSeparator {
                separator: ',',
                reason: "it appears in the prefix",
            },
            "prefix",
        ),
        (
            valid().signed("{body}.{ts}"),
            SchemeError::UnknownPlaceholder {
                placeholder: "{ts}".into(),
            },
            "`{ts}`",
        ),
        (
            valid().signed("{timestamp.{body}"),
            SchemeError::UnknownPlaceholder {
                placeholder: "{timestamp.{body}".into(),
            },
            "placeholders are",
        ),
        (
            valid().signed("{body}.{id"),
            SchemeError::UnterminatedPlaceholder { at: 7 },
            "byte 7",
        ),
        (
            valid().retention(Retention::from_secs(0)),
            SchemeError::InvalidRetention {
                reason: "it is zero: a retry would be applied again",
            },
            "zero",
        ),
        (
            Scheme::builder("Acme").signed("{body}"),
            SchemeError::InvalidName {
                name: "Acme".into(),
                reason: "it does not start with a lower-case letter",
            },
            "lower-case",
        ),
        (
            Scheme::builder(""),
            SchemeError::InvalidName {
                name: String::new(),
                reason: "it is empty",
            },
            "empty",
        ),
        (
            Scheme::builder("acme billing"),
            SchemeError::InvalidName {
                name: "acme billing".into(),
                reason: "it has characters other than lower-case letters, digits, `-` and `_`",
            },
            "dedupe key",
        ),
        (
            Scheme::builder("a".repeat(65)),
            SchemeError::InvalidName {
                name: "a".repeat(65),
                reason: "it is longer than 64 characters",
            },
            "64",
        ),
        (
            Scheme::builder("stripe"),
            SchemeError::ReservedName {
                name: "stripe".into(),
            },
            "hookbox-stripe",
        ),
        (
            Scheme::builder("acme"),
            SchemeError::MissingSignature,
            "no signature header",
        ),
        (
            Scheme::builder("acme").signature("S", Algorithm::Sha1, Encoding::Hex),
            SchemeError::MissingTemplate,
            "{body}",
        ),
        (
            Scheme::builder("acme")
                .signature("S", Algorithm::Sha1, Encoding::Hex)
                .signed("{body}"),
            SchemeError::MissingId,
            "every retry",
        ),
        (
            Scheme::builder("acme")
                .signature("S", Algorithm::Sha1, Encoding::Hex)
                .signed("{body}")
                .id(Source::header("I")),
            SchemeError::MissingRetention,
            "retention_days",
        ),
    ];
    for (builder, expected, says) in cases {
        let err = builder.build().unwrap_err();
        assert_eq!(err, expected);
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[test]
fn a_scheme_error_is_a_configuration_error_to_an_edge() {
    let err: VerifyError = valid().signed("{id}").build().unwrap_err().into();
    assert_eq!(err.kind(), "invalid_config");
    assert_eq!(err.http_status(), 500);
    assert!(err.to_string().contains("{body}"), "{err}");
}

/// The TOML reader's own errors, and the builder's through it.
#[cfg(feature = "toml")]
mod toml {
    use super::*;

    const VALID: &str = r#"
        name = "acme"
        signed = "{timestamp}.{body}"
        retention_days = 3
        signature = { header = "Acme-Signature", algorithm = "sha256", encoding = "hex", prefix = "v1=", separator = " " }
        id = { header = "Acme-Delivery" }
        event_type = { field = "type" }
        timestamp = { header = "Acme-Timestamp", unit = "milliseconds", tolerance_secs = 300 }
    "#;

    fn error(text: &str) -> SchemeError {
        Scheme::from_toml(text).unwrap_err()
    }

    #[test]
    fn a_complete_file_is_the_scheme_in_code() {
        let in_code = Scheme::builder("acme")
            .signature("Acme-Signature", Algorithm::Sha256, Encoding::Hex)
            .prefix("v1=")
            .separator(' ')
            .signed("{timestamp}.{body}")
            .id(Source::header("Acme-Delivery"))
            .event_type(Source::field("type"))
            .timestamp(Source::header("Acme-Timestamp"), Unit::Milliseconds)
            .tolerance(Duration::from_secs(300))
            .retention(Retention::from_days(3))
            .build()
            .unwrap();
        assert_eq!(Scheme::from_toml(VALID).unwrap(), in_code);
        let url = VALID.replace("{timestamp}.{body}", "{url}{timestamp}.{body}")
            + "url = \"https://example.com/hook\"\n";
        assert_eq!(
            Scheme::from_toml(&url).unwrap().url(),
            Some("https://example.com/hook")
        );
    }

    #[test]
    fn unknown_names_are_typed_errors() {
        assert_eq!(
            error(&VALID.replace("\"sha256\"", "\"sha3\"")),
            SchemeError::UnknownAlgorithm {
                name: "sha3".into()
            }
        );
        assert_eq!(
            error(&VALID.replace("\"hex\"", "\"HEX\"")),
            SchemeError::UnknownEncoding { name: "HEX".into() }
        );
        assert_eq!(
            error(&VALID.replace("\"milliseconds\"", "\"ms\"")),
            SchemeError::UnknownUnit { name: "ms".into() }
        );
        let err = error(&VALID.replace("\"sha256\"", "\"md5\""));
        assert!(err.to_string().contains("sha1, sha256 or sha512"), "{err}");
    }

    #[test]
    fn sources_name_exactly_one_place() {
        assert_eq!(
            error(&VALID.replace(
                "id = { header = \"Acme-Delivery\" }",
                "id = { header = \"Acme-Delivery\", field = \"id\" }"
            )),
            SchemeError::AmbiguousSource { role: Role::Id }
        );
        assert_eq!(
            error(&VALID.replace("event_type = { field = \"type\" }", "event_type = {}")),
            SchemeError::AmbiguousSource {
                role: Role::EventType
            }
        );
        assert_eq!(
            error(&VALID.replace("header = \"Acme-Timestamp\", ", "")),
            SchemeError::AmbiguousSource {
                role: Role::Timestamp
            }
        );
    }

    #[test]
    fn the_builder_s_errors_come_through() {
        assert_eq!(
            error(&VALID.replace(", tolerance_secs = 300", "")),
            SchemeError::TimestampWithoutTolerance
        );
        assert_eq!(
            error(&VALID.replace("{timestamp}.{body}", "{timestamp}")),
            SchemeError::TemplateWithoutBody
        );
        assert_eq!(
            error(&VALID.replace("retention_days = 3", "")),
            SchemeError::MissingRetention
        );
        assert!(matches!(
            error(&VALID.replace("retention_days = 3", "retention_days = 0")),
            SchemeError::InvalidRetention { .. }
        ));
        assert!(matches!(
            error(&VALID.replace("retention_days = 3", "retention_days = 99999999999999")),
            SchemeError::InvalidRetention { .. }
        ));
        assert_eq!(
            error(&VALID.replace("separator = \" \"", "separator = \", \"")),
            SchemeError::SeparatorNotOneCharacter
        );
        assert_eq!(
            error(&VALID.replace("separator = \" \"", "separator = \"\"")),
            SchemeError::SeparatorNotOneCharacter
        );
        assert_eq!(
            error("name = \"acme\"\nsigned = \"{body}\""),
            SchemeError::MissingSignature
        );
    }

    #[test]
    fn what_is_not_a_scheme_file_says_where() {
        for (text, says) in [
            (
                VALID.replace("retention_days", "retention"),
                "unknown field `retention`",
            ),
            (
                VALID.replace("prefix = ", "prefixes = "),
                "unknown field `prefixes`",
            ),
            (VALID.replace("name = \"acme\"", ""), "missing field `name`"),
            (
                VALID.replace(", algorithm = \"sha256\"", ""),
                "missing field `algorithm`",
            ),
            (
                VALID.replace("retention_days = 3", "retention_days = \"3\""),
                "invalid type",
            ),
            ("name = \"acme".to_string(), "line 1"),
            (String::new(), "missing field `name`"),
        ] {
            let err = error(&text);
            assert!(
                matches!(&err, SchemeError::Toml { message } if message.contains(says)),
                "{says}: {err}"
            );
        }
    }
}
