//! The crate's error: only setup can fail. Once built, a [`Cached`](crate::Cached)
//! store never reports a Redis failure; it falls through to the database instead.

use std::time::Duration;

/// Why a cache could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The TTL is longer than the shortest retention of the wrapped store: a cached
    /// key could outlive the database row it stands for.
    #[error(
        "a cache ttl of {} s is longer than the store's shortest retention of {} s: a cached key could outlive its database row",
        ttl.as_secs_f64(),
        keep.as_secs_f64()
    )]
    TtlLongerThanRetention {
        /// The requested TTL.
        ttl: Duration,
        /// The shortest time the store keeps a key.
        keep: Duration,
    },
    /// An option cannot work (a TTL or timeout of zero, a root CA for a `redis://`
    /// URL, a `rediss://…#insecure` URL).
    #[error("invalid cache options: {0}")]
    InvalidOptions(&'static str),
    /// The root CA given to [`connect_with_root_ca`](crate::connect_with_root_ca) is
    /// not PEM, holds no certificate, or holds one that cannot be a root.
    #[error("invalid root CA for rediss://: {reason}")]
    InvalidRootCa {
        /// What is wrong with it.
        reason: String,
    },
    /// The Redis URL could not be parsed or the connection manager not built.
    #[error("could not set up the redis connection")]
    Redis(#[source] redis::RedisError),
}
