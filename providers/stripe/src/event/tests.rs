//! The scanner against hand-written bodies; the `stripe_event` fuzz target and the
//! crate's tests compare it with `serde_json`.

use std::borrow::Cow;

use super::scan::{Scanner, parse};

fn id(body: &[u8]) -> Option<String> {
    parse(body).unwrap().id.map(Cow::into_owned)
}

#[test]
fn reads_the_three_fields_and_skips_the_rest() {
    let body = br#"{"id":"evt_1","object":"event","data":{"object":{"amount":5,"id":"pi_1","nested":{"id":"no"}},"previous_attributes":{}},"type":"charge.succeeded"}"#;
    let event = parse(body).unwrap();
    assert_eq!(event.id.as_deref(), Some("evt_1"));
    assert_eq!(event.kind.as_deref(), Some("charge.succeeded"));
    assert_eq!(event.object_id.as_deref(), Some("pi_1"));
    assert!(matches!(event.id, Some(Cow::Borrowed(_))), "no copy");
}

#[test]
fn escaped_strings_are_unescaped() {
    assert_eq!(
        id(br#"{"id":"evt_\u0031\"x"}"#).as_deref(),
        Some("evt_1\"x")
    );
    assert_eq!(id(br#"{"i\u0064":"evt_2"}"#).as_deref(), Some("evt_2"));
    assert_eq!(
        id(br#"{"id":"\ud83d\ude00 \u00e9\n"}"#).as_deref(),
        Some("\u{1f600} \u{e9}\n")
    );
    assert_eq!(
        id("{\"id\":\"caf\u{e9} \\t\"}".as_bytes()).as_deref(),
        Some("caf\u{e9} \t")
    );
}

#[test]
fn values_of_the_wrong_shape_read_as_absent() {
    for body in [
        &br#"{"id":5,"type":null,"data":[{"object":{"id":"x"}}]}"#[..],
        br#"{"id":{"id":"x"},"type":["t"],"data":{"object":"pi_1"}}"#,
        br#"["evt_1","charge.succeeded"]"#,
        br#""evt_1""#,
        b"17",
        b"null",
        b" {} ",
    ] {
        let event = parse(body).unwrap();
        assert_eq!(event.id, None, "{}", String::from_utf8_lossy(body));
        assert_eq!(event.kind, None);
        assert_eq!(event.object_id, None);
    }
}

#[test]
fn not_json_or_ambiguous_ids_are_errors() {
    for body in [
        &b""[..],
        b"   ",
        b"{",
        b"[1,2",
        b"{\"a\":1,}",
        b"[1,]",
        b"{\"a\" 1}",
        b"{1:2}",
        b"[01]",
        b"[1.]",
        b"[-]",
        b"[1e]",
        b"[tru]",
        b"[nul]",
        b"{\"a\":\"\\x\"}",
        b"{\"a\":\"\\u12\"}",
        b"{\"a\":\"tab\there\"}",
        b"{\"a\":\"\xff\"}",
        b"\xef\xbb\xbf{}",
        br#"{"id":"evt_1"} trailing"#,
        br#"{"id":"evt_1"} {}"#,
        br#"{"id":"evt_1","id":"evt_2"}"#,
        br#"{"id":1,"i\u0064":2}"#,
        br#"{"data":{"object":{"id":"a","id":"b"}}}"#,
        br#"{"data":{"object":1,"object":2}}"#,
        br#"{"type":"a","type":"b"}"#,
        br#"{"data":1,"data":2}"#,
        br#"{"id":"\ud800"}"#,
        br#"{"\udc00":1}"#,
        br#"{"id":1e400}"#,
        br#"{"data":{"object":{"id":-1e999}}}"#,
        b"1e400",
        b"\"\\ud800\"",
        b"{\"id\":\"evt_\xff\"}",
    ] {
        assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn skipped_strings_and_numbers_are_only_checked_for_form() {
    for body in [
        &br#"{"x":"\ud800","id":"evt_1"}"#[..],
        br#"{"x":{"\udc00":1e400},"id":"evt_1"}"#,
        br#"{"data":{"x":[1e400]},"id":"evt_1"}"#,
        br#"{"id":"evt_1","data":{"object":{"nested":{"id":"\ud800"}}}}"#,
    ] {
        assert_eq!(
            id(body).as_deref(),
            Some("evt_1"),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    // duplicates of other keys are fine, as is a second `object` outside `data`
    assert_eq!(
        id(br#"{"a":1,"a":2,"object":1,"object":2,"id":"e"}"#).as_deref(),
        Some("e")
    );
    // an object where the id belongs: its keys are decoded, duplicates allowed
    assert!(parse(br#"{"id":{"a":1,"a":2}}"#).unwrap().id.is_none());
    assert!(parse(br#"{"id":{"\ud800":1}}"#).is_err());
}

#[test]
fn deep_nesting_is_fine() {
    for depth in [63, 64, 65, 127, 128, 129, 1000, 5000] {
        let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse(body.as_bytes()).is_ok(), "{depth}");
        let body = format!(
            "{{\"id\":\"e\",\"x\":{}{}}}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth).replacen('}', "1}", 1)
        );
        assert_eq!(id(body.as_bytes()).as_deref(), Some("e"), "{depth}");
        let unbalanced = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
        assert!(parse(unbalanced.as_bytes()).is_err());
        let mismatched = format!("{}{}}}", "[".repeat(depth), "]".repeat(depth - 1));
        assert!(parse(mismatched.as_bytes()).is_err());
    }
}

#[test]
fn a_resumed_scan_reads_the_same() {
    let body = br#"{"id":"evt_1","object":"event","data":{"object":{"id":"pi_1","s":"a\"b","n":[1,2.5e3,{"x":null}]}},"type":"t"}"#;
    for step in 1..body.len() {
        let mut scanner = Scanner::new(body);
        let mut at = 0;
        while at < body.len() {
            at += step;
            scanner.run(at);
        }
        let event = scanner.finish().unwrap();
        assert_eq!(event.id.as_deref(), Some("evt_1"));
        assert_eq!(event.object_id.as_deref(), Some("pi_1"));
        assert_eq!(event.kind.as_deref(), Some("t"));
    }
}
