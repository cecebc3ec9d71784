//! The tables of the embedded migrations (`migrations/`), for diesel's query builder.
//!
//! The key columns are `VARBINARY` in the database (byte-for-byte comparison) and
//! `Text` here: the store writes and reads them as UTF-8.

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> Datetime,
    }
}

diesel::table! {
    hookbox_inbox (id) {
        id -> BigInt,
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        tenant -> Nullable<Text>,
        event_type -> Nullable<Text>,
        body -> Blob,
        headers -> Text,
        received_at -> Datetime,
        processed_at -> Nullable<Datetime>,
        attempts -> Integer,
        last_error -> Nullable<Text>,
        next_attempt_at -> Datetime,
        dead_at -> Nullable<Datetime>,
        correlation_id -> Nullable<Text>,
        signed_at -> Nullable<Datetime>,
    }
}

diesel::table! {
    hookbox_versions (object) {
        object -> Text,
        version -> BigInt,
    }
}

diesel::table! {
    hookbox_version_times (object) {
        object -> Text,
        at_micros -> BigInt,
    }
}

// `hookbox_outbox` has no `table!` here: its 20 columns exceed the 16 diesel allows
// without its `32-column-tables` feature, so `outbox.rs` queries it in SQL.
