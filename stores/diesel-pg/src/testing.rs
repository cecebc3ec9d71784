//! Test support for crates that test against a real PostgreSQL: the one rule for
//! finding the server, shared by every test suite of the workspace.
//!
//! Enabled by the `testing` feature; meant for dev-dependencies only.

use diesel_async::AsyncPgConnection;

/// The variable tests read the server's URL from.
pub const URL_VAR: &str = "HOOKBOX_PG_URL";

/// Returns the server's URL from [`URL_VAR`], or `None` when the test must skip: the
/// variable is unset or empty, or the server does not accept a connection. With
/// `HOOKBOX_REQUIRE_SERVICES=1` (as CI sets it) both panic instead, so a missing
/// server fails the run rather than passing it by skipping.
///
/// # Panics
/// Under `HOOKBOX_REQUIRE_SERVICES=1`, when there is no reachable server.
pub async fn pg_url() -> Option<String> {
    hookbox_diesel_shared::testing::service_url::<AsyncPgConnection>(URL_VAR).await
}
