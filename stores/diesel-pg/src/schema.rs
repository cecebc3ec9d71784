//! The tables of the embedded migrations (`migrations/`), for diesel's query builder.

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> Timestamptz,
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
        body -> Bytea,
        headers -> Text,
        received_at -> Timestamptz,
        processed_at -> Nullable<Timestamptz>,
        attempts -> Integer,
        last_error -> Nullable<Text>,
        next_attempt_at -> Timestamptz,
        dead_at -> Nullable<Timestamptz>,
        correlation_id -> Nullable<Text>,
        signed_at -> Nullable<Timestamptz>,
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
