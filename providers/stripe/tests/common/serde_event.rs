//! The reference for hookbox-stripe's event scanner: `serde_json` decides whether a
//! body is JSON, and reads the fields the scanner reads (`id`, `type`,
//! `data.object.id`) through visitors that skip everything else, keeping the first
//! copy of a repeated key as the scanner does.
//!
//! Shared by `tests/event.rs` and the `stripe_event` fuzz target (through `#[path]`),
//! so the two compare against the same reference.
#![allow(dead_code, unreachable_pub)]

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The fields the reference reads: `id`, `type` and `data.object.id`, each `None`
/// when missing or not a string.
pub type Fields = [Option<String>; 3];

/// Returns what the reference reads from `body`, or why it is not JSON: not UTF-8, or
/// refused by `serde_json` as a `serde_json::Value` (so with every string decoded
/// strictly and every number in range).
pub fn read(body: &[u8]) -> Result<Fields, String> {
    std::str::from_utf8(body).map_err(|err| err.to_string())?;
    serde_json::from_slice::<serde_json::Value>(body).map_err(|err| err.to_string())?;
    let Top(fields) = serde_json::from_slice(body).map_err(|err| err.to_string())?;
    Ok(fields)
}

/// The event: an object's `id`, `type` and `data`, the first copy of each.
struct Top(Fields);
/// `data`: its first `object`'s id.
struct Data(Option<String>);
/// `data.object`: its first `id`.
struct Changed(Option<String>);
/// A string, or `None` for any other value.
struct Text(Option<String>);

/// Implements the visitor methods of every JSON shape not handled explicitly: the
/// value is consumed and reads as absent.
macro_rules! absent_otherwise {
    ($absent:expr; $($method:ident($ty:ty)),*) => {
        $(fn $method<E: serde::de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Ok($absent)
        })*
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| $absent)
        }
    };
}

/// Reads a map's members, handing the first copy of each key in `wanted` to `read`
/// and skipping the rest.
fn first_wins<'de, A: MapAccess<'de>>(
    mut map: A,
    wanted: &[&str],
    mut read: impl FnMut(&str, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    let mut seen = vec![false; wanted.len()];
    while let Some(key) = map.next_key::<String>()? {
        match wanted.iter().position(|w| *w == key) {
            Some(i) if !seen[i] => {
                seen[i] = true;
                read(&key, &mut map)?;
            }
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(())
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Top, A::Error> {
        let mut fields: Fields = Default::default();
        first_wins(map, &["id", "type", "data"], |key, map| {
            match key {
                "id" => fields[0] = map.next_value::<Text>()?.0,
                "type" => fields[1] = map.next_value::<Text>()?.0,
                _ => fields[2] = map.next_value::<Data>()?.0,
            }
            Ok(())
        })?;
        Ok(Top(fields))
    }

    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top(Default::default()))
    }

    absent_otherwise!(Top(Default::default()); visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64));
}

struct DataVisitor;

impl<'de> Visitor<'de> for DataVisitor {
    type Value = Data;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Data, A::Error> {
        let mut id = None;
        first_wins(map, &["object"], |_, map| {
            id = map.next_value::<Changed>()?.0;
            Ok(())
        })?;
        Ok(Data(id))
    }

    fn visit_str<E>(self, _: &str) -> Result<Data, E> {
        Ok(Data(None))
    }

    absent_otherwise!(Data(None); visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64));
}

struct ChangedVisitor;

impl<'de> Visitor<'de> for ChangedVisitor {
    type Value = Changed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Changed, A::Error> {
        let mut id = None;
        first_wins(map, &["id"], |_, map| {
            id = map.next_value::<Text>()?.0;
            Ok(())
        })?;
        Ok(Changed(id))
    }

    fn visit_str<E>(self, _: &str) -> Result<Changed, E> {
        Ok(Changed(None))
    }

    absent_otherwise!(Changed(None); visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64));
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<Text, E> {
        Ok(Text(Some(v.to_owned())))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Text(None))
    }

    absent_otherwise!(Text(None); visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64));
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DataVisitor)
    }
}

impl<'de> Deserialize<'de> for Changed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ChangedVisitor)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}
