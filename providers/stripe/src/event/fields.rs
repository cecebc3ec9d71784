//! The event's facts: the three fields read, and the path of objects to each of them.

use std::borrow::Cow;

/// The fields of a Stripe event that verification reads.
#[derive(Debug, Default)]
pub(crate) struct Event<'a> {
    /// The event id (`evt_…`): the dedupe key.
    pub(crate) id: Option<Cow<'a, str>>,
    /// The event type (`payment_intent.succeeded`, …).
    pub(crate) kind: Option<Cow<'a, str>>,
    /// `data.object.id`: the object the event is about.
    pub(crate) object_id: Option<Cow<'a, str>>,
}

impl<'a> Event<'a> {
    /// Keeps the string value of `field` (a field that is read but not kept, such as
    /// an object where a string belongs, is dropped).
    pub(super) fn keep(&mut self, field: Field, text: Cow<'a, str>) {
        match field {
            Field::Id => self.id = Some(text),
            Field::Type => self.kind = Some(text),
            Field::ObjectId => self.object_id = Some(text),
            Field::Other | Field::Top | Field::Data | Field::Object => {}
        }
    }
}

/// The role of an object on the path to the fields that are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Skipped: keys and values only need to be well-formed.
    Skipped,
    /// The event itself (the top-level object).
    Event,
    /// The event's `data`.
    Data,
    /// `data.object`.
    Changed,
    /// An object where a string field was expected (`{"id": {…}}`): its keys are
    /// decoded strictly, as `serde_json` does when it skips a map through a visitor.
    Visited,
}

/// What the value being parsed is to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    /// Nothing: skipped.
    Other,
    /// The whole body.
    Top,
    /// The event's `id`.
    Id,
    /// The event's `type`.
    Type,
    /// The event's `data`.
    Data,
    /// `data.object`.
    Object,
    /// `data.object.id`.
    ObjectId,
}

// which of the fields read has been seen, to refuse a second copy
const SEEN_ID: u8 = 1;
const SEEN_TYPE: u8 = 2;
const SEEN_DATA: u8 = 4;
const SEEN_OBJECT: u8 = 8;
const SEEN_OBJECT_ID: u8 = 16;

impl Field {
    /// Whether `serde_json` would deserialize this value rather than skip it: its
    /// strings are decoded strictly and its numbers must fit an `f64`.
    pub(super) fn is_read(self) -> bool {
        self != Self::Other
    }

    /// Returns the role of an object that is this field's value.
    pub(super) fn object_role(self) -> Role {
        match self {
            Self::Top => Role::Event,
            Self::Data => Role::Data,
            Self::Object => Role::Changed,
            Self::Id | Self::Type | Self::ObjectId => Role::Visited,
            Self::Other => Role::Skipped,
        }
    }

    /// Returns what the value of `key` is to the event in an object of `role`, with
    /// the field's bit in the set of fields seen (0 for a field that may repeat).
    pub(super) fn of_key(role: Role, key: &[u8]) -> (Self, u8) {
        match (role, key) {
            (Role::Event, b"id") => (Self::Id, SEEN_ID),
            (Role::Event, b"type") => (Self::Type, SEEN_TYPE),
            (Role::Event, b"data") => (Self::Data, SEEN_DATA),
            (Role::Data, b"object") => (Self::Object, SEEN_OBJECT),
            (Role::Changed, b"id") => (Self::ObjectId, SEEN_OBJECT_ID),
            _ => (Self::Other, 0),
        }
    }
}
