//! An injectable clock, so timestamp checks are testable.

use std::fmt::Debug;
use time::OffsetDateTime;

/// A source of "now" for timestamp tolerance checks.
///
/// [`Provider::verify`](crate::Provider::verify) takes `now` as an argument; an edge
/// that serves requests holds a `Clock` and asks it once per delivery.
pub trait Clock: Send + Sync + Debug {
    /// Returns the current time.
    fn now(&self) -> OffsetDateTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock stopped at one instant, for tests and for `hookbox verify --now`.
///
/// # Examples
/// ```
/// use hookbox_core::{Clock, FixedClock};
/// let clock = FixedClock::from_unix(1_614_265_330).unwrap();
/// assert_eq!(clock.now().unix_timestamp(), 1_614_265_330);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(OffsetDateTime);

impl FixedClock {
    /// Stops the clock at `at`.
    pub fn new(at: OffsetDateTime) -> Self {
        Self(at)
    }

    /// Stops the clock at a Unix time in seconds; `None` when it is out of range.
    pub fn from_unix(secs: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp(secs).ok().map(Self)
    }
}

impl Clock for FixedClock {
    fn now(&self) -> OffsetDateTime {
        self.0
    }
}
