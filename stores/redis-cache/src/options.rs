//! How the cache is configured.

use std::time::Duration;

/// How a [`Cached`](crate::Cached) store uses Redis.
///
/// # Examples
/// ```
/// use hookbox_redis_cache::CacheOptions;
/// use std::time::Duration;
/// let options = CacheOptions::default()
///     .with_ttl(Duration::from_secs(3600))
///     .with_timeout(Duration::from_millis(2))
///     .with_prefix("billing:");
/// assert_eq!(options.ttl(), Duration::from_secs(3600));
/// assert_eq!(options.prefix(), "billing:");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    ttl: Duration,
    timeout: Duration,
    prefix: String,
}

/// The default TTL of a cached key: one day, well inside every built-in provider's
/// retention minimum except Shopify's 4 h (a store keeping Shopify keys for 4 h needs
/// a TTL of 4 h or less, and [`Cached::new`](crate::Cached::new) says so).
pub const DEFAULT_TTL: Duration = Duration::from_secs(86_400);

/// The default bound on one Redis call: 5 ms. A lookup that takes longer is a miss.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5);

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "hookbox:";

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_TTL,
            timeout: DEFAULT_TIMEOUT,
            prefix: DEFAULT_PREFIX.to_string(),
        }
    }
}

impl CacheOptions {
    /// Sets how long a cached key lives in Redis (default 24 h). It must not be
    /// longer than the store's shortest retention.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the client-side bound on each Redis call (default 5 ms): a lookup that
    /// has not answered by then is treated as a miss and the database decides.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the prefix of every key this cache writes (default `"hookbox:"`), so that
    /// several receivers can share one Redis.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Returns the TTL of a cached key.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Returns the bound on each Redis call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Returns the key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}
