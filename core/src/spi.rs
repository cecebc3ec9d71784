//! What only a store or an edge author needs: the erased forms of the user's
//! closures, the rows a worker and a relay lease and settle, the group-commit
//! plumbing and the header codec's pieces.
//!
//! An application never names these. It calls the provided, generic methods of
//! [`IdempotencyStore`](crate::IdempotencyStore), [`Inbox`](crate::Inbox) and
//! [`OutboxStore`](crate::OutboxStore), which build the erased values here and hand
//! them to the store's required methods. A store author implements those required
//! methods with these types, and runs core's conformance suite
//! (`hookbox_core::testing`, feature `testing`) to check the result.

pub use crate::batch::{RowFailure, RowOutcome, RowResult};
pub use crate::commit::{CommitCounts, GroupCommit, InFlight, ReceivesInFlight};
#[cfg(feature = "worker")]
pub use crate::guard::{Abandoned, GuardedRun, run_guarded};
pub use crate::headers::{HeadersJsonError, LegacyText};
pub use crate::inbox::{ErasedHandler, fill_minutes, minute_of};
pub use crate::outbox::{Lease, Leased, Settlement, Staged, StagedMessage};
pub use crate::retention::Cutoffs;
pub use crate::store::ErasedSideEffect;
