//! How long dedupe keys must be kept.

use std::time::Duration;

use time::OffsetDateTime;

/// The shortest time a provider can resend a delivery after its first attempt, and so
/// the minimum time a receiver must keep its dedupe key.
///
/// A key dropped earlier lets a legitimate retry through as a new event, which is
/// then applied twice.
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

/// How long a store keeps dedupe keys and processed inbox rows, per provider.
///
/// Every key is kept 30 days unless a rule says otherwise (30 days covers every
/// built-in provider's minimum, Stripe's being the longest). A rule shorter than the
/// provider's minimum is refused by [`RetentionPolicy::keep`]; a caller who accepts
/// the duplicates that lets through must say so with
/// [`RetentionPolicy::keep_below_provider_minimum`]. Dead letters are never purged.
///
/// # Examples
/// ```
/// use hookbox_core::{Retention, RetentionPolicy};
/// use std::time::Duration;
/// let shopify_minimum = Retention::from_hours(4);
/// let policy = RetentionPolicy::default()
///     .keep("shopify", shopify_minimum, Duration::from_secs(86_400))?;
/// assert_eq!(policy.keep_for("shopify"), Duration::from_secs(86_400));
/// assert_eq!(policy.keep_for("stripe"), Duration::from_secs(30 * 86_400));
/// assert!(RetentionPolicy::default()
///     .keep("shopify", shopify_minimum, Duration::from_secs(300))
///     .is_err());
/// # Ok::<(), hookbox_core::RetentionTooShort>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    rules: Vec<(String, Duration)>,
    batch_size: u32,
}

/// The default retention: the longest built-in minimum (Stripe's CLI resend window).
pub const DEFAULT_KEEP: Duration = Duration::from_secs(30 * 86_400);

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            batch_size: 1000,
        }
    }
}

/// A retention rule shorter than the provider can resend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "keeping {provider} keys for {keep_secs} s is shorter than its minimum of {minimum_secs} s: a resend after the purge would be applied twice; use keep_below_provider_minimum to accept that"
)]
pub struct RetentionTooShort {
    /// The provider's name.
    pub provider: String,
    /// The requested retention in seconds.
    pub keep_secs: u64,
    /// The provider's minimum in seconds.
    pub minimum_secs: u64,
}

impl RetentionPolicy {
    /// Keeps `provider`'s keys for `keep`, refusing less than its `minimum`
    /// (`Provider::min_retention`).
    ///
    /// # Errors
    /// [`RetentionTooShort`] when `keep < minimum`.
    pub fn keep(
        self,
        provider: &str,
        minimum: Retention,
        keep: Duration,
    ) -> Result<Self, RetentionTooShort> {
        if !minimum.is_satisfied_by(keep) {
            return Err(RetentionTooShort {
                provider: provider.to_string(),
                keep_secs: keep.as_secs(),
                minimum_secs: minimum.as_duration().as_secs(),
            });
        }
        Ok(self.keep_below_provider_minimum(provider, keep))
    }

    /// Keeps `provider`'s keys for `keep` with no check against its minimum: a resend
    /// that arrives after the purge is applied again. For tests and for providers
    /// whose resend window you control.
    pub fn keep_below_provider_minimum(mut self, provider: &str, keep: Duration) -> Self {
        self.rules.retain(|(name, _)| name != provider);
        self.rules.push((provider.to_string(), keep));
        self
    }

    /// Sets how many rows one purge statement deletes (default 1,000), so a purge
    /// never holds long locks.
    pub fn batch_size(mut self, rows: u32) -> Self {
        self.batch_size = rows.max(1);
        self
    }

    /// Returns how long `provider`'s keys are kept.
    pub fn keep_for(&self, provider: &str) -> Duration {
        self.rules
            .iter()
            .find(|(name, _)| name == provider)
            .map_or(DEFAULT_KEEP, |(_, keep)| *keep)
    }

    /// Returns the per-provider rules (providers without one use [`DEFAULT_KEEP`]).
    pub fn rules(&self) -> impl Iterator<Item = (&str, Duration)> {
        self.rules.iter().map(|(name, keep)| (name.as_str(), *keep))
    }

    /// Returns the purge batch size.
    pub fn batch(&self) -> u32 {
        self.batch_size
    }

    /// What a purge at `now` deletes: for each provider with a rule, what is older
    /// than `now` less its retention; for every other provider, what is older than
    /// `now` less [`DEFAULT_KEEP`]. Every backend's purge walks these in this order.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hookbox_core::RetentionPolicy;
    /// use hookbox_core::time::OffsetDateTime;
    ///
    /// let policy = RetentionPolicy::default()
    ///     .keep_below_provider_minimum("shopify", Duration::from_secs(3_600));
    /// let now = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(90 * 86_400);
    /// let cutoffs = policy.cutoffs(now);
    /// assert_eq!(cutoffs.per_provider, [("shopify".to_string(), now - Duration::from_secs(3_600))]);
    /// assert_eq!(cutoffs.ruled, ["shopify"]);
    /// assert_eq!(cutoffs.others, now - Duration::from_secs(30 * 86_400));
    /// ```
    pub fn cutoffs(&self, now: OffsetDateTime) -> Cutoffs {
        let before = |keep: Duration| {
            now.checked_sub(time::Duration::try_from(keep).unwrap_or(time::Duration::MAX))
                .unwrap_or(OffsetDateTime::UNIX_EPOCH)
        };
        Cutoffs {
            per_provider: self
                .rules
                .iter()
                .map(|(provider, keep)| (provider.clone(), before(*keep)))
                .collect(),
            ruled: self
                .rules
                .iter()
                .map(|(provider, _)| provider.clone())
                .collect(),
            others: before(DEFAULT_KEEP),
        }
    }
}

/// A purge's cutoffs at one instant ([`RetentionPolicy::cutoffs`]): rows received (or
/// messages sent) before a cutoff are past their retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cutoffs {
    /// Each provider with a rule, and its cutoff.
    pub per_provider: Vec<(String, OffsetDateTime)>,
    /// The providers with a rule (those the `others` cutoff does not apply to).
    pub ruled: Vec<String>,
    /// The cutoff for every provider without a rule: `now` less [`DEFAULT_KEEP`].
    pub others: OffsetDateTime,
}
