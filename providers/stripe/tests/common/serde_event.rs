//! The reference for hookbox-stripe's event scanner: the fields it reads, read by
//! `serde_json` into a borrowed struct that skips everything else (this was the
//! provider's own reader before the scanner), plus the scanner's one extra rule, that
//! the whole body is UTF-8.
//!
//! Shared by `tests/event.rs` and the `stripe_event` fuzz target (through `#[path]`),
//! so the two compare against the same reference.
#![allow(dead_code, unreachable_pub)]

/// What the reference reads from `body`: `Err` when it is not a JSON event,
/// else the `id`, `type` and `data.object.id` strings (absent when missing or not
/// strings).
pub fn read(body: &[u8]) -> Result<[Option<String>; 3], String> {
    std::str::from_utf8(body).map_err(|err| err.to_string())?;
    let event = parse(body).map_err(|err| err.to_string())?;
    Ok([
        event.id.get().map(str::to_owned),
        event.kind.get().map(str::to_owned),
        event.object_id().map(str::to_owned),
    ])
}

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The fields of a Stripe event that verification reads.
#[derive(Debug, Default, Deserialize)]
struct Event<'a> {
    /// The event id (`evt_…`): the dedupe key.
    #[serde(borrow, default)]
    id: Text<'a>,
    /// The event type (`payment_intent.succeeded`, …).
    #[serde(borrow, default, rename = "type")]
    kind: Text<'a>,
    #[serde(borrow, default)]
    data: Object<Data<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct Data<'a> {
    #[serde(borrow, default)]
    object: Object<Changed<'a>>,
}

/// The object the event is about (`data.object`).
#[derive(Debug, Default, Deserialize)]
struct Changed<'a> {
    #[serde(borrow, default)]
    id: Text<'a>,
}

impl<'a> Event<'a> {
    /// Returns `data.object.id`, where the body has one.
    fn object_id(&self) -> Option<&str> {
        self.data.0.as_ref()?.object.0.as_ref()?.id.get()
    }
}

/// Parses `body` as JSON; a body that is JSON but not an object reads as an event
/// without fields.
///
/// # Errors
/// The body is not JSON, or names one of the fields read here twice (which of the two
/// would be the id is unknowable).
fn parse(body: &[u8]) -> Result<Event<'_>, serde_json::Error> {
    serde_json::from_slice::<Object<Event<'_>>>(body).map(|event| event.0.unwrap_or_default())
}

/// A JSON value that is kept when it is a string and skipped otherwise, so that a
/// number where a string belongs reads as "absent" rather than as a parse error.
#[derive(Debug, Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl Text<'_> {
    /// Returns the string, or `None` when the value was absent or not a string.
    fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

/// A JSON value that is read as `T` when it is an object and skipped otherwise.
#[derive(Debug)]
struct Object<T>(Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `deserialize_any` rather than the derive's `deserialize_struct`, which would
        // also read a JSON array positionally as if it were the object
        deserializer.deserialize_any(ObjectVisitor(PhantomData))
    }
}

/// Implements the visitor methods of every JSON shape not handled explicitly: the
/// value is consumed and reads as absent.
macro_rules! skip_other_shapes {
    ($($method:ident($ty:ty)),*) => {
        $(fn $method<E: serde::de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(Default::default())
        })*
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| Default::default())
        }
    };
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Borrowed(v))))
    }

    // only strings with escapes arrive here: the unescaped text is not in the body
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Owned(v))))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Text(None))
    }

    skip_other_shapes!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64)
    );
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|value| Object(Some(value)))
    }

    skip_other_shapes!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str)
    );
}
