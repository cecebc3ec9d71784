//! What an operator selects and looks at in an outbox: a message's state, the
//! filter the admin verbs take, and the counts per sink.

use time::OffsetDateTime;

use crate::DedupeKey;

/// Where an outbox message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageState {
    /// Neither sent nor dead: waiting for a relay.
    Pending,
    /// A sink accepted it.
    Sent,
    /// It reached the attempt limit, or its sink refused it for good; it waits for
    /// an operator's replay.
    Dead,
}

impl MessageState {
    /// Every state, in the order a page lists them.
    pub const ALL: [Self; 3] = [Self::Pending, Self::Sent, Self::Dead];

    /// The state's name: `pending`, `sent` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sent => "sent",
            Self::Dead => "dead",
        }
    }

    /// Reads a name [`as_str`](Self::as_str) writes; `None` for any other text.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }
}

/// Which outbox messages an admin verb acts on: every condition set must hold (an
/// unset one selects everything), and
/// [`OutboxAdmin::list`](crate::OutboxAdmin::list) returns them newest first (by
/// staging sequence, descending).
///
/// ```
/// use hookbox_core::{MessageState, OutboxFilter};
///
/// let filter = OutboxFilter::dead().with_sink("ledger-http");
/// assert_eq!(filter.state, Some(MessageState::Dead));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxFilter {
    /// The messages in this state; `None` for every state.
    pub state: Option<MessageState>,
    /// The messages for this sink.
    pub sink: Option<String>,
    /// The messages staged while handling this delivery.
    pub key: Option<DedupeKey>,
    /// A page cursor: the messages with a smaller staging sequence than this (the
    /// last `seq` of the previous page). Only [`list`](crate::OutboxAdmin::list)
    /// reads it; the verbs that count or act on everything that matches ignore it.
    pub before_seq: Option<i64>,
}

impl OutboxFilter {
    /// Every message.
    pub fn all() -> Self {
        Self::default()
    }

    /// The messages in `state`.
    pub fn in_state(state: MessageState) -> Self {
        Self {
            state: Some(state),
            ..Self::default()
        }
    }

    /// The backlog: messages neither sent nor dead.
    pub fn pending() -> Self {
        Self::in_state(MessageState::Pending)
    }

    /// Sent messages.
    pub fn sent() -> Self {
        Self::in_state(MessageState::Sent)
    }

    /// Dead messages.
    pub fn dead() -> Self {
        Self::in_state(MessageState::Dead)
    }

    /// Keeps the messages for `sink` only.
    #[must_use]
    pub fn with_sink(mut self, sink: impl Into<String>) -> Self {
        self.sink = Some(sink.into());
        self
    }

    /// Keeps the messages staged while handling the delivery `key` only.
    #[must_use]
    pub fn with_key(mut self, key: DedupeKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Starts the page after the message `seq` (the previous page's last `seq`).
    #[must_use]
    pub fn with_before_seq(mut self, seq: i64) -> Self {
        self.before_seq = Some(seq);
        self
    }

    /// This filter without its page cursor.
    #[must_use]
    pub fn without_cursor(mut self) -> Self {
        self.before_seq = None;
        self
    }
}

/// One sink's messages ([`OutboxAdmin::sinks`](crate::OutboxAdmin::sinks)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SinkCounts {
    /// The sink's name.
    pub sink: String,
    /// Messages neither sent nor dead (the backlog).
    pub pending: u64,
    /// Sent messages still kept.
    pub sent: u64,
    /// Dead messages.
    pub dead: u64,
    /// When its oldest pending message was staged.
    pub oldest_pending: Option<OffsetDateTime>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reads_back_its_name_and_nothing_else() {
        for state in MessageState::ALL {
            assert_eq!(MessageState::parse(state.as_str()), Some(state));
        }
        assert_eq!(MessageState::parse("failed"), None);
    }
}
