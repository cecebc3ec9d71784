//! The claim table for diesel's query builder: a claim is the hottest statement,
//! and a builder query is prepared once per connection and cached, where
//! `sql_query` text is parsed again on every call.

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> BigInt,
    }
}
