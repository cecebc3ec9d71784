//! The reference for `hookbox_core::support::BodyKeys`: `serde_json` decides whether a
//! body is JSON and reads it into a tree that keeps the **first** copy of a repeated
//! key, as the reader does; a path is then looked up in that tree.
//!
//! Shared by `core/tests/body_keys.rs` and the `body_keys` fuzz target (through
//! `#[path]`), so the two compare against the same reference.
#![allow(dead_code, unreachable_pub)]

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON value as far as the reader cares: objects (first copy of a key first),
/// strings, numbers, and everything else.
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    Object(Vec<(String, Tree)>),
    Text(String),
    Number(serde_json::Number),
    Other,
}

/// What the reference reads at a path: a string, a number, or nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    Text(String),
    Number(serde_json::Number),
}

impl Tree {
    /// Looks `path` up, the first copy of each key counting.
    pub fn at(&self, path: &[&str]) -> Option<Leaf> {
        let mut here = self;
        for key in path {
            let Tree::Object(members) = here else {
                return None;
            };
            here = &members.iter().find(|(k, _)| k == key)?.1;
        }
        match here {
            Tree::Text(text) => Some(Leaf::Text(text.clone())),
            Tree::Number(n) => Some(Leaf::Number(n.clone())),
            Tree::Object(_) | Tree::Other => None,
        }
    }
}

/// Returns the tree of `body`, or why it is not JSON: not UTF-8, or refused by
/// `serde_json` as a `serde_json::Value` (so with every string decoded strictly and
/// every number in range).
pub fn read(body: &[u8]) -> Result<Tree, String> {
    std::str::from_utf8(body).map_err(|err| err.to_string())?;
    serde_json::from_slice::<serde_json::Value>(body).map_err(|err| err.to_string())?;
    serde_json::from_slice(body).map_err(|err| err.to_string())
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut members: Vec<(String, Tree)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.iter().any(|(k, _)| *k == key) {
                map.next_value::<IgnoredAny>()?;
            } else {
                let value = map.next_value::<Tree>()?;
                members.push((key, value));
            }
        }
        Ok(Tree::Object(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Tree, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| Tree::Other)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Text(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Text(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Tree, E> {
        Ok(Tree::Number(v.into()))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Tree, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Tree::Other, Tree::Number))
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Tree, E> {
        Ok(Tree::Other)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
}

/// The paths the tests and the fuzz target read: Stripe's three, a key under an
/// object that is also walked (`event.type`), top-level fields of several providers.
pub const PATHS: &[&[&str]] = &[
    &["id"],
    &["type"],
    &["data", "object", "id"],
    &["event", "type"],
    &["event_ts"],
    &["challenge"],
    &["event_id"],
];

/// Compares the reader's answer for `body` with the reference's; panics with the
/// body on any difference. `read` is the reader's result: for each path, a string, a
/// number's text, or nothing.
pub fn assert_agrees(body: &[u8], read: Result<Vec<Option<ReadValue>>, String>) {
    let shown = String::from_utf8_lossy(body);
    match self::read(body) {
        // not JSON: the reader may refuse it, or read what it met before the stop
        Err(_) => {}
        Ok(tree @ Tree::Object(_)) => {
            let values = read.unwrap_or_else(|err| panic!("{shown:?} refused: {err}"));
            for (path, value) in PATHS.iter().zip(values) {
                let expected = tree.at(path);
                let got = value.map(|value| match value {
                    ReadValue::Text(text) => Leaf::Text(text),
                    ReadValue::Number(text) => Leaf::Number(
                        serde_json::from_str(&text)
                            .unwrap_or_else(|err| panic!("{shown:?}: number {text:?}: {err}")),
                    ),
                });
                assert_eq!(got, expected, "{shown:?} at {path:?}");
            }
        }
        Ok(_) => assert!(read.is_err(), "{shown:?} is not an object: {read:?}"),
    }
}

/// A value the reader returned, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadValue {
    Text(String),
    Number(String),
}
