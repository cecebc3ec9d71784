//! The conformance suite of `hookbox-core`, on a fresh SQLite file per check.

hookbox_core::conformance_tests!(hookbox_sqlite::testing::SqliteHarness);
