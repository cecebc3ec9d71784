//! The conformance suite of `hookbox-core` over `Cached<SqliteStore>` with the shared
//! Redis of `HOOKBOX_REDIS_URL`: the cache keeps every guarantee of the store it
//! wraps. Without `HOOKBOX_REDIS_URL` (and without `HOOKBOX_REQUIRE_SERVICES=1`) the
//! suite runs against an unreachable Redis instead, as `conformance_redis_down` does.

mod common;

hookbox_core::conformance_tests!(common::CachedHarness<common::SharedRedis>);
