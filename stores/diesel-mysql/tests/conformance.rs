//! The conformance suite of `hookbox-core` against a real MySQL or MariaDB, one
//! fresh database per check (skipped without a server, failed instead under
//! `HOOKBOX_REQUIRE_SERVICES=1`).

mod common;

hookbox_core::conformance_tests!(common::MysqlHarness);
