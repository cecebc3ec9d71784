//! The reader on Stripe's three fields against hand-written bodies (they were
//! hookbox-stripe's scanner tests); `core/tests/body_keys.rs`, the `body_keys` and
//! `stripe_event` fuzz targets compare it with `serde_json`.

use std::borrow::Cow;

use super::{BodyKeys, Malformed};

const STRIPE: BodyKeys = BodyKeys::new(&[&["id"], &["type"], &["data", "object", "id"]]);

/// Stripe's three fields, as hookbox-stripe reads them.
struct Event<'a> {
    id: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
    object_id: Option<Cow<'a, str>>,
}

fn parse(body: &[u8]) -> Result<Event<'_>, Malformed> {
    let mut fields = STRIPE.read(body)?;
    Ok(Event {
        id: fields.take_text(0),
        kind: fields.take_text(1),
        object_id: fields.take_text(2),
    })
}

fn id(body: &[u8]) -> Option<String> {
    parse(body).unwrap().id.map(Cow::into_owned)
}

fn fields(body: &[u8]) -> [Option<String>; 3] {
    let event = parse(body).unwrap_or_else(|err| panic!("{}: {err}", shown(body)));
    [event.id, event.kind, event.object_id].map(|f| f.map(Cow::into_owned))
}

fn shown(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

fn some(texts: [&str; 3]) -> [Option<String>; 3] {
    texts.map(|t| Some(t.to_string()))
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
fn the_key_order_does_not_change_what_is_read() {
    let members = [
        r#""id":"evt_1""#,
        r#""object":"event""#,
        r#""data":{"previous":{"id":"x"},"object":{"object":"charge","id":"ch_1","refunds":[{"id":"re_1"}]}}"#,
        r#""type":"charge.refunded""#,
        r#""request":{"id":null}"#,
    ];
    // every rotation and its reverse
    for start in 0..members.len() {
        let mut order: Vec<&str> = members[start..]
            .iter()
            .chain(&members[..start])
            .copied()
            .collect();
        for _ in 0..2 {
            let body = format!("{{{}}}", order.join(","));
            assert_eq!(
                fields(body.as_bytes()),
                some(["evt_1", "charge.refunded", "ch_1"]),
                "{body}"
            );
            order.reverse();
        }
    }
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
    // escapes in skipped strings are stepped over, quotes and brackets in them ignored
    let body = br#"{"x":"a\"}],{\\","y":["\\\"", "\"[{"],"id":"e","type":"t","data":{"object":{"s":"\\","id":"o"}}}"#;
    assert_eq!(fields(body), some(["e", "t", "o"]));
}

#[test]
fn a_repeated_key_on_the_path_counts_once_the_first() {
    for (body, expected) in [
        (
            &br#"{"id":"evt_1","id":"evt_2"}"#[..],
            [Some("evt_1"), None, None],
        ),
        (br#"{"id":1,"id":"evt_2"}"#, [None, None, None]),
        (br#"{"i\u0064":"a","id":"b"}"#, [Some("a"), None, None]),
        (
            br#"{"type":"a","type":"b","id":"e"}"#,
            [Some("e"), Some("a"), None],
        ),
        (
            br#"{"data":{"object":{"id":"a","id":"b"}},"id":"e"}"#,
            [Some("e"), None, Some("a")],
        ),
        (
            br#"{"data":{"object":{"id":"a"},"object":{"id":"b"}},"id":"e"}"#,
            [Some("e"), None, Some("a")],
        ),
        (
            br#"{"data":{"object":1},"data":{"object":{"id":"b"}},"id":"e"}"#,
            [Some("e"), None, None],
        ),
        (
            br#"{"data":5,"data":{"object":{"id":"b"}},"id":"e","type":"t"}"#,
            [Some("e"), Some("t"), None],
        ),
    ] {
        assert_eq!(
            fields(body),
            expected.map(|f| f.map(str::to_string)),
            "{}",
            shown(body)
        );
    }
    // repeats of other keys, and `object` outside `data`, are nothing to the event
    assert_eq!(
        id(br#"{"a":1,"a":2,"object":1,"object":2,"id":"e"}"#).as_deref(),
        Some("e")
    );
}

#[test]
fn values_of_the_wrong_shape_read_as_absent() {
    for body in [
        &br#"{"id":5,"type":null,"data":[{"object":{"id":"x"}}]}"#[..],
        br#"{"id":{"id":"x"},"type":["t"],"data":{"object":"pi_1"}}"#,
        br#"{"id":1e400,"type":{"\ud800":1},"data":{"object":{"id":true}}}"#,
        b" {} ",
    ] {
        assert_eq!(fields(body), [None, None, None], "{}", shown(body));
    }
    // a body that is JSON but not an object is refused
    for body in [
        &br#"["evt_1","charge.succeeded"]"#[..],
        br#""evt_1""#,
        b"17",
        b"null",
    ] {
        assert!(parse(body).is_err(), "{}", shown(body));
    }
}

#[test]
fn the_scan_stops_once_the_three_fields_are_settled() {
    let read = some(["e", "t", "o"]);
    for tail in [
        &b""[..],
        b"}",
        b",\"x\":[1,2,}",
        b" trailing garbage \xff\x00",
        b",\"id\":\"evt_2\"}",
    ] {
        let body = [
            &br#"{"id":"e","type":"t","data":{"object":{"id":"o"#[..],
            b"\"}}",
            tail,
        ]
        .concat();
        assert_eq!(fields(&body), read, "{}", shown(&body));
    }
    // inside `data.object` too: once its id is read, nothing after it is
    let body = br#"{"id":"e","type":"t","data":{"object":{"id":"o","x":}"#;
    assert_eq!(fields(body), read);
    // once `data.object.id` is read, the rest of `data.object` and `data` is skipped
    // like any other value, and the event's other members are still read
    let body = br#"{"data":{"object":{"id":"o","x":01,"y":},"z":[}},"id":"e","type":"t"}"#;
    assert_eq!(fields(body), read);
    // `data.object` without an id settles that field when it closes
    let body =
        br#"{"type":"balance.available","id":"e","data":{"object":{"object":"balance"}}, not json"#;
    assert_eq!(
        fields(body),
        [Some("e".into()), Some("balance.available".into()), None]
    );
    // as does a `data` that is not an object
    assert_eq!(
        fields(br#"{"id":"e","type":"t","data":null,"#),
        [Some("e".into()), Some("t".into()), None]
    );
}

#[test]
fn errors_before_the_stop_are_refused() {
    for body in [
        &b""[..],
        b"   ",
        b"{",
        b"[1,2",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{1:2}",
        b"{\"a\":01}",
        b"{\"a\":1.}",
        b"{\"a\":-}",
        b"{\"a\":1e}",
        b"{\"a\":tru}",
        b"{\"a\":nul}",
        b"{\"a\":\"never ends}",
        b"{\"a\":\"ends in a backslash\\",
        b"{\"\\x\":1}",
        b"{\"a\\u12\":1}",
        b"{\"tab\there\":1}",
        b"{\"\xff\":1}",
        b"{\"id\":\"\\x\"}",
        b"{\"id\":\"tab\there\"}",
        b"{\"id\":\"evt_\xff\"}",
        b"\xef\xbb\xbf{}",
        br#"{"id":"evt_1"} trailing"#,
        br#"{"id":"evt_1"} {}"#,
        br#"{"id":"\ud800"}"#,
        br#"{"\udc00":1}"#,
        br#"{"data":{"object":{"id":"\udc00"}}}"#,
        b"\"\\ud800",
        b"{\"x\":[1,{\"a\":2}]",
        b"{\"x\":{\"y\":[1,2]}",
        b"[[[",
    ] {
        assert!(parse(body).is_err(), "{}", shown(body));
    }
}

#[test]
fn skipped_values_are_only_followed_to_their_end() {
    // what a skipped string or container holds is not checked
    for body in [
        &br#"{"x":"\ud800","id":"evt_1"}"#[..],
        br#"{"x":{"\udc00":1e400},"id":"evt_1"}"#,
        br#"{"data":{"x":[1e400, tru, :,],"y":"\q"},"id":"evt_1"}"#,
        b"{\"x\":\"tab\there \xff\",\"id\":\"evt_1\"}",
        br#"{"id":"evt_1","data":{"object":{"nested":{"id":"\ud800"}}}}"#,
        // brackets are counted, not matched
        br#"{"x":[{]},"id":"evt_1"}"#,
    ] {
        assert_eq!(id(body).as_deref(), Some("evt_1"), "{}", shown(body));
    }
    // but its end must come
    assert!(parse(br#"{"x":[{"a":"]"}"#).is_err());
}

#[test]
fn deep_nesting_is_fine() {
    for depth in [63, 64, 65, 127, 128, 129, 1000, 5000] {
        let body = format!("{{\"x\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse(body.as_bytes()).is_ok(), "{depth}");
        let body = format!(
            "{{\"x\":{}{},\"id\":\"e\"}}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth).replacen('}', "1}", 1)
        );
        assert_eq!(id(body.as_bytes()).as_deref(), Some("e"), "{depth}");
        let unbalanced = format!("{{\"x\":{}{}}}", "[".repeat(depth), "]".repeat(depth - 1));
        assert!(parse(unbalanced.as_bytes()).is_err());
    }
}

#[test]
fn escapes_in_skipped_values_hold_at_every_offset() {
    // quotes, backslashes and brackets escaped in strings of a skipped value, at every
    // offset from the eight-byte chunks, and ending a chunk
    let tricky = [
        r#"\""#,
        r#"\\"#,
        r#"\\\""#,
        r#"\"]}"#,
        r#"\u005c"#,
        r#"{[\\"#,
    ];
    for pad in 0..17 {
        for escape in tricky {
            for tail in ["", "x", "xxxxxxx"] {
                let body = format!(
                    r#"{{"x":[{{"{}":"{}{escape}{tail}"}}, "{escape}"],"y":"{}{escape}","id":"e"}}"#,
                    "k".repeat(pad),
                    "a".repeat(pad),
                    "b".repeat(pad)
                );
                let expected = serde_json::from_str::<serde_json::Value>(&body)
                    .unwrap_or_else(|err| panic!("{body}: {err}"));
                assert_eq!(expected["id"], "e");
                let event = parse(body.as_bytes()).unwrap_or_else(|err| panic!("{body}: {err}"));
                assert_eq!(event.id.as_deref(), Some("e"), "{body}");
            }
        }
    }
}
