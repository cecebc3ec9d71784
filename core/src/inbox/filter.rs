//! What an operator selects and looks at in an inbox: a row's state, the filter the
//! admin verbs take, and the per-provider and per-minute counts of an overview.

use time::OffsetDateTime;

/// How many of the newest rows a [`body_contains`](InboxFilter::body_contains)
/// search reads at most: the search looks for the text in the newest
/// `BODY_SEARCH_WINDOW` rows the filter's other conditions select, so it costs the
/// same on a table of a thousand rows or of a hundred million.
pub const BODY_SEARCH_WINDOW: u32 = 10_000;

/// Where an inbox row is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Neither processed nor dead: waiting for a worker. As a filter this takes
    /// the failed rows too (the whole backlog).
    Pending,
    /// Pending after at least one failed try: waiting for its retry.
    Failed,
    /// A handler succeeded on it.
    Processed,
    /// It reached the attempt limit; it waits for an operator's replay.
    Dead,
}

impl DeliveryState {
    /// Every state, in the order a page lists them.
    pub const ALL: [Self; 4] = [Self::Pending, Self::Failed, Self::Processed, Self::Dead];

    /// The state's name: `pending`, `failed`, `processed` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
            Self::Processed => "processed",
            Self::Dead => "dead",
        }
    }

    /// Reads a name [`as_str`](Self::as_str) writes; `None` for any other text.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }
}

/// Which inbox rows an admin verb acts on: every condition set must hold (an unset
/// one selects everything), and [`InboxAdmin::list`](crate::InboxAdmin::list)
/// returns them newest first (by row id, descending).
///
/// ```
/// use hookbox_core::{DeliveryState, InboxFilter};
///
/// // Stripe's dead letters of one event type, the page after row 1200
/// let filter = InboxFilter::dead()
///     .with_provider("stripe")
///     .with_event_type("invoice.paid")
///     .with_before_id(1200);
/// assert_eq!(filter.state, Some(DeliveryState::Dead));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxFilter {
    /// The rows in this state (see [`DeliveryState`]); `None` for every state.
    pub state: Option<DeliveryState>,
    /// The rows of this scope: the dedupe key's source, or `source/tenant`
    /// ([`DedupeKey::scope`](crate::DedupeKey::scope)). With the provider and the
    /// delivery id it names one row, read through the unique key.
    pub source: Option<String>,
    /// The rows of this provider (its name, as `Provider::NAME`).
    pub provider: Option<String>,
    /// The rows of this event type, exactly.
    pub event_type: Option<String>,
    /// The rows received at or after this instant.
    pub received_since: Option<OffsetDateTime>,
    /// The rows received before this instant.
    pub received_before: Option<OffsetDateTime>,
    /// The rows whose delivery id (the dedupe key's id) is exactly this.
    pub delivery_id: Option<String>,
    /// The rows whose raw body contains these bytes, looked for among the newest
    /// [`BODY_SEARCH_WINDOW`] rows the other conditions select. An empty text
    /// selects every row.
    pub body_contains: Option<String>,
    /// A page cursor: the rows with a smaller id than this (the last id of the
    /// previous page). Only [`list`](crate::InboxAdmin::list) reads it; the verbs
    /// that count or act on everything that matches ignore it.
    pub before_id: Option<i64>,
}

impl InboxFilter {
    /// Every row.
    pub fn all() -> Self {
        Self::default()
    }

    /// The rows in `state`.
    pub fn in_state(state: DeliveryState) -> Self {
        Self {
            state: Some(state),
            ..Self::default()
        }
    }

    /// The backlog: rows neither processed nor dead.
    pub fn pending() -> Self {
        Self::in_state(DeliveryState::Pending)
    }

    /// Pending rows that failed at least once.
    pub fn failed() -> Self {
        Self::in_state(DeliveryState::Failed)
    }

    /// Processed rows.
    pub fn processed() -> Self {
        Self::in_state(DeliveryState::Processed)
    }

    /// Dead letters.
    pub fn dead() -> Self {
        Self::in_state(DeliveryState::Dead)
    }

    /// Keeps the rows of the scope `source` (a source, or `source/tenant`) only.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Keeps the rows of `key` only: its scope, provider and delivery id (at most
    /// one row, read through the unique key).
    #[must_use]
    pub fn with_key(self, key: &crate::DedupeKey) -> Self {
        self.with_source(key.scope())
            .with_provider(key.provider())
            .with_delivery_id(key.delivery_id())
    }

    /// Keeps the rows of `provider` only.
    #[must_use]
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Keeps the rows of `event_type` only.
    #[must_use]
    pub fn with_event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// Keeps the rows received at or after `since` only.
    #[must_use]
    pub fn with_received_since(mut self, since: OffsetDateTime) -> Self {
        self.received_since = Some(since);
        self
    }

    /// Keeps the rows received before `before` only.
    #[must_use]
    pub fn with_received_before(mut self, before: OffsetDateTime) -> Self {
        self.received_before = Some(before);
        self
    }

    /// Keeps the rows whose delivery id is `delivery_id` only.
    #[must_use]
    pub fn with_delivery_id(mut self, delivery_id: impl Into<String>) -> Self {
        self.delivery_id = Some(delivery_id.into());
        self
    }

    /// Keeps the rows whose body contains `text` only (see
    /// [`body_contains`](Self::body_contains)).
    #[must_use]
    pub fn with_body_contains(mut self, text: impl Into<String>) -> Self {
        self.body_contains = Some(text.into());
        self
    }

    /// Starts the page after the row `id` (the previous page's last id).
    #[must_use]
    pub fn with_before_id(mut self, id: i64) -> Self {
        self.before_id = Some(id);
        self
    }

    /// This filter without its page cursor: what the verbs acting on every
    /// matching row select.
    #[must_use]
    pub fn without_cursor(mut self) -> Self {
        self.before_id = None;
        self
    }
}

/// One provider's rows, as an overview counts them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProviderCounts {
    /// The provider's name.
    pub provider: String,
    /// Rows neither processed nor dead (the failed ones included).
    pub pending: u64,
    /// Pending rows that failed at least once.
    pub failed: u64,
    /// Processed rows still kept.
    pub processed: u64,
    /// Dead letters.
    pub dead: u64,
    /// When its oldest pending row was received (the lag's start).
    pub oldest_pending: Option<OffsetDateTime>,
}

impl ProviderCounts {
    /// Every row the inbox still keeps for this provider.
    pub fn received(&self) -> u64 {
        self.pending + self.processed + self.dead
    }
}

/// The rows received and processed in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteCounts {
    /// The minute's start (UTC, seconds zero).
    pub minute: OffsetDateTime,
    /// Rows whose `received_at` falls in the minute.
    pub received: u64,
    /// Rows whose `processed_at` falls in the minute.
    pub processed: u64,
}

/// What an operator sees first: the counts per provider and the last minutes'
/// traffic ([`InboxAdmin::overview`](crate::InboxAdmin::overview)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InboxOverview {
    /// One entry per provider with rows, by name.
    pub providers: Vec<ProviderCounts>,
    /// One entry per minute from the `since` asked for, oldest first, minutes
    /// without traffic included (with zero counts).
    pub minutes: Vec<MinuteCounts>,
}

/// Fills the minutes without traffic between `since` (rounded down to its minute)
/// and `now` with zero counts, for a store that grouped only the minutes it saw.
pub fn fill_minutes(
    since: OffsetDateTime,
    now: OffsetDateTime,
    seen: &[MinuteCounts],
) -> Vec<MinuteCounts> {
    let start = minute_of(since);
    let end = minute_of(now);
    let mut minutes = Vec::new();
    let mut at = start;
    while at <= end {
        let found = seen.iter().find(|m| minute_of(m.minute) == at);
        minutes.push(MinuteCounts {
            minute: at,
            received: found.map_or(0, |m| m.received),
            processed: found.map_or(0, |m| m.processed),
        });
        at += time::Duration::MINUTE;
    }
    minutes
}

/// `at` rounded down to its minute, in UTC.
pub fn minute_of(at: OffsetDateTime) -> OffsetDateTime {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.replace_second(0)
        .and_then(|t| t.replace_nanosecond(0))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-03 10:00:00 UTC plus `secs`.
    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_796_292_000 + secs).unwrap()
    }

    #[test]
    fn a_state_reads_back_its_name_and_nothing_else() {
        for state in DeliveryState::ALL {
            assert_eq!(DeliveryState::parse(state.as_str()), Some(state));
        }
        assert_eq!(DeliveryState::parse("Dead"), None);
        assert_eq!(DeliveryState::parse(""), None);
    }

    #[test]
    fn minutes_without_traffic_are_filled_with_zeros() {
        let seen = [MinuteCounts {
            minute: at(120),
            received: 5,
            processed: 3,
        }];
        let minutes = fill_minutes(at(30), at(190), &seen);
        let counts: Vec<_> = minutes.iter().map(|m| (m.received, m.processed)).collect();
        assert_eq!(counts, [(0, 0), (0, 0), (5, 3), (0, 0)]);
        assert_eq!(minutes[0].minute, at(0));
    }

    #[test]
    fn without_cursor_keeps_every_other_condition() {
        let filter = InboxFilter::dead()
            .with_provider("stripe")
            .with_before_id(9);
        let all = filter.clone().without_cursor();
        assert_eq!(all.before_id, None);
        assert_eq!(all.provider, filter.provider);
        assert_eq!(all.state, Some(DeliveryState::Dead));
    }
}
