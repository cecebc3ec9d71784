//! The conformance suite of `hookbox-core` over `Cached<SqliteStore>` whose Redis
//! refuses every connection: with the cache down for the whole run, every guarantee
//! still holds (every lookup falls through to SQLite).

mod common;

hookbox_core::conformance_tests!(common::CachedHarness<common::NoRedis>);
