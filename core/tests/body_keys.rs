//! The body-key reader against its reference (`serde_json`, see
//! `common/first_wins.rs`): on every body `serde_json` reads as a JSON object, the same
//! fields (the first copy of a repeated key); a JSON body that is not an object is
//! refused; any other body is refused or read up to where the scan stopped, never a
//! panic.
#![allow(clippy::unwrap_used)]

#[path = "common/first_wins.rs"]
mod first_wins;

use first_wins::{PATHS, ReadValue, assert_agrees};
use hookbox_core::support::{BodyKeys, BodyValue};
use proptest::prelude::*;

const KEYS: BodyKeys = BodyKeys::new(PATHS);

fn read(body: &[u8]) -> Result<Vec<Option<ReadValue>>, String> {
    let fields = KEYS.read(body).map_err(|err| err.to_string())?;
    Ok((0..PATHS.len())
        .map(|i| {
            fields.get(i).map(|value| match value {
                BodyValue::Text(text) => ReadValue::Text(text.to_string()),
                BodyValue::Number(text) => ReadValue::Number((*text).to_string()),
            })
        })
        .collect())
}

fn agrees(body: &[u8]) {
    assert_agrees(body, read(body));
}

#[test]
fn hand_picked_bodies_agree() {
    let bodies: &[&[u8]] = &[
        b"",
        b" ",
        b"{}",
        br#"{"id":"evt_1"}"#,
        br#" { "id" : "evt_1" , "type" : "a.b" , "data" : { "object" : { "id" : "pi_1" } } } "#,
        br#"{"event":{"type":"message","ts":"1"},"type":"event_callback","event_id":"Ev1","event_time":1}"#,
        br#"{"event":"meeting.started","payload":{"object":{"id":1}},"event_ts":1626230691572}"#,
        br#"{"event_ts":-0.5e-3,"event":{"type":{"a":1}}}"#,
        br#"{"event_ts":1e400}"#,
        br#"{"event_ts":01}"#,
        br#"{"event_ts":1.}"#,
        br#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#,
        br#"{"id":"evt_\u0041\n\"\\\/\b\f\r\t"}"#,
        br#"{"i\u0064":"evt_1","typ\u0065":"t"}"#,
        br#"{"id":"\ud83d\ude00"}"#,
        br#"{"id":"\ud83d"}"#,
        br#"{"x":"\ud83d","id":"e"}"#,
        br#"{"id":"e","id":"f"}"#,
        br#"{"event":{"type":"a"},"event":{"type":"b"}}"#,
        br#"{"event":1,"event":{"type":"b"}}"#,
        br#"{"data":{"object":{"id":1,"id":2}},"id":"e"}"#,
        br#"{"data":[{"object":{"id":"o"}}],"id":"e","type":"t"}"#,
        br#"["evt_1"]"#,
        br#""evt_1""#,
        b"1",
        b"true",
        b"null",
        b"{\"id\":\"e\",}",
        b"{\"id\":\"e\"}}",
        b"{\"id\":\"a\x01b\"}",
        b"{\"id\":\"caf\xc3\xa9\"}",
        b"\t\n\r {\"id\":\"e\"} \t\n\r",
    ];
    for body in bodies {
        agrees(body);
    }
}

#[test]
fn a_body_that_is_not_an_object_is_refused() {
    for body in [&b"[]"[..], b"\"x\"", b"1", b"null", b"", b"  "] {
        let err = KEYS.read(body).unwrap_err();
        assert_eq!(err.reason(), "expected a JSON object", "{body:?}");
    }
    const NOTHING: BodyKeys = BodyKeys::new(&[]);
    assert!(NOTHING.read(b"{}").is_ok());
    assert!(NOTHING.read(b"[]").is_err());
}

#[test]
fn the_scan_stops_once_every_field_is_settled() {
    const ID: BodyKeys = BodyKeys::new(&[&["event_id"]]);
    // what follows the field is never read: not JSON past it does not matter
    let fields = ID.read(br#"{"event_id":"evt_1", not json"#).unwrap();
    assert_eq!(fields.text(0), Some("evt_1"));
    // a string without escapes is borrowed
    let mut fields = ID.read(br#"{"event_id":"evt_1"}"#).unwrap();
    assert!(matches!(
        fields.take_text(0),
        Some(std::borrow::Cow::Borrowed("evt_1"))
    ));
}

/// A JSON value built from the keys and shapes the reader cares about, with unique
/// keys per object (serde_json's `Value` keeps one copy of each).
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let key = prop::sample::select(vec![
        "id",
        "type",
        "data",
        "object",
        "event",
        "event_ts",
        "challenge",
        "event_id",
        "x",
        "i\"d",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        "[a-z0-9_\\\\\"\u{e9}\u{1f600}\n]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_bodies_agree(value in json_value(), pretty in any::<bool>()) {
        let body = if pretty {
            serde_json::to_vec_pretty(&value).unwrap()
        } else {
            serde_json::to_vec(&value).unwrap()
        };
        agrees(&body);
    }

    #[test]
    fn mutated_bodies_never_panic_and_agree_when_json(
        value in json_value(),
        at in any::<prop::sample::Index>(),
        byte in prop::sample::select(b"{}[]\",:\\ 0-e.tnu".to_vec()),
    ) {
        let mut body = serde_json::to_vec(&value).unwrap();
        if !body.is_empty() {
            let i = at.index(body.len());
            body[i] = byte;
        }
        agrees(&body);
    }

    #[test]
    fn noise_never_panics(body in prop::collection::vec(any::<u8>(), 0..64)) {
        agrees(&body);
    }
}
