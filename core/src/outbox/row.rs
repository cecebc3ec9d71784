//! The outbox's rows as stores keep them and relays and operators read them: a
//! staged message, a stored one, a lease and its settlement, the operator's filter
//! and counts.

use bytes::Bytes;
use time::OffsetDateTime;

use super::filter::MessageState;
use super::message::{Message, MessageId};
use crate::{DedupeKey, KeptHeaders};

/// A message with its id and origin, as a store inserts it
/// ([`OutboxStore::stage`](crate::OutboxStore::stage)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedMessage {
    /// The derived id (the row's unique key).
    pub id: MessageId,
    /// The delivery the handler ran for.
    pub key: DedupeKey,
    /// The handler's name.
    pub handler: String,
    /// The message's position in that handler run, from 0.
    pub sequence: u32,
    /// The message.
    pub message: Message,
}

/// What [`OutboxStore::stage`](crate::OutboxStore::stage) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staged {
    /// Inserted now; it commits with the caller's transaction.
    New,
    /// A message with this id was staged before (a replayed delivery); the first one
    /// is kept as it was, sent or not.
    AlreadyStaged,
}

/// A message row as a store keeps it: the message and the relay's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    /// The row's position in the outbox: staging order, the order the relay keeps
    /// per ordering key.
    pub seq: i64,
    /// The message's id, the downstream's idempotency key.
    pub id: MessageId,
    /// The delivery whose handler staged it.
    pub key: DedupeKey,
    /// The handler's name.
    pub handler: String,
    /// Its position in that handler run.
    pub sequence: u32,
    /// The sink's name.
    pub sink: String,
    /// The ordering key, if any.
    pub ordering_key: Option<String>,
    /// The payload.
    pub payload: Bytes,
    /// The headers for the sink.
    pub headers: KeptHeaders,
    /// When it was staged.
    pub staged_at: OffsetDateTime,
    /// Sends started so far, counted when a relay leases it (so a message whose send
    /// kills the relay still reaches the limit).
    pub attempts: u32,
    /// The last failure, as text.
    pub last_error: Option<String>,
    /// When a relay may take it next.
    pub next_attempt_at: OffsetDateTime,
    /// When the sink accepted it.
    pub sent_at: Option<OffsetDateTime>,
    /// When it became a dead letter.
    pub dead_at: Option<OffsetDateTime>,
}

impl OutboxMessage {
    /// Returns where the message is: sent, dead or pending.
    pub fn state(&self) -> MessageState {
        if self.sent_at.is_some() {
            MessageState::Sent
        } else if self.dead_at.is_some() {
            MessageState::Dead
        } else {
            MessageState::Pending
        }
    }
}

/// A relay's hold on one message ([`OutboxStore::lease`](crate::OutboxStore::lease)): only the holder of the
/// token may settle it, so a relay whose lease expired cannot overwrite the outcome
/// of the relay that took the message next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The message's row.
    pub seq: i64,
    /// The token the lease was taken with: random and never 0, so no settle with
    /// a made-up token matches a lease, and an unleased message matches none.
    pub token: i64,
}

/// A message a relay holds, with the lease to settle it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// The message, with `attempts` counting this send.
    pub message: OutboxMessage,
    /// The lease.
    pub lease: Lease,
}

/// How a relay settles a leased message ([`OutboxStore::settle`](crate::OutboxStore::settle)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement<'a> {
    /// The sink accepted it.
    Sent,
    /// The send failed; try again at `at`.
    Retry {
        /// What failed, for `last_error`.
        error: &'a str,
        /// When the message is due again.
        at: OffsetDateTime,
    },
    /// The send failed for good, or reached the attempt limit.
    Dead {
        /// What failed, for `last_error`.
        error: &'a str,
    },
    /// Nothing was sent, for a reason that is not the message's (the relay has no
    /// sink of its name): due again at `at`, and this lease does not count as an
    /// attempt, so a message waiting for its sink never becomes a dead letter.
    Release {
        /// Why it was not sent, for `last_error`.
        error: &'a str,
        /// When the message is due again.
        at: OffsetDateTime,
    },
}

/// Counts an operator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxStats {
    /// Messages not yet sent and not dead (the backlog).
    pub pending: u64,
    /// Sent messages kept until the retention purges them.
    pub sent: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest pending message was staged.
    pub oldest_pending: Option<OffsetDateTime>,
}
