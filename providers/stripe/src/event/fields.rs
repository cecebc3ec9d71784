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
    /// Keeps the string value of `field` (only the three fields read are kept).
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
    /// The event itself (the top-level object).
    Event,
    /// The event's `data`.
    Data,
    /// `data.object`.
    Changed,
}

impl Role {
    /// Returns the fields an object of this role can still yield: none of them
    /// unsettled means the rest of the object is skipped.
    pub(super) fn yields(self) -> u8 {
        match self {
            Self::Event => SETTLED_ALL,
            Self::Data | Self::Changed => SETTLED_OBJECT_ID,
        }
    }

    /// Returns the fields settled when an object of this role closes: once `data` or
    /// `data.object` has closed, `data.object.id` can no longer appear.
    pub(super) fn settles(self) -> u8 {
        match self {
            Self::Event => 0,
            Self::Data | Self::Changed => SETTLED_OBJECT_ID,
        }
    }
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

// which keys on the path have been seen: the first of each counts, later copies are
// skipped
const SEEN_ID: u8 = 1;
const SEEN_TYPE: u8 = 2;
const SEEN_DATA: u8 = 4;
const SEEN_OBJECT: u8 = 8;
const SEEN_OBJECT_ID: u8 = 16;

// which of the three fields is settled: read, or known to be absent
pub(super) const SETTLED_ID: u8 = 1;
pub(super) const SETTLED_TYPE: u8 = 2;
pub(super) const SETTLED_OBJECT_ID: u8 = 4;
/// All three fields settled: the scan stops.
pub(super) const SETTLED_ALL: u8 = SETTLED_ID | SETTLED_TYPE | SETTLED_OBJECT_ID;

impl Field {
    /// Whether a string value of this field is kept (and so decoded strictly).
    pub(super) fn is_kept(self) -> bool {
        matches!(self, Self::Id | Self::Type | Self::ObjectId)
    }

    /// Returns the role of an object that is this field's value, when the path to the
    /// fields read goes through it (`None`: the object is skipped).
    pub(super) fn object_role(self) -> Option<Role> {
        match self {
            Self::Top => Some(Role::Event),
            Self::Data => Some(Role::Data),
            Self::Object => Some(Role::Changed),
            Self::Other | Self::Id | Self::Type | Self::ObjectId => None,
        }
    }

    /// Returns the fields settled once a value of this field that opened no object on
    /// the path is complete: the field itself, and `data.object.id` when `data` or
    /// `data.object` is not an object.
    pub(super) fn settles(self) -> u8 {
        match self {
            Self::Id => SETTLED_ID,
            Self::Type => SETTLED_TYPE,
            Self::Data | Self::Object | Self::ObjectId => SETTLED_OBJECT_ID,
            Self::Other | Self::Top => 0,
        }
    }

    /// Returns what the value of `key` is to the event in an object of `role`, given
    /// the keys already `seen`, and the updated set: the first copy of a key counts,
    /// a later one is skipped.
    pub(super) fn of_key(role: Role, key: &[u8], seen: u8) -> (Self, u8) {
        let (field, bit) = match (role, key) {
            (Role::Event, b"id") => (Self::Id, SEEN_ID),
            (Role::Event, b"type") => (Self::Type, SEEN_TYPE),
            (Role::Event, b"data") => (Self::Data, SEEN_DATA),
            (Role::Data, b"object") => (Self::Object, SEEN_OBJECT),
            (Role::Changed, b"id") => (Self::ObjectId, SEEN_OBJECT_ID),
            _ => return (Self::Other, seen),
        };
        if seen & bit != 0 {
            (Self::Other, seen)
        } else {
            (field, seen | bit)
        }
    }
}
