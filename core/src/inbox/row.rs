//! The inbox's data, as stores return it and operators read it: what a receive did,
//! a stored row, what a worker call did, the operator's counts.

use bytes::Bytes;
use time::OffsetDateTime;

use super::filter::DeliveryState;
use crate::{DedupeKey, Delivery, KeptHeaders};

/// What [`Inbox::receive`](crate::Inbox::receive) did. Both mean the delivery is durably stored: answer 2xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Inserted now.
    Stored,
    /// Inserted before (a retry or a concurrent copy); nothing changed.
    Duplicate,
}

/// A delivery as the inbox keeps it: the raw bytes and the headers to verify them
/// again, plus the worker's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    /// The inbox row's id.
    pub id: i64,
    /// The dedupe key (the row's unique key).
    pub key: DedupeKey,
    /// The provider's event type, where verification read one.
    pub event_type: Option<String>,
    /// The id shared by deliveries of one change, where the provider has one.
    pub correlation_id: Option<String>,
    /// The timestamp the provider signed, for providers that sign one.
    pub signed_at: Option<OffsetDateTime>,
    /// The raw body exactly as it was signed.
    pub body: Bytes,
    /// The headers it was verified with.
    pub headers: KeptHeaders,
    /// When the inbox stored it.
    pub received_at: OffsetDateTime,
    /// How many times a handler failed on it.
    pub attempts: u32,
    /// The last handler error, as text.
    pub last_error: Option<String>,
    /// When a worker may take it next.
    pub next_attempt_at: OffsetDateTime,
    /// When a handler succeeded on it.
    pub processed_at: Option<OffsetDateTime>,
    /// When it reached the attempt limit and became a dead letter.
    pub dead_at: Option<OffsetDateTime>,
}

impl StoredDelivery {
    /// Returns the view a handler receives: the same [`Delivery`] an inline handler
    /// gets, with [`Delivery::attempt`] counting this row's tries.
    pub fn delivery(&self) -> Delivery {
        Delivery::of_row(self)
    }

    /// Where the row is in its life: processed, dead, failed (pending after a
    /// failed try) or pending.
    pub fn state(&self) -> DeliveryState {
        if self.processed_at.is_some() {
            DeliveryState::Processed
        } else if self.dead_at.is_some() {
            DeliveryState::Dead
        } else if self.attempts > 0 {
            DeliveryState::Failed
        } else {
            DeliveryState::Pending
        }
    }

    /// Deserializes the body into your own type.
    ///
    /// # Errors
    /// The body does not match `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// What one [`Inbox::work_one`](crate::Inbox::work_one) call did (a batch's rows are
/// [`RowOutcome`](crate::spi::RowOutcome)s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worked {
    /// No row was due.
    Idle,
    /// The handler succeeded; its writes and `processed_at` committed together.
    Processed {
        /// The inbox row's id.
        id: i64,
    },
    /// The handler failed; its writes rolled back and the failure was recorded.
    Failed {
        /// The inbox row's id.
        id: i64,
        /// Failures so far, this one included.
        attempts: u32,
        /// `true` when this failure reached the attempt limit: the row is now a dead
        /// letter and will not be retried until replayed.
        dead: bool,
    },
}

/// Counts an operator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InboxStats {
    /// Rows not yet processed and not dead (the backlog).
    pub pending: u64,
    /// Rows processed and kept until the retention purges them.
    pub processed: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest pending row was received.
    pub oldest_pending: Option<OffsetDateTime>,
}
