//! The event scanner against its reference (`serde_json`, see `common/serde_event.rs`),
//! through `Stripe::verify` on signed bodies: on every body `serde_json` reads as JSON,
//! the same outcome and the same fields (the first copy of a repeated key); on any
//! other body, a refusal of the body or an event read before the scan stopped, never
//! a panic.
// helpers outside #[test] functions panic on a bad fixture, as the tests do
#![allow(clippy::unwrap_used)]

mod common;

use common::serde_event;
use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use hookbox_stripe::{Stripe, StripeSigner};
use proptest::prelude::*;

const SECRET: &str = "whsec_scanner";
const T: i64 = 1_700_000_000;

/// Asserts that `Stripe::verify` of `body` (correctly signed) agrees with the
/// reference.
fn agrees(body: &[u8]) {
    let stripe = Stripe::new(SECRET).unwrap();
    let headers = StripeSigner::new(SECRET)
        .unwrap()
        .sign("", T, body)
        .to_header_map();
    let now = OffsetDateTime::from_unix_timestamp(T).unwrap();
    let result = stripe.verify(&headers, Bytes::copy_from_slice(body), now);
    let shown = String::from_utf8_lossy(body);
    match serde_event::read(body) {
        // not JSON: whatever the scan met before it stopped decides
        Err(_) => assert!(
            matches!(
                result.as_ref().map_err(|err| err.kind()),
                Ok(_) | Err("malformed_body" | "missing_dedupe_key")
            ),
            "body {shown:?} gave {result:?}"
        ),
        Ok([id, kind, object]) => match id.filter(|id| !id.is_empty()) {
            None => assert_eq!(
                result.as_ref().map_err(|err| err.kind()).err(),
                Some("missing_dedupe_key"),
                "body {shown:?} gave {result:?}"
            ),
            Some(id) => {
                let delivery = result.unwrap_or_else(|err| panic!("body {shown:?}: {err}"));
                assert_eq!(delivery.dedupe_key().delivery_id(), id, "{shown:?}");
                assert_eq!(delivery.event_type(), kind.as_deref(), "{shown:?}");
                let correlation = object.zip(kind).map(|(o, k)| format!("{o}:{k}"));
                assert_eq!(
                    delivery.correlation_id(),
                    correlation.as_deref(),
                    "{shown:?}"
                );
            }
        },
    }
}

#[test]
fn hand_picked_bodies_agree() {
    let bodies: &[&[u8]] = &[
        b"",
        b" ",
        b"{}",
        br#"{"id":"evt_1"}"#,
        br#" { "id" : "evt_1" , "type" : "a.b" , "data" : { "object" : { "id" : "pi_1" } } } "#,
        b"{\n  \"id\": \"evt_1\",\n  \"object\": \"event\",\n  \"data\": {\n    \"object\": {\n      \"id\": \"ch_1\"\n    }\n  },\n  \"type\": \"charge.succeeded\"\n}\n",
        br#"{"id":"evt_\u0041\n\"\\\/\b\f\r\t"}"#,
        br#"{"i\u0064":"evt_1","typ\u0065":"t"}"#,
        br#"{"id":"\ud83d\ude00"}"#,
        br#"{"id":"\ud83d"}"#,
        br#"{"id":"\ude00"}"#,
        br#"{"id":"\ud83d\u0041"}"#,
        br#"{"id":"\ud83d\n"}"#,
        br#"{"x":"\ud83d","id":"e"}"#,
        br#"{"x":{"\ud83d":1},"id":"e"}"#,
        br#"{"id":{"\ud83d":1}}"#,
        br#"{"id":{"a":"\ud83d"}}"#,
        br#"{"id":1e400}"#,
        br#"{"id":-1e400}"#,
        br#"{"id":1e308}"#,
        br#"{"id":123456789012345678901234567890}"#,
        br#"{"x":1e400,"id":"e"}"#,
        br#"{"data":1e400,"id":"e"}"#,
        br#"{"data":{"object":1e400},"id":"e"}"#,
        br#"{"data":{"x":1e400},"id":"e"}"#,
        br#"{"data":"\ud800","id":"e"}"#,
        br#"{"data":{"object":"\ud800"},"id":"e"}"#,
        br#"{"data":{"object":{"id":"o","x":"\ud800"}},"id":"e","type":"t"}"#,
        br#"{"data":[{"object":{"id":"o"}}],"id":"e","type":"t"}"#,
        br#"{"id":"e","id":"f"}"#,
        br#"{"id":1,"id":2}"#,
        br#"{"type":1,"type":2,"id":"e"}"#,
        br#"{"data":{"object":{"id":1,"id":2}},"id":"e"}"#,
        br#"{"data":{"object":{},"object":{}},"id":"e"}"#,
        br#"{"data":{"object":{"x":{"id":1,"id":2}}},"id":"e"}"#,
        br#"{"id":"e","data":{"id":"x","id":"y"}}"#,
        br#"["evt_1"]"#,
        br#""evt_1""#,
        br#""\ud800""#,
        b"1e400",
        b"-0",
        b"true",
        b"nul",
        b"[1,2,]",
        b"{\"id\":\"e\",}",
        b"{\"id\":\"e\"}}",
        b"{\"id\":\"e\"]",
        b"{\"id\":\"a\x01b\"}",
        b"{\"id\":\"caf\xc3\xa9\"}",
        b"{\"id\":\"e\",\"x\":\"\xff\"}",
        b"{\"id\":\"e\",\"x\":\"\xc3\"}",
        b"{\"id\":\"e\"}\x00",
        b"\t\n\r {\"id\":\"e\"} \t\n\r",
        b"{\"id\":\"e\"}\x0c",
    ];
    for body in bodies {
        agrees(body);
    }
}

/// A JSON value built from the keys and shapes the scanner cares about.
fn json_value() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("id".to_string()),
        Just("type".to_string()),
        Just("data".to_string()),
        Just("object".to_string()),
        Just("i\\u0064".to_string()),
        Just("\\ud800".to_string()),
        "[a-z]{0,3}",
    ];
    let leaf = prop_oneof![
        "\"[a-z_0-9 ]{0,12}\"",
        Just("\"\\u00e9\\ud83d\\ude00\\n\"".to_string()),
        Just("\"\\ud800\"".to_string()),
        Just("\"caf\u{e9}\"".to_string()),
        "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?",
        Just("1e400".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// A JSON event: `id`, `type` and `data.object` (with its `id`) among other members, in
/// any order (Stripe puts `type` last), each of the three sometimes repeated.
fn event_body() -> impl Strategy<Value = String> {
    let text = "\"[a-z_0-9.]{0,12}\"";
    let filler = || ("[a-z]{1,6}", json_value()).prop_map(|(k, v)| format!("\"{k}\":{v}"));
    let changed = (
        prop::collection::vec(filler(), 0..4),
        prop::collection::vec(text, 0..3),
    )
        .prop_flat_map(|(mut members, ids)| {
            members.extend(ids.into_iter().map(|id| format!("\"id\":{id}")));
            Just(members).prop_shuffle()
        })
        .prop_map(|members| format!("{{{}}}", members.join(",")));
    let data = (prop::collection::vec(filler(), 0..3), changed)
        .prop_flat_map(|(mut members, changed)| {
            members.push(format!("\"object\":{changed}"));
            Just(members).prop_shuffle()
        })
        .prop_map(|members| format!("{{{}}}", members.join(",")));
    (
        prop::collection::vec(filler(), 0..5),
        prop::collection::vec(text, 1..3),
        prop::collection::vec(text, 0..2),
        prop::collection::vec(data, 0..2),
    )
        .prop_flat_map(|(mut members, ids, types, datas)| {
            members.extend(ids.into_iter().map(|v| format!("\"id\":{v}")));
            members.extend(types.into_iter().map(|v| format!("\"type\":{v}")));
            members.extend(datas.into_iter().map(|v| format!("\"data\":{v}")));
            Just(members).prop_shuffle()
        })
        .prop_map(|members| format!("{{{}}}", members.join(",")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn shuffled_events_agree(body in event_body(), pretty in prop::bool::ANY) {
        let body = if pretty { body.replace(',', ",\n  ").replace(':', ": ") } else { body };
        agrees(body.as_bytes());
    }

    #[test]
    fn generated_events_agree(value in json_value(), ws in prop::bool::ANY) {
        let body = if ws { value.replace(',', " ,\n ").replace(':', " : ") } else { value };
        agrees(body.as_bytes());
    }

    #[test]
    fn mutated_events_agree(
        value in json_value(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut body = value.into_bytes();
        for (at, byte, op) in edits {
            let at = at.index(body.len() + 1);
            match op {
                0 => body.insert(at, byte),
                1 if at < body.len() => { body.remove(at); }
                _ if at < body.len() => body[at] = byte,
                _ => body.push(byte),
            }
        }
        agrees(&body);
    }

    #[test]
    fn noise_agrees(body in prop::collection::vec(
        prop::sample::select(b"{}[],:\"\\ u0123456789abcdefidtypedataobject-+.eE\xff\xc3\xa9 \n".to_vec()),
        0..40,
    )) {
        agrees(&body);
    }
}
