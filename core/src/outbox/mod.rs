//! The outbox: side effects that leave the database, staged in the claim's
//! transaction and relayed afterwards.
//!
//! An email or a call to another company's API cannot join a database transaction.
//! Calling it from a handler sends twice when the transaction rolls back after the
//! call, or never when the process dies between the commit and the call. The outbox
//! turns such an effect into a row: [`Outbox::stage`] inserts a [`Message`] on the
//! handler's connection, so it commits with the claim and the handler's writes or
//! not at all, and a relay (`hookbox-outbox`) sends committed messages afterwards,
//! outside any transaction, until the sink accepts them.
//!
//! Each message has a [`MessageId`] derived from the delivery's dedupe key, the
//! handler's name and the message's position in that handler run. A handler retried
//! after a rollback, or a delivery an operator replays, stages the same ids again;
//! the UNIQUE constraint on the id keeps the first row, so nothing is sent twice
//! because it was staged twice. The relay passes the id to the sink, which hands it
//! to the downstream as its idempotency key: delivery to the sink is at least once,
//! and exactly once where the downstream honours the key.

mod admin;
mod filter;
mod message;
mod row;
mod store;

pub use admin::OutboxAdmin;
pub use filter::{MessageState, OutboxFilter, SinkCounts};
pub use message::{Message, MessageId};
pub use row::{Lease, Leased, OutboxMessage, OutboxStats, Settlement, Staged, StagedMessage};
pub use store::{Outbox, OutboxStore};
