//! The tables diesel's query builder writes: the claim's keys and the version
//! guard's times (the schema itself is in `migrations/`; the outbox's table, which
//! only its stage writes this way, is beside it in [`outbox`](crate::outbox)).
//!
//! diesel caches a statement only when its type identifies its SQL: a query-builder
//! `insert_into` or `select` is cached, while `sql_query` text and any upsert with
//! `DO UPDATE` are parsed and planned again on every call. The claim and the
//! outbox's stage are therefore plain builder inserts
//! ([`claim_query!`](crate::blocking::claim_query) in [`blocking`](crate::blocking),
//! `stage_query!` in [`outbox`](crate::outbox)), and the version guards' conditional
//! upserts are small [`QueryFragment`](diesel::query_builder::QueryFragment)s with a
//! static query id; the rest runs less often and is plain text, each statement beside
//! the code that runs it.
//!
//! Every time is bound as unix microseconds (`BigInt`).

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> BigInt,
    }
}

diesel::table! {
    hookbox_version_times (object) {
        object -> Text,
        at_micros -> BigInt,
    }
}
