//! The demo's error type, in a module of its own so that every part of the demo
//! (the receiver and workers in `demo.rs`, the tables in `ledger`, the relays in
//! `receipts`) can return it without importing another part.

/// Any failure that stops the demo before it can report: a store that cannot be
/// opened, a port that cannot be bound, a statement of the demo's tables.
pub(crate) type Failure = Box<dyn std::error::Error + Send + Sync>;
